"""The task body: one Spark task attempt runs one partition of one micro-batch on an executor.

A task attempt runs the task steps of spec section 2 back to back:
``state_load`` (the executor's cached store, or a load from the checkpoint:
``store_cache.py``), ``task_apply`` (``reference.protocol.query.apply_partition``),
then (sync state checkpointing) ``changelog_write`` and ``state_commit``
(each store on a thread of its own under parallel store commit), then
``sink_write``. Under async state checkpointing the changelog upload and
the commit run on a background thread of the executor's Python worker after
the task has returned, and the driver learns of them through
``async/<p>/<b>`` (``coordination.py``). Faults fire at each step
(``task_faults.py``).

A Python worker whose task raises is not reused: PySpark ends it, and every
thread in it. A Spark executor outlives a failed task, and so do the
background commits it runs; so a failing task lets the background commits of
its worker finish before its failure leaves the task
(``finish_background_commits``). For the same reason a task of an
incarnation that has already ended runs nothing (``_incarnation_ended``).

Under group scheduling one task runs partition p of several batches in
order, each once the driver releases it; a retried task skips the batches an
earlier attempt already reported.
"""

from __future__ import annotations

import json
import os
import pickle
import threading
import time
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, Callable, Iterable, Iterator

from reference.protocol import layout
from reference.protocol.query import PartitionResult, StoreChanges, apply_partition, route, rows_of, sink_rows
from reference.protocol.sources import SourceData
from reference.protocol.storage import CheckpointFormatError, LocalStorage, Storage

from .coordination import TaskWaitFailed, atomic_write, debug_log, wait_for
from .storage_latency import storage_latency_for, thread_storage_ms
from .store_cache import stores_for
from .task_faults import TaskFaults
from .task_spec import TaskSpec

RELEASE_TIMEOUT_S = 600.0   # group scheduling: a batch may legitimately wait long for its input
RELEASE_POLL_S = 0.002
STATE_ORDER_TIMEOUT_S = 60.0   # as long as the driver waits for a background commit (async_state_watch)
BACKGROUND_COMMIT_GRACE_S = STATE_ORDER_TIMEOUT_S   # past it the driver has failed the query anyway

TaskResult = dict[str, Any]   # what a task attempt reports to the driver (through collect or a result file)
PartitionFunction = Callable[[int, Iterable[Any]], Iterator[Any]]

_background_commits: set[threading.Thread] = set()   # this worker's background commits still running
_background_lock = threading.Lock()


class StepClock:
    """Milliseconds spent in each task step of one attempt."""

    def __init__(self) -> None:
        self.timings_ms: dict[str, float] = {}
        self.mark = time.perf_counter()

    def lap(self, step: str) -> None:
        now = time.perf_counter()
        self.timings_ms[step] = self.timings_ms.get(step, 0.0) + (now - self.mark) * 1000.0
        self.mark = now


@dataclass
class Applied:
    """What ``task_apply`` did to one partition: its input, the pipeline's result and the sealed versions."""

    input_rows: int
    result: PartitionResult
    changes: dict[str, StoreChanges]
    sealed: dict[str, Any]
    straggler_ms: float


def run_task(spec: TaskSpec, p: int, attempt: int) -> TaskResult:
    """One attempt of the task for partition ``p`` of batch ``spec.batch``; see the module docstring."""
    started = time.time()
    b, uid = spec.batch, f"r{spec.number}b{spec.batch}p{p}a{attempt}"
    debug_log(spec.coordination, f"b{b} p{p} start {uid}")
    storage = storage_latency_for(LocalStorage(spec.root), spec.root, spec.storage_latency)
    storage_ms_before = thread_storage_ms(storage)
    faults = TaskFaults(spec, p, storage, uid)
    clock = StepClock()
    stores, lineage_in, hits = _load_state(spec, faults, storage, p)
    clock.lap("state_load")
    applied = _apply(spec, faults, stores, p, uid)
    clock.lap("task_apply")
    commit_ms: dict[str, float] = {}
    if not spec.async_state:
        commit_ms = commit_state(spec, faults, stores, applied.sealed)
        clock.lap("state_commit")
    sink_file, rows = _write_sink(spec, faults, storage, p, uid, applied.result)
    clock.lap("sink_write")
    done = _hand_off(spec, faults, stores, applied.sealed, p)
    debug_log(spec.coordination, f"b{b} p{p} done {uid} hits {hits}")
    return {"partition": p, "batch": b, "uid": uid, "attempt": attempt, "lineage_in": lineage_in,
            "lineage_out": done, "sink_file": sink_file, "output_rows": rows,
            "input_rows": applied.input_rows, "max_event_ms": applied.result.max_event_ms,
            "changes": {sid: [c.updated, c.removed, c.total] for sid, c in applied.changes.items()},
            "commit_ms": {sid: round(ms, 3) for sid, ms in commit_ms.items()},
            "memory_bytes": {sid: _memory_bytes(store) for sid, store in stores.items()},
            "cache_hits": hits, "timings_ms": clock.timings_ms, "straggler_ms": applied.straggler_ms,
            "storage_ms": round(thread_storage_ms(storage) - storage_ms_before, 3),
            "started": started, "finished": time.time(), "pid": os.getpid()}


def _memory_bytes(store: Any) -> int:
    """The store's memoryUsedBytes: the RocksDB gauge (block cache and write buffers; shared by the
    process's stores, as under Spark's bounded memory); 0 for a store without one."""
    usage = getattr(store, "memory_usage", None)
    return int(usage().total_bytes) if usage is not None else 0


def _load_state(spec: TaskSpec, faults: TaskFaults, storage: Storage,
                p: int) -> tuple[dict[str, Any], dict[str, str], int]:
    """``state_load``: every store of the partition at version ``batch``; (stores, input lineage, cache hits)."""
    loaded: tuple[dict[str, Any], dict[str, str], int] = ({}, {}, 0)
    if not faults.at("state_load", "before"):
        loaded = stores_for(spec, storage, p)
    faults.at("state_load", "after")
    return loaded


def _apply(spec: TaskSpec, faults: TaskFaults, stores: dict[str, Any], p: int, uid: str) -> Applied:
    """``task_apply``: the reference's pipeline over the partition's records, written into its stores."""
    faults.at("task_apply", "before")
    query = spec.query
    # a redelivering source's records come through the driver's fetch ledger (``reference/protocol/redelivery.py``)
    batch = SourceData.of(query).slice(spec.start, spec.end, dict(spec.ledgers))
    records = route(batch, query.state_partitions)[p]
    result, changes = apply_partition(query.operator.flatten(), stores, rows_of(records), list(spec.watermarks))
    sealed = {sid: store.seal(uid) for sid, store in stores.items()}
    faults.sealed = sealed
    extra_ms = spec.straggler_ms(p)
    if extra_ms:
        time.sleep(extra_ms / 1000.0)
    faults.at("task_apply", "after")
    return Applied(len(records), result, changes, sealed, extra_ms)


def _write_sink(spec: TaskSpec, faults: TaskFaults, storage: Storage, p: int, uid: str,
                result: PartitionResult) -> tuple[str, int]:
    """``sink_write``: the attempt's part file; returns its path and how many rows it holds."""
    faults.at("sink_write", "before")
    rows = sink_rows(result.output)
    sink_file = layout.sink_part_path(spec.batch, p, uid)
    storage.write(sink_file, json.dumps(rows).encode(), overwrite=True)
    faults.at("sink_write", "after")
    return sink_file, len(rows)


def _hand_off(spec: TaskSpec, faults: TaskFaults, stores: dict[str, Any], sealed: dict[str, Any],
              p: int) -> dict[str, str]:
    """Start the background commit (async state checkpointing) and tell the next batch's task which
    attempt's versions it builds on (``done/<p>/<b>``)."""
    done = {sid: s.uid for sid, s in sealed.items()}
    if spec.async_state and stores:
        start_background_commit(partial(commit_in_background, spec, faults, stores, sealed, p),
                                f"async-commit-b{spec.batch}-p{p}")
    if stores:
        atomic_write(spec.coordination.done(p, spec.batch), json.dumps(done))
    return done


def commit_state(spec: TaskSpec, faults: TaskFaults, stores: dict[str, Any],
                 sealed: dict[str, Any]) -> dict[str, float]:
    """``changelog_write`` then ``state_commit`` (and maybe a background snapshot) for every store;
    returns each store's commit time in ms (its changelog write and its commit), Spark's commitTimeMs.

    Spark OSS commits a partition's stores one after the other in its task (a join's state manager
    commits its two stores in turn, left side then right). Under parallel store commit (Lightspeed)
    each store commits on a thread of its own, and the partition's commit ends when every store's has:
    a fault at a commit step fires in the first store to reach it."""
    spent = dict.fromkeys(stores, 0.0)
    if spec.query.engine.parallel_store_commit and len(stores) > 1:
        run_concurrently([partial(_commit_stores, faults, {sid: store}, sealed, spent)
                          for sid, store in stores.items()], f"commit-b{spec.batch}-p{faults.p}")
    else:
        _commit_stores(faults, stores, sealed, spent)
    if spec.maintenance and not faults.at("snapshot_upload", "before"):
        for store in stores.values():
            store.schedule_maintenance()
        faults.at("snapshot_upload", "after")
    return spent


def _commit_stores(faults: TaskFaults, stores: dict[str, Any], sealed: dict[str, Any],
                   spent: dict[str, float]) -> None:
    """Write every given store's file, then mark every one durable, with the faults of both steps; adds
    each store's time to ``spent`` (each thread its own stores' entries)."""
    def timed(sid: str, action: Callable[[Any], Any]) -> None:
        began = time.perf_counter()
        action(sealed[sid])
        spent[sid] += (time.perf_counter() - began) * 1000.0

    if not faults.at("changelog_write", "before"):
        for sid, store in stores.items():
            timed(sid, store.write)
    faults.at("changelog_write", "after")
    faults.at("state_commit", "before")
    for sid, store in stores.items():
        timed(sid, store.mark_durable)
    faults.at("state_commit", "after")


def run_concurrently(steps: list[Callable[[], None]], name: str) -> None:
    """Run ``steps`` at once: the first on this thread (so its storage time counts as the task's), the
    others on threads of their own; wait for all, then raise the first failure."""
    failures: list[BaseException] = []

    def run(step: Callable[[], None]) -> None:
        try:
            step()
        except BaseException as exc:  # noqa: BLE001 - re-raised on the task's thread below
            failures.append(exc)

    threads = [threading.Thread(target=run, args=(step,), name=f"{name}-{i}", daemon=True)
               for i, step in enumerate(steps[1:], 1)]
    for thread in threads:
        thread.start()
    run(steps[0])
    for thread in threads:
        thread.join()
    if failures:
        raise failures[0]


def start_background_commit(commit: Callable[[], None], name: str) -> threading.Thread:
    """Run ``commit`` on a daemon thread of this worker, known to ``finish_background_commits``."""
    thread = threading.Thread(target=commit, name=name, daemon=True)
    with _background_lock:
        _background_commits.difference_update([t for t in _background_commits if not t.is_alive()])
        _background_commits.add(thread)
        thread.start()
    return thread


def finish_background_commits(timeout_s: float = BACKGROUND_COMMIT_GRACE_S) -> list[str]:
    """Wait (at most ``timeout_s`` in all) for this worker's background commits to end; returns the names
    of those still running after it.

    A failing task calls it before its failure ends the worker (see the module docstring): without it
    the worker's exit would kill the pending commit of another task, maybe of another partition or batch,
    as if the executor had been lost, and the driver would restart the query with no fault to explain it.
    Each commit ends on its own: its waits are bounded (``STATE_ORDER_TIMEOUT_S``, the incarnation's
    ``stop``)."""
    deadline = time.monotonic() + timeout_s
    with _background_lock:
        running = list(_background_commits)
    for thread in running:
        thread.join(max(0.0, deadline - time.monotonic()))
    return [t.name for t in running if t.is_alive()]


def commit_in_background(spec: TaskSpec, faults: TaskFaults, stores: dict[str, Any], sealed: dict[str, Any],
                         p: int) -> None:
    """Async state checkpointing: commit after the task returned; report the outcome to the driver."""
    where = spec.coordination
    status = where.async_status(p, spec.batch)
    try:
        _wait_for_previous_commit(spec, p)
        debug_log(where, f"b{spec.batch} p{p} async commit starts")
        commit_state(spec, faults, stores, sealed)
    except BaseException as exc:  # noqa: BLE001 - reported to the driver, which fails the query
        atomic_write(status, f"failed: {exc}")
        debug_log(spec.coordination, f"b{spec.batch} p{p} async commit failed {exc}")
        return
    atomic_write(status, "ok")
    debug_log(spec.coordination, f"b{spec.batch} p{p} async commit ok")


def _wait_for_previous_commit(spec: TaskSpec, p: int) -> None:
    """The commit of version b+1 waits for that of version b (the graph's ``changelog_write`` of b depends on
    ``state_commit`` of b-1): the driver submits batch b's job while b-1's background commit may still run, in
    this worker or another. Batch b-1 of an earlier incarnation is durable already."""
    if spec.batch <= spec.first_batch:
        return
    where, previous = spec.coordination, spec.batch - 1
    text = wait_for(where.async_status(p, previous), f"the state commit of batch {previous} partition {p}",
                    where.stop(), STATE_ORDER_TIMEOUT_S, poll_s=RELEASE_POLL_S).decode()
    if text.startswith("failed"):
        raise TaskWaitFailed(f"the state commit of batch {previous} partition {p} {text}")


def run_attempt(spec: TaskSpec, p: int, attempt: int) -> TaskResult:
    """``run_task`` with its start and failure recorded for the driver and for tasks waiting on it."""
    where = spec.coordination
    atomic_write(where.started(p, spec.batch), str(attempt))
    try:
        return run_task(spec, p, attempt)
    except BaseException as exc:
        atomic_write(where.failed(p, spec.batch), f"failed: {type(exc).__name__}: {exc}")
        if isinstance(exc, CheckpointFormatError) and not where.fatal().exists():
            # a damaged checkpoint file: no retry or restart can read it, so the driver stops the
            # query with this error (as the reference does) instead of restarting until it gives up
            atomic_write(where.fatal(), str(exc))
        raise


def _attempt_number() -> int:
    from pyspark import TaskContext
    ctx = TaskContext.get()
    return ctx.attemptNumber() if ctx is not None else 0


def _drain(rows: Iterable[Any]) -> None:
    """Read the partition's input (its own number) to the end. A Python worker whose input is left
    unread is not reused: it exits after the task, with the stores it holds open and any async state
    commit still running on its background thread."""
    for _ in rows:
        pass


def commits_outlive_failure(run: PartitionFunction) -> PartitionFunction:
    """``run``, except that when it fails the worker's background commits finish before the failure
    leaves the task (and PySpark ends the worker)."""
    def guarded(p: int, rows: Iterable[Any]) -> Iterator[Any]:
        try:
            yield from run(p, rows)
        except Exception:
            finish_background_commits()
            raise
    return guarded


def _incarnation_ended(spec: TaskSpec, p: int) -> bool:
    """The task's incarnation has ended (``stop``): the task must run nothing.

    The driver cancels the jobs of an incarnation that fails, but a job submitted just after the cancel
    (its thread was on its way) still runs, in the same Python workers as the next incarnation's tasks, or
    the next query's. Its tasks would only fail (their waits end on ``stop``; a damaged file stays
    damaged), each failure ending a worker with the stores it caches, and Spark would retry each one."""
    if not spec.coordination.stop().exists():
        return False
    debug_log(spec.coordination, f"b{spec.batch} p{p} not run: the incarnation has ended")
    return True


def task_entry(spec: TaskSpec) -> PartitionFunction:
    """The function Spark runs per partition (``mapPartitionsWithIndex``) for a job of one batch; nothing
    once the incarnation has ended."""
    def run(p: int, rows: Iterable[Any]) -> Iterator[Any]:
        _drain(rows)
        if not _incarnation_ended(spec, p):
            yield run_attempt(spec, p, _attempt_number())
    return commits_outlive_failure(run)


def group_entry(base: TaskSpec, batches: tuple[int, ...]) -> PartitionFunction:
    """Group scheduling: the function Spark runs per partition for a group of batches.

    Each batch waits for the driver's release (``go/<b>``, the batch's own
    spec), runs as ``run_task`` would in its own job, and reports through
    ``result/<b>/<p>`` (only there: the job's ``collect`` returns nothing). A
    retried attempt skips batches already reported.
    """
    def run(p: int, rows: Iterable[Any]) -> Iterator[Any]:
        _drain(rows)
        attempt = _attempt_number()
        where = base.coordination
        for b in batches:
            result = where.result(b, p)
            if result.exists():
                continue
            if _incarnation_ended(base, p):
                return
            released = wait_for(where.go(b), f"the driver to release batch {b}", where.stop(), RELEASE_TIMEOUT_S,
                                poll_s=RELEASE_POLL_S)
            spec = replace(pickle.loads(released), scenario=base.scenario)
            atomic_write(result, json.dumps(run_attempt(spec, p, attempt)))
        yield from ()
    return commits_outlive_failure(run)
