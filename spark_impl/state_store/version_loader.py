"""Loading a version from the checkpoint directory alone (spec section 2 ``state_load``, section 5).

Spark's ``RocksDB.load`` with ``RocksDBFileManager.loadCheckpointFromDfs`` and
the changelog reader of ``StateStoreChangelog.scala``: loading version ``j``
walks the uid chain back from ``(j, uid)``; each changelog names its parent
uid, and the walk stops at the newest snapshot on the chain. The base (that
snapshot, or an empty DB at version 0) goes into a new local RocksDB; the
changelogs above it are replayed in ``WriteBatch`` chunks, each file's CRC
checked first (values in RocksDB are the changelog's value bytes, so replay
never decodes JSON).

SPARK-21696: a snapshot that fails to restore is skipped when the changelog of
its own version exists, and the walk continues below it to an older snapshot
(or version 0). Without that changelog the load fails with
``CheckpointFormatError``, and an error met further down names every snapshot
skipped on the way, so the cause is never lost.

Every load builds a new instance in a new directory (``local_db.py``); the one
exception is a DB nothing was ever written to (a store just constructed),
which is as empty as a new one and takes a replay from version 0.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from reference.protocol.changelog import MAGIC
from reference.protocol.storage import CheckpointFormatError, Storage

from .changelog_codec import read_header
from .checkpoint_fs import StateFileKey, StoreId, list_state_files, resolve_uid
from .local_db import LocalDB, LocalWorkspace
from .sst_files import restore_snapshot


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
    skip_reasons: tuple[str, ...] = ()      # why each skipped snapshot was skipped, in the same order
    newer_files: tuple[str, ...] = ()       # state files of later versions on file at the load (a dead lineage)


@dataclass
class _Walk:
    """A lineage walk in progress: where it stands, what it will replay, which snapshots it gave up on."""

    version: int
    uid: str
    at_version: int
    at_uid: str
    chain: list[tuple[str, bytes]] = field(default_factory=list)   # (path, bytes), newest first
    skipped: list[str] = field(default_factory=list)
    damaged: list[str] = field(default_factory=list)               # why each skipped snapshot was skipped

    def failed_fallback(self) -> str:
        """A prefix naming the skipped snapshots, for an error met after falling back past them."""
        if not self.damaged:
            return ""
        return f"{'; '.join(self.damaged)}; falling back to an older snapshot failed: "


class VersionLoader:
    """Rebuilds one version of one store into the workspace's open DB."""

    def __init__(self, storage: Storage, store: StoreId, workspace: LocalWorkspace):
        self.storage, self.store, self.workspace = storage, store, workspace

    def load(self, version: int, uid: str | None) -> LoadReport:
        """Load ``version`` of lineage ``uid`` (the single one on file when None) into a fresh DB."""
        spare = self.workspace.detach_unwritten()
        try:
            files = list_state_files(self.storage, self.store)
            if uid is None:
                uid = resolve_uid(files, self.store, version)
            report = self._rebuild(files, version, uid, spare)
            return replace(report, newer_files=tuple(sorted(p for (v, _u, _k), p in files.items() if v > version)))
        finally:
            if spare is not None and self.workspace.current is not spare:
                spare.dispose()

    def _rebuild(self, files: dict[StateFileKey, str], version: int, uid: str, spare: LocalDB | None) -> LoadReport:
        walk = _Walk(version, uid, version, uid)
        while True:
            base = self._walk_to_base(files, walk)
            try:
                self.workspace.current = spare if base is None and spare is not None else \
                    self._open_instance(base, walk.at_version, walk.at_uid)
                break
            except CheckpointFormatError as exc:
                self._fall_back_below(files, walk, base, exc)
        records = self._replay(walk.chain, spare)
        replayed = tuple(path for path, _data in reversed(walk.chain))
        assert len(replayed) == version - walk.at_version, "a load replays exactly the versions above its base"
        return LoadReport(version, uid, walk.at_version, base, replayed, records, tuple(walk.skipped),
                          tuple(walk.damaged))

    def _walk_to_base(self, files: dict[StateFileKey, str], walk: _Walk) -> str | None:
        """Walk down collecting changelogs to the newest usable snapshot; None at version 0."""
        while walk.at_version > 0:
            v, u = walk.at_version, walk.at_uid
            snapshot = files.get((v, u, "snapshot"))
            if snapshot is not None and snapshot not in walk.skipped:
                return snapshot
            delta = files.get((v, u, "changelog")) or files.get((v, u, "delta"))
            if delta is None:
                raise CheckpointFormatError(
                    f"{walk.failed_fallback()}{self.store.directory}: cannot load version {walk.version}: "
                    f"no snapshot or changelog for version {v} with lineage id {u!r}")
            data = self.storage.read(delta)
            header = read_header(data, delta)
            if header.version != v or header.uid != u:
                raise CheckpointFormatError(
                    f"{delta} (version {v}): header says version {header.version} uid {header.uid!r}")
            walk.chain.append((delta, data))
            walk.at_version, walk.at_uid = v - 1, header.parent_uid
        return None

    def _fall_back_below(self, files: dict[StateFileKey, str], walk: _Walk, base: str | None,
                         exc: CheckpointFormatError) -> None:
        """SPARK-21696: skip the damaged snapshot if its version's changelog exists, else fail loudly."""
        assert base is not None, "only a snapshot base can fail to open"
        if not any((walk.at_version, walk.at_uid, kind) in files for kind in ("changelog", "delta")):
            raise CheckpointFormatError(f"{exc}; no changelog of version {walk.at_version} to fall back on") from None
        walk.skipped.append(base)
        walk.damaged.append(str(exc))

    def _open_instance(self, base: str | None, version: int, uid: str) -> LocalDB:
        """A new local RocksDB: empty, or restored from the snapshot ``base`` of (version, uid)."""
        if base is None:
            return self.workspace.open_empty()
        directory = self.workspace.new_instance_directory()
        try:
            data = self.storage.read(base)
            if data[:4] == MAGIC["snapshot"]:
                return self._restore_binary(directory, base, data, version, uid)
            manifest = restore_snapshot(self.storage, self.store, base, version, uid, str(directory))
            hash_cache = {(s.local_name, s.size_bytes): s.content_hash for s in manifest.ssts}
            return LocalDB(directory, self._open_restored(directory, base), hash_cache)
        except BaseException:
            shutil.rmtree(directory, ignore_errors=True)
            raise

    def _open_restored(self, directory: Path, base: str) -> Any:
        """Open the DB a snapshot manifest restored. SSTs that match their manifest entries can still disagree
        with RocksDB's own MANIFEST among the inline files; rocksdict reports that as a plain ``Exception``
        ("Corruption: ..."), which becomes a ``CheckpointFormatError`` naming the snapshot, so the load falls
        back past it as it does past any damaged snapshot, and a verifier names the file."""
        try:
            return self.workspace.open_db(directory)
        except Exception as exc:
            if type(exc) is not Exception:   # rocksdict's RocksDB errors are plain Exceptions; others are bugs
                raise
            raise CheckpointFormatError(f"{base}: RocksDB cannot open the restored snapshot: {exc}") from None

    def _restore_binary(self, directory: Path, path: str, data: bytes, version: int, uid: str) -> LocalDB:
        """A binary snapshot (the ``delta`` provider's): replayed into a new DB after its header is checked."""
        header = read_header(data, path)
        if header.kind != "snapshot" or header.version != version or header.uid != uid:
            raise CheckpointFormatError(
                f"{path} (version {version}): header is {header.kind} v{header.version} uid {header.uid!r}")
        db = self.workspace.open_db(directory)
        try:
            self.workspace.replay_into(db, data, path)
        except BaseException:
            db.close()
            raise
        return LocalDB(directory, db)

    def _replay(self, chain: list[tuple[str, bytes]], spare: LocalDB | None) -> int:
        """Replay the collected changelogs, oldest first; a damaged one leaves the store with no DB."""
        db = self.workspace.db
        records = 0
        for path, data in reversed(chain):
            try:
                records += self.workspace.replay_into(db, data, path)
            except CheckpointFormatError:
                current, self.workspace.current = self.workspace.current, None
                if current is not None and current is not spare:
                    current.dispose()
                raise
        return records
