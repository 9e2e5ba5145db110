"""Real-time mode in the simulator's data mode: a long-running task delivers each record on its own.

Spark 4.3 (``RealTimeStreamScanExec``, the pipelined shuffle of SPARK-58508,
``StatefulStreamlineAggregateExec``): every stage of a real-time batch runs at
once, so a record goes from its source task through the streaming shuffle to
the stateful task and on to the sink as soon as it arrives, long before the
batch ends. The tasks stop at the batch's deadline
(``reference.protocol.real_time.deadline_ms``); the driver then writes the offset log
and the commit log, and plans the next batch: the boundary gap, in which
records that arrive wait for the next batch's tasks.

A task handles its records one at a time, in arrival order: record r is
delivered at ``max(arrival, previous record done, task start) + path``, where
``path`` is the source task's per-record work, the shuffle hop (half a network
round trip, when the query has a shuffle, i.e. a stateful operator), the
stateful operator's per-record work and the sink's. Those are the cost
model's own parameters (``per_record_us``, ``network_rtt_ms``): nothing here
is fitted to a published real-time figure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from .cost_model import Profile


@dataclass(frozen=True)
class LongRunningTask:
    """One task of a real-time batch: when each of its records became visible, and when the task ended."""

    delivered_ms: tuple[float, ...]
    end_ms: float


def record_path_ms(profile: Profile, stateful: bool) -> float:
    """A record's way from its source task to the sink: one per-record work per stage it passes (source,
    stateful operator, sink) and, through the streaming shuffle, half a network round trip."""
    stages = 3 if stateful else 2
    return stages * profile.per_record_us / 1000.0 + (profile.network_rtt_ms / 2.0 if stateful else 0.0)


def long_running_task(arrivals_ms: Sequence[float], start_ms: float, deadline_ms: float, profile: Profile,
                      stateful: bool) -> LongRunningTask:
    """Deliver ``arrivals_ms`` (in arrival order) one at a time from ``start_ms``; the task ends at the deadline,
    or after its last record if that is later (a record read just before the deadline is still processed)."""
    path = record_path_ms(profile, stateful)
    busy_until = start_ms
    out = []
    for arrival in arrivals_ms:
        busy_until = max(arrival, busy_until) + path
        out.append(busy_until)
    return LongRunningTask(tuple(out), max(deadline_ms, busy_until))
