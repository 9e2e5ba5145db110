"""Replacing a checkpoint directory whole: built beside the old one, swapped in by one rename, the old one removed.

``run --checkpoint DIR --overwrite`` must leave either the old checkpoint or the new one whole in DIR, whatever
interrupts it (Ctrl-C, SIGTERM, SIGKILL, a full disk, a folder it may not write). So the old checkpoint is never
touched until the new one is complete:

- ``sibling``: a new private folder beside DIR, on the same filesystem (``mkdtemp``: mode 0700 and a name no
  one can predict, ``.DIR.lightspeed-new-XXXXXXXX``), where the new checkpoint is written;
- ``write_files``: every file of the new checkpoint written through descriptors: each folder is opened without
  following a link, each file is created new (never over an existing one, never through a link), so a link
  planted in the folder while it is written is never followed (the write fails, naming it); the filesystem is
  synced once at the end;
- ``exchange``: the two folders swapped by one ``renameat2(RENAME_EXCHANGE)``, which is atomic; where the kernel
  or the filesystem lacks it, two renames with SIGINT and SIGTERM held back between them, the first undone if
  the second fails;
- ``remove_tree``: the old checkpoint, now in the sibling folder, removed without following a link.

SIGINT and SIGTERM arriving during the swap and the removal are held back (``deferred_signals``) and delivered
once both are done. A run killed outright (SIGKILL) before the swap leaves DIR as it was and the sibling folder
behind; after the swap, DIR holds the new checkpoint and the sibling the old one.
"""

from __future__ import annotations

import ctypes
import errno
import os
import shutil
import signal
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

from reference.protocol import layout
from reference.protocol.storage import Storage, create_new_in

SIBLING_MARK = ".lightspeed-new-"   # in the name of the folder a new checkpoint is built in
_RENAME_EXCHANGE = 2                # renameat2's flag (linux/fs.h)
_AT_FDCWD = -100


def sibling(root: Path) -> Path:
    """A new, empty, private folder beside ``root`` (same parent, so the same filesystem unless ``root`` is a
    mount point, which ``swap_problem`` refuses)."""
    return Path(tempfile.mkdtemp(prefix=f".{root.name[:100]}{SIBLING_MARK}", dir=root.parent))


def swap_problem(root: Path, folders: list[str]) -> str | None:
    """Why the checkpoint in ``root`` (with these sub-folders) cannot be replaced by a swap, or None: its parent
    must take the sibling folder, ``root`` must not be a mount point (a rename cannot move one), and every folder
    of the old checkpoint must be writable, so that it can be removed once swapped out."""
    parent = root.parent
    if os.path.ismount(root):
        return f"is a mount point; the new checkpoint is built beside it in {parent} and swapped in by a rename, " \
               "which cannot move a mount point"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"the new checkpoint is built beside it and swapped in, but its parent {parent} is not writable"
    for rel in [""] + folders:
        folder = root / rel if rel else root
        if not os.access(folder, os.W_OK | os.X_OK):
            return f"its folder {folder} is not writable, so the old checkpoint could not be removed"
    return None


def write_files(storage: Storage, root: Path, *, after_first: Callable[[], Any] = lambda: None) -> list[str]:
    """Write every file of ``storage`` into the folder ``root`` (``metadata`` first, so a copy cut short is still
    recognised as the tool's), never following a link and never over an existing file; returns their paths.
    ``after_first`` runs once the first file is written (where a test interrupts the write)."""
    names = sorted(storage.list(), key=lambda n: n != layout.METADATA)
    top = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    folders: dict[str, int] = {"": top}
    try:
        for i, name in enumerate(names):
            folder, _, base = name.rpartition("/")
            create_new_in(_folder_fd(folders, folder), base, storage.read(name))
            if i == 0:
                after_first()
        _sync(top)
    finally:
        for fd in folders.values():
            os.close(fd)
    return names


def _folder_fd(folders: dict[str, int], folder: str) -> int:
    """A descriptor of ``folder`` (relative to the root in ``folders[""]``), made if missing, never a link."""
    if folder in folders:
        return folders[folder]
    parent, _, base = folder.rpartition("/")
    at = _folder_fd(folders, parent)
    try:
        os.mkdir(base, 0o755, dir_fd=at)
    except FileExistsError:
        pass
    folders[folder] = os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=at)
    return folders[folder]


def _sync(fd: int) -> None:
    """Flush the filesystem holding the open folder ``fd`` to disk (``syncfs``; else ``sync``), once for all the
    files just written: a swap must never publish a checkpoint that a power cut could take back."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.syncfs(fd) == 0:
            return
    except (OSError, AttributeError):
        pass
    os.sync()


def exchange(a: Path, b: Path) -> None:
    """Swap the directories ``a`` and ``b`` (same parent) atomically; ``OSError`` when neither way works."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
            return
        code = ctypes.get_errno()
    except (OSError, AttributeError):
        code = errno.ENOSYS
    if code not in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
        raise OSError(code, os.strerror(code), str(b))
    aside = Path(tempfile.mkdtemp(prefix=f".{b.name[:100]}.lightspeed-old-", dir=b.parent))
    os.rename(b, aside)           # replaces the empty folder ``aside``
    try:
        os.rename(a, b)
    except BaseException:
        os.rename(aside, b)
        raise
    os.rename(aside, a)


def remove_tree(folder: Path) -> str | None:
    """Remove ``folder`` and everything in it, never following a link out of it; what could not be removed, or
    None."""
    problems: list[str] = []
    assert shutil.rmtree.avoids_symlink_attacks, "this platform's rmtree could follow a link out of the folder"
    shutil.rmtree(folder, onerror=lambda _fn, path, exc: problems.append(f"{path} ({exc[1]})"))
    return "; ".join(problems[:3]) or None


@contextmanager
def deferred_signals() -> Iterator[None]:
    """Hold back SIGINT and SIGTERM for the block (they are delivered when it ends): a swap and the removal of
    the old checkpoint are never cut in the middle. Outside the main thread (where Python runs signal handlers)
    nothing is held back."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    got: list[int] = []
    held = (signal.SIGINT, signal.SIGTERM)
    before = {s: signal.getsignal(s) for s in held}
    for s in held:
        if before[s] is not None:
            signal.signal(s, lambda number, _frame: got.append(number))
    try:
        yield
    finally:
        for s, handler in before.items():
            if handler is not None:
                signal.signal(s, handler)
        if got:
            signal.raise_signal(got[0])
