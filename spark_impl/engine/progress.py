"""Progress reporting: a listener interface shaped like PySpark's ``StreamingQueryListener``.

Every batch ends with a StreamingQueryProgress-shaped dict (``batchId``,
``numInputRows``, ``durationMs``, ``stateOperators``, ...) handed to each
listener's ``onQueryProgress``. End-to-end latency per record is the time from
the record's creation (its arrival in the scenario's clock, mapped to the wall
clock at the run's start) until the sink commit that first made it visible.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np


class StreamingListener:
    """Subclass and override what you need; the engine calls ``onQueryProgress`` once per batch."""

    def onQueryStarted(self, event: dict[str, Any]) -> None:  # noqa: N802 - PySpark's names
        pass

    def onQueryProgress(self, event: dict[str, Any]) -> None:  # noqa: N802
        pass

    def onQueryTerminated(self, event: dict[str, Any]) -> None:  # noqa: N802
        pass


class CollectingListener(StreamingListener):
    """Keeps every progress event (handy for tests and experiments)."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def onQueryProgress(self, event: dict[str, Any]) -> None:  # noqa: N802
        self.events.append(event)


def latency_summary(latencies_ms: Sequence[float]) -> dict[str, Any]:
    """p50/p90/p99/max of end-to-end latency, in milliseconds."""
    if not latencies_ms:
        return {"records": 0, "p50": None, "p90": None, "p99": None, "max": None}
    values = np.asarray(latencies_ms, dtype=float)
    p50, p90, p99 = np.percentile(values, [50, 90, 99])
    return {"records": int(values.size), "p50": round(float(p50), 3), "p90": round(float(p90), 3),
            "p99": round(float(p99), 3), "max": round(float(values.max()), 3)}
