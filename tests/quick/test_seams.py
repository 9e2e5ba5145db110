"""Every backend differs from the reference only through its environment (``reference/protocol/environment.py``).

An incarnation is given its parts: a ``StepGraph`` policy and, built from its
records, a ``Clock``, ``TaskEffects`` and ``ProgressReporter`` (the seams of
``reference/protocol/seams.py``). A backend is a factory of those parts (a timed one adds
``StepCosts``): its incarnation class (if it has one, to add what its scheduler
asks) overrides nothing of the protocol, so it never replaces a driver step. Each part
implements its seam and is handed the records it reads (``records.py``), never
the incarnation nor the whole bundle of records. A model variant (a planted
bug) subclasses ``reference.protocol.incarnation.Incarnation`` and overrides the
protocol itself, so that surface must stay where it was.
"""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from reference.language.catalogue import make
from reference.language.steps import DRIVER_STEPS
from reference.protocol.clock import LogicalClock
from reference.protocol.environment import REFERENCE, Environment, Parts, Records, WholeGraph, reference_parts
from reference.protocol.incarnation import MODEL_VARIANT_SURFACE, STEP_EFFECTS, Incarnation
from reference.protocol.observer import Observer
from reference.protocol.outcome import ProgressEvent
from reference.protocol.progress import UntimedProgress
from reference.protocol.recovery import fresh_plan
from reference.protocol.seams import SEAMS, Clock, ProgressReporter, StepCosts, StepGraph, TaskEffects, seam_members
from reference.protocol.sources import SourceData
from reference.protocol.storage import DurableStorage
from reference.protocol.task_effects import InProcessTaskEffects
from sim.data_mode import DataCosts, DataIncarnation, DataProgress
from sim.cost_model import shipped_profile
from sim.simulation import Simulation
from sim.timed_incarnation import MODE_INTERFACE, BatchByBatchGraph, SimClock, TimedIncarnation
from sim.volume import CountedTaskEffects, VolumeClock, VolumeCosts, VolumeIncarnation, VolumeProgress
from spark_impl.engine.incarnation import ExecutorTaskEffects, MeasuredProgress, SparkGraph, SparkIncarnation, WallClock

SEAM_HOOKS = frozenset().union(*(seam_members(seam) for seam in SEAMS))
BACKENDS = (TimedIncarnation, DataIncarnation, VolumeIncarnation, SparkIncarnation)
# every backend's part, by the seam it implements
PARTS: dict[type, tuple[type, ...]] = {
    Clock: (LogicalClock, SimClock, VolumeClock, WallClock),
    TaskEffects: (InProcessTaskEffects, CountedTaskEffects, ExecutorTaskEffects),
    ProgressReporter: (UntimedProgress, DataProgress, VolumeProgress, MeasuredProgress),
    StepGraph: (WholeGraph, BatchByBatchGraph, SparkGraph),
    StepCosts: (DataCosts, VolumeCosts),
}
ALL_PARTS = tuple(part for parts in PARTS.values() for part in parts)


def overridden(cls: type, base: type) -> set[str]:
    """The names of ``base`` that ``cls`` or a class between them defines again (dunders aside)."""
    between = cls.__mro__[:cls.__mro__.index(base)]
    return {name for klass in between for name in vars(klass)
            if hasattr(base, name) and not (name.startswith("__") and name.endswith("__"))}


def reaches_past(part: type) -> set[str]:
    """The constructor parameters of ``part`` through which it would hold more than its records: the incarnation
    (or anything named for it) or the whole bundle of records."""
    params = inspect.signature(part.__init__).parameters.values()   # type: ignore[misc]
    return {p.name for p in params if p.name != "self" and ("Incarnation" in str(p.annotation)
                                                            or str(p.annotation) == "Records")}


def held_incarnations(parts: Parts) -> list[str]:
    """The attributes of an incarnation's parts that hold an incarnation or the records bundle, directly or as a
    bound method's owner."""
    found = []
    for seam, part in vars(parts).items():
        for name, value in (vars(part) if part is not None else {}).items():
            owner = getattr(value, "__self__", value)
            if isinstance(owner, (Incarnation, Records)):
                found.append(f"{seam}.{name}")
    return found


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda cls: cls.__name__)
def test_a_backend_overrides_nothing_of_the_protocol(backend):
    assert overridden(backend, Incarnation) == set()


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda cls: cls.__name__)
def test_no_backend_replaces_a_driver_step(backend):
    assert overridden(backend, Incarnation) & {f"step_{step}" for step in DRIVER_STEPS} == set()


def test_the_check_rejects_a_backend_that_replaces_a_driver_step_or_a_helper():
    class PurgesItsOwnWay(DataIncarnation):
        def step_purge(self, b: int) -> None:
            pass

        def known_logs(self) -> dict[str, list[int]]:
            return {}

    assert overridden(PurgesItsOwnWay, Incarnation) == {"step_purge", "known_logs"}


@pytest.mark.parametrize("seam", list(PARTS), ids=lambda seam: seam.__name__)
def test_each_part_implements_every_hook_of_its_seam(seam):
    for part in PARTS[seam]:
        missing = {name for name in seam_members(seam) if not hasattr(part, name)
                   and name not in inspect.signature(part.__init__).parameters}
        assert missing == set(), f"{part.__name__} lacks {missing} of {seam.__name__}"


@pytest.mark.parametrize("part", ALL_PARTS, ids=lambda cls: cls.__name__)
def test_a_part_is_handed_the_records_it_reads_not_the_incarnation(part):
    assert not any(issubclass(part, backend) for backend in (Incarnation,)), part
    assert reaches_past(part) == set()


def test_the_check_rejects_a_part_that_reaches_past_its_records():
    class ReadsEverything:
        def __init__(self, records: Records, inc: Incarnation):
            self.records, self.inc = records, inc

    assert reaches_past(ReadsEverything) == {"records", "inc"}


def _reference(environment: Environment = REFERENCE, cls: type[Incarnation] = Incarnation) -> Incarnation:
    scenario = make("aggregate", "async_state")
    return cls(scenario, SourceData.of(scenario), DurableStorage(), fresh_plan(2), 0, Observer(),
               environment=environment)


def test_no_part_of_a_running_incarnation_holds_it():
    sc = make("aggregate", "async_state")
    incarnations = [_reference()]
    for mode in ("data", "volume"):
        incarnations.append(Simulation(sc, shipped_profile(), mode, trace_enabled=False).new_incarnation(fresh_plan(2), 0))
    for inc in incarnations:
        assert held_incarnations(inc.seams) == [], type(inc).__name__


def test_the_check_rejects_a_backend_whose_part_holds_the_incarnation():
    class AsksTheIncarnation:
        """A progress reporter that reads the incarnation instead of the records it was handed."""

        def __init__(self, inc: Incarnation):
            self.inc = inc

        def progress_event(self, b: int) -> ProgressEvent:
            return self.inc.progress_event(b)

        def output_visible(self, b: int) -> None:
            pass

        def progress_reported(self, b: int) -> None:
            pass

    class HandsItselfOver(Incarnation):
        def __init__(self, *args: Any, **kwargs: Any):
            kwargs["environment"] = Environment(WholeGraph(), self.leaky_parts)
            super().__init__(*args, **kwargs)

        def leaky_parts(self, records: Records) -> Parts:
            parts = reference_parts(records)
            return Parts(parts.clock, parts.effects, AsksTheIncarnation(self))

    inc = _reference(cls=HandsItselfOver)
    assert held_incarnations(inc.seams) == ["progress.inc"]
    assert reaches_past(AsksTheIncarnation) == {"inc"}


def test_the_reference_implements_every_seam_it_declares_except_costs():
    """The reference's environment has a part for every seam but the costs (it is untimed)."""
    assert set(PARTS) == set(SEAMS)
    inc = _reference()
    for seam, part in ((Clock, inc.seams.clock), (TaskEffects, inc.seams.effects),
                       (ProgressReporter, inc.seams.progress), (StepGraph, inc.graph)):
        assert all(hasattr(part, name) for name in seam_members(seam)), seam.__name__
        assert type(part) in PARTS[seam]


def test_the_simulator_brings_the_costs():
    """The simulator's incarnations are given their costs; the reference's and the engine's have none."""
    sc = make("aggregate", "async_state")
    for mode, costs in (("data", DataCosts), ("volume", VolumeCosts)):
        inc = Simulation(sc, shipped_profile(), mode, trace_enabled=False).new_incarnation(fresh_plan(2), 0)
        assert type(inc.seams.costs) is costs and inc.costs is inc.seams.costs
    assert _reference().seams.costs is None


def test_the_seams_are_small_and_disjoint():
    members = [seam_members(seam) for seam in SEAMS]
    assert sum(len(m) for m in members) == len(SEAM_HOOKS), "a hook belongs to one seam"
    assert all(len(m) <= 12 for m in members)
    assert set(STEP_EFFECTS) & SEAM_HOOKS == {"step_state_load", "step_task_apply", "step_changelog_write",
                                              "step_state_commit", "step_snapshot_upload", "step_sink_write"}


def test_a_model_variant_finds_the_surface_it_overrides_and_the_state_it_reads():
    """Planted bugs subclass ``reference.protocol.incarnation.Incarnation``: every step effect and planning hook
    on it, and the records' fields under their old names on an instance."""
    for name in MODEL_VARIANT_SURFACE + ("known_logs", "purge_round_of", "next_purge_round", "fail_task",
                                         "lose_executor", "cut_now", "nodes_added", "logical_time_ms"):
        assert callable(getattr(Incarnation, name)) or isinstance(getattr(Incarnation, name), type)
    inc = _reference()
    for attribute in ("plans", "storage", "tasks", "lineage", "stores", "persisted_offsets", "data", "sc", "cfg",
                      "nodes", "shape", "store_ids", "parts", "trackers", "restart", "obs", "placement"):
        assert hasattr(inc, attribute), attribute
    assert inc.plans is inc.book.plans and inc.tasks is inc.table.tasks and inc.sc is inc.facts.sc
    assert sorted(inc.plans) == list(range(4)) and inc.known_logs() == {"offsets": [], "commits": []}


def test_a_variant_step_wins_over_the_part_that_implements_it():
    """The graph dispatches to the incarnation: a variant's ``step_task_apply`` runs, not the effects part's."""
    ran: list[tuple[int, int]] = []

    class SkipsTheTasks(Incarnation):
        def step_task_apply(self, b: int, p: int) -> None:
            ran.append((b, p))

    inc = _reference(cls=SkipsTheTasks)
    node = next(n for n in inc.nodes if n.step == "task_apply")
    inc.run_step(node)
    assert ran == [(node.batch, node.partition)] and inc.tasks.get((node.batch, node.partition)) is None


@pytest.mark.parametrize("mode", (DataIncarnation, VolumeIncarnation), ids=lambda cls: cls.__name__)
def test_a_simulator_mode_builds_its_parts_and_implements_the_mode_interface(mode):
    """What a mode of the simulator adds beside its parts: ``TimedIncarnation`` leaves these to its modes."""
    assert overridden(mode, TimedIncarnation) >= {"sim_parts", "has_batch", "plan_ready_ms"}
    assert set(overridden(mode, TimedIncarnation)) <= set(MODE_INTERFACE) | set(vars(mode))


def test_every_backend_incarnation_is_the_protocols():
    assert all(issubclass(backend, Incarnation) for backend in BACKENDS)
