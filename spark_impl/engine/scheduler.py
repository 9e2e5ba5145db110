"""The engine's step scheduler: the reference's step graph of an incarnation, executed concurrently on Spark.

The graph is the reference's (``inc.nodes``: ``reference.protocol.graph.Node`` values);
a node's effect is ``inc.run_step``. What this module decides is when and
where each node runs:

- driver steps run on the driver thread as soon as their dependencies are
  done (a paced ``plan`` also waits for its input, or for the trigger to fire
  with new input, without blocking the thread; an open-ended incarnation,
  cutting by the trigger, adds each batch's nodes when the previous batch
  plans); background driver steps (async offset/commit log writes, async
  purge) run on their own threads (``Lane``), off the micro-batch's critical
  path. Their faults fire here (``driver_faults.py``);
- the task steps of one batch run as one Spark job (``jobs.py``), submitted
  from its own thread under the FAIR scheduler, with the batch's task-step
  faults travelling along. With pipelining a batch's job is submitted while
  the previous batch's job still runs; a task then waits on the executor for
  its own partition of the previous batch, which is the per-partition ordering
  of the graph. Dependencies across partitions (a watermark needs every
  partition's event-time maximum) still wait on the driver. With group
  scheduling the batch is released to a running group job instead
  (``group_scheduling.py``);
- under async state checkpointing a task returns before its state commit;
  the driver watches for the commit's outcome (``async_state_watch.py``).
  The next batch's job does not wait for that commit: its tasks run while it
  goes on, and each task's own background commit waits on the executor for
  the previous version's (the graph's ``changelog_write`` dependency).
"""

from __future__ import annotations

import functools
import queue
import threading
import time
from collections import defaultdict
from typing import Callable

from reference.protocol.failures import DriverCrash, QueryFailure
from reference.protocol.graph import Node
from reference.language.steps import TASK_STEPS, NodeId
from reference.protocol.storage import CheckpointFormatError

from .async_state_watch import AsyncStateWatch
from .coordination import atomic_write
from .driver_faults import ClaimingFaultBook, DriverFaults
from .group_scheduling import GroupScheduling
from .incarnation import SparkIncarnation
from .jobs import SparkJobs
from .task import TaskResult
from .task_spec import IndexedFault

IDLE_WAIT_S = 0.05
ASYNC_STATE_POLL_S = 0.005
PIPELINED_DEPS = ("state_load", "task_apply", "sink_write", "changelog_write", "state_commit")
ERROR_MARKERS = ("InjectedTaskFailure: ", "TaskWaitFailed: ", "RuntimeError: ", "Error: ")


class StepScheduler:
    """Executes an incarnation's step graph with real concurrency (see the module docstring). It runs the
    incarnation, so it holds it, as do the helpers that act for it on a batch's jobs and faults
    (``jobs.py``, ``group_scheduling.py``, ``driver_faults.py``, ``async_state_watch.py``)."""

    def __init__(self, inc: SparkIncarnation, faults: ClaimingFaultBook):
        self.inc, self.faults = inc, faults
        self.driver_faults = DriverFaults(inc, faults)
        self.cond = threading.Condition()
        self.done: set[NodeId] = set()
        self.failure: BaseException | None = None
        self.stopping = False
        self.submitted: set[int] = set()
        self.lanes: dict[str, Lane] = {}
        self.async_state = AsyncStateWatch(inc)
        self.task_nodes: dict[int, list[NodeId]] = defaultdict(list)
        for node_id in inc.nodes:
            if node_id.step in TASK_STEPS:
                self.task_nodes[node_id.batch].append(node_id)
        self.waiting = [n for n in inc.nodes if n.step not in TASK_STEPS]  # driver nodes not yet started
        self.next_plan_s: float | None = None
        self.jobs = SparkJobs(inc)
        assert inc.engine.group == 1 or not inc.open_ended, "a group job needs its batches known in advance"
        self.groups = GroupScheduling(inc, self.jobs, sorted(self.task_nodes), self) if inc.engine.group > 1 \
            else None
        inc.spark_graph.on_nodes_added = self._nodes_added

    def _nodes_added(self, nodes: list[Node]) -> None:
        """An open batch joined the graph (its previous batch planned): schedule its nodes too."""
        with self.cond:
            for node in nodes:
                if node.id.step in TASK_STEPS:
                    self.task_nodes[node.id.batch].append(node.id)
                else:
                    self.waiting.append(node.id)
            self.cond.notify_all()

    # ------------------------------------------------------------ main loop
    def run(self) -> None:
        if self.groups is not None:
            self.groups.start()
        try:
            while not self._advance():
                pass
        finally:
            self._stop()

    def _advance(self) -> bool:
        """Start what is ready (or wait a little); True once every node is done."""
        with self.cond:
            self._check_failure()
            if len(self.done) == len(self.inc.nodes):
                return True
            ready, jobs = self._ready_driver_nodes(), self._ready_jobs()
            if not ready and not jobs:
                self.cond.wait(self._idle_wait_s())
                self._poll_async_state()
                return False
        for b in jobs:
            self._submit_job(b)
        for node_id in ready:
            if self.inc.nodes[node_id].background:
                self._lane(node_id.step).submit(functools.partial(self._run_driver_node, node_id))
            else:
                self._run_driver_node(node_id)
            self._check_failure()
        return False

    def _stop(self) -> None:
        inc = self.inc
        self.stopping = True
        for lane in self.lanes.values():
            lane.stop()
        atomic_write(inc.coordination.stop(), "stopped")
        inc.wait_for_zombies()
        if self.failure is not None or len(self.done) != len(inc.nodes):
            inc.engine.spark.sparkContext.cancelJobsWithTag(inc.epoch)

    def active(self) -> bool:
        return not self.stopping and self.failure is None

    def _check_failure(self) -> None:
        crash = self.inc.coordination.crash()
        if self.failure is None and crash.exists():
            self.failure = DriverCrash(crash.read_text())  # a task crashed the driver
        if self.failure is not None:
            raise self.failure

    def _fail(self, exc: BaseException) -> None:
        with self.cond:
            self.failure = self.failure or exc
            self.cond.notify_all()

    def _mark_done(self, node_ids: list[NodeId]) -> None:
        with self.cond:
            self.done.update(node_ids)
            self.cond.notify_all()

    # ------------------------------------------------------------ driver nodes
    def _ready(self, node_id: NodeId) -> bool:
        return all(d in self.done for d in self.inc.nodes[node_id].deps)

    def _ready_driver_nodes(self) -> list[NodeId]:
        """Driver nodes whose dependencies are done; a paced ``plan`` also waits for its input to arrive
        (without blocking the driver thread, which meanwhile finishes earlier batches)."""
        now = time.time()
        out = []
        self.next_plan_s = None  # when the earliest plan held back for its input may run
        for node_id in self.waiting:
            if not self._ready(node_id):
                continue
            if node_id.step == "plan" and self.inc.engine.pace:
                ready_s = self.inc.wall_clock.plan_ready_s(node_id.batch, now)
                if ready_s > now:
                    self.next_plan_s = ready_s if self.next_plan_s is None else min(self.next_plan_s, ready_s)
                    continue
            out.append(node_id)
        if out:
            started = set(out)
            self.waiting = [n for n in self.waiting if n not in started]
        return out

    def _idle_wait_s(self) -> float:
        """How long the main loop may sleep: until the next paced plan, or a short poll for async commits."""
        wait = ASYNC_STATE_POLL_S if self.async_state.pending else IDLE_WAIT_S
        if self.next_plan_s is not None:
            wait = min(wait, max(0.0, self.next_plan_s - time.time()))
        return wait

    def _run_driver_node(self, node_id: NodeId) -> None:
        try:
            self.driver_faults.run_step(node_id)
        except BaseException as exc:  # noqa: BLE001 - handed to the main loop
            self._fail(exc)
            return
        hook = self.inc.engine.on_step
        if hook is not None:
            hook(str(node_id))
        self._mark_done([node_id])

    def _lane(self, step: str) -> "Lane":
        name = "purge" if step == "purge" else "log"
        if name not in self.lanes:
            self.lanes[name] = Lane(name)
        return self.lanes[name]

    # ------------------------------------------------------------ jobs
    def _ready_jobs(self) -> list[int]:
        """Batches whose job can be submitted now (in batch order)."""
        out = []
        for b in sorted(self.task_nodes):
            if b in self.submitted:
                continue
            if not all(self._dep_met(node_id, dep) for node_id in self.task_nodes[b]
                       for dep in self.inc.nodes[node_id].deps):
                break
            self.submitted.add(b)
            out.append(b)
        return out

    def _dep_met(self, node_id: NodeId, dep: NodeId) -> bool:
        """Whether a dependency of a task node no longer holds its job back."""
        if dep in self.done or (dep.step in TASK_STEPS and dep.batch == node_id.batch):
            return True
        if dep.partition != node_id.partition or dep.batch not in self.submitted:
            return False
        if self.inc.nodes[dep].background:
            # async state checkpointing: the changelog write of b waits for the background commit of b-1 on
            # the executor (``task.commit_in_background``); the task of b itself may run while b-1 commits,
            # as the graph allows. Holding the job back until the driver saw b-1 durable serialised what
            # the feature overlaps: batch b started one commit (and one driver poll) after b-1's tasks.
            return node_id.step == "changelog_write" and dep.step == "state_commit"
        # pipelining: the same partition's task of an earlier, already submitted batch is ordered on
        # the executor
        return self.inc.cfg.pipelining and dep.step in PIPELINED_DEPS

    def _submit_job(self, b: int) -> None:
        faults = tuple((self.faults.index_of(f), f) for f in self.faults.take_task_faults(b, self.inc.number))
        if self.groups is None:
            threading.Thread(target=self._job_thread, args=(b, faults), name=f"job-b{b}", daemon=True).start()
            return
        try:
            self.groups.release(b, faults)
        except BaseException as exc:  # noqa: BLE001
            self._fail(exc)

    def _job_thread(self, b: int, faults: tuple[IndexedFault, ...]) -> None:
        if self.stopping:
            return   # the incarnation ended before its job was submitted: submit nothing
        try:
            results = self.jobs.run_batch(b, faults)
        except BaseException as exc:  # noqa: BLE001
            self.job_failed(f"batch {b}", exc)
            return
        if self.stopping and len(results) < self.inc.parts:
            return   # the incarnation ended while its job ran, and some of its tasks ran nothing (task.py)
        self.finish_results(b, results)

    def job_failed(self, what: str, exc: BaseException) -> None:
        """A job failed: because a task crashed the driver, found a damaged file, or failed for good."""
        where = self.inc.coordination
        with self.cond:
            if self.failure is None:
                if where.crash().exists():
                    self.failure = DriverCrash(where.crash().read_text())
                elif where.fatal().exists():
                    self.failure = CheckpointFormatError(where.fatal().read_text())
                else:
                    self.failure = QueryFailure(f"job of {what} failed: {first_line(exc)}")
            self.cond.notify_all()

    def finish_results(self, b: int, results: list[TaskResult]) -> None:
        inc = self.inc
        for res in results:
            inc.results[(b, res["partition"])] = res
            inc.engine.task_log.append(res)
        try:
            self._check_lineage(b, results)
            self._finish_task_nodes(b)
        except BaseException as exc:  # noqa: BLE001
            self._fail(exc)

    def _check_lineage(self, b: int, results: list[TaskResult]) -> None:
        """A pipelined task read its input version's lineage itself: it must be the committed one."""
        for res in results:
            p = res["partition"]
            for sid, uid in res["lineage_in"].items():
                expected = self.inc.lineage.get((sid, p, b))
                if b > self.inc.restart.first_batch and expected is not None and uid != expected:
                    raise QueryFailure(f"batch {b} partition {p} built on {sid} version {b} of attempt {uid!r}, "
                                       f"but attempt {expected!r} committed it")

    def _finish_task_nodes(self, b: int) -> None:
        """The job's tasks ended: their foreground nodes are done; background ones are watched."""
        inc = self.inc
        watched = []
        for node_id in sorted(self.task_nodes[b], key=lambda n: (n.order, n.partition)):
            if inc.nodes[node_id].background:
                watched.append(node_id.partition)   # finished by the async state watcher
                continue
            inc.run_step(node_id)
            self._mark_done([node_id])
        with self.cond:
            self.async_state.watch(b, set(watched))
            self.cond.notify_all()

    def _poll_async_state(self) -> None:
        """Finish the background state commits the tasks reported (called holding ``cond``)."""
        finished, failure = self.async_state.poll()
        self.done.update(finished)
        self.failure = self.failure or failure


class Lane:
    """A background thread that runs one kind of background step in order (async log writer, purger)."""

    def __init__(self, name: str):
        self.queue: queue.Queue[Callable[[], None] | None] = queue.Queue()
        self.thread = threading.Thread(target=self._loop, name=f"lane-{name}", daemon=True)
        self.thread.start()

    def submit(self, fn: Callable[[], None]) -> None:
        self.queue.put(fn)

    def _loop(self) -> None:
        while True:
            fn = self.queue.get()
            if fn is None:
                return
            fn()

    def stop(self) -> None:
        self.queue.put(None)


def first_line(exc: BaseException) -> str:
    """The message a failed job's exception carries from its task, in one line."""
    text = str(exc)
    for marker in ERROR_MARKERS:
        if marker in text:
            return text.split(marker, 1)[1].splitlines()[0][:300]
    return text.splitlines()[0][:300] if text else type(exc).__name__
