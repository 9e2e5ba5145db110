"""The executor's background maintenance pool (spec section 2, ``snapshot_upload`` and ``purge``).

Like Spark's ``StateStore`` maintenance task, a small per-process thread pool
runs each store's ``do_maintenance`` (upload the newest pending snapshot) off
the commit path, skipping a store whose previous round is still running, and
deletes files of versions past retention in parallel. Deletion uses its own
executor so a maintenance round that cleans up never waits on its own pool.
"""

from __future__ import annotations

import functools
import threading
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Iterable, Protocol

from reference.protocol.storage import Storage

DEFAULT_MAINTENANCE_THREADS = 2
DEFAULT_DELETE_THREADS = 4


class Maintainable(Protocol):
    def do_maintenance(self) -> str | None: ...


class MaintenancePool:
    """Runs store maintenance in background threads; at most one round per store at a time."""

    def __init__(self, threads: int = DEFAULT_MAINTENANCE_THREADS,
                 delete_threads: int = DEFAULT_DELETE_THREADS):
        self._executor = ThreadPoolExecutor(threads, thread_name_prefix="state-maintenance")
        self._deleter = ThreadPoolExecutor(delete_threads, thread_name_prefix="state-delete")
        self._running: dict[int, Future] = {}
        self._lock = threading.Lock()

    def submit(self, store: Maintainable) -> Future | None:
        """Schedule ``store.do_maintenance()``; None when a round for it is still running."""
        with self._lock:
            running = self._running.get(id(store))
            if running is not None and not running.done():
                return None
            future = self._executor.submit(store.do_maintenance)
            self._running[id(store)] = future
        # outside the lock: a round that already finished runs its callback right here, and the
        # callback takes the lock (inside it, a fast round deadlocked the submitting task)
        future.add_done_callback(functools.partial(self._forget, id(store)))
        return future

    def _forget(self, key: int, future: Future) -> None:
        with self._lock:
            if self._running.get(key) is future:
                del self._running[key]

    def delete_all(self, storage: Storage, paths: Iterable[str]) -> list[str]:
        """Delete ``paths`` in parallel; waits for all and re-raises the first failure."""
        paths = list(paths)
        futures = [self._deleter.submit(storage.delete, path) for path in paths]
        done, _ = wait(futures)
        for future in futures:
            future.result()
        return paths

    def shutdown(self, wait_for_running: bool = True) -> None:
        self._executor.shutdown(wait=wait_for_running)
        self._deleter.shutdown(wait=wait_for_running)


_pool_lock = threading.Lock()
_pool: MaintenancePool | None = None


def default_pool() -> MaintenancePool:
    """The process-wide maintenance pool."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = MaintenancePool()
        return _pool
