"""Operator boundaries the mutation run found unpinned (reference/language/operators.py, spec section 1 additions).

Join condition: ``|left.event_time - right.event_time| <= time_bound_ms``, so two rows exactly the bound
apart join and one millisecond further do not, from either side.
"""

from __future__ import annotations

import dataclasses

import pytest

from reference.language.operators import Row, Watermark, apply_operator, watermark_of
from reference.language.scenario import OperatorSpec

JOIN = OperatorSpec("join", time_bound_ms=10, watermark_delay_ms=0)


def joined(state_side: str, t_state: int, row_side: str, t_row: int) -> list[list[object]]:
    state = {"left": {}, "right": {}}
    state[state_side] = {"k": [[t_state, "s"]]}
    _new, out = apply_operator(JOIN, state, [Row("k", "r", t_row, row_side)], Watermark(0, 0))
    return [[r.key, r.value, r.event_time_ms] for r in out]


def test_rows_exactly_the_time_bound_apart_join_from_either_side():
    assert joined("right", 100, "left", 110) == [["k", ["r", "s"], 110]]
    assert joined("right", 100, "left", 90) == [["k", ["r", "s"], 100]]
    assert joined("left", 100, "right", 110) == [["k", ["s", "r"], 110]]


def test_rows_one_ms_beyond_the_time_bound_do_not_join():
    assert joined("right", 100, "left", 111) == []
    assert joined("left", 100, "right", 89) == []


def test_both_sides_of_one_batch_join_whatever_order_the_rows_come_in():
    """Left rows are matched first against the right state, then right rows against the left state, so a pair
    arriving in one batch joins once, even when the right row comes first."""
    state = {"left": {}, "right": {}}
    batch = [Row("k", "a", 100, "right"), Row("k", "b", 105, "left")]
    new, out = apply_operator(JOIN, state, batch, Watermark(0, 0))
    assert [[r.key, r.value] for r in out] == [["k", ["b", "a"]]]
    assert new == {"left": {"k": [[105, "b"]]}, "right": {"k": [[100, "a"]]}}


def test_an_emitted_window_carries_its_window_time_as_event_time():
    """Spark's ``window_time``: a window's rows downstream have event time end - 1 (here in ms)."""
    window = OperatorSpec("window_aggregate", agg="sum", window_ms=30, watermark_delay_ms=0)
    state, _ = apply_operator(window, {"": {}}, [Row("k", 4, 5)], Watermark(0, 0))
    _, out = apply_operator(window, state, [], Watermark(0, 30))
    assert [(r.key, r.value, r.event_time_ms, r.measure) for r in out] == [("k", [0, 30, 4], 29, 4)]


def test_the_watermark_of_batch_zero_is_zero_and_frozen():
    assert Watermark() == Watermark(0, 0) and Watermark().is_late(0) and not Watermark().is_late(1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        Watermark().late_ms = 5   # type: ignore[misc]


def test_rows_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        Row("k", 1, 0).value = 2   # type: ignore[misc]


def test_a_zero_watermark_delay_keeps_a_dedup_entry_until_its_own_event_time():
    dedup = OperatorSpec("dedup_within_watermark", watermark_delay_ms=0)
    state, _ = apply_operator(dedup, {"": {}}, [Row("a", 1, 50)], Watermark(0, 0))
    assert state == {"": {"a": 50}}                                       # expires at 50 + 0
    assert apply_operator(dedup, state, [], Watermark(0, 49))[0] == {"": {"a": 50}}
    assert apply_operator(dedup, state, [], Watermark(0, 50))[0] == {"": {}}


def test_a_zero_time_bound_joins_rows_of_the_same_instant_only():
    join = OperatorSpec("join", time_bound_ms=0, watermark_delay_ms=0)
    state = {"left": {}, "right": {"k": [[70, "s"]]}}
    assert [r.value for r in apply_operator(join, state, [Row("k", "r", 70, "left")], Watermark(0, 0))[1]] == \
        [["r", "s"]]
    assert apply_operator(join, state, [Row("k", "r", 71, "left")], Watermark(0, 0))[1] == []


def test_a_zero_timeout_times_a_session_out_once_the_watermark_passes_its_last_event():
    fn = OperatorSpec("stateful_function", function="session_sum", timeout_ms=0, watermark_delay_ms=0)
    state, _ = apply_operator(fn, {"": {}}, [Row("a", 3, 50)], Watermark(0, 0))
    assert state == {"": {"a": [3, 1, 50, 50]}}                          # timeout at 50 + 0
    assert apply_operator(fn, state, [], Watermark(0, 50))[1] == []     # not strictly before 50
    _, out = apply_operator(fn, state, [], Watermark(0, 51))
    assert [(r.key, r.value, r.event_time_ms) for r in out] == [("a", [3, 1], 50)]


def test_a_tracker_without_a_late_watermark_filters_nothing_late():
    assert watermark_of({"watermark_ms": 30}) == Watermark(0, 30)
    assert watermark_of({"watermark_ms": 30, "late_watermark_ms": 20}) == Watermark(20, 30)
