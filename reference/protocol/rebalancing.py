"""State rebalancing over a run: where each state partition's tasks run, batch by batch.

A scenario names the executors present at the start (``executors``) and the
executors that join or leave before a given batch (``events``; see
``scenario.ExecutorEvent``). The first placement is ``placement.place`` from
scratch (for the default executors ``["0", "1"]``: partition p on executor
p % 2, the reference model's rule before rebalancing existed); each event
rebalances it with ``placement.join`` / ``placement.leave``, in the order the
scenario lists them. The placement in effect for batch b is therefore a pure
function of the scenario and b, so a restarted driver recomputes the same
placement for the batches it re-runs.

A state partition whose executor differs between batch b - 1 and batch b has
moved (a ``StateMove`` of the outcome): its task of batch b runs on the new
executor, which has no copy of the state and loads version b from the
checkpoint (``engine.Incarnation.ensure_stores``).
"""

from __future__ import annotations

import bisect

from .outcome import StateMove
from .placement import Placement, join, leave, place
from ..language.scenario import DEFAULT_EXECUTORS, Scenario


class PlacementTimeline:
    """The placement in effect for every batch of a scenario, and the moves between them."""

    def __init__(self, scenario: Scenario):
        # a pure function of the partitions, executors and events: computed once per process for each
        # (every incarnation the explorer starts asks for the same one); the placements are frozen values
        key = (scenario.state_partitions, scenario.executors, scenario.events)
        known = _TIMELINES.get(key)
        if known is None:
            if len(_TIMELINES) >= 256:
                _TIMELINES.clear()
            known = _TIMELINES[key] = _timeline(scenario)
        self.initial, changes = known
        # whether the scenario names its executors: a backend with executors of its own then runs each
        # partition where the placement says, else where it always has (sim: p % executors; Spark: last ran)
        self.named = bool(scenario.events) or scenario.executors != DEFAULT_EXECUTORS
        self.changes: dict[int, Placement] = dict(changes)   # batch -> the placement in effect from then on
        self._batches = sorted(self.changes)

    def placement_at(self, batch: int) -> Placement:
        i = bisect.bisect_right(self._batches, batch)
        return self.changes[self._batches[i - 1]] if i else self.initial

    def executor_at(self, batch: int, partition: int) -> str:
        """The executor that runs partition ``partition``'s task of ``batch`` and caches its state."""
        return self.placement_at(batch).executor_of(partition)

    def moves_at(self, batch: int) -> tuple[StateMove, ...]:
        """The partitions whose executor changes at ``batch`` (the net effect of that batch's events)."""
        if batch not in self.changes:
            return ()
        before, after = self.placement_at(batch - 1), self.changes[batch]
        return tuple(StateMove(batch, p, before.assignment[p], e) for p, e in enumerate(after.assignment)
                     if before.assignment[p] != e)

    def moves(self, through: int | None = None) -> tuple[StateMove, ...]:
        """Every move (of batches 0..``through`` when given), by batch then partition: what a run records."""
        return tuple(m for b in self._batches if through is None or b <= through for m in self.moves_at(b))


_TIMELINES: dict[tuple, tuple[Placement, dict[int, Placement]]] = {}


def _timeline(scenario: Scenario) -> tuple[Placement, dict[int, Placement]]:
    """The first placement, and the placement each event leads to, by the batch it comes before."""
    initial = current = place(scenario.state_partitions, scenario.executors)
    changes: dict[int, Placement] = {}
    for event in scenario.events:
        current = join(current, event.executor) if event.kind == "executor_join" else leave(current, event.executor)
        changes[event.before_batch] = current
    return initial, changes
