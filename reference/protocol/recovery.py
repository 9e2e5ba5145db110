"""Where a restarted query resumes, read from the checkpoint alone (spec section 2).

Let L be the latest offset entry and C the latest commit entry. If C = L the
query runs L + 1 next (``resume_after``). Otherwise each mode has its rule
(``modes``, ``restart_plan``), built from the readers here:

- micro-batch, sync progress: every batch C+1..L is re-run with exactly the
  offsets its entry logged (``rerun_logged``: one batch normally, two under
  async state checkpointing, up to ``pipeline_depth`` under pipelining);
- async progress (``AsyncProgressTrackingMicroBatchExecution``): the logs have
  gaps; batch L re-runs from the end offsets of the previous persisted entry,
  so the batches between, never logged, are folded into L;
- real-time mode: the query runs C + 1 next, from the end offsets of C; an
  offset entry newer than C is purged, never re-run.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from . import layout
from .logs import CommitEntry, OffsetEntry, log_batches
from .storage import CheckpointFormatError, Storage


@dataclass(frozen=True)
class RestartPlan:
    first_batch: int
    start_offsets: tuple[int, ...]
    fixed_offsets: dict[int, tuple[tuple[int, ...], tuple[int, ...]]]  # batch -> (start, end) to re-run
    trackers: list[dict[str, Any]] | None                               # None: initial trackers
    lineage: dict[str, dict[str, str]] = field(default_factory=dict)   # uid of version first_batch
    lineage_version: int = 0
    kept_through: int = -1   # last batch of the earlier history that stays part of the result


def fresh_plan(source_partitions: int) -> RestartPlan:
    return RestartPlan(0, (0,) * source_partitions, {}, None)


class RestartRule(Protocol):
    """A mode's restart rule (``modes``): where a restarted query resumes, read from the checkpoint alone."""

    def restart_plan(self, storage: Storage, source_partitions: int) -> RestartPlan: ...


def plan_restart(storage: Storage, rule: RestartRule, source_partitions: int) -> RestartPlan:
    """Where a restarted query resumes under ``rule``, the scenario's mode (``modes.mode_of``)."""
    return rule.restart_plan(storage, source_partitions)


@dataclass(frozen=True)
class RestartLogs:
    """The two logs' ids as a restart reads them: L, the latest offset entry, and C, the latest commit entry."""

    offsets: list[int]
    commits: list[int]
    latest: int
    committed: int | None
    source_partitions: int

    def but_latest(self, latest: int) -> "RestartLogs":
        return replace(self, latest=latest)


@dataclass(frozen=True)
class CommittedBase:
    """What the latest commit entry gives a restart: the watermark trackers and the state lineage."""

    trackers: list[dict[str, Any]] | None   # None: initial trackers
    lineage: dict[str, dict[str, str]]
    version: int


def read_restart_logs(storage: Storage, source_partitions: int) -> RestartLogs | RestartPlan:
    """Both logs' ids; a fresh plan when nothing was logged yet."""
    offsets = log_batches(storage, layout.OFFSETS)
    commits = log_batches(storage, layout.COMMITS)
    if not offsets:
        if commits:
            raise CheckpointFormatError(f"{layout.COMMITS}/{commits[-1]}: commit entry without any offset entry")
        return fresh_plan(source_partitions)
    return RestartLogs(offsets, commits, offsets[-1], commits[-1] if commits else None, source_partitions)


def committed_base(storage: Storage, logs: RestartLogs) -> CommittedBase:
    """The latest commit entry's trackers and lineage (never newer than the latest offset entry)."""
    committed = logs.committed
    if committed is not None and committed > logs.latest:
        raise CheckpointFormatError(f"{layout.commit_path(committed)}: commit entry newer than the latest "
                                    f"offset entry {logs.latest}")
    base = CommitEntry.read(storage, committed) if committed is not None else None
    return CommittedBase(_restored_trackers(base.next_trackers) if base else None,
                         base.state_lineage if base else {}, committed + 1 if committed is not None else 0)


def resume_after(storage: Storage, logs: RestartLogs, base: CommittedBase) -> RestartPlan:
    """C = L: the query runs L + 1 next, from the end offsets of L."""
    entry = OffsetEntry.read(storage, logs.latest)
    return RestartPlan(logs.latest + 1, entry.end, {}, base.trackers, base.lineage, base.version, logs.latest)


def rerun_logged(storage: Storage, logs: RestartLogs, base: CommittedBase) -> RestartPlan:
    """Every batch C+1..L is re-run with exactly the offsets its entry logged."""
    first = logs.committed + 1 if logs.committed is not None else logs.offsets[0]
    fixed = {}
    for batch in range(first, logs.latest + 1):
        if batch not in logs.offsets:
            raise CheckpointFormatError(f"{layout.offset_path(batch)}: missing; cannot re-run batch {batch}")
        entry = OffsetEntry.read(storage, batch)
        fixed[batch] = (entry.start, entry.end)
    return RestartPlan(first, fixed[first][0], fixed, base.trackers, base.lineage, base.version, first - 1)


def _restored_trackers(trackers: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The watermark trackers a restarted query resumes with: the watermarks, but not each input's maximum
    event time, which Spark keeps only in memory (``WatermarkTracker``: the checkpoint holds the combined
    watermark, ``commits/<b>`` ``nextBatchWatermarkMs``). So after a restart a join's watermark moves again
    only once both sides have new data."""
    return [{**tracker, "max_event_ms": {}} for tracker in trackers]
