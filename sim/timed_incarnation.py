"""The reference's incarnation with time: a simulated clock, step costs and timed progress (spec sections 2, 4).

The simulator gives the reference's protocol its environment
(``reference.protocol.environment``); ``TimedIncarnation`` builds it and adds
what the simulator's scheduler asks, overriding nothing of the protocol:

- ``StepGraph``: ``BatchByBatchGraph``, no graph up front;
  ``incarnation_run.IncarnationRun`` instantiates it batch by batch
  (``graph.py``) and dispatches a node to its step (``run_node``);
- ``Clock``: ``SimClock``, logical time is SimPy's clock; the trigger's rule
  (``reference.protocol.trigger``) says when a batch may plan (``trigger_ms``);
- ``ProgressReporter``: ``TimedProgress``, Spark's ``durationMs`` from the
  simulated step times (``StepTimes``, which the costs write);
- ``TaskEffects``: the mode's (``sim_parts``);
- ``StepCosts``: ``SimCosts``, what each driver step costs (``cost_ms``; a
  purge's round is decided when it starts, ``Incarnation.decide_purge``) and
  what a retry costs; the mode's subclass says what a task step costs
  (``task_cost_ms``).

A mode says the rest (its interface, below): its parts (``sim_parts``), when a
batch may plan and whether there is a next one (``plan_ready_ms``,
``has_batch``, ``begin_step``). Data mode (``data_mode.py``) runs
the reference's task effects on real records; volume mode (``volume.py``)
gives its own part that counts. The protocol (the graph, the driver steps'
effects, the fault handling) is the reference's.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping

import simpy

from reference.protocol import layout
from reference.protocol.clock import LogicalClock
from reference.protocol.environment import Environment, Parts, Records
from reference.protocol.graph import BatchShape, Node
from reference.protocol.incarnation import Incarnation
from reference.protocol.logs import PurgeRound
from reference.protocol.outcome import ProgressEvent
from reference.protocol.records import BatchBook, BatchPlan, QueryFacts, offset_entry_due
from reference.protocol.seams import Clock, StepNode
from reference.language.steps import NodeId
from reference.protocol.trigger import next_batch_time_ms, trigger_plan_ms

from .cost_model import Profile
from .graph import SimNode
from .mode_costs import MicroBatchCosts
from .random_draws import Draws
from .storage_service import StorageService

# What a mode of the simulator implements, beside the parts it builds (``sim_parts``).
MODE_INTERFACE = ("sim_parts", "has_batch", "plan_ready_ms", "begin_step", "fuse_task_steps", "run_stages")
COMMIT_STEPS = frozenset(("changelog_write", "state_commit"))   # a task's part of Spark's commitTimeMs
SMALL_FILE_BYTES = 256         # a log entry or manifest


class BatchByBatchGraph:
    """The simulator's step-graph policy: no graph up front; ``incarnation_run.IncarnationRun`` instantiates
    batches one at a time (``graph.Graph``) and the node table holds only the batches a fault needs
    (``Graph.materialize``). A partition's stores commit inside one node, charged the slower store's time."""

    store_commit_nodes = False

    def build_graph(self, shape: BatchShape, plans: Mapping[int, BatchPlan]) -> dict[NodeId, Node]:
        return {}

    def nodes_added(self, nodes: list[Node]) -> None:
        """The simulator's scheduler makes its batches from the shape: nothing to hear."""

    def run_step(self, node_id: NodeId, background: bool, apply: Callable[[NodeId], None]) -> None:
        apply(node_id)


class TimedIncarnation(Incarnation):
    """A reference incarnation whose graph is built batch by batch and whose steps take time.

    Its modes (``DataIncarnation``, ``VolumeIncarnation``) implement the mode
    interface (``MODE_INTERFACE``): what a task step costs, when a batch may be
    planned and whether there is a next batch. The protocol (the graph, the step
    effects, the fault handling) is the reference's.
    """

    # Whether a task's consecutive steps may share one timeout when nothing can watch them one by one
    # (``IncarnationRun.run_fused``): only if no step's cost depends on the clock or on an earlier
    # step's effect, and a task step's effect is read by its own task only. Data mode's effects are
    # files and stores that other steps read, so it runs every step on its own.
    fuse_task_steps = False
    # Whether a batch's tasks may run as one stage where nothing can tell (``stage.py``; volume mode only)
    run_stages = False
    def __init__(self, *args: Any, clock: simpy.Environment, profile: Profile, storage_service: StorageService,
                 rng: Draws, mode_costs: MicroBatchCosts, **kwargs: Any):
        self.clock, self.profile, self.service, self.rng = clock, profile, storage_service, rng
        self.mode_costs = mode_costs   # what the execution mode's steps cost (``mode_costs.py``)
        self.times = StepTimes()
        self.timing = self.times.timing
        self.last_plan_start_ms: float | None = None
        self._step_methods: dict[str, Callable[..., None]] = {}
        super().__init__(*args, environment=Environment(BatchByBatchGraph(), self.sim_parts), **kwargs)
        # a scenario that names its executors (``executors``, ``events``) gets one simulated executor per
        # id it ever names, and tasks run where the placement puts them; otherwise ``profile.executors``
        ids = sorted({*self.sc.executors, *(e.executor for e in self.sc.events)}) if self.placement.named else []
        self.executor_index = {e: i for i, e in enumerate(ids)}

    # ------------------------------------------------------------- graph
    def run_node(self, node: SimNode) -> None:
        """Apply the effect of ``node``: ``Incarnation.run_step``'s dispatch to ``step_<name>``, with the
        method looked up once per step name (volume mode runs millions of steps)."""
        method = self._step_methods.get(node.step)
        if method is None:
            method = self._step_methods[node.step] = getattr(self, f"step_{node.step}")
        if node.partition >= 0:
            method(node.batch, node.partition)
        else:
            method(node.batch)

    costs: SimCosts   # the mode's step costs, built by ``sim_parts``

    def sim_parts(self, records: Records) -> Parts:
        """The mode's clock, task effects, progress reporter and step costs, each handed the records it reads."""
        raise NotImplementedError

    # -------------------------------------------------------------- time
    def executors(self) -> int:
        """How many executors the simulated cluster has."""
        return len(self.executor_index) or self.profile.executors

    def slot_executor_of(self, b: int, p: int) -> int:
        """Where the task of state partition ``p`` in batch ``b`` runs in the simulated cluster (its store's
        home): the placement's executor when the scenario names its executors, else ``p % executors``.

        The protocol's own ``executor_of`` (which stores an ``executor_loss``
        drops, and which moves at an executor join or leave) stays the reference's.
        """
        if self.executor_index:
            return self.executor_index[self.executor_of(b, p)]
        return p % self.profile.executors

    def trigger_ms(self, input_ms: float | None) -> float:
        """When the trigger plans the next batch, its dependencies met now and its input arriving at
        ``input_ms`` (None: no input left): ``reference.protocol.trigger``, Spark's ``ProcessingTimeExecutor``
        (ticks at multiples of the interval; a zero interval plans as soon as ready)."""
        now, interval = self.clock.now, self.cfg.trigger_interval_ms
        fire = trigger_plan_ms(interval, self.last_plan_start_ms, now, input_ms)
        if fire is not None:
            return fire
        last = self.last_plan_start_ms
        return now if last is None else max(now, next_batch_time_ms(last, interval))

    # ---------------------------------------------------- mode interface
    def has_batch(self, b: int) -> bool:
        raise NotImplementedError

    def plan_ready_ms(self, b: int) -> float:
        raise NotImplementedError

    def begin_step(self, node: SimNode) -> None:
        if node.step == "plan":
            self.last_plan_start_ms = self.clock.now



def _span(pair: tuple[float, float] | None) -> float:
    return pair[1] - pair[0] if pair else 0.0


def _ms(value: float) -> float:
    return round(float(value), 3)


@dataclass
class StepTimes:
    """When each driver step of a simulated incarnation started and ended, and what its tasks' commits cost:
    what the simulator's costs write and its progress reporter reads."""

    timing: dict[tuple[str, int], tuple[float, float]] = field(default_factory=dict)   # (step, batch) -> span
    commit_ms: dict[int, float] = field(default_factory=dict)   # batch -> its tasks' state commit costs, summed


class SimClock(LogicalClock):
    """The simulator's clock (the ``Clock`` seam): logical time is SimPy's; batches are cut as the reference's
    (data mode) or when their ``plan`` starts (volume mode, ``volume.VolumeClock``)."""

    def __init__(self, facts: QueryFacts, book: BatchBook, env: simpy.Environment):
        super().__init__(facts, book)
        self.env = env

    def logical_time_ms(self, batch: int) -> int:
        return int(self.env.now) + self.book.clock_skew_ms


class TimedProgress:
    """The simulator's progress (the ``ProgressReporter`` seam): Spark's ``durationMs`` from the simulated step
    times. A mode makes the batch's event (``event``) and ends its records' latencies (``output_visible``)."""

    def __init__(self, facts: QueryFacts, times: StepTimes, profile: Profile, env: simpy.Environment):
        self.cfg, self.times, self.profile, self.env = facts.cfg, times, profile, env

    def event(self, b: int) -> ProgressEvent:
        raise NotImplementedError

    def progress_event(self, b: int) -> ProgressEvent:
        return self.timed_progress(b, self.event(b))

    def output_visible(self, b: int) -> None:
        raise NotImplementedError

    def progress_reported(self, b: int) -> None:
        """Nobody listens to the simulator's progress."""

    def durations_ms(self, b: int) -> dict[str, float]:
        """StreamingQueryProgress.durationMs of batch ``b`` from the simulated step times."""
        now = self.env.now
        plan_start, plan_end = self.times.timing.get(("plan", b), (now, now))
        p = self.profile
        planning_share = p.planning_ms / (p.planning_ms + p.latest_offset_ms) if p.planning_ms else 0.0
        async_progress = self.cfg.progress_mode == "async"
        # Spark times an inline purge inside walCommit (MicroBatchExecution.constructNextBatch runs it in the
        # ``reportTimeTaken("walCommit")`` block); an async purge is only submitted there. ``purge`` is our
        # own key: the inline purge's part of walCommit, so a breakdown can tell the two apart.
        purge = _span(self.times.timing.get(("purge", b))) if self.cfg.log_purge_mode == "inline" else 0.0
        wal = (0.0 if async_progress else _span(self.times.timing.get(("offset_log_write", b)))) + purge
        commit = 0.0 if async_progress else _span(self.times.timing.get(("commit_log_write", b)))
        work_start = max(plan_end, self.times.timing.get(("offset_log_write", b), (0, plan_end))[1]) \
            if not async_progress else plan_end
        if purge:
            work_start = max(work_start, self.times.timing[("purge", b)][1])
        sink_end = self.times.timing.get(("sink_commit", b), (now, now))[1]
        # under async progress the batch ends once its output is committed: Spark's trigger handler only
        # queues the commit log write (and commits the source from its callback), and so does the graph
        end = sink_end if async_progress else now
        plan_ms = plan_end - plan_start
        return {"latestOffset": _ms(plan_ms * (1 - planning_share)), "queryPlanning": _ms(plan_ms * planning_share),
                "walCommit": _ms(wal), "purge": _ms(purge), "addBatch": _ms(max(0.0, sink_end - work_start)),
                "commitOffsets": _ms(commit), "triggerExecution": _ms(end - plan_start)}

    def timed_progress(self, b: int, event: ProgressEvent) -> ProgressEvent:
        """``event`` with the simulated durations, rates and start time of batch ``b``."""
        durations = self.durations_ms(b)
        rows = event.num_input_rows
        trigger_s = durations["triggerExecution"] / 1000.0
        plan_start = self.times.timing.get(("plan", b), (self.env.now, 0))[0]
        previous = self.times.timing.get(("plan", b - 1))
        since_s = (plan_start - previous[0]) / 1000.0 if previous else 0.0
        # commitTimeMs: the tasks' commit costs summed, as Spark sums its tasks' metrics (StateStoreWriter);
        # one task step commits all of a partition's stores, so a join's stores share it equally
        share = self.times.commit_ms.get(b, 0.0) / max(len(event.state_operators), 1)
        operators = tuple(replace(op, commit_time_ms=round(share, 3)) for op in event.state_operators)
        return replace(event, duration_ms=durations, state_operators=operators,
                       processed_rows_per_second=round(rows / trigger_s, 3) if trigger_s > 0 else 0.0,
                       input_rows_per_second=round(rows / since_s, 3) if since_s > 0 else 0.0,
                       timestamp_ms=_ms(plan_start))


class SimCosts:
    """The simulator's step costs (the ``StepCosts`` seam): what each driver step costs here, what a task step
    costs by the mode (``task_cost_ms``, in ``data_mode.DataCosts`` and ``volume.VolumeCosts``), and what a
    retry costs. It writes the step times (``StepTimes``) the progress reporter reads."""

    def __init__(self, facts: QueryFacts, book: BatchBook, clock: Clock, times: StepTimes, profile: Profile,
                 service: StorageService, env: simpy.Environment, mode_costs: MicroBatchCosts):
        self.facts, self.book, self.clock, self.times = facts, book, clock, times
        self.profile, self.service, self.env, self.mode_costs = profile, service, env, mode_costs
        self.sc, self.cfg, self.mode, self.restart = facts.sc, facts.cfg, facts.mode, facts.restart
        self.timing = times.timing

    def cost_ms(self, node: StepNode) -> float:
        """What the step costs: driver steps here, task and maintenance steps by the mode."""
        step, b = node.step, node.batch
        prof, svc = self.profile, self.service
        if node.partition >= 0:
            cost = self.task_cost_ms(node)
            if step in COMMIT_STEPS and not node.background:
                self.times.commit_ms[b] = self.times.commit_ms.get(b, 0.0) + cost
            return cost
        if step == "plan":
            return 0.0 if self.mode_costs.plan_is_free(b, self.restart.first_batch) else \
                prof.latest_offset_ms + prof.planning_ms
        if step == "offset_log_write":
            return svc.atomic_write_ms(SMALL_FILE_BYTES) if offset_entry_due(self.facts, self.book, b, self.clock.logical_time_ms(b)) else 0.0
        if step == "purge":
            return self.purge_cost_ms(b)   # offsets/ and commits/; state files: maintenance
        if step == "sink_commit":
            if self.sc.sink_mode != "exactly_once":
                return 0.0
            return svc.atomic_write_ms(SMALL_FILE_BYTES)   # the manifest, from the tasks' commit messages
        if step == "commit_log_write":
            persisted = self.mode.commit_entry_due(b, self.book.persisted_offsets)
            return svc.atomic_write_ms(SMALL_FILE_BYTES) if persisted else 0.0
        assert step == "source_commit", f"no cost for driver step {step}"
        return prof.source_commit_ms

    def purge_cost_ms(self, b: int) -> float:
        """One purge round, as Spark's ``HDFSMetadataLog.purge`` does it on each of the two logs.

        Spark (sql/core/.../streaming/HDFSMetadataLog.scala, ``purge`` with ``lastPurgedBatchId``)
        deletes the ids between the last round's threshold and this one's blindly when there are at
        most three, and otherwise lists the log directory and deletes every entry below the
        threshold. A round whose threshold has not moved does nothing. The round is the reference's
        (``Incarnation.next_purge_round``, ``reference.protocol.logs.purge_round``): under sync progress the latest offset entry minus
        ``minBatchesToRetain`` (MicroBatchExecution.scala: ``purge(batchId - minLogEntriesToMaintain)``,
        called only once ``batchId > minLogEntriesToMaintain``: before that the threshold is below 1 and
        nothing is due here either), so in steady state one entry per log;
        under async progress the oldest of the newest ``minBatchesToRetain`` durable entries, taken
        from an in-memory queue (AsyncProgressTrackingMicroBatchExecution.scala, ``purge``), which
        moves only when a durable offset entry lands, once per ``checkpoint_interval_ms``: the rounds
        in between cost nothing.
        """
        rnd = self.book.decided_purges[b]   # decided when the step started (``Incarnation.decide_purge``)
        if rnd is None:
            return 0.0
        svc = self.service
        if not rnd.lists:
            return svc.delete_ms(2 * len(rnd.due))
        existing = sum(1 for folder in (layout.OFFSETS, layout.COMMITS)
                       for batch in self.book.logs.known()[folder] if batch < rnd.threshold)
        return svc.list_ms(2) + svc.delete_ms(existing)

    def purge_round_skipped(self, node: SimNode) -> bool:
        """Whether an async purge round is skipped because the previous one still ran when it was due.

        Spark's ``AsyncLogPurge.purgeAsync`` (sql/core/.../streaming/AsyncLogPurge.scala) starts a round
        only if ``purgeRunning`` is false, else it skips it. A round is due when its trigger step ends
        (the step graph's ``purge_after``: ``plan`` under async progress, else ``offset_log_write``);
        it reaches the purger later only if it waited for its predecessor.
        """
        if node.step != "purge" or not node.background:
            return False
        trigger = "plan" if self.cfg.progress_mode == "async" else "offset_log_write"
        due = self.timing.get((trigger, node.batch))
        return due is not None and self.env.now > due[1]

    def sink_write_ms(self, size_bytes: float, jitter: float | None = None) -> float:
        """A task's sink write: a part file on the checkpoint storage, or nothing for an in-memory sink.

        ``sink_part_files`` 0 stands for the published benchmark's stat sink (and Spark's noop, console
        and memory sinks): it keeps statistics of what it is given and writes no file, so its cost is
        the task's own per-record work.
        """
        if not self.profile.sink_part_files:
            return 0.0
        return self.service.atomic_write_ms(size_bytes, jitter)

    def task_cost_ms(self, node: StepNode) -> float:
        raise NotImplementedError

    def end_step(self, node: SimNode, start_ms: float) -> None:
        """A step's effect has landed: driver steps' times feed the progress durations."""
        if node.partition < 0:
            self.timing[(node.step, node.batch)] = (start_ms, self.env.now)

    def retry_cost_ms(self) -> float:
        """A failed task attempt is rescheduled (an executor loss adds ``executor_replacement_ms``)."""
        p = self.profile
        return p.scheduling_delay_ms + p.network_rtt_ms + p.per_task_overhead_ms
