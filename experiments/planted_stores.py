"""Copies of the RocksDB state store with one real Spark bug planted in each (spec section 6).

Never on the shipped code path: nothing in ``spark_impl`` imports this
module, and the shipped store has no flag that turns a bug on. Each class
here subclasses ``spark_impl.state_store.RocksDBStateStore`` (or swaps in a
subclass of one of its parts) and overrides the one method that holds the
mistake, so the rest of the store is the real one. ``lightspeed zoo``
(``experiments/zoo.py``) runs each bug's sequence on its planted copy and on
the real store and shows which check catches the difference.

The SST mistakes (SPARK-45419, SPARK-51717, SPARK-55892) share
``RememberingSnapshots``: an upload that reuses SSTs from a memory of earlier
uploads instead of deciding from the checkpoint as it is now. They differ in
what the memory is keyed by and when it is forgotten.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from reference.protocol.storage import CheckpointFormatError

from spark_impl.state_store import RocksDBStateStore
from spark_impl.state_store.checkpoint_fs import list_state_files
from spark_impl.state_store.cleanup import parent_uid
from spark_impl.state_store.commit import Sealed
from spark_impl.state_store.manifest_index import ManifestIndex
from spark_impl.state_store.snapshots import Snapshots
from spark_impl.state_store.sst_files import (
    LocalCheckpoint,
    SnapshotManifest,
    SstEntry,
    _inline_file,
    content_hash,
    dfs_sst_name,
    sst_identity,
)
from spark_impl.state_store.version_loader import LoadReport, VersionLoader, _Walk


def _same_version_file(store: RocksDBStateStore, version: int) -> str | None:
    """A state file of ``version`` of this store's kind, of any attempt."""
    files = list_state_files(store.storage, store.store)
    return next((path for (v, _u, kind), path in sorted(files.items())
                 if v == version and kind == store.delta_kind), None)


class ReusesOtherAttemptsFile(RocksDBStateStore):
    """SPARK-43404: a retry that finds a file of its version already there (the failed attempt's) reuses it."""

    def write(self, sealed: Sealed) -> str:
        existing = _same_version_file(self, sealed.version)
        if existing is not None:
            return existing  # "already uploaded": the retry's own changes are never written
        return super().write(sealed)


class RerunRewritesDelta(RocksDBStateStore):
    """SPARK-19677: a re-run batch writes its delta over the existing file of that version."""

    def write(self, sealed: Sealed) -> str:
        existing = _same_version_file(self, sealed.version)
        if existing is None:
            return super().write(sealed)
        self.storage.write(existing, self._committer._state_file_bytes(sealed), overwrite=True)
        return existing


class AbortCancelsInFlightCommit(RocksDBStateStore):
    """SPARK-46711: a rollback does not wait for an in-flight commit and aborts its changelog writer.

    The commit carries on and marks the version durable; the rollback's abort
    of the writer removed the changelog it was writing.
    """

    def __init__(self, *args: Any, **kw: Any):
        super().__init__(*args, **kw)
        self._writing = False
        self._cancelled = False

    def write(self, sealed: Sealed) -> str:
        self._writing, self._cancelled = True, False
        try:
            path = super().write(sealed)
            if self._cancelled:
                self.storage.delete(path)  # the aborted writer's file is dropped
            return path
        finally:
            self._writing = False

    def abort(self) -> None:
        if self._writing:   # no lock: the rollback runs beside the commit
            self._cancelled = True
        self._transaction.abort()


class UnloadDoesNotWaitForUpload(RocksDBStateStore):
    """SPARK-48105: unloading the store deletes its local files while maintenance is still uploading them."""

    def close(self) -> None:
        with self._lock:   # the task lock only: an upload holding the maintenance lock is not waited for
            if self._closed:
                return
            self._closed = True
            self._snapshots.discard_pending()
            self._workspace.close()


class RangeDeleteNotLogged(RocksDBStateStore):
    """SPARK-55510: a range delete removes the keys from the live DB but writes nothing to the changelog."""

    def delete_range(self, start: str, end: str) -> None:
        with self._lock:
            if start >= end:
                return
            transaction = self._transaction
            for raw_key, raw_value in transaction._keys_in_range(start.encode(), end.encode()):
                transaction._undo.setdefault(raw_key, raw_value)
                del self._workspace.db[raw_key]


class _NoFallbackLoader(VersionLoader):
    def _fall_back_below(self, files: Any, walk: _Walk, base: str | None, exc: CheckpointFormatError) -> None:
        raise exc


class NoSnapshotFallback(RocksDBStateStore):
    """SPARK-21696: a snapshot that fails to restore fails the load, though its version's changelog is there."""

    def __init__(self, *args: Any, **kw: Any):
        super().__init__(*args, **kw)
        self._loader = _NoFallbackLoader(self.storage, self.store, self._workspace)


class SnapshotsReloadedVersionAgain(RocksDBStateStore):
    """SPARK-49363 / SPARK-49770: after reloading a version from its own snapshot, maintenance snapshots that
    version again, from the live DB as it is by then, and uploads it over the existing snapshot."""

    def __init__(self, *args: Any, **kw: Any):
        super().__init__(*args, **kw)
        self._again: tuple[int, str, str] | None = None

    def load(self, version: int, uid: str | None = None) -> LoadReport:
        report = super().load(version, uid)
        if report.base_file is not None and report.base_version == version:
            files = list_state_files(self.storage, self.store)
            self._again = (version, report.uid, parent_uid(self.storage, self.store, files, version, report.uid))
        return report

    def do_maintenance(self) -> str | None:
        uploaded = super().do_maintenance()
        again, self._again = self._again, None
        if again is None:
            return uploaded
        with self._maintenance_lock:
            with self._lock:
                checkpoint = self._workspace.checkpoint(*again, compact=False)
            return self._snapshots.upload(checkpoint)


# ------------------------------------------------------------ planted SST uploads


class PlantedSnapshots(Snapshots):
    """A snapshot upload written out here (SSTs, then the manifest, no repair), with hooks for one mistake."""

    def manifest_path(self, checkpoint: LocalCheckpoint) -> str:
        return self.store.state_file(checkpoint.version, checkpoint.uid, "snapshot")

    def reused(self, name: str, full: Path, checkpoint: LocalCheckpoint) -> SstEntry | None:
        return None

    def uploaded(self, entries: dict[str, SstEntry], checkpoint: LocalCheckpoint) -> None:
        pass

    def upload(self, checkpoint: LocalCheckpoint) -> str:
        try:
            ssts: list[SstEntry] = []
            others = []
            root = Path(checkpoint.path)
            for name in sorted(os.listdir(root)):
                full = root / name
                if not full.is_file():
                    continue
                if not name.endswith(".sst"):
                    others.append(_inline_file(full))
                    continue
                entry = self.reused(name, full, checkpoint)
                if entry is None:
                    data = full.read_bytes()
                    digest = content_hash(data)
                    entry = SstEntry(name, dfs_sst_name(name, digest, checkpoint.version), len(data), digest)
                    self.storage.write(self.store.sst_path(entry.dfs_name), data, overwrite=True)
                ssts.append(entry)
            manifest = SnapshotManifest(checkpoint.version, checkpoint.uid, checkpoint.parent_uid,
                                        tuple(ssts), tuple(others))
            path = self.manifest_path(checkpoint)
            self.storage.write(path, manifest.encode(), overwrite=True)
            self.uploaded({e.local_name: e for e in ssts}, checkpoint)
            return path
        finally:
            shutil.rmtree(checkpoint.path, ignore_errors=True)


class RememberingSnapshots(PlantedSnapshots):
    """Reuses an SST found in a memory of earlier uploads, keyed by ``key`` (local name or content identity)."""

    def __init__(self, *args: Any, key: Callable[[str, Path, LocalCheckpoint], str], **kw: Any):
        super().__init__(*args, **kw)
        self.key = key
        self.memory: dict[str, SstEntry] = {}

    def reused(self, name: str, full: Path, checkpoint: LocalCheckpoint) -> SstEntry | None:
        found = self.memory.get(self.key(name, full, checkpoint))
        return None if found is None else SstEntry(name, found.dfs_name, found.size_bytes, found.content_hash)

    def uploaded(self, entries: dict[str, SstEntry], checkpoint: LocalCheckpoint) -> None:
        for name, entry in entries.items():
            self.memory[self.key(name, Path(checkpoint.path) / name, checkpoint)] = entry


def by_local_name(name: str, full: Path, checkpoint: LocalCheckpoint) -> str:
    return name


def by_content(name: str, full: Path, checkpoint: LocalCheckpoint) -> str:
    """The SST's identity (local stem and content hash), hashed once per file and remembered by the checkpoint."""
    size = full.stat().st_size if full.exists() else -1
    digest = checkpoint.hash_cache.get((name, size))
    if digest is None:
        digest = content_hash(full.read_bytes())
        checkpoint.hash_cache[(name, size)] = digest
    return sst_identity(name, digest)


class _WithPlantedSnapshots(RocksDBStateStore):
    """Swaps the store's snapshot part for a planted one (the committer shares it)."""

    def planted_snapshots(self, **common: Any) -> Snapshots:
        raise NotImplementedError

    def __init__(self, *args: Any, **kw: Any):
        super().__init__(*args, **kw)
        original = self._snapshots
        planted = self.planted_snapshots(storage=self.storage, store=self.store, provider=self.provider,
                                         workspace=self._workspace, index=ManifestIndex(self.storage),
                                         share_ssts=original.share_ssts,
                                         compact_on_commit=original.compact_on_commit)
        self._snapshots = planted
        self._committer.snapshots = planted


class _RemembersSsts(_WithPlantedSnapshots):
    """Uploads through ``RememberingSnapshots`` keyed by ``sst_key``; a load clears the memory iff
    ``forgets_on_load``."""

    sst_key: Callable[[str, Path, LocalCheckpoint], str] = staticmethod(by_local_name)
    forgets_on_load = False

    def planted_snapshots(self, **common: Any) -> Snapshots:
        return RememberingSnapshots(*_positional(common), key=self.sst_key, **_keywords(common))

    def load(self, version: int, uid: str | None = None) -> LoadReport:
        report = super().load(version, uid)
        if self.forgets_on_load:
            self._snapshots.memory.clear()  # type: ignore[attr-defined]
        return report


class RollbackKeepsSstMemory(_RemembersSsts):
    """SPARK-45419: SSTs are reused by local file name from a memory of this store's uploads, and a rollback
    (a load of an older version) keeps the memory of the versions above it."""


class InFlightUploadRefillsSstMemory(_RemembersSsts):
    """SPARK-51717: as SPARK-45419's fix, a load forgets the SST memory, but an upload still in flight at the
    load records its SSTs afterwards, under local names the reloaded DB will use again."""

    forgets_on_load = True


class ReusesRememberedSsts(_RemembersSsts):
    """SPARK-55892: SSTs are reused by content from a memory of this store's uploads, without looking whether
    they are still in the checkpoint (another executor's maintenance may have deleted them)."""

    sst_key = staticmethod(by_content)
    forgets_on_load = True


class NamesSnapshotAtUploadTime(_WithPlantedSnapshots):
    """SPARK-47568: maintenance names the snapshot it uploads by the version the store holds when the upload
    finishes, not by the version the checkpoint was taken at; a reload in between mislabels it."""

    def planted_snapshots(self, **common: Any) -> Snapshots:
        lineage = self._lineage

        class NamedLate(PlantedSnapshots):
            def manifest_path(self, checkpoint: LocalCheckpoint) -> str:
                return self.store.state_file(lineage.version, lineage.uid, "snapshot")

        return NamedLate(*_positional(common), **_keywords(common))


def _positional(common: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(common[k] for k in ("storage", "store", "provider", "workspace", "index"))


def _keywords(common: dict[str, Any]) -> dict[str, Any]:
    return {k: common[k] for k in ("share_ssts", "compact_on_commit")}


# jira -> (the planted mistake, in one line; the planted store class)
PLANTED: dict[str, tuple[str, type[RocksDBStateStore]]] = {
    "SPARK-43404": ("a retry reuses the failed attempt's file of the same version instead of writing its own",
                    ReusesOtherAttemptsFile),
    "SPARK-45419": ("SSTs reused by local file name from a memory of uploads that a rollback does not clear",
                    RollbackKeepsSstMemory),
    "SPARK-46711": ("a rollback does not wait for the in-flight commit and aborts its changelog writer",
                    AbortCancelsInFlightCommit),
    "SPARK-47568": ("maintenance names the uploaded snapshot by the store's version when the upload ends",
                    NamesSnapshotAtUploadTime),
    "SPARK-48105": ("unload deletes the local files without waiting for the snapshot upload",
                    UnloadDoesNotWaitForUpload),
    "SPARK-49363/SPARK-49770": ("a version reloaded from its snapshot is snapshotted again later, from the live "
                                "DB, over its snapshot", SnapshotsReloadedVersionAgain),
    "SPARK-51717": ("SST memory cleared by a reload is refilled by the upload in flight at the reload",
                    InFlightUploadRefillsSstMemory),
    "SPARK-55892": ("SSTs reused from a memory of uploads without checking they are still in the checkpoint",
                    ReusesRememberedSsts),
    "SPARK-55510": ("a range delete changes the live DB but is not written to the changelog",
                    RangeDeleteNotLogged),
    "SPARK-19677": ("a re-run batch writes its delta over the first run's file of that version",
                    RerunRewritesDelta),
    "SPARK-21696": ("a snapshot that fails to restore fails the load; no fallback to older snapshot and deltas",
                    NoSnapshotFallback),
}
