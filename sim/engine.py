"""The protocol of SPEC section 2 with time: one incarnation's step graph, executed on the cluster.

The step graph is the reference's (``reference.graph.GraphShape.batch_nodes``:
one node per (step, batch, partition) and the dependency edges of every mode).
The simulator instantiates it one batch at a time from a template per batch
shape (``graph.py``), so batch boundaries can be decided by the simulated
clock and cluster-scale runs stay small in memory and fast. A node runs when
its dependencies are done, on the component that owns it:

- driver steps on the micro-batch thread, background log writes on the async
  log writer, background purges on the async purger (``driver.py``);
- a task's foreground steps back to back in one task slot, launched once the
  dependencies of its ``state_load`` and ``task_apply`` are met (so a task never
  holds a slot while it waits for another task); background changelog writes,
  state commits and snapshot uploads on the executor's threads (``executor.py``).
  Where nothing can watch them one by one (volume mode, no fault pending), the
  steps of a task that nothing outside it waits for share one timeout, with
  the same times and effects (``IncarnationRun.run_fused``).

A step takes the time the cost model charges and its effect (the reference's
step function, ``Incarnation.run_step``: real records and files in data mode,
counts in volume mode) lands when the time is over. A crash in the middle of a
step therefore loses the step, as a crash of a real process would. Faults at a
step are matched by the reference's ``FaultBook`` and decided by its
``apply_fault``, acting on the simulated cluster (``faults.ClusterSubstrate``);
faults at a time are in ``faults.py``.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import Any, Callable, Sequence, cast

import simpy

from reference import layout
from reference.engine import Incarnation
from reference.faults import FaultBook, apply_fault
from reference.graph import Node
from reference.logs import PurgeRound
from reference.outcome import ProgressEvent
from reference.steps import NodeId
from reference.storage import CheckpointFormatError
from reference.supervisor import RESTARTABLE
from reference.trigger import next_batch_time_ms, trigger_plan_ms

from .cost_model import Profile
from .driver import Driver
from .executor import Executor
from .faults import ClusterSubstrate
from .graph import DRIVER, EXECUTOR_BG, GATE, PLAN, Graph, SimNode
from .network import Network
from .random_draws import Draws
from .storage_service import StorageService
from .trace import Trace

PRUNE_LAG_BATCHES = 3          # finished batches this far behind a source commit are forgotten
COMMIT_STEPS = frozenset(("changelog_write", "state_commit"))   # a task's part of Spark's commitTimeMs
STORAGE_STEPS = frozenset(("offset_log_write", "purge", "state_load", "changelog_write", "snapshot_upload",
                           "sink_write", "sink_commit", "commit_log_write"))
SMALL_FILE_BYTES = 256         # a log entry or manifest


class TimedIncarnation(Incarnation):
    """A reference incarnation whose graph is built batch by batch and whose steps take time.

    Subclasses (``DataIncarnation``, ``VolumeIncarnation``) say what a step
    costs, when a batch may be planned and whether there is a next batch; the
    protocol (the graph, the step effects, the fault handling) is the reference's.
    """

    # Whether a task's consecutive steps may share one timeout when nothing can watch them one by one
    # (``IncarnationRun.run_fused``): only if no step's cost depends on the clock or on an earlier
    # step's effect, and a task step's effect is read by its own task only. Data mode's effects are
    # files and stores that other steps read, so it runs every step on its own.
    fuse_task_steps = False
    # parallel store commit: a partition's stores commit inside one node, charged the slower store's time
    store_commit_nodes = False

    def __init__(self, *args: Any, clock: simpy.Environment, profile: Profile, storage_service: StorageService,
                 rng: Draws, **kwargs: Any):
        self.clock, self.profile, self.service, self.rng = clock, profile, storage_service, rng
        self.timing: dict[tuple[str, int], tuple[float, float]] = {}   # (step, batch) -> (start, end)
        self.purge_rounds: dict[int, PurgeRound | None] = {}   # batch -> the round its purge decided at start
        self.commit_ms: dict[int, float] = {}   # batch -> its tasks' state commit costs, summed (commitTimeMs)
        self.last_plan_start_ms: float | None = None
        self._step_methods: dict[str, Callable[..., None]] = {}
        super().__init__(*args, **kwargs)
        # a scenario that names its executors (``executors``, ``events``) gets one simulated executor per
        # id it ever names, and tasks run where the placement puts them; otherwise ``profile.executors``
        ids = sorted({*self.sc.executors, *(e.executor for e in self.sc.events)}) if self.placement.named else []
        self.executor_index = {e: i for i, e in enumerate(ids)}

    # ------------------------------------------------------------- graph
    def build_graph(self) -> dict[NodeId, Node]:
        """Empty: the simulator instantiates batches one at a time (``graph.Graph``); the node table holds
        only the batches a fault needs (``Graph.materialize``)."""
        return {}

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

    # -------------------------------------------------------------- time
    def logical_time_ms(self, batch: int) -> int:
        return int(self.clock.now) + self.clock_skew_ms

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
        ``input_ms`` (None: no input left): ``reference.trigger``, Spark's ``ProcessingTimeExecutor``
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

    def cost_ms(self, node: SimNode) -> float:
        """What the step costs: driver steps here, task and maintenance steps by the mode."""
        step, b = node.step, node.batch
        prof, svc = self.profile, self.service
        if node.partition >= 0:
            cost = self.task_cost_ms(node)
            if step in COMMIT_STEPS and not node.background:
                self.commit_ms[b] = self.commit_ms.get(b, 0.0) + cost
            return cost
        if step == "plan":
            return prof.latest_offset_ms + prof.planning_ms
        if step == "offset_log_write":
            return svc.atomic_write_ms(SMALL_FILE_BYTES) if self.offsets_persist_due(b) else 0.0
        if step == "purge":
            return self.purge_cost_ms(b)   # offsets/ and commits/; state files: maintenance
        if step == "sink_commit":
            if self.sc.sink_mode != "exactly_once":
                return 0.0
            return svc.atomic_write_ms(SMALL_FILE_BYTES)   # the manifest, from the tasks' commit messages
        if step == "commit_log_write":
            persisted = self.cfg.progress_mode == "sync" or b in self.persisted_offsets
            return svc.atomic_write_ms(SMALL_FILE_BYTES) if persisted else 0.0
        assert step == "source_commit", f"no cost for driver step {step}"
        return prof.source_commit_ms

    def purge_round_of(self, b: int) -> PurgeRound | None:
        """The round decided when purge ``b`` started (``purge_cost_ms``); its effect lands at its end."""
        return self.purge_rounds.pop(b) if b in self.purge_rounds else self.next_purge_round()

    def purge_cost_ms(self, b: int) -> float:
        """One purge round, as Spark's ``HDFSMetadataLog.purge`` does it on each of the two logs.

        Spark (sql/core/.../streaming/HDFSMetadataLog.scala, ``purge`` with ``lastPurgedBatchId``)
        deletes the ids between the last round's threshold and this one's blindly when there are at
        most three, and otherwise lists the log directory and deletes every entry below the
        threshold. A round whose threshold has not moved does nothing. The round is the reference's
        (``Incarnation.next_purge_round``, ``reference.logs.purge_round``): under sync progress the latest offset entry minus
        ``minBatchesToRetain`` (MicroBatchExecution.scala: ``purge(batchId - minLogEntriesToMaintain)``,
        called only once ``batchId > minLogEntriesToMaintain``: before that the threshold is below 1 and
        nothing is due here either), so in steady state one entry per log;
        under async progress the oldest of the newest ``minBatchesToRetain`` durable entries, taken
        from an in-memory queue (AsyncProgressTrackingMicroBatchExecution.scala, ``purge``), which
        moves only when a durable offset entry lands, once per ``checkpoint_interval_ms``: the rounds
        in between cost nothing.
        """
        rnd = self.purge_rounds[b] = self.next_purge_round()   # what the step's effect will run
        if rnd is None:
            return 0.0
        svc = self.service
        if not rnd.lists:
            return svc.delete_ms(2 * len(rnd.due))
        existing = sum(1 for folder in (layout.OFFSETS, layout.COMMITS)
                       for batch in self.known_logs()[folder] if batch < rnd.threshold)
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
        return due is not None and self.clock.now > due[1]

    def sink_write_ms(self, size_bytes: float, jitter: float | None = None) -> float:
        """A task's sink write: a part file on the checkpoint storage, or nothing for an in-memory sink.

        ``sink_part_files`` 0 stands for the published benchmark's stat sink (and Spark's noop, console
        and memory sinks): it keeps statistics of what it is given and writes no file, so its cost is
        the task's own per-record work.
        """
        if not self.profile.sink_part_files:
            return 0.0
        return self.service.atomic_write_ms(size_bytes, jitter)

    def task_cost_ms(self, node: SimNode) -> float:
        raise NotImplementedError

    def end_step(self, node: SimNode, start_ms: float) -> None:
        """A step's effect has landed: driver steps' times feed the progress durations."""
        if node.partition < 0:
            self.timing[(node.step, node.batch)] = (start_ms, self.clock.now)

    def retry_cost_ms(self) -> float:
        """A failed task attempt is rescheduled (an executor loss adds ``executor_replacement_ms``)."""
        p = self.profile
        return p.scheduling_delay_ms + p.network_rtt_ms + p.per_task_overhead_ms

    # ---------------------------------------------------------- progress
    def durations_ms(self, b: int) -> dict[str, float]:
        """StreamingQueryProgress.durationMs of batch ``b`` from the simulated step times."""
        now = self.clock.now
        plan_start, plan_end = self.timing.get(("plan", b), (now, now))
        p = self.profile
        planning_share = p.planning_ms / (p.planning_ms + p.latest_offset_ms) if p.planning_ms else 0.0
        async_progress = self.cfg.progress_mode == "async"
        # Spark times an inline purge inside walCommit (MicroBatchExecution.constructNextBatch runs it in the
        # ``reportTimeTaken("walCommit")`` block); an async purge is only submitted there. ``purge`` is our
        # own key: the inline purge's part of walCommit, so a breakdown can tell the two apart.
        purge = _span(self.timing.get(("purge", b))) if self.cfg.log_purge_mode == "inline" else 0.0
        wal = (0.0 if async_progress else _span(self.timing.get(("offset_log_write", b)))) + purge
        commit = 0.0 if async_progress else _span(self.timing.get(("commit_log_write", b)))
        work_start = max(plan_end, self.timing.get(("offset_log_write", b), (0, plan_end))[1]) \
            if not async_progress else plan_end
        if purge:
            work_start = max(work_start, self.timing[("purge", b)][1])
        sink_end = self.timing.get(("sink_commit", b), (now, now))[1]
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
        plan_start = self.timing.get(("plan", b), (self.clock.now, 0))[0]
        previous = self.timing.get(("plan", b - 1))
        since_s = (plan_start - previous[0]) / 1000.0 if previous else 0.0
        # commitTimeMs: the tasks' commit costs summed, as Spark sums its tasks' metrics (StateStoreWriter);
        # one task step commits all of a partition's stores, so a join's stores share it equally
        share = self.commit_ms.get(b, 0.0) / max(len(event.state_operators), 1)
        operators = tuple(replace(op, commit_time_ms=round(share, 3)) for op in event.state_operators)
        return replace(event, duration_ms=durations, state_operators=operators,
                       processed_rows_per_second=round(rows / trigger_s, 3) if trigger_s > 0 else 0.0,
                       input_rows_per_second=round(rows / since_s, 3) if since_s > 0 else 0.0,
                       timestamp_ms=_ms(plan_start))


def _span(pair: tuple[float, float] | None) -> float:
    return pair[1] - pair[0] if pair else 0.0


def _ms(value: float) -> float:
    return round(float(value), 3)


class IncarnationRun:
    """Executes one incarnation's step graph on a fresh driver and fresh executors.

    The graph lives in a ``graph.Graph``: batch ``b + 1`` is instantiated when
    ``plan`` of ``b`` finishes (if the mode says there is a next batch), from
    the template of its shape. A node whose dependencies are met goes to its
    component; a task's foreground steps go, as one task, to the executor of
    its partition once its gate (the dependencies of its first steps) is met.
    """

    def __init__(self, env: simpy.Environment, inc: TimedIncarnation, faults: FaultBook, trace: Trace,
                 check_invariants: bool = True, clock_faults_pending: Callable[[], bool] | None = None):
        self.env, self.inc, self.trace = env, inc, trace
        self.profile = inc.profile
        self.network = Network(inc.profile.network_rtt_ms)
        self.launch_delay_ms = self.profile.scheduling_delay_ms + self.network.one_way_ms
        self.stopped = False
        self.finished = env.event()
        self.check_invariants = check_invariants
        self.graph = Graph(inc)
        self.outstanding = 0
        self.driver = Driver(self)
        self.executors = [Executor(env, i, inc.profile.cores_per_executor, self) for i in range(inc.executors())]
        self.substrate = ClusterSubstrate(inc)
        self.faults = faults
        # steps fused under one timeout must not be watched one by one: no trace, no invariant checks
        self.fusion = inc.fuse_task_steps and not check_invariants and not trace.enabled
        self.clock_faults_pending = clock_faults_pending or (lambda: False)
        if self.fusion:
            self.graph.mark_fusable()

    def start(self) -> None:
        self.add_batch(self.inc.restart.first_batch)

    # ------------------------------------------------------------- graph
    def add_batch(self, b: int) -> None:
        graph = self.graph.add_batch(b, self.ready)
        self.outstanding += graph.outstanding

    def ready(self, node: SimNode) -> None:
        """All of ``node``'s dependencies are met: hand it to the component that runs it."""
        if self.stopped:
            return
        kind = node.template.kind
        if kind == GATE:
            executor = self.executors[self.inc.slot_executor_of(node.batch, node.partition)]
            executor.launch_task(self.graph.task_steps(node), self.launch_delay_ms)
        elif kind == EXECUTOR_BG:
            self.executors[self.inc.slot_executor_of(node.batch, node.partition)].submit_background(node)
        elif kind == PLAN:
            wait_ms = self.inc.plan_ready_ms(node.batch) - self.env.now
            if wait_ms > 0:
                self.env.timeout(wait_ms).callbacks.append(partial(self._submit_driver, node))
            else:
                self.driver.submit(node)
        else:
            assert kind == DRIVER, f"{node} is run by its task"
            self.driver.submit(node)

    def _submit_driver(self, node: SimNode, _event: simpy.Event) -> None:
        if not self.stopped:
            self.driver.submit(node)

    def complete(self, node: SimNode) -> None:
        node.done = True
        graph = node.graph
        graph.outstanding -= 1
        self.outstanding -= 1
        assert self.outstanding >= 0 and graph.outstanding >= 0, "a node completed twice"
        ready = self.ready
        for dependent in node.dependents:
            dependent.waiting -= 1
            if not dependent.waiting:
                ready(dependent)
        step = node.step
        if step == "plan" and self.inc.has_batch(node.batch + 1):
            self.add_batch(node.batch + 1)
        elif step == "source_commit":
            self.prune(node.batch - PRUNE_LAG_BATCHES)
        if self.outstanding == 0 and not self.stopped:
            self.substrate.land_zombies(None)
            self.stop(None)

    def prune(self, upto: int) -> None:
        """Forget old batches whose nodes are all done (a dependency on a forgotten node is met)."""
        graph, inc = self.graph, self.inc
        for b in [x for x in graph.batches if x <= upto]:
            if graph.batches[b].outstanding == 0:
                graph.forget(b)
            for p in range(inc.parts):
                inc.tasks.pop((b, p), None)

    def stop(self, exc: BaseException | None) -> None:
        """The incarnation is over: it consumed its input (None) or stopped with ``exc``."""
        if self.stopped:
            return
        self.stopped = True
        self.finished.succeed(exc)

    # -------------------------------------------------------------- step
    def component_of(self, node: SimNode) -> str:
        if node.partition < 0:
            return "driver.async" if node.background else "driver"
        executor = f"executor-{self.inc.slot_executor_of(node.batch, node.partition)}"
        return f"{executor}.background" if node.background else executor

    def run_step(self, node: SimNode, on_done: Callable[[], None]) -> None:
        """Charge the step's cost, then apply its effect; faults before and after it (SPEC section 2).

        The effect lands when the cost has been paid, so a crash in between loses
        the step. ``on_done`` is called once the step is complete (never after a stop).
        """
        if self.stopped:
            return
        inc, env = self.inc, self.env
        if self.check_invariants:
            assert not self.graph.unmet(node), f"{node} ran before its deps {self.graph.unmet(node)}"
        node.start_ms = env.now
        node.on_done = on_done
        try:
            extra_ms, node.skip = self.apply_faults(node, "before") if self.faults.pending else (0.0, False)
            inc.begin_step(node)
            skipped_round = not node.skip and inc.purge_round_skipped(node)
            node.skip = node.skip or skipped_round
            cost_ms = (0.0 if skipped_round else inc.cost_ms(node)) + extra_ms
            if inc.service.spikes and node.step in STORAGE_STEPS:
                cost_ms += inc.service.spike_wait_ms(node.start_ms)
            assert cost_ms >= 0, f"{node}: negative cost {cost_ms}"
        except Exception as exc:
            self._failed(exc)
            return
        env.timeout(cost_ms, node).callbacks.append(self._land)

    def may_fuse(self) -> bool:
        """Whether a task may run its unwatched steps under one timeout now (``run_fused``)."""
        return self.fusion and not self.faults.pending and not self.substrate.zombies \
            and not self.clock_faults_pending()

    def run_fused(self, nodes: Sequence[SimNode], on_done: Callable[[], None]) -> None:
        """Run consecutive steps of one task under one timeout; the same times and effects as one by one.

        Only when the incarnation allows it (``TimedIncarnation.fuse_task_steps``:
        a step's cost depends neither on the clock nor on earlier steps' effects,
        and its effect is read by its own task only), no fault can fire (none is
        pending at a step or a time) and every step but the last is one nothing
        outside the task waits for. Each step is charged from its own start,
        which is the previous step's end; the effects land in order at the end.
        """
        if self.stopped:
            return
        inc, env = self.inc, self.env
        start_ms = env.now
        spikes = inc.service.spikes
        for node in nodes:
            node.start_ms = start_ms
            inc.begin_step(node)
            cost_ms = inc.cost_ms(node)
            if spikes and node.step in STORAGE_STEPS:
                cost_ms += inc.service.spike_wait_ms(start_ms)
            assert cost_ms >= 0, f"{node}: negative cost {cost_ms}"
            start_ms += cost_ms
        nodes[-1].on_done = on_done
        env.timeout(start_ms - env.now, nodes).callbacks.append(self._land_fused)

    def _land_fused(self, event: simpy.Event) -> None:
        if self.stopped:
            return
        inc, trace = self.inc, self.trace
        nodes = cast("list[SimNode]", event.value)
        try:
            last = nodes[-1]
            for node in nodes:
                inc.run_node(node)
                inc.end_step(node, node.start_ms)
                trace.count += 1
                if node is last:
                    self.complete(node)
                else:   # nothing outside the task waits for it: only the counts change
                    node.done = True
                    node.graph.outstanding -= 1
                    self.outstanding -= 1
        except Exception as exc:
            self._failed(exc)
            return
        nodes[-1].on_done()

    def _land(self, event: simpy.Event) -> None:
        if self.stopped:
            return
        node = cast(SimNode, event.value)
        inc = self.inc
        try:
            if not node.skip:
                inc.run_node(node)
            inc.end_step(node, node.start_ms)
            if self.trace.enabled:
                self.trace.record(self.env.now, self.component_of(node), str(node), f"start={node.start_ms:.3f}")
            else:
                self.trace.count += 1
            after_ms = self.apply_faults(node, "after")[0] if self.faults.pending else 0.0
        except Exception as exc:
            self._failed(exc)
            return
        if after_ms:
            self.env.timeout(after_ms, node).callbacks.append(self._finish)
        else:
            self._finish(event)

    def _finish(self, event: simpy.Event) -> None:
        if self.stopped:
            return
        node = cast(SimNode, event.value)
        try:
            if self.substrate.zombies:
                self.substrate.land_zombies(node.node_id)   # a zombie lands right after its step
            self.complete(node)
        except Exception as exc:
            self._failed(exc)
            return
        node.on_done()

    def _failed(self, exc: Exception) -> None:
        """A step raised: the incarnation ends (the supervisor decides what follows); anything else is a bug."""
        if isinstance(exc, RESTARTABLE):
            self.trace.record(self.env.now, "driver", "stopped", str(exc))
        elif isinstance(exc, CheckpointFormatError):
            self.trace.record(self.env.now, "driver", "failed", str(exc))
        else:
            raise exc
        self.stop(exc)

    def apply_faults(self, node: SimNode, when: str) -> tuple[float, bool]:
        """The scenario's faults at this step (the reference's ``FaultBook`` and ``apply_fault``): the time
        they add to the step, and whether the step itself is skipped."""
        inc, substrate = self.inc, self.substrate
        substrate.extra_ms = 0.0
        skip = False
        node_id = node.node_id
        for fault in self.faults.take(node_id, when, inc.logical_time_ms(node.batch), inc.number):
            self.trace.record(self.env.now, "faults", fault.kind, f"{when} {node}")
            inc.obs.note(f"fault {fault.kind} {when} {node_id}")
            self.graph.materialize(node.batch)   # a task retry reads the reference's node table
            skip = apply_fault(fault, node_id, when, node.background, substrate) or skip
        return substrate.extra_ms, skip
