"""Run a scenario on the reference model: incarnations, faults, restarts, the outcome.

``run_scenario`` executes incarnation after incarnation until the input is
consumed: a ``driver_crash`` or a query failure ends an incarnation, and the
next one starts from what ``recovery.plan_restart`` reads in the checkpoint.
Faults fire once each, at the first step that matches them (SPEC section 2).

A ``Schedule`` lets the explorer choose the order of the first incarnation's
steps (any topological order of its step graph) and crash right after a given
prefix.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable

from . import layout
from .changelog import StateFileHeader, encode_state_file
from .engine import DriverCrash, Incarnation, NodeId, Observer, QueryFailure, TaskAttemptFailed
from .recovery import RestartPlan, plan_restart
from .scenario import Fault, Scenario
from .sources import SourceData
from .steps import TASK_STEPS
from .storage import CheckpointFormatError, DurableStorage, StorageError

MAX_RESTARTS = 20
ZOMBIE_KEY = "__zombie__"


@dataclass
class Schedule:
    """An explicit order for the first incarnation's first steps, optionally ending in a crash."""

    prefix: list[NodeId] = field(default_factory=list)
    crash_after_prefix: bool = False
    zombie_lands_after: NodeId | None = None


@dataclass
class RunResult:
    scenario: Scenario
    storage: DurableStorage
    observer: Observer
    error: str | None
    executed: list[list[NodeId]]  # the steps of each incarnation, in order


class FaultBook:
    """The scenario's faults; each fires at most once."""

    def __init__(self, faults: tuple[Fault, ...]):
        self.pending = list(faults)

    def take(self, node: NodeId, when: str, time_ms: int, life: int) -> list[Fault]:
        fired = [f for f in self.pending if _matches(f, node, when, time_ms)
                 and (f.at.restart is None or f.at.restart == life)]
        if fired:
            first = fired[0]
            self.pending.remove(first)
            return [first]
        return []


def _matches(fault: Fault, node: NodeId, when: str, time_ms: int) -> bool:
    at = fault.at
    if node.tag:
        return False
    if at.step is None:
        return when == "before" and at.time_ms is not None and time_ms >= at.time_ms
    if at.step != node.step or at.batch != node.batch or at.when != when:
        return False
    return at.partition is None or at.partition == node.partition


class Executor:
    """Runs one incarnation's step graph in a given or canonical order, applying faults."""

    def __init__(self, inc: Incarnation, faults: FaultBook, schedule: Schedule | None):
        self.inc, self.faults, self.schedule = inc, faults, schedule
        self.done: set[NodeId] = set()
        self.order: list[NodeId] = []
        self.zombies: list[tuple[NodeId | None, str, bytes]] = []  # (lands after, path, payload)

    def ready(self, node_id: NodeId) -> bool:
        return all(d in self.done for d in self.inc.nodes[node_id].deps)

    def run(self) -> None:
        pending = list(self.inc.nodes)
        prefix = list(self.schedule.prefix) if self.schedule else []
        while pending:
            if prefix:
                node_id = prefix.pop(0)
                if node_id not in self.inc.nodes or node_id in self.done or not self.ready(node_id):
                    raise ValueError(f"schedule step {node_id} is not ready")
            else:
                if self.schedule and self.schedule.crash_after_prefix:
                    raise DriverCrash("crash after the explored prefix")
                node_id = next(n for n in pending if self.ready(n))
            pending.remove(node_id)
            self.run_node(node_id)
        if self.schedule and self.schedule.crash_after_prefix and self.schedule.prefix:
            raise DriverCrash("crash after the explored prefix")
        self.land_zombies(None)

    def run_node(self, node_id: NodeId) -> None:
        node = self.inc.nodes[node_id]
        time_ms = self.inc.logical_time_ms(node_id.batch)
        skip = False
        for fault in self.faults.take(node_id, "before", time_ms, self.inc.number):
            skip = self.apply(fault, node_id, "before") or skip
        if not skip:
            node.run()
        self.done.add(node_id)
        self.order.append(node_id)
        for fault in self.faults.take(node_id, "after", time_ms, self.inc.number):
            self.apply(fault, node_id, "after")
        self.land_zombies(node_id)

    # ------------------------------------------------------------ faults
    def apply(self, fault: Fault, node_id: NodeId, when: str) -> bool:
        """Apply one fault at a step; True when the step itself must not run."""
        inc, kind = self.inc, fault.kind
        inc.obs.note(f"fault {kind} {when} {node_id}")
        background = inc.nodes[node_id].background
        if kind == "driver_crash":
            raise DriverCrash(f"driver_crash {when} {node_id}")
        if kind == "storage_latency":
            return False  # the reference is untimed: a slow write changes nothing it models
        if kind == "clock_skew":
            inc.clock_skew_ms += fault.ms or 0
            return False
        if kind in ("corrupt_file", "delete_file"):
            self.damage(kind, fault.path or "")
            return False
        if node_id.step == "snapshot_upload":
            return kind == "storage_write_error"  # maintenance logs the error; a later round retries
        if node_id.step not in TASK_STEPS:
            if kind == "storage_write_error":
                raise QueryFailure(f"storage_write_error at {node_id}")
            return False
        if background:
            raise QueryFailure(f"{kind} at {node_id}: a pending async state commit failed")
        b, p = node_id.batch, node_id.partition
        if kind == "executor_loss":
            inc.lose_executor(p)
        if kind == "zombie_write":
            self.plant_zombie(node_id)
        inc.fail_task(b, p, f"{kind} {when} {node_id.step}")
        upto = node_id.step if when == "after" else _previous_task_step(inc, node_id)
        if upto is not None:
            inc.retry_task_steps(b, p, upto)
        return False

    def damage(self, kind: str, path: str) -> None:
        storage = self.inc.storage
        if not storage.exists(path):
            self.inc.obs.note(f"{kind}: {path} does not exist")
            return
        if kind == "delete_file":
            storage.delete(path)
        else:
            data = storage.read(path)
            storage.write(path, data[: len(data) // 2], overwrite=True)

    def plant_zombie(self, node_id: NodeId) -> None:
        """The current attempt dies but its write of this step lands later, beside the retry's."""
        inc = self.inc
        b, p = node_id.batch, node_id.partition
        task = inc.task(b, p)
        uid = inc.uid(b, p)
        lands = self.schedule.zombie_lands_after if self.schedule and self.schedule.zombie_lands_after else \
            inc.nid("commit_log_write", b)
        if node_id.step == "sink_write":
            rows = [[ZOMBIE_KEY, b]]
            self.zombies.append((lands, layout.sink_part_path(b, p, uid), json.dumps(rows).encode()))
            return
        if node_id.step != "changelog_write" or task is None or not task.sealed:
            return
        for sid, sealed in task.sealed.items():
            header = StateFileHeader(inc.stores[(sid, p)].delta_kind if (sid, p) in inc.stores else "changelog",
                                     sealed.version, sealed.uid, sealed.parent_uid)
            payload = encode_state_file(header, tuple(sealed.changes) + ((ZOMBIE_KEY, b),))
            kind = header.kind
            self.zombies.append((lands, layout.state_file(sid, p, sealed.version, uid, kind), payload))

    def land_zombies(self, after: NodeId | None) -> None:
        for entry in list(self.zombies):
            lands, path, payload = entry
            if after is None or lands == after:
                self.inc.storage.write(path, payload, overwrite=True)
                self.inc.obs.note(f"zombie write landed: {path}")
                self.zombies.remove(entry)


def _previous_task_step(inc: Incarnation, node_id: NodeId) -> str | None:
    steps = [s for s in TASK_STEPS if inc.nid(s, node_id.batch, node_id.partition) in inc.nodes
             and not inc.nodes[inc.nid(s, node_id.batch, node_id.partition)].background]
    index = steps.index(node_id.step) if node_id.step in steps else 0
    return steps[index - 1] if index > 0 else None


class Run:
    """A scenario run, one incarnation (life) at a time, so a caller can stop after a crash."""

    def __init__(self, scenario: Scenario, *, schedule: Schedule | None = None,
                 incarnation_class: type[Incarnation] = Incarnation,
                 plan_restart_fn: Callable[..., RestartPlan] = plan_restart,
                 storage: DurableStorage | None = None):
        self.scenario, self.schedule = scenario, schedule
        self.incarnation_class, self.plan_restart_fn = incarnation_class, plan_restart_fn
        self.data = SourceData.of(scenario)
        self.storage = storage if storage is not None else DurableStorage()
        self.observer = Observer()
        self.faults = FaultBook(scenario.faults)
        self.executed: list[list[NodeId]] = []
        self.error: str | None = None
        self.finished = False
        self.restart = self._plan("cannot resume from the checkpoint")
        if self.restart is not None and (self.restart.first_batch > 0 or self.restart.fixed_offsets):
            _record_recovery(self.observer, self.restart, 0)

    def _plan(self, what: str) -> RestartPlan | None:
        try:
            return self.plan_restart_fn(self.storage, self.scenario.engine.progress_mode, len(self.data.partitions))
        except CheckpointFormatError as exc:
            self.error, self.finished = f"{what}: {exc}", True
            return None

    def new_incarnation(self, number: int) -> Incarnation:
        return self.incarnation_class(self.scenario, self.data, self.storage, self.restart, number, self.observer)

    def new_executor(self, inc: Incarnation, number: int) -> Any:
        """What runs an incarnation's step graph (another backend may run it concurrently)."""
        return Executor(inc, self.faults, self.schedule if number == 0 else None)

    def life(self) -> None:
        """Run one incarnation to the end of input, a crash, or a fatal error."""
        number = len(self.executed)
        if number > MAX_RESTARTS:
            self.error, self.finished = f"gave up after {MAX_RESTARTS} restarts", True
            return
        executor = None
        try:
            inc = self.new_incarnation(number)
            executor = self.new_executor(inc, number)
            executor.run()
            self.finished = True
        except (DriverCrash, QueryFailure, TaskAttemptFailed, StorageError) as exc:
            self.observer.note(f"incarnation {number} stopped: {exc}")
            self.restart = self._plan("recovery failed")
            if self.restart is not None:
                _record_recovery(self.observer, self.restart, number + 1)
        except CheckpointFormatError as exc:
            self.error, self.finished = str(exc), True
        finally:
            self.executed.append(executor.order if executor else [])

    def finish(self) -> RunResult:
        while not self.finished:
            self.life()
        return RunResult(self.scenario, self.storage, self.observer, self.error, self.executed)


def run_scenario(scenario: Scenario, *, schedule: Schedule | None = None,
                 incarnation_class: type[Incarnation] = Incarnation,
                 plan_restart_fn: Callable[..., RestartPlan] = plan_restart,
                 storage: DurableStorage | None = None) -> RunResult:
    """Run to the end of input through every fault and restart. Never raises for a fault."""
    return Run(scenario, schedule=schedule, incarnation_class=incarnation_class,
               plan_restart_fn=plan_restart_fn, storage=storage).finish()


def _record_recovery(obs: Observer, restart: RestartPlan, number: int) -> None:
    dropped = sorted(b for b in obs.batches if b > restart.kept_through)
    folded = range(restart.kept_through + 1, max(restart.fixed_offsets, default=restart.kept_through) + 1)
    rerun = sorted(set(dropped) | set(folded))
    obs.recoveries.append({"restart": number, "resumed_at": restart.first_batch, "rerun_batches": rerun})
    for b in dropped:
        obs.batches.pop(b)


def run_json(scenario: Scenario) -> dict[str, Any]:
    from .outcome import build_outcome
    return build_outcome(run_scenario(scenario))
