"""Progress reporting: a batch's ``StreamingQueryProgress`` from what the engine measured, and its listeners.

Every committed batch ends with a ``reference.outcome.ProgressEvent`` carrying
the batch's measured durations under Spark's keys, handed to each listener's
``onQueryProgress`` (the interface of PySpark's ``StreamingQueryListener``).
"""

from __future__ import annotations

import time
from typing import Any, Mapping, Sequence

from reference.outcome import ProgressEvent, StateOperatorProgress


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
                      results: Sequence[Mapping[str, Any]], store_ids: Sequence[str]) -> ProgressEvent:
    """The progress event of a batch from its wall-clock marks (``plan``, ``offsets_done``, ``job_start``,
    ``job_end``, ``sink_commit``, ``source_commit``; seconds) and its tasks' results."""
    now = time.time()
    start, end = marks.get("plan", now), marks.get("source_commit", now)
    job_s = marks.get("job_end", start) - marks.get("job_start", start)
    durations = {"latestOffset": 0, "walCommit": _ms(marks.get("offsets_done", start) - start),
                 "queryPlanning": 0, "addBatch": _ms(job_s),
                 "commitOffsets": _ms(end - marks.get("sink_commit", end)), "triggerExecution": _ms(end - start)}
    return ProgressEvent(batch, input_rows, 0.0, round(input_rows / max(end - start, 1e-9), 3), durations,
                         tuple(_operator(sid, results) for sid in store_ids), _ms(start))


def _operator(sid: str, results: Sequence[Mapping[str, Any]]) -> StateOperatorProgress:
    per_partition = [r["changes"].get(sid, [0, 0, 0]) for r in results]
    # commitTimeMs: the slowest task's state commit, as the engine has always reported it. Spark reports
    # the sum over the operator's tasks (each task adds its commit time to one SQLMetric, and the driver
    # merges by adding: StateStoreWriter.metrics, SQLMetric.merge); a later issue settles which to report.
    commit_ms = max((r["timings_ms"].get("state_commit", 0.0) for r in results), default=0.0)
    return StateOperatorProgress(sid, sum(c[2] for c in per_partition), sum(c[0] for c in per_partition),
                                 sum(c[1] for c in per_partition), round(commit_ms, 3), 0)
