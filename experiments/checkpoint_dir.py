"""Checkpoint directories on disk (spec section 3): claiming one for a run, writing a run's files, opening one.

The tool deletes only what it wrote. ``claimed`` looks at a directory before
anything runs, without a full walk and without writing to it:

- the filesystem root, the home directory, the working directory and their
  ancestors are refused up front, by name;
- a directory holding anything that is not a file or folder of a checkpoint
  (``reference.protocol.layout.classify``) is refused, naming the first such entry: a
  user's own file, a link, a FIFO; the survey stops there, so a large foreign
  tree is never walked;
- a checkpoint is recognised by its marker, a ``metadata`` file naming a query
  and a scenario digest, and its layout; one is refused unless the user asks to
  overwrite it, and layout files without that marker are refused as not the
  tool's;
- a link given as the directory is never followed to delete what it points to;
- a checkpoint to overwrite must be replaceable whole: its parent writable, it
  no mount point, each of its folders writable (``checkpoint_swap.swap_problem``).

Only then is the directory made (if it is new) and locked: a lock file (hidden,
so no checkpoint reader sees it) refuses a second run while the first is alive.
The old checkpoint is replaced only when the run's own checkpoint is written
(``Claim.write``), after the scenario validated and the backend ran it, and
then whole: the new one is built beside it and swapped in by one rename
(``checkpoint_swap.py``). A run that was refused, failed or interrupted, in any
phase (``PHASES``), leaves the old checkpoint whole, or the new one.
``open_checkpoint`` opens a directory for the oracles with the snapshot readers
its metadata names.
"""

from __future__ import annotations

import fcntl
import os
import sys
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from experiments.backends import snapshot_readers_for
from experiments.checkpoint_swap import SIBLING_MARK, deferred_signals, exchange, remove_tree, sibling, swap_problem, \
    write_files
from experiments.output_paths import OutputPathError, path_length, writable
from reference.protocol import layout
from reference.protocol.logs import read_metadata
from reference.language.scenario import Scenario
from reference.protocol.storage import CheckpointFormatError, LocalStorage, Storage, entry_kind

LOCK = layout.RUN_LOCK


class CheckpointDirError(ValueError):
    """A checkpoint directory that cannot be used as asked; the message names it and says why."""


def open_checkpoint(path: str | os.PathLike[str]) -> tuple[LocalStorage, str | None]:
    """The checkpoint at ``path`` for the oracles, with the snapshot readers its metadata names, and a note when
    its snapshots cannot be decoded here (it is then judged without them, and the oracles that load state fail).

    ``CheckpointDirError`` when ``path`` is empty, missing or not a directory.
    """
    if str(path) == "":
        raise CheckpointDirError("--checkpoint: an empty path names no directory")
    try:
        path_length(path, "the checkpoint directory")
    except OutputPathError as exc:
        raise CheckpointDirError(str(exc)) from None
    root = Path(path)
    if not os.path.lexists(root):
        raise CheckpointDirError(f"{path}: no such checkpoint directory")
    if not root.is_dir():
        raise CheckpointDirError(f"{path}: not a directory; a checkpoint is a directory (spec section 3)")
    unreadable = _unreadable_folder(root)
    if unreadable is not None:
        raise CheckpointDirError(f"{path}: cannot read the checkpoint: {unreadable}")
    storage = LocalStorage(root)
    try:
        readers = snapshot_readers_for(storage)
    except (ValueError, CheckpointFormatError) as exc:
        return storage, f"{path}: {exc}; judged without its snapshot reader"
    return LocalStorage(root, snapshot_readers=readers), None


def _unreadable_folder(root: Path) -> str | None:
    """The first folder of the checkpoint this user cannot list (a listing would silently skip it), with why;
    never following a link (the checkpoint rules name a link)."""
    pending = [root]
    while pending:
        folder = pending.pop()
        try:
            with os.scandir(folder) as listing:
                pending += [Path(e.path) for e in listing if e.is_dir(follow_symlinks=False)]
        except OSError as exc:
            return f"{folder} ({exc.strerror or exc})"
    return None


# ------------------------------------------------------------------ survey


@dataclass
class Survey:
    """What a directory holds, as far as it had to be looked at: the checkpoint files (by path, folders
    last), the first entry that is none, and the metadata marker (None when there is none or it is not ours)."""

    files: list[str] = field(default_factory=list)
    folders: list[str] = field(default_factory=list)
    foreign: str | None = None
    marker: dict[str, object] | None = None

    @property
    def data(self) -> list[str]:
        """The files that hold a checkpoint's data (not a lock or a half-written file)."""
        kinds = {f: getattr(layout.classify(f), "kind", None) for f in self.files}
        return [f for f in self.files if kinds[f] not in ("run_lock", "temp")]


def survey(root: Path) -> Survey:
    """Look at ``root`` entry by entry (never following a link, never opening anything but ``metadata``),
    stopping at the first entry that is not a file or folder of a checkpoint."""
    out = Survey()
    pending = [""]
    while pending and out.foreign is None:
        folder = pending.pop()
        with os.scandir(root / folder if folder else root) as listing:
            for item in sorted(listing, key=lambda e: e.name):
                rel = f"{folder}/{item.name}" if folder else item.name
                kind = entry_kind(item.stat(follow_symlinks=False).st_mode)
                if kind == "directory" and layout.classify_folder(rel) is not None:
                    out.folders.append(rel)
                    pending.append(rel)
                elif kind == "file" and layout.classify(rel) is not None:
                    out.files.append(rel)
                else:
                    what = "a folder" if kind == "directory" else "a file" if kind == "file" else f"a {kind}"
                    out.foreign = f"{rel} ({what} the checkpoint layout has no place for)"
                    break
    if out.foreign is None and layout.METADATA in out.files:
        try:
            meta = read_metadata(LocalStorage(root))
        except CheckpointFormatError:
            meta = None
        if isinstance(meta, dict) and isinstance(meta.get("id"), str) and meta.get("scenario_digest"):
            out.marker = meta
    out.folders.reverse()   # deepest last-found first, so removing them in this order empties parents last
    return out


def _dangerous(root: Path) -> str | None:
    """Why ``root`` must never be a checkpoint directory (the filesystem root, the home directory, the working
    directory, or an ancestor of one of them), or None."""
    target = Path(os.path.abspath(root))
    home = Path(os.path.expanduser("~")).resolve()
    cwd = Path.cwd().resolve()
    try:
        resolved = target.resolve()
    except OSError:
        resolved = target
    if resolved == Path(resolved.anchor):
        return "is the root of the filesystem; a checkpoint needs a directory of its own"
    for place, name in ((home, "the home directory"), (cwd, "the working directory")):
        if resolved == place or resolved in place.parents:
            what = name if resolved == place else f"an ancestor of {name} ({place})"
            return f"is {what}; a checkpoint needs a directory of its own"
    return None


# ------------------------------------------------------------------- claim

# Where a run claiming a directory can be interrupted; a hook given to ``claimed`` is called with each in turn.
PHASES = ("planning", "compute", "write", "swap", "cleanup")
Hook = Callable[[str], None]


def _no_hook(_phase: str) -> None:
    return None


@dataclass
class Claim:
    """A directory claimed for a run's checkpoint: what it held when claimed, and the lock (a descriptor of
    ``root``'s lock file)."""

    root: Path
    old: Survey
    lock_fd: int
    hook: Hook = _no_hook

    def write(self, storage: Storage | None) -> Path:
        """Replace what ``root`` holds by ``storage``'s checkpoint (None: the backend keeps none, and the
        directory is left without the old one), so that ``root`` holds the old checkpoint or the new one whole
        whatever interrupts this (``checkpoint_swap``): the new one is written in a private folder beside
        ``root``, locked, swapped in by one rename, and the old one, swapped out, is removed. Where no folder can
        be made beside it (an empty ``root`` in a folder this user may not write, or a mount point), the files
        are written straight into the empty ``root``, and removed again if the write fails."""
        if not self.old.data and swap_problem(self.root, []) is not None:
            return self._write_in_place(storage)
        new = sibling(self.root)
        new_lock: int | None = None
        try:
            if storage is not None:
                write_files(storage, new, after_first=lambda: self.hook("write"))
            new_lock = _lock(new)
            self.hook("swap")
            with deferred_signals():
                exchange(new, self.root)
                os.close(self.lock_fd)
                self.lock_fd, new_lock = new_lock, None
                self.old = Survey()
                self.hook("cleanup")
                left = _remove_old(new)
        except BaseException as exc:
            if new_lock is not None:
                os.close(new_lock)
            if os.path.lexists(new) and _is_ours(new):
                remove_tree(new)
            if isinstance(exc, OSError):
                raise CheckpointDirError(f"{self.root}: the new checkpoint could not be written ({exc.strerror or exc}"
                                         f"{': ' + exc.filename if isinstance(exc.filename, str) else ''}); the "
                                         "directory holds what it held before") from None
            raise
        if left is not None:
            print(f"note: the old checkpoint was swapped out to {new} but not wholly removed: {left}",
                  file=sys.stderr)
        return self.root

    def _write_in_place(self, storage: Storage | None) -> Path:
        if storage is None:
            return self.root
        written: list[str] = []
        try:
            written = write_files(storage, self.root, after_first=lambda: self.hook("write"))
        except BaseException as exc:
            for entry in os.scandir(self.root):   # it held only the lock: remove all else, following no link
                if entry.name != LOCK:
                    if entry.is_dir(follow_symlinks=False):
                        remove_tree(Path(entry.path))
                    else:
                        os.unlink(entry.path)
            if isinstance(exc, OSError):
                raise CheckpointDirError(f"{self.root}: the checkpoint could not be written ({exc.strerror or exc}); "
                                         "what was written of it is removed") from None
            raise
        assert written, "a checkpoint holds at least its metadata"
        return self.root


def _is_ours(folder: Path) -> bool:
    """Whether ``folder`` is a folder ``sibling`` made (never a link, never anything given by the user)."""
    return SIBLING_MARK in folder.name and not folder.is_symlink() and folder.is_dir()


def _remove_old(folder: Path) -> str | None:
    """Remove the old checkpoint, swapped out to ``folder``, when it holds only a checkpoint's files (what
    could not be removed, or None); anything else found there now is left, and named."""
    found = survey(folder)
    if found.foreign is not None:
        return f"it now holds {found.foreign}, so it is left as it is"
    return remove_tree(folder)


def check_target(path: str | os.PathLike[str], scenario: Scenario, *, overwrite: bool = False) -> Survey:
    """``CheckpointDirError`` unless ``path`` may take a checkpoint of ``scenario``; what it holds now.

    Refused: an empty or over-long path; a dangerous place (``_dangerous``); a path under a file; a file or
    special file; a link, when asked to overwrite; a directory holding anything a checkpoint does not hold, or
    layout files without the marker; a checkpoint, unless ``overwrite``, and then one the swap cannot replace
    (``checkpoint_swap.swap_problem``). Nothing is created or written.
    """
    if str(path) == "":
        raise CheckpointDirError("--checkpoint: an empty path names no directory; leave the option out to keep "
                                 "no checkpoint")
    try:
        path_length(path, "the checkpoint directory")
    except OutputPathError as exc:
        raise CheckpointDirError(str(exc)) from None
    root = Path(path)
    danger = _dangerous(root)
    if danger is not None:
        raise CheckpointDirError(f"{path}: {danger}")
    if not os.path.lexists(root):
        base = root.parent
        while not os.path.lexists(base) and base.parent != base:
            base = base.parent
        if not base.is_dir():
            raise CheckpointDirError(f"{path}: cannot be made: {base} is not a directory")
        if not writable(base):
            raise CheckpointDirError(f"{path}: cannot be made: {base} is not writable")
        return Survey()
    if root.is_symlink() and overwrite:
        raise CheckpointDirError(f"{path}: is a symbolic link; --overwrite never follows a link to delete "
                                 "what it points to; give the directory itself")
    if not root.is_dir():
        raise CheckpointDirError(f"{path}: not a directory; a checkpoint is a directory (spec section 3)")
    if not os.access(root, os.R_OK | os.X_OK) or not writable(root):
        raise CheckpointDirError(f"{path}: is not writable")
    try:
        found = survey(root)
    except OSError as exc:
        raise CheckpointDirError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    if found.foreign is not None:
        raise CheckpointDirError(f"{path}: holds {found.foreign}; this tool writes a checkpoint only "
                                 "into an empty directory or one holding a checkpoint, and --overwrite removes only "
                                 "a checkpoint's own files")
    if found.data and found.marker is None:
        raise CheckpointDirError(f"{path}: holds {len(found.data)} file(s) named like a checkpoint's (first: "
                                 f"{found.data[0]}) but no metadata naming a query: not a checkpoint this "
                                 "tool wrote; remove them yourself, or choose an empty directory")
    if found.data and not overwrite:
        raise CheckpointDirError(f"{path}: {_occupied_by(found, scenario)}; give --overwrite to replace it, "
                                 "or choose an empty directory")
    if found.data:
        why = swap_problem(root, found.folders)
        if why is not None:
            raise CheckpointDirError(f"{path}: cannot be replaced whole: {why}; nothing was changed")
    return found


@contextmanager
def claimed(path: str | os.PathLike[str], scenario: Scenario, *, overwrite: bool = False,
            hook: Hook = _no_hook) -> Iterator[Claim]:
    """Claim ``path`` for a checkpoint of ``scenario`` for the duration of the block (``check_target`` first).

    The old checkpoint is replaced by ``Claim.write``, when the run's checkpoint is written; a block that ends
    before leaves it as it was, and a directory this call made and nothing was written to is removed. ``hook``
    is called with each of ``PHASES``: planning once the directory is locked, compute as the block starts,
    write once the first file of the new checkpoint is written, swap just before it is swapped in, cleanup just
    after (``Claim.write``): where a test interrupts the claim.
    """
    root = Path(path)
    check_target(path, scenario, overwrite=overwrite)
    created = not os.path.lexists(root)
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CheckpointDirError(f"{path}: cannot be made ({exc.strerror or exc})") from None
    try:
        lock_fd = _lock(root)
    except BaseException:
        if created:
            _remove_if_empty(root)
        raise
    claim = Claim(root, Survey(), lock_fd, hook)
    try:
        hook("planning")
        claim.old = check_target(path, scenario, overwrite=overwrite)   # again, now that no other run can change it
        hook("compute")
        yield claim
    finally:
        _unlock(root, claim.lock_fd)
        if created:
            _remove_if_empty(root)   # the run wrote nothing: leave no empty directory behind


def _unlock(root: Path, fd: int) -> None:
    """Release the lock ``fd`` holds, removing its file only when it is still ``root``'s lock file (a run that
    claimed the directory since may have made a new one)."""
    try:
        if os.fstat(fd).st_ino == os.stat(root / LOCK, follow_symlinks=False).st_ino:
            (root / LOCK).unlink()
    except OSError:
        pass
    os.close(fd)


def _remove_if_empty(root: Path) -> None:
    try:
        root.rmdir()
    except OSError:
        pass


def _occupied_by(found: Survey, scenario: Scenario) -> str:
    """What a directory's checkpoint is, in words."""
    meta = found.marker or {}
    digest = meta.get("scenario_digest")
    if digest == scenario.query_digest():
        return (f"already holds a checkpoint of scenario {scenario.name!r} (seed {scenario.seed}) from an "
                "earlier run; this run's files would mix with it")
    owner = f"scenario {meta['scenario']!r}, " if meta.get("scenario") else ""
    return (f"holds a checkpoint of another query ({owner}digest {digest!r}); this is scenario "
            f"{scenario.name!r}, digest {scenario.query_digest()!r}")


def _lock(root: Path) -> int:
    """An exclusive ``flock`` on the directory's lock file, naming this process; refused while another process
    holds it. The kernel drops the lock when its holder dies, so a lock file left behind is never stale."""
    lock = root / LOCK
    while True:
        try:
            fd = os.open(lock, os.O_CREAT | os.O_RDWR | os.O_NOFOLLOW, 0o644)
        except OSError as exc:
            raise CheckpointDirError(f"{root}: cannot take the run's lock {lock} ({exc.strerror or exc})") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 32).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise CheckpointDirError(f"{root}: another lightspeed run (pid {holder[:12]}) is writing a checkpoint "
                                     f"here ({lock}); wait for it, or choose another directory") from None
        try:
            same = os.fstat(fd).st_ino == os.stat(lock).st_ino
        except FileNotFoundError:
            same = False
        if same:   # not a file its last holder unlinked while we waited to lock it
            try:
                os.ftruncate(fd, 0)
                os.write(fd, f"{os.getpid()}\n".encode())
            except OSError as exc:   # a full disk: the lock is held, but its file cannot name its holder
                os.close(fd)
                lock.unlink(missing_ok=True)
                raise CheckpointDirError(f"{root}: cannot write the run's lock {lock} ({exc.strerror or exc})") \
                    from None
            return fd
        os.close(fd)


def write_checkpoint(storage: Storage, path: str | os.PathLike[str]) -> Path:
    """Copy every file of a run's checkpoint into the new or empty folder ``path``, its ``metadata`` marker first
    (so a copy cut short is still recognised as the tool's own), never through a link
    (``checkpoint_swap.write_files``)."""
    root = Path(path)
    root.mkdir(parents=True, exist_ok=True)
    write_files(storage, root)
    return root
