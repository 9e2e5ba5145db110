"""Whether each bound of ``bounds.py`` is tight: the schedule of an exploration that reaches it.

A bound looser than the protocol lets a backend that re-runs, keeps or
delivers too much pass. So the explorer measures, on every crash cut and every
outcome it judges, the value each bound constrains, keeps the most extreme
value and the first schedule that gave it, and the report says, per bound,
whether some schedule reached it (``tight``). What is measured:

- ``replay`` (the bound ``in_flight`` under sync progress, ``async_progress_rerun``
  under async progress): the batches the restart after a crash re-ran;
- ``pending_state_commits``: at the crash, on partition 0, the batches whose
  task ran and whose state commit did not, less one (the batch running);
- ``offset_entries_kept``, ``commit_entries_kept`` (floors, sync progress): the
  fewest entries of each log at a crash, once the log is long enough for the
  floor to apply; ``offset_entries_ceiling`` (inline purge): the most;
- ``versions_kept`` (a floor): the fewest versions of one store partition an
  outcome retains, once there are that many;
- ``copies_per_rerun`` (at-least-once sink): the most extra copies of one row
  per re-run or retried attempt of its batch.

A bound that is not in force (no state, another progress mode, async purge's
ceiling) is reported with ``bound`` None and no verdict.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from ..protocol import layout
from .bounds import Bounds, bounds_of
from ..protocol.logs import log_batches
from ..protocol.outcome import Outcome
from ..language.scenario import Scenario
from ..language.steps import NodeId
from ..protocol.storage import Storage

MAX, MIN = "max", "min"
# each measured bound, and whether reaching it means the largest value seen or the smallest
DIRECTIONS = {"replay": MAX, "pending_state_commits": MAX, "offset_entries_kept": MIN, "commit_entries_kept": MIN,
              "offset_entries_ceiling": MAX, "versions_kept": MIN, "copies_per_rerun": MAX}


@dataclass(frozen=True)
class Reach:
    """The most extreme value an exploration measured for one bound, and the first schedule that gave it."""

    bound: int | None
    reached: int | None = None
    schedule: str | None = None
    order: int | None = None
    reproduce: dict[str, Any] | None = None   # as a violation's: the crash prefix, or the faults and schedule

    @property
    def tight(self) -> bool | None:
        return None if self.bound is None else self.reached == self.bound

    def to_dict(self) -> dict[str, Any]:
        return {"bound": self.bound, "reached": self.reached, "tight": self.tight, "schedule": self.schedule,
                "reproduce": self.reproduce}


def in_force(scenario: Scenario) -> dict[str, int | None]:
    """The value of each measured bound for ``scenario``; None where the bound is not in force."""
    b: Bounds = bounds_of(scenario)
    sync = scenario.engine.progress_mode == "sync"
    stateful = bool(scenario.store_ids)
    return {"replay": b.in_flight if sync else b.async_progress_rerun,
            "pending_state_commits": b.pending_state_commits if stateful else None,
            "offset_entries_kept": b.offset_entries_kept if sync else None,
            "commit_entries_kept": b.commit_entries_kept if sync else None,
            "offset_entries_ceiling": b.offset_entries_ceiling if sync else None,
            "versions_kept": b.versions_kept if stateful else None,
            "copies_per_rerun": b.copies_per_rerun if scenario.sink_mode == "at_least_once" else None}


class Tally:
    """The reach of every bound over the schedules one share of an exploration measured."""

    def __init__(self, scenario: Scenario):
        self.reach = {name: Reach(bound) for name, bound in in_force(scenario).items()}

    def note(self, name: str, value: int | None, schedule: str, order: int,
             reproduce: Callable[[], dict[str, Any]]) -> None:
        """Keep ``value`` when it is more extreme than what ``name`` reached so far (the earlier order on a tie)."""
        held = self.reach[name]
        if value is not None and held.bound is not None and _better(name, value, order, held):
            self.reach[name] = Reach(held.bound, value, schedule, order, reproduce())

    def note_cut(self, scenario: Scenario, storage: Storage, prefix: list[NodeId], schedule: str,
                 order: int) -> None:
        """What a crash checkpoint and the steps before the crash show."""
        ran = prefix

        def note(name: str, value: int | None) -> None:
            self.note(name, value, schedule, order, lambda: crash_reproduce(ran))
        applied = {n.batch for n in ran if n.step == "task_apply" and n.partition == 0}
        committed = {n.batch for n in ran if n.step == "state_commit" and n.partition == 0 and not n.tag}
        note("pending_state_commits", max(0, len(applied - committed) - 1))
        offsets, commits = log_batches(storage, layout.OFFSETS), log_batches(storage, layout.COMMITS)
        for name, entries in (("offset_entries_kept", offsets), ("commit_entries_kept", commits)):
            floor = self.reach[name].bound
            if floor is not None and entries and entries[-1] >= floor - 1:
                note(name, entries[-1] - entries[0] + 1)
        note("offset_entries_ceiling", len(offsets))

    def note_outcome(self, outcome: Outcome, expected: dict[int, list[Any]] | None, schedule: str, order: int,
                     reproduce: Callable[[], dict[str, Any]]) -> None:
        """What an outcome shows: its re-runs, the versions it retains, the copies of its at-least-once rows.
        ``expected``: the failure-free output per batch (None: no copies are measured)."""
        for r in outcome.recoveries:
            self.note("replay", len(r.rerun_batches), schedule, order, reproduce)
        floor = self.reach["versions_kept"].bound
        if floor is not None:
            for parts in outcome.state.values():
                for versions in parts.values():
                    if versions and max(map(int, versions)) >= floor:
                        self.note("versions_kept", len(versions), schedule, order, reproduce)
        if expected is not None and self.reach["copies_per_rerun"].bound is not None:
            self.note("copies_per_rerun", _extra_copies(outcome, expected), schedule, order, reproduce)


def crash_reproduce(prefix: list[NodeId]) -> dict[str, Any]:
    """How to run a crash cut again: ``Schedule(prefix, crash_after_prefix=True)`` (as a violation says it)."""
    return {"schedule": [n.to_json() for n in prefix], "crash_after_prefix": True}


def _better(name: str, value: int, order: int, held: Reach) -> bool:
    """Whether ``value``, measured at ``order``, replaces ``held``: more extreme, or as extreme and earlier."""
    if held.reached is None:
        return True
    assert held.order is not None, "a reached bound names where"
    more = value > held.reached if DIRECTIONS[name] == MAX else value < held.reached
    return more or value == held.reached and order < held.order


def _extra_copies(outcome: Outcome, expected: dict[int, list[Any]]) -> int | None:
    """The most copies of one row beyond the failure-free run's, per re-run or retried attempt of its batch."""
    again = Counter(b for r in outcome.recoveries for b in r.rerun_batches)
    for b in outcome.batches:
        again[b.id] = max(again[b.id], b.attempts - 1) + b.task_retries
    most: int | None = None
    for entry in outcome.sink:
        if not again[entry.batch] or entry.batch not in expected:
            continue
        have = Counter(map(repr, entry.rows))
        wanted = Counter(map(repr, expected[entry.batch]))
        for row, n in have.items():
            if wanted[row]:
                extra = -(-(n - wanted[row]) // (wanted[row] * again[entry.batch]))   # ceil
                most = extra if most is None else max(most, extra)
    return most


def combined(tallies: Iterable[dict[str, Reach]]) -> dict[str, Reach]:
    """One reach per bound from the shares' (the same however the schedules were shared out)."""
    out: dict[str, Reach] = {}
    for reach in tallies:
        for name, r in reach.items():
            held = out.get(name)
            if held is None or r.reached is not None and r.order is not None and _better(name, r.reached, r.order,
                                                                                           held):
                out[name] = r
    return out


def describe(reach: dict[str, Reach]) -> list[str]:
    """One line per bound: its value, what the exploration reached, and where."""
    lines = []
    for name, r in reach.items():
        if r.bound is None:
            lines.append(f"  {name}: not in force")
            continue
        got = "never measured" if r.reached is None else f"reached {r.reached}"
        verdict = "tight" if r.tight else "NOT REACHED"
        where = f" by {r.schedule}" if r.schedule else ""
        lines.append(f"  {name}: bound {r.bound}, {got} ({verdict}){where}")
    return lines
