"""A state store under test against the reference model, step by step (spec sections 2, 5).

A Hypothesis state machine in the manner of zarr-python's stateful tests: the
reference's in-memory ``StateStore`` over ``DurableStorage`` is the model,
"assumed to be perfect", and every rule does the same to the model and to the
store under test, then compares. The store under test is a parameter
(``SUBJECTS``): ``spark_impl.state_store.RocksDBStateStore`` and the
reference's ``StateStore`` itself, each over a real directory through
``LocalStorage``.

Rules: put, delete, range delete, commit, abort, a seal whose write and
``state_commit`` come later (async state checkpointing, at most one pending:
the next batch's writes, maintenance, a load or a crash may come first),
crash (a pending version's file may have landed), load of any retained version, maintenance and cleanup at any moment, a
snapshot upload that dies before its file lands (for RocksDB, after its SSTs:
orphans for cleanup), and a task retry whose failed attempt's file lands later
(a zombie writer). What only one store can do (background maintenance on a
pool, a memory gauge, a load report, a local directory a crash deletes) is a
capability its ``Subject`` declares; the rules that need it run only for the
subjects that declare it, and ``test_subjects_declare_exactly_what_they_have``
keeps the declarations honest. After every rule the live states agree, and
every retained committed version loads from the subject's checkpoint to what
the model's checkpoint gives.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pytest
from hypothesis import note, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from store_workloads import scratch_directory

from reference.protocol.changelog import StateFileHeader, encode_state_file
from reference.protocol.state_store import PROVIDERS, StateStore, load_version, plan_load
from reference.protocol.storage import DurableStorage, LocalStorage, Storage, StorageError
from spark_impl.state_store import MaintenancePool, RocksDBStateStore

OP, PARTITION = "0", 3
KEYS = st.sampled_from(["a", "b", "ba", "c", "d", "e", "é", "f"])
VALUES = st.one_of(st.integers(-3, 3), st.lists(st.integers(0, 2), max_size=2),
                   st.dictionaries(st.sampled_from(["n", "m"]), st.integers(0, 2), max_size=1))

# What a store under test may have beyond the reference's surface.
LOCAL_DIRECTORY = "local_directory"            # ``local_dir``: a crash deletes it
BACKGROUND_MAINTENANCE = "background_maintenance"  # ``schedule_maintenance`` on a pool
MEMORY_GAUGE = "memory_gauge"                  # ``memory_usage()`` against a bound
LOAD_REPORT = "load_report"                    # ``last_load``: the base and files a load used
CAPABILITY_ATTRIBUTES = {LOCAL_DIRECTORY: "local_dir", BACKGROUND_MAINTENANCE: "schedule_maintenance",
                         MEMORY_GAUGE: "memory_usage", LOAD_REPORT: "last_load"}


@dataclass(frozen=True)
class Subject:
    """A store under test: how to open one, what a crash does to it, and what it can do beyond the model."""

    name: str
    open: Callable[[Storage, str, int, Path, MaintenancePool], Any]
    crash: Callable[[Any], None]
    close: Callable[[Any], None]
    capabilities: frozenset[str]


def _open_rocksdb(storage: Storage, provider: str, min_deltas: int, local_root: Path,
                  pool: MaintenancePool) -> RocksDBStateStore:
    return RocksDBStateStore(storage, OP, PARTITION, provider, min_deltas, local_root=local_root, pool=pool)


def _open_reference(storage: Storage, provider: str, min_deltas: int, _local_root: Path,
                    _pool: MaintenancePool) -> StateStore:
    return StateStore(storage, OP, PARTITION, provider, min_deltas)


def _forget(_store: Any) -> None:
    """The reference store keeps nothing outside memory: process death just drops it."""


SUBJECTS = {
    "rocksdb": Subject("rocksdb", _open_rocksdb, RocksDBStateStore.crash, RocksDBStateStore.close,
                       frozenset(CAPABILITY_ATTRIBUTES)),
    "reference": Subject("reference", _open_reference, _forget, _forget, frozenset()),
}


class SnapshotFailingStorage(LocalStorage):
    """LocalStorage whose snapshot-file writes fail while ``failing`` is set (an executor dying)."""

    failing = False

    def write(self, path: str, data: bytes, *, overwrite: bool = False) -> None:
        if self.failing and path.endswith(".snapshot"):
            raise StorageError(f"{path}: injected failure before the snapshot file")
        super().write(path, data, overwrite=overwrite)


def _profile_examples() -> int:
    try:
        name = settings.get_current_profile_name()
    except AttributeError:  # older Hypothesis
        name = "default"
    return 1000 if name == "thorough" else 100


def can(capability: str) -> Callable[[Any], bool]:
    """A precondition: the store under test declares ``capability``."""
    return lambda machine: capability in machine.subject.capabilities


class StoreMachine(RuleBasedStateMachine):
    """The model (reference, in memory) and the store under test, driven alike."""

    subject: Subject

    def __init__(self) -> None:
        super().__init__()
        self.tmp = scratch_directory(f"store-sm-{self.subject.name}-")
        self.storage = SnapshotFailingStorage(self.tmp / "checkpoint")
        self.ref_storage = DurableStorage()
        self.pool = MaintenancePool(threads=1, delete_threads=2)
        self.attempts = 0
        self.crashes = 0
        self.lineage: dict[int, str] = {0: ""}   # the committed chain: version -> uid
        self.floor = 0
        self.pending: tuple[Any, Any] | None = None   # (model's, subject's) sealed version, not yet durable
        self.checked_signature: object = None
        self.mine: Any = None
        self.verifier: Any = None

    # ------------------------------------------------------------- setup
    @initialize(provider=st.sampled_from(PROVIDERS), min_deltas=st.integers(1, 3), retain=st.integers(2, 4))
    def setup(self, provider: str, min_deltas: int, retain: int) -> None:
        note(f"store under test: {self.subject.name}; provider={provider} "
             f"min_deltas_for_snapshot={min_deltas} min_versions_to_retain={retain}")
        self.provider, self.min_deltas, self.retain = provider, min_deltas, retain
        self.ref = StateStore(self.ref_storage, OP, PARTITION, provider, min_deltas)
        self.mine = self._new_store("live0")
        self.verifier = self._new_store("verifier")

    def _new_store(self, name: str) -> Any:
        return self.subject.open(self.storage, self.provider, self.min_deltas, self.tmp / name, self.pool)

    def _uid(self, prefix: str) -> str:
        self.attempts += 1
        return f"{prefix}{self.attempts}"

    def teardown(self) -> None:
        for store in (self.mine, self.verifier):
            if store is not None:
                self.subject.close(store)
        self.pool.shutdown()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def both(self, action: Callable[[Any], Any]) -> tuple[Any, Any]:
        """Do ``action`` to the model, then to the store under test."""
        return action(self.ref), action(self.mine)

    # ------------------------------------------------------------ writes
    @rule(writes=st.lists(st.tuples(KEYS, VALUES), min_size=1, max_size=4))
    def put(self, writes: list) -> None:
        for key, value in writes:
            note(f"put {key!r} = {value!r}")
            self.both(lambda store: store.put(key, value))

    @rule(key=KEYS)
    def delete(self, key: str) -> None:
        note(f"delete {key!r}")
        self.both(lambda store: store.delete(key))

    @rule(bounds=st.tuples(KEYS, st.sampled_from(["b", "c", "e", "z"])).map(sorted))
    def delete_range(self, bounds: list[str]) -> None:
        start, end = bounds
        note(f"delete_range [{start!r}, {end!r})")
        self.both(lambda store: store.delete_range(start, end))

    @rule()
    def commit(self) -> None:
        self.settle_pending()
        uid = self._uid("c")
        version, mine_version = self.both(lambda store: store.commit(uid))
        note(f"commit -> version {version} uid {uid}")
        assert mine_version == version
        self._committed(version, uid)

    def _committed(self, version: int, uid: str) -> None:
        self.lineage = {v: u for v, u in self.lineage.items() if v < version}
        self.lineage[version] = uid

    @rule()
    def abort(self) -> None:
        # The reference's abort reloads its current version from the checkpoint, so the model
        # cannot abort on top of a sealed version whose file is not written yet: settle it first.
        self.settle_pending()
        note("abort the uncommitted batch")
        self.both(lambda store: store.abort())

    # ------------------------------------------- async state checkpointing
    @rule()
    def seal(self) -> None:
        """``task_apply`` ends; the version's write and ``state_commit`` come later, in the background."""
        self.settle_pending()
        uid = self._uid("s")
        self.pending = self.both(lambda store: store.seal(uid))
        note(f"seal version {self.pending[0].version} uid {uid}; its write and state_commit come later")
        assert self.pending[1].version == self.pending[0].version

    def write_pending(self) -> tuple[Any, Any]:
        assert self.pending is not None
        model_sealed, mine_sealed = self.pending
        note(f"changelog_write of the pending version {model_sealed.version}")
        self.ref.write(model_sealed)
        self.mine.write(mine_sealed)
        return model_sealed, mine_sealed

    def settle_pending(self) -> None:
        """The background commit of the pending version, if any, finishes: its write and ``state_commit``."""
        if self.pending is None:
            return
        model_sealed, mine_sealed = self.write_pending()
        note(f"state_commit of the pending version {model_sealed.version}")
        assert self.ref.mark_durable(model_sealed) == self.mine.mark_durable(mine_sealed)
        self._committed(model_sealed.version, model_sealed.uid)
        self.pending = None

    # --------------------------------------------------------- failures
    @rule(pending_file_lands=st.booleans())
    def crash(self, pending_file_lands: bool) -> None:
        """Process death; a pending version's file may have landed, but it never became durable."""
        if self.pending is not None and pending_file_lands:
            self.write_pending()
        version = max(self.lineage)
        uid = self.lineage[version]
        note(f"crash; restart both from the checkpoint at version {version} uid {uid!r}")
        self.subject.crash(self.mine)
        if LOCAL_DIRECTORY in self.subject.capabilities:
            assert not self.mine.local_dir.exists()
        self.crashes += 1
        self.pending = None
        self.mine = self._new_store(f"live{self.crashes}")
        self.mine.load(version, uid)
        self.ref = StateStore(self.ref_storage, OP, PARTITION, self.provider, self.min_deltas)
        self.ref.load(version, uid)

    @rule(writes=st.lists(st.tuples(KEYS, VALUES), min_size=1, max_size=3),
          retry_writes=st.lists(st.tuples(KEYS, VALUES), max_size=3))
    def task_retry_with_zombie(self, writes: list, retry_writes: list) -> None:
        """Attempt A applies ``writes`` and fails; the retry B commits; A's file lands afterwards."""
        self.settle_pending()
        base_version, base_uid = self.ref.version, self.ref.uid
        zombie_uid = self._uid("z")
        for key, value in writes:
            self.both(lambda store: store.put(key, value))
        note(f"attempt {zombie_uid} of version {base_version + 1} wrote {writes} and failed")
        self.both(lambda store: store.abort())
        for key, value in retry_writes:
            self.both(lambda store: store.put(key, value))
        self.commit()
        kind = "snapshot" if self.provider == "snapshot" else self.ref.delta_kind
        header = StateFileHeader(kind, base_version + 1, zombie_uid, "" if kind == "snapshot" else base_uid)
        data = encode_state_file(header, [(k, v) for k, v in writes] + [("zombie", 1)])
        path = self.ref.file_path(base_version + 1, zombie_uid, kind)
        note(f"zombie {zombie_uid} lands {path} after the retry committed")
        self.ref_storage.write(path, data)
        self.storage.write(path, data)

    # ------------------------------------------------------ maintenance
    @rule()
    def maintenance(self) -> None:
        note("maintenance uploads the pending snapshot")
        self.both(lambda store: store.do_maintenance())

    @precondition(can(BACKGROUND_MAINTENANCE))
    @rule()
    def background_maintenance(self) -> None:
        note("maintenance runs on the background pool (the model's runs inline)")
        self.ref.do_maintenance()
        future = self.mine.schedule_maintenance()
        assert future is not None, "no other round of this store can be running"
        future.result()

    @rule()
    def maintenance_dies_before_snapshot_lands(self) -> None:
        note("maintenance of the store under test dies before its snapshot file lands "
             "(for RocksDB: after uploading its SSTs)")
        self.storage.failing = True
        try:
            self.mine.do_maintenance()
        except StorageError:
            pass
        finally:
            self.storage.failing = False

    @rule()
    def cleanup(self) -> None:
        self.settle_pending()  # cleanup walks down from the store's version, whose file must exist
        note(f"cleanup keeping {self.retain} versions below version {self.ref.version}")
        # The model is never asked to retain below the purge floor (after a load of an older
        # retained version an earlier cleanup may already have purged that far): it is the
        # model. The store under test gets the plain request.
        self.ref.cleanup(max(1, min(self.retain, self.ref.version - self.floor + 1)))
        self.mine.cleanup(self.retain)
        self.floor = max(self.floor, self.ref.version - self.retain + 1)

    @rule(writes=st.lists(st.tuples(KEYS, VALUES), min_size=1, max_size=3))
    def steady_batch(self, writes: list) -> None:
        """The engine's steady state in one step: a batch's writes, its commit, maintenance, cleanup."""
        self.put(writes)
        self.commit()
        self.maintenance()
        self.cleanup()

    def retained(self) -> list[int]:
        low = max(max(self.lineage) - self.retain + 1, self.floor, 0)
        return [v for v in sorted(self.lineage) if v >= low]

    @rule(data=st.data())
    def load(self, data: st.DataObject) -> None:
        version = data.draw(st.sampled_from(self.retained()), label="version")
        uid = self.lineage[version]
        note(f"load version {version} uid {uid!r} (uncommitted and pending changes are dropped)")
        self.both(lambda store: store.load(version, uid))
        self.pending = None
        self.lineage = {v: u for v, u in self.lineage.items() if v <= version}
        if LOAD_REPORT in self.subject.capabilities:
            self._check_load_report(version, uid)

    def _check_load_report(self, version: int, uid: str) -> None:
        """The store's own load took the base the reference's plan takes, unless it had to skip one."""
        report = self.mine.last_load
        plan = plan_load(self.storage, OP, PARTITION, version, uid)
        note(f"the load used base version {report.base_version}; the reference plans {plan.base_version}")
        assert (report.base_version, report.replayed) == (plan.base_version, plan.replayed)

    # ------------------------------------------------------- invariants
    @invariant()
    def live_states_agree(self) -> None:
        if self.mine is None:
            return
        assert self.mine.items() == self.ref.items()
        assert self.mine.version == self.ref.version

    @precondition(can(MEMORY_GAUGE))
    @invariant()
    def memory_within_bound(self) -> None:
        if self.mine is None:
            return
        usage = self.mine.memory_usage()
        assert usage.total_bytes <= usage.bound_bytes

    @invariant()
    def retained_versions_agree(self) -> None:
        if self.mine is None:
            return
        signature = (tuple(self.storage.list()), tuple(self.ref_storage.list()),
                     tuple(sorted(self.lineage.items())), self.floor)
        if signature == self.checked_signature:
            return  # no checkpoint file changed since the last full check
        for version in self.retained():
            uid = self.lineage[version]
            expected = sorted(load_version(self.ref_storage, OP, PARTITION, version, uid).items())
            self.verifier.load(version, uid)
            assert self.verifier.items() == expected, f"version {version} uid {uid!r}"
            if LOAD_REPORT in self.subject.capabilities:
                # No rule damages a snapshot, so no load may need the SPARK-21696 fallback (which
                # would hide a snapshot that cleanup or an upload broke).
                assert self.verifier.last_load.skipped_snapshots == (), f"version {version} uid {uid!r}"
        self.checked_signature = signature


def machine_test(subject: Subject) -> type:
    """The ``unittest`` case that runs the machine with ``subject`` as the store under test."""
    machine = type(f"StoreMachine_{subject.name}", (StoreMachine,), {"subject": subject})
    case = machine.TestCase
    case.settings = settings(settings.default, max_examples=_profile_examples(), stateful_step_count=40,
                             deadline=None)
    return case


TestRocksDBStoreAgainstReference = machine_test(SUBJECTS["rocksdb"])
TestReferenceStoreAgainstReference = machine_test(SUBJECTS["reference"])


@pytest.mark.parametrize("name", sorted(SUBJECTS))
def test_subjects_declare_exactly_what_they_have(name: str, tmp_path: Path):
    """A capability is declared if and only if the store has it, so no rule is left out unnoticed."""
    subject = SUBJECTS[name]
    pool = MaintenancePool(threads=1, delete_threads=1)
    store = subject.open(LocalStorage(tmp_path / "ck"), "changelog", 2, tmp_path / "local", pool)
    try:
        has = {capability for capability, attribute in CAPABILITY_ATTRIBUTES.items() if hasattr(store, attribute)}
        assert has == subject.capabilities
    finally:
        subject.close(store)
        pool.shutdown()
