"""Committing a version: ``seal``, ``write`` (``changelog_write``) and ``mark_durable`` (``state_commit``).

spec section 2 splits a commit into the three protocol steps so async state
checkpointing can separate them, and section 3 fixes the one file each commit
writes: ``<v>_<uid>.changelog`` (``.delta`` for the HDFS-style provider, a
manifest ``.snapshot`` for the ``snapshot`` provider), in exactly the
reference's binary format. This is the commit of Spark's ``RocksDB.scala`` and
``RocksDBStateStoreProvider`` with the changelog writer of
``StateStoreChangelog.scala``.

The commit path does no per-record work: the batch's records were encoded as
they were written (``transaction.py``); ``write`` checksums the buffer and
writes the file in one storage call, with ``overwrite=False``, so a retried
task, a re-run batch or a zombie writer writes beside, never over, and is never
on the committed chain (SPARK-43404, SPARK-19677, SPARK-49374). There is no
RocksDB flush unless a snapshot is due.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from reference.protocol.changelog import StateFileHeader
from reference.protocol.storage import Storage

from .changelog_codec import ChangelogBuffer, RawChange, encode_state_file_raw
from .checkpoint_fs import StoreId
from .lineage import VersionLineage
from .snapshots import Snapshots
from .sst_files import LocalCheckpoint
from .transaction import Transaction


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

    def __getitem__(self, index):
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


class Committer:
    """Seals the open batch, writes its state file, and marks the version durable."""

    def __init__(self, storage: Storage, store: StoreId, provider: str, min_deltas_for_snapshot: int,
                 lineage: VersionLineage, transaction: Transaction, snapshots: Snapshots):
        self.storage, self.store, self.provider = storage, store, provider
        self.min_deltas_for_snapshot = min_deltas_for_snapshot
        self.lineage, self.transaction, self.snapshots = lineage, transaction, snapshots

    @property
    def delta_kind(self) -> str:
        return "delta" if self.provider == "delta" else "changelog"

    def seal(self, uid: str) -> Sealed:
        """End of ``task_apply``: fix this version's changes and advance the version."""
        lineage = self.lineage
        new_version = lineage.next_version()
        checkpoint = None
        if self.provider == "snapshot" or lineage.snapshot_due(new_version, self.min_deltas_for_snapshot):
            checkpoint = self.snapshots.checkpoint(new_version, uid, lineage.uid)
        log = self.transaction.hand_over()
        sealed = Sealed(new_version, uid, lineage.uid, ChangeList(log), checkpoint, log)
        if checkpoint is not None and self.provider != "snapshot":
            self.snapshots.hold(checkpoint)
            lineage.last_snapshot_version = new_version
        lineage.advance(new_version, uid)
        return sealed

    def write(self, sealed: Sealed) -> str:
        """``changelog_write``: the one file this commit writes (never over another attempt's)."""
        if self.provider == "snapshot":
            assert sealed.checkpoint is not None, "the snapshot provider checkpoints every commit"
            return self.snapshots.upload(sealed.checkpoint)
        path = self.store.state_file(sealed.version, sealed.uid, self.delta_kind)
        self.storage.write(path, self._state_file_bytes(sealed))
        return path

    def _state_file_bytes(self, sealed: Sealed) -> bytes:
        header = StateFileHeader(self.delta_kind, sealed.version, sealed.uid, sealed.parent_uid)
        if sealed.log is not None and len(sealed.log) == len(sealed.changes):
            return sealed.log.state_file(header)
        return encode_state_file_raw(header, sealed.changes)

    def mark_durable(self, sealed: Sealed) -> int:
        """``state_commit``: the version is durable and may be named in the commit log."""
        self.lineage.mark_durable(sealed.version, sealed.uid)
        return sealed.version
