"""The executor side of the engine: one Spark task runs one partition of one micro-batch.

A task attempt runs the task steps of SPEC section 2 back to back on the
executor: ``state_load``, ``task_apply``, then (sync state checkpointing)
``changelog_write`` and ``state_commit``, then ``sink_write``. Under async
state checkpointing the changelog upload and the commit run on a background
thread of the executor's Python worker after the task has returned, and the
driver learns of them by watching the checkpoint directory.

State lives in ``RocksDBStateStore`` instances cached in the worker process
between batches, keyed by (incarnation epoch, store, partition). A cached
store is used only when it holds exactly the version and lineage id the task
needs; anything else (another worker process, a retried attempt that already
committed, an executor loss) loads the version from the checkpoint directory.

Coordination files live in a directory beside the checkpoint (never inside
it), shared by every worker:

    <coord>/<epoch>/done/<p>/<b>        the lineage ids task (b, p) committed
    <coord>/<epoch>/evict/<executor>    bumped on an executor loss
    <coord>/<epoch>/crash               a task asked the driver to crash
    <coord>/<epoch>/async/<p>/<b>       outcome of a background state commit
    <coord>/<epoch>/committed/<b>       the driver ran commit_log_write of batch b
    <coord>/<epoch>/zombies/<name>      a zombie write is planted / has landed
    <coord>/<epoch>/go/<b>              group scheduling: the driver released batch b
    <coord>/<epoch>/result/<b>/<p>      group scheduling: the result of task (b, p)
    <coord>/<epoch>/started/<p>/<b>     an attempt of task (b, p) started
    <coord>/<epoch>/failed/<p>/<b>      an attempt of task (b, p) failed, and why
    <coord>/faults/<index>              a fault fired (each fires once)

Under group scheduling one task runs partition p of several batches in
order, each once the driver releases it; a retried task skips the batches an
earlier attempt already reported.

Under pipelining, the task of batch b+1 for partition p may start before the
driver knows which attempt of (b, p) won; it then waits for ``done/<p>/<b>``
and reports the lineage id it built on, which the driver checks.
"""

from __future__ import annotations

import json
import os
import pickle
import signal
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from reference import layout
from reference.changelog import StateFileHeader, encode_state_file
from reference.engine import EXECUTORS
from reference.query import route, rows_of, run_partition, sink_rows
from reference.scenario import Scenario
from reference.sources import SourceData
from reference.storage import CheckpointFormatError, LocalStorage

WAIT_TIMEOUT_S = 20.0
YIELD_GRACE_S = 1.0         # how long a retry may take to start before a waiting task yields its slot
RELEASE_TIMEOUT_S = 600.0   # group scheduling: a batch may legitimately wait long for its input
POLL_S = 0.005
ZOMBIE_KEY = "__zombie__"


class InjectedTaskFailure(RuntimeError):
    """A fault made this task attempt fail; Spark retries the task."""


@dataclass(frozen=True)
class TaskFault:
    index: int
    kind: str
    step: str
    when: str
    partition: int | None
    ms: int | None = None
    path: str | None = None


@dataclass(frozen=True)
class TaskSpec:
    """Everything a task of one batch needs; shipped to executors with the job."""

    scenario: Scenario | None  # None only in a released batch's spec (the group job's spec has it)
    root: str                 # the checkpoint directory (shared by every worker)
    coord: str                # coordination directory (shared, outside the checkpoint)
    local_root: str           # executor-local scratch for RocksDB instances
    epoch: str
    number: int               # the incarnation: part of every lineage id
    batch: int
    start: tuple[int, ...]
    end: tuple[int, ...]
    watermarks: tuple[int, ...]
    lineage_in: dict[tuple[str, int], str] = field(default_factory=dict)  # (store, p) -> uid of version b
    first_batch: int = 0      # first batch of the incarnation (its input lineage is always known)
    maintenance: bool = False
    faults: tuple[TaskFault, ...] = ()
    driver_pid: int = 0
    kill_driver: bool = False  # driver_crash by SIGKILL (else the driver is asked to crash)
    straggler: tuple[float, float, int] | None = None  # (probability, extra ms, seed): synthetic slow tasks

    def straggler_ms(self, p: int) -> float:
        """Extra work of task (batch, p): a seeded draw, the same on every attempt and every backend run."""
        if self.straggler is None:
            return 0.0
        import random
        probability, extra_ms, seed = self.straggler
        return extra_ms if random.Random(f"{seed}/{self.batch}/{p}").random() < probability else 0.0

    @property
    def async_state(self) -> bool:
        return self.scenario.engine.state_checkpoint == "async"


# ------------------------------------------------------------------ caches
_stores: dict[tuple[str, str, int], Any] = {}        # (epoch, store id, p) -> RocksDBStateStore
_generation: dict[tuple[str, str, int], int] = {}    # eviction generation the cached store was loaded in
_lock = threading.Lock()


def stop_marker(spec: TaskSpec) -> Path:
    """Written by the driver when an incarnation ends: its tasks stop waiting."""
    return Path(spec.coord, spec.epoch, "stop")


def _evict_generation(spec: TaskSpec, p: int) -> int:
    path = Path(spec.coord, spec.epoch, "evict", str(p % EXECUTORS))
    try:
        return int(path.read_text() or "0")
    except (FileNotFoundError, ValueError):
        return 0


def _store_ids(spec: TaskSpec) -> list[str]:
    from reference.query import pipeline_store_ids
    return pipeline_store_ids(spec.scenario.operator.flatten())


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _wait_for(path: Path, what: str, stop: Path | None = None, timeout_s: float = WAIT_TIMEOUT_S,
              poll_s: float = POLL_S, yield_if: Callable[[], bool] | None = None) -> bytes:
    """Wait for a coordination file; give up when the incarnation has stopped (``stop`` exists).

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
                raise InjectedTaskFailure(f"the incarnation stopped while waiting for {what}") from None
            if yield_if is not None and yield_if():
                raise InjectedTaskFailure(f"yielding this slot: {what} failed and its retry needs a slot") from None
            if time.monotonic() > deadline:
                raise InjectedTaskFailure(f"timed out after {timeout_s:.0f} s waiting for {what}") from None
            time.sleep(poll_s)


def _marker(spec: TaskSpec, kind: str, p: int, b: int) -> Path:
    """``failed/<p>/<b>``: an attempt of task (b, p) failed; ``started/<p>/<b>``: an attempt started."""
    return Path(spec.coord, spec.epoch, kind, str(p), str(b))


def _mark_failed(spec: TaskSpec, p: int, why: str = "") -> None:
    _atomic_write(_marker(spec, "failed", p, spec.batch), f"failed: {why}")


def _retry_not_started(spec: TaskSpec, p: int, b: int) -> bool:
    """Task (b, p)'s last attempt failed more than ``YIELD_GRACE_S`` ago and no attempt started since."""
    try:
        failed_at = _marker(spec, "failed", p, b).stat().st_mtime
    except FileNotFoundError:
        return False
    try:
        started_at = _marker(spec, "started", p, b).stat().st_mtime
    except FileNotFoundError:
        started_at = 0.0
    return started_at <= failed_at and time.time() - failed_at > YIELD_GRACE_S


def debug(spec: TaskSpec, text: str) -> None:
    """With LIGHTSPEED_DEBUG set, tasks append what they do to ``<coord>/<epoch>/log``."""
    if os.environ.get("LIGHTSPEED_DEBUG"):
        path = Path(spec.coord, spec.epoch, "log")
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a") as handle:
            handle.write(f"{time.time():.3f} pid {os.getpid()} b{spec.batch} {text}\n")


# ------------------------------------------------------------------ faults
class Faults:
    """The task-step faults of this batch; each fires once across attempts (an O_EXCL marker)."""

    def __init__(self, spec: TaskSpec, p: int, storage: LocalStorage, uid: str):
        self.spec, self.p, self.storage, self.uid = spec, p, storage, uid
        self.zombie_pending: list[tuple[str, bytes]] = []

    def _claim(self, fault: TaskFault) -> bool:
        marker = Path(self.spec.coord, "faults", str(fault.index))
        marker.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            return True
        except FileExistsError:
            return False

    def at(self, step: str, when: str, sealed: dict[str, Any] | None = None) -> bool:
        """Apply the faults at this point; True when the step itself must be skipped."""
        skip = False
        for fault in self.spec.faults:
            if fault.step != step or fault.when != when:
                continue
            if fault.partition is not None and fault.partition != self.p:
                continue
            if not self._claim(fault):
                continue
            skip = self._apply(fault, step, sealed) or skip
        return skip

    def _apply(self, fault: TaskFault, step: str, sealed: dict[str, Any] | None) -> bool:
        kind, spec = fault.kind, self.spec
        where = f"{fault.when} {step} b{spec.batch} p{self.p}"
        if kind == "storage_latency":
            time.sleep((fault.ms or 0) / 1000.0)
            return False
        if kind in ("corrupt_file", "delete_file"):
            _damage(self.storage, kind, fault.path or "")
            return False
        if kind == "clock_skew":
            return False  # the driver's clock; applied there
        if kind == "driver_crash":
            if spec.kill_driver and spec.driver_pid:
                os.kill(spec.driver_pid, signal.SIGKILL)
            _atomic_write(Path(spec.coord, spec.epoch, "crash"), f"driver_crash {where}")
            raise InjectedTaskFailure(f"driver_crash {where}: the driver is gone")
        if step == "snapshot_upload":
            return kind == "storage_write_error"
        if kind == "executor_loss":
            _lose_executor(spec, self.p)
            _mark_failed(spec, self.p, "executor_loss")
            jvm = _executor_jvm()
            if jvm is not None:
                os.kill(jvm, signal.SIGKILL)  # on a cluster: the executor JVM dies; the worker starts another
            os._exit(137)  # the executor's Python worker dies with everything it cached
        if kind == "zombie_write":
            self._plant_zombie(step, sealed)
        raise InjectedTaskFailure(f"{kind} {where}")

    def _plant_zombie(self, step: str, sealed: dict[str, Any] | None) -> None:
        """This attempt dies, but a write it started lands later, after the driver commits the batch."""
        spec, b, p = self.spec, self.spec.batch, self.p
        landings: list[tuple[str, bytes]] = []
        if step == "sink_write":
            landings.append((layout.sink_part_path(b, p, self.uid), json.dumps([[ZOMBIE_KEY, b]]).encode()))
        elif step == "changelog_write" and sealed:
            for sid, s in sealed.items():
                kind = "delta" if spec.scenario.engine.provider == "delta" else "changelog"
                header = StateFileHeader(kind, s.version, s.uid, s.parent_uid)
                changes = tuple((k.decode(), json.loads(v) if v is not None else None) for k, v in s.changes)
                payload = encode_state_file(header, changes + ((ZOMBIE_KEY, b),))
                landings.append((layout.state_file(sid, p, s.version, self.uid, kind), payload))
        if not landings:
            return
        storage = self.storage
        committed = Path(spec.coord, spec.epoch, "committed", str(b))
        marker = Path(spec.coord, spec.epoch, "zombies", f"{b}-{p}-{self.uid}")
        _atomic_write(marker, "planted")

        def land() -> None:
            deadline = time.monotonic() + WAIT_TIMEOUT_S
            while not committed.exists() and not stop_marker(spec).exists() and time.monotonic() < deadline:
                time.sleep(POLL_S)
            for path, payload in landings:
                storage.write(path, payload, overwrite=True)
            _atomic_write(marker, "landed")

        # a failed attempt ends its Python worker, threads and all: the late writer is its own process
        if os.fork() == 0:
            try:
                land()
            finally:
                os._exit(0)


def _damage(storage: LocalStorage, kind: str, path: str) -> None:
    if not path or not storage.exists(path):
        return
    if kind == "delete_file":
        storage.delete(path)
    else:
        data = storage.read(path)
        storage.write(path, data[: len(data) // 2], overwrite=True)


def _executor_jvm() -> int | None:
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


def _lose_executor(spec: TaskSpec, p: int) -> None:
    path = Path(spec.coord, spec.epoch, "evict", str(p % EXECUTORS))
    _atomic_write(path, str(_evict_generation(spec, p) + 1))


# ------------------------------------------------------------------ stores
def _new_store(spec: TaskSpec, storage: LocalStorage, sid: str, p: int) -> Any:
    from spark_impl.state_store import RocksDBStateStore
    cfg = spec.scenario.engine
    return RocksDBStateStore(storage, sid, p, cfg.provider, cfg.min_deltas_for_snapshot,
                             local_root=spec.local_root)


def _input_lineage(spec: TaskSpec, sid: str, p: int) -> str | None:
    """The lineage id of version ``batch`` of (sid, p): from the driver, or from the previous task."""
    known = spec.lineage_in.get((sid, p))
    if known is not None or spec.batch == 0:
        return known
    if spec.batch == spec.first_batch:
        return None  # nothing committed before this batch
    done = _wait_for(Path(spec.coord, spec.epoch, "done", str(p), str(spec.batch - 1)),
                     f"partition {p} of batch {spec.batch - 1} to finish", stop_marker(spec),
                     yield_if=lambda: _retry_not_started(spec, p, spec.batch - 1))
    return json.loads(done)[sid]


_epoch_coord: dict[str, str] = {}   # epoch -> its coordination directory


def _close_finished_epochs(spec: TaskSpec) -> None:
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
            if epoch != spec.epoch and Path(coord, epoch, "stop").exists():
                for key in [k for k in _stores if k[0] == epoch]:
                    ended.append(_stores.pop(key))
                    _generation.pop(key, None)
                del _epoch_coord[epoch]
    if ended:
        threading.Thread(target=lambda: [store.crash() for store in ended], name="close-ended-stores",
                         daemon=True).start()


def _stores_for(spec: TaskSpec, storage: LocalStorage, p: int) -> tuple[dict[str, Any], dict[str, str], int]:
    """Version ``batch`` of every store of partition p; returns (stores, input lineage, cache hits)."""
    _close_finished_epochs(spec)
    b, hits = spec.batch, 0
    generation = _evict_generation(spec, p)
    stores, lineage = {}, {}
    for sid in _store_ids(spec):
        uid = _input_lineage(spec, sid, p)
        lineage[sid] = uid or ""
        key = (spec.epoch, sid, p)
        with _lock:
            store = _stores.get(key)
            if store is not None and _generation.get(key) != generation:
                store.crash()
                store = _stores.pop(key)
                store = None
        if store is not None and store.version == b and (uid is None or store.uid == uid):
            store.abort()  # a failed attempt's unsealed changes, if any
            hits += 1
        else:
            if store is not None:
                store.close()
            store = _new_store(spec, storage, sid, p)
            if b > 0:
                _wait_for_durable(spec, storage, sid, p, b, uid)
                store.load(b, uid)
            with _lock:
                _stores[key] = store
                _generation[key] = generation
        stores[sid] = store
    return stores, lineage, hits


def _wait_for_durable(spec: TaskSpec, storage: LocalStorage, sid: str, p: int, version: int,
                      uid: str | None) -> None:
    """A version committed asynchronously in another worker may still be on its way to the checkpoint."""
    if not spec.async_state or uid is None:
        return
    kind = "delta" if spec.scenario.engine.provider == "delta" else "changelog"
    path = layout.state_file(sid, p, version, uid, kind)
    deadline = time.monotonic() + WAIT_TIMEOUT_S
    while not storage.exists(path) and not storage.exists(layout.state_file(sid, p, version, uid, "snapshot")):
        status = Path(spec.coord, spec.epoch, "async", str(p), str(version - 1))
        if status.exists() and status.read_text().startswith("failed"):
            raise InjectedTaskFailure(f"version {version} of {sid}/{p} will never be durable: {status.read_text()}")
        if time.monotonic() > deadline or stop_marker(spec).exists():
            raise InjectedTaskFailure(f"gave up waiting for {path}")
        time.sleep(POLL_S)


# ------------------------------------------------------------------ the task
def run_task(spec: TaskSpec, p: int, attempt: int) -> dict[str, Any]:
    """One attempt of the task for partition ``p`` of batch ``spec.batch``; see the module docstring."""
    started = time.time()
    b = spec.batch
    uid = f"r{spec.number}b{b}p{p}a{attempt}"
    debug(spec, f"p{p} start {uid}")
    storage = LocalStorage(spec.root)
    faults = Faults(spec, p, storage, uid)
    timings: dict[str, float] = {}
    mark = time.perf_counter()

    def lap(step: str) -> None:
        nonlocal mark
        now = time.perf_counter()
        timings[step] = timings.get(step, 0.0) + (now - mark) * 1000.0
        mark = now

    stores: dict[str, Any] = {}
    lineage_in: dict[str, str] = {}
    hits = 0
    ops = spec.scenario.operator.flatten()
    if not faults.at("state_load", "before"):
        stores, lineage_in, hits = _stores_for(spec, storage, p)
    faults.at("state_load", "after")
    lap("state_load")

    faults.at("task_apply", "before")
    records = route(SourceData.of(spec.scenario).slice(spec.start, spec.end), spec.scenario.state_partitions)[p]
    states = {sid: dict(store.items()) for sid, store in stores.items()}
    result = run_partition(ops, states, rows_of(records), list(spec.watermarks))
    sealed: dict[str, Any] = {}
    changes: dict[str, list[int]] = {}
    for sid, store in stores.items():
        old, new = states[sid], result.states[sid]
        removed = [k for k in old if k not in new]
        for key in removed:
            store.delete(key)
        updated = 0
        for key, value in new.items():
            if old.get(key) != value:
                store.put(key, value)
                updated += 1
        sealed[sid] = store.seal(uid)
        changes[sid] = [updated, len(removed), len(new)]
    extra = spec.straggler_ms(p)
    if extra:
        time.sleep(extra / 1000.0)
    faults.at("task_apply", "after", sealed)
    lap("task_apply")

    if not spec.async_state:
        _commit_state(spec, faults, stores, sealed, p)
        lap("state_commit")

    faults.at("sink_write", "before")
    rows = sink_rows(result.output)
    sink_file = layout.sink_part_path(b, p, uid)
    storage.write(sink_file, json.dumps(rows).encode(), overwrite=True)
    faults.at("sink_write", "after")
    lap("sink_write")

    done = {sid: s.uid for sid, s in sealed.items()}
    if spec.async_state and stores:
        thread = threading.Thread(target=_commit_async, args=(spec, faults, stores, sealed, p),
                                  name=f"async-commit-b{b}-p{p}", daemon=True)
        thread.start()
    if stores:
        _atomic_write(Path(spec.coord, spec.epoch, "done", str(p), str(b)), json.dumps(done))
    debug(spec, f"p{p} done {uid} hits {hits}")
    return {"partition": p, "batch": b, "uid": uid, "attempt": attempt, "lineage_in": lineage_in,
            "lineage_out": done, "sink_file": sink_file, "output_rows": len(rows),
            "input_rows": len(records), "max_event_ms": result.max_event_ms, "changes": changes,
            "cache_hits": hits, "timings_ms": timings, "straggler_ms": extra, "started": started,
            "finished": time.time(),
            "pid": os.getpid()}


def _commit_state(spec: TaskSpec, faults: Faults, stores: dict[str, Any], sealed: dict[str, Any], p: int) -> None:
    """``changelog_write`` then ``state_commit`` (and maybe a background snapshot) for every store."""
    skip = faults.at("changelog_write", "before")
    if not skip:
        for sid, store in stores.items():
            store.write(sealed[sid])
    faults.at("changelog_write", "after", sealed)
    faults.at("state_commit", "before")
    for sid, store in stores.items():
        store.mark_durable(sealed[sid])
    faults.at("state_commit", "after")
    if spec.maintenance and not faults.at("snapshot_upload", "before"):
        for store in stores.values():
            store.schedule_maintenance()
        faults.at("snapshot_upload", "after")


def _commit_async(spec: TaskSpec, faults: Faults, stores: dict[str, Any], sealed: dict[str, Any], p: int) -> None:
    status = Path(spec.coord, spec.epoch, "async", str(p), str(spec.batch))
    debug(spec, f"p{p} async commit starts")
    try:
        _commit_state(spec, faults, stores, sealed, p)
    except BaseException as exc:  # noqa: BLE001 - reported to the driver, which fails the query
        _atomic_write(status, f"failed: {exc}")
        debug(spec, f"p{p} async commit failed {exc}")
        return
    _atomic_write(status, "ok")
    debug(spec, f"p{p} async commit ok")



def _attempt() -> int:
    from pyspark import TaskContext
    ctx = TaskContext.get()
    return ctx.attemptNumber() if ctx is not None else 0


def _run_attempt(spec: TaskSpec, p: int, attempt: int) -> dict[str, Any]:
    _atomic_write(_marker(spec, "started", p, spec.batch), str(attempt))
    try:
        return run_task(spec, p, attempt)
    except BaseException as exc:
        _mark_failed(spec, p, f"{type(exc).__name__}: {exc}")
        if isinstance(exc, CheckpointFormatError):
            # a damaged checkpoint file: no retry or restart can read it, so the driver stops the
            # query with this error (as the reference does) instead of restarting until it gives up
            fatal = Path(spec.coord, spec.epoch, "fatal")
            if not fatal.exists():
                _atomic_write(fatal, str(exc))
        raise


def task_entry(spec: TaskSpec):
    """The function Spark runs per partition (``mapPartitionsWithIndex``)."""
    def run(p: int, rows: Any) -> Any:
        _drain(rows)
        yield _run_attempt(spec, p, _attempt())
    return run


def _drain(rows: Any) -> None:
    """Read the partition's input (its own number) to the end. A Python worker whose input is left
    unread is not reused: it exits after the task, with the stores it holds open and any async state
    commit still running on its background thread."""
    for _ in rows:
        pass


def group_entry(base: TaskSpec, batches: tuple[int, ...]):
    """Group scheduling: the function Spark runs per partition for a group of batches.

    Each batch waits for the driver's release (``go/<b>``, the batch's own
    spec), runs as ``run_task`` would in its own job, and reports through
    ``result/<b>/<p>`` (only there: the job's ``collect`` returns nothing). A
    retried attempt skips batches already reported.
    """
    def run(p: int, rows: Any) -> Any:
        _drain(rows)
        attempt = _attempt()
        coord = Path(base.coord, base.epoch)
        for b in batches:
            result = coord / "result" / str(b) / str(p)
            if result.exists():
                continue
            released = _wait_for(coord / "go" / str(b), f"the driver to release batch {b}", stop_marker(base),
                                 RELEASE_TIMEOUT_S, poll_s=0.002)
            spec = replace(pickle.loads(released), scenario=base.scenario)
            _atomic_write(result, json.dumps(_run_attempt(spec, p, attempt)))
        yield from ()
    return run
