"""Stateful operators with Spark's semantics, as pure functions (spec section 1).

``apply_operator(spec, states, rows, watermark)`` takes one state partition's
state (a dict per state store of the operator), the batch's rows routed to
that partition in (source partition, offset) order, and the operator's two
watermarks for this batch, and returns the new state and the output rows. It
never mutates its inputs. Every backend runs exactly these functions, so they
agree by construction on semantics and differ only in protocol.

Watermarks, as Spark 3.4+ (``IncrementalExecution``:
``eventTimeWatermarkForLateEvents`` and ``eventTimeWatermarkForEviction``):
- in batch b an operator has two watermarks: ``late_ms``, the one in force
  for batch b-1, filters late input, and ``eviction_ms``, the one in force for
  b, evicts state and emits results; both are 0 in batch 0;
- a row is late when ``event_time_ms <= late_ms`` (``WatermarkSupport``:
  ``LessThanOrEqual``), so in batch 0 a row at or before the epoch is late;
  a window is late when its end is ``<= late_ms``;
- window state and dedup state are evicted when their end / expiry / event
  time is ``<= eviction_ms``; join state when its event time is ``< eviction_ms -
  time_bound_ms``; a ``stateful_function`` key times out when its timeout
  timestamp is ``< eviction_ms``, and a timeout is never set before the
  current watermark (Spark refuses one, so it is clamped to it);
- the watermark in force for batch b is ``max(previous, max event time seen
  in batches before b - delay)``; a join takes the minimum over its sides,
  and stays 0 until both have data.

``dedup`` is Spark's plain ``dropDuplicates`` (``StreamingDeduplicateExec``,
``BaseStreamingDeduplicateExec.doExecute`` in ``statefulOperators.scala``):
a row whose dedup key the state holds is dropped, any other row is emitted
and its key put into the state, first come first served in the batch's row
order. Spark's value is a dummy row holding one null; the reference's store
has no null values (None is a delete), so it keeps ``True``. The two forms:

- without ``watermark_delay_ms`` (``dropDuplicates(key)`` on a stream with
  no watermark): the key is the record key; nothing is late and nothing is
  ever evicted, so the state grows with every new key, for ever;
- with it (``withWatermark(ts, delay).dropDuplicates(key, ts)``, the form
  Spark's guide gives for deduplication with a watermark): the key is the
  record key and the event time (``timed_key``), a row is dropped when it is
  late, and an entry is evicted when its event time is ``<= eviction_ms``
  (``WatermarkSupport.removeKeysOlderThanWatermark``: the eviction predicate
  exists only when the event-time column is one of the keys). Two rows are
  duplicates only when both key and event time are equal; for "same key
  within the delay" Spark has ``dropDuplicatesWithinWatermark``
  (``dedup_within_watermark``). Spark's third form, a watermark on the stream
  but only the record key as the dedup key (StreamingDeduplicationSuite,
  SPARK-21546), drops late rows (the late-row filter reads the child's
  event-time column) and never evicts (the eviction predicate reads the
  keys); the reference does not model it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from .scenario import OperatorSpec

State = dict[str, Any]


@dataclass(frozen=True)
class Row:
    """A row between operators. ``measure`` is the number a downstream sum consumes when ``value`` is
    structured (a window's ``[start, end, agg]``, a session's ``[sum, count]``), so chains compose."""

    key: str
    value: Any
    event_time_ms: int
    side: str = "main"
    measure: int | None = None


def measure_of(row: Row) -> int:
    """The number a sum over this row adds."""
    return row.measure if row.measure is not None else row.value


def store_names(spec: OperatorSpec) -> tuple[str, ...]:
    """The state stores one operator keeps per partition ('' is the single store)."""
    if spec.kind == "join":
        return ("left", "right")
    if spec.kind in ("map", "chain"):
        return ()
    return ("",)


def sort_rows(rows: list[Row]) -> list[Row]:
    return sorted(rows, key=lambda r: (r.key, str(r.value), r.event_time_ms, r.side))


@dataclass(frozen=True)
class Watermark:
    """An operator's two watermarks in one batch: ``late_ms`` filters input, ``eviction_ms`` evicts state."""

    late_ms: int = 0
    eviction_ms: int = 0

    def __post_init__(self) -> None:
        assert self.late_ms <= self.eviction_ms, "the late-events watermark never passes the eviction watermark"

    def is_late(self, event_time_ms: int) -> bool:
        return event_time_ms <= self.late_ms


def apply_operator(spec: OperatorSpec, states: Mapping[str, State], rows: Sequence[Row],
                   watermark: Watermark) -> tuple[dict[str, State], list[Row]]:
    """One batch of one operator on one state partition."""
    fn = _OPERATORS[spec.kind]
    new_states = {name: dict(states.get(name, {})) for name in store_names(spec)}
    output = fn(spec, new_states, list(rows), watermark)
    return new_states, output


def _map(spec: OperatorSpec, states: dict[str, State], rows: list[Row], wm: Watermark) -> list[Row]:
    return [Row(r.key, r.value, r.event_time_ms, measure=r.measure) for r in rows]


def _agg_step(agg: str | None, row: Row) -> int:
    return 1 if agg == "count" else measure_of(row)


def _aggregate(spec: OperatorSpec, states: dict[str, State], rows: list[Row], wm: Watermark) -> list[Row]:
    state = states[""]
    latest: dict[str, int] = {}
    for row in rows:
        state[row.key] = state.get(row.key, 0) + _agg_step(spec.agg, row)
        latest[row.key] = max(latest.get(row.key, row.event_time_ms), row.event_time_ms)
    return sort_rows([Row(k, state[k], t) for k, t in latest.items()])


def timed_key(key: str, ms: int) -> str:
    """The state key of a record key at a time: a window's start, or a ``dedup`` entry's event time."""
    return f"{key}|{ms}"


def split_timed_key(skey: str) -> tuple[str, int]:
    """``timed_key``'s (record key, time); the record key may itself hold ``|``."""
    key, _, ms = skey.rpartition("|")
    return key, int(ms)


def _window_aggregate(spec: OperatorSpec, states: dict[str, State], rows: list[Row], wm: Watermark) -> list[Row]:
    state = states[""]
    size = spec.window_ms
    assert size is not None
    for row in rows:
        start = row.event_time_ms - row.event_time_ms % size
        if wm.is_late(start + size):   # the window is late: its end is at or before the late-events watermark
            continue
        skey = timed_key(row.key, start)
        state[skey] = state.get(skey, 0) + _agg_step(spec.agg, row)
    out = []
    for skey in sorted(state):
        key, start = split_timed_key(skey)
        if start + size <= wm.eviction_ms:
            total = state.pop(skey)
            out.append(Row(key, [start, start + size, total], start + size - 1, measure=total))
    return sort_rows(out)


def _dedup_within_watermark(spec: OperatorSpec, states: dict[str, State], rows: list[Row],
                            wm: Watermark) -> list[Row]:
    state = states[""]
    delay = spec.watermark_delay_ms or 0
    out = []
    for row in rows:
        if wm.is_late(row.event_time_ms) or row.key in state:
            continue
        state[row.key] = row.event_time_ms + delay
        out.append(Row(row.key, row.value, row.event_time_ms, measure=row.measure))
    for key in [k for k, expiry in state.items() if expiry <= wm.eviction_ms]:
        del state[key]
    return sort_rows(out)


DEDUP_SEEN = True   # the value of every ``dedup`` entry (Spark's is a row holding one null)


def _dedup(spec: OperatorSpec, states: dict[str, State], rows: list[Row], wm: Watermark) -> list[Row]:
    """Spark's ``dropDuplicates`` (module docs): by key alone without a watermark, by key and event time
    with one, evicting entries whose event time the eviction watermark reached."""
    state = states[""]
    watermarked = spec.watermark_delay_ms is not None
    out = []
    for row in rows:
        if watermarked and wm.is_late(row.event_time_ms):
            continue
        skey = timed_key(row.key, row.event_time_ms) if watermarked else row.key
        if skey in state:
            continue
        state[skey] = DEDUP_SEEN
        out.append(Row(row.key, row.value, row.event_time_ms, measure=row.measure))
    if watermarked:
        for skey in [k for k in state if split_timed_key(k)[1] <= wm.eviction_ms]:
            del state[skey]
    return sort_rows(out)


def _join(spec: OperatorSpec, states: dict[str, State], rows: list[Row], wm: Watermark) -> list[Row]:
    bound = spec.time_bound_ms or 0
    horizon = wm.eviction_ms - bound   # state older than this can no longer match a row that is not late
    out = []
    for side, other in (("left", "right"), ("right", "left")):
        mine, theirs = states[side], states[other]
        for row in rows:
            if row.side != side or wm.is_late(row.event_time_ms):
                continue
            for t, v in theirs.get(row.key, []):
                if abs(t - row.event_time_ms) <= bound:
                    pair = [row.value, v] if side == "left" else [v, row.value]
                    out.append(Row(row.key, pair, max(t, row.event_time_ms)))
            mine[row.key] = sorted(mine.get(row.key, []) + [[row.event_time_ms, row.value]])
    for store in states.values():
        for key in list(store):
            kept = [pair for pair in store[key] if pair[0] >= horizon]
            if kept:
                store[key] = kept
            else:
                del store[key]
    return sort_rows(out)


def _stateful_function(spec: OperatorSpec, states: dict[str, State], rows: list[Row], wm: Watermark) -> list[Row]:
    """``session_sum``: per key [sum, count, last_event_ms, timeout_at_ms]; a key with no new rows whose
    timeout has passed emits [sum, count] and is dropped (Spark's event-time timeout: keys with data are
    processed first and do not time out in that batch)."""
    state = states[""]
    timeout = spec.timeout_ms or 0
    grouped: dict[str, list[Row]] = {}
    for row in rows:
        if not wm.is_late(row.event_time_ms):
            grouped.setdefault(row.key, []).append(row)
    for key in sorted(grouped):
        total, count, last, _at = state.get(key, [0, 0, grouped[key][0].event_time_ms, 0])
        for row in grouped[key]:
            total, count, last = total + measure_of(row), count + 1, max(last, row.event_time_ms)
        state[key] = [total, count, last, max(last + timeout, wm.eviction_ms)]
    out = []
    for key in sorted(state):
        total, count, _last, timeout_at = state[key]
        if key not in grouped and timeout_at < wm.eviction_ms:
            out.append(Row(key, [total, count], timeout_at, measure=total))
            del state[key]
    return sort_rows(out)


_OPERATORS: dict[str, Callable[[OperatorSpec, dict[str, State], list[Row], Watermark], list[Row]]] = {
    "map": _map,
    "aggregate": _aggregate,
    "window_aggregate": _window_aggregate,
    "dedup_within_watermark": _dedup_within_watermark,
    "dedup": _dedup,
    "join": _join,
    "stateful_function": _stateful_function,
}


# ---------------------------------------------------------------- watermark


def initial_watermark_state() -> dict[str, Any]:
    return {"watermark_ms": 0, "late_watermark_ms": 0, "max_event_ms": {}}


def watermark_of(tracker: Mapping[str, Any]) -> Watermark:
    """The two watermarks a tracker gives the batch it is in force for."""
    return Watermark(tracker.get("late_watermark_ms", 0), tracker["watermark_ms"])


def max_event_times(rows: Sequence[Row]) -> dict[str, int]:
    """The largest event time per input side: what a batch contributes to a watermark."""
    seen: dict[str, int] = {}
    for row in rows:
        seen[row.side] = max(seen.get(row.side, row.event_time_ms), row.event_time_ms)
    return seen


def advance_watermark(spec: OperatorSpec, tracker: Mapping[str, Any],
                      max_event_ms: Mapping[str, int]) -> dict[str, Any]:
    """Fold one batch's per-side maxima into an operator's watermark tracker (Spark 3.5+: per operator).

    The next batch's late-events watermark is this batch's eviction watermark.
    """
    seen = dict(tracker["max_event_ms"])
    for side, t in max_event_ms.items():
        seen[side] = max(seen.get(side, t), t)
    wm = tracker["watermark_ms"]
    if spec.watermark_delay_ms is not None:
        sides = ("left", "right") if spec.kind == "join" else ("main",)
        if all(s in seen for s in sides):
            wm = max(wm, min(seen[s] for s in sides) - spec.watermark_delay_ms)
    return {"watermark_ms": wm, "late_watermark_ms": tracker["watermark_ms"], "max_event_ms": dict(sorted(seen.items()))}
