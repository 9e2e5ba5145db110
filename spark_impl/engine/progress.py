"""Progress reporting: a batch's ``StreamingQueryProgress`` from what the engine measured, and its listeners.

Every committed batch ends with a ``reference.protocol.outcome.ProgressEvent`` carrying
the batch's measured durations under Spark's keys, handed to each listener's
``onQueryProgress`` (the interface of PySpark's ``StreamingQueryListener``).
"""

from __future__ import annotations

import time
from typing import Any, Mapping, Sequence

from reference.protocol.outcome import ProgressEvent, StateOperatorProgress


class StreamingListener:
    """Subclass and override what you need; the engine calls ``onQueryProgress`` once per batch."""

    def onQueryStarted(self, event: Any) -> None:  # noqa: N802 - PySpark's names
        pass

    def onQueryProgress(self, event: ProgressEvent) -> None:  # noqa: N802
        pass

    def onQueryTerminated(self, event: Any) -> None:  # noqa: N802
        pass


class CollectingListener(StreamingListener):
    """Keeps every progress event (handy for tests and experiments)."""

    def __init__(self) -> None:
        self.events: list[ProgressEvent] = []

    def onQueryProgress(self, event: ProgressEvent) -> None:  # noqa: N802
        self.events.append(event)


def _ms(seconds: float) -> float:
    return round(seconds * 1e3, 3)


def measured_progress(batch: int, input_rows: int, marks: Mapping[str, float],
                      results: Sequence[Mapping[str, Any]], store_ids: Sequence[str],
                      async_progress: bool = False) -> ProgressEvent:
    """The progress event of a batch from its wall-clock marks (seconds) and its tasks' results.

    ``plan`` (the trigger fired), ``job_start``/``job_end`` (the batch's Spark job), ``source_commit``
    (the batch's last step) and ``<step>:start``/``<step>:end`` of every driver step that ran on the
    batch's critical path (``SparkIncarnation.run_step``; a step in the background has no span and
    counts 0, as Spark's asynchronous writers only queue their work inside the timed block). Spark's
    grouping: walCommit holds the offset log write and an inline purge (MicroBatchExecution times both
    in one ``reportTimeTaken("walCommit")``); ``purge`` is our own key for the purge's part of it.
    Under async progress the batch ends when its output is committed (``sink_commit``): Spark's trigger
    handler only queues the commit log write and commits the source from the write's callback.
    """
    now = time.time()
    start = marks.get("plan", now)
    end = marks.get("sink_commit:end", now) if async_progress else marks.get("source_commit", now)

    def span(step: str) -> float:
        began = marks.get(f"{step}:start")
        return _ms(marks.get(f"{step}:end", began) - began) if began is not None else 0.0

    purge = span("purge")
    durations = {"latestOffset": _ms(marks.get("plan:end", start) - start),
                 "walCommit": round(span("offset_log_write") + purge, 3), "purge": purge, "queryPlanning": 0,
                 "addBatch": _ms(marks.get("job_end", start) - marks.get("job_start", start)),
                 "commitOffsets": span("commit_log_write"), "triggerExecution": _ms(end - start)}
    return ProgressEvent(batch, input_rows, 0.0, round(input_rows / max(end - start, 1e-9), 3), durations,
                         tuple(_operator(sid, results) for sid in store_ids), _ms(start))


def _operator(sid: str, results: Sequence[Mapping[str, Any]]) -> StateOperatorProgress:
    """One store's ``stateOperators`` entry. ``commitTimeMs`` and ``memoryUsedBytes`` add up over the
    batch's tasks, as Spark's do: each task adds its store's commit time and memory to one SQLMetric
    and the driver merges the metrics by summing (StateStoreWriter.setStoreMetrics, SQLMetric.merge).
    A commit in the background (async state checkpointing) is not the task's and counts 0."""
    per_partition = [r["changes"].get(sid, [0, 0, 0]) for r in results]
    commit_ms = sum(r.get("commit_ms", {}).get(sid, 0.0) for r in results)
    memory = sum(int(r.get("memory_bytes", {}).get(sid, 0)) for r in results)
    return StateOperatorProgress(sid, sum(c[2] for c in per_partition), sum(c[0] for c in per_partition),
                                 sum(c[1] for c in per_partition), round(commit_ms, 3), memory)
