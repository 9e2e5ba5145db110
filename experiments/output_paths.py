"""Where the command line writes, checked before the work starts, and written whole or not at all.

A run, an exploration or a zoo can take minutes; its result must not be lost
because ``--out`` names a directory, lies under a file, or in a place this
user cannot write, and an earlier file must never be lost to a write that
fails half-way. ``output_file`` and ``output_dir`` check such a path before
anything runs (creating nothing):

- a path over ``MAX_PATH_BYTES`` or with a component over ``MAX_NAME_BYTES``
  is refused (``path_length``), as are a folder, a special file, a place that
  cannot be written;
- a link, or a file with other hard links, is refused: the file would be
  written through it, onto a file the user keeps elsewhere;
- a file the command also reads (``inputs``: the scenario, a results file)
  or a path inside a checkpoint directory (``inside``, or any folder above
  it whose ``metadata`` marks a checkpoint) is refused;
- an existing file is refused unless ``replace`` (``--overwrite`` where the
  command has it).

``write_text`` writes afterwards, whole or not at all: to a new temporary file
in the same folder, flushed to disk, then renamed over the path in one step
(``os.replace``), never through a link; any failure (a full disk, a read-only
filesystem) is an ``OutputPathError`` naming the path, and the earlier file
is left as it was.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from pathlib import Path
from typing import Iterable

MAX_PATH_BYTES = 4096    # a path the command line is given (Linux's PATH_MAX)
MAX_NAME_BYTES = 255     # one component of it (Linux's NAME_MAX)
_UMASK = os.umask(0o022)   # read once, at import (the only way to read it), and put back at once
os.umask(_UMASK)


class OutputPathError(ValueError):
    """A path the command line was told to write cannot be written; the message names it and says why."""


def path_length(path: str | os.PathLike[str], what: str) -> None:
    """``OutputPathError`` when ``path`` is longer than the system takes (``ENAMETOOLONG``), said up front."""
    raw = os.fsencode(path)
    if len(raw) > MAX_PATH_BYTES:
        raise OutputPathError(f"{os.fsdecode(raw[:60])}... ({len(raw):,} bytes): the path of {what} is longer "
                              f"than the {MAX_PATH_BYTES:,} bytes a path may have")
    longest = max(raw.split(b"/"), key=len)
    if len(longest) > MAX_NAME_BYTES:
        raise OutputPathError(f"{os.fsdecode(raw[:60])}...: a component of the path of {what} is {len(longest):,} "
                              f"bytes, longer than the {MAX_NAME_BYTES} a file name may have")


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


def _same_file(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def _is_under(path: Path, folder: str | os.PathLike[str]) -> bool:
    """Whether ``path`` resolves to ``folder`` or to a place inside it."""
    inner, outer = Path(os.path.realpath(path)), Path(os.path.realpath(folder))
    return inner == outer or outer in inner.parents


def _checkpoints_above(path: Path) -> list[Path]:
    """The folders above ``path`` that hold a checkpoint (a ``metadata`` marker naming a scenario digest)."""
    from reference.protocol.logs import read_metadata
    from reference.protocol.storage import CheckpointFormatError, LocalStorage
    out = []
    for folder in Path(os.path.realpath(path)).parents:
        if os.path.isfile(folder / "metadata"):
            try:
                meta = read_metadata(LocalStorage(folder))
            except (CheckpointFormatError, OSError):
                continue
            if isinstance(meta, dict) and "scenario_digest" in meta:
                out.append(folder)
    return out


def output_file(path: str | os.PathLike[str], what: str, *, inputs: Iterable[str | os.PathLike[str]] = (),
                inside: Iterable[str | os.PathLike[str]] = (), replace: bool = True) -> Path:
    """``path`` as the file to write ``what`` to, checked (see the module docstring): not an existing folder,
    special file, link or hard-linked file; not one of ``inputs`` nor inside a folder of ``inside``; not an
    existing file unless ``replace``; under a folder that exists or can be made; writable. Nothing is created."""
    if str(path) == "":
        raise OutputPathError(f"an empty path was given for {what}")
    path_length(path, what)
    out = Path(path)
    if str(out) == os.devnull:
        return out   # the one special file written to on purpose: discard it
    for given in inputs:
        if os.path.lexists(out) and _same_file(out, given):
            raise OutputPathError(f"{out}: is {given}, which this command reads; writing {what} there would "
                                  "replace it; choose another path")
    for folder in [*inside, *_checkpoints_above(out)]:
        if _is_under(out, folder):
            raise OutputPathError(f"{out}: lies inside the checkpoint directory {folder}; writing {what} there "
                                  "would change the checkpoint; choose a path outside it")
    if os.path.islink(out):
        raise OutputPathError(f"{out}: is a symbolic link; {what} is never written through a link, onto the file "
                              "it points to; give the file's own path")
    if out.is_dir():
        raise OutputPathError(f"{out}: is a directory; expected a file path for {what}")
    if os.path.lexists(out):
        status = os.lstat(out)
        if not stat.S_ISREG(status.st_mode):
            raise OutputPathError(f"{out}: exists and is not a regular file; expected a file path for {what}")
        if status.st_nlink > 1:
            raise OutputPathError(f"{out}: has {status.st_nlink - 1} other hard link(s); replacing it would leave "
                                  "them holding the old content while the names disagree; give a new path")
        if not replace:
            raise OutputPathError(f"{out}: already holds {what} of an earlier run; give --overwrite to replace it, "
                                  "or choose another path")
        if not writable(out.parent):
            raise OutputPathError(f"{out}: is not writable ({what})")
        return out
    _creatable(out, what)
    return out


def output_dir(path: str | os.PathLike[str], what: str) -> Path:
    """``path`` as the folder to write ``what`` into, checked: an existing writable folder, or one that can be
    made. Nothing is created."""
    if str(path) == "":
        raise OutputPathError(f"an empty path was given for {what}")
    path_length(path, what)
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
    """Write ``text`` to ``path`` whole or not at all (see the module docstring), creating its folders;
    ``OutputPathError`` naming it when that fails, the earlier file left as it was."""
    out = Path(path)
    if str(out) == os.devnull:
        with open(out, "w") as sink:
            sink.write(text)
        return out
    make_dir(out.parent, what)
    if os.path.islink(out):   # made since the path was checked: never write through it
        raise OutputPathError(f"{out}: is a symbolic link; {what} is never written through a link")
    fd, temp = -1, ""
    try:
        fd, temp = tempfile.mkstemp(prefix=f".{out.name[:100]}.", suffix=".tmp", dir=out.parent)
        data = text.encode()
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fchmod(fd, 0o666 & ~_UMASK)   # as a file made by open() would be (mkstemp makes it 0600)
        os.fsync(fd)
        os.close(fd)
        fd = -1
        os.replace(temp, out)
        temp = ""
    except OSError as exc:
        raise OutputPathError(f"{out}: cannot write {what} ({exc.strerror or exc}); the file there, if any, "
                              "is as it was") from None
    finally:
        if fd >= 0:
            os.close(fd)
        if temp:
            Path(temp).unlink(missing_ok=True)
    return out
