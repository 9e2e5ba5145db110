"""One incarnation of a query: the protocol of spec section 2, given its environment.

An incarnation is one life of the driver process, from start (or restart) to
the end of input or a crash. Its step graph (``graph.py``) says which step
waits for which; ``run_step`` applies one node's effect, ``step_<name>``. The
reference's sequential scheduler (``run.py``), the simulator and the PySpark
engine execute the same graph and the same step effects; they differ only in
when a step runs, and where: the seams of ``seams.py``.

``Incarnation`` is the protocol, written once, and the records it keeps:

- its memory: three typed records (``records.py``): ``facts`` (what it runs),
  ``book`` (the driver's batch book) and ``table`` (the task table); only
  ``storage`` survives a crash;
- ``driver_steps.DriverSteps``: the driver steps' effects, the protocol's own;
- ``task_retry.TaskRetries``: a failed task attempt and a lost executor;
- its environment (``environment.py``), a constructor argument a backend
  builds: the step-graph policy and, built from the records, the clock, the
  task effects, the progress reporter and (a timed backend's) the step costs,
  each one object implementing one seam. The reference's is
  ``environment.REFERENCE``. The seam hooks on ``Incarnation`` delegate to
  these parts (``self.seams``).

A backend passes its environment; it does not subclass to override hooks. A
model variant (a planted bug, a protocol alternative the explorer checks)
subclasses ``Incarnation`` and overrides the protocol itself: the step effects
and the planning and graph methods of ``MODEL_VARIANT_SURFACE``, reading the
records under the names ``incarnation_views.IncarnationViews`` gives them
(``self.plans``, ``self.tasks``). A variant's ``step_*`` wins over the part's
effect, since the graph dispatches to the incarnation.
"""

from __future__ import annotations

from typing import Mapping

from . import layout
from .driver_steps import DriverSteps
from .environment import REFERENCE, Environment, Records
from .graph import Node
from .logs import PurgeRound, check_metadata, log_batches, query_id, write_metadata
from .observer import Observer
from .outcome import ProgressEvent
from .query import initial_trackers, pipeline_store_ids
from .modes import mode_of
from .rebalancing import PlacementTimeline
from .records import BatchBook, LogIndex, QueryFacts, TaskTable, Watermarks
from .recovery import RestartPlan
from .redelivery import FetchLayer
from ..language.scenario import Scenario
from .sources import SourceData
from .state_store import StateStore
from ..language.steps import STEP_NAMES, NodeId
from .storage import Storage
from .task_retry import TaskRetries

# What a model variant overrides: every step's effect, and how the incarnation plans its batches and builds
# its graph (``store_class`` and ``fetch_layer_class`` swap the state store and the redelivering source's
# fetch layer for variants of theirs).
STEP_EFFECTS = tuple(f"step_{name}" for name in STEP_NAMES)
MODEL_VARIANT_SURFACE = STEP_EFFECTS + ("_setup", "plan_batches", "build_graph", "store_class", "fetch_layer_class")


class Incarnation(TaskRetries, DriverSteps):
    """One driver lifetime: plans its batches from a restart plan, builds its step graph, applies steps."""

    store_class: type[StateStore] = StateStore
    fetch_layer_class: type[FetchLayer] = FetchLayer   # a redelivering source's fetch-and-dedup layer

    def __init__(self, scenario: Scenario, data: SourceData, storage: Storage, restart: RestartPlan,
                 number: int, observer: Observer, *, environment: Environment = REFERENCE,
                 recorded_cuts: Mapping[int, tuple[int, ...]] | None = None, open_ended: bool = False):
        mode = mode_of(scenario)
        ops = scenario.operator.flatten()
        self.graph = environment.graph
        shape = mode.shape(scenario, store_commit_nodes=self.graph.store_commit_nodes)
        fetchers = {sp: self.fetch_layer_class(sp, r.deliveries) for sp, r in data.redelivering.items()}
        self.facts = QueryFacts(scenario, data, storage, number, restart, observer, ops, pipeline_store_ids(ops),
                                mode, shape, fetchers, dict(recorded_cuts or {}), open_ended, scenario.engine,
                                scenario.state_partitions)
        self.book = BatchBook(LogIndex(storage))
        self.table = TaskTable(PlacementTimeline(scenario))
        self.watermarks = Watermarks(self.facts, self.book, self.event_time_maxima)
        self.seams = environment.parts(Records(self.facts, self.book, self.table, self.watermarks, self.store_class))
        self.nodes: dict[NodeId, Node] = {}
        self._setup(restart)
        self.nodes = self.build_graph()

    def _setup(self, restart: RestartPlan) -> None:
        check_metadata(self.storage, self.sc.query_digest(), self.sc.name)
        if not self.storage.exists(layout.METADATA):
            write_metadata(self.storage, query_id(self.sc.seed), self.sc.query_digest(), self.sc.name,
                           self.seams.effects.snapshot_format)
        first = restart.first_batch
        self.trackers[first] = restart.trackers if restart.trackers is not None else initial_trackers(self.ops)
        for sid, per_part in restart.lineage.items():
            for p, uid in per_part.items():
                self.lineage[(sid, int(p), restart.lineage_version)] = uid
        self.mode.on_start(self.storage)
        latest_logged = max(log_batches(self.storage, layout.OFFSETS), default=None)
        for layer in self.fetchers.values():
            layer.restore(self.storage, latest_logged)
        self.plan_batches(restart)

    # -------------------------------------------------- StepGraph: the graph policy
    def build_graph(self) -> dict[NodeId, Node]:
        return self.graph.build_graph(self.shape, self.plans)

    def nodes_added(self, nodes: list[Node]) -> None:
        self.graph.nodes_added(nodes)

    def run_step(self, node_id: NodeId) -> None:
        """Apply the effect of one node: ``step_<name>(batch[, partition][, store=tag])``, as the graph policy
        runs it (a wall-clock backend times it)."""
        node = self.nodes.get(node_id)   # the simulator's table holds only the batches a fault needs
        self.graph.run_step(node_id, node is not None and node.background, self.apply_step)

    def apply_step(self, node_id: NodeId) -> None:
        method = getattr(self, f"step_{node_id.step}")
        if node_id.tag:
            method(node_id.batch, node_id.partition, store=node_id.tag)
        elif node_id.partition >= 0:
            method(node_id.batch, node_id.partition)
        else:
            method(node_id.batch)

    # -------------------------------------------------- Clock
    def logical_time_ms(self, batch: int) -> int:
        return self.seams.clock.logical_time_ms(batch)

    def plan_batches(self, restart: RestartPlan) -> None:
        self.seams.clock.plan_batches(restart)

    def cut_now(self, batch: int) -> tuple[int, ...]:
        return self.seams.clock.cut_now(batch)

    def await_plan(self, batch: int) -> None:
        self.seams.clock.await_plan(batch)

    # -------------------------------------------------- TaskEffects: the task steps, and what driver steps reach
    def step_state_load(self, b: int, p: int) -> None:
        self.seams.effects.step_state_load(b, p)

    def step_task_apply(self, b: int, p: int) -> None:
        self.seams.effects.step_task_apply(b, p)

    def step_changelog_write(self, b: int, p: int, store: str | None = None) -> None:
        self.seams.effects.step_changelog_write(b, p, store)

    def step_state_commit(self, b: int, p: int, store: str | None = None) -> None:
        self.seams.effects.step_state_commit(b, p, store)

    def step_snapshot_upload(self, b: int, p: int) -> None:
        self.seams.effects.step_snapshot_upload(b, p)

    def step_sink_write(self, b: int, p: int) -> None:
        self.seams.effects.step_sink_write(b, p)

    def uid(self, b: int, p: int) -> str:
        return self.seams.effects.uid(b, p)

    def event_time_maxima(self, b: int) -> list[list[dict[str, int]]]:
        return self.seams.effects.event_time_maxima(b)

    def commit_output(self, b: int) -> None:
        self.seams.effects.commit_output(b)

    def purge_state_files(self, b: int) -> None:
        self.seams.effects.purge_state_files(b)

    def batch_committed(self, b: int) -> None:
        self.seams.effects.batch_committed(b)

    # -------------------------------------------------- ProgressReporter
    def progress_event(self, b: int) -> ProgressEvent:
        return self.seams.progress.progress_event(b)

    def output_visible(self, b: int) -> None:
        self.seams.progress.output_visible(b)

    def progress_reported(self, b: int) -> None:
        self.seams.progress.progress_reported(b)

    def purge_round_of(self, b: int) -> PurgeRound | None:
        """The round purge ``b`` runs: the one a timed backend decided when the step started (``BatchBook.
        decided_purges``, Spark computes the threshold when it calls ``purge``); an untimed step starts and
        ends at once."""
        decided = self.book.decided_purges
        return decided.pop(b) if b in decided else self.next_purge_round(b)
