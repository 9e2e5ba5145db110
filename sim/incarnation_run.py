"""The protocol of spec section 2 with time: one incarnation's step graph, executed on the simulated cluster.

The step graph is the reference's (``reference.protocol.graph.GraphShape.batch_nodes``:
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

A step takes the time the cost model charges (``StepCosts``,
``timed_incarnation.TimedIncarnation.cost_ms``) and its effect (the
reference's step function, ``TimedIncarnation.run_node``: real records and
files in data mode, counts in volume mode) lands when the time is over. A
crash in the middle of a step therefore loses the step, as a crash of a real
process would. Faults at a step are matched by the reference's ``FaultBook``
and decided by its ``apply_fault``, acting on the simulated cluster
(``faults.ClusterSubstrate``); faults at a time are in ``faults.py``.
"""

from __future__ import annotations

from functools import partial
from typing import Callable, Sequence, cast

import simpy

from reference.protocol.faults import FaultBook, apply_fault
from reference.protocol.run import InPlaceFaultEffects
from reference.protocol.storage import CheckpointFormatError
from reference.protocol.supervisor import RESTARTABLE

from .driver import Driver
from .executor import Executor
from .faults import ClusterSubstrate
from .graph import DRIVER, EXECUTOR_BG, GATE, PLAN, Graph, SimNode
from .network import Network
from .stage import STAGE, StageGraph, StageRun
from .timed_incarnation import TimedIncarnation
from .trace import Trace

PRUNE_LAG_BATCHES = 3          # finished batches this far behind a source commit are forgotten
STORAGE_STEPS = frozenset(("offset_log_write", "purge", "state_load", "changelog_write", "snapshot_upload",
                           "sink_write", "sink_commit", "commit_log_write"))


class IncarnationRun:
    """Executes one incarnation's step graph on a fresh driver and fresh executors.

    The graph lives in a ``graph.Graph``: batch ``b + 1`` is instantiated when
    ``plan`` of ``b`` finishes (if the mode says there is a next batch), from
    the template of its shape. A node whose dependencies are met goes to its
    component; a task's foreground steps go, as one task, to the executor of
    its partition once its gate (the dependencies of its first steps) is met.
    It runs the incarnation, so it holds it; its graph and fault substrate hold only their parts.
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
        # steps fused under one timeout must not be watched one by one: no trace, no invariant checks
        self.fusion = inc.fuse_task_steps and not check_invariants and not trace.enabled
        self.faults = faults
        self.clock_faults_pending = clock_faults_pending or (lambda: False)
        self.graph = StageGraph(inc.shape, inc.nodes, inc.cfg.pipelining, inc.service, self) \
            if self.fusion and inc.run_stages else Graph(inc.shape, inc.nodes)
        self.stages = StageRun(self)
        self.outstanding = 0
        self.driver = Driver(self)
        self.executors = [Executor(env, i, inc.profile.cores_per_executor, self) for i in range(inc.executors())]
        self.substrate = ClusterSubstrate(InPlaceFaultEffects.of(inc), inc, inc.book, inc.storage,
                                          inc.profile.executor_replacement_ms, inc.costs.retry_cost_ms())
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
        elif kind == STAGE:
            self.stages.start(node)
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
        """Charge the step's cost, then apply its effect; faults before and after it (spec section 2).

        The effect lands when the cost has been paid, so a crash in between loses
        the step. ``on_done`` is called once the step is complete (never after a stop).
        """
        if self.stopped:
            return
        inc, env, costs = self.inc, self.env, self.inc.costs
        if self.check_invariants:
            assert not self.graph.unmet(node), f"{node} ran before its deps {self.graph.unmet(node)}"
        node.start_ms = env.now
        node.on_done = on_done
        try:
            extra_ms, node.skip = self.apply_faults(node, "before") if self.faults.pending else (0.0, False)
            inc.begin_step(node)
            skipped_round = not node.skip and costs.purge_round_skipped(node)
            node.skip = node.skip or skipped_round
            if node.step == "purge" and not skipped_round:
                inc.decide_purge(node.batch)   # the round its cost charges and its effect runs
            cost_ms = (0.0 if skipped_round else costs.cost_ms(node)) + extra_ms
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
        inc, env, costs = self.inc, self.env, self.inc.costs
        start_ms = env.now
        spikes = inc.service.spikes
        for node in nodes:
            node.start_ms = start_ms
            inc.begin_step(node)
            cost_ms = costs.cost_ms(node)
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
                inc.costs.end_step(node, node.start_ms)
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
            inc.costs.end_step(node, node.start_ms)
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
