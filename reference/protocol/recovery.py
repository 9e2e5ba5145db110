"""Where a restarted query resumes, read from the checkpoint alone (spec section 2).

Sync progress: let L be the latest offset entry and C the latest commit entry.
If C = L the query runs L + 1 next. Otherwise every batch C+1..L is re-run
with exactly the offsets its entry logged (one batch normally, two under async
state checkpointing, up to ``pipeline_depth`` under pipelining).

Async progress (``AsyncProgressTrackingMicroBatchExecution``): the logs have
gaps. If ``commits/L`` exists the query runs L + 1; otherwise it re-runs batch
L starting at the end offsets of the previous persisted entry P, so batches
P+1..L-1, never logged, are folded into L.

Real-time mode (``real_time.py``): the query runs C + 1 next, from the end
offsets of C; an offset entry newer than C is purged, never re-run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

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


def plan_restart(storage: Storage, progress_mode: str, source_partitions: int) -> RestartPlan:
    offsets = log_batches(storage, layout.OFFSETS)
    commits = log_batches(storage, layout.COMMITS)
    if not offsets:
        if commits:
            raise CheckpointFormatError(f"{layout.COMMITS}/{commits[-1]}: commit entry without any offset entry")
        return fresh_plan(source_partitions)
    latest = offsets[-1]
    committed = commits[-1] if commits else None
    if progress_mode == "real_time":
        if committed is None:
            return fresh_plan(source_partitions)
        if committed < latest:
            latest = committed   # the entries after the last commit are purged, not re-run
    if committed is not None and committed > latest:
        raise CheckpointFormatError(f"{layout.commit_path(committed)}: commit entry newer than the latest "
                                    f"offset entry {latest}")
    base = CommitEntry.read(storage, committed) if committed is not None else None
    trackers = _restored_trackers(base.next_trackers) if base else None
    lineage = base.state_lineage if base else {}
    version = committed + 1 if committed is not None else 0
    if committed == latest:
        entry = OffsetEntry.read(storage, latest)
        return RestartPlan(latest + 1, entry.end, {}, trackers, lineage, version, latest)
    if progress_mode == "sync":
        first = committed + 1 if committed is not None else offsets[0]
        fixed = {}
        for batch in range(first, latest + 1):
            if batch not in offsets:
                raise CheckpointFormatError(f"{layout.offset_path(batch)}: missing; cannot re-run batch {batch}")
            entry = OffsetEntry.read(storage, batch)
            fixed[batch] = (entry.start, entry.end)
        return RestartPlan(first, fixed[first][0], fixed, trackers, lineage, version, first - 1)
    previous = [b for b in offsets if b < latest]
    start = OffsetEntry.read(storage, previous[-1]).end if previous else (0,) * source_partitions
    end = OffsetEntry.read(storage, latest).end
    kept = previous[-1] if previous else -1
    return RestartPlan(latest, start, {latest: (start, end)}, trackers, lineage, version, kept)


def _restored_trackers(trackers: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The watermark trackers a restarted query resumes with: the watermarks, but not each input's maximum
    event time, which Spark keeps only in memory (``WatermarkTracker``: the checkpoint holds the combined
    watermark, ``commits/<b>`` ``nextBatchWatermarkMs``). So after a restart a join's watermark moves again
    only once both sides have new data."""
    return [{**tracker, "max_event_ms": {}} for tracker in trackers]
