"""The protocol of SPEC section 2 with time: one incarnation's step graph, executed on the cluster.

The step graph is the reference's (``reference.engine.Incarnation._build_graph``:
one node per (step, batch, partition) and the dependency edges of every mode).
The reference builds it once per batch shape and the simulator instantiates
it one batch at a time from that template (``graph.py``), so batch boundaries
can be decided by the simulated clock and cluster-scale runs stay small in
memory and fast. A node runs when its dependencies are done, on the component
that owns it:

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
step function: real records and files in data mode, counts in volume mode)
lands when the time is over. A crash in the middle of a step therefore loses
the step, as a crash of a real process would. Faults at a step use the
reference's matching and handling (``reference.runner``); faults at a time
are in ``faults.py``.
"""

from __future__ import annotations

from typing import Any, Callable

import simpy

from reference.engine import DriverCrash, Incarnation, NodeId, QueryFailure, TaskAttemptFailed
from reference.runner import Executor as FaultApplier
from reference.runner import FaultBook
from reference.steps import TASK_STEPS
from reference.storage import CheckpointFormatError, StorageError

from .cost_model import Profile
from .driver import Driver
from .executor import Executor
from .graph import DRIVER, EXECUTOR_BG, GATE, PLAN, Graph, SimNode
from .network import Network
from .random_draws import Draws
from .storage_service import StorageService
from .trace import Trace

RESTARTABLE = (DriverCrash, QueryFailure, TaskAttemptFailed, StorageError)
PRUNE_LAG_BATCHES = 3          # finished batches this far behind a source commit are forgotten
STORAGE_STEPS = frozenset(("offset_log_write", "purge", "state_load", "changelog_write", "snapshot_upload",
                           "sink_write", "sink_commit", "commit_log_write"))
SMALL_FILE_BYTES = 256         # a log entry or manifest
TASK_FAULT_KINDS = ("task_failure", "executor_loss", "zombie_write", "storage_write_error")


class TimedIncarnation(Incarnation):
    """A reference incarnation whose graph is built batch by batch and whose steps take time.

    Subclasses (``DataIncarnation``, ``VolumeIncarnation``) say what a step
    costs, when a batch may be planned and whether there is a next batch; the
    protocol (the graph, the step effects, the fault handling) is the reference's.
    """

    def __init__(self, *args: Any, clock: simpy.Environment, profile: Profile, storage_service: StorageService,
                 rng: Draws, **kwargs: Any):
        self.clock, self.profile, self.service, self.rng = clock, profile, storage_service, rng
        self._graph_open = False
        self.timing: dict[tuple[str, int], tuple[float, float]] = {}   # (step, batch) -> (start, end)
        self.last_plan_start_ms: float | None = None
        self.written_sealed: dict[tuple[int, int], dict[str, Any]] = {}
        self._step_methods: dict[str, Callable[..., None]] = {}
        super().__init__(*args, **kwargs)

    # ------------------------------------------------------------- graph
    # Whether a task's consecutive steps may share one timeout when nothing can watch them one by one
    # (``IncarnationRun.run_fused``): only if no step's cost depends on the clock or on an earlier
    # step's effect, and a task step's effect is read by its own task only. Data mode's effects are
    # files and stores that other steps read, so it runs every step on its own.
    fuse_task_steps = False

    def _build_graph(self) -> None:
        if self._graph_open:
            super()._build_graph()

    def capture_reference_graph(self, b: int, table: dict[Any, Any]) -> dict[Any, Any]:
        """Run the reference's graph builder for batch ``b`` alone, into ``table`` (see ``graph.py``)."""
        saved = self.plans, self.nodes
        self.plans, self.nodes, self._graph_open = {b: saved[0].get(b)}, table, True
        try:
            self._build_graph()
        finally:
            self.plans, self.nodes, self._graph_open = saved[0], saved[1], False
        return table

    def step_call(self, node: Any) -> Callable[[], None]:
        """The step function of ``node`` as the reference's graph binds it (``step_<name>(b[, p])``)."""
        return lambda: self.run_node(node)

    def run_node(self, node: Any) -> None:
        """Apply the effect of ``node``: the incarnation's ``step_<name>`` for its batch (and partition)."""
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

    def slot_executor_of(self, p: int) -> int:
        """Where the task of state partition ``p`` runs in the simulated cluster (its store's home).

        The protocol's own ``executor_of`` (which stores an ``executor_loss``
        drops) stays the reference's, so fault semantics are the same.
        """
        return p % self.profile.executors

    def step_changelog_write(self, b: int, p: int) -> None:
        super().step_changelog_write(b, p)
        self.written_sealed[(b, p)] = dict(self.tasks[(b, p)].sealed)

    def step_state_commit(self, b: int, p: int) -> None:
        """Commit the attempt whose changelog was written, even if a retry re-sealed since.

        Under async state checkpointing the background commit can sit between
        ``changelog_write`` and ``state_commit`` while the task fails after
        ``sink_write`` and is retried; the reference's step would then name the
        retry's uid, whose file was never written (reported as a reference bug).
        """
        written = self.written_sealed.pop((b, p), None)
        task = self.tasks[(b, p)]
        if written is None or written == task.sealed:
            super().step_state_commit(b, p)
            return
        for sid, sealed in written.items():
            store = self.stores.get((sid, p))
            if store is not None and store.uid == sealed.uid:
                store.mark_durable(sealed)
            self.lineage[(sid, p, b + 1)] = sealed.uid

    def step_task_apply(self, b: int, p: int) -> None:
        """If an executor loss dropped this task's loaded store, the task is retried from its load."""
        if any((sid, p) not in self.stores for sid in self.store_ids):
            self.step_state_load(b, p)
        super().step_task_apply(b, p)

    # ---------------------------------------------------- mode interface
    def has_batch(self, b: int) -> bool:
        raise NotImplementedError

    def plan_ready_ms(self, b: int) -> float:
        raise NotImplementedError

    def begin_step(self, node_id: NodeId) -> None:
        if node_id.step == "plan":
            self.last_plan_start_ms = self.clock.now

    def cost_ms(self, node_id: NodeId) -> float:
        """What the step costs: driver steps here, task and maintenance steps by the mode."""
        step, b = node_id.step, node_id.batch
        prof, svc = self.profile, self.service
        if node_id.partition >= 0:
            return self.task_cost_ms(node_id)
        if step == "plan":
            return prof.latest_offset_ms + prof.planning_ms
        if step == "offset_log_write":
            return svc.atomic_write_ms(SMALL_FILE_BYTES) if self.offsets_persist_due(b) else 0.0
        if step == "purge":
            return svc.list_ms(2) + svc.delete_ms(2)   # offsets/ and commits/; state files: maintenance
        if step == "sink_commit":
            if self.sc.sink_mode != "exactly_once":
                return 0.0
            return svc.atomic_write_ms(SMALL_FILE_BYTES)   # the manifest, from the tasks' commit messages
        if step == "commit_log_write":
            persisted = self.cfg.progress_mode == "sync" or b in self.persisted_offsets
            return svc.atomic_write_ms(SMALL_FILE_BYTES) if persisted else 0.0
        assert step == "source_commit", f"no cost for driver step {step}"
        return prof.source_commit_ms

    def task_cost_ms(self, node_id: NodeId) -> float:
        raise NotImplementedError

    def offsets_persist_due(self, b: int) -> bool:
        """Whether this offset log write will write (async progress persists once per interval)."""
        if self.cfg.progress_mode == "sync":
            return True
        last = self.last_persisted_time_ms
        return b == self.restart.first_batch or last is None or \
            self.logical_time_ms(b) - last >= self.cfg.checkpoint_interval_ms

    def end_step(self, node_id: NodeId, start_ms: float) -> None:
        """A step's effect has landed: driver steps' times feed the progress durations."""
        if node_id.partition < 0:
            self.timing[(node_id.step, node_id.batch)] = (start_ms, self.clock.now)

    def retry_cost_ms(self, kind: str) -> float:
        """A failed task attempt is rescheduled (and, after an executor loss, placed on a new executor)."""
        p = self.profile
        extra = p.executor_replacement_ms if kind == "executor_loss" else 0.0
        return p.scheduling_delay_ms + p.network_rtt_ms + p.per_task_overhead_ms + extra

    # ---------------------------------------------------------- progress
    def durations_ms(self, b: int) -> dict[str, float]:
        """StreamingQueryProgress.durationMs of batch ``b`` from the simulated step times."""
        now = self.clock.now
        plan_start, plan_end = self.timing.get(("plan", b), (now, now))
        p = self.profile
        planning_share = p.planning_ms / (p.planning_ms + p.latest_offset_ms) if p.planning_ms else 0.0
        async_progress = self.cfg.progress_mode == "async"
        wal = 0.0 if async_progress else _span(self.timing.get(("offset_log_write", b)))
        commit = 0.0 if async_progress else _span(self.timing.get(("commit_log_write", b)))
        work_start = max(plan_end, self.timing.get(("offset_log_write", b), (0, plan_end))[1]) \
            if not async_progress else plan_end
        sink_end = self.timing.get(("sink_commit", b), (now, now))[1]
        plan_ms = plan_end - plan_start
        return {"latestOffset": _ms(plan_ms * (1 - planning_share)), "queryPlanning": _ms(plan_ms * planning_share),
                "walCommit": _ms(wal), "addBatch": _ms(max(0.0, sink_end - work_start)),
                "commitOffsets": _ms(commit), "triggerExecution": _ms(now - plan_start)}

    def timed_progress(self, b: int, event: dict[str, Any]) -> dict[str, Any]:
        durations = self.durations_ms(b)
        rows = event["numInputRows"]
        trigger_s = durations["triggerExecution"] / 1000.0
        plan_start = self.timing.get(("plan", b), (self.clock.now, 0))[0]
        previous = self.timing.get(("plan", b - 1))
        since_s = (plan_start - previous[0]) / 1000.0 if previous else 0.0
        event["durationMs"] = durations
        event["processedRowsPerSecond"] = round(rows / trigger_s, 3) if trigger_s > 0 else 0.0
        event["inputRowsPerSecond"] = round(rows / since_s, 3) if since_s > 0 else 0.0
        event["timestamp_ms"] = _ms(plan_start)
        return event


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
        self.executors = [Executor(env, i, inc.profile.cores_per_executor, self)
                          for i in range(inc.profile.executors)]
        self.applier = FaultApplier(inc, faults, None)
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
            executor = self.executors[self.inc.slot_executor_of(node.partition)]
            executor.launch_task(self.graph.task_steps(node), self.launch_delay_ms)
        elif kind == EXECUTOR_BG:
            self.executors[self.inc.slot_executor_of(node.partition)].submit_background(node)
        elif kind == PLAN:
            wait_ms = self.inc.plan_ready_ms(node.batch) - self.env.now
            if wait_ms > 0:
                self.env.timeout(wait_ms).callbacks.append(lambda _e, n=node: self._submit_driver(n))
            else:
                self.driver.submit(node)
        else:
            assert kind == DRIVER, f"{node} is run by its task"
            self.driver.submit(node)

    def _submit_driver(self, node: SimNode) -> None:
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
            self.applier.land_zombies(None)
            self.stop(None)

    def prune(self, upto: int) -> None:
        """Forget old batches whose nodes are all done (a dependency on a forgotten node is met)."""
        graph, inc = self.graph, self.inc
        for b in [x for x in graph.batches if x <= upto]:
            if graph.batches[b].outstanding == 0:
                graph.forget(b)
            for p in range(inc.parts):
                inc.tasks.pop((b, p), None)

    def stop(self, exc: BaseException | None, fatal: bool = False) -> None:
        if self.stopped:
            return
        self.stopped = True
        self.finished.succeed((exc, fatal))

    # -------------------------------------------------------------- step
    def component_of(self, node: SimNode) -> str:
        if node.partition < 0:
            return "driver.async" if node.background else "driver"
        executor = f"executor-{self.inc.slot_executor_of(node.partition)}"
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
            cost_ms = inc.cost_ms(node) + extra_ms
            if inc.service.spikes and node.step in STORAGE_STEPS:
                cost_ms += inc.service.spike_wait_ms(node.start_ms)
            assert cost_ms >= 0, f"{node}: negative cost {cost_ms}"
        except Exception as exc:
            self._failed(exc)
            return
        env.timeout(cost_ms, node).callbacks.append(self._land)

    def may_fuse(self) -> bool:
        """Whether a task may run its unwatched steps under one timeout now (``run_fused``)."""
        return self.fusion and not self.faults.pending and not self.applier.zombies \
            and not self.clock_faults_pending()

    def run_fused(self, nodes: list[SimNode], on_done: Callable[[], None]) -> None:
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
        nodes: list[SimNode] = event.value
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
        node: SimNode = event.value
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
        node: SimNode = event.value
        try:
            if self.applier.zombies:
                self.applier.land_zombies(node.node_id)   # a zombie lands right after its step
            self.complete(node)
        except Exception as exc:
            self._failed(exc)
            return
        node.on_done()

    def _failed(self, exc: Exception) -> None:
        if isinstance(exc, RESTARTABLE):
            self.trace.record(self.env.now, "driver", "stopped", str(exc))
            self.stop(exc)
        elif isinstance(exc, CheckpointFormatError):
            self.trace.record(self.env.now, "driver", "failed", str(exc))
            self.stop(exc, fatal=True)
        else:
            raise exc

    def apply_faults(self, node: SimNode, when: str) -> tuple[float, bool]:
        """Faults of the scenario matching this step (reference matching); extra time and skip flag."""
        extra_ms, skip = 0.0, False
        inc = self.inc
        for fault in self.faults.take(node, when, inc.logical_time_ms(node.batch), inc.number):  # type: ignore[arg-type]
            self.trace.record(self.env.now, "faults", fault.kind, f"{when} {node}")
            self.graph.materialize(node.batch)   # the reference's fault handling reads the node table
            if fault.kind == "storage_latency":
                extra_ms += fault.ms or 0
            elif fault.kind in TASK_FAULT_KINDS and node.step in TASK_STEPS and not node.background:
                extra_ms += inc.retry_cost_ms(fault.kind)
            skip = self.applier.apply(fault, node.node_id, when) or skip
        return extra_ms, skip
