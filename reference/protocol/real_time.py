"""Spark's real-time mode (4.1+) where it differs from micro-batch: its restart rule and its replay bound.

Its step graph is ``graph.RealTimeShape``; its scenario rules are
``engine_config.check_real_time_engine`` and ``real_time_rules``; the driver
steps' effects branch on ``EngineConfig.real_time`` only where Spark's
``MicroBatchExecution`` does (``markMicroBatchStart`` writes no offset entry;
``markMicroBatchEnd`` writes the offsets the tasks reported). This module holds
what a restart does and how much it replays.

Spark's files (4.3): ``sql/core/.../streaming/runtime/MicroBatchExecution.scala`` (the real-time path of
``markMicroBatchStart``, ``markMicroBatchEnd``, ``initializeExecution``),
``.../streaming/runtime/RealTimeModeAllowlist.scala``, ``.../datasources/v2/RealTimeStreamScanExec.scala``,
and ``RealTimeTrigger`` in ``sql/api/.../Triggers.scala``.

Restart (Spark 4.3, ``MicroBatchExecution.initializeExecution``): when the
latest offset entry is newer than the latest commit entry, Spark logs
"Deleting extra entries in offset log to sync up with commit log" and calls
``offsetLog.purgeAfter(lastCommittedBatchId)``; the next batch is
``lastCommitted + 1``, a new long-running batch from the committed end offsets
with a new end. An offset entry written before a crash between the offset
write and the commit write is discarded, never replayed to its recorded end
(micro-batch mode replays it exactly).
"""

from __future__ import annotations

from . import layout
from ..judge.bounds import UnboundedGraph, most_not_waiting
from .graph import BatchShape
from .logs import log_batches
from .storage import Storage


def deadline_ms(batch: int, batch_ms: int) -> int:
    """When batch ``batch``'s long-running tasks stop reading: ``(batch + 1) x`` the batch duration.

    Spark (``RealTimeStreamScanExec.inputRDD``) sets the deadline to the batch's start plus its duration,
    so its boundaries drift later by each boundary gap; the model fixes them at multiples of the duration,
    so that every backend cuts the same records into the same batch, and a gap shortens the next batch's
    reading time instead of delaying its deadline."""
    return (batch + 1) * batch_ms


def purge_uncommitted_offsets(storage: Storage) -> list[int]:
    """Delete every offset entry newer than the latest commit entry (``offsetLog.purgeAfter``); the ids."""
    commits = log_batches(storage, layout.COMMITS)
    extra = [b for b in log_batches(storage, layout.OFFSETS) if not commits or b > commits[-1]]
    for b in extra:
        storage.delete(layout.offset_path(b))
    return extra


def uncommitted_at_most(shape: BatchShape) -> int:
    """The most batches a crash can leave planned but not committed, read from the step graph by the judge's
    one reader of it (``bounds.most_not_waiting``): 1 + the largest number of later batches whose ``plan`` can
    run before ``commit_log_write`` of a batch. A restart replays at most that many (the replay bound). A
    shape that lets any number of batches run uncommitted has no bound, and says so."""
    try:
        return most_not_waiting(shape, "commit_log_write", "plan")
    except UnboundedGraph as exc:
        raise ValueError(f"no replay bound: {exc}") from exc
