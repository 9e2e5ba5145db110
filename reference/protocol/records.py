"""What one incarnation (one life of the driver) holds, in three typed records, and the readers over them.

An incarnation lives from a start (or restart) to the end of its input or a
crash. Only ``storage`` survives a crash: everything below dies with it.

- ``QueryFacts``: what the incarnation runs, fixed when it starts: the
  scenario, its input, the storage, the restart plan, the observer, the mode
  and the step-graph shape;
- ``BatchBook``: the driver's batch book: each batch's plan and watermark
  trackers, which offset entries it persisted, what it purged, the log ids it
  knows (``LogIndex``);
- ``TaskTable``: the tasks' side: each task's attempt and what it produced,
  the stores cached on executors and where, the placement, the lineage ids.

A part of the incarnation (``environment.py``: its clock, task effects,
progress reporter, costs) receives the records it reads, never the incarnation.
``Watermarks`` is the one reader two parts share (the driver's commit entry and
the tasks' operators read a batch's watermark).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Callable

from . import layout
from .graph import BatchShape
from .logs import PurgeRound, log_batches
from .modes import MicroBatch
from .observer import Observer
from .query import PartitionResult, advance_trackers, watermarks_of
from .rebalancing import PlacementTimeline
from .recovery import RestartPlan
from .redelivery import FetchLayer
from ..language.scenario import EngineConfig, OperatorSpec, Scenario
from .sources import Record, SourceData
from .state_store import Sealed, StateStore
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


@dataclass(frozen=True)
class QueryFacts:
    """What an incarnation runs, fixed when it starts (``storage`` is the one thing it changes: its files)."""

    sc: Scenario
    data: SourceData
    storage: Storage
    number: int
    restart: RestartPlan
    obs: Observer
    ops: tuple[OperatorSpec, ...]
    store_ids: list[str]
    mode: MicroBatch   # the execution mode (``modes``): every rule that differs between modes is asked of it
    shape: BatchShape
    fetchers: dict[int, FetchLayer]   # a redelivering source partition's fetch-and-dedup layer
    recorded_cuts: dict[int, tuple[int, ...]]   # batch -> end offsets another backend chose
    open_ended: bool   # a timed backend cutting by its trigger: batches after the re-runs are planned one at a time
    cfg: EngineConfig   # the scenario's engine section
    parts: int          # its state partitions


class LogIndex:
    """The ids of both logs as this incarnation knows them: listed once, at its first purge, then kept up to
    date by its own writes and deletes. Spark does not list to purge either: under sync progress the threshold
    is the current batch minus the retention, under async progress it comes from the queue of entries known
    to be durable (``AsyncOffsetSeqLog.writtenToDurableStorage``, filled by one listing at start). Timed
    backends write the logs from other threads: a lock."""

    def __init__(self, storage: Storage):
        self.storage = storage
        self.ids: dict[str, set[int]] | None = None
        self.lock = threading.Lock()

    def known(self) -> dict[str, list[int]]:
        with self.lock:
            if self.ids is None:
                self.ids = {folder: set(log_batches(self.storage, folder)) for folder in (layout.OFFSETS, layout.COMMITS)}
            return {folder: sorted(ids) for folder, ids in self.ids.items()}

    def logged(self, folder: str, b: int) -> None:
        with self.lock:
            if self.ids is not None:
                self.ids[folder].add(b)

    def forget_below(self, threshold: int) -> None:
        """A purge round deleted every entry below ``threshold``."""
        with self.lock:
            assert self.ids is not None, "a purge round lists the logs before it deletes"
            for ids in self.ids.values():
                ids.difference_update([x for x in ids if x < threshold])


@dataclass
class BatchBook:
    """The driver's batch book: plans, watermark trackers, persisted offset entries, purge marks, known logs."""

    logs: LogIndex
    plans: dict[int, BatchPlan] = field(default_factory=dict)
    trackers: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    persisted_offsets: set[int] = field(default_factory=set)
    reported_ends: dict[int, tuple[int, ...]] = field(default_factory=dict)   # real-time: batch -> tasks' ends
    last_persisted_time_ms: int | None = None
    last_commit_written: int = -1
    last_purged_batch: int = -1    # HDFSMetadataLog.lastPurgedBatchId: in memory, so per incarnation
    clock_skew_ms: int = 0         # an injected ``clock_skew`` fault
    # batch -> the purge round a timed backend decided when purge b started (and costed then); its effect
    # lands at the step's end (Spark computes the threshold when it calls ``purge``)
    decided_purges: dict[int, PurgeRound | None] = field(default_factory=dict)


@dataclass
class TaskTable:
    """The tasks' side: tasks, the stores cached on executors and where, the placement, the lineage ids."""

    placement: PlacementTimeline
    tasks: dict[tuple[int, int], TaskState] = field(default_factory=dict)
    stores: dict[tuple[str, int], StateStore] = field(default_factory=dict)
    store_executor: dict[tuple[str, int], str] = field(default_factory=dict)   # where each cached store lives
    lineage: dict[tuple[str, int, int], str] = field(default_factory=dict)

    def task(self, b: int, p: int) -> TaskState:
        return self.tasks.setdefault((b, p), TaskState())

    def executor_of(self, b: int, p: int) -> str:
        """The executor that runs partition p's task of batch b (``rebalancing.py``)."""
        return self.placement.executor_at(b, p)


def offset_entry_due(facts: QueryFacts, book: BatchBook, b: int, time_ms: int) -> bool:
    """Whether ``offsets/b`` is written at driver time ``time_ms`` (the mode's ``offset_entry_due``: async
    progress writes one only once ``checkpoint_interval_ms`` has passed since the last)."""
    return facts.mode.offset_entry_due(b, facts.restart.first_batch, book.last_persisted_time_ms, time_ms)


def ledgers(facts: QueryFacts, book: BatchBook, b: int) -> dict[int, tuple[int, ...]]:
    """A redelivering source partition's message ids behind batch ``b``'s offsets (its fetch ledger)."""
    start, end = book.plans[b].bounds
    return {sp: layer.ids(start[sp], end[sp]) for sp, layer in facts.fetchers.items()}


def batch_records(facts: QueryFacts, book: BatchBook, b: int) -> list[Record]:
    """The input of batch ``b``: its offsets' records, a redelivering source's through its fetch ledger."""
    return facts.data.slice(*book.plans[b].bounds, ledgers(facts, book, b))


class Watermarks:
    """The watermark trackers batch after batch (spec section 2): batch b+1's advance from b's with the largest
    event times b's tasks saw (``maxima``: the task effects' ``event_time_maxima``)."""

    def __init__(self, facts: QueryFacts, book: BatchBook, maxima: Callable[[int], list[list[dict[str, int]]]]):
        self.ops, self.obs, self.trackers, self.maxima = facts.ops, facts.obs, book.trackers, maxima
        self.uses_watermark, self.first_batch = facts.shape.uses_watermark, facts.restart.first_batch

    def trackers_for(self, b: int) -> list[dict[str, Any]]:
        if not self.uses_watermark:
            return self.trackers[self.first_batch]  # no event-time watermark: nothing to track
        if b not in self.trackers:
            self.trackers[b] = self.trackers_after(b - 1)
        return self.trackers[b]

    def trackers_after(self, b: int) -> list[dict[str, Any]]:
        if not self.uses_watermark:
            return self.trackers_for(b)
        if b + 1 in self.trackers:
            return self.trackers[b + 1]
        after = advance_trackers(self.ops, self.trackers_for(b), self.maxima(b))
        self.trackers[b + 1] = after
        return after

    def note_watermark(self, b: int) -> None:
        """The observer learns the watermark batch ``b`` runs with (the one ``commits/b`` will hold)."""
        self.obs.batches[b]["watermark_ms"] = watermarks_of(self.trackers_for(b))[0]
