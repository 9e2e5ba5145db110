"""The failing sequences of spec section 6's state-store bugs, runnable against any store class.

Each sequence replays the events of one Spark bug report (JIRA / pull
request description) on a store built by a ``StoreBench`` (the RocksDB store,
or a copy of it with one mistake planted: ``experiments/planted_stores.py``)
and returns a ``Trace``: what was committed, with an independent ground truth
(a plain dict the sequence keeps itself, never a number read from the store),
the files each commit wrote, the snapshot uploads that started, what steps on
other threads raised, and a few observations the unit tests assert
(``observed``). A sequence never asserts: a planted store must be able to run
it to the end, so that the checks of ``experiments/zoo_checks.py`` can judge
what it left. ``tests/quick/test_rocksdb_store_bugs.py`` and ``lightspeed zoo`` both
run these.
"""

from __future__ import annotations

import threading
import time
from functools import partial
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reference.protocol.storage import LocalStorage, SnapshotReader, Storage
from spark_impl.snapshot_reader import read_manifest_snapshot
from spark_impl.state_store import RocksDBStateStore
from spark_impl.state_store.sst_files import decode_manifest

OP, PART = "agg", 0
GATE_TIMEOUT_S = 10.0
RACE_WAIT_S = 0.2        # how long a racing step is given to (wrongly) run past an in-flight one
Version = tuple[int, str]  # (version, lineage uid)


class GatedStorage(LocalStorage):
    """LocalStorage whose writes of paths containing ``match`` block, once armed, until ``release()``."""

    def __init__(self, root: Path, match: str, snapshot_readers: tuple[SnapshotReader, ...] = ()):
        super().__init__(root, snapshot_readers=snapshot_readers)
        self.match = match
        self.armed = False
        self.entered = threading.Event()
        self.gate = threading.Event()

    def write(self, path: str, data: bytes, *, overwrite: bool = False) -> None:
        if self.armed and self.match in path:
            self.entered.set()
            if not self.gate.wait(GATE_TIMEOUT_S):
                raise TimeoutError(f"gate on {self.match!r} never released")
        super().write(path, data, overwrite=overwrite)

    def arm(self) -> None:
        self.armed, self.gate = True, threading.Event()
        self.entered.clear()

    def release(self) -> None:
        self.armed = False
        self.gate.set()


class StoreBench:
    """Builds the stores of one sequence from one store class, each in its own local directory."""

    def __init__(self, store_class: type[RocksDBStateStore], root: Path,
                 watch: Callable[[Trace], None] | None = None):
        self.store_class, self.root = store_class, root
        self.made: list[RocksDBStateStore] = []
        self.watch = watch               # given to every trace: called as each step ends
        # the snapshot reader the reference's loads use, its throwaway DBs kept in this scratch directory
        self.readers: tuple[SnapshotReader, ...] = (partial(read_manifest_snapshot, local_root=root / "readers"),)
        self.last_trace: Trace | None = None

    def trace(self, storage: Storage, **kw: Any) -> Trace:
        """The trace of one sequence over ``storage``, watched step by step if the bench has a watcher."""
        self.last_trace = Trace(storage, watch=self.watch, **kw)
        return self.last_trace

    def storage(self, gate_on: str | None = None) -> LocalStorage:
        """The sequence's checkpoint directory (gated on paths containing ``gate_on`` if given)."""
        if gate_on is not None:
            return GatedStorage(self.root / "ck", gate_on, self.readers)
        return LocalStorage(self.root / "ck", snapshot_readers=self.readers)

    def store(self, storage: Storage, provider: str = "changelog", min_deltas: int = 2,
              **kw: Any) -> RocksDBStateStore:
        store = self.store_class(storage, OP, PART, provider, min_deltas,
                                 local_root=self.root / f"local{len(self.made)}", **kw)
        self.made.append(store)
        return store

    def close_all(self) -> None:
        for store in self.made:
            try:
                store.close()
            except Exception:  # a planted store may fail to close; the judge has read what it needed
                pass


@dataclass
class Trace:
    """What one sequence did and what it must have left behind."""

    storage: Storage
    provider: str = "changelog"
    truth: dict[Version, dict[str, Any]] = field(default_factory=lambda: {(0, ""): {}})
    must_load: list[Version] = field(default_factory=list)     # committed versions that must still load
    line: dict[int, str] = field(default_factory=dict)         # the committed lineage now: version -> uid
    live: list[tuple[Any, Version]] = field(default_factory=list)  # open stores and the version they hold
    written: dict[str, bytes] = field(default_factory=dict)    # each changelog / delta as first seen
    uploads: list[str] = field(default_factory=list)           # snapshots whose upload started
    damaged: set[str] = field(default_factory=set)             # files the sequence damaged on purpose
    purged: set[str] = field(default_factory=set)              # files the sequence's cleanup deleted
    errors: list[str] = field(default_factory=list)            # steps that raised (any thread)
    observed: dict[str, Any] = field(default_factory=dict)
    step: str = "set-up"                                       # the step the sequence is in
    # called as each step ends (before the next begins): how the zoo judges a sequence step by step
    watch: Callable[[Trace], None] | None = field(default=None, repr=False, compare=False)

    def at(self, step: str) -> None:
        """The step ``self.step`` ended; ``step`` begins."""
        if self.watch is not None:
            self.watch(self)
        self.step = step

    def committed(self, version: int, uid: str, state: dict[str, Any], *, must_load: bool = True) -> dict[str, Any]:
        """``(version, uid)`` was committed with ``state`` (on top of the line up to ``version - 1``, as the
        commit log would name it); its file's bytes are recorded as first written."""
        self.line = {v: u for v, u in self.line.items() if v < version}
        self.line[version] = uid
        if must_load:
            self.must_load.append((version, uid))
        return self.attempted(version, uid, state)

    def attempted(self, version: int, uid: str, state: dict[str, Any]) -> dict[str, Any]:
        """An attempt wrote ``(version, uid)`` with ``state`` (committed or not): its files must stay as written."""
        self.truth[(version, uid)] = dict(state)
        self.record_files()
        return state

    def record_files(self) -> None:
        for path in self.storage.list("state/"):
            if path.endswith((".changelog", ".delta")) and path not in self.written:
                self.written[path] = self.storage.read(path)

    def hold(self, store: Any, version: int, uid: str) -> None:
        """At the end, ``store`` must hold ``(version, uid)`` in memory."""
        self.live.append((store, (version, uid)))

    def in_thread(self, name: str, fn: Callable[[], Any]) -> threading.Thread:
        """Run one step on another thread; what it raises is recorded, never lost."""
        def run() -> None:
            try:
                fn()
            except Exception as exc:  # the judge reports it
                self.errors.append(f"{name}: {type(exc).__name__}: {exc}")
        thread = threading.Thread(target=run, name=name, daemon=True)
        thread.start()
        return thread


def apply(store: Any, state: dict[str, Any], writes: dict[str, Any]) -> dict[str, Any]:
    """Apply ``writes`` (None = delete) to the store; returns ``state`` with the same writes applied."""
    expected = dict(state)
    for key, value in writes.items():
        if value is None:
            store.delete(key)
            expected.pop(key, None)
        else:
            store.put(key, value)
            expected[key] = value
    return expected


def snapshots(storage: Storage) -> list[str]:
    return sorted(p for p in storage.list("state/") if p.endswith(".snapshot"))


def commit(trace: Trace, store: Any, uid: str, state: dict[str, Any], **kw: Any) -> dict[str, Any]:
    store.commit(uid)
    return trace.committed(store.version, uid, state, **kw)


def cleanup(trace: Trace, store: Any, min_versions_to_retain: int) -> list[str]:
    deleted = store.cleanup(min_versions_to_retain)
    trace.purged.update(deleted)
    return deleted


def maintain(trace: Trace, store: Any) -> str | None:
    path = store.do_maintenance()
    if path is not None:
        trace.uploads.append(path)
    return path


def gated(bench: StoreBench, gate_on: str, min_deltas: int) -> tuple[Trace, GatedStorage, Any]:
    """A trace over a checkpoint whose writes of paths containing ``gate_on`` can be held, and its store."""
    storage = bench.storage(gate_on=gate_on)
    assert isinstance(storage, GatedStorage)
    return bench.trace(storage), storage, bench.store(storage, min_deltas=min_deltas)


def start_held_upload(trace: Trace, storage: GatedStorage, store: Any) -> threading.Thread:
    """Maintenance on another thread, held at its first SST write (observed as ``upload_started``)."""
    storage.arm()
    uploader = trace.in_thread("maintenance", lambda: maintain(trace, store))
    trace.observed["upload_started"] = storage.entered.wait(GATE_TIMEOUT_S)
    return uploader


# ------------------------------------------------------------------ the sequences


def spark_43404(bench: StoreBench) -> Trace:
    """A retried task must not reuse a same-named file of another attempt."""
    trace = bench.trace(bench.storage())
    first = bench.store(trace.storage)
    v1 = commit(trace, first, "a1", apply(first, {}, {"x": 1}))
    trace.at("attempt t2a of batch 1 writes its changelog, then fails")
    a_state = apply(first, v1, {"x": 2, "y": 2})
    first.write(first.seal("t2a"))
    trace.attempted(2, "t2a", a_state)  # never committed: must stay as written
    trace.at("the retry t2b loads version 1 elsewhere and commits")
    retry = bench.store(trace.storage)
    retry.load(1, "a1")
    b_state = commit(trace, retry, "t2b", apply(retry, v1, {"x": 20}))
    trace.hold(retry, 2, "t2b")
    trace.observed["a_state"], trace.observed["b_state"] = a_state, b_state
    return trace


def spark_45419(bench: StoreBench, *, min_deltas: int = 1, rollback_to: int = 2) -> Trace:
    """A rollback must not reuse files of the higher versions it rolled back from.

    ``rollback_to`` a version without a snapshot rebuilds the DB from
    changelogs, so its local SST numbers restart and collide with those of
    the versions rolled back from.
    """
    trace = bench.trace(bench.storage())
    store = bench.store(trace.storage, min_deltas=min_deltas)
    state: dict = {}
    for v in range(1, 5):
        trace.at(f"commit u{v}")
        state = commit(trace, store, f"u{v}", apply(store, state, {f"k{v}": v, "shared": v}))
        maintain(trace, store)
    trace.at(f"roll back to version {rollback_to}")
    store.load(rollback_to, f"u{rollback_to}")
    state = trace.truth[(rollback_to, f"u{rollback_to}")]
    for v in range(rollback_to + 1, 5):
        trace.at(f"commit w{v} after the rollback")
        state = commit(trace, store, f"w{v}", apply(store, state, {f"k{v}": -v, "shared": -v, "k1": None}))
        maintain(trace, store)
    trace.hold(store, 4, "w4")
    return trace


def spark_46711(bench: StoreBench) -> Trace:
    """A rollback racing a commit must not lose the commit's changelog."""
    trace, storage, store = gated(bench, ".changelog", min_deltas=2)
    v1 = commit(trace, store, "c1", apply(store, {}, {"a": 1}))
    v2 = apply(store, v1, {"b": 2, "a": None})
    trace.at("commit c2 starts writing its changelog")
    storage.arm()
    committer = trace.in_thread("commit c2", lambda: store.commit("c2"))
    trace.observed["commit_reached_write"] = storage.entered.wait(GATE_TIMEOUT_S)
    trace.at("a cancelled task's rollback arrives while the commit is writing")
    aborter = trace.in_thread("rollback", store.abort)
    time.sleep(RACE_WAIT_S)
    trace.observed["rollback_waited"] = aborter.is_alive()
    storage.release()
    committer.join(GATE_TIMEOUT_S)
    aborter.join(GATE_TIMEOUT_S)
    trace.committed(2, "c2", v2)
    trace.hold(store, 2, "c2")
    return trace


def spark_47568(bench: StoreBench) -> Trace:
    """Maintenance after a reload uploads only its own version's snapshot, under that version's name."""
    trace, storage, store = gated(bench, "/SSTs/", min_deltas=2)
    v1 = commit(trace, store, "u1", apply(store, {}, {"a": 1}))
    commit(trace, store, "u2", apply(store, v1, {"b": 2}))  # a snapshot of version 2 is due and pending
    trace.at("case 1: the task reloads version 1 before maintenance runs")
    store.load(1, "u1")
    w2 = commit(trace, store, "w2", apply(store, v1, {"c": 3}))
    maintain(trace, store)
    trace.observed["case1_snapshots"] = {p.rsplit("/", 1)[-1] for p in snapshots(storage)}
    trace.at("case 2: maintenance holds version 4's checkpoint when the task reloads version 3")
    w3 = commit(trace, store, "w3", apply(store, w2, {"d": 4}))
    commit(trace, store, "w4", apply(store, w3, {"e": 5}))  # pending snapshot of version 4
    uploader = start_held_upload(trace, storage, store)
    store.load(3, "w3")
    x4 = commit(trace, store, "x4", apply(store, w3, {"a": None, "f": 6}))
    commit(trace, store, "x5", apply(store, x4, {"g": 7}))
    storage.release()
    uploader.join(GATE_TIMEOUT_S)
    trace.at("maintenance after the reload")
    maintain(trace, store)
    trace.hold(store, 5, "x5")
    return trace


def spark_48105(bench: StoreBench) -> Trace:
    """Unloading a store waits for its in-flight snapshot upload."""
    trace, storage, store = gated(bench, "/SSTs/", min_deltas=1)
    commit(trace, store, "u1", apply(store, {}, {f"k{i}": i for i in range(50)}))
    trace.at("maintenance uploads the snapshot of version 1")
    uploader = start_held_upload(trace, storage, store)
    trace.uploads.append("state/agg/0/1_u1.snapshot")  # started: it must complete
    trace.at("the executor unloads the provider during the upload")
    closer = trace.in_thread("unload", store.close)
    time.sleep(RACE_WAIT_S)
    trace.observed["unload_waited"] = closer.is_alive()
    storage.release()
    uploader.join(GATE_TIMEOUT_S)
    closer.join(GATE_TIMEOUT_S)
    trace.observed["local_dir_gone"] = not store.local_dir.exists()
    return trace


def spark_49363_49770(bench: StoreBench) -> Trace:
    """Reloading a version that has a snapshot, again and again, never leaves a wrong snapshot."""
    trace = bench.trace(bench.storage())
    store = bench.store(trace.storage, min_deltas=2)
    state: dict = {}
    for v in (1, 2):
        state = commit(trace, store, f"u{v}", apply(store, state, {f"k{v}": v}))
    maintain(trace, store)
    for round_ in range(3):
        trace.at(f"round {round_}: reload version 2 (which has a snapshot)")
        store.load(2, "u2")
        state = trace.truth[(2, "u2")]
        for v in (3, 4):
            trace.at(f"round {round_}: commit version {v}")
            state = commit(trace, store, f"r{round_}v{v}",
                           apply(store, state, {f"k{v}": [round_, v], "k1": None if round_ % 2 else round_}))
        maintain(trace, store)
    trace.hold(store, 4, "r2v4")
    return trace


def spark_51717(bench: StoreBench) -> Trace:
    """The first snapshot's upload is still in flight when the next batch fails and the store reloads."""
    trace, storage, store = gated(bench, "/SSTs/", min_deltas=2)
    state: dict = {}
    for v in (1, 2):
        state = commit(trace, store, f"u{v}", apply(store, state, {f"k{i}": [v, i] for i in range(20)}))
    trace.at("maintenance starts uploading the first snapshot (version 2)")
    uploader = start_held_upload(trace, storage, store)
    trace.at("the next batch fails; the store reloads version 2 from changelogs")
    store.put("k0", "doomed")
    store.abort()
    store.load(2, "u2")
    trace.observed["reload_base_file"] = store.last_load.base_file if store.last_load else None
    for v in (3, 4):
        trace.at(f"commit u{v} after the reload")
        state = commit(trace, store, f"u{v}", apply(store, state, {f"k{i}": [v, i] for i in range(0, 20, 3)}))
    storage.release()
    uploader.join(GATE_TIMEOUT_S)
    trace.at("maintenance uploads the next snapshot")
    maintain(trace, store)
    trace.hold(store, 4, "u4")
    return trace


def spark_55892(bench: StoreBench) -> Trace:
    """Maintenance elsewhere deletes SSTs that a delayed snapshot upload here would reuse."""
    trace = bench.trace(bench.storage())
    storage = trace.storage
    a = bench.store(storage, min_deltas=2)
    state: dict = {}
    for v in (1, 2):
        state = commit(trace, a, f"a{v}", apply(a, state, {f"k{i}": [v, i] for i in range(30)}), must_load=False)
    maintain(trace, a)  # snapshot 2 uploads its SSTs
    trace.observed["v2_ssts"] = {p for p in storage.list() if "/SSTs/" in p}
    for v in (3, 4):
        state = commit(trace, a, f"a{v}", apply(a, state, {f"k{v}": "new"}), must_load=False)
    trace.at("another executor loads version 4, compacts, snapshots version 5 and purges below it")
    b = bench.store(storage, min_deltas=2, compact_on_commit=True)
    b.load(4, "a4")
    commit(trace, b, "b5", apply(b, state, {"k0": None}))
    maintain(trace, b)
    cleanup(trace, b, 1)
    trace.observed["reused_sst_deleted"] = bool(trace.observed["v2_ssts"] - set(storage.list()))
    trace.at("the delayed upload of snapshot 4")
    maintain(trace, a)
    trace.must_load.append((4, "a4"))  # its changelogs are purged: it loads from its snapshot alone
    trace.hold(b, 5, "b5")
    return trace


def spark_55510(bench: StoreBench) -> Trace:
    """A range delete is written to the changelog, so replayed state equals live state."""
    trace = bench.trace(bench.storage())
    store = bench.store(trace.storage)
    state = commit(trace, store, "u1", apply(store, {}, {f"k{i}": i for i in range(10)}))
    trace.at("a range delete of [k2, k6), then commit u2")
    store.delete_range("k2", "k6")
    commit(trace, store, "u2", {k: v for k, v in state.items() if not "k2" <= k < "k6"})
    trace.hold(store, 2, "u2")
    return trace


def spark_19677(bench: StoreBench, *, provider: str = "delta") -> Trace:
    """A batch re-run after a restart never rewrites the delta file of its first run."""
    trace = bench.trace(bench.storage(), provider=provider)
    store = bench.store(trace.storage, provider=provider)
    v1 = commit(trace, store, "u1", apply(store, {}, {"a": 1}))
    commit(trace, store, "r2a", apply(store, v1, {"a": 2}))
    trace.at("the batch is re-run after a restart: reload version 1 and commit again")
    store.load(1, "u1")
    commit(trace, store, "r2b", apply(store, v1, {"a": 3, "b": 3}))
    trace.hold(store, 2, "r2b")
    return trace


CORRUPTIONS = ("truncate_manifest", "flip_sst_byte", "delete_sst")


def spark_21696(bench: StoreBench, *, corruption: str = "truncate_manifest") -> Trace:
    """A corrupt snapshot falls back to an older base and the changelogs above it."""
    if corruption not in CORRUPTIONS:
        raise ValueError(f"corruption {corruption!r}: expected one of {CORRUPTIONS}")
    trace = bench.trace(bench.storage())
    storage = trace.storage
    store = bench.store(storage, min_deltas=2)
    state: dict = {}
    for v in range(1, 6):
        state = commit(trace, store, f"u{v}", apply(store, state, {f"k{v}": v, "k0": v, f"k{v - 1}": None}))
        maintain(trace, store)
    manifest = "state/agg/0/4_u4.snapshot"
    trace.at(f"damage snapshot 4 ({corruption})")
    if corruption == "truncate_manifest":
        storage.write(manifest, storage.read(manifest)[:-7], overwrite=True)
        trace.damaged.add(manifest)
    else:
        refs = {s.dfs_name for s in decode_manifest(storage.read(manifest), manifest).ssts}
        newest = sorted(p for p in storage.list() if "/SSTs/" in p and p.rsplit("/", 1)[-1] in refs)
        victim = newest[-1]
        if corruption == "flip_sst_byte":
            data = bytearray(storage.read(victim))
            data[len(data) // 2] ^= 0xFF
            storage.write(victim, bytes(data), overwrite=True)
        else:
            storage.delete(victim)
        trace.damaged |= {manifest, victim}
        # snapshots sharing the damaged SST are damaged too
        trace.damaged |= {p for p in snapshots(storage)
                          if victim.rsplit("/", 1)[-1] in {s.dfs_name for s in decode_manifest(storage.read(p), p).ssts}}
    trace.observed["manifest"] = manifest
    trace.hold(store, 5, "u5")
    return trace


# jira -> (what the sequence replays, the sequence as the zoo runs it)
SEQUENCES: dict[str, tuple[str, Callable[[StoreBench], Trace]]] = {
    "SPARK-43404": ("a retried task commits beside its failed attempt's file of the same version", spark_43404),
    "SPARK-45419": ("roll back to a version rebuilt from changelogs, commit the versions above again",
                    lambda bench: spark_45419(bench, min_deltas=2, rollback_to=1)),
    "SPARK-46711": ("a rollback arrives while a commit writes its changelog", spark_46711),
    "SPARK-47568": ("a reload while maintenance uploads a pending snapshot", spark_47568),
    "SPARK-48105": ("the store is unloaded during a snapshot upload", spark_48105),
    "SPARK-49363/SPARK-49770": ("reload a version that has a snapshot three times, commit above it", spark_49363_49770),
    "SPARK-51717": ("the first snapshot's upload is in flight when the next batch fails and the store reloads",
                    spark_51717),
    "SPARK-55892": ("another executor purges SSTs that a delayed snapshot upload reuses", spark_55892),
    "SPARK-55510": ("a range delete, then commit", spark_55510),
    "SPARK-19677": ("a batch re-run after a restart commits the same version again (delta provider)",
                    spark_19677),
    "SPARK-21696": ("a truncated snapshot manifest, then load the newest version", spark_21696),
}
