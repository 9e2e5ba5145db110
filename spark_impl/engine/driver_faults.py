"""The driver side of faults: which fault fires where (once, across driver processes), and what it does here.

``ClaimingFaultBook`` is the reference's ``FaultBook`` where firing a fault
claims a marker file (``coordination.fault_marker``): a fault that killed a
driver process must not kill its successor, and a task-step fault that fired
in one task attempt must not fire in the retry. Task-step faults leave the
book with their batch's tasks (``take_task_faults``) and fire on the executor
(``task_faults.py``); every other fault fires here, at its driver step.

``DriverFaults`` is the driver's ``FaultSubstrate``: the effects of
``reference.protocol.faults.apply_fault`` at a driver step. A driver crash drops the
incarnation (``DriverCrash``), or, in process mode, SIGKILLs the driver
process; a storage error fails the query (``QueryFailure``); a clock skew
moves the incarnation's logical clock.
"""

from __future__ import annotations

import os
import signal
from typing import TYPE_CHECKING, Iterable, NoReturn

from reference.protocol.failures import DriverCrash, QueryFailure
from reference.protocol.faults import FaultBook, apply_fault
from reference.language.scenario import Fault
from reference.language.steps import NodeId
from reference.protocol.storage import Storage

from .coordination import claim, fault_marker

if TYPE_CHECKING:
    from .incarnation import SparkIncarnation


class ClaimingFaultBook(FaultBook):
    """A fault book whose faults each fire once across driver processes (a marker file per fault)."""

    def __init__(self, faults: Iterable[Fault], coord: str):
        super().__init__(faults)
        self.coord = coord
        self.pending = [f for f in self.pending if not fault_marker(coord, self.index_of(f)).exists()]

    def claim(self, fault: Fault) -> bool:
        return claim(fault_marker(self.coord, self.index_of(fault)))


class DriverFaults:
    """Runs driver steps with their faults; the ``FaultSubstrate`` of the driver."""

    def __init__(self, inc: "SparkIncarnation", book: FaultBook):
        self.inc, self.book = inc, book
        self.storage: Storage = inc.storage

    def run_step(self, node_id: NodeId) -> None:
        """The faults before the step (which may skip it), the step's effect, the faults after it."""
        if not self._fire(node_id, "before"):
            self.inc.run_step(node_id)
        self._fire(node_id, "after")

    def _fire(self, node_id: NodeId, when: str) -> bool:
        inc = self.inc
        background = inc.nodes[node_id].background
        skip = False
        for fault in self.book.take(node_id, when, inc.logical_time_ms(node_id.batch), inc.number):
            inc.obs.note(f"fault {fault.kind} {when} {node_id}")
            skip = apply_fault(fault, node_id, when, background, self) or skip
        return skip

    # ------------------------------------------------------------ the substrate
    def crash_driver(self, reason: str) -> NoReturn:
        if self.inc.engine.kill_driver:
            os.kill(os.getpid(), signal.SIGKILL)  # the driver process dies here, as a real crash
        raise DriverCrash(reason)

    def fail_query(self, reason: str) -> NoReturn:
        raise QueryFailure(reason)

    def delay(self, ms: int) -> None:
        """A slow write at a driver step: the engine has never slept here (only task steps sleep), and
        this adaptation keeps that; a sleep would be the timed behaviour."""

    def skew_clock(self, ms: int) -> None:
        self.inc.clock_skew_ms += ms

    def lose_executor(self, node: NodeId) -> None:
        raise AssertionError(f"executor_loss at {node} fires on the executor, never on the driver")

    def plant_zombie(self, node: NodeId) -> None:
        raise AssertionError(f"zombie_write at {node} fires on the executor, never on the driver")

    def fail_task(self, node: NodeId, when: str, reason: str) -> None:
        raise AssertionError(f"a task failure at {node} fires on the executor, never on the driver")
