"""A durable state store on RocksDB (rocksdict) with changelog checkpointing.

Implements the state-store part of SPEC.md: the ``state_load``,
``changelog_write``, ``state_commit`` and ``snapshot_upload`` steps of section
2 for the three ``state_store.provider`` values, the checkpoint layout of
section 3, and the lineage rule that makes the ``lineage`` and
``reconstruction`` oracles of section 5 hold. It has the API shape of
``reference.state_store.StateStore`` (the judge it is checked against) and
needs neither pyspark nor a SparkSession.

Design
------
* One RocksDB per (operator, partition) in a disposable local directory, WAL
  off; every ``put`` / ``delete`` goes straight to the DB. All stores of the
  process share one block cache and one write buffer manager (``memory.py``).
* The batch's changes are kept as canonical-JSON bytes keyed by key (last
  write wins, first-touch order), and the commit writes them as
  ``<v>_<uid>.changelog`` (``delta`` for the HDFS-style provider) in exactly
  the reference's binary format. A range delete enumerates its keys, so every
  deleted key is in the changelog (SPARK-55510).
* ``abort`` uses an undo log: the value each key had when the batch first
  touched it. Undoing is O(keys touched in the batch), needs no checkpoint
  access, and restores exactly the loaded / last committed version. (Reloading
  the local checkpoint instead would cost O(state) and would need a local
  checkpoint per commit.) Aborting a batch has nothing to undo once sealed, as
  in the reference. Commit and abort hold the same lock, so an abort from
  another thread can never interleave with a commit (SPARK-46711).
* Snapshots: when ``v - last_snapshot >= min_deltas_for_snapshot`` the commit
  takes a RocksDB checkpoint (hard links, immutable) and hands it to
  maintenance, which uploads it later (``sst_files.py``); the ``snapshot``
  provider uploads one on every commit, synchronously. A load discards a
  pending checkpoint that was not yet taken by maintenance; one already being
  uploaded is a true image of its own (version, uid), so its late arrival can
  never be read as another lineage's version (SPARK-47568, 49363, 49770).
* Loading version ``j`` walks the uid chain back from ``(j, uid)``: each
  changelog names its parent uid; the walk stops at the newest snapshot on the
  chain. A snapshot that fails to restore is skipped when the changelog of its
  version exists, and the walk continues to an older snapshot (SPARK-21696);
  otherwise the load fails with ``CheckpointFormatError``. Each load builds a
  new RocksDB instance in a new local directory, so files of an abandoned
  instance are never reused (SPARK-45419, 51717).
* Every file name carries the attempt's uid and files are created with
  ``overwrite=False``, so a retried task, a re-run batch or a zombie writer
  writes beside, never over, and is never on the committed chain
  (SPARK-43404, 19677, 49374).
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import rocksdict

from reference.changelog import MAGIC, StateFileHeader, encode_value
from reference.storage import CheckpointFormatError, Storage

from .changelog_codec import RawChange, decode_raw, encode_state_file_raw, read_header, replay_records
from .checkpoint_fs import StateFileKey, StoreId, list_state_files, resolve_uid
from .maintenance import MaintenancePool, default_pool
from .memory import MemoryBudget, MemoryUsage, shared_memory
from .sst_files import LocalCheckpoint, decode_manifest, restore_snapshot, upload_checkpoint

PROVIDERS = ("changelog", "delta", "snapshot")
_UID_PATTERN = re.compile(r"^[A-Za-z0-9.-]+$")
DEFAULT_LOCAL_ROOT = Path(tempfile.gettempdir()) / "lightspeed-rocksdb"


@dataclass(frozen=True)
class Sealed:
    """A version whose changes are fixed but maybe not yet durable (``task_apply`` ended)."""

    version: int
    uid: str
    parent_uid: str
    changes: tuple[RawChange, ...]
    checkpoint: LocalCheckpoint | None  # a RocksDB checkpoint when a snapshot is due


@dataclass(frozen=True)
class LoadReport:
    """How the last load rebuilt its version: the base snapshot and the replayed files."""

    version: int
    uid: str
    base_version: int
    base_file: str | None
    replayed: tuple[str, ...]
    records_replayed: int
    skipped_snapshots: tuple[str, ...]


@dataclass
class _Instance:
    """One local RocksDB instance and the content-hash memo of its SST files."""

    directory: Path
    db: Any
    hash_cache: dict[tuple[str, int], str] = field(default_factory=dict)


class RocksDBStateStore:
    """One state store per (operator, partition) on RocksDB; see the module docstring."""

    def __init__(self, storage: Storage, op: str, partition: int, provider: str = "changelog",
                 min_deltas_for_snapshot: int = 10, *, local_root: str | Path | None = None,
                 memory: MemoryBudget | None = None, pool: MaintenancePool | None = None,
                 compact_on_commit: bool = False):
        if provider not in PROVIDERS:
            raise ValueError(f"state_store.provider {provider!r}: expected one of {PROVIDERS}")
        if min_deltas_for_snapshot < 1:
            raise ValueError(f"min_deltas_for_snapshot must be >= 1, got {min_deltas_for_snapshot}")
        self.storage = storage
        self.store = StoreId(op, partition)
        self.provider = provider
        self.min_deltas_for_snapshot = min_deltas_for_snapshot
        self.compact_on_commit = compact_on_commit
        self._memory = shared_memory(memory)
        self._pool = pool
        root = Path(local_root) if local_root is not None else DEFAULT_LOCAL_ROOT
        self._local_dir = root / f"{op}-{partition}-{uuid.uuid4().hex[:12]}"
        self._checkpoint_dir = self._local_dir / "checkpoints"
        self._checkpoint_dir.mkdir(parents=True, exist_ok=True)
        self._write_options = rocksdict.WriteOptions()
        self._write_options.disable_wal = True
        self._lock = threading.RLock()             # task side: mutations, commit, abort, load
        self._maintenance_lock = threading.Lock()  # upload and cleanup of this store
        self.version = 0
        self.uid = ""
        self.last_snapshot_version = 0
        self.durable_versions: set[int] = {0}
        self.last_load: LoadReport | None = None
        self._changes: dict[bytes, bytes | None] = {}
        self._undo: dict[bytes, bytes | None] = {}
        self._pending: LocalCheckpoint | None = None
        self._closed = False
        self._instance = self._open_instance(None)

    # ------------------------------------------------------------- naming
    @property
    def op(self) -> str:
        return self.store.op

    @property
    def partition(self) -> int:
        return self.store.partition

    @property
    def delta_kind(self) -> str:
        return "delta" if self.provider == "delta" else "changelog"

    @property
    def local_dir(self) -> Path:
        """The disposable local working directory (never needed for recovery)."""
        return self._local_dir

    def memory_usage(self) -> MemoryUsage:
        """The per-process gauge shared by all stores (block cache + write buffers)."""
        return self._memory.usage()

    # --------------------------------------------------------- operations
    def get(self, key: str) -> Any:
        raw = self._db.get(key.encode())
        return None if raw is None else json.loads(raw)

    def put(self, key: str, value: Any) -> None:
        if value is None:
            raise ValueError(f"state value for key {key!r} must not be None (use delete)")
        raw_key, raw_value = key.encode(), encode_value(value)
        with self._lock:
            db = self._db
            if raw_key not in self._undo:
                self._undo[raw_key] = db.get(raw_key)
            db[raw_key] = raw_value
            self._changes[raw_key] = raw_value

    def delete(self, key: str) -> None:
        raw_key = key.encode()
        with self._lock:
            db = self._db
            old = db.get(raw_key)
            if old is None:
                return
            if raw_key not in self._undo:
                self._undo[raw_key] = old
            del db[raw_key]
            self._changes[raw_key] = None

    def delete_range(self, start: str, end: str) -> None:
        """Delete every key in ``[start, end)``, recording each one in the changelog (SPARK-55510)."""
        if start >= end:
            return
        low, high = start.encode(), end.encode()
        with self._lock:
            db = self._db
            doomed: list[tuple[bytes, bytes]] = []
            for raw_key, raw_value in db.items(from_key=low):
                if raw_key >= high:
                    break
                doomed.append((raw_key, raw_value))
            if not doomed:
                return
            batch = rocksdict.WriteBatch(raw_mode=True)
            for raw_key, raw_value in doomed:
                if raw_key not in self._undo:
                    self._undo[raw_key] = raw_value
                self._changes[raw_key] = None
                batch.delete(raw_key)
            db.write(batch, self._write_options)

    def items(self) -> list[tuple[str, Any]]:
        """Every (key, value) in key order (RocksDB's bytewise order of UTF-8 = str order)."""
        return [(k.decode(), json.loads(v)) for k, v in self._db.items()]

    def abort(self) -> None:
        """Undo the uncommitted changes of this batch (restores the loaded / last committed version)."""
        with self._lock:
            if not self._undo:
                return
            batch = rocksdict.WriteBatch(raw_mode=True)
            for raw_key, old in self._undo.items():
                if old is None:
                    batch.delete(raw_key)
                else:
                    batch.put(raw_key, old)
            self._db.write(batch, self._write_options)
            self._undo.clear()
            self._changes.clear()

    # ------------------------------------------------------------- commit
    def seal(self, uid: str) -> Sealed:
        """End of ``task_apply``: fix this version's changes and advance the version."""
        if not _UID_PATTERN.match(uid):
            raise ValueError(f"lineage uid {uid!r} must match {_UID_PATTERN.pattern}")
        with self._lock:
            self._check_open()
            new_version = self.version + 1
            due = (self.provider == "snapshot"
                   or new_version - self.last_snapshot_version >= self.min_deltas_for_snapshot)
            checkpoint = self._take_checkpoint(new_version, uid, self.uid) if due else None
            sealed = Sealed(new_version, uid, self.uid, tuple(self._changes.items()), checkpoint)
            if checkpoint is not None and self.provider != "snapshot":
                self._discard_pending()
                self._pending = checkpoint
                self.last_snapshot_version = new_version
            assert new_version > self.version, "version only moves forward"
            self.version, self.uid = new_version, uid
            self._changes, self._undo = {}, {}
            return sealed

    def write(self, sealed: Sealed) -> str:
        """``changelog_write``: the one file this commit writes (never over another attempt's)."""
        if self.provider == "snapshot":
            assert sealed.checkpoint is not None, "the snapshot provider checkpoints every commit"
            path = self.store.state_file(sealed.version, sealed.uid, "snapshot")
            try:
                upload_checkpoint(self.storage, self.store, sealed.checkpoint, path)
            finally:
                shutil.rmtree(sealed.checkpoint.path, ignore_errors=True)
            return path
        path = self.store.state_file(sealed.version, sealed.uid, self.delta_kind)
        header = StateFileHeader(self.delta_kind, sealed.version, sealed.uid, sealed.parent_uid)
        self.storage.write(path, encode_state_file_raw(header, sealed.changes))
        return path

    def mark_durable(self, sealed: Sealed) -> int:
        """``state_commit``: the version is durable and may be named in the commit log."""
        with self._lock:
            self.durable_versions.add(sealed.version)
        return sealed.version

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
                pending = self._pending
                if pending is None or pending.version not in self.durable_versions:
                    return None
                self._pending = None
            try:
                return self._upload_snapshot(pending)
            finally:
                shutil.rmtree(pending.path, ignore_errors=True)

    def schedule_maintenance(self) -> Any:
        """Run ``do_maintenance`` on the background pool (a Future, or None if a round is running)."""
        pool = self._pool or default_pool()
        return pool.submit(self)

    def _upload_snapshot(self, checkpoint: LocalCheckpoint) -> str:
        path = self.store.state_file(checkpoint.version, checkpoint.uid, "snapshot")
        if self.provider == "delta":
            header = StateFileHeader("snapshot", checkpoint.version, checkpoint.uid, checkpoint.parent_uid)
            reader = rocksdict.Rdict(checkpoint.path, self._memory.db_options(),
                                     access_type=rocksdict.AccessType.read_only())
            try:
                data = encode_state_file_raw(header, reader.items())
            finally:
                reader.close()
            self.storage.write(path, data, overwrite=True)
        else:
            upload_checkpoint(self.storage, self.store, checkpoint, path)
        return path

    def cleanup(self, min_versions_to_retain: int) -> list[str]:
        """Delete what no version in ``[version - retain + 1, version]`` needs.

        Same rule as the reference: walk the lineage down from the current
        version to the newest snapshot S at or below the oldest retained
        version and delete every state file below S. An SST is deleted only
        if a deleted manifest referenced it and no remaining manifest does
        (SPARK-55892); if a remaining manifest is unreadable, no SST is
        deleted. Manifests go first, then SSTs, in parallel.
        """
        if min_versions_to_retain < 1:
            raise ValueError("min_versions_to_retain must be >= 1")
        with self._maintenance_lock:
            with self._lock:
                latest, latest_uid = self.version, self.uid
            oldest = max(latest - min_versions_to_retain + 1, 1)
            files = list_state_files(self.storage, self.store)
            v, u = latest, latest_uid
            while v > 0 and not (v <= oldest and (v, u, "snapshot") in files):
                u = self._parent_uid(files, v, u)
                v -= 1
            doomed = sorted(path for (ver, _u, _k), path in files.items() if ver < v)
            dead_ssts = self._unreferenced_ssts(files, v)
            pool = self._pool or default_pool()
            pool.delete_all(self.storage, doomed)
            sst_paths = sorted(self.store.sst_path(name) for name in dead_ssts)
            pool.delete_all(self.storage, sst_paths)
            return doomed + sst_paths

    def _unreferenced_ssts(self, files: dict[StateFileKey, str], keep_from: int) -> set[str]:
        doomed_refs: set[str] = set()
        kept_refs: set[str] = set()
        for (ver, _u, kind), path in files.items():
            if kind != "snapshot":
                continue
            try:
                refs = self._manifest_refs(path)
            except CheckpointFormatError:
                if ver >= keep_from:
                    return set()  # cannot tell what a retained snapshot needs: delete no SST
                continue
            (kept_refs if ver >= keep_from else doomed_refs).update(refs)
        return doomed_refs - kept_refs

    def _manifest_refs(self, path: str) -> set[str]:
        data = self.storage.read(path)
        if data[:4] == MAGIC["snapshot"]:
            return set()
        return {s.dfs_name for s in decode_manifest(data, path).ssts}

    def _parent_uid(self, files: dict[StateFileKey, str], version: int, uid: str) -> str:
        for kind in ("changelog", "delta", "snapshot"):
            path = files.get((version, uid, kind))
            if path is None:
                continue
            data = self.storage.read(path)
            if kind == "snapshot" and data[:4] != MAGIC["snapshot"]:
                return decode_manifest(data, path).parent_uid
            return read_header(data, path).parent_uid
        raise CheckpointFormatError(
            f"{self.store.directory}: no file for version {version} with lineage id {uid!r}")

    # --------------------------------------------------------------- load
    def load(self, version: int, uid: str | None = None) -> LoadReport:
        """Load ``version`` of lineage ``uid`` from the checkpoint directory alone, into a fresh DB."""
        if version < 0:
            raise ValueError(f"version {version} < 0")
        with self._lock:
            self._check_open()
            self._discard_pending()
            self._close_instance()
            files = list_state_files(self.storage, self.store)
            if uid is None:
                uid = resolve_uid(files, self.store, version)
            report = self._rebuild(files, version, uid)
            self.version, self.uid = version, uid
            self.last_snapshot_version = report.base_version
            self.durable_versions = {version}
            self._changes, self._undo = {}, {}
            self.last_load = report
            return report

    def _rebuild(self, files: dict[StateFileKey, str], version: int, uid: str) -> LoadReport:
        chain: list[tuple[str, bytes]] = []
        skipped: list[str] = []
        v, u = version, uid
        while True:
            base: str | None = None
            while v > 0:
                snap = files.get((v, u, "snapshot"))
                if snap is not None and snap not in skipped:
                    base = snap
                    break
                delta = files.get((v, u, "changelog")) or files.get((v, u, "delta"))
                if delta is None:
                    raise CheckpointFormatError(
                        f"{self.store.directory}: cannot load version {version}: no snapshot or changelog "
                        f"for version {v} with lineage id {u!r}")
                data = self.storage.read(delta)
                header = read_header(data, delta)
                if header.version != v or header.uid != u:
                    raise CheckpointFormatError(
                        f"{delta} (version {v}): header says version {header.version} uid {header.uid!r}")
                chain.append((delta, data))
                v, u = v - 1, header.parent_uid
            try:
                self._instance = self._open_instance((base, v, u) if base is not None else None)
                break
            except CheckpointFormatError as exc:
                assert base is not None
                has_changelog = any((v, u, kind) in files for kind in ("changelog", "delta"))
                if not has_changelog:
                    raise CheckpointFormatError(
                        f"{exc}; no changelog of version {v} to fall back on") from None
                skipped.append(base)
        base_version = v
        records = 0
        db = self._instance.db
        for path, data in reversed(chain):
            batch = rocksdict.WriteBatch(raw_mode=True)
            try:
                _header, count = replay_records(data, path, batch.put, batch.delete)
            except CheckpointFormatError:
                self._close_instance()
                raise
            db.write(batch, self._write_options)
            records += count
        return LoadReport(version, uid, base_version, base, tuple(p for p, _ in reversed(chain)),
                          records, tuple(skipped))

    def _open_instance(self, base: tuple[str, int, str] | None) -> _Instance:
        """A new local RocksDB: empty, or restored from the snapshot ``(path, version, uid)``."""
        directory = self._local_dir / f"db-{uuid.uuid4().hex[:12]}"
        hash_cache: dict[tuple[str, int], str] = {}
        try:
            if base is not None:
                path, version, uid = base
                data = self.storage.read(path)
                if data[:4] == MAGIC["snapshot"]:
                    db = self._new_db(directory)
                    batch = rocksdict.WriteBatch(raw_mode=True)
                    header, _count = replay_records(data, path, batch.put, batch.delete)
                    if header.kind != "snapshot" or header.version != version or header.uid != uid:
                        db.close()
                        raise CheckpointFormatError(
                            f"{path} (version {version}): header is {header.kind} v{header.version} "
                            f"uid {header.uid!r}")
                    db.write(batch, self._write_options)
                    return _Instance(directory, db, hash_cache)
                manifest = restore_snapshot(self.storage, self.store, path, version, uid, str(directory))
                hash_cache.update({(s.local_name, s.size_bytes): s.content_hash for s in manifest.ssts})
            return _Instance(directory, self._new_db(directory), hash_cache)
        except BaseException:
            shutil.rmtree(directory, ignore_errors=True)
            raise

    def _new_db(self, directory: Path) -> Any:
        directory.mkdir(parents=True, exist_ok=True)
        db = rocksdict.Rdict(str(directory), self._memory.db_options())
        db.set_write_options(self._write_options)
        return db

    # --------------------------------------------------------- lifecycle
    @property
    def _db(self) -> Any:
        instance = self._instance
        if instance is None:
            raise RuntimeError(f"state store {self.store} is closed or failed to load")
        return instance.db

    def _take_checkpoint(self, version: int, uid: str, parent_uid: str) -> LocalCheckpoint:
        db = self._db
        if self.compact_on_commit:
            db.compact_range(None, None)
        path = self._checkpoint_dir / f"{version}_{uid}-{uuid.uuid4().hex[:8]}"
        rocksdict.Checkpoint(db).create_checkpoint(str(path))
        assert self._instance is not None
        return LocalCheckpoint(str(path), version, uid, parent_uid, self._instance.hash_cache)

    def _discard_pending(self) -> None:
        pending, self._pending = self._pending, None
        if pending is not None:
            shutil.rmtree(pending.path, ignore_errors=True)

    def _close_instance(self) -> None:
        instance, self._instance = self._instance, None
        if instance is not None:
            instance.db.close()
            del instance.db
            shutil.rmtree(instance.directory, ignore_errors=True)

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"state store {self.store} is closed")

    def close(self) -> None:
        """Unload: wait for an in-flight upload (SPARK-48105), drop the local files."""
        with self._maintenance_lock, self._lock:
            if self._closed:
                return
            self._closed = True
            self._discard_pending()
            self._close_instance()
            shutil.rmtree(self._local_dir, ignore_errors=True)

    def crash(self) -> None:
        """Simulate process death: no flush, no waiting; the local directory is gone."""
        with self._lock:
            self._closed = True
            instance, self._instance, self._pending = self._instance, None, None
            if instance is not None:
                instance.db.cancel_all_background(False)
                del instance
            shutil.rmtree(self._local_dir, ignore_errors=True)

    def __enter__(self) -> "RocksDBStateStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


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
        store.load(manifest.version, manifest.uid)
        return store.items()
    finally:
        store.close()
