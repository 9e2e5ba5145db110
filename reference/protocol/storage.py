"""Modelled durable storage: the checkpoint directory of spec section 3.

The reference model never touches a real disk while it runs. It writes to a
``DurableStorage``: a map from slash-separated relative paths to bytes with the
guarantees an HDFS-like checkpoint file manager gives Spark: a file appears
whole or not at all (write to a temporary name, then rename), renames are
atomic, and listing is consistent. Everything in memory outside this object is
lost on a driver crash.

``LocalStorage`` adapts the same interface to a real directory so that an
outcome's checkpoint can be written out and read back by the verifier.
"""

from __future__ import annotations

import json
import os
import stat
import threading
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Protocol


class StorageError(Exception):
    """A storage operation failed (an injected ``storage_write_error``, or a real I/O error)."""


class CheckpointFormatError(Exception):
    """A checkpoint file is missing, truncated or unreadable. The message names the file."""


# Decodes a ``.snapshot`` file written in a backend's own format (e.g. a RocksDB SST manifest):
# (storage, path, bytes) -> (header, records), or None when the bytes are not its format. A
# storage carries the readers of the snapshots it holds, so loads and oracles decode them without
# any process-wide registration.
SnapshotReader = Callable[["Storage", str, bytes], Any]

# Told of a change to a file of a watched folder: (path, "create" | "replace" | "delete").
Watcher = Callable[[str, str], None]


class Storage(Protocol):
    """What the protocol needs from a checkpoint filesystem, and how to decode its foreign snapshots."""

    snapshot_readers: tuple[SnapshotReader, ...]

    def write(self, path: str, data: bytes, *, overwrite: bool = False) -> None: ...
    def read(self, path: str) -> bytes: ...
    def exists(self, path: str) -> bool: ...
    def delete(self, path: str) -> None: ...
    def rename(self, src: str, dst: str) -> None: ...
    def list(self, prefix: str = "") -> list[str]: ...


@dataclass
class DurableStorage:
    """In-memory durable storage with atomic create, rename, delete and list.

    ``bytes_written`` and ``ops`` are counters the experiments read; they have
    no effect on behaviour. ``folders`` indexes paths by every folder they lie
    under, so that listing a folder does not scan the whole checkpoint.
    ``watchers`` are told of every change under a folder (``watch``); a copy,
    or a pickled one, has none. ``memo`` holds what pure functions of the files
    computed (``remembered``); every change empties it.
    """

    files: dict[str, bytes] = field(default_factory=dict)
    bytes_written: int = 0
    ops: int = 0
    folders: dict[str, set[str]] = field(default_factory=dict, repr=False)
    snapshot_readers: tuple[SnapshotReader, ...] = ()
    watchers: dict[str, list[Watcher]] = field(default_factory=dict, repr=False, compare=False)
    memo: dict[Any, Any] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        for path in self.files:
            self._index(path)

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "watchers": {}, "memo": {}}

    def remembered(self, key: Any, compute: Callable[[], Any]) -> Any:
        """``compute()``, a pure function of the files (and of ``snapshot_readers``, part of the key), computed
        once until the next change: the judge reads the same retained versions several times per outcome."""
        key = (key, self.snapshot_readers)
        if key in self.memo:
            return self.memo[key]
        value = self.memo[key] = compute()
        return value

    def watch(self, folder: str, watcher: Watcher) -> None:
        """Call ``watcher(path, change)`` after every change to a file anywhere under ``folder``: ``change`` is
        ``"create"``, ``"replace"`` (an existing file rewritten) or ``"delete"``. Watchers are how a cache of
        what the files say (``reference.protocol.lineage_memo``) stays exact without listing the folder again."""
        self.watchers.setdefault(folder, []).append(watcher)

    def _changed(self, path: str, change: str) -> None:
        folder = path
        while "/" in folder:
            folder = folder.rpartition("/")[0]
            for watcher in self.watchers.get(folder, ()):
                watcher(path, change)

    def _index(self, path: str) -> None:
        for folder in _folders_of(path):
            self.folders.setdefault(folder, set()).add(path)

    def _unindex(self, path: str) -> None:
        for folder in _folders_of(path):
            members = self.folders.get(folder)
            if members is not None:
                members.discard(path)
                if not members:
                    del self.folders[folder]

    def write(self, path: str, data: bytes, *, overwrite: bool = False) -> None:
        """Atomically create ``path`` (temp file + rename). Refuses to replace unless ``overwrite``."""
        _check_path(path)
        existed = path in self.files
        if not overwrite and existed:
            raise StorageError(f"{path}: already exists (atomic create refuses to overwrite)")
        self.files[path] = bytes(data)
        self.memo.clear()
        if not existed:
            self._index(path)
        self.bytes_written += len(data)
        self.ops += 1
        if self.watchers:
            self._changed(path, "replace" if existed else "create")

    def read(self, path: str) -> bytes:
        try:
            return self.files[path]
        except KeyError:
            raise CheckpointFormatError(f"{path}: file not found in checkpoint") from None

    def exists(self, path: str) -> bool:
        return path in self.files

    def delete(self, path: str) -> None:
        if self.files.pop(path, None) is not None:
            self.memo.clear()
            self._unindex(path)
            if self.watchers:
                self._changed(path, "delete")
        self.ops += 1

    def rename(self, src: str, dst: str) -> None:
        if src not in self.files:
            raise StorageError(f"rename {src} -> {dst}: source does not exist")
        existed = dst in self.files
        self.files[dst] = self.files.pop(src)
        self.memo.clear()
        self._unindex(src)
        self._index(dst)
        self.ops += 1
        if self.watchers:
            self._changed(src, "delete")
            self._changed(dst, "replace" if existed else "create")

    def list(self, prefix: str = "") -> list[str]:
        if prefix.endswith("/"):
            return sorted(self.folders.get(prefix[:-1], ()))
        return sorted(p for p in self.files if p.startswith(prefix))

    def copy(self) -> "DurableStorage":
        return DurableStorage(dict(self.files), self.bytes_written, self.ops,
                              snapshot_readers=self.snapshot_readers)

    def dump_to(self, directory: str | os.PathLike[str]) -> None:
        """Write every file under ``directory`` so the verifier can read it as a real checkpoint."""
        local = LocalStorage(directory)
        for path, data in self.files.items():
            local.write(path, data, overwrite=True)


Entries = list[tuple[str, str]]   # (path relative to a checkpoint's root, what the entry is: one of ENTRY_KINDS)


class LocalStorage:
    """The ``Storage`` interface over a real local directory (atomic via rename).

    A checkpoint directory holds regular files and directories only. Reads never leave it: every path is
    opened component by component without following a symbolic link, and anything that is not a regular
    file (a link, a FIFO, a device, a socket) is refused, naming it, before it is opened, so a read never
    blocks and never touches what the link points to. A file larger than ``MAX_CHECKPOINT_FILE_BYTES`` is
    refused with its size before it is read. Listing does not descend into a linked folder either.
    """

    def __init__(self, root: str | os.PathLike[str], snapshot_readers: tuple[SnapshotReader, ...] = ()):
        self.root = Path(root)
        self.snapshot_readers = snapshot_readers

    def _full(self, path: str) -> Path:
        _check_path(path)
        return self.root / path

    def write(self, path: str, data: bytes, *, overwrite: bool = False) -> None:
        """Write to a unique temporary name, then publish: ``os.replace`` to overwrite, or a hard link
        to create, which fails if the name exists, so two writers can never both create one file."""
        full = self._full(path)
        full.parent.mkdir(parents=True, exist_ok=True)
        tmp = full.with_name(temp_name(full.name))
        tmp.write_bytes(data)
        try:
            if overwrite:
                os.replace(tmp, full)
                return
            try:
                os.link(tmp, full)
            except FileExistsError:
                raise StorageError(f"{path}: already exists (atomic create refuses to overwrite)") from None
        finally:
            tmp.unlink(missing_ok=True)

    def read(self, path: str) -> bytes:
        full = self._full(path)
        with _opened_inside(self.root, path) as fd:
            return _read_bounded(fd, full)

    def exists(self, path: str) -> bool:
        return os.path.lexists(self._full(path))

    def delete(self, path: str) -> None:
        try:
            self._full(path).unlink()
        except FileNotFoundError:
            pass

    def rename(self, src: str, dst: str) -> None:
        target = self._full(dst)
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(self._full(src), target)

    def list(self, prefix: str = "") -> list[str]:
        # walk only the directory the prefix names (its part up to the last "/"): purge and loads
        # list one log or one store per call, and a walk of the whole checkpoint made every
        # batch's purge cost grow with the checkpoint
        folder = prefix.rsplit("/", 1)[0] if "/" in prefix else ""
        top = self.root / folder if folder else self.root
        if folder:
            _refuse_linked_folders(self.root, folder)
        if not top.is_dir():
            return []
        out = []
        for dirpath, _dirs, names in os.walk(top):
            rel_dir = os.path.relpath(dirpath, self.root).replace(os.sep, "/")
            base = "" if rel_dir == "." else rel_dir + "/"
            out += [base + name for name in names if not name.startswith(".") and (base + name).startswith(prefix)]
        return sorted(out)

    def entries(self) -> Entries:
        """Every entry under the root, hidden ones too, as (relative path, kind), kind one of ``ENTRY_KINDS``;
        nothing is followed or opened (a linked folder is one entry, of kind ``symlink``)."""
        out = []
        for dirpath, dirs, names in os.walk(self.root):
            rel_dir = os.path.relpath(dirpath, self.root).replace(os.sep, "/")
            base = "" if rel_dir == "." else rel_dir + "/"
            for name in dirs + names:
                kind = entry_kind(os.lstat(os.path.join(dirpath, name)).st_mode)
                out.append((base + name, kind))
            dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(dirpath, d))]
        return sorted(out)


def inventory(storage: Storage) -> Entries:
    """Every entry of a checkpoint as (path, kind): a local directory's own walk, with hidden files, folders
    and what is not a regular file; the files any other storage lists (it holds nothing else)."""
    if isinstance(storage, LocalStorage):
        return storage.entries()
    return [(path, "file") for path in storage.list()]


ENTRY_KINDS = ("file", "directory", "symlink", "fifo", "device", "socket")


def temp_name(name: str) -> str:
    """The hidden name ``LocalStorage.write`` writes ``name`` under before publishing it (``layout.classify``
    knows it as ``temp``: one a crashed writer leaves behind is the checkpoint's own litter, never read)."""
    return f".{name}.{os.getpid()}.{threading.get_ident()}.{uuid.uuid4().hex[:8]}.tmp"


def entry_kind(mode: int) -> str:
    """What a directory entry is, from its ``lstat`` mode (one of ``ENTRY_KINDS``)."""
    if stat.S_ISLNK(mode):
        return "symlink"
    if stat.S_ISDIR(mode):
        return "directory"
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISFIFO(mode):
        return "fifo"
    if stat.S_ISSOCK(mode):
        return "socket"
    return "device"


def _not_regular(full: Path | str, kind: str) -> CheckpointFormatError:
    if kind == "symlink":
        return CheckpointFormatError(f"{full}: is a symbolic link; a checkpoint holds regular files only, and a "
                                     "link is never followed out of it")
    if kind == "directory":
        return CheckpointFormatError(f"{full}: is a directory where the checkpoint layout has a file")
    return CheckpointFormatError(f"{full}: is a {kind}, not a regular file; a checkpoint holds regular files "
                                 "only (it was not opened)")


@contextmanager
def _opened_inside(root: Path, path: str) -> Iterator[int]:
    """A read-only descriptor of the regular file ``path`` under ``root``, reached one component at a time
    without following a link; ``CheckpointFormatError`` naming the entry that is missing, a link, or not a
    regular file (checked before it is opened, so a FIFO or a device is never opened)."""
    parts = path.split("/")
    fds: list[int] = []
    try:
        try:
            fds.append(os.open(root, os.O_RDONLY | os.O_DIRECTORY))
        except FileNotFoundError:
            raise CheckpointFormatError(f"{root / path}: file not found in checkpoint") from None
        except NotADirectoryError:
            raise CheckpointFormatError(f"{root}: the checkpoint is not a directory") from None
        for i, part in enumerate(parts):
            where = root.joinpath(*parts[:i + 1])
            try:
                mode = os.stat(part, dir_fd=fds[-1], follow_symlinks=False).st_mode
            except FileNotFoundError:
                raise CheckpointFormatError(f"{root / path}: file not found in checkpoint") from None
            last = i == len(parts) - 1
            kind = entry_kind(mode)
            if kind != ("file" if last else "directory"):
                raise _not_regular(where, kind) if last or kind != "file" else \
                    CheckpointFormatError(f"{where}: is a file where the checkpoint layout has a directory")
            flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | (0 if last else os.O_DIRECTORY)
            try:
                fds.append(os.open(part, flags, dir_fd=fds[-1]))
            except PermissionError:
                raise CheckpointFormatError(f"{where}: cannot be read (permission denied)") from None
            except OSError as exc:   # replaced by a link or a special file since it was looked at
                raise CheckpointFormatError(f"{where}: cannot be opened safely ({exc.strerror})") from None
            opened = entry_kind(os.fstat(fds[-1]).st_mode)
            if opened != kind:
                raise _not_regular(where, opened)
        yield fds[-1]
    finally:
        for fd in fds:
            os.close(fd)


def create_new_in(folder: int, name: str, data: bytes) -> None:
    """Create the new file ``name`` (one path component) holding ``data`` in the open directory ``folder``:
    never over an existing file, never through a link (``FileExistsError``, ``OSError``)."""
    assert "/" not in name and name not in ("", ".", ".."), f"{name!r} is not one path component"
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=folder)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)


def _read_bounded(fd: int, full: Path) -> bytes:
    """The bytes of an open regular file, refused with its size when it passes ``MAX_CHECKPOINT_FILE_BYTES``
    (or grows past it while being read)."""
    from ..language.size import MAX_CHECKPOINT_FILE_BYTES, file_too_large
    size = os.fstat(fd).st_size
    why = file_too_large(size, MAX_CHECKPOINT_FILE_BYTES)
    if why is not None:
        raise CheckpointFormatError(f"{full}: {why}; no checkpoint file is that large")
    chunks: list[bytes] = []
    total = 0
    while True:
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return b"".join(chunks)
        total += len(chunk)
        if total > MAX_CHECKPOINT_FILE_BYTES:
            raise CheckpointFormatError(f"{full}: grew past {MAX_CHECKPOINT_FILE_BYTES:,} bytes while read")
        chunks.append(chunk)


def _refuse_linked_folders(root: Path, folder: str) -> None:
    """``CheckpointFormatError`` when a component of ``folder`` under ``root`` is a link (listing it would list
    what the link points to); a missing one, or one that is not a folder, lists as empty (the ``layout`` rule
    of ``checkpoint_rules.py`` names it)."""
    where = root
    for part in folder.split("/"):
        where = where / part
        try:
            kind = entry_kind(os.lstat(where).st_mode)
        except (FileNotFoundError, NotADirectoryError):
            return
        if kind == "symlink":
            raise CheckpointFormatError(f"{where}: is a symbolic link where the checkpoint layout has a directory; "
                                        "it is not listed")


def excerpt(data: bytes | str, limit: int = 40) -> str:
    """A short, escaped quotation of what a file holds, for an error message: at most ``limit`` characters
    of it, as a JSON string (every control, quote, backslash and non-ASCII character escaped), and how much
    more there was."""
    text = data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data
    more = len(text) - limit
    return json.dumps(text[:limit]) + (f" (and {more:,} more characters)" if more > 0 else "")


def _folders_of(path: str) -> list[str]:
    """Every folder ``path`` lies under, innermost first: ``a/b/c`` -> ``a/b``, ``a``; a top-level file's is ``""``."""
    out = []
    folder = path.rpartition("/")[0]
    out.append(folder)
    while "/" in folder:
        folder = folder.rpartition("/")[0]
        out.append(folder)
    return out


def _check_path(path: str) -> None:
    if not path or path.startswith("/") or ".." in path.split("/"):
        raise ValueError(f"checkpoint path {path!r} must be relative and stay inside the checkpoint")
