"""The protocol of SPEC section 2 as an explicit state machine: one incarnation of a query.

An incarnation is one life of the driver process, from start (or restart) to
the end of input or a crash. It is built as a graph of named steps: one node
per (step, batch, partition), with edges that say what each step must wait for
under the scenario's modes. Any topological order of the graph is a legal
execution; the canonical schedule runs the first ready node in creation order.
Concurrency (pipelining, async progress, async purge, async state
checkpointing, maintenance) is exactly the freedom the graph leaves.

Only ``storage`` survives a crash: the stores cached on executors, the sealed
but unwritten versions and the driver's plans are all in this object and die
with it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from . import layout
from .logs import CommitEntry, OffsetEntry, check_metadata, log_batches, purge_logs, write_metadata
from .operators import State
from .outcome import digest_rows
from .query import (
    PartitionResult,
    advance_trackers,
    initial_trackers,
    pipeline_store_ids,
    route,
    rows_of,
    run_partition,
    sink_rows,
    watermarks_of,
)
from .recovery import RestartPlan
from .scenario import Scenario
from .sources import SourceData
from .state_store import Sealed, StateStore, cleanup_store
from .storage import Storage

LOGICAL_BATCH_MS = 100   # the reference's clock: batch b is planned at b * max(trigger, this)
EXECUTORS = 2            # state partition p lives on executor p % EXECUTORS
MAX_TASK_ATTEMPTS = 4    # spark.task.maxFailures


@dataclass(frozen=True, order=True)
class NodeId:
    batch: int
    order: int       # position of the step within a batch, for the canonical schedule
    step: str
    partition: int = -1
    tag: str = ""

    def __str__(self) -> str:
        part = f" p{self.partition}" if self.partition >= 0 else ""
        tag = f" ({self.tag})" if self.tag else ""
        return f"{self.step} b{self.batch}{part}{tag}"

    def to_json(self) -> list[Any]:
        return [self.step, self.batch, self.partition, self.tag]


class DriverCrash(Exception):
    """The driver process dies: everything but storage is lost."""


class QueryFailure(Exception):
    """The query stops with an error (a failed log write, a lost pending commit). Restartable."""


class TaskAttemptFailed(Exception):
    """A task attempt failed; Spark retries it (up to ``MAX_TASK_ATTEMPTS``)."""


@dataclass
class Node:
    id: NodeId
    deps: tuple[NodeId, ...]
    run: Callable[[], None]
    background: bool = False


@dataclass
class BatchPlan:
    batch: int
    start: tuple[int, ...]
    end: tuple[int, ...]
    rerun: bool = False


@dataclass
class TaskState:
    """One partition's task in one batch: its current attempt and what it produced."""

    attempt: int = 0
    result: PartitionResult | None = None
    sealed: dict[str, Sealed] = field(default_factory=dict)
    sink_file: str | None = None
    written: dict[str, str] = field(default_factory=dict)  # store id -> uid whose changelog is written
    before: dict[str, tuple] = field(default_factory=dict)  # store mementos taken before task_apply
    state_handed_off: bool = False  # async: the background writer owns this attempt's sealed version


@dataclass
class Observer:
    """What an outside observer sees across incarnations (it survives crashes)."""

    batches: dict[int, dict[str, Any]] = field(default_factory=dict)
    recoveries: list[dict[str, Any]] = field(default_factory=list)
    progress: list[dict[str, Any]] = field(default_factory=list)
    events: list[str] = field(default_factory=list)
    attempts: dict[int, int] = field(default_factory=dict)
    deliveries: dict[int, list[str]] = field(default_factory=dict)

    def note(self, text: str) -> None:
        self.events.append(text)


ORDER = {name: i for i, name in enumerate((
    "plan", "offset_log_write", "purge", "state_load", "task_apply", "changelog_write", "state_commit",
    "sink_write", "snapshot_upload", "sink_commit", "commit_log_write", "source_commit", "zombie_write"))}


class Incarnation:
    """One driver lifetime: builds the step graph from a restart plan and executes it."""

    store_class: type[StateStore] = StateStore

    def __init__(self, scenario: Scenario, data: SourceData, storage: Storage, restart: RestartPlan,
                 number: int, observer: Observer):
        self.sc, self.data, self.storage, self.number = scenario, data, storage, number
        self.cfg = scenario.engine
        self.obs = observer
        self.ops = scenario.operator.flatten()
        self.store_ids = pipeline_store_ids(self.ops)
        self.parts = scenario.state_partitions
        self.uses_watermark = any(op.watermark_delay_ms is not None for op in self.ops)
        self.stores: dict[tuple[str, int], StateStore] = {}
        self.tasks: dict[tuple[int, int], TaskState] = {}
        self.trackers: dict[int, list[dict[str, Any]]] = {}
        self.lineage: dict[tuple[str, int, int], str] = {}
        self.persisted_offsets: set[int] = set()
        self.last_persisted_time_ms: int | None = None
        self.clock_skew_ms = 0
        self.plans: dict[int, BatchPlan] = {}
        self.restart = restart
        self._setup(restart)
        self.nodes: dict[NodeId, Node] = {}
        self._build_graph()

    # ------------------------------------------------------------- setup
    def _setup(self, restart: RestartPlan) -> None:
        check_metadata(self.storage, self.sc.query_digest(), self.sc.name)
        if not self.storage.exists(layout.METADATA):
            write_metadata(self.storage, f"query-{self.sc.seed}", self.sc.query_digest(), self.sc.name)
        first = restart.first_batch
        self.trackers[first] = restart.trackers if restart.trackers is not None else initial_trackers(self.ops)
        for sid, per_part in restart.lineage.items():
            for p, uid in per_part.items():
                self.lineage[(sid, int(p), restart.lineage_version)] = uid
        start = restart.start_offsets
        b = first
        totals = tuple(self.data.totals)
        while True:
            if b in restart.fixed_offsets:
                s, e = restart.fixed_offsets[b]
                plan = BatchPlan(b, tuple(s), tuple(e), rerun=True)
            else:
                end = tuple(max(x, y) for x, y in zip(self.data.planned_end_offsets(b), start))
                plan = BatchPlan(b, tuple(start), end)
            self.plans[b] = plan
            start = plan.end
            b += 1
            if start == totals and b > max(restart.fixed_offsets, default=-1):
                break
            if b > first + 10_000:
                raise RuntimeError("planning did not converge on the end of input")

    # ------------------------------------------------------------- graph
    def nid(self, step: str, batch: int, partition: int = -1, tag: str = "") -> NodeId:
        return NodeId(batch, ORDER[step], step, partition, tag)

    def _add(self, step: str, batch: int, deps: Iterable[NodeId | None], run: Callable[[], None],
             partition: int = -1, background: bool = False, tag: str = "") -> NodeId:
        node_id = self.nid(step, batch, partition, tag)
        # a dependency on a step this graph does not have (a batch before the restart, a stateless
        # query's state steps, a batch without maintenance) is already satisfied
        real = tuple(d for d in deps if d is not None and d in self.nodes)
        self.nodes[node_id] = Node(node_id, real, run, background)
        return node_id

    def maintenance_every(self) -> int:
        batch_ms = max(self.cfg.trigger_interval_ms, LOGICAL_BATCH_MS)
        return max(1, self.cfg.maintenance_interval_ms // batch_ms)

    def _build_graph(self) -> None:
        cfg = self.cfg
        async_progress = cfg.progress_mode == "async"
        async_state = cfg.state_checkpoint == "async" and bool(self.store_ids)
        pipelining = cfg.pipelining
        stateful = bool(self.store_ids)
        n = self.nid
        # pipelining: at most pipeline_depth batches are planned and not yet committed
        lag = cfg.pipeline_depth if pipelining else 2
        for b in sorted(self.plans):
            prev, prev2 = b - 1, b - 2
            plan_deps = [n("plan", prev)]
            if pipelining:
                plan_deps += [n("offset_log_write", prev), n("source_commit", b - lag)]
            elif async_state or async_progress:
                plan_deps += [n("sink_commit", prev), n("commit_log_write", prev2)]
            else:
                plan_deps += [n("source_commit", prev)]
            if async_progress:
                plan_deps += [n("offset_log_write", b - lag), n("commit_log_write", b - lag)]
            if cfg.log_purge_mode == "async":
                plan_deps.append(n("purge", prev2))
            plan = self._add("plan", b, plan_deps, lambda b=b: self.step_plan(b))
            off = self._add("offset_log_write", b, [plan, n("offset_log_write", prev)],
                            lambda b=b: self.step_offset_log_write(b), background=async_progress)
            purge = self._add("purge", b, [off, n("purge", prev)], lambda b=b: self.step_purge(b),
                              background=cfg.log_purge_mode == "async")
            task_gate = [plan] if async_progress else [off]
            if cfg.log_purge_mode == "inline":
                task_gate.append(purge)
            for p in range(self.parts):
                self._add_task(b, p, task_gate, stateful, async_state, pipelining)
            sink_commit = self._add("sink_commit", b, [n("sink_write", b, p) for p in range(self.parts)]
                                    + [n("sink_commit", prev)], lambda b=b: self.step_sink_commit(b))
            commit_deps = [sink_commit, n("commit_log_write", prev)]
            commit_deps += [n("state_commit", b, p) for p in range(self.parts)]
            if async_progress:
                commit_deps.append(off)
            commit = self._add("commit_log_write", b, commit_deps, lambda b=b: self.step_commit_log_write(b),
                               background=async_progress)
            self._add("source_commit", b, [commit], lambda b=b: self.step_source_commit(b))

    def _add_task(self, b: int, p: int, gate: list[NodeId], stateful: bool, async_state: bool,
                  pipelining: bool) -> None:
        n = self.nid
        prev = b - 1
        order_deps: list[NodeId | None] = []
        if stateful:
            order_deps.append(n("task_apply", prev, p) if async_state else n("state_commit", prev, p))
            if async_state:
                order_deps += [n("state_commit", b - 2, q) for q in range(self.parts)]
            load = self._add("state_load", b, gate + order_deps, lambda: self.step_state_load(b, p), p)
            apply_deps = [load]
        else:
            apply_deps = gate + [n("task_apply", prev, p)]
        if self.uses_watermark and pipelining:
            apply_deps += [n("task_apply", prev, q) for q in range(self.parts)]
        apply = self._add("task_apply", b, apply_deps, lambda: self.step_task_apply(b, p), p)
        sink_dep = apply
        if stateful:
            clog_deps = [apply] + ([n("state_commit", prev, p)] if async_state else [])
            clog = self._add("changelog_write", b, clog_deps, lambda: self.step_changelog_write(b, p), p,
                             background=async_state)
            commit = self._add("state_commit", b, [clog], lambda: self.step_state_commit(b, p), p,
                               background=async_state)
            if not async_state:
                sink_dep = commit
            if self.cfg.provider != "snapshot" and (b + 1) % self.maintenance_every() == 0:
                last_snap = [nid for nid in self.nodes if nid.step == "snapshot_upload" and nid.partition == p]
                self._add("snapshot_upload", b, [commit] + last_snap[-1:], lambda: self.step_snapshot_upload(b, p),
                          p, background=True)
        self._add("sink_write", b, [sink_dep], lambda: self.step_sink_write(b, p), p)

    # ------------------------------------------------------- driver steps
    def logical_time_ms(self, batch: int) -> int:
        return batch * max(self.cfg.trigger_interval_ms, LOGICAL_BATCH_MS) + self.clock_skew_ms

    def step_plan(self, b: int) -> None:
        plan = self.plans[b]
        self.obs.attempts[b] = self.obs.attempts.get(b, 0) + 1
        self.obs.batches[b] = {"id": b, "start_offsets": list(plan.start), "end_offsets": list(plan.end),
                               "attempts": self.obs.attempts[b], "watermark_ms": None,
                               "incarnation": self.number, "rerun": plan.rerun}

    def step_offset_log_write(self, b: int) -> None:
        plan = self.plans[b]
        if self.cfg.progress_mode == "async" and not self._persist_offsets(b):
            return
        entry = OffsetEntry(b, plan.start, plan.end)
        path = layout.offset_path(b)
        if self.storage.exists(path):
            logged = OffsetEntry.read(self.storage, b)
            # async progress folds unlogged batches into a re-run, so only its end is fixed
            same = logged.end == plan.end and (self.cfg.progress_mode == "async" or logged.start == plan.start)
            if not same:
                raise QueryFailure(f"{path}: already logged with other offsets; a batch must re-run "
                                   f"with exactly its logged offsets")
        else:
            self.storage.write(path, entry.encode())
        self.persisted_offsets.add(b)

    def _persist_offsets(self, b: int) -> bool:
        """Async progress: persist only when checkpoint_interval_ms has passed since the last entry."""
        now = self.logical_time_ms(b)
        last = self.last_persisted_time_ms
        if b == self.restart.first_batch or last is None or now - last >= self.cfg.checkpoint_interval_ms:
            self.last_persisted_time_ms = now
            return True
        return False

    def step_purge(self, b: int) -> None:
        purge_logs(self.storage, self.cfg.min_batches_to_retain)
        commits = [x for x in self._committed_batches() if x <= b]
        if not commits or not self.store_ids:
            return
        entry = CommitEntry.read(self.storage, commits[-1])
        for sid, per_part in entry.state_lineage.items():
            for p_text, uid in per_part.items():
                cleanup_store(self.storage, sid, int(p_text), self.cfg.min_batches_to_retain,
                              entry.batch + 1, uid)

    def _committed_batches(self) -> list[int]:
        return log_batches(self.storage, layout.COMMITS)

    def step_sink_commit(self, b: int) -> None:
        if self.sc.sink_mode != "exactly_once":
            return
        files = [self.tasks[(b, p)].sink_file for p in range(self.parts)]
        path = layout.manifest_path(b)
        delivery = 1
        if self.storage.exists(path):
            delivery = json.loads(self.storage.read(path))["delivery"] + 1
        body = {"batch": b, "files": [f for f in files if f], "delivery": delivery}
        self.storage.write(path, json.dumps(body, sort_keys=True).encode(), overwrite=True)
        rows = [row for f in body["files"] for row in json.loads(self.storage.read(f))]
        self.obs.deliveries.setdefault(b, []).append(digest_rows(rows))

    def step_commit_log_write(self, b: int) -> None:
        trackers_after = self.trackers_after(b)
        if self.cfg.progress_mode == "async" and b not in self.persisted_offsets:
            return
        lineage = {sid: {str(p): self.lineage[(sid, p, b + 1)] for p in range(self.parts)}
                   for sid in self.store_ids}
        entry = CommitEntry(b, watermarks_of(self.trackers_for(b))[0], trackers_after, lineage)
        self.storage.write(layout.commit_path(b), entry.encode(), overwrite=True)

    def step_source_commit(self, b: int) -> None:
        record = self.obs.batches[b]
        record["watermark_ms"] = watermarks_of(self.trackers_for(b))[0]
        self.obs.progress.append(self.progress_event(b))

    def progress_event(self, b: int) -> dict[str, Any]:
        """A StreamingQueryProgress-shaped record. The reference is untimed: durations are 0."""
        plan = self.plans[b]
        rows = sum(e - s for s, e in zip(plan.start, plan.end))
        operators = []
        for sid in self.store_ids:
            total = sum(len(self.stores[(sid, p)].data) for p in range(self.parts) if (sid, p) in self.stores)
            changes = [c for p in range(self.parts) for c in self.tasks[(b, p)].sealed[sid].changes]
            operators.append({"operatorName": sid, "numRowsTotal": total,
                              "numRowsUpdated": sum(1 for _k, v in changes if v is not None),
                              "numRowsRemoved": sum(1 for _k, v in changes if v is None),
                              "commitTimeMs": 0, "memoryUsedBytes": 0})
        durations = {k: 0 for k in ("latestOffset", "walCommit", "queryPlanning", "addBatch",
                                    "commitOffsets", "triggerExecution")}
        return {"batchId": b, "numInputRows": rows, "inputRowsPerSecond": 0.0,
                "processedRowsPerSecond": 0.0, "durationMs": durations, "stateOperators": operators}

    # ---------------------------------------------------------- task steps
    def uid(self, b: int, p: int) -> str:
        return f"r{self.number}b{b}p{p}a{self.tasks[(b, p)].attempt}"

    def task(self, b: int, p: int) -> TaskState:
        return self.tasks.setdefault((b, p), TaskState())

    def executor_of(self, p: int) -> int:
        return p % EXECUTORS

    def step_state_load(self, b: int, p: int) -> None:
        if self.task(b, p).state_handed_off:
            return
        self.ensure_stores(b, p)

    def ensure_stores(self, b: int, p: int) -> None:
        """Version b of every store of partition p: the executor's cached copy, else the checkpoint."""
        for sid in self.store_ids:
            store = self.stores.get((sid, p))
            uid = self.lineage.get((sid, p, b))
            if store is not None and store.version == b and (uid is None or store.uid == uid):
                continue
            store = self.store_class(self.storage, sid, p, self.cfg.provider, self.cfg.min_deltas_for_snapshot)
            if b > 0:
                store.load(b, uid)
            self.stores[(sid, p)] = store

    def trackers_for(self, b: int) -> list[dict[str, Any]]:
        if not self.uses_watermark:
            return self.trackers[self.restart.first_batch]  # no event-time watermark: nothing to track
        if b not in self.trackers:
            self.trackers[b] = self.trackers_after(b - 1)
        return self.trackers[b]

    def trackers_after(self, b: int) -> list[dict[str, Any]]:
        if not self.uses_watermark:
            return self.trackers_for(b)
        if b + 1 in self.trackers:
            return self.trackers[b + 1]
        maxima = [self.tasks[(b, p)].result.max_event_ms for p in range(self.parts)]  # type: ignore[union-attr]
        after = advance_trackers(self.ops, self.trackers_for(b), maxima)
        self.trackers[b + 1] = after
        return after

    def step_task_apply(self, b: int, p: int) -> None:
        task = self.task(b, p)
        if task.state_handed_off:
            return  # a retry after the async writer took the state: only the output is redone
        self.ensure_stores(b, p)  # an executor loss may have dropped them since state_load
        plan = self.plans[b]
        records = route(self.data.slice(plan.start, plan.end), self.parts)[p]
        task.before = {sid: self.stores[(sid, p)].memento() for sid in self.store_ids}
        states: dict[str, State] = {sid: dict(self.stores[(sid, p)].data) for sid in self.store_ids}
        result = run_partition(self.ops, states, rows_of(records), watermarks_of(self.trackers_for(b)))
        task.result = result
        uid = self.uid(b, p)
        for sid in self.store_ids:
            store = self.stores[(sid, p)]
            old = store.data
            new = result.states[sid]
            for key in [k for k in old if k not in new]:
                store.delete(key)
            for key, value in new.items():
                if old.get(key) != value:
                    store.put(key, value)
            task.sealed[sid] = store.seal(uid)

    def step_changelog_write(self, b: int, p: int) -> None:
        task = self.tasks[(b, p)]
        for sid in self.store_ids:
            if task.written.get(sid) != task.sealed[sid].uid:
                self.stores[(sid, p)].write(task.sealed[sid])
                task.written[sid] = task.sealed[sid].uid

    def step_state_commit(self, b: int, p: int) -> None:
        task = self.tasks[(b, p)]
        for sid in self.store_ids:
            sealed = task.sealed[sid]
            if task.written.get(sid) != sealed.uid:
                # a retry re-sealed after the background changelog_write ran for the failed attempt
                self.stores[(sid, p)].write(sealed)
                task.written[sid] = sealed.uid
            self.stores[(sid, p)].mark_durable(sealed)
            self.lineage[(sid, p, b + 1)] = sealed.uid

    def step_snapshot_upload(self, b: int, p: int) -> None:
        for sid in self.store_ids:
            store = self.stores.get((sid, p))
            if store is not None:
                store.do_maintenance()

    def step_sink_write(self, b: int, p: int) -> None:
        task = self.tasks[(b, p)]
        rows = sink_rows(task.result.output) if task.result else []  # type: ignore[union-attr]
        path = layout.sink_part_path(b, p, self.uid(b, p))
        self.storage.write(path, json.dumps(rows).encode(), overwrite=True)
        task.sink_file = path

    # ----------------------------------------------------- fault handling
    def fail_task(self, b: int, p: int, reason: str) -> None:
        """Abandon the current attempt of task (b, p); the next attempt starts from state_load."""
        task = self.tasks.setdefault((b, p), TaskState())
        task.attempt += 1
        if task.attempt >= MAX_TASK_ATTEMPTS:
            raise QueryFailure(f"task b{b} p{p} failed {task.attempt} times: {reason}")
        if self.cfg.state_checkpoint == "async" and task.sealed and \
                all(task.written.get(sid) == task.sealed[sid].uid for sid in self.store_ids):
            task.state_handed_off = True  # the written version stands; the retry redoes the output only
            task.sink_file = None
            return
        for sid in self.store_ids:
            store = self.stores.get((sid, p))
            if store is not None and sid in task.before and store.version > b:
                store.restore(task.before[sid])  # the attempt's version must never be reused
            elif store is not None and store.changes:
                store.abort()
        task.result, task.sealed, task.sink_file, task.before = None, {}, None, {}
        record = self.obs.batches.setdefault(b, {})
        record["task_retries"] = record.get("task_retries", 0) + 1

    def lose_executor(self, p: int) -> None:
        """Every store cached on p's executor is gone; a pending async commit there fails the query."""
        executor = self.executor_of(p)
        for (sid, q) in list(self.stores):
            if self.executor_of(q) == executor:
                store = self.stores.pop((sid, q))
                pending = [t for (bb, qq), t in self.tasks.items()
                           if qq == q and t.sealed and sid in t.sealed
                           and t.sealed[sid].version not in store.durable_versions]
                if pending:
                    raise QueryFailure(f"executor {executor} lost with a pending state commit of partition {q}")

    def retry_task_steps(self, b: int, p: int, upto: str) -> None:
        """Re-run the task's steps from state_load through ``upto`` for the new attempt."""
        for step in ("state_load", "task_apply", "changelog_write", "state_commit", "sink_write"):
            node = self.nodes.get(self.nid(step, b, p))
            if node is None or node.background:
                if step == upto:
                    break
                continue
            node.run()
            if step == upto:
                break
