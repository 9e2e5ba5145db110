"""The incarnation's names for its records' fields and parts, read by the protocol's mixins and model variants.

The protocol's own effects (``driver_steps.DriverSteps``, ``task_retry.TaskRetries``)
and the model variants that override them (planted bugs, explorer alternatives)
read an incarnation's memory as ``self.plans``, ``self.tasks``, ``self.cfg``:
``IncarnationViews`` names each field of the records (``records.py``) once, as
a ``record_field`` of the record that holds it, so those names stay while the memory
lives in typed records that a part (``environment.py``) receives on its own.
It holds no state itself. It also holds the small readers the mixins share: a
node's id, a task step's nodes, opening a batch.
"""

from __future__ import annotations

from operator import attrgetter
from typing import Any

from .graph import BatchShape, Node
from .modes import MicroBatch
from .observer import Observer
from .rebalancing import PlacementTimeline
from .records import BatchBook, BatchPlan, QueryFacts, TaskState, TaskTable, Watermarks, batch_records, ledgers
from .recovery import RestartPlan
from .redelivery import FetchLayer
from ..language.scenario import EngineConfig, OperatorSpec, Scenario
from .sources import Record, SourceData
from .state_store import StateStore
from ..language.steps import NodeId
from .storage import Storage


def record_field(path: str) -> Any:
    """The field ``path`` ("record.field") of one of the incarnation's records, under the field's name: read by
    a C-level getter (the protocol's steps read these on every step), written through to the record."""
    record, name = path.split(".")

    def write(obj: object, value: object) -> None:
        setattr(getattr(obj, record), name, value)
    return property(attrgetter(path), write)


class IncarnationViews:
    """The records' fields under the incarnation's names, and the readers the protocol's mixins share."""

    facts: QueryFacts
    book: BatchBook
    table: TaskTable
    watermarks: Watermarks
    nodes: dict[NodeId, Node]

    sc: Scenario = record_field("facts.sc")
    data: SourceData = record_field("facts.data")
    storage: Storage = record_field("facts.storage")
    number: int = record_field("facts.number")
    restart: RestartPlan = record_field("facts.restart")
    obs: Observer = record_field("facts.obs")
    ops: tuple[OperatorSpec, ...] = record_field("facts.ops")
    store_ids: list[str] = record_field("facts.store_ids")
    mode: MicroBatch = record_field("facts.mode")
    shape: BatchShape = record_field("facts.shape")
    fetchers: dict[int, FetchLayer] = record_field("facts.fetchers")
    recorded_cuts: dict[int, tuple[int, ...]] = record_field("facts.recorded_cuts")
    open_ended: bool = record_field("facts.open_ended")
    cfg: EngineConfig = record_field("facts.cfg")
    parts: int = record_field("facts.parts")

    plans: dict[int, BatchPlan] = record_field("book.plans")
    trackers: dict[int, list[dict[str, Any]]] = record_field("book.trackers")
    persisted_offsets: set[int] = record_field("book.persisted_offsets")
    reported_ends: dict[int, tuple[int, ...]] = record_field("book.reported_ends")
    last_persisted_time_ms: int | None = record_field("book.last_persisted_time_ms")
    last_commit_written: int = record_field("book.last_commit_written")
    last_purged_batch: int = record_field("book.last_purged_batch")
    clock_skew_ms: int = record_field("book.clock_skew_ms")

    tasks: dict[tuple[int, int], TaskState] = record_field("table.tasks")
    stores: dict[tuple[str, int], StateStore] = record_field("table.stores")
    store_executor: dict[tuple[str, int], str] = record_field("table.store_executor")
    lineage: dict[tuple[str, int, int], str] = record_field("table.lineage")
    placement: PlacementTimeline = record_field("table.placement")

    @property
    def uses_watermark(self) -> bool:
        return self.facts.shape.uses_watermark

    # ----------------------------------------------------------- the graph
    def nid(self, step: str, batch: int, partition: int = -1, tag: str = "") -> NodeId:
        return NodeId.of(step, batch, partition, tag)

    def step_nodes(self, step: str, b: int, p: int) -> list[NodeId]:
        """The nodes of a task step of (b, p): one per store under parallel store commit (then the
        partition's own ``state_commit``), else the one node; none when the graph lacks the step."""
        tagged = [self.nid(step, b, p, sid) for sid in self.shape.commit_stores]
        return [n for n in tagged + [self.nid(step, b, p)] if n in self.nodes]

    def maintenance_every(self) -> int:
        return self.shape.maintenance_every()

    # ----------------------------------------------------- a batch's input
    def ledgers(self, b: int) -> dict[int, tuple[int, ...]]:
        return ledgers(self.facts, self.book, b)

    def batch_records(self, b: int) -> list[Record]:
        return batch_records(self.facts, self.book, b)

    # ----------------------------------------------------------- its tasks
    def task(self, b: int, p: int) -> TaskState:
        return self.table.task(b, p)

    def executor_of(self, b: int, p: int) -> str:
        """The executor that runs partition p's task of batch b (``rebalancing.py``)."""
        return self.table.executor_of(b, p)

    # ------------------------------------------------------- its watermark
    def trackers_for(self, b: int) -> list[dict[str, Any]]:
        return self.watermarks.trackers_for(b)

    def trackers_after(self, b: int) -> list[dict[str, Any]]:
        return self.watermarks.trackers_after(b)

    def note_watermark(self, b: int) -> None:
        self.watermarks.note_watermark(b)
