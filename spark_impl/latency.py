"""End-to-end latency on the Spark backends: from a record's creation to its first visibility at the sink.

The engine and the native adapter record every sink commit of a batch as a
``SinkDelivery`` (the batch's boundaries and the wall time it became
visible), re-deliveries after a crash included. A record's latency ends at its first delivery
(``reference.protocol.timing.first_visible_ms``): a batch re-run after a crash shows
output that was readable earlier, and the replay must not make it look slower.
The percentiles are ``reference.protocol.timing.summarize_latency``, as on every timed
backend.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Iterator

from reference.protocol.sources import SourceData
from reference.protocol.timing import Throughput, first_visible_ms, summarize_throughput


@dataclass(frozen=True)
class SinkDelivery:
    """Batch ``batch`` with these boundaries became visible at the sink at wall time ``seen_s``."""

    batch: int
    start: tuple[int, ...]
    end: tuple[int, ...]
    seen_s: float

    def to_json(self) -> list[Any]:
        return [self.batch, list(self.start), list(self.end), self.seen_s]

    @staticmethod
    def from_json(raw: list[Any]) -> "SinkDelivery":
        batch, start, end, seen_s = raw
        return SinkDelivery(int(batch), tuple(start), tuple(end), float(seen_s))


def record_latencies_ms(data: SourceData, deliveries: Iterable[SinkDelivery], t0: float) -> list[float]:
    """Each delivered record's latency: its first visibility (ms since ``t0``) minus its creation."""
    created, visible = delivered_times_ms(data, deliveries, t0)
    return [seen - born for born, seen in zip(created, visible)]


def delivered_times_ms(data: SourceData, deliveries: Iterable[SinkDelivery],
                       t0: float) -> tuple[list[float], list[float]]:
    """Each delivered record's creation and first visibility (ms since ``t0``), in the same order."""
    first = first_visible_ms(_record_deliveries(data, deliveries, t0))
    created = [float(data.partitions[sp][offset].arrival_ms) for sp, offset in first]
    return created, list(first.values())


def record_throughput(data: SourceData, deliveries: Iterable[SinkDelivery], t0: float) -> Throughput | None:
    """Whether the run kept up with its input: ``reference.protocol.timing.summarize_throughput``, the one rule."""
    return summarize_throughput(*delivered_times_ms(data, deliveries, t0))


def _record_deliveries(data: SourceData, deliveries: Iterable[SinkDelivery],
                       t0: float) -> Iterator[tuple[tuple[int, int], float]]:
    for delivery in deliveries:
        seen_ms = (delivery.seen_s - t0) * 1000.0
        for record in data.slice(delivery.start, delivery.end):
            yield (record.source_partition, record.offset), seen_ms

