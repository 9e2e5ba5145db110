"""One driver lifetime on Spark: the reference's incarnation, with task-step effects done on executors.

The protocol is the reference's (``reference.protocol.incarnation.Incarnation``): the
same batch plans, logs, lineage, purge, sink manifests and recovery. What this
module gives it are its parts (``reference.protocol.environment``), one per seam
(``reference.protocol.seams``): where task effects happen
(``ExecutorTaskEffects``), the wall clock (``WallClock``), what is measured
(``MeasuredProgress``) and how driver steps are timed (``SparkGraph``):

- task steps do their work in Spark tasks (``task.py``); on the driver their
  nodes only record what the task reported (its lineage id, its sink file)
  (``TaskEffects``);
- a paced run cuts explicit and rate sources by Spark's trigger
  (``engine.batch_cuts: trigger``, the default): the incarnation is
  open-ended, so each batch's end is chosen when its ``plan`` runs, from the
  records whose ``arrival_ms`` has passed on the wall clock, and ``plan``
  runs at the trigger's time (``reference.protocol.trigger``). With fixed cuts (a
  generated source, ``batch_cuts: fixed``, an unpaced run or group
  scheduling) ``plan`` waits for the fixed batch's input to arrive
  (``SourceData.input_ready_ms``) when the run is paced (``Clock``);
- driver steps mark wall-clock times, from which the batch's progress event
  (``progress.py``) and its sink deliveries (``latency.py``) are made, and the
  listeners hear each progress event (``ProgressReporter``).
"""

from __future__ import annotations

import os
import time
from collections import defaultdict
from typing import Any, Callable, Mapping

from reference.protocol.clock import LogicalClock
from reference.protocol.environment import Environment, Parts, Records
from reference.protocol.graph import BatchShape, Node, build_graph
from reference.protocol.incarnation import Incarnation
from reference.protocol.outcome import ProgressEvent
from reference.protocol.records import BatchBook, BatchPlan, QueryFacts, TaskTable
from reference.protocol.task_effects import TaskOutputs
from reference.protocol.query import PartitionResult, operator_watermarks
from reference.language.scenario import Scenario
from reference.language.steps import TASK_STEPS, NodeId
from reference.protocol.trigger import trigger_plan_ms

from ..snapshot_reader import SNAPSHOT_FORMAT
from .context import EngineContext
from .coordination import Coordination, atomic_write
from ..latency import SinkDelivery
from .progress import measured_progress
from .task import TaskResult
from .task_spec import IndexedFault, TaskSpec

ZOMBIE_WAIT_S = 30.0
ZOMBIE_POLL_S = 0.005
JOIN_TIMEOUT_S = 120.0   # how long a batch waits for a free executor to bind a name to (a joining one registers)


def cuts_by_trigger(scenario: Scenario, engine: EngineContext) -> bool:
    """Whether the engine cuts this run's batches by Spark's trigger on the wall clock (open-ended planning).

    Only a paced run has a wall clock that input arrives on; generated sources have fixed-size batches
    (like ``rate-micro-batch``); a group job is built for batches known in advance, so group scheduling
    keeps fixed cuts.
    """
    return scenario.engine.batch_cuts == "trigger" and engine.pace and engine.group == 1 and \
        all(src.kind != "generated" for src in scenario.sources.values())


class SparkGraph:
    """The engine's step-graph policy: the whole graph up front (it grows with each open batch, which the
    scheduler hears through ``on_nodes_added``); a driver step on the batch's critical path records its span
    (``<step>:start``/``<step>:end``, seconds) in ``batch_timing``, which ``measured_progress`` turns into
    durationMs. The task commits a partition's stores on threads: one commit node per partition."""

    store_commit_nodes = False

    def __init__(self) -> None:
        self.batch_timing: dict[int, dict[str, float]] = defaultdict(dict)   # batch -> step -> wall time (s)
        self.on_nodes_added: Callable[[list[Node]], None] | None = None   # the scheduler's hook

    def build_graph(self, shape: BatchShape, plans: Mapping[int, BatchPlan]) -> dict[NodeId, Node]:
        return build_graph(shape, plans)

    def nodes_added(self, nodes: list[Node]) -> None:
        if self.on_nodes_added is not None:
            self.on_nodes_added(nodes)

    def run_step(self, node_id: NodeId, background: bool, apply: Callable[[NodeId], None]) -> None:
        if node_id.partition >= 0 or background:
            apply(node_id)
            return
        timing = self.batch_timing[node_id.batch]
        timing[f"{node_id.step}:start"] = time.time()
        apply(node_id)
        timing[f"{node_id.step}:end"] = time.time()


class WallClock(LogicalClock):
    """The engine's clock (the ``Clock`` seam): batches planned as the reference plans them, or cut open by
    Spark's trigger on the wall clock (``cuts_by_trigger``); a paced run waits for the trigger and the input,
    and the executors a batch's placement names register first."""

    def __init__(self, facts: QueryFacts, book: BatchBook, table: TaskTable, engine: EngineContext,
                 batch_timing: dict[int, dict[str, float]]):
        super().__init__(facts, book)
        self.sc, self.data, self.plans, self.restart, self.obs = facts.sc, facts.data, book.plans, facts.restart, facts.obs
        self.cfg, self.placement, self.engine, self.batch_timing = facts.cfg, table.placement, engine, batch_timing

    def input_ready_s(self, b: int) -> float:
        """Wall time at which the input of batch ``b`` has arrived."""
        plan = self.plans[b]
        return self.engine.t0 + self.data.input_ready_ms(*plan.bounds) / 1000.0

    def ms_since_t0(self, wall_s: float) -> float:
        return round((wall_s - self.engine.t0) * 1000.0, 3)

    def trigger_ms(self, b: int, now_ms: float) -> float:
        """When the trigger plans open batch ``b``, its dependencies met at ``now_ms`` (``reference.protocol.trigger``):
        ticks are multiples of ``trigger_interval_ms`` after the previous plan of this incarnation."""
        previous = self.batch_timing.get(b - 1, {}).get("plan")
        fire = trigger_plan_ms(self.cfg.trigger_interval_ms, None if previous is None else self.ms_since_t0(previous),
                               now_ms, self.data.next_arrival_ms(self.plans[b].start))
        assert fire is not None, f"batch {b} is open, so input is left"
        return fire

    def plan_ready_s(self, b: int, now_s: float) -> float:
        """Wall time at which ``plan`` of batch ``b`` may run, its dependencies met at ``now_s``: once its
        input has arrived (fixed cuts), or when the trigger fires with new input (an open batch; ``now_s``
        itself if that is now)."""
        if self.plans[b].end is not None:
            return self.input_ready_s(b)
        now_ms = self.ms_since_t0(now_s)
        fire_ms = self.trigger_ms(b, now_ms)
        return now_s if fire_ms <= now_ms else self.engine.t0 + fire_ms / 1000.0

    def await_joins(self, b: int) -> None:
        """On a cluster, when the scenario names its executors, each executor of the placement is bound to a live
        Spark executor (``locality.Placement.bind``) before the incarnation's first batch and before a batch an
        executor joins: the one that joins, or the replacement of one lost in a run before, registers first."""
        if self.engine.spark.sparkContext.master.startswith("local") or not self.placement.named:
            return   # one executor, the driver's: a join only moves state (the reload of ``TaskSpec.moved``)
        if b != self.restart.first_batch and \
                not any(e.kind == "executor_join" and e.before_batch == b for e in self.sc.events):
            return
        names = set(self.placement.placement_at(b).executors)
        for name in sorted(self.engine.placement.await_bound(names, JOIN_TIMEOUT_S)):
            self.obs.note(f"no free Spark executor for executor {name} within {JOIN_TIMEOUT_S:.0f} s before "
                          f"batch {b}: its partitions run where Spark puts them")

    def await_plan(self, b: int) -> None:
        """The executors that join before batch ``b`` register, and a paced run waits for the trigger and the
        input; then ``b``'s plan starts (its ``plan`` mark)."""
        self.await_joins(b)
        if self.engine.pace:
            now = time.time()
            delay = self.plan_ready_s(b, now) - now
            if delay > 0:
                time.sleep(delay)
        self.batch_timing[b]["plan"] = time.time()

    def cut_now(self, b: int) -> tuple[int, ...]:
        """Everything that has arrived by now (by the trigger's time, should the clock read a hair before it)."""
        start = self.plans[b].start
        now_ms = self.ms_since_t0(self.batch_timing[b]["plan"])
        return self.data.arrived_by(max(now_ms, self.trigger_ms(b, now_ms)), start)


class ExecutorTaskEffects(TaskOutputs):
    """The engine's task effects (the ``TaskEffects`` seam): each task step does its work in a Spark task
    (``task.py``); on the driver its node only records what the task reported (its lineage id, its sink
    file). What driver steps reach of the tasks' output is the reference's (``TaskOutputs``)."""

    snapshot_format: str | None = SNAPSHOT_FORMAT   # the RocksDB store writes its snapshots as SST manifests

    def __init__(self, facts: QueryFacts, book: BatchBook, table: TaskTable,
                 results: dict[tuple[int, int], TaskResult], coordination: Coordination):
        super().__init__(facts, book, table)
        self.results, self.coordination = results, coordination

    def step_state_load(self, b: int, p: int) -> None:
        pass

    def step_task_apply(self, b: int, p: int) -> None:
        res = self.results[(b, p)]
        task = self.table.task(b, p)
        task.result = PartitionResult({}, [], res["max_event_ms"])
        task.attempt = res["attempt"]

    def step_changelog_write(self, b: int, p: int, store: str | None = None) -> None:
        pass

    def step_state_commit(self, b: int, p: int, store: str | None = None) -> None:
        for sid, uid in self.results[(b, p)]["lineage_out"].items():
            self.lineage[(sid, p, b + 1)] = uid

    def step_snapshot_upload(self, b: int, p: int) -> None:
        pass  # the executor's maintenance pool uploads snapshots in the background

    def step_sink_write(self, b: int, p: int) -> None:
        self.table.task(b, p).sink_file = self.results[(b, p)]["sink_file"]

    def uid(self, b: int, p: int) -> str:
        res = self.results.get((b, p))
        return str(res["uid"]) if res else super().uid(b, p)

    def batch_committed(self, b: int) -> None:
        atomic_write(self.coordination.committed(b), "")  # zombie writers land after this


class MeasuredProgress:
    """The engine's progress (the ``ProgressReporter`` seam): wall times of the driver steps and the tasks'
    reported metrics make the progress event; sink deliveries are timed; Spark's listeners hear each event."""

    def __init__(self, facts: QueryFacts, book: BatchBook, engine: EngineContext,
                 batch_timing: dict[int, dict[str, float]], results: dict[tuple[int, int], TaskResult]):
        self.plans, self.obs, self.parts, self.store_ids = book.plans, facts.obs, facts.parts, facts.store_ids
        self.cfg, self.engine, self.batch_timing, self.results = facts.cfg, engine, batch_timing, results

    def output_visible(self, b: int) -> None:
        self.engine.deliveries.append(SinkDelivery(b, *self.plans[b].bounds, time.time()))

    def progress_reported(self, b: int) -> None:
        event = self.obs.progress[-1]
        for listener in self.engine.listeners:
            listener.onQueryProgress(event)

    def progress_event(self, b: int) -> ProgressEvent:
        """Made by ``source_commit``, whose mark ends the batch's triggerExecution (sync progress)."""
        self.batch_timing[b]["source_commit"] = time.time()
        plan = self.plans[b]
        rows = sum(e - s for s, e in zip(*plan.bounds))
        results = [self.results[(b, p)] for p in range(self.parts) if (b, p) in self.results]
        return measured_progress(b, rows, self.batch_timing[b], results, self.store_ids,
                                 self.cfg.progress_mode == "async")


class SparkIncarnation(Incarnation):
    """One driver lifetime on Spark: the protocol given the engine's parts (see the module docstring). The
    class adds what the engine's scheduler asks of a batch (its task spec, the executors it wants) and
    overrides nothing of the protocol."""

    def __init__(self, *args: Any, engine: EngineContext, **kwargs: Any):
        self.engine = engine
        self.epoch = f"{os.getpid()}-{time.time_ns()}"
        self.coordination = Coordination(engine.coord, self.epoch)
        self.results: dict[tuple[int, int], TaskResult] = {}
        self.spark_graph = SparkGraph()
        self.batch_timing = self.spark_graph.batch_timing
        super().__init__(*args, environment=Environment(self.spark_graph, self.spark_parts), **kwargs)

    def spark_parts(self, records: Records) -> Parts:
        r = records
        self.wall_clock = WallClock(r.facts, r.book, r.table, self.engine, self.batch_timing)
        return Parts(self.wall_clock, ExecutorTaskEffects(r.facts, r.book, r.table, self.results, self.coordination),
                     MeasuredProgress(r.facts, r.book, self.engine, self.batch_timing, self.results))

    def wanted_executors(self, b: int) -> dict[int, str] | None:
        """Partition -> the Spark executor id the placement runs it on in batch ``b``, when the scenario names
        its executors (state rebalancing); None: each partition prefers where it ran last."""
        if not self.placement.named:
            return None
        return {p: self.executor_of(b, p) for p in range(self.parts)}

    def wait_for_zombies(self, timeout_s: float = ZOMBIE_WAIT_S) -> None:
        """Let every planted zombie write land before the incarnation is judged (they land late, not never)."""
        folder = self.coordination.zombies()
        deadline = time.monotonic() + timeout_s
        while folder.exists() and time.monotonic() < deadline:
            if all(f.read_text() == "landed" for f in folder.iterdir() if not f.name.startswith(".")):
                return
            time.sleep(ZOMBIE_POLL_S)

    # ------------------------------------------------ what a batch's tasks get
    def task_spec(self, b: int, faults: tuple[IndexedFault, ...]) -> TaskSpec:
        plan = self.plans[b]
        lineage_in = {(sid, p): self.lineage[(sid, p, b)] for sid in self.store_ids for p in range(self.parts)
                      if (sid, p, b) in self.lineage}
        return TaskSpec(self.sc, self.engine.root, self.engine.coord, self.engine.local_root, self.epoch,
                        self.number, b, *plan.bounds,
                        tuple(operator_watermarks(self.trackers_for(b))), lineage_in, self.restart.first_batch,
                        self.shape.is_maintenance_batch(b), faults, self.background_task_steps(b), os.getpid(),
                        self.engine.kill_driver, self.engine.straggler, self.engine.storage_latency,
                        tuple(self.ledgers(b).items()),
                        frozenset(m.partition for m in self.placement.moves_at(b)),
                        tuple(self.executor_of(b, p) for p in range(self.parts)))

    def background_task_steps(self, b: int) -> frozenset[str]:
        """The task steps of batch ``b`` that the graph runs in the background (async state commits)."""
        nodes = (self.nodes.get(self.nid(step, b, 0)) for step in TASK_STEPS)
        return frozenset(node.id.step for node in nodes if node is not None and node.background)

    def group_spec(self, first: int) -> TaskSpec:
        """What every batch of a group job shares; each batch's own fields come with its release."""
        return TaskSpec(self.sc, self.engine.root, self.engine.coord, self.engine.local_root, self.epoch,
                        self.number, first, (), (), (), first_batch=self.restart.first_batch,
                        driver_pid=os.getpid(), kill_driver=self.engine.kill_driver, straggler=self.engine.straggler)
