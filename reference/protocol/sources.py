"""Sources: deterministic input records and where untimed backends cut batches (spec section 1).

Every source partition is an append-only sequence of records; an offset is an
index into it. A join's two sources are laid side by side: the left's
partitions first, then the right's, so an ``end_offsets`` list always has one
entry per source partition.

Untimed backends (the reference model) cut batch ``b`` at a fixed rule:
``generated`` sources have fixed-size batches; ``explicit`` and ``rate``
sources put a record in batch ``b`` when its arrival time is below
``(b + 1) * batch_ms``. Timed backends cut at their own clock and record the
boundaries in the outcome, which is all the oracles need.
"""

from __future__ import annotations

import math
import random
import zlib
from dataclasses import dataclass, replace
from typing import Mapping, Sequence

from .redelivery import Delivery, broker_timeline, first_deliveries
from ..language.scenario import Scenario, Source


@dataclass(frozen=True)
class Record:
    side: str            # "main", "left" or "right"
    source_partition: int  # global index into end_offsets
    offset: int
    key: str
    value: int
    event_time_ms: int
    arrival_ms: int      # creation time: end-to-end latency is measured from here


def partition_of(key: str, partitions: int) -> int:
    """Stable routing of a key to a state partition (CRC-32; never Python's salted hash())."""
    return zlib.crc32(key.encode()) % partitions


def _generated(src: Source, side: str, base: int, seed: int) -> list[list[Record]]:
    out = []
    et = src.event_time
    per_partition = src.records_per_partition_per_batch * src.batches
    for p in range(src.partitions):
        rng = random.Random(f"{seed}/{side}/{p}")
        rows = []
        for n in range(per_partition):
            created = et.start_ms + (n * src.partitions + p) * et.step_ms
            disorder = rng.randint(0, et.max_disorder_ms) if et.max_disorder_ms else 0
            rows.append(Record(side, base + p, n, f"k{rng.randrange(src.keys)}", rng.randint(1, 9),
                               created - disorder, created))
        out.append(rows)
    return out


def _explicit(src: Source, side: str, base: int) -> list[list[Record]]:
    out: list[list[Record]] = [[] for _ in range(src.partitions)]
    for p, key, value, event_ms, arrival_ms in src.records:
        rows = out[p]
        rows.append(Record(side, base + p, len(rows), key, value, event_ms, arrival_ms))
    for p, rows in enumerate(out):
        for a, b in zip(rows, rows[1:]):
            if b.arrival_ms < a.arrival_ms:
                raise ValueError(f"explicit source {side} partition {p}: arrival_ms must not decrease "
                                 f"(offset {b.offset}: {b.arrival_ms} < {a.arrival_ms})")
    return out


def _rate(src: Source, side: str, base: int, seed: int) -> list[list[Record]]:
    out = []
    per_partition = int(src.rows_per_second * src.duration_s) // src.partitions
    gap_ms = 1000.0 * src.partitions / src.rows_per_second
    for p in range(src.partitions):
        rng = random.Random(f"{seed}/{side}/{p}")
        rows = []
        for n in range(per_partition):
            created = int(n * gap_ms)
            rows.append(Record(side, base + p, n, f"k{rng.randrange(src.keys)}", rng.randint(1, 9), created, created))
        out.append(rows)
    return out


@dataclass(frozen=True)
class Redelivering:
    """A redelivering source partition (``redelivery.py``): the offsets a correct fetch layer gives (messages
    in order of first delivery, arriving then), the broker's delivery timeline it pulls from, and each
    message's record by message id."""

    rows: list[Record]
    deliveries: list[Delivery]
    by_message: list[Record]

    @staticmethod
    def of(src: Source, side: str, base: int, seed: int) -> "Redelivering":
        assert src.broker is not None
        messages, deliveries = broker_timeline(src.broker, src.keys, seed, side)
        first = {d.message_id: d.ms for d in first_deliveries(deliveries)}
        by_message = [Record(side, base, -1, m.key, m.value, m.publish_ms, first[m.id]) for m in messages]
        rows = [replace(by_message[d.message_id], offset=n) for n, d in enumerate(first_deliveries(deliveries))]
        return Redelivering(rows, deliveries, by_message)


class SourceData:
    """All input records of a scenario, by global source partition (treat as read-only)."""

    # Only the latest sources are kept. A process runs one query at a time, and every use of a scenario's
    # records (its tasks, the driver's plans, the judge; any faults, which are not part of the key) finds them
    # here. Keeping more made a long-lived Spark worker hold every earlier point's records (millions of objects
    # after a few runs at 10,000 rows/s), and each later point's tasks ran slower: in one process the same point
    # measured a p50 of 232 ms, then 407 ms after two others; with one entry, 219 ms and 180 ms.
    _cache: dict[str, "SourceData"] = {}

    @classmethod
    def of(cls, scenario: Scenario) -> "SourceData":
        """The records of a scenario, generated once while its sources and seed are the latest asked for."""
        key = scenario.sources_key
        data = cls._cache.get(key)
        if data is None:    # returned from here, not read back: another thread may replace the entry meanwhile
            data = cls(scenario)
            cls._cache.clear()
            cls._cache[key] = data
        return data

    def __init__(self, scenario: Scenario):
        self.scenario = scenario
        self.partitions: list[list[Record]] = []
        self.batch_ms: dict[int, int] = {}
        self.redelivering: dict[int, Redelivering] = {}
        for side in sorted(scenario.sources):
            src = scenario.sources[side]
            base = len(self.partitions)
            if src.kind == "generated":
                rows = _generated(src, side, base, scenario.seed)
            elif src.kind == "explicit":
                rows = _explicit(src, side, base)
            elif src.kind == "redelivering":
                self.redelivering[base] = Redelivering.of(src, side, base, scenario.seed)
                rows = [self.redelivering[base].rows]
            else:
                rows = _rate(src, side, base, scenario.seed)
            for p in range(len(rows)):
                self.batch_ms[base + p] = src.batch_ms
            self.partitions.extend(rows)

    @property
    def totals(self) -> list[int]:
        return [len(rows) for rows in self.partitions]

    def planned_end_offsets(self, batch: int) -> list[int]:
        """Where an untimed backend ends batch ``batch`` (monotonic in ``batch``)."""
        out = []
        for sp, rows in enumerate(self.partitions):
            side = rows[0].side if rows else None
            src = self.scenario.sources[side] if side else None
            if src is not None and src.kind == "generated":
                out.append(min((batch + 1) * src.records_per_partition_per_batch, len(rows)))
            else:
                limit = (batch + 1) * self.batch_ms[sp]
                out.append(_count_before(rows, limit))
        return out

    def planned_batches(self) -> int:
        """How many batches an untimed backend runs to consume all input."""
        totals = self.totals
        b = 0
        while self.planned_end_offsets(b) != totals:
            b += 1
        return b + 1

    def input_ready_ms(self, start: Sequence[int], end: Sequence[int]) -> int:
        """When the input of a batch with these boundaries is complete: its last record's arrival (0 if empty).

        The one rule every timed backend uses to hold a plan until its input has arrived.
        """
        last = 0
        for sp, (lo, hi) in enumerate(zip(start, end)):
            if hi > lo:
                last = max(last, self.partitions[sp][hi - 1].arrival_ms)
        return last

    def arrived_by(self, now_ms: float, start: Sequence[int]) -> tuple[int, ...]:
        """End offsets that take in every record that has arrived by ``now_ms`` (``arrival_ms <= now_ms``),
        never before ``start``: where a timed backend cutting by its trigger ends a batch planned then."""
        return tuple(max(lo, _count_before(rows, math.floor(now_ms) + 1))
                     for lo, rows in zip(start, self.partitions))

    def next_arrival_ms(self, start: Sequence[int]) -> int | None:
        """The arrival of the first record at or after ``start`` (None once every partition is consumed)."""
        waiting = [rows[lo].arrival_ms for lo, rows in zip(start, self.partitions) if lo < len(rows)]
        return min(waiting) if waiting else None

    def slice(self, start: Sequence[int], end: Sequence[int],
              ledgers: Mapping[int, Sequence[int]] | None = None) -> list[Record]:
        """The records of one batch, in (source partition, offset) order. ``ledgers`` (source partition ->
        the message ids behind offsets start..end) reads a redelivering partition through its fetch layer."""
        rows: list[Record] = []
        for sp, (lo, hi) in enumerate(zip(start, end)):
            if hi < lo:
                raise ValueError(f"source partition {sp}: end offset {hi} < start offset {lo}")
            if ledgers is not None and sp in ledgers:
                by_message = self.redelivering[sp].by_message
                rows.extend(replace(by_message[m], offset=lo + i) for i, m in enumerate(ledgers[sp]))
            else:
                rows.extend(self.partitions[sp][lo:hi])
        return rows


def _count_before(rows: list[Record], limit_ms: int) -> int:
    lo, hi = 0, len(rows)
    while lo < hi:
        mid = (lo + hi) // 2
        if rows[mid].arrival_ms < limit_ms:
            lo = mid + 1
        else:
            hi = mid
    return lo
