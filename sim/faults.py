"""Faults in the simulated cluster (spec section 2's fault kinds): at a step, and at a simulated time.

Faults at a step are matched by the reference's ``FaultBook`` and decided by
its ``apply_fault`` (the one decision table of every backend); what a decision
does here is ``ClusterSubstrate``, the simulator's ``FaultSubstrate``:

- ``crash_driver`` / ``fail_query`` end the incarnation (steps in flight never land);
- ``delay`` (``storage_latency``) adds its ``ms`` to the step's simulated time;
- ``fail_task`` abandons the attempt and redoes the task's steps up to where it
  stood, in place (as the reference does), charging the retry its scheduling
  cost (``TimedIncarnation.retry_cost_ms``);
- ``lose_executor`` drops the stores cached on the executor (the reference's
  ``lose_executor``) and charges ``executor_replacement_ms``;
- ``plant_zombie`` keeps the failed attempt's write (``reference.protocol.faults.zombie_landings``)
  and lands it right after ``commit_log_write`` of its batch, or at the end of
  the incarnation, as the reference does;
- damage (``corrupt_file``, ``delete_file``) and ``clock_skew`` as everywhere.

Faults at a time (``at.time_ms``) of any other kind fire at the first step that
starts at or after that time, through the same table. Two kinds have a meaning
of their own at a time and are fired by a clock process here instead:

- ``driver_crash`` at ``time_ms`` kills the running incarnation at that
  instant: steps in flight never land (if no incarnation is running, the
  query is already restarting and the fault is a no-op);
- ``storage_latency`` at ``time_ms`` is a latency spike: every storage
  operation that starts during ``[time_ms, time_ms + ms)`` waits for its end.

They do not go through ``apply_fault``: its table decides what a fault does
*at a step* (slow that step, crash before or after it), and these fire between
steps, at an instant no step owns; a spike slows every storage operation in
an interval, not one step.

``at.restart`` (the incarnation a fault belongs to: 0 is the first life,
1 the first restart, ...) holds for faults at a time as for faults at a step:
such a fault fires at the first instant at or after ``time_ms`` at which
incarnation ``restart`` is running, so at ``time_ms`` if that incarnation is
running then, or when it starts if it starts later. It never fires if that
incarnation has ended before ``time_ms`` or never starts. (Faults at a time
that fire at a step follow the same rule through the reference's
``FaultBook``, which matches ``restart`` against the incarnation number.)
"""

from __future__ import annotations

from typing import Generator, NoReturn, Protocol

import simpy

from reference.protocol.failures import DriverCrash, QueryFailure
from reference.protocol.observer import Observer
from reference.protocol.records import BatchBook
from reference.protocol.storage import Storage
from reference.protocol.run import InPlaceFaultEffects
from reference.language.scenario import Fault
from reference.language.steps import NodeId

from .storage_service import StorageService
from .timed_incarnation import TimedIncarnation
from .trace import Trace

CLOCK_FAULT_KINDS = ("driver_crash", "storage_latency")


class RunningIncarnation(Protocol):
    """An incarnation running on the simulated cluster, as a clock fault stops it."""

    @property
    def stopped(self) -> bool: ...

    def stop(self, exc: BaseException | None) -> None: ...


class FaultedQuery(Protocol):
    """What a clock fault reads and changes of the simulated query (``simulation.Simulation``)."""

    @property
    def current_run(self) -> RunningIncarnation | None: ...

    incarnation: int                      # the number of the latest incarnation started
    incarnation_started: simpy.Event      # triggered at every start, and at the end of the query
    query_ended: bool
    observer: Observer
    trace: Trace
    service: StorageService
    clock_faults_fired: list[Fault]
    clock_faults_left: int


class LosesExecutors(Protocol):
    """The protocol's executor loss (``task_retry.TaskRetries``, on the incarnation)."""

    def lose_executor(self, p: int, failing: tuple[int, int] | None = None) -> None: ...


class ClusterSubstrate:
    """What a fault at a step does to one incarnation of the simulated cluster (a ``FaultSubstrate``).

    ``extra_ms`` collects the simulated time the faults of the current step add. It holds the parts it uses:
    the in-place task faults, the protocol's executor loss, the batch book (a skewed clock) and two costs.
    """

    def __init__(self, in_place: InPlaceFaultEffects, executors: LosesExecutors, book: BatchBook, storage: Storage,
                 replacement_ms: float, retry_ms: float):
        # LOCAL WORKAROUND (reported): a task retry redone in place and the zombie writes kept until their
        # landing step are written once, in the reference's sequential scheduler; the simulator uses them
        # from there (adding only their cost in time) until the reference offers them on their own.
        self.in_place, self.executors, self.book, self.storage = in_place, executors, book, storage
        self.replacement_ms, self.retry_ms = replacement_ms, retry_ms   # an executor's replacement, a retry
        self.extra_ms = 0.0

    def crash_driver(self, reason: str) -> NoReturn:
        raise DriverCrash(reason)

    def fail_query(self, reason: str) -> NoReturn:
        raise QueryFailure(reason)

    def delay(self, ms: int) -> None:
        self.extra_ms += ms

    def skew_clock(self, ms: int) -> None:
        self.book.clock_skew_ms += ms

    def lose_executor(self, node: NodeId) -> None:
        self.executors.lose_executor(node.partition, (node.batch, node.partition))
        self.extra_ms += self.replacement_ms   # the retry waits for a new executor

    def plant_zombie(self, node: NodeId) -> None:
        """The failed attempt's write of this step lands later, right after ``commit_log_write`` of its batch."""
        self.in_place.plant_zombie(node)

    def fail_task(self, node: NodeId, when: str, reason: str) -> None:
        """The attempt fails; the retry redoes its steps up to where this one stood, after a rescheduling delay."""
        self.in_place.fail_task(node, when, reason)
        self.extra_ms += self.retry_ms

    @property
    def zombies(self) -> bool:
        """Whether a zombie write is waiting to land."""
        return bool(self.in_place.zombies)

    def land_zombies(self, after: NodeId | None) -> None:
        """Land the zombie writes due after ``after`` (every one left, at the end of the incarnation)."""
        self.in_place.land_zombies(after)


def is_clock_fault(fault: Fault) -> bool:
    return fault.at.step is None and fault.at.time_ms is not None and fault.kind in CLOCK_FAULT_KINDS


def split_faults(faults: tuple[Fault, ...]) -> tuple[tuple[Fault, ...], tuple[Fault, ...]]:
    """(faults matched at steps, faults fired by the clock)."""
    return (tuple(f for f in faults if not is_clock_fault(f)), tuple(f for f in faults if is_clock_fault(f)))


def fault_clock(env: simpy.Environment, fault: Fault, sim: FaultedQuery) -> Generator[simpy.Event, object, None]:
    """Fire one timed fault at its simulated time, in its incarnation."""
    try:
        yield from _fire(env, fault, sim)
    finally:
        sim.clock_faults_left -= 1


def _fire(env: simpy.Environment, fault: Fault, sim: FaultedQuery) -> Generator[simpy.Event, object, None]:
    assert fault.at.time_ms is not None
    yield env.timeout(max(0.0, fault.at.time_ms - env.now))
    wanted = fault.at.restart
    while wanted is not None:
        run = sim.current_run
        if sim.incarnation == wanted and run is not None and not run.stopped:
            break
        if sim.incarnation >= wanted or sim.query_ended:
            sim.observer.note(f"fault {fault.kind} at time_ms={fault.at.time_ms} restart={wanted}: "
                              f"incarnation {wanted} is not running at or after that time")
            return
        yield sim.incarnation_started   # the next incarnation starts (or the query ends)
    sim.trace.record(env.now, "faults", fault.kind, f"at time_ms={fault.at.time_ms}")
    if fault.kind == "storage_latency":
        sim.service.add_spike(env.now, float(fault.ms or 0))
        sim.clock_faults_fired.append(fault)
        return
    run = sim.current_run
    if run is None or run.stopped:
        sim.observer.note(f"fault driver_crash at {env.now}: no incarnation running")
        return
    sim.observer.note(f"fault driver_crash at time {env.now}")
    sim.clock_faults_fired.append(fault)
    run.stop(DriverCrash(f"driver_crash at time_ms={fault.at.time_ms}"))
