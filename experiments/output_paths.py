"""Where the command line writes, checked before the work starts, and written with one error for every failure.

A run, an exploration or a zoo can take minutes; its result must not be lost
because ``--out`` names a directory, lies under a file, or in a place this
user cannot write. ``output_file`` and ``output_dir`` check such a path
before anything runs (creating nothing); ``write_text`` writes it afterwards,
creating its parent folders, and turns any failure into an
``OutputPathError`` naming the path.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path


class OutputPathError(ValueError):
    """A path the command line was told to write cannot be written; the message names it and says why."""


def _nearest_existing(path: Path) -> Path:
    """The path itself or its nearest ancestor that exists (as a link, a file or a folder)."""
    probe = path
    while not os.path.lexists(probe) and probe.parent != probe:
        probe = probe.parent
    return probe


def writable(folder: Path) -> bool:
    """Whether this process can create files in ``folder``: by its permissions, and where the filesystem can
    say so without leaving a name behind, by creating an unnamed file (``O_TMPFILE``), which also catches a
    read-only filesystem and a folder even root cannot write."""
    if not os.access(folder, os.W_OK | os.X_OK):
        return False
    try:
        os.close(os.open(folder, os.O_TMPFILE | os.O_WRONLY, 0o600))
    except OSError as exc:   # a filesystem without unnamed files cannot say: trust the permissions
        return exc.errno in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL)
    return True


def _creatable(path: Path, what: str) -> None:
    """``OutputPathError`` unless the folders up to ``path`` can be made: its nearest existing ancestor is a
    folder this user may write into."""
    base = _nearest_existing(path.parent if path.parent != path else path)
    if not base.is_dir():
        raise OutputPathError(f"{path}: cannot write {what} there: {base} is not a directory")
    if not writable(base):
        raise OutputPathError(f"{path}: cannot write {what} there: {base} is not writable")


def output_file(path: str | os.PathLike[str], what: str) -> Path:
    """``path`` as the file to write ``what`` to, checked: not an existing folder or special file, under a
    folder that exists or can be made, writable. Nothing is created."""
    if str(path) == "":
        raise OutputPathError(f"an empty path was given for {what}")
    out = Path(path)
    if out.is_dir():
        raise OutputPathError(f"{out}: is a directory; expected a file path for {what}")
    if str(out) == os.devnull:
        return out   # the one special file written to on purpose: discard it
    if os.path.lexists(out):
        if not out.is_file():
            raise OutputPathError(f"{out}: exists and is not a regular file; expected a file path for {what}")
        if not os.access(out, os.W_OK) or not writable(out.parent):
            raise OutputPathError(f"{out}: is not writable ({what})")
        return out
    _creatable(out, what)
    return out


def output_dir(path: str | os.PathLike[str], what: str) -> Path:
    """``path`` as the folder to write ``what`` into, checked: an existing writable folder, or one that can be
    made. Nothing is created."""
    if str(path) == "":
        raise OutputPathError(f"an empty path was given for {what}")
    out = Path(path)
    if os.path.lexists(out):
        if not out.is_dir():
            raise OutputPathError(f"{out}: is not a directory; expected a directory for {what}")
        if not writable(out):
            raise OutputPathError(f"{out}: is not writable ({what})")
        return out
    _creatable(out, what)
    return out


def make_dir(path: str | os.PathLike[str], what: str) -> Path:
    """Create the folder ``path`` (and its parents); ``OutputPathError`` naming it when that fails."""
    out = Path(path)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputPathError(f"{out}: cannot create the directory for {what} ({exc.strerror or exc})") from None
    return out


def write_text(path: str | os.PathLike[str], text: str, what: str) -> Path:
    """Write ``text`` to ``path``, creating its folders; ``OutputPathError`` naming it when that fails."""
    out = Path(path)
    if str(out) != os.devnull:
        make_dir(out.parent, what)
    try:
        out.write_text(text)
    except OSError as exc:
        raise OutputPathError(f"{out}: cannot write {what} ({exc.strerror or exc})") from None
    return out
