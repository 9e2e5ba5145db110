"""Operator semantics pinned at every boundary, with expected rows and state derived by hand.

The engines and the oracles all call ``reference/language/operators.py``, so no
differential test can see an operator bug; only expectations written down
from Spark's rules can. The rules (Spark 3.4+, see the module docstring of
``reference/language/operators.py``): a row is late when ``event_time <= late`` (the
watermark of the batch before; 0 in batch 0), state is evicted with this
batch's watermark: a window or a dedup entry when its end / expiry is
``<= eviction``, join state when ``t < eviction - bound``, a session when its
timeout timestamp is ``< eviction``; a timeout is never set before the
current watermark.

The ``SCENARIOS`` at the end run whole queries over explicit records through
the watermark's progression; ``tests/spark/test_spark_native.py`` runs the same ones
on Spark's own Structured Streaming.
"""

from __future__ import annotations

from typing import Any

import pytest

from reference.language.operators import Row, Watermark, apply_operator
from reference.protocol.query import BatchBounds, run_sequential
from reference.language.scenario import OperatorSpec, Scenario
from reference.protocol.sources import SourceData


def op(kind: str, **fields: Any) -> OperatorSpec:
    return OperatorSpec(kind, **fields)


def rows(*triples: tuple[str, int, int], side: str = "main") -> list[Row]:
    return [Row(key, value, t, side) for key, value, t in triples]


def out(result: tuple[dict[str, Any], list[Row]]) -> list[list[Any]]:
    return [[r.key, r.value] for r in result[1]]


# ------------------------------------------------------- late rows (input)


def test_a_row_exactly_at_the_late_watermark_is_late_and_one_ms_after_is_not():
    dedup = op("dedup_within_watermark", watermark_delay_ms=20)
    result = apply_operator(dedup, {}, rows(("a", 1, 100), ("b", 2, 101)), Watermark(100, 100))
    assert out(result) == [["b", 2]]
    assert result[0][""] == {"b": 121}


def test_in_the_first_batch_the_watermark_is_zero_so_a_row_at_the_epoch_is_late():
    dedup = op("dedup_within_watermark", watermark_delay_ms=20)
    result = apply_operator(dedup, {}, rows(("z", 9, 0), ("a", 1, 1)), Watermark(0, 0))
    assert out(result) == [["a", 1]]
    assert result[0][""] == {"a": 21}


def test_late_rows_are_filtered_with_the_previous_watermark_not_the_current_one():
    # eviction watermark 150, late-events watermark 100: a row at 120 is behind the current watermark but
    # not late; it enters dedup state (expiry 140) and is evicted in the same batch
    dedup = op("dedup_within_watermark", watermark_delay_ms=20)
    result = apply_operator(dedup, {}, rows(("a", 1, 120)), Watermark(100, 150))
    assert out(result) == [["a", 1]]
    assert result[0][""] == {}


def test_a_window_whose_end_equals_the_late_watermark_is_late_but_a_row_inside_a_later_window_is_not():
    win = op("window_aggregate", agg="sum", window_ms=10, watermark_delay_ms=0)
    # late 50: window [40, 50) ends at 50 and is late; the row at 52 is before 55 (the late watermark of
    # the next case) yet its window [50, 60) ends after it, so it counts
    result = apply_operator(win, {}, rows(("a", 1, 45), ("a", 2, 50)), Watermark(50, 50))
    assert out(result) == [] and result[0][""] == {"a|50": 2}
    result = apply_operator(win, {}, rows(("a", 3, 52)), Watermark(55, 55))
    assert result[0][""] == {"a|50": 3}


# ----------------------------------------------------------- eviction (state)


def test_a_window_whose_end_equals_the_eviction_watermark_is_emitted_and_evicted():
    win = op("window_aggregate", agg="sum", window_ms=10, watermark_delay_ms=0)
    state = {"": {"a|50": 4, "a|60": 1}}
    result = apply_operator(win, state, [], Watermark(59, 60))
    assert out(result) == [["a", [50, 60, 4]]]
    assert result[0][""] == {"a|60": 1}
    kept = apply_operator(win, state, [], Watermark(59, 59))
    assert out(kept) == [] and kept[0][""] == {"a|50": 4, "a|60": 1}


def test_a_dedup_entry_whose_expiry_equals_the_eviction_watermark_is_evicted():
    dedup = op("dedup_within_watermark", watermark_delay_ms=20)
    state = {"": {"a": 50, "b": 51}}
    assert apply_operator(dedup, state, [], Watermark(40, 50))[0][""] == {"b": 51}
    assert apply_operator(dedup, state, [], Watermark(40, 49))[0][""] == {"a": 50, "b": 51}
    # while it is held, a duplicate of the key is dropped
    assert out(apply_operator(dedup, state, rows(("a", 7, 45)), Watermark(40, 49))) == []


def test_join_state_exactly_at_the_horizon_is_kept_and_one_ms_below_is_evicted():
    join = op("join", time_bound_ms=10, watermark_delay_ms=0)
    state = {"left": {"k": [[89, 1], [90, 2]]}, "right": {}}
    result = apply_operator(join, state, [], Watermark(80, 100))   # horizon 100 - 10 = 90
    assert result[0]["left"] == {"k": [[90, 2]]}


def test_a_join_row_behind_the_horizon_but_not_late_still_joins_then_is_evicted():
    join = op("join", time_bound_ms=10, watermark_delay_ms=0)
    state = {"left": {}, "right": {"k": [[85, 7]]}}
    result = apply_operator(join, state, rows(("k", 1, 81), side="left"), Watermark(80, 100))
    assert out(result) == [["k", [1, 7]]]          # |81 - 85| <= 10
    assert result[0] == {"left": {}, "right": {}}  # both older than the horizon 90
    late = apply_operator(join, state, rows(("k", 1, 80), side="left"), Watermark(80, 100))
    assert out(late) == []


def test_a_session_times_out_only_when_its_timeout_is_strictly_before_the_eviction_watermark():
    fn = op("stateful_function", function="session_sum", timeout_ms=20, watermark_delay_ms=0)
    state = {"": {"a": [5, 2, 30, 50]}}
    assert out(apply_operator(fn, state, [], Watermark(40, 50))) == []
    fired = apply_operator(fn, state, [], Watermark(40, 51))
    assert out(fired) == [["a", [5, 2]]] and fired[0][""] == {}
    assert fired[1][0].event_time_ms == 50


def test_a_session_timeout_is_never_set_before_the_current_watermark():
    fn = op("stateful_function", function="session_sum", timeout_ms=20, watermark_delay_ms=0)
    # the row at 40 is not late (late watermark 30) but 40 + 20 = 60 is before the eviction watermark 70
    result = apply_operator(fn, {}, rows(("c", 3, 40)), Watermark(30, 70))
    assert result[0][""] == {"c": [3, 1, 40, 70]}
    assert out(apply_operator(fn, result[0], [], Watermark(70, 70))) == []
    assert out(apply_operator(fn, result[0], [], Watermark(70, 71))) == [["c", [3, 1]]]


def test_a_session_with_new_rows_does_not_time_out_in_that_batch():
    fn = op("stateful_function", function="session_sum", timeout_ms=20, watermark_delay_ms=0)
    state = {"": {"a": [5, 2, 30, 50]}}
    result = apply_operator(fn, state, rows(("a", 1, 60)), Watermark(55, 90))
    assert out(result) == [] and result[0][""] == {"a": [6, 3, 60, 90]}


# ------------------------------------------------ whole queries, by batch


def explicit(operator: dict[str, Any], records: list[list[Any]], name: str) -> Scenario:
    return Scenario.from_dict({"name": name, "seed": 1,
                               "source": {"kind": "explicit", "batch_ms": 1000, "records": records},
                               "query": {"operator": operator, "state_partitions": 1}})


# name -> (operator, records [partition, key, value, event_time_ms, arrival_ms], expected sink rows per batch,
#          expected watermark per batch); batch b holds the records that arrive in [b * 1000, (b + 1) * 1000) ms
SCENARIOS: dict[str, tuple[dict[str, Any], list[list[Any]], list[list[Any]], list[int]]] = {
    # batch 0 (late 0, evict 0): z at 0 is late, a at 100 kept; batch 1 (late 0, evict 100): b at 100 kept,
    # a and b expire at 100 <= 100; batch 2 (late 100): c at 100 is late
    "dedup-at-the-watermark": (
        {"kind": "dedup_within_watermark", "watermark_delay_ms": 0},
        [[0, "z", 9, 0, 0], [0, "a", 1, 100, 0], [0, "b", 2, 100, 1000], [0, "c", 3, 100, 2000]],
        [[["a", 1]], [["b", 2]], []], [0, 100, 100]),
    # plain dropDuplicates(key), no watermark: a at the epoch is not late; a's second row is dropped in its own
    # batch, in the next one, and b's in batch 2 though its event time is far behind; the watermark stays 0
    "dedup-for-ever": (
        {"kind": "dedup"},
        [[0, "a", 1, 0, 0], [0, "a", 2, 5, 0], [0, "b", 3, 10, 0], [0, "a", 4, 1000, 1000],
         [0, "c", 5, 1000, 1000], [0, "b", 6, 0, 2000], [0, "d", 7, 3, 2000]],
        [[["a", 1], ["b", 3]], [["c", 5]], [["d", 7]]], [0, 0, 0]),
    # dropDuplicates(key, ts), delay 10: batch 0 (late 0, evict 0) drops a's copy at 100 and z at the epoch,
    # keeps a at 105; batch 1 (late 0, evict 95) drops a at 100 (held), emits b at 95 and evicts it at once;
    # batch 2 (late 95, evict 190) drops b at 95 (late) and a at 100 (still held: 100 > 95), emits d at 150
    "dedup-by-key-and-event-time": (
        {"kind": "dedup", "watermark_delay_ms": 10},
        [[0, "a", 1, 100, 0], [0, "a", 2, 100, 0], [0, "a", 3, 105, 0], [0, "z", 9, 0, 0],
         [0, "a", 4, 100, 1000], [0, "b", 5, 95, 1000], [0, "c", 6, 200, 1000],
         [0, "b", 7, 95, 2000], [0, "a", 8, 100, 2000], [0, "d", 9, 150, 2000]],
        [[["a", 1], ["a", 3]], [["b", 5], ["c", 6]], [["d", 9]]], [0, 95, 190]),
    # batch 1 runs with late 0 and eviction 105: the row at 55 is not late, its window [50, 60) is
    # emitted at once; [100, 110) waits; batch 2 keeps b's window [120, 130)
    "window-behind-the-watermark": (
        {"kind": "window_aggregate", "agg": "sum", "window_ms": 10, "watermark_delay_ms": 0},
        [[0, "a", 1, 105, 0], [0, "a", 2, 55, 1000], [0, "b", 4, 120, 2000]],
        [[], [["a", [50, 60, 2]]], []], [0, 105, 105]),
    # windows of 10 ms, delay 5: batch 0 sees 10 (window [10, 20)); batch 1 (evict 5) adds 25; batch 2
    # (late 5, evict 20) emits [10, 20) whose end equals the watermark, and keeps [20, 30)
    "window-end-equals-the-watermark": (
        {"kind": "window_aggregate", "agg": "count", "window_ms": 10, "watermark_delay_ms": 5},
        [[0, "a", 1, 10, 0], [0, "a", 1, 25, 1000], [0, "b", 1, 30, 2000]],
        [[], [], [["a", [10, 20, 1]]]], [0, 5, 20]),
    # timeout 20, delay 10: a at 10 sets its timeout to 30; batch 1 (evict 0) sees b at 40; batch 2 runs
    # with eviction watermark 30 = a's timeout, which does not fire (30 < 30 is false); batch 3 (evict 35)
    # fires it; b (timeout 65) and c stay
    "session-timeout-at-the-watermark": (
        {"kind": "stateful_function", "function": "session_sum", "timeout_ms": 20, "watermark_delay_ms": 10},
        [[0, "a", 3, 10, 0], [0, "b", 4, 40, 1000], [0, "b", 1, 45, 2000], [0, "c", 2, 100, 3000]],
        [[], [], [], [["a", [3, 1]]]], [0, 0, 30, 35]),
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_whole_queries_give_the_hand_derived_rows_and_watermarks(name):
    operator, records, expected_rows, expected_watermarks = SCENARIOS[name]
    scenario = explicit(operator, records, name)
    data = SourceData.of(scenario)
    bounds, start = [], (0,)
    for b in range(data.planned_batches()):
        end = tuple(data.planned_end_offsets(b))
        bounds.append(BatchBounds(b, start, end))
        start = end
    result = run_sequential(scenario, data, bounds)
    assert [result.outputs[b] for b in range(len(bounds))] == expected_rows
    assert [result.watermarks[b] for b in range(len(bounds))] == expected_watermarks


def test_after_a_restart_a_join_s_watermark_waits_for_new_data_on_both_sides():
    """Spark keeps only the combined watermark in the checkpoint (``WatermarkTracker``; ``commits/<b>``
    ``nextBatchWatermarkMs``), not each input's maximum event time: after a restart, a join's watermark
    moves again only once both sides have data.

    Arrivals cut batches every second. Batch 0: both sides at 100, so batch 1 runs with watermark 100;
    batch 1 is empty; batch 2: left at 300 (min(300, 100) = 100); batch 3: right at 400, so without a
    restart batch 4 runs with min(300, 400) = 300. The driver crashes after commits/2: the restarted query
    has forgotten that the left side reached 300, sees only the right side's 400 in batch 3, and batch 4
    still runs with 100.
    """
    from reference.protocol.run import run_scenario
    left = [[0, "k", 1, 100, 0], [0, "k", 2, 300, 2000], [0, "k", 3, 500, 4000]]
    right = [[0, "k", 1, 100, 0], [0, "k", 2, 400, 3000]]

    def join(faults: list[dict[str, Any]]) -> Scenario:
        return Scenario.from_dict({"name": "join-restart", "seed": 1,
                                   "sources": {"left": {"kind": "explicit", "batch_ms": 1000, "records": left},
                                               "right": {"kind": "explicit", "batch_ms": 1000, "records": right}},
                                   "query": {"operator": {"kind": "join", "time_bound_ms": 0,
                                                          "watermark_delay_ms": 0}, "state_partitions": 1},
                                   "faults": faults})
    crash = [{"at": {"step": "commit_log_write", "batch": 2, "when": "after"}, "kind": "driver_crash"}]
    assert [b.watermark_ms for b in run_scenario(join([])).outcome().batches] == [0, 100, 100, 100, 300]
    assert [b.watermark_ms for b in run_scenario(join(crash)).outcome().batches] == [0, 100, 100, 100, 100]
