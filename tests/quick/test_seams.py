"""Every backend differs from the reference only through the declared seams (``reference/protocol/seams.py``).

A backend's incarnation class may override a hook of ``Clock``, ``TaskEffects``,
``StepCosts``, ``ProgressReporter`` or ``StepGraph``, and add methods of its
own; it never replaces a driver step's effect. A simulator mode adds to that
only the mode interface of ``sim.timed_incarnation``. A model variant (a
planted bug) subclasses ``reference.protocol.incarnation.Incarnation`` and overrides the
protocol itself, so that surface must stay where it was.
"""

from __future__ import annotations

import pytest

from reference.language.catalogue import make
from reference.protocol.incarnation import MODEL_VARIANT_SURFACE, STEP_EFFECTS, Incarnation
from reference.protocol.observer import Observer
from reference.protocol.recovery import fresh_plan
from reference.protocol.seams import SEAMS, Clock, ProgressReporter, StepCosts, StepGraph, TaskEffects, seam_members
from reference.protocol.sources import SourceData
from reference.language.steps import DRIVER_STEPS
from reference.protocol.storage import DurableStorage
from sim.data_mode import DataIncarnation
from sim.timed_incarnation import MODE_INTERFACE, TimedIncarnation
from sim.volume import VolumeIncarnation
from spark_impl.engine.incarnation import SparkIncarnation

SEAM_HOOKS = frozenset().union(*(seam_members(seam) for seam in SEAMS))
BACKENDS = (TimedIncarnation, DataIncarnation, VolumeIncarnation, SparkIncarnation)
# set on every class by the protocols' metaclass, not by the class's author
MACHINERY = frozenset({"_abc_impl", "_is_protocol", "_is_runtime_protocol"})


def overridden(cls: type, base: type) -> set[str]:
    """The names of ``base`` that ``cls`` or a class between them defines again."""
    between = cls.__mro__[:cls.__mro__.index(base)]
    return {name for klass in between for name in vars(klass)
            if hasattr(base, name) and name not in MACHINERY and not (name.startswith("__") and name.endswith("__"))}


def off_seam(cls: type) -> set[str]:
    """What ``cls`` overrides of the reference's incarnation that no seam declares (a simulator mode may also
    override its mode interface)."""
    allowed = SEAM_HOOKS | (set(MODE_INTERFACE) if issubclass(cls, TimedIncarnation) else set())
    out = overridden(cls, Incarnation) - SEAM_HOOKS
    if issubclass(cls, TimedIncarnation) and cls is not TimedIncarnation:
        out |= overridden(cls, TimedIncarnation) - allowed
    return out


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda cls: cls.__name__)
def test_a_backend_overrides_only_the_hooks_its_seams_declare(backend):
    assert off_seam(backend) == set()


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda cls: cls.__name__)
def test_no_backend_replaces_a_driver_step(backend):
    assert overridden(backend, Incarnation) & {f"step_{step}" for step in DRIVER_STEPS} == set()


def test_the_check_catches_a_backend_that_replaces_a_driver_step_or_a_helper():
    class PurgesItsOwnWay(DataIncarnation):
        def step_purge(self, b: int) -> None:
            pass

        def known_logs(self) -> dict[str, list[int]]:
            return {}

    assert off_seam(PurgesItsOwnWay) == {"step_purge", "known_logs"}


def test_the_reference_implements_every_seam_it_declares_except_costs():
    """Each hook of the reference's seams has a body on ``Incarnation`` (the protocols only declare them); the
    simulator brings the costs."""
    for seam in (Clock, TaskEffects, ProgressReporter, StepGraph):
        for name in seam_members(seam):
            owner = next(klass for klass in Incarnation.__mro__ if name in vars(klass)
                         or name in vars(klass).get("__annotations__", {}))
            assert owner not in SEAMS, f"{seam.__name__}.{name} has no implementation in the reference"
    for name in seam_members(StepCosts):
        assert next(k for k in TimedIncarnation.__mro__ if name in vars(k)) not in SEAMS, name


def test_the_seams_are_small_and_disjoint():
    members = [seam_members(seam) for seam in SEAMS]
    assert sum(len(m) for m in members) == len(SEAM_HOOKS), "a hook belongs to one seam"
    assert all(len(m) <= 12 for m in members)
    assert set(STEP_EFFECTS) & SEAM_HOOKS == {"step_state_load", "step_task_apply", "step_changelog_write",
                                              "step_state_commit", "step_snapshot_upload", "step_sink_write"}


def test_a_model_variant_finds_the_surface_it_overrides_and_the_state_it_reads():
    """Planted bugs subclass ``reference.protocol.incarnation.Incarnation``: every step effect and planning hook
    on it, and the state they read on an instance."""
    for name in MODEL_VARIANT_SURFACE + ("known_logs", "purge_round_of", "ensure_stores", "fail_task",
                                         "lose_executor", "cut_now", "nodes_added", "logical_time_ms"):
        assert callable(getattr(Incarnation, name)) or isinstance(getattr(Incarnation, name), type)
    scenario = make("aggregate", "async_state")
    inc = Incarnation(scenario, SourceData.of(scenario), DurableStorage(), fresh_plan(2), 0, Observer())
    for attribute in ("plans", "storage", "tasks", "lineage", "stores", "persisted_offsets", "data", "sc", "cfg",
                      "nodes", "shape", "store_ids", "parts", "trackers", "restart", "obs", "placement"):
        assert hasattr(inc, attribute), attribute
    assert sorted(inc.plans) == list(range(4)) and inc.known_logs() == {"offsets": [], "commits": []}


def test_every_backend_incarnation_is_the_protocols():
    assert all(issubclass(backend, Incarnation) for backend in BACKENDS)
