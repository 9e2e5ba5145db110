"""Taking a store's snapshots and uploading them (spec section 2, ``snapshot_upload``).

The snapshot half of Spark's ``RocksDB.scala`` (``commit`` takes a checkpoint
when ``minDeltasForSnapshot`` versions have passed, ``doMaintenance`` uploads it)
and the upload of ``RocksDBFileManager.saveCheckpointToDfs`` (in
``sst_files.py``). A due commit takes a RocksDB checkpoint (hard links,
immutable) and leaves it *pending*; maintenance uploads the newest pending one
once its version is durable. The ``snapshot`` provider instead uploads one on
every commit, synchronously.

- The ``changelog`` and ``snapshot`` providers upload a manifest of shared SSTs
  (``sst_files.py``), reusing only SSTs a readable manifest references now
  (``manifest_index.py``, SPARK-55892); ``share_ssts=False`` copies every SST
  (a full snapshot: the baseline of the commit-latency benchmark).
- The ``delta`` provider uploads the reference's binary snapshot format.
- A load discards a pending checkpoint maintenance has not taken yet; one
  already being uploaded is a true image of its own (version, uid), so its
  late arrival is never read as another lineage's version (SPARK-47568,
  SPARK-49363, SPARK-49770).
"""

from __future__ import annotations

import shutil
from collections.abc import Container, Iterable
from typing import cast

from reference.protocol.changelog import StateFileHeader
from reference.protocol.storage import Storage

from .changelog_codec import RawChange, encode_state_file_raw
from .checkpoint_fs import StoreId, list_sst_names, list_state_files
from .local_db import LocalWorkspace
from .manifest_index import ManifestIndex
from .sst_files import LocalCheckpoint, reusable_ssts, upload_checkpoint


class Snapshots:
    """One store's pending snapshot checkpoint and its upload."""

    def __init__(self, storage: Storage, store: StoreId, provider: str, workspace: LocalWorkspace,
                 index: ManifestIndex, *, share_ssts: bool, compact_on_commit: bool):
        self.storage, self.store, self.provider = storage, store, provider
        self.workspace, self.index = workspace, index
        self.share_ssts, self.compact_on_commit = share_ssts, compact_on_commit
        self.pending: LocalCheckpoint | None = None

    def checkpoint(self, version: int, uid: str, parent_uid: str) -> LocalCheckpoint:
        """A local checkpoint of the open DB as ``version`` (compacted first if ``compact_on_commit``)."""
        return self.workspace.checkpoint(version, uid, parent_uid, self.compact_on_commit)

    def hold(self, checkpoint: LocalCheckpoint) -> None:
        """Keep ``checkpoint`` for maintenance; it replaces an older pending one."""
        self.discard_pending()
        self.pending = checkpoint

    def discard_pending(self) -> None:
        pending, self.pending = self.pending, None
        if pending is not None:
            shutil.rmtree(pending.path, ignore_errors=True)

    def take_if_durable(self, durable_versions: Container[int]) -> LocalCheckpoint | None:
        """Hand the pending checkpoint to maintenance once its version is durable."""
        pending = self.pending
        if pending is None or pending.version not in durable_versions:
            return None
        self.pending = None
        return pending

    def upload(self, checkpoint: LocalCheckpoint) -> str:
        """Upload ``checkpoint`` as ``<v>_<uid>.snapshot``, then drop it locally.

        Maintenance uploads the pending checkpoint this way; the ``snapshot``
        provider's commit uploads its own, the version's one state file.
        """
        path = self.store.state_file(checkpoint.version, checkpoint.uid, "snapshot")
        try:
            if self.provider == "delta":
                self._upload_binary(checkpoint, path)
            else:
                self._upload_manifest(checkpoint, path)
            return path
        finally:
            shutil.rmtree(checkpoint.path, ignore_errors=True)

    def _upload_binary(self, checkpoint: LocalCheckpoint, path: str) -> None:
        header = StateFileHeader("snapshot", checkpoint.version, checkpoint.uid, checkpoint.parent_uid)
        reader = self.workspace.open_read_only(checkpoint.path)
        try:
            data = encode_state_file_raw(header, cast(Iterable[RawChange], reader.items()))
        finally:
            reader.close()
        self.storage.write(path, data, overwrite=True)

    def _upload_manifest(self, checkpoint: LocalCheckpoint, path: str) -> None:
        """Upload a RocksDB checkpoint, reusing only SSTs a readable manifest references."""
        reusable: dict[str, str] = {}
        if self.share_ssts:
            refs, _unreadable = self.index.refs_by_path(list_state_files(self.storage, self.store))
            referenced: set[str] = set().union(*refs.values()) if refs else set()
            reusable = reusable_ssts(list_sst_names(self.storage, self.store), referenced)
        upload_checkpoint(self.storage, self.store, checkpoint, path, reusable)
