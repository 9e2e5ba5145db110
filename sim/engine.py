"""The protocol of SPEC section 2 with time: one incarnation's step graph, executed on the cluster.

The step graph is the reference's (``reference.engine.Incarnation._build_graph``:
one node per (step, batch, partition) and the dependency edges of every mode),
built here one batch at a time so batch boundaries can be decided by the
simulated clock and cluster-scale runs stay small in memory. A node runs when
its dependencies are done, on the component that owns it:

- driver steps on the micro-batch thread, background log writes on the async
  log writer, background purges on the async purger (``driver.py``);
- a task's foreground steps back to back in one task slot, launched once the
  dependencies of its ``state_load`` and ``task_apply`` are met (so a task never
  holds a slot while it waits for another task); background changelog writes,
  state commits and snapshot uploads on the executor's threads (``executor.py``).

A step takes the time the cost model charges and its effect (the reference's
step function: real records and files in data mode, counts in volume mode)
lands when the time is over. A crash in the middle of a step therefore loses
the step, as a crash of a real process would. Faults at a step use the
reference's matching and handling (``reference.runner``); faults at a time
are in ``faults.py``.
"""

from __future__ import annotations

from typing import Any, Generator, Iterable

import numpy as np
import simpy

from reference.engine import DriverCrash, Incarnation, NodeId, QueryFailure, TaskAttemptFailed
from reference.runner import Executor as FaultApplier
from reference.runner import FaultBook
from reference.steps import TASK_STEPS
from reference.storage import CheckpointFormatError, StorageError

from .cost_model import Profile
from .driver import Driver
from .executor import Executor
from .network import Network
from .storage_service import StorageService
from .trace import Trace

RESTARTABLE = (DriverCrash, QueryFailure, TaskAttemptFailed, StorageError)
PRUNE_LAG_BATCHES = 3          # nodes of batches this far behind a finished batch are dropped
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
                 rng: np.random.Generator, **kwargs: Any):
        self.clock, self.profile, self.service, self.rng = clock, profile, storage_service, rng
        self._graph_open = False
        self._new_nodes: list[NodeId] = []
        self.timing: dict[tuple[str, int], tuple[float, float]] = {}   # (step, batch) -> (start, end)
        self.first_task_ms: dict[int, float] = {}
        self.last_plan_start_ms: float | None = None
        self.written_sealed: dict[tuple[int, int], dict[str, Any]] = {}
        super().__init__(*args, **kwargs)

    # ------------------------------------------------------------- graph
    def _build_graph(self) -> None:
        if self._graph_open:
            super()._build_graph()

    def _add(self, step: str, batch: int, deps: Any, run: Any, partition: int = -1, background: bool = False,
             tag: str = "") -> NodeId:
        node_id = super()._add(step, batch, deps, run, partition, background, tag)
        self._new_nodes.append(node_id)
        return node_id

    def build_batch(self, b: int) -> list[NodeId]:
        """Add batch ``b``'s nodes (their edges reach back to earlier batches only)."""
        every_plan = self.plans
        self.plans, self._new_nodes, self._graph_open = {b: every_plan[b]}, [], True
        try:
            self._build_graph()
        finally:
            self.plans, self._graph_open = every_plan, False
        return self._new_nodes

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
        if node_id.partition < 0:
            self.timing[(node_id.step, node_id.batch)] = (start_ms, self.clock.now)
        elif node_id.step in ("state_load", "task_apply"):
            first = self.first_task_ms.get(node_id.batch)
            if first is None or start_ms < first:
                self.first_task_ms[node_id.batch] = start_ms

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
    """Executes one incarnation's step graph on a fresh driver and fresh executors."""

    def __init__(self, env: simpy.Environment, inc: TimedIncarnation, faults: FaultBook, trace: Trace,
                 check_invariants: bool = True):
        self.env, self.inc, self.trace = env, inc, trace
        self.profile = inc.profile
        self.network = Network(inc.profile.network_rtt_ms)
        self.stopped = False
        self.finished = env.event()
        self.check_invariants = check_invariants
        self.done: set[NodeId] = set()
        self.waiting: dict[Any, int] = {}
        self.dependents: dict[NodeId, list[Any]] = {}
        self.task_steps: dict[tuple[int, int], list[NodeId]] = {}
        self.task_owned: set[NodeId] = set()
        self.batch_nodes: dict[int, list[NodeId]] = {}
        self.outstanding = 0
        self.driver = Driver(env, self)
        self.executors = [Executor(env, i, inc.profile.cores_per_executor, self)
                          for i in range(inc.profile.executors)]
        self.applier = FaultApplier(inc, faults, None)
        self.faults = faults

    def start(self) -> None:
        self.add_batch(self.inc.restart.first_batch)

    # ------------------------------------------------------------- graph
    def add_batch(self, b: int) -> None:
        inc = self.inc
        new = inc.build_batch(b)
        self.batch_nodes[b] = list(new)
        self.outstanding += len(new)
        fresh = set(new)
        gates = []
        for p in range(inc.parts):
            steps = [nid for nid in (inc.nid(s, b, p) for s in TASK_STEPS)
                     if nid in fresh and not inc.nodes[nid].background]
            if not steps:
                continue
            self.task_steps[(b, p)] = steps
            self.task_owned.update(steps)
            apply = inc.nid("task_apply", b, p)
            external = (set(inc.nodes[steps[0]].deps) | set(inc.nodes[apply].deps)) - set(steps)
            gates.append((("launch", b, p), external))
        for node_id in new:
            self.register(node_id, inc.nodes[node_id].deps)
        for key, deps in gates:
            self.register(key, deps)

    def register(self, key: Any, deps: Iterable[NodeId]) -> None:
        missing = [d for d in deps if d not in self.done and d in self.inc.nodes]
        for d in missing:
            self.dependents.setdefault(d, []).append(key)
        if missing:
            self.waiting[key] = len(missing)
        else:
            self.ready(key)

    def ready(self, key: Any) -> None:
        if self.stopped:
            return
        inc = self.inc
        if isinstance(key, tuple):
            _launch, b, p = key
            executor = self.executors[inc.slot_executor_of(p)]
            executor.launch_task(self.task_steps.pop((b, p)),
                                 self.profile.scheduling_delay_ms + self.network.one_way_ms)
            return
        if key in self.task_owned:
            return
        node = inc.nodes[key]
        if key.partition >= 0:
            self.executors[inc.slot_executor_of(key.partition)].submit_background(key)
        elif key.step == "plan":
            wait_ms = inc.plan_ready_ms(key.batch) - self.env.now
            if wait_ms > 0:
                self.env.timeout(wait_ms).callbacks.append(lambda _e, k=key: self._submit_driver(k, False))
            else:
                self._submit_driver(key, False)
        else:
            self._submit_driver(key, node.background)

    def _submit_driver(self, key: NodeId, background: bool) -> None:
        if not self.stopped:
            self.driver.submit(key, background)

    def complete(self, node_id: NodeId) -> None:
        self.done.add(node_id)
        self.task_owned.discard(node_id)
        self.outstanding -= 1
        assert self.outstanding >= 0, "a node completed twice"
        for key in self.dependents.pop(node_id, ()):
            left = self.waiting[key] - 1
            if left:
                self.waiting[key] = left
            else:
                del self.waiting[key]
                self.ready(key)
        if node_id.step == "plan" and self.inc.has_batch(node_id.batch + 1):
            self.add_batch(node_id.batch + 1)
        elif node_id.step == "source_commit":
            self.prune(node_id.batch - PRUNE_LAG_BATCHES)
        if self.outstanding == 0 and not self.stopped:
            self.applier.land_zombies(None)
            self.stop(None)

    def prune(self, upto: int) -> None:
        """Forget finished nodes of old batches; edges to them are no longer needed."""
        inc = self.inc
        for b in [x for x in self.batch_nodes if x <= upto]:
            keep = []
            for nid in self.batch_nodes.pop(b):
                if nid in self.done:
                    del inc.nodes[nid]
                    if not self.check_invariants:
                        self.done.discard(nid)
                else:
                    keep.append(nid)
            if keep:
                self.batch_nodes[upto + 1] = self.batch_nodes.get(upto + 1, []) + keep
            for p in range(inc.parts):
                inc.tasks.pop((b, p), None)

    def stop(self, exc: BaseException | None, fatal: bool = False) -> None:
        if self.stopped:
            return
        self.stopped = True
        self.finished.succeed((exc, fatal))

    # -------------------------------------------------------------- step
    def component_of(self, node_id: NodeId) -> str:
        node = self.inc.nodes[node_id]
        if node_id.partition < 0:
            return "driver.async" if node.background else "driver"
        executor = f"executor-{self.inc.slot_executor_of(node_id.partition)}"
        return f"{executor}.background" if node.background else executor

    def run_step(self, node_id: NodeId) -> Generator:
        """Charge the step's cost, then apply its effect; faults before and after it (SPEC section 2)."""
        if self.stopped:
            return
        inc, env = self.inc, self.env
        node = inc.nodes[node_id]
        if self.check_invariants:
            assert all(d in self.done for d in node.deps if d in inc.nodes), f"{node_id} ran before its deps"
        start_ms = env.now
        try:
            extra_ms, skip = self.apply_faults(node_id, "before")
            inc.begin_step(node_id)
            cost_ms = inc.cost_ms(node_id) + extra_ms
            if node_id.step in STORAGE_STEPS:
                cost_ms += inc.service.spike_wait_ms(start_ms)
            assert cost_ms >= 0, f"{node_id}: negative cost {cost_ms}"
            yield env.timeout(cost_ms)
            if self.stopped:
                return
            if not skip:
                node.run()
            inc.end_step(node_id, start_ms)
            if self.trace.enabled:
                self.trace.record(env.now, self.component_of(node_id), str(node_id), f"start={start_ms:.3f}")
            else:
                self.trace.count += 1
            after_ms, _ = self.apply_faults(node_id, "after")
            if after_ms:
                yield env.timeout(after_ms)
                if self.stopped:
                    return
            self.complete(node_id)
            self.applier.land_zombies(node_id)
        except RESTARTABLE as exc:
            self.trace.record(env.now, "driver", "stopped", str(exc))
            self.stop(exc)
        except CheckpointFormatError as exc:
            self.trace.record(env.now, "driver", "failed", str(exc))
            self.stop(exc, fatal=True)

    def apply_faults(self, node_id: NodeId, when: str) -> tuple[float, bool]:
        """Faults of the scenario matching this step (reference matching); extra time and skip flag."""
        if not self.faults.pending:
            return 0.0, False
        extra_ms, skip = 0.0, False
        for fault in self.faults.take(node_id, when, self.inc.logical_time_ms(node_id.batch), self.inc.number):
            self.trace.record(self.env.now, "faults", fault.kind, f"{when} {node_id}")
            if fault.kind == "storage_latency":
                extra_ms += fault.ms or 0
            elif fault.kind in TASK_FAULT_KINDS and node_id.step in TASK_STEPS \
                    and not self.inc.nodes[node_id].background:
                extra_ms += self.inc.retry_cost_ms(fault.kind)
            skip = self.applier.apply(fault, node_id, when) or skip
        return extra_ms, skip
