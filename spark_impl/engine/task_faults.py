"""The executor side's fault substrate: what a fault at a task step does inside a Spark task attempt.

Task-step faults travel with their batch's tasks (``FaultBook.take_task_faults``)
and fire on the executor, at the step they name, once across every attempt and
process (a marker file claimed with O_EXCL). What a fired fault does is the
reference's decision table (``reference.protocol.faults.apply_fault``); this module only
says how each effect happens here:

- ``delay``: the task sleeps;
- ``crash_driver``: the task writes the crash marker (and SIGKILLs the driver
  process in process mode); the driver drops the incarnation;
- ``fail_task``: the attempt raises ``InjectedTaskFailure``, and Spark retries it;
- ``fail_query`` (a pending async state commit failed): the background commit
  reports the failure, and the driver fails the query;
- ``lose_executor``: the executor's Python worker dies with every store it
  cached (and on a cluster the executor JVM with it);
- ``plant_zombie``: a forked process lands the failed attempt's write after the
  driver committed the batch (``reference.protocol.faults.zombie_landings`` gives the bytes).
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any, Mapping, NoReturn

from reference.protocol.faults import SealedVersion, apply_fault, matches, zombie_landings
from reference.language.steps import NodeId
from reference.protocol.storage import Storage

from .coordination import POLL_S, WAIT_TIMEOUT_S, atomic_write, claim, fault_marker
from .task_spec import TaskSpec

EXECUTOR_LOST_EXIT = 137   # the exit status of a worker killed by SIGKILL


class InjectedTaskFailure(RuntimeError):
    """A fault made this task attempt fail; Spark retries the task."""


class TaskFaults:
    """The faults of one task attempt (batch ``spec.batch``, partition ``p``), and the substrate they act on."""

    def __init__(self, spec: TaskSpec, p: int, storage: Storage, uid: str):
        self.spec, self.p, self.uid = spec, p, uid
        self.storage: Storage = storage
        self.sealed: Mapping[str, Any] = {}   # the attempt's sealed versions, once task_apply sealed them

    def at(self, step: str, when: str) -> bool:
        """Fire the faults of this point (each once, across attempts); True when the step must be skipped."""
        node = NodeId.of(step, self.spec.batch, self.p)
        background = step in self.spec.background_steps
        skip = False
        for index, fault in self.spec.faults:
            if matches(fault, node, when, 0) and claim(fault_marker(self.spec.coord, index)):
                skip = apply_fault(fault, node, when, background, self) or skip
        return skip

    # ------------------------------------------------------------ the substrate
    def crash_driver(self, reason: str) -> NoReturn:
        spec = self.spec
        if spec.kill_driver and spec.driver_pid:
            os.kill(spec.driver_pid, signal.SIGKILL)
        atomic_write(spec.coordination.crash(), reason)
        raise InjectedTaskFailure(f"{reason}: the driver is gone")

    def fail_query(self, reason: str) -> NoReturn:
        """Only a background step (the async state commit) fails the query from a task: its failure is
        reported through ``async/<p>/<b>``, which the driver turns into a query failure."""
        raise InjectedTaskFailure(reason)

    def delay(self, ms: int) -> None:
        time.sleep(ms / 1000.0)

    def skew_clock(self, ms: int) -> None:
        raise AssertionError("clock_skew is the driver's clock: it never travels with a task")

    def lose_executor(self, node: NodeId) -> None:
        """The executor's Python worker dies with everything it cached (on a cluster, its executor JVM too)."""
        where = self.spec.coordination
        where.record_loss(self.spec.executor(self.p))
        atomic_write(where.failed(self.p, self.spec.batch), "failed: executor_loss")
        jvm = executor_jvm()
        if jvm is not None:
            os.kill(jvm, signal.SIGKILL)  # the worker starts another executor
        os._exit(EXECUTOR_LOST_EXIT)

    def plant_zombie(self, node: NodeId) -> None:
        """This attempt dies, but a write it started lands later, after the driver commits the batch."""
        spec = self.spec
        landings = zombie_landings(node.step, node.batch, self.p, self.uid, sealed_material(self.sealed),
                                   spec.delta_kind)
        if not landings:
            return
        marker = spec.coordination.zombie(node.batch, self.p, self.uid)
        atomic_write(marker, "planted")
        # a failed attempt ends its Python worker, threads and all: the late writer is its own process
        if os.fork() == 0:
            try:
                self._land(landings, marker)
            finally:
                os._exit(0)

    def fail_task(self, node: NodeId, when: str, reason: str) -> None:
        raise InjectedTaskFailure(reason)

    # ------------------------------------------------------------ helpers
    def _land(self, landings: list[tuple[str, bytes]], marker: Path) -> None:
        where = self.spec.coordination
        committed, stop = where.committed(self.spec.batch), where.stop()
        deadline = time.monotonic() + WAIT_TIMEOUT_S
        while not committed.exists() and not stop.exists() and time.monotonic() < deadline:
            time.sleep(POLL_S)
        for path, payload in landings:
            self.storage.write(path, payload, overwrite=True)
        atomic_write(marker, "landed")


def sealed_material(sealed: Mapping[str, Any]) -> list[SealedVersion]:
    """The RocksDB store's sealed versions (raw key and JSON value bytes) as zombie material."""
    return [SealedVersion(sid, s.version, s.uid, s.parent_uid,
                          tuple((k.decode(), json.loads(v) if v is not None else None) for k, v in s.changes))
            for sid, s in sealed.items()]


def executor_jvm() -> int | None:
    """The executor JVM this Python worker belongs to, on a cluster (None in local mode: that JVM is
    the driver's)."""
    pid = os.getpid()
    for _ in range(6):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            pid = int(stat.rsplit(")", 1)[1].split()[1])
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        except (OSError, ValueError, IndexError):
            return None
        if b"CoarseGrainedExecutorBackend" in cmd:
            return pid
        if pid <= 1:
            return None
    return None
