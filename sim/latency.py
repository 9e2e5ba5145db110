"""End-to-end latency per record: from its creation to the moment it FIRST became visible at the sink.

spec section 4 measures latency from a record's creation (``arrival_ms``) to
when its output can first be read. A batch re-run after a crash delivers its
records again, later; that re-delivery never moves a record's latency (issue
14: measuring at the last delivery turned a p50 of 87 ms into 5 s after a
crash). Both books below keep the first visibility and hand their latencies
to ``reference.protocol.timing.summarize_segments``, the one percentile definition.

- ``RecordLatency`` (data mode): one exact latency per record, from
  ``reference.protocol.timing.first_visible_ms`` over every delivery seen.
- ``RangeLatency`` (volume mode, no records): per source partition, the
  offsets already visible; a delivery of offsets ``[lo, hi)`` adds only the
  offsets not yet visible, as one segment whose latencies are spread between
  those of its newest and oldest record.

Both also judge whether the run kept up with its input, by the one rule of
``reference.protocol.timing`` (``summarize_throughput``; volume mode over its delivered
ranges, ``summarize_throughput_groups``), so a simulated latency point gets
the same kept-up or backlogged verdict as a timed engine's.

Both live in the ``Simulation``, outside any incarnation: they are the
observer's view, and survive crashes.
"""

from __future__ import annotations

from typing import Callable, Iterable

from reference.protocol.outcome import Timing
from reference.protocol.timing import (DeliveryGroup, LatencySummary, Segment, Throughput, first_visible_ms,
                              summarize_segments, summarize_throughput, summarize_throughput_groups)


class RecordLatency:
    """Data mode: every (record, time) delivery; a record's latency ends at its first."""

    def __init__(self) -> None:
        self.deliveries: list[tuple[tuple[int, int], float]] = []   # ((source partition, offset), visible_ms)
        self.arrival_ms: dict[tuple[int, int], int] = {}

    def delivered(self, records: Iterable[tuple[int, int, int]], now_ms: float) -> None:
        """``records`` ((source partition, offset, arrival_ms) each) became visible at ``now_ms``."""
        for sp, offset, arrival in records:
            self.arrival_ms[(sp, offset)] = arrival
            self.deliveries.append(((sp, offset), now_ms))

    def forget_after(self, now_ms: float) -> None:
        """The driver crashed at ``now_ms``: deliveries booked for later (a real-time task books each record's
        delivery when its long-running task starts) never happened."""
        self.deliveries = [d for d in self.deliveries if d[1] <= now_ms]

    def segments(self) -> list[Segment]:
        first = first_visible_ms(self.deliveries)
        return [(1, first[key] - self.arrival_ms[key], first[key] - self.arrival_ms[key]) for key in sorted(first)]

    def summary(self) -> LatencySummary:
        return summarize_segments(self.segments())

    def throughput(self) -> Throughput | None:
        first = first_visible_ms(self.deliveries)
        keys = sorted(first)
        return summarize_throughput([float(self.arrival_ms[k]) for k in keys], [first[k] for k in keys])


class RangeLatency:
    """Volume mode: per source partition, the visible offsets as disjoint ``[lo, hi)`` ranges."""

    def __init__(self) -> None:
        self.visible: dict[int, list[tuple[int, int]]] = {}
        self.spread: list[Segment] = []
        self.groups: list[DeliveryGroup] = []    # the same deliveries by creation time, for the keep-up rule

    def delivered(self, sp: int, lo: int, hi: int, now_ms: float, arrival_ms: Callable[[int], float]) -> None:
        """Offsets ``[lo, hi)`` of source partition ``sp`` became visible at ``now_ms``."""
        for first, end in self._not_yet_visible(sp, lo, hi):
            self.spread.append((end - first, now_ms - arrival_ms(end - 1), now_ms - arrival_ms(first)))
            self.groups.append((end - first, arrival_ms(first), arrival_ms(end - 1), now_ms))

    def _not_yet_visible(self, sp: int, lo: int, hi: int) -> list[tuple[int, int]]:
        """The parts of ``[lo, hi)`` not visible before, which are visible from now on."""
        ranges = self.visible.setdefault(sp, [])
        fresh, cursor = [], lo
        for a, b in ranges:
            if b <= cursor or a >= hi:
                continue
            if a > cursor:
                fresh.append((cursor, a))
            cursor = max(cursor, b)
        if cursor < hi:
            fresh.append((cursor, hi))
        merged = sorted(ranges + fresh)
        ranges[:] = _merge(merged)
        return fresh

    def segments(self) -> list[Segment]:
        return list(self.spread)

    def summary(self) -> LatencySummary:
        return summarize_segments(self.spread)

    def throughput(self) -> Throughput | None:
        return summarize_throughput_groups(self.groups)


def _merge(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for a, b in ranges:
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def timing_of(book: RecordLatency | RangeLatency) -> Timing:
    """The outcome's timing block: the latency summary and whether the run kept up with its input; no wall time
    (a simulated run has none)."""
    return Timing(book.summary(), throughput=book.throughput())
