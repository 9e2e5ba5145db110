"""Volume mode's input and state model: record counts over time, and what each operator keeps.

Volume mode carries no records. Its input is a ``VolumeSource``: for every
source partition of the scenario's sources (``rate``: ``rows_per_second`` over
``duration_s``, split evenly over ``partitions``; ``generated``: its fixed
count per partition, one record every ``step_ms``; ``explicit``: the listed
records' arrival and event times, without their keys and values) it knows how
many records exist at a time and the event time of each offset. Event time is
the creation time for ``rate`` and ``generated`` sources (``max_disorder_ms``
is ignored); ``explicit`` records carry their own.

Records reach state partitions evenly (as a uniform hash spreads them), so
everything below is per state partition: ``n`` records over ``K`` keys
(the source's ``keys`` over the state partitions) touch ``D(n) = K * (1 - (1 -
1/K) ** n)`` distinct keys (the balls-into-bins expectation). For each
operator kind, ``OperatorModel.batch`` gives per batch and store the keys
changed (updated plus removed), the keys held after the batch, the keys
removed, and the operator's output rows; ``wm`` is the operator's watermark
for the batch (Spark's: the previous batches' maximum event time minus the
delay) and ``cnt(lo, hi)`` the records with event time in ``[lo, hi)`` up to
the batch's end offsets:

- ``aggregate``: holds every key seen, ``D(all records so far)``; changes and
  emits the keys of the batch, ``D(n)``; never removes.
- ``window_aggregate``: holds one entry per (key, window) for windows not yet
  closed (end ``> wm``): the sum over open windows of ``D(cnt(window))``;
  changes ``D(new records of each window)``; when the watermark passes a
  window's end it emits and removes that window's keys.
- ``dedup_within_watermark``: grows, then evicts. Its entries are carried
  from batch to batch as groups of keys with an expiry range: a batch of
  ``n`` records inserts (and emits) the keys it hits among those not held,
  ``(K - held) * D(n) / K``, with expiry ``event time + delay``; entries whose
  expiry the watermark reached are removed. A restarted query starts from the
  steady state: a key is held for ``2 * delay`` (expiry plus the watermark's
  lag) after each insertion and absent until its next record.
- ``dedup`` without a watermark: holds every key seen, ``D(all records so
  far)``; inserts and emits the keys first seen in the batch (the growth of
  that count); never removes.
- ``dedup`` with a watermark: an entry per distinct (key, event time) with
  event time after the watermark. Over ``w`` milliseconds of event time with
  ``c`` records, ``P(c, w) = min(c, w * D(c / w))`` entries (records spread
  evenly over the milliseconds, keys drawn per millisecond); it holds
  ``P`` of the records after ``wm``, inserts and emits ``P`` of the batch's
  records, and removes what the watermark passed.
- ``join``: each side holds its rows (Spark's join state counts rows) with
  event time at or after ``wm - time_bound_ms``, ``cnt(wm - bound, now)`` of
  that side; changes the rows appended plus the rows evicted; emits each new
  row's matches: the other side's rows of the same key within the time bound
  (``rows * matches_within_bound / K``).
- ``stateful_function`` (``session_sum``): holds the keys whose last event
  is within ``timeout_ms`` of the watermark, ``D(cnt(wm - timeout, now))``;
  changes the keys of the batch plus the timed-out ones, which it emits.
- ``map``: no state; emits every record.

In a ``chain`` each operator after the first sees the previous one's output,
spread over event time like the batch's input. Late records (event time below
the watermark) are not modelled: rate and generated sources are in order.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from typing import Any, Sequence

from reference.language.scenario import OperatorSpec, Scenario, Source

WINDOW_BUCKETS = 64   # at most this many window groups are summed per batch (windows are grouped beyond it)


def distinct_keys(records: float, keys: float) -> float:
    """Expected distinct keys touched by ``records`` uniform draws over ``keys`` keys."""
    if keys <= 0 or records <= 0:
        return 0.0
    return keys * -math.expm1(records * math.log1p(-1.0 / keys)) if keys > 1 else 1.0


class VolumeSource:
    """Counts, arrival and event times of every source partition, without materialising records."""

    def __init__(self, scenario: Scenario):
        self.scenario = scenario
        self.partitions: list[tuple[str, int, int]] = []   # (side, index within the side, total records)
        self.sides: list[str] = []                         # the side of each global source partition
        self._arrivals: dict[int, list[float]] = {}        # explicit sources: arrival times by offset
        self._events: dict[int, list[int]] = {}            # explicit sources: event times by offset
        self._event_max: dict[int, list[int]] = {}         # explicit sources: running maximum of event times
        self.redelivering: dict[int, Any] = {}  # none: volume mode refuses a redelivering source (no message ids)
        explicit_keys: set[str] = set()
        key_counts = []
        for side in sorted(scenario.sources):
            src = scenario.sources[side]
            for p in range(src.partitions):
                sp = len(self.partitions)
                if src.kind == "rate":
                    total = int(src.rows_per_second * src.duration_s) // src.partitions
                elif src.kind == "generated":
                    total = src.records_per_partition_per_batch * src.batches
                else:
                    rows = [r for r in src.records if r[0] == p]
                    arrivals = [float(r[4]) for r in rows]
                    if any(b < a for a, b in zip(arrivals, arrivals[1:])):
                        raise ValueError(f"sources.{side}: explicit partition {p}: arrival_ms must not decrease")
                    self._arrivals[sp] = arrivals
                    self._events[sp] = [r[3] for r in rows]
                    running, top = [], -math.inf
                    for r in rows:
                        top = max(top, r[3])
                        running.append(int(top))
                    self._event_max[sp] = running
                    explicit_keys.update(r[1] for r in rows)
                    total = len(rows)
                self.partitions.append((side, p, total))
                self.sides.append(side)
            if src.kind != "explicit":
                key_counts.append(src.keys)
        if explicit_keys:
            key_counts.append(len(explicit_keys))
        # a join's sides draw from one key space ("k0", "k1", ...): its cardinality is the larger side's
        self.keys = max(key_counts)
        self.totals = [total for _s, _p, total in self.partitions]

    def _source(self, sp: int) -> tuple[Source, int]:
        side, p, _total = self.partitions[sp]
        return self.scenario.sources[side], p

    def arrival_ms(self, sp: int, offset: int) -> float:
        """When record ``offset`` of source partition ``sp`` is created (as ``reference.protocol.sources``)."""
        src, p = self._source(sp)
        if src.kind == "rate":
            return float(int(offset * (1000.0 * src.partitions / src.rows_per_second)))
        if src.kind == "explicit":
            return self._arrivals[sp][offset]
        et = src.event_time
        return float(et.start_ms + (offset * src.partitions + p) * et.step_ms)

    def event_ms(self, sp: int, offset: int) -> float:
        """The event time of record ``offset`` (the creation time, except for explicit records)."""
        if sp in self._events:
            return float(self._events[sp][offset])
        return self.arrival_ms(sp, offset)

    def arrived(self, sp: int, now_ms: float) -> int:
        """How many records of ``sp`` exist at ``now_ms`` (arrival at or before it)."""
        return self._count_until(sp, now_ms, inclusive=True)

    def _count_until(self, sp: int, t_ms: float, inclusive: bool) -> int:
        """Records of ``sp`` whose arrival is ``<= t_ms`` (inclusive) or ``< t_ms``."""
        _side, p, total = self.partitions[sp]
        if sp in self._arrivals:
            find = bisect_right if inclusive else bisect_left
            return find(self._arrivals[sp], t_ms)
        src, p = self._source(sp)
        if src.kind == "rate":   # arrivals are whole milliseconds: int(n * gap)
            limit = math.floor(t_ms) + 1 if inclusive else math.ceil(t_ms)
            count = math.ceil(limit / (1000.0 * src.partitions / src.rows_per_second))
        else:
            et = src.event_time
            if et.step_ms == 0:
                return total if (t_ms >= et.start_ms if inclusive else t_ms > et.start_ms) else 0
            count = math.floor((t_ms - et.start_ms - p * et.step_ms) / (src.partitions * et.step_ms)) + 1
        count = max(0, min(total, count))
        below = (lambda x: x <= t_ms) if inclusive else (lambda x: x < t_ms)
        while count < total and below(self.arrival_ms(sp, count)):   # int() rounding at the edge
            count += 1
        while count > 0 and not below(self.arrival_ms(sp, count - 1)):
            count -= 1
        return count

    def events_before(self, sp: int, end: int, t_ms: float) -> int:
        """Records among offsets ``[0, end)`` of ``sp`` with event time ``< t_ms``."""
        if end <= 0:
            return 0
        if sp in self._events:
            return sum(1 for e in self._events[sp][:end] if e < t_ms)
        return min(end, self._count_until(sp, t_ms, inclusive=False))

    def max_event(self, sp: int, end: int) -> float | None:
        """The largest event time among offsets ``[0, end)`` (None when there are none)."""
        if end <= 0:
            return None
        if sp in self._event_max:
            return float(self._event_max[sp][end - 1])
        return self.event_ms(sp, end - 1)


@dataclass(frozen=True)
class StoreCounts:
    """One store of one state partition after one batch (expected values)."""

    changed: float   # keys updated or removed by the batch (what the changelog holds)
    total: float     # keys held after the batch
    removed: float   # keys removed by the batch


class Window:
    """The records of one batch and all before it, per state partition, by event time and side."""

    def __init__(self, source: VolumeSource, parts: int, start: Sequence[int], end: Sequence[int]):
        self.source, self.parts, self.start, self.end = source, parts, start, end

    def records(self, side: str | None = None) -> float:
        return sum(e - s for sp, (s, e) in enumerate(zip(self.start, self.end))
                   if side is None or self.source.sides[sp] == side) / self.parts

    def count(self, lo: float, hi: float, side: str | None = None, upto: str = "end") -> float:
        """Records (per state partition) with event time in ``[lo, hi)`` among offsets before ``upto``."""
        offsets = self.end if upto == "end" else self.start
        src = self.source
        total = 0
        for sp, limit in enumerate(offsets):
            if side is not None and src.sides[sp] != side:
                continue
            upper = limit if hi == math.inf else src.events_before(sp, limit, hi)
            lower = 0 if lo == -math.inf else src.events_before(sp, limit, lo)
            total += max(0, upper - lower)
        return total / self.parts

    def latest(self, upto: str = "end") -> float | None:
        """The largest event time among offsets before ``upto`` (None when there are none)."""
        offsets = self.end if upto == "end" else self.start
        seen = [self.source.max_event(sp, limit) for sp, limit in enumerate(offsets)]
        found = [t for t in seen if t is not None]
        return max(found) if found else None

    def event_span(self, side: str | None = None) -> tuple[float, float] | None:
        """(lowest, highest) event time of the batch's records (first and last offsets per partition)."""
        src = self.source
        lows, highs = [], []
        for sp, (s, e) in enumerate(zip(self.start, self.end)):
            if e > s and (side is None or src.sides[sp] == side):
                high = src.max_event(sp, e)
                assert high is not None, "a non-empty range has a largest event time"
                lows.append(src.event_ms(sp, s))
                highs.append(high)
        return (min(lows), max(highs)) if lows else None


class OperatorModel:
    """What one operator keeps and emits per batch, per state partition (module docs)."""

    def __init__(self, spec: OperatorSpec, keys_per_partition: float):
        self.spec, self.keys = spec, keys_per_partition
        self._entries: list[tuple[float, float, float]] | None = None   # dedup: carried across batches

    def D(self, records: float) -> float:
        return distinct_keys(records, self.keys)

    def batch(self, window: Window, scale: float, n: float, wm: float,
              previous_wm: float) -> tuple[list[StoreCounts], float]:
        """(counts of each of the operator's stores, output rows) for one batch of ``n`` input records.

        ``scale`` is the share of the pipeline's input that reaches this operator
        (1 for the first), applied to ``window``'s event-time counts.
        """
        kind = self.spec.kind
        if kind == "map":
            return [], n
        if kind == "aggregate":
            touched = self.D(n)
            return [StoreCounts(touched, self.D(window.count(-math.inf, math.inf) * scale), 0.0)], touched
        if kind == "window_aggregate":
            return self._windows(window, scale, wm, previous_wm)
        if kind == "join":
            return self._join(window, wm, previous_wm)
        if kind == "dedup_within_watermark":
            return self._dedup(window, scale, n, wm)
        if kind == "dedup":
            return self._drop_duplicates(window, scale, n, wm, previous_wm)
        assert kind == "stateful_function", f"no volume model for operator {kind}"
        timeout = float(self.spec.timeout_ms or 0)
        total = self.D(window.count(wm - timeout, math.inf) * scale)
        before = self.D(window.count(previous_wm - timeout, math.inf, upto="start") * scale)
        kept = self.D(window.count(wm - timeout, math.inf, upto="start") * scale)
        removed = max(0.0, before - kept)
        return [StoreCounts(min(self.keys, self.D(n) + removed), total, removed)], removed

    def _dedup(self, window: Window, scale: float, n: float, wm: float) -> tuple[list[StoreCounts], float]:
        """Entries as (expiry from, expiry to, keys) groups, carried from batch to batch (module docs)."""
        delay = float(self.spec.watermark_delay_ms or 0)
        if self._entries is None:
            self._entries = self._dedup_at_start(window, scale, wm, delay)
        held = sum(keys for _lo, _hi, keys in self._entries)
        inserted = max(0.0, self.keys - held) * self.D(n) / self.keys if self.keys > 0 else 0.0
        span = window.event_span()
        if inserted > 0 and span is not None:
            self._entries.append((span[0] + delay, span[1] + delay, inserted))
        removed, kept = 0.0, []
        for lo, hi, keys in self._entries:
            gone = 1.0 if hi <= wm else (wm - lo) / (hi - lo) if lo < wm else 0.0
            removed += keys * gone
            if gone < 1.0:
                kept.append((max(lo, wm), hi, keys * (1.0 - gone)))
        self._entries = kept
        return [StoreCounts(inserted + removed, held + inserted - removed, removed)], inserted

    def _drop_duplicates(self, window: Window, scale: float, n: float, wm: float,
                         previous_wm: float) -> tuple[list[StoreCounts], float]:
        """Spark's plain dropDuplicates (module docs): by key for ever, or by (key, event time) until the
        watermark passes it."""
        if self.spec.watermark_delay_ms is None:
            total = self.D(window.count(-math.inf, math.inf) * scale)
            inserted = max(0.0, total - self.D(window.count(-math.inf, math.inf, upto="start") * scale))
            return [StoreCounts(inserted, total, 0.0)], inserted
        span = window.event_span()
        inserted = self._timed_entries(n, span[1] - span[0] + 1) if span is not None else 0.0
        total = self._timed_entries(window.count(wm, math.inf) * scale, self._after(window, wm, "end"))
        before = self._timed_entries(window.count(previous_wm, math.inf, upto="start") * scale,
                                     self._after(window, previous_wm, "start"))
        removed = max(0.0, before + inserted - total)
        return [StoreCounts(inserted + removed, total, removed)], inserted

    def _timed_entries(self, records: float, width_ms: float) -> float:
        """``P(c, w)``: distinct (key, millisecond) pairs among ``records`` spread over ``width_ms``."""
        width = max(1.0, width_ms)
        return min(records, width * self.D(records / width))

    @staticmethod
    def _after(window: Window, wm: float, upto: str) -> float:
        """The milliseconds of event time from the watermark to the latest record before ``upto``."""
        latest = window.latest(upto)
        return 0.0 if latest is None else latest - wm

    def _dedup_at_start(self, window: Window, scale: float, wm: float,
                        delay: float) -> list[tuple[float, float, float]]:
        """The entries a restarted query loads: the steady state over the records before the batch.

        A key is held for ``L = 2 * delay`` after each insertion and is absent until its
        next record, so with ``m`` records per ``L`` over ``K`` keys a share
        ``m / (K + m)`` of the keys is held (and never more than the keys seen).
        """
        latest = window.latest("start")
        if latest is None:
            return []
        lifetime = 2 * delay
        seen = self.D(window.count(-math.inf, math.inf, upto="start") * scale)
        recent = window.count(latest - lifetime, math.inf, upto="start") * scale
        held = min(seen, self.keys * recent / (self.keys + recent)) if recent > 0 else 0.0
        return [(wm, max(wm, latest + delay), held)] if held > 0 else []

    def _windows(self, window: Window, scale: float, wm: float,
                 previous_wm: float) -> tuple[list[StoreCounts], float]:
        size = float(self.spec.window_ms or 1)
        span = window.event_span()
        top = span[1] if span else wm
        total = changed = 0.0
        for lo, hi, count in _window_groups(math.floor(wm / size) * size, top, size):
            if hi <= wm:   # the window this watermark closes lies before the open ones
                continue
            so_far = window.count(lo, hi) * scale / count
            before = window.count(lo, hi, upto="start") * scale / count
            total += count * self.D(so_far)
            changed += count * self.D(so_far - before)
        removed = 0.0
        closed_lo = math.floor(previous_wm / size) * size
        for lo, hi, count in _window_groups(closed_lo, wm - size, size):
            if hi > previous_wm and hi <= wm:
                removed += count * self.D(window.count(lo, hi, upto="start") * scale / count)
        return [StoreCounts(changed + removed, total, removed)], removed

    def _join(self, window: Window, wm: float, previous_wm: float) -> tuple[list[StoreCounts], float]:
        bound = float(self.spec.time_bound_ms or 0)
        horizon, previous_horizon = wm - bound, previous_wm - bound
        stores, dense = [], {}
        for side in ("left", "right"):
            new = window.records(side)
            total = window.count(horizon, math.inf, side)
            before = window.count(previous_horizon, math.inf, side, upto="start")
            removed = max(0.0, before + new - total)
            stores.append(StoreCounts(new + removed, total, removed))
            span = window.event_span(side)
            width = max(1.0, (span[1] if span else horizon) - horizon)
            dense[side] = (new, total / width * min(2 * bound + 1, width))
        (new_left, near_left), (new_right, near_right) = dense["left"], dense["right"]
        output = (new_left * near_right + new_right * near_left) / max(1.0, self.keys)
        return stores, output


def _window_groups(first: float, last: float, size: float) -> list[tuple[float, float, int]]:
    """Tumbling windows from the one starting at ``first`` through the one holding ``last``,
    as ``(lo, hi, windows)`` groups: single windows, or runs of equal windows when there are
    more than ``WINDOW_BUCKETS``."""
    if last < first:
        return []
    count = int((last - first) // size) + 1
    per = max(1, math.ceil(count / WINDOW_BUCKETS))
    out = []
    lo = first
    while count > 0:
        take = min(per, count)
        out.append((lo, lo + take * size, take))
        lo += take * size
        count -= take
    return out
