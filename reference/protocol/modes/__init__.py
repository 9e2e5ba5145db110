"""The execution modes of the protocol: one class per mode, each owning every rule of its mode (issue 37).

``micro_batch.MicroBatch`` is Spark's ``MicroBatchExecution``: the synchronous
protocol, and the base of every other mode. Each other mode is a subclass that
overrides the hooks where it differs, as Spark's
``AsyncProgressTrackingMicroBatchExecution`` overrides a few methods of
``MicroBatchExecution`` and keeps its own validation in the same file:

- ``micro_batch.AsyncProgress``: asynchronous progress tracking;
- ``real_time.RealTime``: Spark's real-time mode;
- ``bounded_replay.BoundedReplay``: real-time mode persisting its progress inside a batch (beyond Spark).

A mode owns its scenario rules (``check``), its step-graph shape (``shape``),
its restart rule (``on_start``, ``restart_plan``), its clock's cuts
(``untimed_cut``), what its driver steps log and purge, and the numbers the
judge reads off its graph (``replay_most``, ``replay``). The incarnation, the
oracles and the simulator ask the mode; none of them reads the engine
section's mode flags. ``mode_of`` is the one constructor: it reads the engine
section's mode name (``EngineConfig.mode_name``, the only reader of the flags)
and finds the class of that name among this package's modules, so a new mode
is one new module here.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil

from ...language.engine_config import EngineConfig
from ...language.scenario import Scenario
from ..graph import BatchShape
from .micro_batch import MicroBatch, ReplayRule

__all__ = ["MicroBatch", "ReplayRule", "checked", "mode_named", "mode_of", "shape_of"]


@functools.cache
def _modes() -> dict[str, type[MicroBatch]]:
    """Every mode class of this package's modules, by name."""
    for module in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{module.name}")
    found: dict[str, type[MicroBatch]] = {}
    pending: list[type[MicroBatch]] = [MicroBatch]
    while pending:
        cls = pending.pop()
        assert found.get(cls.name, cls) is cls, f"two modes are named {cls.name!r}: {found[cls.name]} and {cls}"
        found[cls.name] = cls
        pending += cls.__subclasses__()
    return found


def mode_named(cfg: EngineConfig) -> MicroBatch:
    """The mode the engine section names, unchecked against the rest of the scenario."""
    name = cfg.mode_name
    modes = _modes()
    assert name in modes, f"no mode named {name!r} in reference/protocol/modes/ (modes: {sorted(modes)})"
    return modes[name](cfg)


def mode_of(scenario: Scenario) -> MicroBatch:
    """The scenario's execution mode. Refusing what the mode cannot run is ``checked``'s."""
    return mode_named(scenario.engine)


def checked(scenario: Scenario) -> Scenario:
    """The scenario, once its mode has checked it: ``ScenarioError`` names the field its mode refuses (Spark
    refuses these when the query starts). Every backend's run and every command that reads a scenario file
    checks it."""
    mode_of(scenario).check(scenario)
    return scenario


def shape_of(scenario: Scenario, *, store_commit_nodes: bool = True) -> BatchShape:
    """The step graph's shape of the scenario's mode (``store_commit_nodes`` as ``graph.GraphShape.of``)."""
    return mode_of(scenario).shape(scenario, store_commit_nodes=store_commit_nodes)
