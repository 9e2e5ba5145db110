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

import contextvars
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable

from experiments.backends import get_backend, run_backend
from experiments.experiment import Experiment, Point
from experiments.outcome_metrics import WARMUP_BATCHES
from experiments.stopping import TIMEOUT_SHARE, Round, run_in_rounds
from reference.language.scenario import Scenario
from reference.protocol.backend import RunOptions, RunResult
from reference.protocol.outcome import Outcome

if TYPE_CHECKING:
    from sim import Simulation

SIMULATED, WALL = "simulated", "wall"


@dataclass
class _RoundRuns:
    """The runs one round of a timed point makes (``measure_point``): the last run of the point's own scenario
    (by name), and the simulated time of every simulator run."""

    scenario: str | None
    own: Callable[[], Outcome] | None = None
    simulated_s: float = 0.0
    runs: list[str] = field(default_factory=list)


_ROUND: contextvars.ContextVar[_RoundRuns | None] = contextvars.ContextVar("lightspeed_round", default=None)


def _ran(name: str, outcome: Callable[[], Outcome], simulated_ms: float | None) -> None:
    """Tell the round being measured (if any) that a run of scenario ``name`` ended."""
    runs = _ROUND.get()
    if runs is None:
        return
    runs.runs.append(name)
    if name == runs.scenario:
        runs.own = outcome
    if simulated_ms is not None:
        runs.simulated_s += simulated_ms / 1000.0


def batch_durations(outcome: Outcome) -> list[float]:
    """Every micro-batch's ``triggerExecution`` (ms) after the warm-up batches (all of them when too few)."""
    values = [float(p.duration_ms["triggerExecution"]) for p in outcome.progress
              if p.duration_ms.get("triggerExecution") is not None]
    return values[WARMUP_BATCHES:] if len(values) > WARMUP_BATCHES + 1 else values


def clock_of(point: Point) -> str:
    """The clock a point's time is counted on: simulated on the simulator, wall time elsewhere."""
    return SIMULATED if point.backend == "sim" else WALL


def measure_point(experiment: Experiment, point: Point) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """A point's metrics, measured the one way every backend shares: in rounds until its p50 is precise or its
    budget ends when the experiment's ``stopping`` covers it (``experiments.stopping``; the second value is then
    the stopping report), else by one call of its ``measure``."""
    stopping = experiment.stopping
    if stopping is None or not stopping.applies(point.task):
        return experiment.measure(point), None
    clock = clock_of(point)

    def one_round(scenario: dict[str, Any]) -> tuple[dict[str, Any], Round]:
        p = replace(point, scenario=scenario)
        runs = _RoundRuns(scenario.get("name"))
        token = _ROUND.set(runs)
        started = time.perf_counter()
        try:
            metrics = experiment.measure(p)
        finally:
            _ROUND.reset(token)
        wall = time.perf_counter() - started
        durations = batch_durations(runs.own()) if runs.own is not None else []
        return metrics, Round(durations, runs.simulated_s if clock == SIMULATED else wall)

    cap = experiment.point_timeout_s * TIMEOUT_SHARE if clock == WALL else None
    return run_in_rounds(point.scenario, point.seed, stopping, one_round, clock, cap)


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
    result = run_backend(point.backend, sc, point_options(point, **options))
    simulated = (result.outcome.details.get("sim") or {}).get("end_time_ms") if point.backend == "sim" else None
    _ran(sc.name, lambda: result.outcome, simulated)
    return result


def simulate_point(point: Point, scenario: dict[str, Any] | None = None, *, trace: bool = False) -> "Simulation":
    """Simulate the point's scenario (or ``scenario``) with its profile and mode; the whole ``sim.Simulation``,
    with its trace when ``trace``."""
    from sim import simulate
    from sim.cost_model import resolve_profile, with_storage_profile
    sc = Scenario.from_dict(scenario if scenario is not None else point.scenario)
    profile: Any = point.profile
    if point.extra.get("storage_profile") is not None:
        profile = with_storage_profile(resolve_profile(profile), point.extra["storage_profile"])
    sim = simulate(sc, profile, mode=point.sim_mode, trace_enabled=trace)
    _ran(sc.name, sim.outcome, sim.end_ms)
    return sim
