"""The incarnation's names for its records' fields and parts, read by the protocol's mixins and model variants.

The protocol's own effects (``driver_steps.DriverSteps``, ``task_retry.TaskRetries``)
and the model variants that override them (planted bugs, explorer alternatives)
read an incarnation's memory as ``self.plans``, ``self.tasks``, ``self.cfg``:
``IncarnationViews`` names each field of the records (``records.py``) once, as
a ``Field`` of the record that holds it, so those names stay while the memory
lives in typed records that a part (``environment.py``) receives on its own.
It holds no state itself. It also holds the small readers the mixins share: a
node's id, a task step's nodes, opening a batch.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar, overload

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

T = TypeVar("T")


class Field(Generic[T]):
    """A field of one of the incarnation's records (``facts``, ``book`` or ``table``), under the field's name."""

    def __init__(self, record: str):
        self.record = record
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, owner: type) -> Field[T]: ...

    @overload
    def __get__(self, obj: object, owner: type) -> T: ...

    def __get__(self, obj: object | None, owner: type) -> Field[T] | T:
        if obj is None:
            return self
        return getattr(getattr(obj, self.record), self.name)

    def __set__(self, obj: object, value: T) -> None:
        setattr(getattr(obj, self.record), self.name, value)


class IncarnationViews:
    """The records' fields under the incarnation's names, and the readers the protocol's mixins share."""

    facts: QueryFacts
    book: BatchBook
    table: TaskTable
    watermarks: Watermarks
    nodes: dict[NodeId, Node]

    sc = Field[Scenario]("facts")
    data = Field[SourceData]("facts")
    storage = Field[Storage]("facts")
    number = Field[int]("facts")
    restart = Field[RestartPlan]("facts")
    obs = Field[Observer]("facts")
    ops = Field[tuple[OperatorSpec, ...]]("facts")
    store_ids = Field[list[str]]("facts")
    mode = Field[MicroBatch]("facts")
    shape = Field[BatchShape]("facts")
    fetchers = Field[dict[int, FetchLayer]]("facts")
    recorded_cuts = Field[dict[int, tuple[int, ...]]]("facts")
    open_ended = Field[bool]("facts")
    cfg = Field[EngineConfig]("facts")
    parts = Field[int]("facts")

    plans = Field[dict[int, BatchPlan]]("book")
    trackers = Field[dict[int, list[dict[str, Any]]]]("book")
    persisted_offsets = Field[set[int]]("book")
    reported_ends = Field[dict[int, tuple[int, ...]]]("book")
    last_persisted_time_ms = Field["int | None"]("book")
    last_commit_written = Field[int]("book")
    last_purged_batch = Field[int]("book")
    clock_skew_ms = Field[int]("book")

    tasks = Field[dict[tuple[int, int], TaskState]]("table")
    stores = Field[dict[tuple[str, int], StateStore]]("table")
    store_executor = Field[dict[tuple[str, int], str]]("table")
    lineage = Field[dict[tuple[str, int, int], str]]("table")
    placement = Field[PlacementTimeline]("table")

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
