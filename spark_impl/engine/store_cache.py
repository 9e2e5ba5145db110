"""The executor side's cache of open state stores: one per (incarnation, store, partition) in each Python worker.

State lives in ``RocksDBStateStore`` instances that a worker process keeps
open between batches, keyed by (incarnation epoch, store, partition). A task
uses a cached store only when it holds exactly the version and lineage id the
task needs; anything else (another worker process, a retried attempt that
already committed, an executor loss) loads the version from the checkpoint
directory. The cache is process-global on purpose: it is what survives from
one task to the next in a worker, as a Spark executor's loaded state store
providers do.

Under pipelining the task of batch b+1 for partition p may start before the
driver knows which attempt of (b, p) won; it then waits for ``done/<p>/<b>``
and reports the lineage id it built on, which the driver checks.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

from reference.protocol import layout
from reference.protocol.storage import Storage

from .coordination import POLL_S, WAIT_TIMEOUT_S, Coordination, TaskWaitFailed, wait_for
from .task_spec import TaskSpec

YIELD_GRACE_S = 1.0         # how long a retry may take to start before a waiting task yields its slot

_stores: dict[tuple[str, str, int], Any] = {}        # (epoch, store id, p) -> RocksDBStateStore
_generation: dict[tuple[str, str, int], int] = {}    # eviction generation the cached store was loaded in
_epoch_coord: dict[str, str] = {}                    # epoch -> its coordination directory
_lock = threading.Lock()


def stores_for(spec: TaskSpec, storage: Storage, p: int) -> tuple[dict[str, Any], dict[str, str], int]:
    """Version ``batch`` of every store of partition p; returns (stores, input lineage, cache hits)."""
    close_finished_epochs(spec)
    hits = 0
    generation = spec.coordination.eviction_generation(spec.executor(p))
    stores, lineage = {}, {}
    for sid in spec.store_ids():
        uid = _input_lineage(spec, sid, p)
        lineage[sid] = uid or ""
        store, hit = _store(spec, storage, sid, p, uid, generation)
        hits += hit
        stores[sid] = store
    return stores, lineage, hits


def _store(spec: TaskSpec, storage: Storage, sid: str, p: int, uid: str | None,
           generation: int) -> tuple[Any, bool]:
    """The cached store of (sid, p) if it holds version ``batch`` of lineage ``uid``, else a fresh load."""
    key = (spec.epoch, sid, p)
    with _lock:
        store = _stores.get(key)
        if store is not None and _generation.get(key) != generation:
            store.crash()   # its executor was lost: what it cached is gone
            _stores.pop(key)
            store = None
    moved = p in spec.moved   # the partition's task runs on another executor from this batch on
    if store is not None and not moved and store.version == spec.batch and (uid is None or store.uid == uid):
        store.abort()  # a failed attempt's unsealed changes, if any
        return store, True
    if spec.batch > 0:   # first, so a moved store's own async commit lands before the old copy is closed
        _wait_for_durable(spec, storage, sid, p, spec.batch, uid)
    if store is not None:
        store.close()
    store = _new_store(spec, storage, sid, p)
    if spec.batch > 0:
        store.load(spec.batch, uid)
    with _lock:
        _stores[key] = store
        _generation[key] = generation
    return store, False


def _new_store(spec: TaskSpec, storage: Storage, sid: str, p: int) -> Any:
    from spark_impl.state_store import RocksDBStateStore
    cfg = spec.query.engine
    return RocksDBStateStore(storage, sid, p, cfg.provider, cfg.min_deltas_for_snapshot, local_root=spec.local_root)


def _input_lineage(spec: TaskSpec, sid: str, p: int) -> str | None:
    """The lineage id of version ``batch`` of (sid, p): from the driver, or from the previous task."""
    known = spec.lineage_in.get((sid, p))
    if known is not None or spec.batch == 0:
        return known
    if spec.batch == spec.first_batch:
        return None  # nothing committed before this batch
    where, previous = spec.coordination, spec.batch - 1
    done = wait_for(where.done(p, previous), f"partition {p} of batch {previous} to finish", where.stop(),
                    yield_if=lambda: where.retry_not_started(p, previous, YIELD_GRACE_S))
    return str(json.loads(done)[sid])


def _wait_for_durable(spec: TaskSpec, storage: Storage, sid: str, p: int, version: int,
                      uid: str | None) -> None:
    """A version committed asynchronously in another worker may still be on its way to the checkpoint."""
    if not spec.async_state or uid is None:
        return
    path = layout.state_file(sid, p, version, uid, spec.delta_kind)
    snapshot = layout.state_file(sid, p, version, uid, "snapshot")
    status = spec.coordination.async_status(p, version - 1)
    deadline = time.monotonic() + WAIT_TIMEOUT_S
    while not storage.exists(path) and not storage.exists(snapshot):
        if status.exists() and status.read_text().startswith("failed"):
            raise TaskWaitFailed(f"version {version} of {sid}/{p} will never be durable: {status.read_text()}")
        if time.monotonic() > deadline or spec.coordination.stop().exists():
            raise TaskWaitFailed(f"gave up waiting for {path}")
        time.sleep(POLL_S)


def close_finished_epochs(spec: TaskSpec) -> None:
    """Close the stores of incarnations that have ended (their driver wrote ``stop``).

    A Python worker outlives the queries it served; stores it kept open would
    hold memtables in the shared write-buffer budget, and RocksDB stalls every
    writer once that budget is full. They are dropped without a flush (what
    the ended incarnation committed is in its checkpoint) and their local
    directories removed, on a background thread, off this task's critical
    path. A flush would fail this unrelated task if the directory had been
    removed, and RocksDB then takes about a second to close the database.
    """
    _epoch_coord[spec.epoch] = spec.coord
    ended: list[Any] = []
    with _lock:
        for epoch, coord in list(_epoch_coord.items()):
            if epoch != spec.epoch and Coordination(coord, epoch).stop().exists():
                for key in [k for k in _stores if k[0] == epoch]:
                    ended.append(_stores.pop(key))
                    _generation.pop(key, None)
                del _epoch_coord[epoch]
    if ended:
        threading.Thread(target=lambda: [store.crash() for store in ended], name="close-ended-stores",
                         daemon=True).start()
