"""Faults (spec section 2): which fault fires where, and what it does, written once for every backend.

A fault is the scenario's ``Fault`` value (``scenario.py``), on every backend.
``FaultBook`` decides when a fault fires: at the first step (or time) that
matches it, once. ``apply_fault`` decides what a fired fault does at a step,
and asks the backend's ``FaultSubstrate`` to do it on the backend's own
storage and processes: the reference raises an exception in its sequential
scheduler, the simulator charges time on its clock, the Spark engine kills a
Python worker or an executor JVM. The effects on files (``damage``, the bytes a
zombie writer lands with ``zombie_landings``) are the same everywhere and live
here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Mapping, NoReturn, Protocol, Sequence

from . import layout
from .changelog import StateFileHeader, encode_state_file
from ..language.scenario import Fault
from ..language.steps import TASK_STEPS, NodeId
from .storage import Storage

ZOMBIE_KEY = "__zombie__"   # the key a zombie writer's late file carries, so a reader that trusts it is caught
DAMAGE_KINDS = ("corrupt_file", "delete_file")


def matches(fault: Fault, node: NodeId, when: str, time_ms: int) -> bool:
    """Whether ``fault`` fires at ``when`` (before/after) of ``node``, at logical time ``time_ms``.

    A node tagged with a store (parallel store commit) matches as its step does: the fault fires at the
    first of the partition's store commits to reach it, so ``after changelog_write`` lands between the
    two stores' commits when the other has not written yet."""
    at = fault.at
    if at.step is None:
        return when == "before" and at.time_ms is not None and time_ms >= at.time_ms
    if at.step != node.step or at.batch != node.batch or at.when != when:
        return False
    return at.partition is None or at.partition == node.partition


class FaultBook:
    """The scenario's faults; each fires at most once, at the first step that matches it.

    ``index_of`` numbers the faults by their position in the scenario, so a
    backend whose fault fires in another process can claim it there
    (``claim``): a fault that killed a driver must not kill its successor.
    """

    def __init__(self, faults: Iterable[Fault]):
        self.all = tuple(faults)
        self.pending = list(self.all)

    def index_of(self, fault: Fault) -> int:
        return next(i for i, f in enumerate(self.all) if f is fault)

    def claim(self, fault: Fault) -> bool:
        """Fire ``fault`` here; a backend that fires faults in several processes overrides this."""
        return True

    def take(self, node: NodeId, when: str, time_ms: int, life: int) -> Iterator[Fault]:
        """Every pending fault that matches this point, in the scenario's order, one at a time; each fires once.

        A fault leaves ``pending`` only when it is handed out, so when applying one ends the incarnation
        (a crash), the faults after it stay pending: they fire at a later point that matches them, or the
        outcome lists them as not fired.
        """
        while True:
            fault = next((f for f in self.pending if matches(f, node, when, time_ms)
                          and (f.at.restart is None or f.at.restart == life)), None)
            if fault is None:
                return
            self.pending.remove(fault)
            if self.claim(fault):
                yield fault

    def take_task_faults(self, batch: int, life: int) -> list[Fault]:
        """Every pending fault at a task step of ``batch`` (they travel with the batch's tasks)."""
        out = [f for f in self.pending if f.at.step in TASK_STEPS and f.at.batch == batch
               and f.kind != "clock_skew" and (f.at.restart is None or f.at.restart == life)]
        for fault in out:
            self.pending.remove(fault)
        return out


class FaultSubstrate(Protocol):
    """What a backend does when a fault fires: each on its own storage, clock and processes."""

    storage: Storage

    def crash_driver(self, reason: str) -> NoReturn: ...
    def fail_query(self, reason: str) -> NoReturn: ...
    def delay(self, ms: int) -> None: ...
    def skew_clock(self, ms: int) -> None: ...
    def lose_executor(self, node: NodeId) -> None: ...
    def plant_zombie(self, node: NodeId) -> None: ...
    def fail_task(self, node: NodeId, when: str, reason: str) -> None: ...


def apply_fault(fault: Fault, node: NodeId, when: str, background: bool, substrate: FaultSubstrate) -> bool:
    """Apply one fired fault at a step; True when the step itself must not run.

    - ``driver_crash``: the driver dies here;
    - ``storage_latency``: the step is slowed (untimed backends ignore it);
    - ``clock_skew``: the driver's clock jumps;
    - ``corrupt_file`` / ``delete_file``: the named checkpoint file is damaged;
    - at ``snapshot_upload`` (maintenance): a storage error skips this round, a later one retries;
    - at a driver step: a storage error fails the query (restartable); other kinds do nothing there;
    - at a background task step (async state checkpointing): the pending state commit fails the query;
    - at a task step: the attempt fails and is retried; ``executor_loss`` also drops the executor's
      cached stores, ``zombie_write`` also leaves a late write of the failed attempt.
    """
    kind = fault.kind
    where = f"{kind} {when} {node}"
    if kind == "driver_crash":
        substrate.crash_driver(where)
    if kind == "storage_latency":
        substrate.delay(fault.ms or 0)
        return False
    if kind == "clock_skew":
        substrate.skew_clock(fault.ms or 0)
        return False
    if kind in DAMAGE_KINDS:
        damage(substrate.storage, kind, fault.path or "")
        return False
    if node.step == "snapshot_upload":
        return kind == "storage_write_error"
    if node.step not in TASK_STEPS:
        if kind == "storage_write_error":
            substrate.fail_query(f"storage_write_error at {node}")
        return False
    if background:
        substrate.fail_query(f"{kind} at {node}: a pending async state commit failed")
    if kind == "executor_loss":
        substrate.lose_executor(node)
    if kind == "zombie_write":
        substrate.plant_zombie(node)
    substrate.fail_task(node, when, where)
    return False


def damage(storage: Storage, kind: str, path: str) -> bool:
    """``delete_file`` removes the file; ``corrupt_file`` truncates it to half. False when it does not exist."""
    assert kind in DAMAGE_KINDS, f"not a damage fault: {kind}"
    if not path or not storage.exists(path):
        return False
    if kind == "delete_file":
        storage.delete(path)
    else:
        data = storage.read(path)
        storage.write(path, data[: len(data) // 2], overwrite=True)
    return True


@dataclass(frozen=True)
class SealedVersion:
    """What a zombie writer of a state file needs: the version, its lineage and its changes."""

    store_id: str
    version: int
    uid: str
    parent_uid: str
    changes: tuple[tuple[str, Any], ...]


def zombie_landings(step: str, batch: int, partition: int, uid: str, sealed: Iterable[SealedVersion],
                    delta_kind: str, rows: Sequence[Any] = ()) -> list[tuple[str, bytes]]:
    """The files a failed attempt's late writer lands.

    A sink part file holds the attempt's own output rows (``rows``): what a real late writer lands, a
    duplicate an at-least-once sink may show and an exactly-once sink must never commit. State files
    carry ``ZOMBIE_KEY`` besides the attempt's changes, so a load that trusts one shows in the state.
    """
    if step == "sink_write":
        return [(layout.sink_part_path(batch, partition, uid), json.dumps(list(rows)).encode())]
    if step != "changelog_write":
        return []
    out = []
    for s in sealed:
        header = StateFileHeader(delta_kind, s.version, s.uid, s.parent_uid)
        payload = encode_state_file(header, tuple(s.changes) + ((ZOMBIE_KEY, batch),))
        out.append((layout.state_file(s.store_id, partition, s.version, uid, delta_kind), payload))
    return out


def sealed_versions(sealed: Mapping[str, Any]) -> list[SealedVersion]:
    """The reference store's sealed versions (``state_store.Sealed``) as zombie material."""
    return [SealedVersion(sid, s.version, s.uid, s.parent_uid, tuple(s.changes)) for sid, s in sealed.items()]
