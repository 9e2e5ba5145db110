"""How a definition's ``measure`` runs its point: on the point's backend, through the backend registry.

``run_point_scenario`` runs a point's scenario (or a variant of it, e.g. with
a crash) with the options the point records: its cost profile and mode for
the simulator, its master for a Spark backend, plus what the definition adds
(``group``, ``straggler``). ``simulate_point`` is the one way past the
registry: a definition that reads the simulator's trace (step start and end
times) runs ``sim.simulate`` itself, since a trace is the simulator's own
instrument and not part of the backend interface.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from experiments.backends import get_backend, run_backend
from experiments.experiment import Point
from reference.protocol.backend import RunOptions, RunResult
from reference.language.scenario import Scenario

if TYPE_CHECKING:
    from sim import Simulation


def point_options(point: Point, **options: Any) -> RunOptions:
    """The ``RunOptions`` of a point: its profile, its simulator mode (for a backend that has modes), its master
    (``extra["master"]``), its checkpoint storage profile (``extra["storage_profile"]``), whether it runs
    realtime (``extra["realtime"]``), and ``options`` given as not None. A backend refuses what it does not
    take."""
    fields: dict[str, Any] = {}
    if point.profile is not None:
        fields["profile"] = point.profile
    if "sim_mode" in get_backend(point.backend).options:
        fields["sim_mode"] = point.sim_mode
    if point.extra.get("master") is not None:
        fields["master"] = point.extra["master"]
    if point.extra.get("storage_profile") is not None:
        fields["storage_profile"] = point.extra["storage_profile"]
    if point.extra.get("realtime"):
        fields["realtime"] = True     # native Spark: paced input, latency measured (experiments.native_runs)
    fields.update({k: v for k, v in options.items() if v is not None})
    return RunOptions(**fields)


def run_point_scenario(point: Point, scenario: dict[str, Any] | None = None, **options: Any) -> RunResult:
    """Run the point's scenario (or ``scenario``) on the point's backend with the point's options."""
    sc = Scenario.from_dict(scenario if scenario is not None else point.scenario)
    return run_backend(point.backend, sc, point_options(point, **options))


def simulate_point(point: Point, scenario: dict[str, Any] | None = None, *, trace: bool = False) -> "Simulation":
    """Simulate the point's scenario (or ``scenario``) with its profile and mode; the whole ``sim.Simulation``,
    with its trace when ``trace``."""
    from sim import simulate
    from sim.cost_model import resolve_profile, with_storage_profile
    sc = Scenario.from_dict(scenario if scenario is not None else point.scenario)
    profile: Any = point.profile
    if point.extra.get("storage_profile") is not None:
        profile = with_storage_profile(resolve_profile(profile), point.extra["storage_profile"])
    return simulate(sc, profile, mode=point.sim_mode, trace_enabled=trace)
