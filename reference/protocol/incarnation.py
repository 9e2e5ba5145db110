"""One incarnation of a query: the protocol of spec section 2, composed from its parts.

An incarnation is one life of the driver process, from start (or restart) to
the end of input or a crash. Its step graph (``graph.py``) says which step
waits for which; ``run_step`` applies one node's effect, ``step_<name>``. The
reference's sequential scheduler (``run.py``), the simulator and the PySpark
engine execute the same graph and the same step effects; they differ only in
when a step runs, and where: the seams of ``seams.py``.

``Incarnation`` is composed of

- ``incarnation_state.IncarnationState``: what the driver holds in memory (only
  ``storage`` survives a crash) and what every part reads;
- ``clock.LogicalClock``: the reference's ``Clock`` (logical time, cuts known in advance);
- ``task_effects.InProcessTaskEffects``: the reference's ``TaskEffects`` (task steps in process);
- ``driver_steps.DriverSteps``: the driver steps' effects, the protocol's own;
- ``task_retry.TaskRetries``: a failed task attempt and a lost executor.

Two kinds of class extend it. A backend (``sim.timed_incarnation.TimedIncarnation``
and its data and volume modes, ``spark_impl.engine.incarnation.SparkIncarnation``)
implements seams: it overrides only the hooks ``seams.SEAMS`` declare. A model
variant (a planted bug, a protocol alternative the explorer checks) overrides
the protocol itself: the step effects and the planning and graph methods of
``MODEL_VARIANT_SURFACE``, reading the state ``IncarnationState`` declares.
"""

from __future__ import annotations

import threading
from typing import Mapping

from . import layout
from .clock import LogicalClock
from .driver_steps import DriverSteps
from .graph import Node, build_graph, shape_of
from .logs import check_metadata, log_batches, query_id, write_metadata
from .observer import Observer
from .query import initial_trackers, pipeline_store_ids
from .real_time import purge_uncommitted_offsets
from .rebalancing import PlacementTimeline
from .recovery import RestartPlan
from ..language.scenario import Scenario
from .sources import SourceData
from ..language.steps import STEP_NAMES, NodeId
from .storage import Storage
from .task_effects import InProcessTaskEffects
from .task_retry import TaskRetries

# What a model variant overrides: every step's effect, and how the incarnation plans its batches and builds
# its graph (``store_class`` and ``fetch_layer_class`` swap the state store and the redelivering source's
# fetch layer for variants of theirs).
STEP_EFFECTS = tuple(f"step_{name}" for name in STEP_NAMES)
MODEL_VARIANT_SURFACE = STEP_EFFECTS + ("_setup", "plan_batches", "build_graph", "store_class", "fetch_layer_class")


class Incarnation(TaskRetries, DriverSteps, InProcessTaskEffects, LogicalClock):
    """One driver lifetime: plans its batches from a restart plan, builds its step graph, applies steps."""

    def __init__(self, scenario: Scenario, data: SourceData, storage: Storage, restart: RestartPlan,
                 number: int, observer: Observer, *, recorded_cuts: Mapping[int, tuple[int, ...]] | None = None,
                 open_ended: bool = False):
        self.sc, self.data, self.storage, self.number = scenario, data, storage, number
        self.recorded_cuts = dict(recorded_cuts or {})   # batch -> end offsets another backend chose
        # a timed backend cutting by its trigger: batches after the re-runs are planned one at a time
        self.open_ended = open_ended
        self.cfg = scenario.engine
        self.obs = observer
        self.ops = scenario.operator.flatten()
        self.store_ids = pipeline_store_ids(self.ops)
        self.parts = scenario.state_partitions
        self.shape = shape_of(scenario, store_commit_nodes=self.store_commit_nodes)
        self.uses_watermark = self.shape.uses_watermark
        self.stores = {}
        self.placement = PlacementTimeline(scenario)
        self.store_executor = {}   # where each cached store lives
        self.tasks = {}
        self.trackers = {}
        self.lineage = {}
        self.persisted_offsets = set()
        self.reported_ends = {}
        self.last_persisted_time_ms = None
        self.last_commit_written = -1
        self.last_purged_batch = -1    # HDFSMetadataLog.lastPurgedBatchId: in memory, so per incarnation
        self._log_index = None   # known_logs()
        self._log_lock = threading.Lock()
        self.clock_skew_ms = 0
        self.plans = {}
        self.restart = restart
        self.fetchers = {sp: self.fetch_layer_class(sp, r.deliveries) for sp, r in data.redelivering.items()}
        self._setup(restart)
        self.nodes = self.build_graph()

    def _setup(self, restart: RestartPlan) -> None:
        check_metadata(self.storage, self.sc.query_digest(), self.sc.name)
        if not self.storage.exists(layout.METADATA):
            write_metadata(self.storage, query_id(self.sc.seed), self.sc.query_digest(), self.sc.name,
                           self.snapshot_format)
        first = restart.first_batch
        self.trackers[first] = restart.trackers if restart.trackers is not None else initial_trackers(self.ops)
        for sid, per_part in restart.lineage.items():
            for p, uid in per_part.items():
                self.lineage[(sid, int(p), restart.lineage_version)] = uid
        if self.cfg.real_time:
            purge_uncommitted_offsets(self.storage)
        latest_logged = max(log_batches(self.storage, layout.OFFSETS), default=None)
        for layer in self.fetchers.values():
            layer.restore(self.storage, latest_logged)
        self.plan_batches(restart)

    def build_graph(self) -> dict[NodeId, Node]:
        return build_graph(self.shape, self.plans)
