"""Checkpoint directories on disk (SPEC section 3): claiming one for a run, writing a run's files, opening one.

``lightspeed run --checkpoint DIR`` claims DIR before the run: a directory
that holds a checkpoint (of another scenario, or an earlier run of this one)
or files that are not a checkpoint is refused, unless the user asks to
overwrite it, which clears it first; files of two runs are never mixed. A
lock file (hidden, so no checkpoint reader sees it) refuses a second run on
the same directory while the first is alive. ``open_checkpoint`` opens a
directory for the oracles with the snapshot readers its metadata names.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from experiments.backends import snapshot_readers_for
from reference import layout
from reference.logs import read_metadata
from reference.scenario import Scenario
from reference.storage import CheckpointFormatError, LocalStorage, Storage

LOCK = ".lightspeed-run.lock"


class CheckpointDirError(ValueError):
    """A checkpoint directory that cannot be used as asked; the message names it and says why."""


def open_checkpoint(path: str | os.PathLike[str]) -> tuple[LocalStorage, str | None]:
    """The checkpoint at ``path`` for the oracles, with the snapshot readers its metadata names, and a note when
    its snapshots cannot be decoded here (it is then judged without them, and the oracles that load state fail).

    ``CheckpointDirError`` when ``path`` is missing or not a directory.
    """
    root = Path(path)
    if not root.exists():
        raise CheckpointDirError(f"{path}: no such checkpoint directory")
    if not root.is_dir():
        raise CheckpointDirError(f"{path}: not a directory; a checkpoint is a directory (SPEC section 3)")
    storage = LocalStorage(root)
    try:
        readers = snapshot_readers_for(storage)
    except (ValueError, CheckpointFormatError) as exc:
        return storage, f"{path}: {exc}; judged without its snapshot reader"
    return LocalStorage(root, snapshot_readers=readers), None


@contextmanager
def claimed(path: str | os.PathLike[str], scenario: Scenario, *, overwrite: bool = False) -> Iterator[Path]:
    """Claim ``path`` for a checkpoint of ``scenario`` for the duration of the block.

    ``CheckpointDirError`` when another live run holds it, or when it holds a checkpoint or stray files and
    ``overwrite`` is not given; with ``overwrite`` its contents are removed first.
    """
    root = Path(path)
    if root.exists() and not root.is_dir():
        raise CheckpointDirError(f"{path}: not a directory; a checkpoint is a directory (SPEC section 3)")
    created = not root.exists()
    root.mkdir(parents=True, exist_ok=True)
    lock_fd = _lock(root)
    try:
        present = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.name != LOCK)
        if present:
            if not overwrite:
                raise CheckpointDirError(f"{path}: {_occupied_by(root, scenario, present)}; give --overwrite "
                                         "to replace it, or choose an empty directory")
            for entry in root.iterdir():
                if entry.name != LOCK:
                    shutil.rmtree(entry) if entry.is_dir() and not entry.is_symlink() else entry.unlink()
        yield root
    finally:
        (root / LOCK).unlink(missing_ok=True)
        os.close(lock_fd)
        if created and not any(root.iterdir()):
            root.rmdir()   # the run wrote nothing: leave no empty directory behind


def _occupied_by(root: Path, scenario: Scenario, present: list[str]) -> str:
    """What already is in a directory, in words."""
    if layout.METADATA in present:
        try:
            meta = read_metadata(LocalStorage(root)) or {}
        except CheckpointFormatError:
            meta = {}
        digest = meta.get("scenario_digest")
        if digest == scenario.query_digest():
            return (f"already holds a checkpoint of scenario {scenario.name!r} (seed {scenario.seed}) from an "
                    "earlier run; this run's files would mix with it")
        if digest is not None:
            owner = f"scenario {meta['scenario']!r}, " if meta.get("scenario") else ""
            return (f"holds a checkpoint of another query ({owner}digest {digest!r}); this is scenario "
                    f"{scenario.name!r}, digest {scenario.query_digest()!r}")
    return f"holds {len(present)} file(s) that are not a checkpoint of this scenario (first: {present[0]})"


def _lock(root: Path) -> int:
    """An exclusive ``flock`` on the directory's lock file, naming this process; refused while another process
    holds it. The kernel drops the lock when its holder dies, so a lock file left behind is never stale."""
    lock = root / LOCK
    while True:
        fd = os.open(lock, os.O_CREAT | os.O_RDWR, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 32).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise CheckpointDirError(f"{root}: another lightspeed run (pid {holder}) is writing a checkpoint here "
                                     f"({lock}); wait for it, or choose another directory") from None
        try:
            same = os.fstat(fd).st_ino == os.stat(lock).st_ino
        except FileNotFoundError:
            same = False
        if same:   # not a file its last holder unlinked while we waited to lock it
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
            return fd
        os.close(fd)


def write_checkpoint(storage: Storage, path: str | os.PathLike[str], *, replace: bool = False) -> Path:
    """Copy every file of a run's checkpoint into ``path``; with ``replace`` whatever was there goes first
    (an output directory the command owns, as ``diff --out`` and ``demo`` have)."""
    root = Path(path)
    if isinstance(storage, LocalStorage) and root.exists() and storage.root.resolve() == root.resolve():
        return root   # the backend wrote it there itself
    if replace and root.exists():
        shutil.rmtree(root)
    target = LocalStorage(root)
    root.mkdir(parents=True, exist_ok=True)
    for name in storage.list():
        target.write(name, storage.read(name))
    return root
