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
* The batch's changes (last write wins, first-touch order) are encoded as
  changelog records when the key is written, into one buffer per batch
  (``changelog_codec.ChangelogBuffer``), as Spark's changelog writer streams
  records while the batch runs. The commit checksums the buffer and writes
  ``<v>_<uid>.changelog`` (``delta`` for the HDFS-style provider) in one
  storage call, in exactly the reference's binary format: no per-record work
  and no RocksDB flush on the commit path unless a snapshot is due. A range
  delete enumerates its keys, so every deleted key is in the changelog
  (SPARK-55510).
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
* Replay never decodes JSON: the values in RocksDB are the changelog's value
  bytes, so a load checks each file's CRC and feeds its records to RocksDB
  ``WriteBatch``es in chunks (``changelog_codec.replay_chunks``).
* ``share_ssts=False`` makes every snapshot upload copy every SST file (a
  full snapshot), the baseline the commit-latency benchmark measures against.
* Loading version ``j`` walks the uid chain back from ``(j, uid)``: each
  changelog names its parent uid; the walk stops at the newest snapshot on the
  chain. A snapshot that fails to restore is skipped when the changelog of its
  version exists, and the walk continues to an older snapshot (SPARK-21696);
  otherwise the load fails with ``CheckpointFormatError``. Each load builds a
  new RocksDB instance in a new local directory, so files of an abandoned
  instance are never reused (SPARK-45419, 51717); the one exception is a DB
  nothing was ever written to (a store just constructed), which is as empty
  as a new one and takes a replay from version 0.
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
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import rocksdict

from reference import layout
from reference.changelog import MAGIC, StateFileHeader, encode_value
from reference.storage import CheckpointFormatError, Storage

from .changelog_codec import ChangelogBuffer, RawChange, decode_raw, encode_state_file_raw, read_header, replay_chunks
from .checkpoint_fs import StateFileKey, StoreId, list_sst_names, list_state_files, resolve_uid
from .maintenance import MaintenancePool, default_pool
from .memory import MemoryBudget, MemoryUsage, shared_memory
from .sst_files import (
    LocalCheckpoint,
    decode_manifest,
    parse_dfs_sst_name,
    restore_snapshot,
    reusable_ssts,
    upload_checkpoint,
)

PROVIDERS = ("changelog", "delta", "snapshot")
_KINDS = layout.STATE_KINDS
_UID_PATTERN = re.compile(r"^[A-Za-z0-9.-]+$")
DEFAULT_LOCAL_ROOT = Path(tempfile.gettempdir()) / "lightspeed-rocksdb"


class ChangeList(Sequence):
    """A sealed version's changes, (key, value-or-None) in first-touch order, read-only.

    Behaves like the tuple of (key bytes, canonical JSON value bytes or None
    for a delete) pairs: length, iteration, indexing, equality with tuples,
    concatenation. It is a view of the batch's ``ChangelogBuffer``, which the
    store never touches again once sealed, so sealing a batch costs no
    per-change work; a pair is cut out of its record only when read.
    """

    __slots__ = ("_log", "_tuple")

    def __init__(self, log: ChangelogBuffer):
        self._log = log
        self._tuple: tuple[RawChange, ...] | None = None

    def _as_tuple(self) -> tuple[RawChange, ...]:
        if self._tuple is None:
            self._tuple = tuple(self)
        return self._tuple

    def __len__(self) -> int:
        return len(self._log)

    def __iter__(self) -> Iterator[RawChange]:
        return self._log.changes()

    def __getitem__(self, index):  # type: ignore[override]
        return self._as_tuple()[index]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (tuple, ChangeList)):
            return self._as_tuple() == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._as_tuple())

    def __add__(self, other: Iterable[RawChange]) -> tuple[RawChange, ...]:
        return self._as_tuple() + tuple(other)

    def __radd__(self, other: Iterable[RawChange]) -> tuple[RawChange, ...]:
        return tuple(other) + self._as_tuple()

    def __repr__(self) -> str:
        return f"ChangeList({self._as_tuple()!r})"


@dataclass(frozen=True)
class Sealed:
    """A version whose changes are fixed but maybe not yet durable (``task_apply`` ended)."""

    version: int
    uid: str
    parent_uid: str
    changes: Sequence[RawChange]  # tuple-like (a ``ChangeList`` when sealed by the store)
    checkpoint: LocalCheckpoint | None  # a RocksDB checkpoint when a snapshot is due
    # ``changes`` as changelog records, encoded by put / delete (None: encoded on write).
    log: ChangelogBuffer | None = field(default=None, compare=False, repr=False)


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
                 compact_on_commit: bool = False, share_ssts: bool = True):
        if provider not in PROVIDERS:
            raise ValueError(f"state_store.provider {provider!r}: expected one of {PROVIDERS}")
        if min_deltas_for_snapshot < 1:
            raise ValueError(f"min_deltas_for_snapshot must be >= 1, got {min_deltas_for_snapshot}")
        self.storage = storage
        self.store = StoreId(op, partition)
        self.provider = provider
        self.min_deltas_for_snapshot = min_deltas_for_snapshot
        self.compact_on_commit = compact_on_commit
        self.share_ssts = share_ssts
        self._manifest_refs_cache: dict[str, frozenset[str]] = {}
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
        self._log = ChangelogBuffer()  # this batch's changes as changelog records
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
            self._log.put(raw_key, raw_value)

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
            self._log.delete(raw_key)

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
                self._log.delete(raw_key)
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
            self._log = ChangelogBuffer()

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
            sealed = Sealed(new_version, uid, self.uid, ChangeList(self._log), checkpoint, self._log)
            if checkpoint is not None and self.provider != "snapshot":
                self._discard_pending()
                self._pending = checkpoint
                self.last_snapshot_version = new_version
            assert new_version > self.version, "version only moves forward"
            self.version, self.uid = new_version, uid
            self._undo, self._log = {}, ChangelogBuffer()
            return sealed

    def write(self, sealed: Sealed) -> str:
        """``changelog_write``: the one file this commit writes (never over another attempt's)."""
        if self.provider == "snapshot":
            assert sealed.checkpoint is not None, "the snapshot provider checkpoints every commit"
            path = self.store.state_file(sealed.version, sealed.uid, "snapshot")
            try:
                self._upload_manifest_snapshot(sealed.checkpoint, path)
            finally:
                shutil.rmtree(sealed.checkpoint.path, ignore_errors=True)
            return path
        path = self.store.state_file(sealed.version, sealed.uid, self.delta_kind)
        header = StateFileHeader(self.delta_kind, sealed.version, sealed.uid, sealed.parent_uid)
        if sealed.log is not None and len(sealed.log) == len(sealed.changes):
            data = sealed.log.state_file(header)
        else:
            data = encode_state_file_raw(header, sealed.changes)
        self.storage.write(path, data)
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
            self._upload_manifest_snapshot(checkpoint, path)
        return path

    def _upload_manifest_snapshot(self, checkpoint: LocalCheckpoint, path: str) -> None:
        """Upload a RocksDB checkpoint, reusing only SSTs a readable manifest references."""
        if not self.share_ssts:
            reusable: dict[str, str] = {}
        else:
            refs, _unreadable = self._manifest_refs_by_path(list_state_files(self.storage, self.store))
            referenced = set().union(*refs.values()) if refs else set()
            reusable = reusable_ssts(list_sst_names(self.storage, self.store), referenced)
        upload_checkpoint(self.storage, self.store, checkpoint, path, reusable)

    def cleanup(self, min_versions_to_retain: int) -> list[str]:
        """Delete what no version in ``[version - retain + 1, version]`` needs.

        Same rule as the reference: walk the lineage down from the current
        version to the newest snapshot S at or below the oldest retained
        version and delete every state file below S. (If an earlier cleanup
        already purged everything below a newer snapshot, because the store
        was reloaded at an older retained version since, that snapshot is S.)
        Then SSTs: one that a remaining manifest references is kept
        (SPARK-55892); one that only deleted manifests referenced is deleted;
        one that no manifest references (an orphan of an upload that died
        before writing its manifest) is deleted only if the snapshot version
        in its name is below S, so the fresh SSTs of an upload still in
        progress (of a version S or later, whose manifest is not written yet)
        are never touched. If a remaining manifest is unreadable no SST is
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
                parent = self._parent_uid(files, v, u)
                if (v, u, "snapshot") in files and not any((v - 1, parent, kind) in files for kind in _KINDS):
                    # An earlier cleanup purged everything below this snapshot (the store
                    # was since reloaded at an older retained version): nothing more to walk.
                    break
                u, v = parent, v - 1
            doomed = sorted(path for (ver, _u, _k), path in files.items() if ver < v)
            dead_ssts = self._dead_ssts(files, v)
            pool = self._pool or default_pool()
            pool.delete_all(self.storage, doomed)
            sst_paths = sorted(self.store.sst_path(name) for name in dead_ssts)
            pool.delete_all(self.storage, sst_paths)
            return doomed + sst_paths

    def _dead_ssts(self, files: dict[StateFileKey, str], keep_from: int) -> set[str]:
        """The SSTs cleanup may delete when every state file below ``keep_from`` goes."""
        refs, unreadable = self._manifest_refs_by_path(files)
        if any(files_key[0] >= keep_from for files_key in unreadable):
            return set()  # cannot tell what a retained snapshot needs: delete no SST
        kept_refs: set[str] = set()
        doomed_refs: set[str] = set()
        for (ver, _u, _kind), path in files.items():
            if path in refs:
                (kept_refs if ver >= keep_from else doomed_refs).update(refs[path])
        dead: set[str] = set()
        for name in list_sst_names(self.storage, self.store):
            if name in kept_refs:
                continue
            if name in doomed_refs:
                dead.add(name)
                continue
            parsed = parse_dfs_sst_name(name)
            if parsed is not None and parsed[1] is not None and parsed[1] < keep_from:
                dead.add(name)
        return dead

    def _manifest_refs_by_path(self, files: dict[StateFileKey, str]
                               ) -> tuple[dict[str, frozenset[str]], list[StateFileKey]]:
        """SST names each readable snapshot references, and the keys of unreadable ones.

        Parsed manifests are memoized by path (a snapshot file is written
        once per (version, uid)); entries of files no longer listed are dropped.
        """
        cache = self._manifest_refs_cache
        listed = {path for (_v, _u, kind), path in files.items() if kind == "snapshot"}
        for stale in set(cache) - listed:
            cache.pop(stale, None)
        refs: dict[str, frozenset[str]] = {}
        unreadable: list[StateFileKey] = []
        for key, path in files.items():
            if key[2] != "snapshot":
                continue
            found = cache.get(path)
            if found is None:
                try:
                    found = frozenset(self._manifest_refs(path))
                except CheckpointFormatError:
                    unreadable.append(key)
                    continue
                cache[path] = found
            refs[path] = found
        return refs, unreadable

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
        """Load ``version`` of lineage ``uid`` from the checkpoint directory alone, into a fresh DB.

        The DB is new unless the current one was never written to (a store
        just constructed): that one is as empty as a new one and is used for a
        load that replays changelogs from version 0, saving a DB creation.
        """
        if version < 0:
            raise ValueError(f"version {version} < 0")
        with self._lock:
            self._check_open()
            self._discard_pending()
            spare = self._detach_unwritten_instance()
            try:
                files = list_state_files(self.storage, self.store)
                if uid is None:
                    uid = resolve_uid(files, self.store, version)
                report = self._rebuild(files, version, uid, spare)
            finally:
                if spare is not None and self._instance is not spare:
                    _dispose(spare)
            self.version, self.uid = version, uid
            self.last_snapshot_version = report.base_version
            self.durable_versions = {version}
            self._undo, self._log = {}, ChangelogBuffer()
            self.last_load = report
            return report

    def _rebuild(self, files: dict[StateFileKey, str], version: int, uid: str,
                 spare: _Instance | None) -> LoadReport:
        chain: list[tuple[str, bytes]] = []
        skipped: list[str] = []
        damaged: list[str] = []   # why each skipped snapshot was skipped: named again if the fallback fails
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
                    fallback = f"{'; '.join(damaged)}; falling back to an older snapshot failed: " if damaged else ""
                    raise CheckpointFormatError(
                        f"{fallback}{self.store.directory}: cannot load version {version}: no snapshot or "
                        f"changelog for version {v} with lineage id {u!r}")
                data = self.storage.read(delta)
                header = read_header(data, delta)
                if header.version != v or header.uid != u:
                    raise CheckpointFormatError(
                        f"{delta} (version {v}): header says version {header.version} uid {header.uid!r}")
                chain.append((delta, data))
                v, u = v - 1, header.parent_uid
            try:
                self._instance = spare if base is None and spare is not None else self._open_instance(
                    (base, v, u) if base is not None else None)
                break
            except CheckpointFormatError as exc:
                assert base is not None
                has_changelog = any((v, u, kind) in files for kind in ("changelog", "delta"))
                if not has_changelog:
                    raise CheckpointFormatError(
                        f"{exc}; no changelog of version {v} to fall back on") from None
                skipped.append(base)
                damaged.append(str(exc))
        base_version = v
        records = 0
        db = self._instance.db
        for path, data in reversed(chain):
            try:
                records += self._replay_into(db, data, path)
            except CheckpointFormatError:
                instance, self._instance = self._instance, None
                if instance is not spare:
                    _dispose(instance)
                raise
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
                    header = read_header(data, path)
                    if header.kind != "snapshot" or header.version != version or header.uid != uid:
                        raise CheckpointFormatError(
                            f"{path} (version {version}): header is {header.kind} v{header.version} "
                            f"uid {header.uid!r}")
                    db = self._new_db(directory)
                    try:
                        self._replay_into(db, data, path)
                    except BaseException:
                        db.close()
                        raise
                    return _Instance(directory, db, hash_cache)
                manifest = restore_snapshot(self.storage, self.store, path, version, uid, str(directory))
                hash_cache.update({(s.local_name, s.size_bytes): s.content_hash for s in manifest.ssts})
            return _Instance(directory, self._new_db(directory), hash_cache)
        except BaseException:
            shutil.rmtree(directory, ignore_errors=True)
            raise

    def _replay_into(self, db: Any, data: bytes, path: str) -> int:
        """Apply one verified state file to ``db`` in ``WriteBatch`` chunks; returns its record count."""
        batch = None

        def new_batch() -> tuple[Any, Any]:
            nonlocal batch
            batch = rocksdict.WriteBatch(raw_mode=True)
            return batch.put, batch.delete

        count = 0
        write, options = db.write, self._write_options
        for _header, count in replay_chunks(data, path, new_batch):
            write(batch, options)
        return count

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
            _dispose(instance)

    def _detach_unwritten_instance(self) -> _Instance | None:
        """Take the current DB off the store: returned if nothing was ever written to it, else closed."""
        instance, self._instance = self._instance, None
        if instance is None:
            return None
        if instance.db.latest_sequence_number() == 0 and not instance.hash_cache:
            return instance
        _dispose(instance)
        return None

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


def _dispose(instance: _Instance) -> None:
    """Close a local DB and delete its directory (it is never opened again)."""
    instance.db.close()
    del instance.db
    shutil.rmtree(instance.directory, ignore_errors=True)


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
