"""What an incarnation is given: its environment, built by a backend, as TigerBeetle's replica is given its
storage, time and message bus (``ReplicaType(StateMachine, MessageBus, Storage, Time)``).

``Incarnation(scenario, data, storage, restart, number, observer,
environment=...)`` writes the protocol once; the environment brings the parts
in which backends differ, each an object implementing one seam of
``seams.py``:

- ``graph`` (``StepGraph``): how the scheduler holds the step graph (no records);
- ``parts(records)``, a factory: once the incarnation has made its records
  (``records.py``), the backend builds its ``Clock``, ``TaskEffects``,
  ``ProgressReporter`` and, if timed, ``StepCosts``, handing each the records
  it reads (never the incarnation).

``Storage`` is a constructor argument of the incarnation itself. The
reference's environment is ``REFERENCE``; the simulator's and the PySpark
engine's are built by ``sim.timed_incarnation`` and
``spark_impl.engine.incarnation``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

from .clock import LogicalClock
from .graph import BatchShape, Node, build_graph
from .progress import UntimedProgress
from .records import BatchBook, BatchPlan, QueryFacts, TaskTable, Watermarks
from .seams import Clock, ProgressReporter, StepCosts, StepGraph, TaskEffects
from .state_store import StateStore
from ..language.steps import NodeId
from .task_effects import InProcessTaskEffects


@dataclass(frozen=True)
class Records:
    """What a part may be handed: the incarnation's three records, its watermark reader, and the state store
    class a model variant chose (``Incarnation.store_class``)."""

    facts: QueryFacts
    book: BatchBook
    table: TaskTable
    watermarks: Watermarks
    store_class: type[StateStore]


@dataclass(frozen=True)
class Parts:
    """A backend's parts for one incarnation, one per seam."""

    clock: Clock
    effects: TaskEffects
    progress: ProgressReporter
    costs: StepCosts | None = None   # a timed backend's (the simulator's); the reference is untimed


class WholeGraph:
    """The reference's step-graph policy: every planned batch's nodes up front, one commit node per store."""

    store_commit_nodes = True

    def build_graph(self, shape: BatchShape, plans: Mapping[int, BatchPlan]) -> dict[NodeId, Node]:
        return build_graph(shape, plans)

    def nodes_added(self, nodes: list[Node]) -> None:
        """Nothing caches the graph: the scheduler reads the incarnation's nodes."""

    def run_step(self, node_id: NodeId, background: bool, apply: Callable[[NodeId], None]) -> None:
        apply(node_id)


def reference_parts(records: Records) -> Parts:
    """The reference's parts: the logical clock, task effects in process, untimed progress."""
    r = records
    return Parts(LogicalClock(r.facts, r.book), InProcessTaskEffects(r.facts, r.book, r.table, r.watermarks,
                                                                     r.store_class),
                 UntimedProgress(r.facts, r.book, r.table))


@dataclass(frozen=True)
class Environment:
    """What a backend gives an incarnation: its step-graph policy, and the factory of its other parts (called
    once the incarnation has made its records)."""

    graph: StepGraph
    parts: Callable[[Records], Parts]


REFERENCE = Environment(WholeGraph(), reference_parts)
