"""Checkpoint storage with the latency of a real store: every operation sleeps a draw from a named profile.

The engine writes its checkpoint to a local directory, where a log write costs
about a millisecond, so asynchronous progress tracking has almost nothing to
hide. The published Lightspeed runs wrote to a cloud object store.
``LatencyStorage`` wraps any ``reference.protocol.storage.Storage`` and, for each
operation, sleeps the latency that ``reference.protocol.storage_profiles.LatencyDraws``
draws for it from the named profile: the one draw function of the project,
which the simulator charges on its clock and native Spark's checkpoint
filesystem (``spark_impl/native/checkpoint_fs.py``) sleeps in the JVM, so the
n-th operation of a kind on a stream costs the same on all three:

============================  ===============================================
operation                     latency drawn (``LatencyDraws`` kinds)
============================  ===============================================
``write`` (atomic create)     ``create`` of ``len(data)`` bytes (small write
                              + bytes / bandwidth), then the ``rename`` that
                              publishes it
``read``                      ``read`` of ``len(data)``: first byte + transfer
``exists``                    ``exists``: a metadata request (HEAD)
``rename``                    ``rename``
``list``                      ``list``
``delete``                    ``delete``
============================  ===============================================

The sink is not part of the checkpoint: its files, which the engine keeps
only so that the oracles can judge them, pay no latency (``layout.SINK``).
The published benchmark's stat sink writes nothing at all, and the
simulator's profile for it (``sink_part_files`` 0) charges nothing.

The operation runs first and the sleep follows, so a failed operation costs
nothing and the bytes are where they would be. Draws are seeded: the same
seed and the same sequence of operations give the same sleeps (a lock keeps
the stream whole when threads share one storage).

The driver wraps its checkpoint storage (offset and commit log writes,
purge, recovery's reads); each executor's Python worker wraps its own, from
the profile name and seed in the task spec (``storage_latency_for``), for
state file uploads, loads and sink files. Each wrapper counts what it slept
per operation kind; a task reports the time its own thread slept.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Callable

from reference.protocol import layout
from reference.protocol.storage import Storage
from reference.protocol.storage_profiles import LatencyDraws, StorageProfile, storage_profile

OPERATIONS = ("write", "read", "exists", "rename", "list", "delete")


@dataclass(frozen=True)
class StorageLatency:
    """What a run's checkpoint storage costs: a named profile (``reference.protocol.storage_profiles``) and a seed."""

    profile: str
    seed: int | str

    def __post_init__(self) -> None:
        storage_profile(self.profile)   # StorageProfileError naming an unknown profile, before anything runs

    def draws(self, stream: str) -> LatencyDraws:
        """The seeded draws of one storage (``stream`` tells the driver's from an executor's)."""
        return LatencyDraws(storage_profile(self.profile), f"{self.seed}/{stream}")


class LatencyStorage:
    """A ``Storage`` that sleeps each operation's drawn latency after doing it on ``inner``."""

    def __init__(self, inner: Storage, draws: LatencyDraws, *, sleep: Callable[[float], None] = time.sleep,
                 name: str = ""):
        self.inner, self.draws, self.sleep, self.name = inner, draws, sleep, name
        self.snapshot_readers = inner.snapshot_readers
        self._lock = threading.Lock()
        self._mine = threading.local()
        self.count = {op: 0 for op in OPERATIONS}
        self.slept_ms = {op: 0.0 for op in OPERATIONS}

    @property
    def profile(self) -> StorageProfile:
        return self.draws.profile

    # ------------------------------------------------------------- the Storage interface
    def write(self, path: str, data: bytes, *, overwrite: bool = False) -> None:
        self.inner.write(path, data, overwrite=overwrite)
        if not _is_sink(path):
            self._wait("write", self.draws.write_ms, len(data))   # create, then the rename that publishes it

    def read(self, path: str) -> bytes:
        data = self.inner.read(path)
        if not _is_sink(path):
            self._wait("read", self.draws.read_ms, len(data))
        return data

    def exists(self, path: str) -> bool:
        found = self.inner.exists(path)
        if not _is_sink(path):
            self._wait("exists", self.draws.exists_ms)
        return found

    def delete(self, path: str) -> None:
        self.inner.delete(path)
        if not _is_sink(path):
            self._wait("delete", self.draws.delete_ms)

    def rename(self, src: str, dst: str) -> None:
        self.inner.rename(src, dst)
        if not _is_sink(src):
            self._wait("rename", self.draws.rename_ms)

    def list(self, prefix: str = "") -> list[str]:
        out = self.inner.list(prefix)
        if not _is_sink(prefix):
            self._wait("list", self.draws.list_ms)
        return out

    # ------------------------------------------------------------- accounting
    def _wait(self, op: str, draw: Callable[..., float], *args: int) -> None:
        with self._lock:
            ms = draw(*args)
            self.count[op] += 1
            self.slept_ms[op] += ms
        self._mine.ms = self.thread_ms() + ms
        self.sleep(ms / 1000.0)

    def thread_ms(self) -> float:
        """What the calling thread has slept on this storage so far, ms."""
        return getattr(self._mine, "ms", 0.0)

    def report(self) -> dict[str, object]:
        """Operations and drawn milliseconds per kind, and the total (for an outcome's details)."""
        with self._lock:
            ops = {op: {"count": self.count[op], "ms": round(self.slept_ms[op], 3)}
                   for op in OPERATIONS if self.count[op]}
            total = round(sum(self.slept_ms.values()), 3)
        return {"operations": ops, "total_ms": total}


def _is_sink(path: str) -> bool:
    return path == layout.SINK or path.startswith(layout.SINK + "/")


def with_latency(inner: Storage, latency: StorageLatency | None, stream: str, *,
                 sleep: Callable[[float], None] = time.sleep) -> Storage:
    """``inner`` as it is without a profile, else wrapped to sleep the profile's draws of ``stream``."""
    if latency is None:
        return inner
    return LatencyStorage(inner, latency.draws(stream), sleep=sleep, name=stream)


_executor_storages: dict[tuple[str, StorageLatency], LatencyStorage] = {}
_executor_lock = threading.Lock()


def storage_latency_for(inner: Storage, root: str, latency: StorageLatency | None) -> Storage:
    """An executor worker's checkpoint storage: one wrapper per (checkpoint, profile, seed) in the process,
    so the state stores a worker keeps open and its later tasks share one seeded stream of draws."""
    if latency is None:
        return inner
    key = (root, latency)
    with _executor_lock:
        found = _executor_storages.get(key)
        if found is None:
            found = _executor_storages[key] = LatencyStorage(inner, latency.draws("executor"), name="executor")
        return found


def thread_storage_ms(storage: Storage) -> float:
    """What the calling thread slept on ``storage`` so far (0 for a storage without latency)."""
    return storage.thread_ms() if isinstance(storage, LatencyStorage) else 0.0


def storage_report(storage: Storage) -> dict[str, object] | None:
    return storage.report() if isinstance(storage, LatencyStorage) else None


def storage_details(latency: StorageLatency | None, driver: Storage | None,
                    task_results: list[dict[str, object]]) -> dict[str, object] | None:
    """What the run's checkpoint storage cost (an outcome's ``details["spark"]["storage"]``): the profile and
    seed, the driver's operations and sleeps per kind, and the sleeps inside tasks (their own threads)."""
    if latency is None:
        return None
    task_ms = [float(r.get("storage_ms", 0.0)) for r in task_results]   # type: ignore[arg-type]
    return {"profile": latency.profile, "seed": latency.seed,
            "driver": storage_report(driver) if driver is not None else None,
            "tasks_ms": round(sum(task_ms), 3), "task_ms_mean": round(sum(task_ms) / len(task_ms), 3)
            if task_ms else None}
