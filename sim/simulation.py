"""A simulated run of one scenario: the cluster, the supervisor that restarts the query, the outcome.

``run_sim(scenario)`` is the simulator's backend entry point (SPEC section 4):
it returns the reference's outcome (``reference.outcome.build_outcome``, from
the simulated run's checkpoint and observer) plus timing fields:
``latency_ms`` (end-to-end latency per record, creation to sink commit, as
percentiles), timed ``progress`` entries, and ``sim`` (profile, mode,
simulated end time, trace size). With ``return_storage=True`` it also
returns the simulated run's checkpoint (a ``reference.storage.DurableStorage``),
so the checkpoint-reading oracles (reconstruction, lineage, retention) can
judge it. Everything random draws from one ``numpy.random.Generator`` seeded
with the scenario's seed (``random_draws.Draws``), and SimPy orders
simultaneous events by their creation, so a seed gives byte-identical bytes.
"""

from __future__ import annotations

from typing import Any, Generator, Literal, overload

import numpy as np
import simpy

from reference.engine import Observer
from reference.outcome import build_outcome
from reference.recovery import fresh_plan, plan_restart
from reference.runner import MAX_RESTARTS, FaultBook, RunResult, _record_recovery
from reference.scenario import Scenario
from reference.sources import SourceData
from reference.storage import CheckpointFormatError, DurableStorage

from .cost_model import Profile, resolve_profile
from .data_mode import DataIncarnation, LatencyBook
from .engine import IncarnationRun, TimedIncarnation
from .faults import fault_clock, split_faults
from .latency import summarize_latency
from .random_draws import Draws
from .storage_service import StorageService
from .trace import Trace

MODES = ("data", "volume")


class Simulation:
    """Structure of one simulated run: storage service, trace, observer, fault book, supervisor."""

    def __init__(self, scenario: Scenario, profile: Profile, mode: str = "data", trace_enabled: bool = True,
                 env: simpy.Environment | None = None):
        if mode not in MODES:
            raise ValueError(f"sim mode {mode!r}: expected one of {', '.join(MODES)}")
        self.scenario, self.profile, self.mode = scenario, profile, mode
        self.env = env if env is not None else simpy.Environment()
        self.rng = Draws(np.random.default_rng(scenario.seed))
        self.service = StorageService(profile.storage, self.rng, DurableStorage())
        self.trace = Trace(trace_enabled)
        self.observer = Observer()
        step_faults, clock_faults = split_faults(scenario.faults)
        self.faults = FaultBook(step_faults)
        self.current_run: IncarnationRun | None = None
        self.incarnation = -1                       # the number of the latest incarnation started
        self.incarnation_started = self.env.event()  # triggered (and replaced) at every start, and at the end
        self.query_ended = False
        self.error: str | None = None
        self.end_ms = 0.0
        if mode == "data":
            self.data: Any = SourceData(scenario)
            self.latency_book: Any = LatencyBook()
        else:
            from .volume import VolumeLatency, VolumeSource
            self.data = VolumeSource(scenario)
            self.latency_book = VolumeLatency()
        self.clock_faults_left = len(clock_faults)   # clock faults that may still fire
        for fault in clock_faults:
            self.env.process(fault_clock(self.env, fault, self))
        self.env.process(query_supervisor(self.env, self))

    def new_incarnation(self, restart: Any, number: int) -> TimedIncarnation:
        common = dict(clock=self.env, profile=self.profile, storage_service=self.service, rng=self.rng,
                      latency_book=self.latency_book)
        if self.mode == "data":
            return DataIncarnation(self.scenario, self.data, self.service.files, restart, number, self.observer,
                                   **common)
        from .volume import VolumeIncarnation
        return VolumeIncarnation(self.scenario, self.data, self.service.files, restart, number, self.observer,
                                 **common)

    def announce_start(self) -> None:
        """Wake the clock faults waiting for an incarnation (a start, or the end of the query)."""
        started, self.incarnation_started = self.incarnation_started, self.env.event()
        started.succeed(self.incarnation)

    def run(self) -> None:
        self.env.run()

    @property
    def storage(self) -> DurableStorage:
        """The simulated run's checkpoint (SPEC section 3 layout; volume mode writes no state files)."""
        return self.service.files

    def outcome(self) -> dict[str, Any]:
        result = RunResult(self.scenario, self.service.files, self.observer, self.error, [])
        out = build_outcome(result, backend="sim")
        out["latency_ms"] = summarize_latency(self.latency_book.segments())
        out["sim"] = {"mode": self.mode, "profile": self.profile.name, "end_time_ms": round(self.end_ms, 3),
                      "trace_events": self.trace.count}
        return out


def query_supervisor(env: simpy.Environment, sim: Simulation) -> Generator:
    """Run incarnation after incarnation until the input is consumed (SPEC section 2's restarts)."""
    sources = len(sim.data.partitions)
    restart = fresh_plan(sources)
    for number in range(MAX_RESTARTS + 1):
        try:
            inc = sim.new_incarnation(restart, number)
        except CheckpointFormatError as exc:
            sim.error = str(exc)
            break
        run = IncarnationRun(env, inc, sim.faults, sim.trace, check_invariants=sim.mode == "data",
                             clock_faults_pending=lambda: sim.clock_faults_left > 0)
        sim.current_run = run
        sim.incarnation = number
        sim.trace.record(env.now, "supervisor", "start", f"incarnation {number} at batch {restart.first_batch}")
        run.start()
        sim.announce_start()
        exc, fatal = yield run.finished
        sim.current_run = None
        if exc is None:
            sim.trace.record(env.now, "supervisor", "finished", f"incarnation {number}")
            break
        sim.observer.note(f"incarnation {number} stopped: {exc}")
        if fatal:
            sim.error = str(exc)
            break
        try:
            restart = plan_restart(sim.service.files, sim.scenario.engine.progress_mode, sources)
        except CheckpointFormatError as fatal_exc:
            sim.error = f"recovery failed: {fatal_exc}"
            break
        _record_recovery(sim.observer, restart, number + 1)
        sim.trace.record(env.now, "supervisor", "restart", f"incarnation {number + 1} after {exc}")
        yield env.timeout(sim.profile.restart_ms)
    else:
        sim.error = f"gave up after {MAX_RESTARTS} restarts"
    sim.end_ms = env.now
    sim.query_ended = True
    sim.announce_start()


def simulate(scenario: Scenario, profile: Profile | dict[str, Any] | str | None = None, *, mode: str = "data",
             trace_enabled: bool = True) -> Simulation:
    """Run a scenario to the end and return the simulation (outcome, trace, storage)."""
    sim = Simulation(scenario, resolve_profile(profile), mode, trace_enabled)
    sim.run()
    return sim


@overload
def run_sim(scenario: Scenario, profile: Profile | dict[str, Any] | str | None = None,
            trace_path: str | None = None, *, mode: str = "data",
            return_storage: Literal[False] = False) -> dict[str, Any]: ...


@overload
def run_sim(scenario: Scenario, profile: Profile | dict[str, Any] | str | None = None,
            trace_path: str | None = None, *, mode: str = "data",
            return_storage: Literal[True]) -> tuple[dict[str, Any], DurableStorage]: ...


def run_sim(scenario: Scenario, profile: Profile | dict[str, Any] | str | None = None,
            trace_path: str | None = None, *, mode: str = "data",
            return_storage: bool = False) -> dict[str, Any] | tuple[dict[str, Any], DurableStorage]:
    """The simulator backend: scenario in, outcome dict out (SPEC section 4 plus timing fields).

    With ``return_storage=True``: ``(outcome, storage)``, where ``storage`` is the
    simulated run's checkpoint, for the oracles that read files.
    """
    sim = simulate(scenario, profile, mode=mode)
    if trace_path is not None:
        sim.trace.save(trace_path)
    outcome = sim.outcome()
    return (outcome, sim.storage) if return_storage else outcome
