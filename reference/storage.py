"""Modelled durable storage: the checkpoint directory of SPEC section 3.

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

import os
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol


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
        what the files say (``reference.lineage_memo``) stays exact without listing the folder again."""
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


class LocalStorage:
    """The ``Storage`` interface over a real local directory (atomic via rename)."""

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
        tmp = full.with_name(f".{full.name}.{os.getpid()}.{threading.get_ident()}.{uuid.uuid4().hex[:8]}.tmp")
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
        try:
            return full.read_bytes()
        except FileNotFoundError:
            raise CheckpointFormatError(f"{full}: file not found in checkpoint") from None
        except IsADirectoryError:
            raise CheckpointFormatError(f"{full}: is a directory where the checkpoint layout has a file") from None
        except PermissionError:
            raise CheckpointFormatError(f"{full}: cannot be read (permission denied)") from None

    def exists(self, path: str) -> bool:
        return self._full(path).exists()

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
        if not top.is_dir():
            return []
        out = []
        for dirpath, _dirs, names in os.walk(top):
            rel_dir = os.path.relpath(dirpath, self.root).replace(os.sep, "/")
            base = "" if rel_dir == "." else rel_dir + "/"
            for name in names:
                if name.startswith("."):
                    continue
                rel = base + name
                if rel.startswith(prefix):
                    out.append(rel)
        return sorted(out)


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
