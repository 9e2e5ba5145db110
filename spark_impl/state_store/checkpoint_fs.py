"""The state store's view of the checkpoint directory (spec section 3).

Every access to the checkpoint goes through ``reference.protocol.storage.Storage``
(write / read / exists / delete / rename / list); nothing here calls ``os`` on a
checkpoint path, so any filesystem with atomic create and a consistent listing
plugs in: ``LocalStorage``, ``DurableStorage``, or ``FsspecStorage`` below over
an fsspec / ``pyarrow.fs`` filesystem.

File names come from ``reference.protocol.layout``::

    state/<op>/<p>/<v>_<uid>.changelog | .delta     one per commit
    state/<op>/<p>/<v>_<uid>.snapshot               manifest (RocksDB) or full dump (delta)
    state/<op>/<p>/SSTs/<sst-stem>-<content-hash>-v<version>.sst   shared by snapshots
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import Any

from reference.protocol import layout
from reference.protocol.storage import CheckpointFormatError, SnapshotReader, Storage, StorageError

SST_FOLDER = "SSTs"


@dataclass(frozen=True)
class StoreId:
    """One state store: (operator, partition)."""

    op: str
    partition: int

    @property
    def directory(self) -> str:
        return layout.store_dir(self.op, self.partition)

    def state_file(self, version: int, uid: str, kind: str) -> str:
        return layout.state_file(self.op, self.partition, version, uid, kind)

    def sst_path(self, dfs_name: str) -> str:
        return f"{self.directory}/{SST_FOLDER}/{dfs_name}"

    @property
    def sst_prefix(self) -> str:
        return f"{self.directory}/{SST_FOLDER}/"


StateFileKey = tuple[int, str, str]  # (version, uid, kind)


def list_state_files(storage: Storage, store: StoreId) -> dict[StateFileKey, str]:
    """Map (version, uid, kind) -> path of every state file of one store (SSTs excluded)."""
    out: dict[StateFileKey, str] = {}
    for path in storage.list(store.directory + "/"):
        if path.startswith(store.sst_prefix):
            continue
        parsed = layout.parse_state_file(path)
        if parsed is not None:
            out[(parsed.version, parsed.uid, parsed.kind)] = path
    return out


def list_sst_names(storage: Storage, store: StoreId) -> set[str]:
    """Names (last path component) of every uploaded SST file of one store."""
    return {path.rsplit("/", 1)[-1] for path in storage.list(store.sst_prefix)}


def resolve_uid(files: dict[StateFileKey, str], store: StoreId, version: int) -> str:
    """The single attempt uid present for ``version``; several or none is an error, never a guess."""
    if version == 0:
        return ""
    uids = sorted({uid for (v, uid, _kind) in files if v == version})
    where = f"{store.directory} version {version}"
    if not uids:
        raise CheckpointFormatError(f"{where}: no state file for this version")
    if len(uids) > 1:
        raise CheckpointFormatError(f"{where}: files of several attempts {uids}; pass the committed lineage id")
    return uids[0]


class FsspecStorage:
    """``Storage`` over an fsspec-style filesystem (``fsspec`` or ``pyarrow.fs`` via fsspec wrappers).

    Needs ``open``, ``exists``, ``rm``, ``mv``, ``find`` and ``makedirs``.
    Atomic create is write-to-temp then ``mv``, as Spark's ``CheckpointFileManager``
    does on filesystems with atomic rename. ``tests/quick/test_rocksdb_store_fsspec.py``
    runs the store's recovery round trip over it (an in-test filesystem with
    just these methods, and fsspec's memory and local filesystems when fsspec
    is installed).
    """

    def __init__(self, fs: Any, root: str, snapshot_readers: tuple[SnapshotReader, ...] = ()):
        self.fs, self.root = fs, root.rstrip("/")
        self.snapshot_readers = snapshot_readers  # decoders of foreign snapshots, for the reference's loads

    def _full(self, path: str) -> str:
        if not path or path.startswith("/") or ".." in path.split("/"):
            raise ValueError(f"checkpoint path {path!r} must be relative and stay inside the checkpoint")
        return f"{self.root}/{path}"

    def write(self, path: str, data: bytes, *, overwrite: bool = False) -> None:
        full = self._full(path)
        if not overwrite and self.fs.exists(full):
            raise StorageError(f"{path}: already exists (atomic create refuses to overwrite)")
        self.fs.makedirs(posixpath.dirname(full), exist_ok=True)
        tmp = f"{posixpath.dirname(full)}/.{posixpath.basename(full)}.tmp"
        with self.fs.open(tmp, "wb") as handle:
            handle.write(data)
        self.fs.mv(tmp, full)

    def read(self, path: str) -> bytes:
        full = self._full(path)
        try:
            with self.fs.open(full, "rb") as handle:
                return handle.read()
        except FileNotFoundError:
            raise CheckpointFormatError(f"{full}: file not found in checkpoint") from None

    def exists(self, path: str) -> bool:
        return bool(self.fs.exists(self._full(path)))

    def delete(self, path: str) -> None:
        full = self._full(path)
        if self.fs.exists(full):
            self.fs.rm(full)

    def rename(self, src: str, dst: str) -> None:
        self.fs.mv(self._full(src), self._full(dst))

    def list(self, prefix: str = "") -> list[str]:
        if not self.fs.exists(self.root):
            return []
        out = []
        for full in self.fs.find(self.root):
            rel = full[len(self.root.lstrip("/")) + 1:] if not full.startswith(self.root) else full[len(self.root) + 1:]
            if rel.rsplit("/", 1)[-1].startswith("."):
                continue
            if rel.startswith(prefix):
                out.append(rel)
        return sorted(out)
