"""A durable state store on RocksDB (rocksdict) with changelog checkpointing: the façade.

Implements the state-store part of docs/spec.md: the ``state_load``,
``changelog_write``, ``state_commit`` and ``snapshot_upload`` steps of section
2 for the three ``state_store.provider`` values, the checkpoint layout of
section 3, and the lineage rule that makes the ``lineage`` and
``reconstruction`` oracles of section 5 hold. It has the API shape of
``reference.protocol.state_store.StateStore`` (the judge it is checked against) and
needs neither pyspark nor a SparkSession. It plays the part of Spark's
``RocksDBStateStoreProvider``: one store per (operator, partition), composed of

- ``transaction.py``: the batch's uncommitted changes over the open DB
  (get / put / delete / delete_range / abort);
- ``commit.py``: seal / write / mark_durable, the one state file per commit;
- ``lineage.py``: the in-memory, durable and snapshot versions, with their
  invariants;
- ``snapshots.py``: the pending snapshot checkpoint and its upload;
- ``cleanup.py``: which files and SSTs retention lets go;
- ``version_loader.py``: load (recovery), with the SPARK-21696 fallback;
- ``local_db.py``: the disposable local directory and its RocksDB instances.

Locking: ``_lock`` (task side: mutations, commit, abort, load) and
``_maintenance_lock`` (upload and cleanup of this store). Commit and abort hold
the same lock, so an abort from another thread can never interleave with a
commit (SPARK-46711); close waits for an in-flight upload (SPARK-48105).
"""

from __future__ import annotations

import json
import threading
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from reference.protocol import layout
from reference.protocol.changelog import MAGIC
from reference.protocol.storage import CheckpointFormatError, Storage

from .changelog_codec import decode_raw
from .checkpoint_fs import StoreId
from .cleanup import delete_planned, plan_retention
from .commit import Committer, Sealed
from .lineage import VersionLineage, check_uid
from .local_db import LocalWorkspace
from .maintenance import MaintenancePool, default_pool
from .manifest_index import ManifestIndex
from .memory import MemoryBudget, MemoryUsage, shared_memory
from .snapshots import Snapshots
from .sst_files import decode_manifest
from .transaction import Transaction
from .version_loader import LoadReport, VersionLoader

PROVIDERS = ("changelog", "delta", "snapshot")


class RocksDBStateStore:
    """One state store per (operator, partition) on RocksDB; see the module docstring."""

    def __init__(self, storage: Storage, op: str, partition: int, provider: str = "changelog",
                 min_deltas_for_snapshot: int = 10, *, local_root: str | Path | None = None,
                 memory: MemoryBudget | None = None, pool: MaintenancePool | None = None,
                 compact_on_commit: bool = False, share_ssts: bool = True):
        if provider not in PROVIDERS:
            raise ValueError(f"state_store.provider {provider!r}: expected one of {PROVIDERS}")
        if min_deltas_for_snapshot < 1:
            raise ValueError(f"min_deltas_for_snapshot must be >= 1, got {min_deltas_for_snapshot}")
        self.storage = storage
        self.store = StoreId(op, partition)
        self.op, self.partition, self.provider = op, partition, provider
        self._memory = shared_memory(memory)
        self._pool = pool
        self._lock = threading.RLock()
        self._maintenance_lock = threading.Lock()
        self._closed = False
        self.last_load: LoadReport | None = None
        # state files above this store's version that are not another writer's: on file at the last load (a
        # dead lineage) or written by this store (a failed attempt); ``cleanup`` refuses any other
        self._known_files: set[str] = set()
        root = Path(local_root) if local_root is not None else None   # None: a private temporary directory
        self._workspace = LocalWorkspace(self.store, root, self._memory)
        self.local_dir = self._workspace.directory  # disposable: never needed for recovery
        self._lineage = VersionLineage(str(self.store))
        self._transaction = Transaction(self._workspace)
        self._snapshots = Snapshots(storage, self.store, provider, self._workspace, ManifestIndex(storage),
                                    share_ssts=share_ssts, compact_on_commit=compact_on_commit)
        self._committer = Committer(storage, self.store, provider, min_deltas_for_snapshot, self._lineage,
                                    self._transaction, self._snapshots)
        self.delta_kind = self._committer.delta_kind
        self._loader = VersionLoader(storage, self.store, self._workspace)
        self._workspace.current = self._workspace.open_empty()

    # ------------------------------------------------------------ versions
    @property
    def version(self) -> int:
        return self._lineage.version

    @property
    def uid(self) -> str:
        return self._lineage.uid

    @property
    def last_snapshot_version(self) -> int:
        return self._lineage.last_snapshot_version

    @last_snapshot_version.setter
    def last_snapshot_version(self, version: int) -> None:
        self._lineage.last_snapshot_version = version

    @property
    def min_deltas_for_snapshot(self) -> int:
        return self._committer.min_deltas_for_snapshot

    @min_deltas_for_snapshot.setter
    def min_deltas_for_snapshot(self, versions: int) -> None:
        self._committer.min_deltas_for_snapshot = versions

    def memory_usage(self) -> MemoryUsage:
        """The per-process gauge shared by all stores (block cache + write buffers)."""
        return self._memory.usage()

    # --------------------------------------------------------- operations
    def get(self, key: str) -> Any:
        return self._transaction.get(key)

    def items(self) -> list[tuple[str, Any]]:
        """Every (key, value) in key order (RocksDB's bytewise order of UTF-8 = str order)."""
        return self._transaction.items()

    def put(self, key: str, value: Any) -> None:
        with self._lock:
            self._transaction.put(key, value)

    def delete(self, key: str) -> None:
        with self._lock:
            self._transaction.delete(key)

    def delete_range(self, start: str, end: str) -> None:
        """Delete every key in ``[start, end)``, recording each one in the changelog (SPARK-55510)."""
        with self._lock:
            self._transaction.delete_range(start, end)

    def abort(self) -> None:
        """Undo the uncommitted changes of this batch (restores the loaded / last committed version)."""
        with self._lock:
            self._transaction.abort()

    # ------------------------------------------------------------- commit
    def seal(self, uid: str) -> Sealed:
        """End of ``task_apply``: fix this version's changes and advance the version."""
        check_uid(uid)
        with self._lock:
            self._check_open()
            return self._committer.seal(uid)

    def write(self, sealed: Sealed) -> str:
        """``changelog_write``: the one file this commit writes (never over another attempt's)."""
        path = self._committer.write(sealed)
        with self._lock:
            self._known_files.add(path)
        return path

    def mark_durable(self, sealed: Sealed) -> int:
        """``state_commit``: the version is durable and may be named in the commit log."""
        with self._lock:
            version = self._committer.mark_durable(sealed)
            # only files above the store's version matter to ``cleanup``: keep the set as small as that
            self._known_files = {p for p in self._known_files if _version_of(p) > self._lineage.version}
            return version

    def commit(self, uid: str) -> int:
        """Seal, write and mark durable in one call (synchronous state checkpointing)."""
        with self._lock:
            sealed = self.seal(uid)
            self.write(sealed)
            return self.mark_durable(sealed)

    # -------------------------------------------------------- maintenance
    def do_maintenance(self) -> str | None:
        """``snapshot_upload``: upload the newest pending snapshot once its version is durable."""
        with self._maintenance_lock:
            with self._lock:
                pending = self._snapshots.take_if_durable(self._lineage.durable)
            if pending is None:
                return None
            return self._snapshots.upload(pending)

    def schedule_maintenance(self) -> Future | None:
        """Run ``do_maintenance`` on the background pool (a Future, or None if a round is running)."""
        return (self._pool or default_pool()).submit(self)

    def cleanup(self, min_versions_to_retain: int) -> list[str]:
        """Delete what no version in ``[version - retain + 1, version]`` needs (``cleanup.py``)."""
        with self._maintenance_lock:
            with self._lock:
                latest, latest_uid = self._lineage.version, self._lineage.uid
                known = frozenset(self._known_files)
            plan = plan_retention(self.storage, self.store, self._snapshots.index, latest, latest_uid,
                                  min_versions_to_retain, known)
            return delete_planned(self.storage, self.store, plan, self._pool or default_pool())

    # --------------------------------------------------------------- load
    def load(self, version: int, uid: str | None = None) -> LoadReport:
        """Load ``version`` of lineage ``uid`` from the checkpoint directory alone, into a fresh DB."""
        if version < 0:
            raise ValueError(f"version {version} < 0")
        with self._lock:
            self._check_open()
            self._snapshots.discard_pending()
            report = self._loader.load(version, uid)
            self._lineage.reset(version, report.uid, report.base_version)
            self._transaction.forget()
            self._known_files = set(report.newer_files)
            self.last_load = report
            return report

    # --------------------------------------------------------- lifecycle
    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"state store {self.store} is closed")

    def close(self) -> None:
        """Unload: wait for an in-flight upload (SPARK-48105), drop the local files."""
        with self._maintenance_lock, self._lock:
            if self._closed:
                return
            self._closed = True
            self._snapshots.discard_pending()
            self._workspace.close()

    def crash(self) -> None:
        """Simulate process death: no flush, no waiting; the local directory is gone."""
        with self._lock:
            self._closed = True
            self._snapshots.discard_pending()
            self._workspace.abandon()

    def __enter__(self) -> "RocksDBStateStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _version_of(path: str) -> int:
    parsed = layout.parse_state_file(path)
    return parsed.version if parsed is not None else -1


def read_snapshot_records(storage: Storage, op: str, partition: int, path: str,
                          local_root: str | Path | None = None) -> list[tuple[str, Any]]:
    """Decode any ``.snapshot`` file of this layout (manifest or binary) into sorted (key, value).

    For verifiers: the reference reads binary snapshots only; this also reads
    the RocksDB manifests this store uploads, through a throwaway DB.
    """
    data = storage.read(path)
    if data[:4] == MAGIC["snapshot"]:
        _header, records = decode_raw(data, path)
        return sorted((k.decode(), json.loads(v)) for k, v in records if v is not None)
    manifest = decode_manifest(data, path)
    store = RocksDBStateStore(storage, op, partition, local_root=local_root)
    try:
        report = store.load(manifest.version, manifest.uid)
        if report.base_file != path:
            # The store fell back past this snapshot (a loader may; a reader of this file may not).
            why = "; ".join(report.skip_reasons) or f"the load used {report.base_file} instead"
            raise CheckpointFormatError(f"{path}: the snapshot cannot be restored: {why}")
        return store.items()
    finally:
        store.close()
