"""Run a scenario on the reference model: the sequential scheduler, faults, restarts.

``run_scenario`` executes incarnation after incarnation (``supervisor.py``)
until the input is consumed. Each incarnation's step graph is executed by the
``SequentialScheduler``: the canonical order (the first ready node in creation
order), or an explicit ``Schedule`` the explorer chooses (any topological
order of the graph, optionally crashing right after a prefix). Faults fire
once each, at the first step that matches them (``faults.py``); the scheduler
is the reference's ``FaultSubstrate``: a driver crash is an exception, a task
failure retries the task's steps in place, a zombie write lands at a later
step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, NoReturn, Protocol, runtime_checkable

from .failures import DriverCrash, QueryFailure
from .faults import FaultBook, SealedVersion, apply_fault, zombie_landings
from .incarnation import Incarnation
from .modes import mode_of
from .observer import Observer, build_outcome
from .outcome import Outcome
from .records import QueryFacts, TaskTable
from .recovery import RestartPlan
from ..language.scenario import Scenario
from .sources import SourceData
from ..language.steps import NodeId
from .storage import DurableStorage, Storage
from .supervisor import PlanRestart, Supervisor, plan_restart


@dataclass
class Schedule:
    """An explicit order for the first incarnation's first steps, optionally ending in a crash."""

    prefix: list[NodeId] = field(default_factory=list)
    crash_after_prefix: bool = False
    zombie_lands_after: NodeId | None = None


@dataclass
class FinishedRun:
    """A reference run to its end: what it left in storage and what an observer saw."""

    scenario: Scenario
    storage: DurableStorage
    observer: Observer
    error: str | None
    executed: list[list[NodeId]]  # the steps of each incarnation, in order

    def outcome(self) -> Outcome:
        return build_outcome(self.scenario, self.storage, self.observer, self.error)


class TaskRetrying(Protocol):
    """The protocol's retry of a task (``task_retry.TaskRetries``, on the incarnation, where a model variant
    may change it): what ``InPlaceFaultEffects`` asks of it."""

    def fail_task(self, b: int, p: int, reason: str) -> None: ...
    def previous_task_step(self, node_id: NodeId) -> str | None: ...
    def retry_task_steps(self, b: int, p: int, upto: str) -> None: ...


@runtime_checkable
class ZombieMaterial(Protocol):
    """What a failed attempt's zombie writes carry: the task effects that ran it in process."""

    def uid(self, b: int, p: int) -> str: ...
    def zombie_material(self, b: int, p: int) -> tuple[list[SealedVersion], list[list[Any]]]: ...


class InPlaceFaultEffects:
    """Task-fault effects for a backend that runs the reference's own task steps in one process: a failed
    attempt is retried at once, redoing its steps up to where it stood; a zombie's write lands after a later
    step (``commit_log_write`` of its batch, or ``zombie_lands_after``). It holds the parts it uses: the
    protocol's retry, the task effects, the task table, the storage and the observer."""

    def __init__(self, retries: TaskRetrying, effects: ZombieMaterial, facts: QueryFacts, table: TaskTable,
                 zombie_lands_after: NodeId | None = None):
        self.retries, self.effects, self.table = retries, effects, table
        self.storage, self.obs = facts.storage, facts.obs
        self.format = "delta" if facts.cfg.provider == "delta" else "changelog"
        self.zombie_lands_after = zombie_lands_after
        self.zombies: list[tuple[NodeId | None, str, bytes]] = []  # (lands after, path, payload)

    @classmethod
    def of(cls, inc: Incarnation, zombie_lands_after: NodeId | None = None) -> InPlaceFaultEffects:
        """The fault effects of an incarnation whose task effects run in process."""
        effects = inc.seams.effects
        assert isinstance(effects, ZombieMaterial), f"{type(effects).__name__} does not run its tasks in process"
        return cls(inc, effects, inc.facts, inc.table, zombie_lands_after)

    def plant_zombie(self, node: NodeId) -> None:
        """The current attempt dies but its write of this step lands later, beside the retry's."""
        b, p = node.batch, node.partition
        lands = self.zombie_lands_after or NodeId.of("commit_log_write", b)
        self.table.task(b, p)
        sealed, rows = self.effects.zombie_material(b, p)
        for path, payload in zombie_landings(node.step, b, p, self.effects.uid(b, p), sealed, self.format, rows):
            self.zombies.append((lands, path, payload))

    def fail_task(self, node: NodeId, when: str, reason: str) -> None:
        """The attempt fails; Spark retries it at once, redoing its steps up to where this one stood."""
        retries = self.retries
        retries.fail_task(node.batch, node.partition, reason)
        upto = node.step if when == "after" else retries.previous_task_step(node)
        if upto is not None:
            retries.retry_task_steps(node.batch, node.partition, upto)

    def land_zombies(self, after: NodeId | None) -> None:
        """Land the zombie writes due after ``after`` (every one left when ``after`` is None)."""
        for entry in list(self.zombies):
            lands, path, payload = entry
            if after is None or lands == after:
                self.storage.write(path, payload, overwrite=True)
                self.obs.note(f"zombie write landed: {path}")
                self.zombies.remove(entry)


class SequentialScheduler:
    """Runs one incarnation's step graph in a given or canonical order, applying faults (a ``FaultSubstrate``).
    It runs the incarnation, so it holds it (``run_step``, its nodes); the fault effects it delegates to hold
    only their parts (``InPlaceFaultEffects``)."""

    def __init__(self, inc: Incarnation, faults: FaultBook, schedule: Schedule | None):
        self.inc, self.faults, self.schedule = inc, faults, schedule
        self.storage: Storage = inc.storage
        self.done: set[NodeId] = set()
        self.order: list[NodeId] = []
        self.in_place = InPlaceFaultEffects.of(inc, schedule.zombie_lands_after if schedule else None)

    def ready(self, node_id: NodeId) -> bool:
        return all(d in self.done for d in self.inc.nodes[node_id].deps)

    def run(self) -> None:
        """The schedule's prefix, then the canonical order: the first ready node in creation order."""
        pending = list(self.inc.nodes)
        prefix = list(self.schedule.prefix) if self.schedule else []
        ready, nodes, done = self.ready, self.inc.nodes, self.done
        for node_id in prefix:
            if not pending:
                break
            if node_id not in nodes or node_id in done or not ready(node_id):
                raise ValueError(f"schedule step {node_id} is not ready")
            pending.remove(node_id)
            self.run_node(node_id)
        if pending and self.schedule and self.schedule.crash_after_prefix:
            raise DriverCrash("crash after the explored prefix")
        while pending:
            node_id = next(n for n in pending if ready(n))
            pending.remove(node_id)
            self.run_node(node_id)
        if self.schedule and self.schedule.crash_after_prefix and self.schedule.prefix:
            raise DriverCrash("crash after the explored prefix")
        self.in_place.land_zombies(None)

    def run_node(self, node_id: NodeId) -> None:
        inc = self.inc
        if not self.faults.pending and not self.in_place.zombies:   # nothing can fire: just the step
            inc.run_step(node_id)
            self.done.add(node_id)
            self.order.append(node_id)
            return
        time_ms = inc.logical_time_ms(node_id.batch)
        background = inc.nodes[node_id].background
        skip = False
        for fault in self.faults.take(node_id, "before", time_ms, inc.number):
            inc.obs.note(f"fault {fault.kind} before {node_id}")
            skip = apply_fault(fault, node_id, "before", background, self) or skip
        if not skip:
            inc.run_step(node_id)
        self.done.add(node_id)
        self.order.append(node_id)
        for fault in self.faults.take(node_id, "after", time_ms, inc.number):
            inc.obs.note(f"fault {fault.kind} after {node_id}")
            apply_fault(fault, node_id, "after", background, self)
        self.in_place.land_zombies(node_id)

    # --------------------------------------------------- the fault substrate
    def crash_driver(self, reason: str) -> NoReturn:
        raise DriverCrash(reason)

    def fail_query(self, reason: str) -> NoReturn:
        raise QueryFailure(reason)

    def delay(self, ms: int) -> None:
        """The reference is untimed: a slow write changes nothing it models."""

    def skew_clock(self, ms: int) -> None:
        self.inc.clock_skew_ms += ms

    def lose_executor(self, node: NodeId) -> None:
        self.inc.lose_executor(node.partition, (node.batch, node.partition))

    def plant_zombie(self, node: NodeId) -> None:
        self.in_place.plant_zombie(node)

    def fail_task(self, node: NodeId, when: str, reason: str) -> None:
        self.in_place.fail_task(node, when, reason)


class Run:
    """A scenario run, one incarnation (life) at a time, so a caller can stop after a crash."""

    def __init__(self, scenario: Scenario, *, schedule: Schedule | None = None,
                 incarnation_class: type[Incarnation] = Incarnation,
                 plan_restart_fn: PlanRestart = plan_restart, storage: DurableStorage | None = None,
                 recorded_cuts: Mapping[int, tuple[int, ...]] | None = None):
        self.scenario, self.schedule = scenario, schedule
        self.recorded_cuts = recorded_cuts
        self.incarnation_class = incarnation_class
        self.data = SourceData.of(scenario)
        self.storage = storage if storage is not None else DurableStorage()
        self.observer = Observer()
        self.faults = FaultBook(scenario.faults)
        self.executed: list[list[NodeId]] = []
        self.supervisor = Supervisor(self.storage, mode_of(scenario), len(self.data.partitions),
                                     self.observer, plan_restart_fn=plan_restart_fn)
        self._lives = self.supervisor.lives()

    @property
    def finished(self) -> bool:
        return self.supervisor.finished

    def new_incarnation(self, number: int, restart: RestartPlan) -> Incarnation:
        return self.incarnation_class(self.scenario, self.data, self.storage, restart, number, self.observer,
                                      recorded_cuts=self.recorded_cuts)

    def life(self) -> None:
        """Run one incarnation to the end of input, a crash, or a fatal error."""
        step = next(self._lives, None)
        if step is None:
            return
        number, restart = step
        scheduler = None
        try:
            inc = self.new_incarnation(number, restart)
            scheduler = SequentialScheduler(inc, self.faults, self.schedule if number == 0 else None)
            scheduler.run()
        except Exception as exc:  # noqa: BLE001 - the supervisor decides: restart, stop loudly, or re-raise
            self.executed.append(scheduler.order if scheduler else [])
            self.supervisor.ended(number, exc)
            return
        self.executed.append(scheduler.order)
        self.supervisor.ended(number, None)

    def finish(self) -> FinishedRun:
        while not self.finished:
            self.life()
        self.observer.faults_not_fired = [self.faults.index_of(f) for f in self.faults.pending]
        return FinishedRun(self.scenario, self.storage, self.observer, self.supervisor.error, self.executed)


def run_scenario(scenario: Scenario, *, schedule: Schedule | None = None,
                 incarnation_class: type[Incarnation] = Incarnation,
                 plan_restart_fn: PlanRestart = plan_restart,
                 storage: DurableStorage | None = None,
                 recorded_cuts: Mapping[int, tuple[int, ...]] | None = None) -> FinishedRun:
    """Run to the end of input through every fault and restart. Never raises for a fault.

    ``recorded_cuts`` (batch -> end offsets) replays the boundaries a timed backend chose, so the
    reference can be compared with it batch for batch.
    """
    return Run(scenario, schedule=schedule, incarnation_class=incarnation_class,
               plan_restart_fn=plan_restart_fn, storage=storage, recorded_cuts=recorded_cuts).finish()


def recorded_cuts_of(outcome: Outcome) -> dict[int, tuple[int, ...]]:
    """The boundaries an outcome records, as ``recorded_cuts`` for ``run_scenario``."""
    return {b.id: b.end_offsets for b in outcome.batches}
