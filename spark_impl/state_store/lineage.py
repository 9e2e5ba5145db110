"""Which versions one store holds, and which of them are durable under which lineage id.

spec section 2: version ``v`` is the state after batches ``0..v-1``; ``seal``
advances the in-memory version, ``state_commit`` makes a sealed version durable;
section 3: every state file names the attempt (lineage id) that wrote it. This
is the bookkeeping of Spark's ``RocksDB.scala`` (``loadedVersion``,
``lastSnapshotVersion``, and the checkpoint ids of format v2, SPARK-49374),
with the invariants the reference's ``StateStore`` asserts, checked on every
call (TIGER_STYLE):

- sealing moves the version forward by exactly one; only a load moves it back;
- at most one sealed version is pending (not yet durable) when the next is sealed;
- a commit lands on the store's own line: above the version it was loaded at,
  at most the version it has sealed;
- the lineage id of a committed version never changes.

The reference also asserts that each commit is at or above every earlier one.
This store does not: under async state checkpointing the Spark engine runs the
background commits of consecutive batches of a partition on separate threads,
unordered, so version v+1 may be marked durable before version v; nothing in
the store relies on that order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

UID_PATTERN = re.compile(r"^[A-Za-z0-9.-]+$")


def check_uid(uid: str) -> None:
    """A lineage id goes into file names: letters, digits, dots and dashes only."""
    if not UID_PATTERN.match(uid):
        raise ValueError(f"lineage uid {uid!r} must match {UID_PATTERN.pattern}")


@dataclass
class VersionLineage:
    """The in-memory version and uid, the durable versions with their uids, and the last snapshot's version."""

    name: str                      # the store, for assertion messages
    version: int = 0
    uid: str = ""
    last_snapshot_version: int = 0
    loaded_version: int = 0        # the version the store was last rebuilt at (0: never loaded)
    durable: dict[int, str] = field(default_factory=lambda: {0: ""})

    def snapshot_due(self, version: int, min_deltas_for_snapshot: int) -> bool:
        """spec section 2: a snapshot when ``v - last_snapshot >= min_deltas_for_snapshot``."""
        return version - self.last_snapshot_version >= min_deltas_for_snapshot

    def next_version(self) -> int:
        """The version the next seal creates; at most one sealed version may still be pending."""
        pending = self.version - max(self.durable)
        assert pending <= 1, f"{self.name}: {pending} state commits pending; at most one may be"
        return self.version + 1

    def advance(self, version: int, uid: str) -> None:
        """``seal``: the in-memory version moves forward by exactly one."""
        assert version == self.version + 1, f"{self.name}: sealed version {version} after {self.version}"
        self.version, self.uid = version, uid

    def mark_durable(self, version: int, uid: str) -> None:
        """``state_commit``: ``version`` of lineage ``uid`` is durable."""
        assert self.loaded_version < version <= self.version, \
            f"{self.name}: commit of version {version} outside ({self.loaded_version}, {self.version}]"
        known = self.durable.setdefault(version, uid)
        assert known == uid, f"{self.name}: version {version} was committed as {known!r}, now as {uid!r}"

    def reset(self, version: int, uid: str, base_version: int) -> None:
        """A load rebuilt ``version`` (lineage ``uid``) from a snapshot of ``base_version``."""
        assert base_version <= version, f"{self.name}: base {base_version} above loaded version {version}"
        self.version, self.uid = version, uid
        self.loaded_version = version
        self.last_snapshot_version = base_version
        self.durable = {version: uid}
