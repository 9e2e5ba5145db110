"""Faults at a simulated time (``at.time_ms``), SPEC section 2's fault kinds for timed backends.

Faults at a step are matched and handled exactly as in the reference
(``reference.runner.FaultBook`` / ``Executor.apply``), inside ``engine.py``.
Two kinds have a meaning of their own at a time and are handled by a clock
process here instead:

- ``driver_crash`` at ``time_ms`` kills the running incarnation at that
  instant: steps in flight never land (if no incarnation is running, the
  query is already restarting and the fault is a no-op);
- ``storage_latency`` at ``time_ms`` is a latency spike: every storage
  operation that starts during ``[time_ms, time_ms + ms)`` waits for its end.

Every other kind at a time fires at the first step that starts at or after
that time, with the reference's handling.

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

from typing import TYPE_CHECKING, Generator

import simpy

from reference.engine import DriverCrash
from reference.scenario import Fault

if TYPE_CHECKING:
    from .simulation import Simulation

CLOCK_FAULT_KINDS = ("driver_crash", "storage_latency")


def is_clock_fault(fault: Fault) -> bool:
    return fault.at.step is None and fault.at.time_ms is not None and fault.kind in CLOCK_FAULT_KINDS


def split_faults(faults: tuple[Fault, ...]) -> tuple[tuple[Fault, ...], tuple[Fault, ...]]:
    """(faults matched at steps, faults fired by the clock)."""
    return (tuple(f for f in faults if not is_clock_fault(f)), tuple(f for f in faults if is_clock_fault(f)))


def fault_clock(env: simpy.Environment, fault: Fault, sim: "Simulation") -> Generator:
    """Fire one timed fault at its simulated time, in its incarnation."""
    try:
        yield from _fire(env, fault, sim)
    finally:
        sim.clock_faults_left -= 1


def _fire(env: simpy.Environment, fault: Fault, sim: "Simulation") -> Generator:
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
        return
    run = sim.current_run
    if run is None or run.stopped:
        sim.observer.note(f"fault driver_crash at {env.now}: no incarnation running")
        return
    sim.observer.note(f"fault driver_crash at time {env.now}")
    run.stop(DriverCrash(f"driver_crash at time_ms={fault.at.time_ms}"))
