"""The restart loop of spec section 2, written once: incarnation after incarnation until the input is consumed.

A ``driver_crash`` or a query failure ends an incarnation, and the next one
starts from what ``recovery.plan_restart`` reads in the checkpoint alone. A
damaged checkpoint file that nothing can fall back on ends the run with an
error naming the file; so does a checkpoint recovery cannot read. After
``MAX_RESTARTS`` restarts the supervisor gives up, with one message.

Every backend drives its incarnations through ``Supervisor.lives()``::

    for number, restart in supervisor.lives():
        ...run incarnation ``number`` from ``restart``...
        supervisor.ended(number, exc)    # None when it consumed the input

so the sequential reference, the SimPy process of the simulator and the
Spark engine's driver restart the query by the same rule.
"""

from __future__ import annotations

from typing import Callable, Iterator

from .failures import DriverCrash, QueryFailure, TaskAttemptFailed
from .observer import Observer
from .recovery import RestartPlan, plan_restart
from .storage import CheckpointFormatError, Storage, StorageError

MAX_RESTARTS = 20
RESTARTABLE = (DriverCrash, QueryFailure, TaskAttemptFailed, StorageError)
PlanRestart = Callable[[Storage, str, int], RestartPlan]


def gave_up_message(restarts: int = MAX_RESTARTS) -> str:
    return f"gave up after {restarts} restarts"


class Supervisor:
    """Decides whether and from where the next incarnation starts; records each recovery."""

    def __init__(self, storage: Storage, progress_mode: str, source_partitions: int, observer: Observer, *,
                 plan_restart_fn: PlanRestart = plan_restart, first_life: int = 0):
        self.storage, self.progress_mode, self.source_partitions = storage, progress_mode, source_partitions
        self.observer, self.plan_restart_fn = observer, plan_restart_fn
        self.next_life = first_life
        self.error: str | None = None
        self.finished = False
        self.restart = self._plan("cannot resume from the checkpoint")
        if self.restart is not None and (self.restart.first_batch > 0 or self.restart.fixed_offsets):
            observer.record_recovery(self.restart, first_life)

    def _plan(self, what: str) -> RestartPlan | None:
        try:
            return self.plan_restart_fn(self.storage, self.progress_mode, self.source_partitions)
        except CheckpointFormatError as exc:
            self.stop(f"{what}: {exc}")
            return None

    def stop(self, error: str | None) -> None:
        """The run is over: finished (``error`` None) or stopped loudly."""
        self.error = error if error is not None else self.error
        self.finished = True

    def lives(self) -> Iterator[tuple[int, RestartPlan]]:
        """The incarnations to run, each with its restart plan, until the run is over."""
        while not self.finished:
            number = self.next_life
            if number > MAX_RESTARTS:
                self.stop(gave_up_message())
                return
            self.next_life += 1
            assert self.restart is not None, "a run that is not over has a restart plan"
            yield number, self.restart

    def ended(self, number: int, exc: BaseException | None) -> None:
        """Incarnation ``number`` ended: consumed the input (None), failed restartably, or fatally."""
        if exc is None:
            self.stop(None)
            return
        if isinstance(exc, CheckpointFormatError):
            self.stop(str(exc))
            return
        if not isinstance(exc, RESTARTABLE):
            raise exc
        self.observer.note(f"incarnation {number} stopped: {exc}")
        self.restart = self._plan("recovery failed")
        if self.restart is not None:
            self.observer.record_recovery(self.restart, number + 1)
