"""The files and markers between the engine's driver and its tasks: every kind, named in one place.

The driver and the tasks of an incarnation (in executors' Python workers, on
this machine or on a cluster's workers) talk through small files in a
coordination directory beside the checkpoint, never inside it, reachable by
every worker. Each incarnation has its own folder, named by its epoch:

    <coord>/<epoch>/done/<p>/<b>        the lineage ids task (b, p) committed
    <coord>/<epoch>/evict/<executor>    bumped on an executor loss
    <coord>/<epoch>/crash               a task asked the driver to crash
    <coord>/<epoch>/fatal               a task found a damaged checkpoint file
    <coord>/<epoch>/async/<p>/<b>       outcome of a background state commit
    <coord>/<epoch>/committed/<b>       the driver ran commit_log_write of batch b
    <coord>/<epoch>/zombies/<name>      a zombie write is planted / has landed
    <coord>/<epoch>/go/<b>              group scheduling: the driver released batch b
    <coord>/<epoch>/result/<b>/<p>      group scheduling: the result of task (b, p)
    <coord>/<epoch>/started/<p>/<b>     an attempt of task (b, p) started
    <coord>/<epoch>/failed/<p>/<b>      an attempt of task (b, p) failed, and why
    <coord>/<epoch>/stop                the incarnation ended: its tasks stop waiting
    <coord>/<epoch>/log                 LIGHTSPEED_DEBUG: what tasks did
    <coord>/faults/<index>              fault ``index`` of the scenario fired (each fires once, across processes)

Writes are atomic (a temporary file renamed into place), so a reader sees a
whole file or none.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable


# Every kind of file in an incarnation's folder (the module docstring says what each means).
EPOCH_KINDS = ("done", "evict", "crash", "fatal", "async", "committed", "zombies", "go", "result", "started",
               "failed", "stop", "log")
FAULTS = "faults"        # the one folder outside the epochs: fault markers outlive incarnations
WAIT_TIMEOUT_S = 20.0
POLL_S = 0.005


class TaskWaitFailed(RuntimeError):
    """A task stopped waiting for another task or the driver (timed out, the incarnation stopped, or the
    awaited work failed); the attempt fails and Spark retries it."""


@dataclass(frozen=True)
class Coordination:
    """The coordination folder of one incarnation (``epoch``) under ``coord``."""

    coord: str
    epoch: str

    def _at(self, kind: str, *parts: object) -> Path:
        assert kind in EPOCH_KINDS, f"not a coordination file kind: {kind}"
        return Path(self.coord, self.epoch, kind, *(str(p) for p in parts))

    def done(self, p: int, b: int) -> Path:
        return self._at("done", p, b)

    def evict(self, executor: str) -> Path:
        """The eviction counter of an executor (``TaskSpec.executor``: the placement's, per batch)."""
        return self._at("evict", executor)

    def crash(self) -> Path:
        return self._at("crash")

    def fatal(self) -> Path:
        return self._at("fatal")

    def async_status(self, p: int, b: int) -> Path:
        return self._at("async", p, b)

    def committed(self, b: int) -> Path:
        return self._at("committed", b)

    def zombies(self) -> Path:
        return self._at("zombies")

    def zombie(self, b: int, p: int, uid: str) -> Path:
        return self._at("zombies", f"{b}-{p}-{uid}")

    def go(self, b: int) -> Path:
        return self._at("go", b)

    def results(self, b: int) -> Path:
        return self._at("result", b)

    def result(self, b: int, p: int) -> Path:
        return self._at("result", b, p)

    def started(self, p: int, b: int) -> Path:
        return self._at("started", p, b)

    def failed(self, p: int, b: int) -> Path:
        return self._at("failed", p, b)

    def stop(self) -> Path:
        return self._at("stop")

    def log(self) -> Path:
        return self._at("log")

    def record_loss(self, executor: str) -> None:
        """``executor`` was lost: every store cached under an older count is gone (``store_cache``)."""
        atomic_write(self.evict(executor), str(self.eviction_generation(executor) + 1))

    def eviction_generation(self, executor: str) -> int:
        """How many times ``executor`` was lost in this incarnation."""
        try:
            return int(self.evict(executor).read_text() or "0")
        except (FileNotFoundError, ValueError):
            return 0

    def retry_not_started(self, p: int, b: int, grace_s: float) -> bool:
        """Task (b, p)'s last attempt failed more than ``grace_s`` ago and no attempt started since."""
        try:
            failed_at = self.failed(p, b).stat().st_mtime
        except FileNotFoundError:
            return False
        try:
            started_at = self.started(p, b).stat().st_mtime
        except FileNotFoundError:
            started_at = 0.0
        return started_at <= failed_at and time.time() - failed_at > grace_s


def fault_marker(coord: str, index: int) -> Path:
    """The marker of fault ``index``: it exists once the fault fired, in any process."""
    return Path(coord, FAULTS, str(index))


def claim(path: Path) -> bool:
    """Create ``path`` if nobody has (O_EXCL): True for exactly one claimant across processes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        return True
    except FileExistsError:
        return False


def atomic_write(path: Path, data: str | bytes) -> None:
    """Write ``path`` whole: readers see the old file, or none, or the new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    if isinstance(data, bytes):
        tmp.write_bytes(data)
    else:
        tmp.write_text(data)
    os.replace(tmp, path)


def wait_for(path: Path, what: str, stop: Path | None = None, timeout_s: float = WAIT_TIMEOUT_S,
             poll_s: float = POLL_S, yield_if: Callable[[], bool] | None = None) -> bytes:
    """The bytes of a coordination file, once it exists; ``TaskWaitFailed`` when the incarnation
    stopped (``stop`` exists), when ``yield_if`` says so, or after ``timeout_s``.

    ``yield_if`` says the task being waited for needs this task's slot (its
    last attempt failed and no retry has started): this task then fails so
    that Spark gives the slot to the retry. Spark frees a failed task's slot
    before it re-queues the retry, so a waiting task of a later job can take
    the slot the retry needs.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return path.read_bytes()
        except FileNotFoundError:
            if stop is not None and stop.exists():
                raise TaskWaitFailed(f"the incarnation stopped while waiting for {what}") from None
            if yield_if is not None and yield_if():
                raise TaskWaitFailed(f"yielding this slot: {what} failed and its retry needs a slot") from None
            if time.monotonic() > deadline:
                raise TaskWaitFailed(f"timed out after {timeout_s:.0f} s waiting for {what}") from None
            time.sleep(poll_s)


def count_files(folder: Path) -> int:
    """How many (non-temporary) files ``folder`` holds; 0 when it does not exist."""
    try:
        return sum(1 for name in os.listdir(folder) if not name.startswith("."))
    except FileNotFoundError:
        return 0


def debug_log(where: Coordination, text: str) -> None:
    """With LIGHTSPEED_DEBUG set, tasks append what they do to ``<coord>/<epoch>/log``."""
    if os.environ.get("LIGHTSPEED_DEBUG"):
        path = where.log()
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a") as handle:
            handle.write(f"{time.time():.3f} pid {os.getpid()} {text}\n")
