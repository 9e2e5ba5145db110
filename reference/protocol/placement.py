"""State placement: which executor holds each state partition, and state rebalancing.

Project Lightspeed added "a state rebalancing algorithm in the task scheduler
that ensures the tasks associated with the state are evenly spread across the
available executors when new executors are added or removed", with "no state
placement flapping", converging "with minimal number of movement of state
tasks" (lightspeed-update.txt, State Rebalancing; DBR 11.1). This module is the
reference semantics of that promise. It is an extension: Spark OSS has no
state rebalancing. Its scheduler only prefers the executor a state store was
loaded on last (``StateStoreRDD.getPreferredLocations``); the proposal to let
a plugin place stateful tasks, SPARK-35022 (apache/spark#32136, with the
reference plugin apache/spark#32422), was closed without being merged.

``place(partitions, executors, current)`` is pure and deterministic. The rule:

* Home. Sort the executor ids (plain string order). Partition p's home is
  ``executors[p % len(executors)]``: the round-robin of the first placement,
  which for executors ``["0", "1"]`` is the reference model's ``p % 2``.
* Targets. With q, r = divmod(P, E), r executors hold q + 1 partitions and the
  rest q. The q + 1 slots go first to executors that already hold more than q
  (this is what keeps the most partitions in place), then to executors with the
  largest claim, capped at q + 1: the partitions they hold plus the homeless
  partitions (on a departed executor, or missing) whose home they are; ties go
  to the lower sorted id.
* Keep. An executor keeps at most its target of the partitions it holds: its
  home partitions first, then the lower partition ids.
* Fill. The rest (homeless and shed partitions), in ascending id, go to their
  home if it still has room, and otherwise to the lowest sorted executor with
  room.

Every partition whose executor changes is a ``Move``, including one that had
none (``source`` None: it loads its state from the checkpoint). The number of
moves is the least of all balanced placements (``fewest_moves``); the output is
a fixed point, so a recomputation with the same executors moves nothing.

Join then leave. A join moves state only onto the new executor x, and the
leave of x moves only x's partitions, the set M the join moved; so the leave
returns to the start A exactly when the rule above, re-placing M, puts each
partition of M where A had it. That is sure when every partition of M sat on
its home executor in A (always so for a placement made from scratch), or when
only one balanced placement moves just M. Otherwise it can fail: the joined
placement no longer says where M came from, two starts that differ only there
join alike, and the leave, a function of the joined placement, restores at
most one of them (for P = 3 over a, b: starts a b a and a b b both join c as
a b c, and the leave gives a b a).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


class PlacementError(ValueError):
    """A placement request that no balanced placement can answer, named by the field at fault."""


@dataclass(frozen=True)
class Move:
    """State partition ``partition`` leaves ``source`` (None: it had no executor) and loads on ``target``."""
    partition: int
    source: str | None
    target: str


@dataclass(frozen=True)
class Placement:
    """Each state partition's executor (``assignment[p]``) and the moves that reached it."""
    partitions: int
    executors: tuple[str, ...]       # sorted, unique
    assignment: tuple[str, ...]      # assignment[p]: executor of state partition p
    moves: tuple[Move, ...]          # ascending partition

    def __post_init__(self) -> None:
        assert list(self.executors) == sorted(set(self.executors)), self.executors
        assert len(self.assignment) == self.partitions, (self.partitions, self.assignment)
        assert set(self.assignment) <= set(self.executors), self.assignment
        loads = [len(self.partitions_of(e)) for e in self.executors]
        assert max(loads) - min(loads) <= 1, f"unbalanced placement: {dict(zip(self.executors, loads))}"
        assert all(self.assignment[m.partition] == m.target != m.source for m in self.moves), self.moves
        assert [m.partition for m in self.moves] == sorted({m.partition for m in self.moves}), self.moves

    def executor_of(self, partition: int) -> str:
        if not 0 <= partition < self.partitions:
            raise PlacementError(f"partition {partition} is outside 0..{self.partitions - 1}")
        return self.assignment[partition]

    def partitions_of(self, executor: str) -> tuple[int, ...]:
        return tuple(p for p, e in enumerate(self.assignment) if e == executor)

    def as_current(self) -> dict[int, str]:
        """The placement as the ``current`` argument of the next ``place``."""
        return dict(enumerate(self.assignment))


def place(partitions: int, executors: Sequence[str], current: Mapping[int, str] | None = None) -> Placement:
    """Spread ``partitions`` state partitions evenly over ``executors``, moving as few as possible from ``current``.

    ``current`` may name executors that have left and may lack partitions;
    both must move. None means a first placement: the round-robin over the
    sorted executor ids.
    """
    _check_partitions(partitions)
    ids = _checked_executors(executors)
    held = _checked_current(partitions, current or {})
    targets = _targets(partitions, ids, held)
    kept = _kept(ids, held, targets)
    assignment = _filled(partitions, ids, kept, targets)
    moves = tuple(Move(p, held.get(p), e) for p, e in enumerate(assignment) if held.get(p) != e)
    assert len(moves) == fewest_moves(partitions, ids, held), (moves, held)
    return Placement(partitions, ids, assignment, moves)


def fewest_moves(partitions: int, executors: Sequence[str], current: Mapping[int, str] | None = None) -> int:
    """The fewest partitions any balanced placement over ``executors`` must move from ``current``.

    Executor e can keep at most min(held_e, target_e) of its partitions, and
    the r = P mod E slots of q + 1 do most good on executors holding more than q.
    """
    _check_partitions(partitions)
    ids = _checked_executors(executors)
    held = _checked_current(partitions, current or {})
    floor, extra = divmod(partitions, len(ids))
    counts = [len(on) for on in _holdings(ids, held).values()]
    keepable = sum(min(c, floor) for c in counts) + min(extra, sum(c > floor for c in counts))
    return partitions - keepable


def join(placement: Placement, executor: str) -> Placement:
    """Rebalance after ``executor`` is added; refuses an executor that is already present."""
    if executor in placement.executors:
        raise PlacementError(f"executor {executor!r} cannot join: it is already one of {list(placement.executors)}")
    return place(placement.partitions, (*placement.executors, executor), placement.as_current())


def leave(placement: Placement, executor: str) -> Placement:
    """Rebalance after ``executor`` is removed; refuses an absent executor and the last one."""
    if executor not in placement.executors:
        raise PlacementError(f"executor {executor!r} cannot leave: it is not one of {list(placement.executors)}")
    if len(placement.executors) == 1:
        raise PlacementError(f"executor {executor!r} cannot leave: it is the last executor, "
                             f"and the {placement.partitions} state partitions need one")
    rest = [e for e in placement.executors if e != executor]
    return place(placement.partitions, rest, placement.as_current())


def home(partition: int, executors: Sequence[str]) -> str:
    """The round-robin executor of ``partition`` over the sorted ids ``executors``."""
    return executors[partition % len(executors)]


# ---------------------------------------------------------------- the rule's steps

def _targets(partitions: int, ids: tuple[str, ...], held: dict[int, str]) -> dict[str, int]:
    """How many partitions each executor is to hold: q, or q + 1 for r of them."""
    floor, extra = divmod(partitions, len(ids))
    holdings = _holdings(ids, held)
    demand = Counter(home(p, ids) for p in range(partitions) if held.get(p) not in holdings)

    def rank(i: int) -> tuple[bool, int, int]:
        count = len(holdings[ids[i]])
        return (count <= floor, -min(count + demand[ids[i]], floor + 1), i)

    big = set(sorted(range(len(ids)), key=rank)[:extra])
    targets = {e: floor + (i in big) for i, e in enumerate(ids)}
    assert sum(targets.values()) == partitions, targets
    return targets


def _kept(ids: tuple[str, ...], held: dict[int, str], targets: dict[str, int]) -> dict[int, str]:
    """The partitions that stay: each executor's home partitions first, then the lower ids, up to its target."""
    kept: dict[int, str] = {}
    for e, on in _holdings(ids, held).items():
        for p in sorted(on, key=lambda p: (home(p, ids) != e, p))[:targets[e]]:
            kept[p] = e
    return kept


def _filled(partitions: int, ids: tuple[str, ...], kept: dict[int, str],
            targets: dict[str, int]) -> tuple[str, ...]:
    """Every partition's executor: the kept ones stay, the rest go home if there is room, else to the lowest room."""
    where = dict(kept)
    room = {e: targets[e] - sum(1 for k in kept.values() if k == e) for e in ids}
    pool = [p for p in range(partitions) if p not in kept]
    for p in pool:
        if room[home(p, ids)] > 0:
            where[p] = home(p, ids)
            room[where[p]] -= 1
    for p in (p for p in pool if p not in where):
        where[p] = next(e for e in ids if room[e] > 0)
        room[where[p]] -= 1
    assert sorted(where) == list(range(partitions)) and not any(room.values()), (where, room)
    return tuple(where[p] for p in range(partitions))


def _holdings(ids: tuple[str, ...], held: dict[int, str]) -> dict[str, list[int]]:
    """Each present executor's partitions in ``held``, ascending; departed executors are left out."""
    holdings: dict[str, list[int]] = {e: [] for e in ids}
    for p in sorted(held):
        if held[p] in holdings:
            holdings[held[p]].append(p)
    return holdings


# ---------------------------------------------------------------- refusals

def _check_partitions(partitions: int) -> None:
    if isinstance(partitions, bool) or not isinstance(partitions, int) or partitions < 1:
        raise PlacementError(f"partitions must be an integer >= 1, got {partitions!r}")


def _checked_executors(executors: Sequence[str]) -> tuple[str, ...]:
    """The executor ids, sorted; refuses none, a bare string, a non-string or empty id, and duplicates."""
    if isinstance(executors, str):
        raise PlacementError(f"executors must be a sequence of executor ids, not the string {executors!r}")
    if len(executors) == 0:
        raise PlacementError("executors is empty: the state partitions need at least one executor")
    for e in executors:
        if not isinstance(e, str) or not e:
            raise PlacementError(f"executor id {e!r} is not a non-empty string")
    twice = sorted(e for e, n in Counter(executors).items() if n > 1)
    if twice:
        raise PlacementError(f"executor id {twice[0]!r} appears more than once in executors")
    return tuple(sorted(executors))


def _checked_current(partitions: int, current: Mapping[int, str]) -> dict[int, str]:
    """``current`` as a plain dict; refuses a partition outside 0..P-1 and an executor id that is not a string."""
    held: dict[int, str] = {}
    for p in sorted(current, key=repr):
        if isinstance(p, bool) or not isinstance(p, int) or not 0 <= p < partitions:
            raise PlacementError(f"current placement names partition {p!r}, outside 0..{partitions - 1}")
        if not isinstance(current[p], str) or not current[p]:
            raise PlacementError(f"current placement gives partition {p} the executor id {current[p]!r}, "
                                 "not a non-empty string")
        held[p] = current[p]
    return held
