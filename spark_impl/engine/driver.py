"""The driver side of the engine: the reference's step graph, executed concurrently on a Spark cluster.

The protocol is the reference's (``reference.engine.Incarnation``): the same
batch plans, logs, lineage, purge, sink manifests and recovery, and the same
dependency edges between steps for every mode. What differs is execution:

- driver steps run on the driver thread as soon as their dependencies are done;
- background driver steps (async offset/commit log writes, async purge) run on
  their own threads, so they are off the micro-batch's critical path;
- the task steps of one batch run as one Spark job (one task per state
  partition, see ``task.py``), submitted from its own thread under the FAIR
  scheduler. With pipelining a batch's job is submitted while the previous
  batch's job still runs; a task then waits on the executor for its own
  partition of the previous batch, which is the per-partition ordering of the
  graph. Dependencies across partitions (a watermark needs every partition's
  event-time maximum) still wait on the driver;
- under async state checkpointing a task returns before its state commit;
  the driver watches the checkpoint directory for the changelog (the
  ``changelog_write``/``state_commit`` nodes finish then), and a failed
  background commit fails the query, as in Spark.

Group scheduling (``EngineContext.group`` = G > 1), in the manner of Drizzle
(SOSP'17): one Spark job runs the task steps of G consecutive batches, so the
per-job cost of Spark's scheduler is paid once per group instead of once per
batch. Each task of a group job runs its partition's batches in order; before
each batch it waits for the driver to release that batch (``go/<b>``, written
when the batch's task steps are ready in the graph, exactly when the job of
that batch would otherwise be submitted), and after it the task reports its
result in a file (``result/<b>/<p>``) instead of through ``collect``. The
driver submits the job of group g+1 the moment the job of group g ends, so
its tasks are usually waiting before their first batch's input has arrived
(see ``_groups_thread`` for why not earlier). A group job holds one slot per
partition for its whole life, so it needs at least as many task slots as
state partitions.

Task-step faults travel with the job and fire on the executor (``task.py``);
driver-step faults fire here with the reference's matching and handling.
"""

from __future__ import annotations

import json
import os
import pickle
import signal
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from reference.engine import DriverCrash, Incarnation, NodeId, QueryFailure
from reference.query import PartitionResult
from reference.runner import Executor as FaultApplier
from reference.runner import FaultBook
from reference.steps import TASK_STEPS
from reference.storage import CheckpointFormatError

from .locality import Placement
from .task import TaskFault, TaskSpec, group_entry, task_entry

STATE_WATCH_TIMEOUT_S = 60.0
RESULT_POLL_S = 0.002
FOREGROUND_TASK_STEPS = ("state_load", "task_apply", "sink_write")


@dataclass
class EngineContext:
    """What outlives one incarnation inside one driver process."""

    spark: Any
    root: str
    coord: str
    local_root: str
    kill_driver: bool = False            # driver_crash by SIGKILL (a supervisor restarts the process)
    pace: bool = True                    # plan a batch only once its input has arrived (wall clock)
    t0: float = field(default_factory=time.time)  # wall time of the scenario's time 0
    listeners: list[Any] = field(default_factory=list)
    visible: dict[tuple[int, int], float] = field(default_factory=dict)  # record -> first visible (wall s)
    task_log: list[dict[str, Any]] = field(default_factory=list)
    on_step: Callable[[str], None] | None = None   # called after each driver step (journal for SIGKILL mode)
    straggler: tuple[float, float, int] | None = None  # synthetic slow tasks: (probability, extra ms, seed)
    group: int = 1                       # batches per Spark job (group scheduling when > 1)
    jobs: int = 0                        # Spark jobs submitted (every incarnation)
    placement: Placement = field(init=False)   # where each partition ran last (preferred locations)

    def __post_init__(self) -> None:
        self.placement = Placement(self.spark)


class SparkIncarnation(Incarnation):
    """One driver lifetime on Spark. Task-step effects happen on executors; see the module docstring."""

    def __init__(self, *args: Any, engine: EngineContext, **kwargs: Any):
        self.engine = engine
        self.epoch = f"{os.getpid()}-{time.time_ns()}"
        self.results: dict[tuple[int, int], dict[str, Any]] = {}
        self.job_state: dict[str, str] = {}   # job label (batch or group) -> "submitted" | "ended"
        self.batch_timing: dict[int, dict[str, float]] = defaultdict(dict)
        super().__init__(*args, **kwargs)

    # Task steps do their work on executors; on the driver they only record what the job returned.
    def step_state_load(self, b: int, p: int) -> None:
        pass

    def step_task_apply(self, b: int, p: int) -> None:
        res = self.results[(b, p)]
        task = self.task(b, p)
        task.result = PartitionResult({}, [], res["max_event_ms"])
        task.attempt = res["attempt"]

    def step_changelog_write(self, b: int, p: int) -> None:
        pass

    def step_state_commit(self, b: int, p: int) -> None:
        res = self.results[(b, p)]
        for sid, uid in res["lineage_out"].items():
            self.lineage[(sid, p, b + 1)] = uid

    def step_snapshot_upload(self, b: int, p: int) -> None:
        pass  # the executor's maintenance pool uploads snapshots in the background

    def step_sink_write(self, b: int, p: int) -> None:
        self.task(b, p).sink_file = self.results[(b, p)]["sink_file"]

    def uid(self, b: int, p: int) -> str:
        res = self.results.get((b, p))
        return res["uid"] if res else super().uid(b, p)

    # ------------------------------------------------------------ timing
    def step_plan(self, b: int) -> None:
        if self.engine.pace:
            ready = self.input_ready_s(b)
            delay = ready - time.time()
            if delay > 0:
                time.sleep(delay)
        self.batch_timing[b]["plan"] = time.time()
        super().step_plan(b)

    def input_ready_s(self, b: int) -> float:
        """Wall time at which the last record of batch ``b`` has arrived."""
        plan = self.plans[b]
        last = 0
        for sp, (lo, hi) in enumerate(zip(plan.start, plan.end)):
            if hi > lo:
                last = max(last, self.data.partitions[sp][hi - 1].arrival_ms)
        return self.engine.t0 + last / 1000.0

    def step_sink_commit(self, b: int) -> None:
        super().step_sink_commit(b)
        now = time.time()
        self.batch_timing[b]["sink_commit"] = now
        plan = self.plans[b]
        visible = self.engine.visible
        for record in self.data.slice(plan.start, plan.end):
            visible.setdefault((record.source_partition, record.offset), now)

    def step_source_commit(self, b: int) -> None:
        self.batch_timing[b]["source_commit"] = time.time()
        super().step_source_commit(b)
        event = self.obs.progress[-1]
        for listener in self.engine.listeners:
            listener.onQueryProgress(event)

    def progress_event(self, b: int) -> dict[str, Any]:
        """A StreamingQueryProgress-shaped record with the batch's measured durations."""
        plan, timing = self.plans[b], self.batch_timing[b]
        rows = sum(e - s for s, e in zip(plan.start, plan.end))
        start = timing.get("plan", time.time())
        end = timing.get("source_commit", time.time())
        results = [self.results[(b, p)] for p in range(self.parts) if (b, p) in self.results]
        operators = []
        for sid in self.store_ids:
            per_part = [r["changes"].get(sid, [0, 0, 0]) for r in results]
            operators.append({"operatorName": sid, "numRowsTotal": sum(c[2] for c in per_part),
                              "numRowsUpdated": sum(c[0] for c in per_part),
                              "numRowsRemoved": sum(c[1] for c in per_part),
                              "commitTimeMs": round(max((r["timings_ms"].get("state_commit", 0.0)
                                                         for r in results), default=0.0), 3),
                              "memoryUsedBytes": 0})
        job = timing.get("job_end", start) - timing.get("job_start", start)
        durations = {"latestOffset": 0, "walCommit": round((timing.get("offsets_done", start) - start) * 1e3, 3),
                     "queryPlanning": 0, "addBatch": round(job * 1e3, 3),
                     "commitOffsets": round((end - timing.get("sink_commit", end)) * 1e3, 3),
                     "triggerExecution": round((end - start) * 1e3, 3)}
        seconds = max(end - start, 1e-9)
        return {"batchId": b, "numInputRows": rows, "inputRowsPerSecond": 0.0,
                "processedRowsPerSecond": round(rows / seconds, 3), "durationMs": durations,
                "stateOperators": operators, "timestamp": start, "cacheHits": sum(r["cache_hits"] for r in results)}

    def step_commit_log_write(self, b: int) -> None:
        super().step_commit_log_write(b)
        marker = Path(self.engine.coord, self.epoch, "committed", str(b))  # zombie writers land after this
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text("")

    def wait_for_zombies(self, timeout_s: float = 30.0) -> None:
        """Let every planted zombie write land before the incarnation is judged (they land late, not never)."""
        folder = Path(self.engine.coord, self.epoch, "zombies")
        deadline = time.monotonic() + timeout_s
        while folder.exists() and time.monotonic() < deadline:
            if all(f.read_text() == "landed" for f in folder.iterdir() if not f.name.startswith(".")):
                return
            time.sleep(0.005)

    def step_offset_log_write(self, b: int) -> None:
        super().step_offset_log_write(b)
        self.batch_timing[b]["offsets_done"] = time.time()

    # ------------------------------------------------------------ jobs
    def task_spec(self, b: int, faults: tuple[TaskFault, ...]) -> TaskSpec:
        plan = self.plans[b]
        lineage_in = {(sid, p): self.lineage[(sid, p, b)] for sid in self.store_ids for p in range(self.parts)
                      if (sid, p, b) in self.lineage}
        maintenance = self.cfg.provider != "snapshot" and (b + 1) % self.maintenance_every() == 0
        from reference.query import watermarks_of
        return TaskSpec(self.sc, self.engine.root, self.engine.coord, self.engine.local_root, self.epoch,
                        self.number, b, tuple(plan.start), tuple(plan.end),
                        tuple(watermarks_of(self.trackers_for(b))), lineage_in, self.restart.first_batch,
                        maintenance, faults, os.getpid(), self.engine.kill_driver, self.engine.straggler)

    def run_job(self, b: int, faults: tuple[TaskFault, ...]) -> list[dict[str, Any]]:
        """The Spark job of batch ``b``: one task per partition, results through ``collect``."""
        spec = self.task_spec(b, faults)
        previous = str(b - 1) if b - 1 in self.plans and b - 1 >= self.restart.first_batch else None
        self.batch_timing[b]["job_start"] = time.time()
        out = self._collect(str(b), f"batch {b}", previous, task_entry(spec))
        self.batch_timing[b]["job_end"] = time.time()
        return out

    def run_group_job(self, g: int, batches: tuple[int, ...]) -> None:
        """The Spark job of group ``g``: each task runs its partition of ``batches`` as they are released."""
        # what every batch of the group shares; each batch's own fields come with its release
        base = TaskSpec(self.sc, self.engine.root, self.engine.coord, self.engine.local_root, self.epoch,
                        self.number, batches[0], (), (), (), first_batch=self.restart.first_batch,
                        driver_pid=os.getpid(), kill_driver=self.engine.kill_driver, straggler=self.engine.straggler)
        self._collect(f"g{g}", f"batches {batches[0]}-{batches[-1]}", None, group_entry(base, batches))

    def release_batch(self, b: int, faults: tuple[TaskFault, ...]) -> None:
        """Group scheduling: hand batch ``b`` to the tasks of its (already submitted) group job."""
        spec = replace(self.task_spec(b, faults), scenario=None)
        self.batch_timing[b]["job_start"] = time.time()
        path = Path(self.engine.coord, self.epoch, "go", str(b))
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{b}.tmp")
        tmp.write_bytes(pickle.dumps(spec))
        os.replace(tmp, path)

    def _collect(self, label: str, description: str, previous: str | None, fn: Any) -> list[dict[str, Any]]:
        sc = self.engine.spark.sparkContext
        sc.setLocalProperty("spark.scheduler.pool", "lightspeed")
        sc.setJobGroup(f"{self.epoch}:{label}", description, interruptOnCancel=True)
        sc.addJobTag(self.epoch)
        if previous is not None:
            self._wait_for_job(previous)
        self.job_state[label] = "submitted"
        self.engine.jobs += 1
        try:
            return self.engine.placement.rdd(self.parts).mapPartitionsWithIndex(fn).collect()
        finally:
            self.job_state[label] = "ended"
            self.engine.placement.ran(f"{self.epoch}:{label}")

    def _wait_for_job(self, label: str) -> None:
        """Submit jobs in batch order, so the scheduler (FIFO within the pool) runs every task of batch
        b-1 before any of batch b: a pipelined task that waits on the executor for its partition of
        the previous batch then never holds the slot that task needs."""
        tracker = self.engine.spark.sparkContext.statusTracker()
        deadline = time.monotonic() + 60.0
        while self.job_state.get(label) is None or \
                (self.job_state[label] != "ended" and not tracker.getJobIdsForGroup(f"{self.epoch}:{label}")):
            if time.monotonic() > deadline:
                raise QueryFailure(f"the job of {label} was never submitted")
            time.sleep(0.002)


class ClaimingFaultBook(FaultBook):
    """The reference's fault book, where firing a fault claims a marker file: each fault fires once
    even across driver processes (a fault that killed the driver must not kill its successor)."""

    def __init__(self, faults: tuple[Any, ...], coord: str):
        super().__init__(faults)
        self.all = tuple(faults)
        self.dir = Path(coord, "faults")
        self.pending = [f for f in self.pending if not (self.dir / str(self.index(f))).exists()]

    def index(self, fault: Any) -> int:
        return next(i for i, f in enumerate(self.all) if f is fault)

    def claim(self, fault: Any) -> bool:
        self.dir.mkdir(parents=True, exist_ok=True)
        try:
            os.close(os.open(self.dir / str(self.index(fault)), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            return True
        except FileExistsError:
            return False

    def take(self, node: NodeId, when: str, time_ms: int, life: int) -> list[Any]:
        return [f for f in super().take(node, when, time_ms, life) if self.claim(f)]


class GraphRunner:
    """Executes an incarnation's step graph with real concurrency (see the module docstring)."""

    def __init__(self, inc: SparkIncarnation, faults: ClaimingFaultBook):
        self.inc, self.faults = inc, faults
        self.applier = FaultApplier(inc, faults, None)
        self.cond = threading.Condition()
        self.done: set[NodeId] = set()
        self.order: list[NodeId] = []
        self.failure: BaseException | None = None
        self.submitted: set[int] = set()
        self.lanes: dict[str, _Lane] = {}
        self.pending_state: dict[tuple[int, int], float] = {}  # async state commits being watched
        self.task_nodes: dict[int, list[NodeId]] = defaultdict(list)
        self.waiting = [n for n in inc.nodes if n.step not in TASK_STEPS]  # driver nodes not yet started
        self.dependents: dict[NodeId, list[NodeId]] = defaultdict(list)
        for node_id, node in inc.nodes.items():
            if node_id.step in TASK_STEPS:
                self.task_nodes[node_id.batch].append(node_id)
            for dep in node.deps:
                self.dependents[dep].append(node_id)
        # group scheduling: consecutive chunks of this incarnation's batches, one Spark job each
        size = max(1, inc.engine.group)
        batches = sorted(self.task_nodes)
        self.groups = [tuple(batches[i:i + size]) for i in range(0, len(batches), size)] if size > 1 else []
        self.group_of = {b: g for g, members in enumerate(self.groups) for b in members}
        self.groups_started = False
        self.next_plan_s: float | None = None
        self.released: list[int] = []        # batches handed to group jobs, whose results are awaited
        self.stopping = False

    # ------------------------------------------------------------ main loop
    def run(self) -> None:
        inc = self.inc
        if self.groups:
            threading.Thread(target=self._results_loop, name="group-results", daemon=True).start()
        try:
            while True:
                with self.cond:
                    self._check_failure()
                    if len(self.done) == len(inc.nodes):
                        break
                    ready = self._ready_driver_nodes()
                    jobs = self._ready_jobs()
                    if not ready and not jobs:
                        self.cond.wait(self._idle_wait_s())
                        self._poll_async_state()
                        continue
                for b in jobs:
                    self._submit_job(b)
                for node_id in ready:
                    node = inc.nodes[node_id]
                    if node.background:
                        self._lane(node_id.step).submit(lambda n=node_id: self._run_driver_node(n))
                    else:
                        self._run_driver_node(node_id)
                    self._check_failure()
        finally:
            self.stopping = True
            for lane in self.lanes.values():
                lane.stop()
            stop = Path(inc.engine.coord, inc.epoch, "stop")
            stop.parent.mkdir(parents=True, exist_ok=True)
            stop.write_text("stopped")
            inc.wait_for_zombies()
            if self.failure is not None or len(self.done) != len(inc.nodes):
                inc.engine.spark.sparkContext.cancelJobsWithTag(inc.epoch)

    def _check_failure(self) -> None:
        crash = Path(self.inc.engine.coord, self.inc.epoch, "crash")
        if self.failure is None and crash.exists():
            self.failure = DriverCrash(crash.read_text())
        if self.failure is not None:
            if isinstance(self.failure, DriverCrash) and self.inc.engine.kill_driver:
                os.kill(os.getpid(), signal.SIGKILL)  # the driver process dies here, as a real crash
            raise self.failure

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
            if node_id.step == "plan":
                ready_s = self._input_ready_s(node_id.batch)
                if ready_s > now:
                    self.next_plan_s = ready_s if self.next_plan_s is None else min(self.next_plan_s, ready_s)
                    continue
            out.append(node_id)
        if out:
            started = set(out)
            self.waiting = [n for n in self.waiting if n not in started]
        return out

    def _input_ready_s(self, b: int) -> float:
        return self.inc.input_ready_s(b) if self.inc.engine.pace else 0.0

    def _idle_wait_s(self) -> float:
        """How long the main loop may sleep: until the next paced plan, or a short poll for async commits."""
        wait = 0.005 if self.pending_state else 0.05
        if self.next_plan_s is not None:
            wait = min(wait, max(0.0, self.next_plan_s - time.time()))
        return wait

    def _ready_jobs(self) -> list[int]:
        """Batches whose job can be submitted now (in batch order)."""
        out = []
        pipelining = self.inc.cfg.pipelining
        for b in sorted(self.task_nodes):
            if b in self.submitted:
                continue
            ok = True
            for node_id in self.task_nodes[b]:
                for dep in self.inc.nodes[node_id].deps:
                    if dep in self.done or (dep.step in TASK_STEPS and dep.batch == b):
                        continue
                    # pipelining: the same partition's task of an earlier, already submitted batch is
                    # ordered on the executor
                    if pipelining and dep.step in FOREGROUND_TASK_STEPS + ("changelog_write", "state_commit") \
                            and dep.partition == node_id.partition and dep.batch in self.submitted \
                            and not self.inc.nodes[dep].background:
                        continue
                    ok = False
                    break
                if not ok:
                    break
            if ok:
                self.submitted.add(b)
                out.append(b)
            else:
                break
        return out

    def _run_driver_node(self, node_id: NodeId) -> None:
        try:
            self.applier.run_node(node_id)
        except BaseException as exc:  # noqa: BLE001 - handed to the main loop
            self._fail(exc)
            return
        hook = self.inc.engine.on_step
        if hook is not None:
            hook(str(node_id))
        self._mark_done([node_id])

    def _mark_done(self, node_ids: list[NodeId]) -> None:
        with self.cond:
            for node_id in node_ids:
                self.done.add(node_id)
                self.order.append(node_id)
            self.cond.notify_all()

    def _lane(self, step: str) -> "_Lane":
        name = "purge" if step == "purge" else "log"
        if name not in self.lanes:
            self.lanes[name] = _Lane(name)
        return self.lanes[name]

    # ------------------------------------------------------------ jobs
    def _submit_job(self, b: int) -> None:
        faults = self._task_faults(b)
        if self.groups:
            if not self.groups_started:
                self.groups_started = True
                threading.Thread(target=self._groups_thread, name="group-jobs", daemon=True).start()
            try:
                self.inc.release_batch(b, faults)
            except BaseException as exc:  # noqa: BLE001
                self._fail(exc)
                return
            with self.cond:
                self.released.append(b)
            return
        thread = threading.Thread(target=self._job_thread, args=(b, faults), name=f"job-b{b}", daemon=True)
        thread.start()

    def _fail(self, exc: BaseException) -> None:
        with self.cond:
            self.failure = self.failure or exc
            self.cond.notify_all()

    def _job_failed(self, what: str, exc: BaseException) -> None:
        with self.cond:
            if self.failure is None:
                crash = Path(self.inc.engine.coord, self.inc.epoch, "crash")
                fatal = Path(self.inc.engine.coord, self.inc.epoch, "fatal")
                if crash.exists():
                    self.failure = DriverCrash(crash.read_text())
                elif fatal.exists():   # a task found a damaged checkpoint file
                    self.failure = CheckpointFormatError(fatal.read_text())
                else:
                    self.failure = QueryFailure(f"job of {what} failed: {_first_line(exc)}")
            self.cond.notify_all()

    def _groups_thread(self) -> None:
        """Run the group jobs one after the other, each submitted the moment the previous one ends.

        The next group's job is not submitted earlier (Drizzle would pre-schedule it): when a task
        fails, Spark frees its slot before it re-queues the retry, and a task of a newer job that
        takes the slot then waits for a batch that needs the retry, which cannot get a slot.
        """
        for g, batches in enumerate(self.groups):
            try:
                self.inc.run_group_job(g, batches)
            except BaseException as exc:  # noqa: BLE001
                if not self.stopping:
                    self._job_failed(f"batches {batches[0]}-{batches[-1]}", exc)
                return
            if self.stopping or self.failure is not None:
                return

    def _results_loop(self) -> None:
        """Group scheduling: finish a released batch's task nodes once every partition reported."""
        inc = self.inc
        folder = Path(inc.engine.coord, inc.epoch, "result")
        while not self.stopping and self.failure is None:
            with self.cond:
                waiting = list(self.released)
            for b in waiting:
                try:
                    names = os.listdir(folder / str(b))
                except FileNotFoundError:
                    continue
                if sum(1 for n in names if not n.startswith(".")) < inc.parts:
                    continue
                results = [json.loads((folder / str(b) / str(p)).read_text()) for p in range(inc.parts)]
                with self.cond:
                    self.released.remove(b)
                self.inc.batch_timing[b]["job_end"] = time.time()
                self._finish_results(b, results)
            time.sleep(RESULT_POLL_S)

    def _task_faults(self, b: int) -> tuple[TaskFault, ...]:
        """Take this batch's task-step faults out of the book; they fire on the executors."""
        out = []
        for fault in list(self.faults.pending):
            at = fault.at
            if at.step in TASK_STEPS and at.batch == b and (at.restart is None or at.restart == self.inc.number):
                if fault.kind == "clock_skew":
                    continue  # the driver's clock: applied by the node runner
                out.append(TaskFault(self.faults.index(fault), fault.kind, at.step, at.when, at.partition,
                                     fault.ms, fault.path))
                self.faults.pending.remove(fault)
        return tuple(out)

    def _job_thread(self, b: int, faults: tuple[TaskFault, ...]) -> None:
        try:
            results = self.inc.run_job(b, faults)
        except BaseException as exc:  # noqa: BLE001
            self._job_failed(f"batch {b}", exc)
            return
        self._finish_results(b, results)

    def _finish_results(self, b: int, results: list[dict[str, Any]]) -> None:
        inc = self.inc
        for res in results:
            inc.results[(b, res["partition"])] = res
            inc.engine.task_log.append(res)
        try:
            self._check_lineage(b, results)
            self._finish_task_nodes(b)
        except BaseException as exc:  # noqa: BLE001
            self._fail(exc)

    def _check_lineage(self, b: int, results: list[dict[str, Any]]) -> None:
        """A pipelined task read its input version's lineage itself: it must be the committed one."""
        for res in results:
            p = res["partition"]
            for sid, uid in res["lineage_in"].items():
                expected = self.inc.lineage.get((sid, p, b))
                if b > self.inc.restart.first_batch and expected is not None and uid != expected:
                    raise QueryFailure(f"batch {b} partition {p} built on {sid} version {b} of attempt {uid!r}, "
                                       f"but attempt {expected!r} committed it")

    def _finish_task_nodes(self, b: int) -> None:
        inc = self.inc
        async_state = inc.cfg.state_checkpoint == "async"
        for node_id in sorted(self.task_nodes[b], key=lambda n: (n.order, n.partition)):
            node = inc.nodes[node_id]
            if async_state and node_id.step in ("changelog_write", "state_commit"):
                continue  # finished by the checkpoint watcher
            if node_id.step == "snapshot_upload":
                self._mark_done([node_id])
                continue
            node.run()
            self._mark_done([node_id])
        if async_state:
            with self.cond:
                for p in range(inc.parts):
                    if inc.nid("state_commit", b, p) in inc.nodes:
                        self.pending_state[(b, p)] = time.monotonic()
                self.cond.notify_all()

    def _poll_async_state(self) -> None:
        """Finish the background state commits whose changelogs reached the checkpoint."""
        inc = self.inc
        for (b, p), since in list(self.pending_state.items()):
            status = Path(inc.engine.coord, inc.epoch, "async", str(p), str(b))
            if status.exists():
                text = status.read_text()
                if text.startswith("failed"):
                    self.failure = QueryFailure(f"async state commit of batch {b} partition {p} {text}")
                    return
                self.pending_state.pop((b, p))
                for step in ("changelog_write", "state_commit"):
                    node_id = inc.nid(step, b, p)
                    inc.nodes[node_id].run()
                    self.done.add(node_id)
                    self.order.append(node_id)
            elif time.monotonic() - since > STATE_WATCH_TIMEOUT_S:
                self.failure = QueryFailure(f"async state commit of batch {b} partition {p} never finished "
                                            "(its executor may be lost)")
                return


class _Lane:
    """A background thread that runs one kind of background step in order (async log writer, purger)."""

    def __init__(self, name: str):
        import queue
        self.queue: Any = queue.Queue()
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


def _first_line(exc: BaseException) -> str:
    text = str(exc)
    for marker in ("InjectedTaskFailure: ", "RuntimeError: ", "Error: "):
        if marker in text:
            tail = text.split(marker, 1)[1]
            return tail.splitlines()[0][:300]
    return text.splitlines()[0][:300] if text else type(exc).__name__
