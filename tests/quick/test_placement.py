"""State placement and rebalancing (reference/protocol/placement.py): balance, fewest moves, no flapping, refusals.

The fewest-moves property is checked against a brute force that enumerates
every balanced placement of up to 6 partitions over up to 4 executors. The
hand examples derive their expected placements from the module's stated rule.
"""

from __future__ import annotations

import ast
import dataclasses
import itertools
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, note
from hypothesis import strategies as st

from reference.protocol.placement import Move, Placement, PlacementError, fewest_moves, home, join, leave, place
from reference.language.scenario import DEFAULT_EXECUTORS

ROOT = Path(__file__).resolve().parents[2]
IDS = ("0", "1", "10", "2", "9", "a", "b", "exec-7")   # "10" sorts before "2" and "9": plain string order
DEPARTED = ("gone", "lost-3")


@st.composite
def requests(draw: st.DrawFn, max_partitions: int = 12, max_executors: int = 5) -> tuple:
    """(partitions, executors in drawn order, current) where current may name departed executors and lack partitions."""
    partitions = draw(st.integers(1, max_partitions))
    executors = draw(st.lists(st.sampled_from(IDS), min_size=1, max_size=max_executors, unique=True))
    before = draw(st.lists(st.sampled_from(IDS + DEPARTED), min_size=1, max_size=max_executors + 1, unique=True))
    current = draw(st.none() | st.dictionaries(st.integers(0, partitions - 1), st.sampled_from(before)))
    note(f"place({partitions}, {executors}, {current})")
    return partitions, executors, current


def balanced(assignment: tuple[str, ...], executors: list[str]) -> bool:
    """Every executor known, and P mod E of them hold q + 1 partitions, the rest q (q = P div E)."""
    floor, extra = divmod(len(assignment), len(executors))
    loads = sorted(assignment.count(e) for e in executors)
    return set(assignment) <= set(executors) and loads == [floor] * (len(executors) - extra) + [floor + 1] * extra


def moved(assignment: tuple[str, ...], current: dict[int, str] | None) -> int:
    return sum((current or {}).get(p) != e for p, e in enumerate(assignment))


def brute_force_fewest_moves(partitions: int, executors: list[str], current: dict[int, str] | None) -> int:
    """The least number of moves over every balanced placement, by enumeration."""
    return min(moved(a, current) for a in itertools.product(executors, repeat=partitions) if balanced(a, executors))


def dump(placement: Placement) -> bytes:
    return json.dumps(dataclasses.asdict(placement)).encode()


# ---------------------------------------------------------------- properties

@given(requests())
def test_every_partition_is_placed_once_and_loads_differ_by_at_most_one(request):
    partitions, executors, current = request
    out = place(partitions, executors, current)
    assert len(out.assignment) == partitions
    assert balanced(out.assignment, executors)
    assert sorted(p for e in executors for p in out.partitions_of(e)) == list(range(partitions))


@given(requests())
def test_moves_are_exactly_the_partitions_whose_executor_changed(request):
    partitions, executors, current = request
    out = place(partitions, executors, current)
    held = current or {}
    assert out.moves == tuple(Move(p, held.get(p), e) for p, e in enumerate(out.assignment) if held.get(p) != e)
    departed = {p for p, e in held.items() if e not in executors}
    assert departed <= {m.partition for m in out.moves}


@given(requests(max_partitions=6, max_executors=4))
def test_moves_are_the_fewest_of_any_balanced_placement(request):
    partitions, executors, current = request
    best = brute_force_fewest_moves(partitions, executors, current)
    assert len(place(partitions, executors, current).moves) == best
    assert fewest_moves(partitions, executors, current) == best


@given(requests())
def test_a_placement_is_a_fixed_point_so_recomputing_moves_nothing(request):
    partitions, executors, current = request
    out = place(partitions, executors, current)
    again = place(partitions, list(reversed(executors)), out.as_current())
    assert again.moves == ()
    assert again.assignment == out.assignment


@given(requests(), st.randoms(use_true_random=False))
def test_same_inputs_in_any_order_give_the_same_bytes(request, rng):
    partitions, executors, current = request
    shuffled = list(executors)
    rng.shuffle(shuffled)
    items = list((current or {}).items())
    rng.shuffle(items)
    assert dump(place(partitions, shuffled, dict(items) if current is not None else None)) == \
        dump(place(partitions, executors, current))


@given(requests(), st.sampled_from(IDS + DEPARTED))
def test_a_join_moves_state_only_onto_the_new_executor(request, newcomer):
    partitions, executors, current = request
    start = place(partitions, executors, current)
    if newcomer in start.executors:
        return
    joined = join(start, newcomer)
    assert all(m.target == newcomer for m in joined.moves)
    assert len(joined.moves) == fewest_moves(partitions, joined.executors, start.as_current())


@given(requests())
def test_a_leave_moves_only_the_leaving_executors_state(request):
    partitions, executors, current = request
    start = place(partitions, executors, current)
    if len(executors) == 1:
        return
    leaver = sorted(executors)[partitions % len(executors)]
    left = leave(start, leaver)
    assert [m.partition for m in left.moves] == list(start.partitions_of(leaver))
    assert all(m.source == leaver for m in left.moves)


def ways_to_put_back(start: Placement, moved_partitions: tuple[int, ...]) -> int:
    """How many balanced placements over the start's executors agree with the start outside the moved partitions."""
    rest = list(start.assignment)
    count = 0
    for targets in itertools.product(start.executors, repeat=len(moved_partitions)):
        for p, e in zip(moved_partitions, targets):
            rest[p] = e
        count += balanced(tuple(rest), list(start.executors))
    return count


@given(requests(), st.sampled_from(IDS + DEPARTED))
def test_join_then_leave_returns_to_the_start_or_the_documented_reason_holds(request, newcomer):
    """The documented exception: the joined placement forgets where the partitions moved to x came from. The
    start comes back unless one of them sat off its home executor and more than one way to put them back exists."""
    partitions, executors, current = request
    start = place(partitions, executors, current)
    if newcomer in start.executors:
        return
    joined = join(start, newcomer)
    back = leave(joined, newcomer)
    moved_partitions = joined.partitions_of(newcomer)
    off_home = [p for p in moved_partitions if start.assignment[p] != home(p, start.executors)]
    note(f"start {start.assignment}, joined {joined.assignment}, back {back.assignment}, off home {off_home}")
    assert back.assignment == start.assignment or (off_home and ways_to_put_back(start, moved_partitions) > 1)
    if current is None:
        assert back.assignment == start.assignment


def test_join_then_leave_can_fail_only_because_two_starts_join_alike():
    """Hand example of the exception: P=3 over [a, b]. Start A1 is the round-robin (a, b, a); A2 = (a, b, b).
    Joining c (one partition each; homes over [a, b, c] are a, b, c) keeps partition 0 on a and 1 on b, each
    at its home, and sheds partition 2 to c, in both. The leave sends 2 to its home over [a, b], which is a:
    A1 comes back, A2 cannot, and in A2 partition 2 was off its home."""
    a1 = place(3, ["a", "b"], {0: "a", 1: "b", 2: "a"})
    a2 = place(3, ["a", "b"], {0: "a", 1: "b", 2: "b"})
    assert (a1.moves, a2.moves) == ((), ())
    assert join(a1, "c").assignment == join(a2, "c").assignment == ("a", "b", "c")
    assert leave(join(a1, "c"), "c").assignment == ("a", "b", "a")
    assert leave(join(a2, "c"), "c").assignment == ("a", "b", "a") != a2.assignment
    assert home(2, a2.executors) == "a" != a2.assignment[2]


def test_the_same_bytes_under_different_hash_seeds():
    script = ("import dataclasses, json; from reference.protocol.placement import place, join; "
              "print(json.dumps([dataclasses.asdict(x) for x in ["
              "place(7, ['b', 'a', 'c'], {0: 'gone', 3: 'b', 4: 'b', 5: 'b', 6: 'a'}), "
              "join(place(9, ['x', 'y']), 'w'), place(5, {'q', 'r', 's', 'p'}, {1: 'r', 2: 'r', 3: 'r'})]]))")
    runs = [subprocess.run([sys.executable, "-c", script], capture_output=True, check=True, cwd=ROOT,
                           env={**os.environ, "PYTHONPATH": str(ROOT), "PYTHONHASHSEED": seed}).stdout
            for seed in ("1", "2")]
    assert runs[0] == runs[1] and runs[0]


# ---------------------------------------------------------------- hand-derived examples

def test_the_default_placement_is_partition_p_on_executor_p_mod_2():
    """Without executor events a scenario runs on executors "0" and "1" (docs/spec.md: ``executors``), partition p
    on executor p % 2; the engines take it from the placement, not from a rule of their own."""
    assert DEFAULT_EXECUTORS == ("0", "1")
    for partitions in range(1, 17):
        assert place(partitions, DEFAULT_EXECUTORS).assignment == tuple(str(p % 2) for p in range(partitions))


def test_first_placement_is_round_robin_over_ids_in_string_order():
    # sorted: "10", "2", "9"
    out = place(7, ["9", "2", "10"])
    assert out.assignment == ("10", "2", "9", "10", "2", "9", "10")
    assert out.moves == tuple(Move(p, None, e) for p, e in enumerate(out.assignment))


def test_join_example():
    """P=6 over a: 0 2 4, b: 1 3 5. Joining c: 2 each; homes over [a, b, c] are a b c a b c.
    a keeps its home partition 0, then the lower id 2, and sheds 4; b keeps 1 (home), then 3, and sheds 5.
    5's home c has room; 4's home b has none, so 4 goes to the lowest executor with room, c."""
    joined = join(place(6, ["a", "b"]), "c")
    assert joined.assignment == ("a", "b", "a", "b", "c", "c")
    assert joined.moves == (Move(4, "a", "c"), Move(5, "b", "c"))
    back = leave(joined, "c")   # 4 and 5 go home over [a, b]: a and b
    assert back.assignment == ("a", "b", "a", "b", "a", "b")


def test_leave_example():
    """P=5 over a: 0 3, b: 1 4, c: 2. b leaves: 3 and 2 slots. Nobody holds more than 2; the claims
    (held + homeless partitions homed there, homes over [a, c] being a c a c a) are a: 2 + 1 (partition 4),
    c: 1 + 1 (partition 1), so a gets the 3. Partition 1 goes home to c, 4 home to a."""
    left = leave(place(5, ["a", "b", "c"]), "b")
    assert left.assignment == ("a", "c", "c", "a", "a")
    assert left.moves == (Move(1, "b", "c"), Move(4, "b", "a"))


def test_departed_executor_example():
    """P=4 over [x, y] (2 each, homes x y x y) from x: 0 1 2, gone: 3. x keeps its home partitions 0 and 2
    and sheds 1; 1 and 3 (departed) both go home to y."""
    out = place(4, ["y", "x"], {0: "x", 1: "x", 2: "x", 3: "gone"})
    assert out.assignment == ("x", "y", "x", "y")
    assert out.moves == (Move(1, "x", "y"), Move(3, "gone", "y"))


def test_missing_partitions_example():
    """P=3 over [a, b] from a: 0 only. One executor holds 2; nobody holds more than 1; claims a: 1 + 1
    (missing 2 is homed at a), b: 0 + 1 (missing 1), so a gets 2 slots. 1 goes to b, 2 to a."""
    out = place(3, ["a", "b"], {0: "a"})
    assert out.assignment == ("a", "b", "a")
    assert out.moves == (Move(1, None, "b"), Move(2, None, "a"))


def test_the_extra_slot_goes_to_the_executor_that_already_holds_more():
    """P=5 over [a, b] from b holding all five: b (over 2) gets the 3 slot and keeps its home partitions
    1 and 3, then the lower id 0; 2 and 4 go home to a. Two moves, the fewest (b can keep at most 3)."""
    out = place(5, ["a", "b"], {p: "b" for p in range(5)})
    assert out.assignment == ("b", "b", "a", "b", "a")
    assert out.moves == (Move(2, "b", "a"), Move(4, "b", "a"))


# ---------------------------------------------------------------- refusals

@pytest.mark.parametrize("call, named", [
    (lambda: place(4, []), "executors is empty"),
    (lambda: leave(place(4, ["solo"]), "solo"), "'solo' cannot leave: it is the last executor"),
    (lambda: place(4, ["a", "b", "a"]), "executor id 'a' appears more than once"),
    (lambda: join(place(4, ["a", "b"]), "b"), "executor 'b' cannot join: it is already one of"),
    (lambda: leave(place(4, ["a", "b"]), "c"), "executor 'c' cannot leave: it is not one of"),
    (lambda: place(0, ["a"]), "partitions must be an integer >= 1, got 0"),
    (lambda: place(-2, ["a"]), "partitions must be an integer >= 1, got -2"),
    (lambda: place(True, ["a"]), "partitions must be an integer >= 1, got True"),
    (lambda: place(4, ["a"], {4: "a"}), "current placement names partition 4, outside 0..3"),
    (lambda: place(4, ["a"], {-1: "a"}), "current placement names partition -1, outside 0..3"),
    (lambda: place(4, ["a"], {"1": "a"}), "current placement names partition '1', outside 0..3"),
    (lambda: place(4, ["a"], {2: 7}), "current placement gives partition 2 the executor id 7"),
    (lambda: place(4, "ab"), "not the string 'ab'"),
    (lambda: place(4, ["a", ""]), "executor id '' is not a non-empty string"),
    (lambda: place(4, ["a"]).executor_of(4), "partition 4 is outside 0..3"),
])
def test_bad_input_is_refused_naming_the_thing(call, named):
    with pytest.raises(PlacementError, match=re.escape(named)):
        call()


@given(requests(), st.integers(-5, 20))
def test_a_current_partition_outside_the_range_is_refused_by_number(request, bad):
    partitions, executors, current = request
    if 0 <= bad < partitions:
        return
    with pytest.raises(PlacementError, match=f"partition {bad}, outside 0..{partitions - 1}"):
        place(partitions, executors, {**(current or {}), bad: executors[0]})


def test_placement_error_is_a_value_error():
    assert issubclass(PlacementError, ValueError)


def test_the_module_imports_only_the_standard_library():
    tree = ast.parse((ROOT / "reference" / "protocol" / "placement.py").read_text())
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module}
    assert imported <= set(sys.stdlib_module_names), imported - set(sys.stdlib_module_names)
    assert not any(isinstance(node, ast.ImportFrom) and node.level > 0 for node in ast.walk(tree))


# ---------------------------------------------------------------- who gets the extra slots (hand-derived)

def test_an_executor_at_its_floor_does_not_take_an_extra_slot_from_one_whose_home_partitions_wait():
    """3 partitions over a, c (homes a, c, a); c already holds 1, nothing holds 0 or 2. Floor 1, one extra slot.
    c is at its floor; a holds nothing and both waiting partitions are at home on a: a takes the extra slot and
    every partition is at home."""
    assert place(3, ["a", "c"], {1: "c"}).assignment == ("a", "c", "a")


def test_a_waiting_partition_goes_home_when_the_extra_slots_are_handed_out():
    """2 partitions over a, c, d, f (homes a, c); f holds 0. Floor 0, two extra slots: f keeps the one it holds
    (it is above its floor), and the other goes to c, the home of the waiting partition 1."""
    assert place(2, ["a", "c", "d", "f"], {0: "f"}).assignment == ("f", "c")


def test_demand_beyond_one_extra_does_not_outrank_a_lower_id():
    """5 partitions over a, d, e, f (homes a, d, e, f, a); d holds 0 and 4, e holds 1 and 3, 2 waits (home e).
    Floor 1, one extra slot: d and e both hold two, and neither can hold more than two, so e's waiting home
    partition does not put it ahead: the lower id, d, keeps two. e keeps 1 (the lower of its two), 3 goes home
    to f, 2 to the lowest executor with room, a."""
    assert place(5, ["a", "d", "e", "f"], {0: "d", 1: "e", 3: "e", 4: "d"}).assignment == ("d", "e", "a", "f", "d")


def test_placements_and_moves_are_values():
    placement = place(2, ["a", "b"], {0: "b"})
    with pytest.raises(dataclasses.FrozenInstanceError):
        placement.assignment = ("a", "a")  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        placement.moves[0].target = "b"  # type: ignore[misc]


def test_a_partition_outside_the_placement_is_refused_by_name():
    placement = place(2, ["a", "b"])
    for bad in (-1, 2):
        with pytest.raises(PlacementError, match=rf"partition {bad} is outside 0\.\.1"):
            placement.executor_of(bad)


def test_the_first_duplicated_id_is_the_one_named():
    with pytest.raises(PlacementError, match="executor id 'a' appears more than once"):
        place(2, ["b", "a", "b", "a"])


def test_an_unbalanced_placement_cannot_be_built():
    with pytest.raises(AssertionError, match="unbalanced placement"):
        Placement(3, ("a", "b"), ("a", "a", "a"), ())
    with pytest.raises(AssertionError, match="unbalanced placement"):
        Placement(4, ("a", "b"), ("a", "a", "a", "b"), ())
