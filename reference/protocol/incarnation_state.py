"""What one incarnation (one life of the driver) holds in memory, and what every part of it reads.

An incarnation lives from a start (or restart) to the end of its input or a
crash. Only ``storage`` survives a crash: the plans, the tasks' results, the
stores cached on executors and the lineage ids below all die with it.
``IncarnationState`` declares that state once, with the small readers every
part of ``incarnation.Incarnation`` shares: a batch's input and the watermark
it runs with, its tasks, the step graph's nodes and the dispatch of one node to
its step. It also declares the seams (``seams.py``) the parts call across;
``Incarnation`` composes the parts that implement them.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from . import layout
from .graph import BatchShape, Node
from .logs import log_batches
from .observer import Observer
from .query import PartitionResult, advance_trackers, watermarks_of
from .rebalancing import PlacementTimeline
from .recovery import RestartPlan
from .redelivery import FetchLayer
from ..language.scenario import EngineConfig, OperatorSpec, Scenario
from .seams import Clock, ProgressReporter, StepGraph, TaskEffects
from .sources import Record, SourceData
from .state_store import Sealed, StateStore
from ..language.steps import NodeId
from .storage import Storage


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


class IncarnationState(Clock, TaskEffects, ProgressReporter, StepGraph):
    """One driver lifetime's memory (set by ``Incarnation.__init__``) and the readers its parts share."""

    store_class: type[StateStore] = StateStore
    fetch_layer_class: type[FetchLayer] = FetchLayer   # a redelivering source's fetch-and-dedup layer
    snapshot_format: str | None = None   # a backend whose stores write another snapshot format names it
    # parallel store commit: one commit node per store (the reference, so the explorer sees every
    # interleaving); a backend that runs a partition's store commits concurrently inside one step says False
    store_commit_nodes: bool = True

    sc: Scenario
    data: SourceData
    storage: Storage
    number: int
    recorded_cuts: dict[int, tuple[int, ...]]   # batch -> end offsets another backend chose
    open_ended: bool   # a timed backend cutting by its trigger: batches after the re-runs are planned one at a time
    cfg: EngineConfig
    obs: Observer
    ops: tuple[OperatorSpec, ...]
    store_ids: list[str]
    parts: int
    shape: BatchShape
    uses_watermark: bool
    stores: dict[tuple[str, int], StateStore]
    placement: PlacementTimeline
    store_executor: dict[tuple[str, int], str]   # where each cached store lives
    tasks: dict[tuple[int, int], TaskState]
    trackers: dict[int, list[dict[str, Any]]]
    lineage: dict[tuple[str, int, int], str]
    persisted_offsets: set[int]
    reported_ends: dict[int, tuple[int, ...]]   # real-time mode: batch -> the end offsets its tasks reported
    last_persisted_time_ms: int | None
    last_commit_written: int
    last_purged_batch: int    # HDFSMetadataLog.lastPurgedBatchId: in memory, so per incarnation
    clock_skew_ms: int
    _log_index: dict[str, set[int]] | None   # the log ids known to this incarnation (``known_logs``)
    _log_lock: threading.Lock
    plans: dict[int, BatchPlan]
    restart: RestartPlan
    fetchers: dict[int, FetchLayer]
    nodes: dict[NodeId, Node]

    # ----------------------------------------------------------- the graph
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

    # ------------------------------------------------------------ its logs
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

    # ----------------------------------------------------- a batch's input
    def ledgers(self, b: int) -> dict[int, tuple[int, ...]]:
        """A redelivering source partition's message ids behind batch ``b``'s offsets (its fetch ledger)."""
        start, end = self.plans[b].bounds
        return {sp: layer.ids(start[sp], end[sp]) for sp, layer in self.fetchers.items()}

    def batch_records(self, b: int) -> list[Record]:
        """The input of batch ``b``: its offsets' records, a redelivering source's through its fetch ledger."""
        return self.data.slice(*self.plans[b].bounds, self.ledgers(b))

    # ------------------------------------------------------- its watermark
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

    def note_watermark(self, b: int) -> None:
        """The observer learns the watermark batch ``b`` runs with (the one ``commits/b`` will hold)."""
        self.obs.batches[b]["watermark_ms"] = watermarks_of(self.trackers_for(b))[0]

    # ----------------------------------------------------------- its tasks
    def task(self, b: int, p: int) -> TaskState:
        return self.tasks.setdefault((b, p), TaskState())

    def executor_of(self, b: int, p: int) -> str:
        """The executor that runs partition p's task of batch b (``rebalancing.py``)."""
        return self.placement.executor_at(b, p)
