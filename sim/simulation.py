"""A simulated run of one scenario: the cluster, the supervisor that restarts the query, the outcome.

``simulate(scenario)`` runs a scenario to the end and returns the
``Simulation`` (its outcome, trace and checkpoint); ``sim.backend.SimBackend``
is the simulator behind the backend interface (spec section 4). The outcome
is the reference's (``reference.protocol.observer.build_outcome``, from the simulated
run's checkpoint and observer) with a timing block (end-to-end latency per
record, creation to first visibility at the sink, ``latency.py``), timed
progress events, and ``details["sim"]`` (mode, profile, simulated end time,
trace size). Everything random draws from one ``numpy.random.Generator``
seeded with the scenario's seed (``random_draws.Draws``), and SimPy orders
simultaneous events by their creation, so a seed gives byte-identical bytes.
"""

from __future__ import annotations

from typing import Any, Generator

import numpy as np
import simpy

from reference.protocol.backend import BackendError
from reference.protocol.faults import FaultBook
from reference.protocol.observer import Observer, build_outcome
from reference.protocol.outcome import Outcome
from reference.protocol.recovery import RestartPlan
from reference.language.scenario import Fault, Scenario
from reference.protocol.sources import SourceData
from reference.protocol.storage import CheckpointFormatError, DurableStorage
from reference.protocol.supervisor import Supervisor

from .cost_model import Profile, resolve_profile
from .data_mode import DataIncarnation
from .faults import fault_clock, split_faults
from .incarnation_run import IncarnationRun
from .latency import RangeLatency, RecordLatency, timing_of
from .random_draws import Draws
from .storage_service import StorageService
from .timed_incarnation import TimedIncarnation
from .trace import Trace
from .volume import VolumeIncarnation, VolumeSource

MODES = ("data", "volume")


class SimModeError(BackendError, ValueError):
    """``sim_mode`` is not one of ``MODES``."""

    def __init__(self, mode: object, why: str = ""):
        super().__init__(f"sim_mode {mode!r}: " + (why or f"expected one of {', '.join(MODES)}"))
        self.mode = mode


class Simulation:
    """Structure of one simulated run: storage service, trace, observer, fault book, supervisor."""

    def __init__(self, scenario: Scenario, profile: Profile, mode: str = "data", trace_enabled: bool = True,
                 env: simpy.Environment | None = None):
        if mode not in MODES:
            raise SimModeError(mode)
        if mode == "volume" and any(src.kind == "redelivering" for src in scenario.sources.values()):
            raise SimModeError(mode, "a redelivering source needs data mode: its fetch layer dedups real message "
                                     "ids, which volume mode does not hold")
        if mode == "volume" and scenario.engine.real_time:
            raise SimModeError(mode, "real-time mode needs data mode: its long-running tasks deliver each record "
                                     "on its own, and volume mode holds counts, not records")
        self.scenario, self.profile, self.mode = scenario, profile, mode
        self.env = env if env is not None else simpy.Environment()
        self.rng = Draws(np.random.default_rng(scenario.seed))
        self.service = StorageService(profile.storage, scenario.seed, DurableStorage())
        self.trace = Trace(trace_enabled)
        self.observer = Observer()
        step_faults, clock_faults = split_faults(scenario.faults)
        self.faults = FaultBook(step_faults)
        self.current_run: IncarnationRun | None = None
        self.incarnation = -1                       # the number of the latest incarnation started
        self.incarnation_started = self.env.event()  # triggered (and replaced) at every start, and at the end
        self.query_ended = False
        self.end_ms = 0.0
        self.data: SourceData | VolumeSource
        self.latency_book: RecordLatency | RangeLatency
        if mode == "data":
            self.data, self.latency_book = SourceData.of(scenario), RecordLatency()
        else:
            self.data, self.latency_book = VolumeSource(scenario), RangeLatency()
        self.supervisor = Supervisor(self.service.files, scenario.engine.restart_mode, len(self.data.partitions),
                                     self.observer)
        self.clock_faults_left = len(clock_faults)   # clock faults that may still fire
        self.clock_faults = clock_faults
        self.clock_faults_fired: list[Fault] = []
        for fault in clock_faults:
            self.env.process(fault_clock(self.env, fault, self))
        self.env.process(query_supervisor(self.env, self))

    def new_incarnation(self, restart: RestartPlan, number: int) -> TimedIncarnation:
        common: dict[str, Any] = dict(clock=self.env, profile=self.profile, storage_service=self.service,
                                      rng=self.rng)
        if isinstance(self.data, SourceData):
            assert isinstance(self.latency_book, RecordLatency)
            return DataIncarnation(self.scenario, self.data, self.service.files, restart, number, self.observer,
                                   latency_book=self.latency_book, **common)
        assert isinstance(self.latency_book, RangeLatency)
        return VolumeIncarnation(self.scenario, self.data, self.service.files, restart, number, self.observer,
                                 latency_book=self.latency_book, **common)

    def announce_start(self) -> None:
        """Wake the clock faults waiting for an incarnation (a start, or the end of the query)."""
        started, self.incarnation_started = self.incarnation_started, self.env.event()
        started.succeed(self.incarnation)

    def run(self) -> None:
        self.env.run()

    @property
    def error(self) -> str | None:
        """Why the query stopped loudly (None when it consumed its input)."""
        return self.supervisor.error

    @property
    def storage(self) -> DurableStorage:
        """The simulated run's checkpoint (spec section 3 layout; volume mode writes no state files)."""
        return self.service.files

    def outcome(self) -> Outcome:
        """The outcome (spec section 4) with the timing block and the simulator's own details."""
        details = {"sim": {"mode": self.mode, "profile": self.profile.name, "end_time_ms": round(self.end_ms, 3),
                           "trace_events": self.trace.count}}
        unfired = list(self.faults.pending) + [f for f in self.clock_faults
                                                if not any(f is g for g in self.clock_faults_fired)]
        self.observer.faults_not_fired = sorted(next(i for i, g in enumerate(self.scenario.faults) if g is f)
                                                for f in unfired)
        return build_outcome(self.scenario, self.service.files, self.observer, self.error, backend="sim",
                             timing=timing_of(self.latency_book), details=details)


def query_supervisor(env: simpy.Environment, sim: Simulation) -> Generator[simpy.Event, Any, None]:
    """Drive the reference's ``Supervisor``: incarnation after incarnation until the input is consumed.

    Each incarnation is a run on fresh driver and executors; the supervisor
    process waits for its end (``IncarnationRun.finished``), tells the
    ``Supervisor`` how it ended, and waits ``restart_ms`` before the next.
    """
    supervisor = sim.supervisor
    for number, restart in supervisor.lives():
        try:
            inc = sim.new_incarnation(restart, number)
        except CheckpointFormatError as exc:
            supervisor.ended(number, exc)
            continue
        run = IncarnationRun(env, inc, sim.faults, sim.trace, check_invariants=sim.mode == "data",
                             clock_faults_pending=lambda: sim.clock_faults_left > 0)
        sim.current_run = run
        sim.incarnation = number
        sim.trace.record(env.now, "supervisor", "start", f"incarnation {number} at batch {restart.first_batch}")
        run.start()
        sim.announce_start()
        stopped_by = yield run.finished
        sim.current_run = None
        supervisor.ended(number, stopped_by)
        if stopped_by is None:
            sim.trace.record(env.now, "supervisor", "finished", f"incarnation {number}")
        if stopped_by is not None and isinstance(sim.latency_book, RecordLatency):
            sim.latency_book.forget_after(env.now)
        if stopped_by is not None and not supervisor.finished:
            sim.trace.record(env.now, "supervisor", "restart", f"incarnation {number + 1} after {stopped_by}")
            yield env.timeout(sim.profile.restart_ms)
    sim.end_ms = env.now
    sim.query_ended = True
    sim.announce_start()


class CountingEnvironment(simpy.Environment):
    """A SimPy environment that counts the events it processes (to measure the simulator itself)."""

    def __init__(self) -> None:
        super().__init__()
        self.processed = 0

    def step(self) -> None:
        self.processed += 1
        super().step()


def simulate(scenario: Scenario, profile: Profile | dict[str, Any] | str | None = None, *, mode: str = "data",
             trace_enabled: bool = True) -> Simulation:
    """Run a scenario to the end and return the simulation (outcome, trace, storage)."""
    sim = Simulation(scenario, resolve_profile(profile), mode, trace_enabled)
    sim.run()
    return sim
