"""Operator boundaries the mutation run found unpinned (reference/operators.py, SPEC section 1 additions).

Join condition: ``|left.event_time - right.event_time| <= time_bound_ms``, so two rows exactly the bound
apart join and one millisecond further do not, from either side.
"""

from __future__ import annotations

from reference.operators import Row, Watermark, apply_operator
from reference.scenario import OperatorSpec

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
