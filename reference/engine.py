"""One incarnation of a query: the steps of SPEC section 2 and their effects on storage and state.

An incarnation is one life of the driver process, from start (or restart) to
the end of input or a crash. Its step graph (``graph.py``) says which step
waits for which; this module says what each step does (``step_<name>``) and
what a failed task attempt or a lost executor does to the in-memory state.
``run_step`` applies one node's effect. The reference's sequential scheduler
(``run.py``), the simulator and the Spark engine execute the same graph and
the same step effects; they differ only in when a step runs, and where.

Only ``storage`` survives a crash: the stores cached on executors, the sealed
but unwritten versions and the driver's plans are all in this object and die
with it.

Invariants asserted here (TIGER_STYLE): commit entries are written in batch
order; the lineage id of a committed version never changes; at most one state
commit per partition is pending when the next version is sealed (the store
asserts that its committed version only moves forward).
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Any, Mapping

from . import layout
from .faults import SealedVersion, sealed_versions
from .graph import LOGICAL_BATCH_MS, GraphShape, Node, build_graph
from .logs import (CommitEntry, OffsetEntry, PurgeRound, check_metadata, log_batches, purge_round, run_purge_round,
                   threshold_of, write_metadata)
from .observer import Observer
from .outcome import DURATION_KEYS, ProgressEvent, StateOperatorProgress, digest_rows
from .query import (
    PartitionResult,
    advance_trackers,
    apply_partition,
    initial_trackers,
    operator_watermarks,
    pipeline_store_ids,
    route,
    rows_of,
    sink_rows,
    watermarks_of,
)
from .rebalancing import PlacementTimeline
from .recovery import RestartPlan
from .redelivery import FetchLayer
from .scenario import Scenario
from .size import MATERIALISED
from .sources import Record, SourceData
from .state_store import Sealed, StateStore, cleanup_store
from .steps import TASK_STEPS, NodeId
from .storage import Storage

MAX_TASK_ATTEMPTS = 4    # spark.task.maxFailures
# the planner's own guard: a scenario that needs more batches is refused up front, with the numbers, by the
# size check every backend runs first (``size.MATERIALISED.batches``), so this is never the first to say so
MAX_PLANNED_BATCHES = MATERIALISED.batches


class DriverCrash(Exception):
    """The driver process dies: everything but storage is lost."""


class QueryFailure(Exception):
    """The query stops with an error (a failed log write, a lost pending commit). Restartable."""


class TaskAttemptFailed(Exception):
    """A task attempt failed; Spark retries it (up to ``MAX_TASK_ATTEMPTS``)."""


@dataclass
class BatchPlan:
    """A batch's boundaries. ``end`` is None for an open batch of a timed backend cutting by its trigger:
    ``plan`` decides it from what has arrived by then."""

    batch: int
    start: tuple[int, ...]
    end: tuple[int, ...] | None
    rerun: bool = False

    @property
    def bounds(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        assert self.end is not None, f"batch {self.batch} is not planned yet"
        return self.start, self.end


@dataclass
class TaskState:
    """One partition's task in one batch: its current attempt and what it produced."""

    attempt: int = 0
    result: PartitionResult | None = None
    sealed: dict[str, Sealed] = field(default_factory=dict)
    sink_file: str | None = None
    written: dict[str, Sealed] = field(default_factory=dict)  # store id -> the sealed version whose file is written
    before: dict[str, tuple] = field(default_factory=dict)    # store mementos taken before task_apply
    state_handed_off: bool = False  # async: the background writer owns this attempt's sealed version


class Incarnation:
    """One driver lifetime: plans its batches from a restart plan, builds its step graph, applies steps."""

    store_class: type[StateStore] = StateStore
    fetch_layer_class: type[FetchLayer] = FetchLayer   # a redelivering source's fetch-and-dedup layer
    snapshot_format: str | None = None   # a backend whose stores write another snapshot format names it
    # parallel store commit: one commit node per store (the reference, so the explorer sees every
    # interleaving); a backend that runs a partition's store commits concurrently inside one step says False
    store_commit_nodes: bool = True

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
        self.shape = GraphShape.of(scenario, store_commit_nodes=self.store_commit_nodes)
        self.uses_watermark = self.shape.uses_watermark
        self.stores: dict[tuple[str, int], StateStore] = {}
        self.placement = PlacementTimeline(scenario)
        self.store_executor: dict[tuple[str, int], str] = {}   # where each cached store lives
        self.tasks: dict[tuple[int, int], TaskState] = {}
        self.trackers: dict[int, list[dict[str, Any]]] = {}
        self.lineage: dict[tuple[str, int, int], str] = {}
        self.persisted_offsets: set[int] = set()
        self.last_persisted_time_ms: int | None = None
        self.last_commit_written = -1
        self.last_purged_batch = -1    # HDFSMetadataLog.lastPurgedBatchId: in memory, so per incarnation
        self._log_index: dict[str, set[int]] | None = None   # known_logs()
        self._log_lock = threading.Lock()
        self.clock_skew_ms = 0
        self.plans: dict[int, BatchPlan] = {}
        self.restart = restart
        self.fetchers = {sp: self.fetch_layer_class(sp, r.deliveries) for sp, r in data.redelivering.items()}
        self._setup(restart)
        self.nodes: dict[NodeId, Node] = self.build_graph()

    # ------------------------------------------------------------- setup
    def _setup(self, restart: RestartPlan) -> None:
        check_metadata(self.storage, self.sc.query_digest(), self.sc.name)
        if not self.storage.exists(layout.METADATA):
            write_metadata(self.storage, f"query-{self.sc.seed}", self.sc.query_digest(), self.sc.name,
                           self.snapshot_format)
        first = restart.first_batch
        self.trackers[first] = restart.trackers if restart.trackers is not None else initial_trackers(self.ops)
        for sid, per_part in restart.lineage.items():
            for p, uid in per_part.items():
                self.lineage[(sid, int(p), restart.lineage_version)] = uid
        latest_logged = max(log_batches(self.storage, layout.OFFSETS), default=None)
        for layer in self.fetchers.values():
            layer.restore(self.storage, latest_logged)
        self.plan_batches(restart)

    def plan_batches(self, restart: RestartPlan) -> None:
        """Every batch this incarnation will run: the logged ones to re-run, then the cuts another backend
        recorded (``recorded_cuts``, to replay its boundaries), then the untimed clock's own cuts. An
        open-ended incarnation plans the re-runs and one open batch; ``plan`` opens the next."""
        start, b = restart.start_offsets, restart.first_batch
        totals = tuple(self.data.totals)
        while True:
            if self.open_ended and b not in restart.fixed_offsets:
                if start != totals:
                    self.plans[b] = BatchPlan(b, tuple(start), None)
                return
            if b in restart.fixed_offsets:
                s, e = restart.fixed_offsets[b]
                plan = BatchPlan(b, tuple(s), tuple(e), rerun=True)
            else:
                cut = self.recorded_cuts.get(b) or tuple(self.data.planned_end_offsets(b))
                end = tuple(max(x, y) for x, y in zip(cut, start))
                plan = BatchPlan(b, tuple(start), end)
            self.plans[b] = plan
            start = plan.bounds[1]
            b += 1
            if start == totals and b > max(restart.fixed_offsets, default=-1):
                return
            if b > restart.first_batch + MAX_PLANNED_BATCHES:
                raise RuntimeError("planning did not converge on the end of input")

    def build_graph(self) -> dict[NodeId, Node]:
        return build_graph(self.shape, self.plans)

    # ------------------------------------------------------------- steps
    def nid(self, step: str, batch: int, partition: int = -1, tag: str = "") -> NodeId:
        return NodeId.of(step, batch, partition, tag)

    def run_step(self, node_id: NodeId) -> None:
        """Apply the effect of one node: ``step_<name>(batch[, partition][, store=tag])``."""
        method = getattr(self, f"step_{node_id.step}")
        if node_id.tag:
            method(node_id.batch, node_id.partition, store=node_id.tag)
        elif node_id.partition >= 0:
            method(node_id.batch, node_id.partition)
        else:
            method(node_id.batch)

    def step_nodes(self, step: str, b: int, p: int) -> list[NodeId]:
        """The nodes of a task step of (b, p): one per store under parallel store commit (then the
        partition's own ``state_commit``), else the one node; none when the graph lacks the step."""
        tagged = [self.nid(step, b, p, sid) for sid in self.shape.commit_stores]
        return [n for n in tagged + [self.nid(step, b, p)] if n in self.nodes]

    def maintenance_every(self) -> int:
        return self.shape.maintenance_every()

    # ------------------------------------------------------- driver steps
    def logical_time_ms(self, batch: int) -> int:
        return batch * max(self.cfg.trigger_interval_ms, LOGICAL_BATCH_MS) + self.clock_skew_ms

    def step_plan(self, b: int) -> None:
        plan = self.plans[b]
        if plan.end is None:
            end = self.cut_now(b)
            assert all(s <= e <= t for s, e, t in zip(plan.start, end, self.data.totals)), \
                f"batch {b}: a cut {end} must lie between its start {plan.start} and the input's end"
            plan.end = end
            if end != tuple(self.data.totals):
                self.open_batch(b + 1, end)
        self.fetch_sources(b)
        self.obs.planned(b, plan.start, plan.end, self.number, plan.rerun)
        self.obs.moved(b, self.placement.moves_at(b))

    def fetch_sources(self, b: int) -> None:
        """A redelivering source fetches up to the batch's cut and persists its fetch state (``redelivery.py``);
        a re-run batch reads the persisted ledger instead."""
        plan = self.plans[b]
        if plan.rerun:
            return
        for sp, layer in self.fetchers.items():
            end = plan.bounds[1][sp]
            if end > 0:
                layer.fetch(self.data.partitions[sp][end - 1].arrival_ms)
            layer.persist(self.storage, b)

    def ledgers(self, b: int) -> dict[int, tuple[int, ...]]:
        """A redelivering source partition's message ids behind batch ``b``'s offsets (its fetch ledger)."""
        start, end = self.plans[b].bounds
        return {sp: layer.ids(start[sp], end[sp]) for sp, layer in self.fetchers.items()}

    def batch_records(self, b: int) -> list[Record]:
        """The input of batch ``b``: its offsets' records, a redelivering source's through its fetch ledger."""
        return self.data.slice(*self.plans[b].bounds, self.ledgers(b))

    def cut_now(self, b: int) -> tuple[int, ...]:
        """An open batch's end offsets: what has arrived by the time ``plan`` runs (timed backends only)."""
        raise NotImplementedError("an open-ended incarnation needs a clock: a timed backend decides its cuts")

    def open_batch(self, b: int, start: tuple[int, ...]) -> None:
        """Add batch ``b``, still open, and its step-graph nodes; ``nodes_added`` tells the scheduler."""
        self.plans[b] = BatchPlan(b, start, None)
        added = []
        for node in self.shape.batch_nodes(b):
            real = tuple(d for d in node.deps if d in self.nodes)
            self.nodes[node.id] = Node(node.id, real, node.background)
            added.append(self.nodes[node.id])
        self.nodes_added(added)

    def nodes_added(self, nodes: list[Node]) -> None:
        """A batch's nodes joined the graph while it runs (a scheduler that caches the graph overrides this)."""

    def step_offset_log_write(self, b: int) -> None:
        plan = self.plans[b]
        if self.cfg.progress_mode == "async" and not self._persist_offsets(b):
            return
        entry = OffsetEntry(b, *plan.bounds)
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
        self._logged(layout.OFFSETS, b)

    def offsets_persist_due(self, b: int) -> bool:
        """Async progress: an offset entry is written only once ``checkpoint_interval_ms`` has passed."""
        if self.cfg.progress_mode == "sync":
            return True
        last = self.last_persisted_time_ms
        return b == self.restart.first_batch or last is None or \
            self.logical_time_ms(b) - last >= self.cfg.checkpoint_interval_ms

    def _persist_offsets(self, b: int) -> bool:
        if self.offsets_persist_due(b):
            self.last_persisted_time_ms = self.logical_time_ms(b)
            return True
        return False

    def step_purge(self, b: int) -> None:
        self.purge_log_entries(self.purge_round_of(b))
        if not self.store_ids:
            return
        commits = [x for x in self.known_logs()[layout.COMMITS] if x <= b]
        if not commits:
            return
        entry = CommitEntry.read(self.storage, commits[-1])
        for sid, per_part in entry.state_lineage.items():
            for p_text, uid in per_part.items():
                cleanup_store(self.storage, sid, int(p_text), self.cfg.min_batches_to_retain,
                              entry.batch + 1, uid)

    def known_logs(self) -> dict[str, list[int]]:
        """The ids of both logs (sorted) as this incarnation knows them: listed once, at its first purge,
        then kept up to date by its own writes and deletes. Spark does not list to purge either: under
        sync progress the threshold is the current batch minus the retention, under async progress it
        comes from the queue of entries known to be durable (``AsyncOffsetSeqLog.writtenToDurableStorage``,
        filled by one listing at start). Timed backends write the logs from other threads: a lock."""
        with self._log_lock:
            if self._log_index is None:
                self._log_index = {folder: set(log_batches(self.storage, folder))
                                   for folder in (layout.OFFSETS, layout.COMMITS)}
            return {folder: sorted(ids) for folder, ids in self._log_index.items()}

    def _logged(self, folder: str, b: int) -> None:
        with self._log_lock:
            if self._log_index is not None:
                self._log_index[folder].add(b)

    def next_purge_round(self) -> PurgeRound | None:
        """The purge round this incarnation would run now (``reference.logs.purge_round``)."""
        known = self.known_logs()
        threshold = threshold_of(known[layout.OFFSETS], known[layout.COMMITS], self.cfg.min_batches_to_retain,
                                 self.cfg.progress_mode)
        return purge_round(threshold, self.last_purged_batch)

    def purge_round_of(self, b: int) -> PurgeRound | None:
        """The round purge ``b`` runs, decided when it starts (Spark computes the threshold when it calls
        ``purge``); an untimed step starts and ends at once."""
        return self.next_purge_round()

    def purge_log_entries(self, rnd: PurgeRound | None) -> list[str]:
        """Purge both logs as Spark's ``HDFSMetadataLog.purge`` does (``reference.logs.PurgeRound``): the
        same entries as ``purge_logs`` deletes, with Spark's storage operations."""
        if rnd is None:
            return []
        deleted = run_purge_round(self.storage, rnd, self.known_logs()[layout.COMMITS][-1])
        self.last_purged_batch = rnd.threshold - 1
        with self._log_lock:
            assert self._log_index is not None
            for ids in self._log_index.values():
                ids.difference_update([x for x in ids if x < rnd.threshold])
        return deleted

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
        body: dict[str, Any] = {"batch": b, "files": [f for f in files if f], "delivery": delivery}
        self.storage.write(path, json.dumps(body, sort_keys=True).encode(), overwrite=True)
        rows = [row for f in body["files"] for row in json.loads(self.storage.read(f))]
        self.obs.deliveries.setdefault(b, []).append(digest_rows(rows))

    def step_commit_log_write(self, b: int) -> None:
        trackers_after = self.trackers_after(b)
        if self.cfg.progress_mode == "async" and b not in self.persisted_offsets:
            return
        assert b > self.last_commit_written, \
            f"commit entries are written in batch order: commits/{b} after commits/{self.last_commit_written}"
        lineage = {sid: {str(p): self.lineage[(sid, p, b + 1)] for p in range(self.parts)}
                   for sid in self.store_ids}
        path = layout.commit_path(b)
        if self.storage.exists(path):
            assert CommitEntry.read(self.storage, b).state_lineage == lineage, \
                f"{path}: the lineage of a committed version never changes"
        entry = CommitEntry(b, watermarks_of(self.trackers_for(b))[0], trackers_after, lineage)
        self.storage.write(path, entry.encode(), overwrite=True)
        self.last_commit_written = b
        self._logged(layout.COMMITS, b)
        self.obs.batches[b]["watermark_ms"] = entry.watermark_ms   # the watermark commits/b holds

    def step_source_commit(self, b: int) -> None:
        self.obs.committed(b, watermarks_of(self.trackers_for(b))[0], self.progress_event(b))

    def progress_event(self, b: int) -> ProgressEvent:
        """A StreamingQueryProgress-shaped record. The reference is untimed: durations are 0."""
        plan = self.plans[b]
        rows = sum(e - s for s, e in zip(*plan.bounds))
        operators = []
        for sid in self.store_ids:
            total = sum(len(self.stores[(sid, p)].data) for p in range(self.parts) if (sid, p) in self.stores)
            changes = [c for p in range(self.parts) for c in self.tasks[(b, p)].sealed[sid].changes]
            operators.append(StateOperatorProgress(sid, total, sum(1 for _k, v in changes if v is not None),
                                                   sum(1 for _k, v in changes if v is None)))
        return ProgressEvent(b, rows, 0.0, 0.0, {k: 0 for k in DURATION_KEYS}, tuple(operators))

    # ---------------------------------------------------------- task steps
    def uid(self, b: int, p: int) -> str:
        return f"r{self.number}b{b}p{p}a{self.tasks[(b, p)].attempt}"

    def task(self, b: int, p: int) -> TaskState:
        return self.tasks.setdefault((b, p), TaskState())

    def executor_of(self, b: int, p: int) -> str:
        """The executor that runs partition p's task of batch b (``rebalancing.py``)."""
        return self.placement.executor_at(b, p)

    def step_state_load(self, b: int, p: int) -> None:
        if self.task(b, p).state_handed_off:
            return
        self.ensure_stores(b, p)

    def ensure_stores(self, b: int, p: int) -> None:
        """Version b of every store of partition p: the executor's cached copy, else the checkpoint.

        A partition that moved to another executor (``rebalancing.py``) finds no copy there: the old
        executor's copy is dropped and the state loads from the checkpoint."""
        for sid in self.store_ids:
            if self.cached_store(b, p, sid) is not None:
                continue
            store = self.store_class(self.storage, sid, p, self.cfg.provider, self.cfg.min_deltas_for_snapshot)
            if b > 0:
                store.load(b, self.lineage.get((sid, p, b)))
            self.stores[(sid, p)] = store
            self.store_executor[(sid, p)] = self.executor_of(b, p)

    def cached_store(self, b: int, p: int, sid: str) -> StateStore | None:
        """Store ``sid`` of partition p at version b, cached on the executor that runs p's task of batch b;
        None when that executor must load it from the checkpoint."""
        store = self.stores.get((sid, p))
        if store is None:
            return None
        if self.store_executor.get((sid, p)) != self.executor_of(b, p):
            assert b == 0 or b in store.durable_versions, \
                f"partition {p} moves at batch {b} before version {b} of store {sid} is durable"
            return None
        uid = self.lineage.get((sid, p, b))
        return store if store.version == b and (uid is None or store.uid == uid) else None

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
        after = advance_trackers(self.ops, self.trackers_for(b), self.event_time_maxima(b))
        self.trackers[b + 1] = after
        return after

    def event_time_maxima(self, b: int) -> list[list[dict[str, int]]]:
        """Batch b's event-time maxima, per partition and operator: what its tasks saw (a backend that does not
        run the records, like the simulator's volume mode, computes them from its counts)."""
        return [self.tasks[(b, p)].result.max_event_ms for p in range(self.parts)]  # type: ignore[union-attr]

    def step_task_apply(self, b: int, p: int) -> None:
        task = self.task(b, p)
        if task.state_handed_off:
            return  # a retry after the async writer took the state: only the output is redone
        self.ensure_stores(b, p)  # an executor loss may have dropped them since state_load
        self.note_watermark(b)
        records = route(self.batch_records(b), self.parts)[p]
        task.before = {sid: self.stores[(sid, p)].memento() for sid in self.store_ids}
        stores = {sid: self.stores[(sid, p)] for sid in self.store_ids}
        task.result, _changes = apply_partition(self.ops, stores, rows_of(records),
                                                operator_watermarks(self.trackers_for(b)))
        uid = self.uid(b, p)
        for sid, store in stores.items():
            task.sealed[sid] = store.seal(uid)

    def note_watermark(self, b: int) -> None:
        """The observer learns the watermark batch ``b`` runs with (the one ``commits/b`` will hold)."""
        self.obs.batches[b]["watermark_ms"] = watermarks_of(self.trackers_for(b))[0]

    def committing(self, store: str | None) -> list[str]:
        """The stores a commit step handles: its own store's, when the step is tagged with one, else all."""
        return [store] if store is not None else self.store_ids

    def step_changelog_write(self, b: int, p: int, store: str | None = None) -> None:
        task = self.tasks[(b, p)]
        for sid in self.committing(store):
            sealed = task.sealed[sid]
            if sid not in task.written or task.written[sid].uid != sealed.uid:
                self.stores[(sid, p)].write(sealed)
                task.written[sid] = sealed

    def step_state_commit(self, b: int, p: int, store: str | None = None) -> None:
        """Commit the version whose file was written: under async state checkpointing a retry may have
        re-sealed since, and the written attempt's file is the one the commit log may name.

        Under parallel store commit each store's node commits that store, and the partition's untagged
        node does nothing: it only gathers the stores' commits, since the commit log may name the
        partition's version only once every store's file is written."""
        if store is None and self.shape.commit_stores:
            return
        task = self.tasks[(b, p)]
        for sid in self.committing(store):
            if sid not in task.written:
                self.stores[(sid, p)].write(task.sealed[sid])
                task.written[sid] = task.sealed[sid]
            written = task.written[sid]
            cached = self.stores.get((sid, p))
            raced = task.sealed.get(sid) is not None and task.sealed[sid].uid != written.uid
            if cached is not None and (not raced or cached.uid == written.uid):
                cached.mark_durable(written)
            self.lineage[(sid, p, b + 1)] = written.uid

    def step_snapshot_upload(self, b: int, p: int) -> None:
        for sid in self.store_ids:
            store = self.stores.get((sid, p))
            if store is not None:
                store.do_maintenance()

    def step_sink_write(self, b: int, p: int) -> None:
        task = self.tasks[(b, p)]
        rows = sink_rows(task.result.output) if task.result else []
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
                all(sid in task.written and task.written[sid].uid == task.sealed[sid].uid for sid in self.store_ids):
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

    def lose_executor(self, p: int, failing: tuple[int, int] | None = None) -> None:
        """Every store cached on p's executor is gone, with every version sealed there but not yet durable.

        The failing task (``failing``: its batch and partition) is retried as any failed attempt. Another
        task whose sealed version was lost: under async state checkpointing its commit was already handed to
        the background and the query fails, as Spark fails it; under sync state checkpointing the task had
        not finished, so Spark retries it too (the reference redoes its steps up to where it stood).
        """
        batch = failing[0] if failing is not None else max(self.plans)
        executor = self.executor_of(batch, p)
        lost = [key for key in self.stores if self.store_executor.get(key) == executor]
        durable = {key: self.stores.pop(key).durable_versions for key in lost}
        stranded = sorted({(bb, qq) for (bb, qq), t in self.tasks.items() for (sid, q) in lost
                           if qq == q and (bb, qq) != failing and sid in t.sealed
                           and t.sealed[sid].version > max(durable[(sid, q)], default=0)})
        if stranded and self.cfg.state_checkpoint == "async":
            raise QueryFailure(f"executor {executor} lost with a pending state commit of partition {stranded[0][1]}")
        for bb, qq in stranded:
            task = self.tasks[(bb, qq)]
            reached = "changelog_write" if all(sid in task.written for sid in task.sealed) else "task_apply"
            self.fail_task(bb, qq, f"executor {executor} lost")
            self.retry_task_steps(bb, qq, reached)

    def retry_task_steps(self, b: int, p: int, upto: str) -> None:
        """Re-run the task's foreground steps from state_load through ``upto`` for the new attempt."""
        for step in TASK_STEPS:
            for node_id in self.step_nodes(step, b, p):
                if not self.nodes[node_id].background:
                    self.run_step(node_id)
            if step == upto:
                break

    def previous_task_step(self, node_id: NodeId) -> str | None:
        """The foreground task step before ``node_id``'s in its task (None for the first)."""
        b, p = node_id.batch, node_id.partition
        steps = [s for s in TASK_STEPS if any(not self.nodes[n].background for n in self.step_nodes(s, b, p))]
        index = steps.index(node_id.step) if node_id.step in steps else 0
        return steps[index - 1] if index > 0 else None

    def zombie_material(self, b: int, p: int) -> tuple[list[SealedVersion], list[list[Any]]]:
        """What a failed attempt of task (b, p) would have written: its sealed versions and its output rows."""
        task = self.tasks.get((b, p))
        if task is None:
            return [], []
        return sealed_versions(task.sealed), sink_rows(task.result.output) if task.result else []
