"""The declared seams between the protocol and a backend: the only places where backends differ.

The protocol of spec section 2 is written once (``incarnation.Incarnation``):
its step graph, the driver steps' effects, the restart plan, the fault table.
A backend (the reference, the simulator, the PySpark engine) runs that same
protocol and differs from the others only here. Each seam is a small set of
named hooks, declared as a protocol below; a backend implements each as one
object, a part, and passes its parts in (``environment.Environment``: the
step-graph policy, and a factory that builds the other parts from the
records each reads, ``records.py``). The incarnation's own hooks delegate to
its parts (``Incarnation.seams``):

- ``Storage`` (``storage.py``, a constructor argument): where the checkpoint's
  files live. The reference and the simulator hold them in memory (the
  simulator charges each operation on its storage service); the PySpark
  engine writes a real checkpoint directory.
- ``Clock``: the driver's logical time, where batches end and when a batch may
  plan. The reference's is logical (``clock.LogicalClock``); the simulator's
  is SimPy's (volume mode cuts a batch when its ``plan`` starts); the PySpark
  engine paces plans and cuts open batches on the wall clock.
- ``TaskEffects``: where and how a task step's effect happens. In process in
  the reference and the simulator's data mode (``task_effects.py``), by counts
  in volume mode, on Spark's executors in the PySpark engine (the driver
  records what each task reported).
- ``StepCosts``: what a step costs in time. The simulator's cost model
  (``sim.timed_incarnation.SimCosts``; a purge's round is decided when the
  step starts, ``BatchBook.decided_purges``, and its cost charges it); the
  reference is untimed; the PySpark engine's steps take the time they take.
- ``ProgressReporter``: what a batch's progress and its records' latency are.
  Durations 0 in the reference; simulated durations and latency books in the
  simulator; wall times, listeners and sink deliveries in the PySpark engine.
- ``StepGraph``: how the scheduler holds and runs the step graph
  (``graph.py``). The reference and the PySpark engine take the whole graph
  up front (the engine's grows with each open batch); the simulator builds it
  batch by batch from templates.

What a backend must not do is replace a driver step's effect (``step_plan``,
``step_offset_log_write``, ``step_purge``, ``step_sink_commit``,
``step_commit_log_write``, ``step_source_commit``): those are the protocol's,
and the hooks above are where a driver step meets a backend. Task steps are
both: the protocol names them, and ``TaskEffects`` says where they happen. A
model variant (a planted bug, a protocol alternative the explorer checks)
overrides the step effects on ``Incarnation`` itself
(``incarnation.MODEL_VARIANT_SURFACE``), and wins over the part, since the
graph dispatches to the incarnation. ``tests/quick/test_seams.py`` holds every
backend to these seams: its incarnation class overrides nothing of the
protocol, and no part is handed the incarnation.

Models: TigerBeetle's replica takes its storage, time and message bus as
parameters (``ReplicaType(StateMachine, MessageBus, Storage, Time)``); Spark's ``AsyncProgressTrackingMicroBatchExecution`` changes
``MicroBatchExecution`` by overriding a few named hooks. A new mode of the
protocol (a new step-graph shape, ``graph.BatchShape``) is built once, in the
protocol, and reaches every backend through these seams.
"""

from __future__ import annotations

import inspect
from typing import Callable, Mapping, Protocol

from .graph import BatchShape, Node
from .outcome import ProgressEvent
from .records import BatchPlan
from .recovery import RestartPlan
from ..language.steps import NodeId


class Clock(Protocol):
    """When things happen to an incarnation: spec section 1 (triggers: where a batch ends, when it plans) and
    section 2 (async progress persists an offset entry once ``checkpoint_interval_ms`` has passed; faults
    ``at.time_ms``).

    The reference's clock is logical (``clock.LogicalClock``: batch b plans at b x max(trigger interval, 100 ms)).
    The simulator's is SimPy's (its scheduler also asks ``plan_ready_ms`` and ``has_batch``, see
    ``sim.timed_incarnation``); the PySpark engine paces plans and cuts open batches on the wall clock.
    """

    def logical_time_ms(self, batch: int) -> int:
        """The driver's time while it runs ``batch``'s steps, with any injected ``clock_skew``: what the
        async-progress cadence and the faults placed at a time read."""
        ...

    def plan_batches(self, restart: RestartPlan) -> None:
        """Fill ``plans`` with the batches known when the incarnation starts: the re-runs of ``restart``,
        then the cuts this clock decides in advance; a clock that cuts while it runs leaves the next one open."""
        ...

    def cut_now(self, batch: int) -> tuple[int, ...]:
        """An open batch's end offsets: what has arrived by the time its ``plan`` runs."""
        ...

    def await_plan(self, batch: int) -> None:
        """Wait until ``batch`` may plan: a wall-clock backend waits here for its trigger and its input; a
        backend whose scheduler decides when ``plan`` runs returns at once."""
        ...


class TaskEffects(Protocol):
    """Where and how a task step's effect happens (spec section 2, the task steps; section 3, the files they
    leave): in process in the reference (``task_effects.InProcessTaskEffects``), by counts in the simulator's
    volume mode, on Spark's executors in the PySpark engine (the driver's step records what the task reported).

    The ``step_*`` hooks are the task steps (a tagged commit step names its ``store``). The last three are
    where driver steps reach what the tasks left: the sink's files, the state files, the executors.
    """

    snapshot_format: str | None   # the snapshot format this backend's state stores write (None: the reference's)

    def step_state_load(self, b: int, p: int) -> None: ...
    def step_task_apply(self, b: int, p: int) -> None: ...
    def step_changelog_write(self, b: int, p: int, store: str | None = None) -> None: ...
    def step_state_commit(self, b: int, p: int, store: str | None = None) -> None: ...
    def step_snapshot_upload(self, b: int, p: int) -> None: ...
    def step_sink_write(self, b: int, p: int) -> None: ...

    def uid(self, b: int, p: int) -> str:
        """The lineage id of the current attempt of task (b, p) (spec section 3: files carry it)."""
        ...

    def event_time_maxima(self, b: int) -> list[list[dict[str, int]]]:
        """Batch ``b``'s largest event times, per partition and operator: what its tasks saw."""
        ...

    def commit_output(self, b: int) -> None:
        """``sink_commit``: the tasks' output of batch ``b`` becomes the batch's (the exactly-once manifest)."""
        ...

    def purge_state_files(self, b: int) -> None:
        """``purge``: delete the state files retention no longer keeps."""
        ...

    def batch_committed(self, b: int) -> None:
        """``commit_log_write`` of ``b`` is done (written, or skipped between async-progress entries): where
        the tasks run, they may learn it."""
        ...


class StepNode(Protocol):
    """What a cost is charged for: one node of the step graph as a timed scheduler runs it."""

    step: str
    batch: int
    partition: int

    @property
    def background(self) -> bool: ...


class StepCosts(Protocol):
    """What a step costs on a timed backend's clock: spec section 2's steps, whose times make section 4's
    ``durationMs``. The simulator implements it (``sim.timed_incarnation.SimCosts`` charges the driver
    steps, its data and volume modes' subclasses the task steps; a purge's round, decided when it starts,
    is in ``BatchBook.decided_purges``); the reference is untimed, and the PySpark engine's steps take the
    time they take."""

    def cost_ms(self, node: StepNode) -> float:
        """The step's time, charged when it starts; its effect lands when the time is over."""
        ...

    def retry_cost_ms(self) -> float:
        """What rescheduling a failed task attempt costs."""
        ...


class ProgressReporter(Protocol):
    """What a backend measures and reports of each batch: spec section 4's ``progress`` (Spark's
    ``StreamingQueryProgress``, from its ``ProgressReporter``) and ``timing`` (when output became visible).
    The reference is untimed: its durations are 0 and it measures no latency."""

    def progress_event(self, b: int) -> ProgressEvent:
        """Batch ``b``'s progress record (``source_commit`` hands it to the observer)."""
        ...

    def output_visible(self, b: int) -> None:
        """``sink_commit`` of ``b`` is done: its output is visible now (a timed backend ends latencies here)."""
        ...

    def progress_reported(self, b: int) -> None:
        """``source_commit`` of ``b`` recorded its progress event (Spark's engine tells its listeners)."""
        ...


class StepGraph(Protocol):
    """How a backend's scheduler holds and runs the step graph (spec section 2, ``graph.py``): the reference and
    the PySpark engine take the whole graph up front, the simulator builds it batch by batch from the shape.
    An open-ended incarnation adds each batch's nodes when the batch before it plans. A policy holds no
    records: the incarnation hands it the shape and the plans."""

    store_commit_nodes: bool   # parallel store commit: each store's commit is a node of its own

    def build_graph(self, shape: BatchShape, plans: Mapping[int, BatchPlan]) -> dict[NodeId, Node]:
        """The graph the scheduler starts from (the reference: every planned batch's nodes)."""
        ...

    def nodes_added(self, nodes: list[Node]) -> None:
        """A batch's nodes joined the graph while it runs (a scheduler that caches the graph hears it here)."""
        ...

    def run_step(self, node_id: NodeId, background: bool, apply: Callable[[NodeId], None]) -> None:
        """Apply one node's effect (``apply(node_id)``: ``step_<name>``); a wall-clock backend may time it here, as
        Spark's ``reportTimeTaken`` times each phase."""
        ...


SEAMS: tuple[type, ...] = (Clock, TaskEffects, StepCosts, ProgressReporter, StepGraph)


def seam_members(seam: type) -> frozenset[str]:
    """The names a seam declares: its hooks and attributes."""
    hooks = {name for name, value in vars(seam).items() if inspect.isfunction(value) or isinstance(value, property)}
    return frozenset({name for name in hooks | set(vars(seam).get("__annotations__", {}))
                      if not name.startswith("_")})
