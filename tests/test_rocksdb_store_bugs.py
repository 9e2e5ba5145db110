"""One test per state-store bug of SPEC section 6, rebuilt against the RocksDB store.

Each test replays the sequence of events from the Spark bug report (JIRA /
pull request description) and checks the outcome against an independent
ground truth: a plain dict the test maintains itself, never a number taken
from the code under test. "Snapshot-only" loads hide every changelog, so a
snapshot must stand on its own.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from store_workloads import apply_writes

from reference import layout
from reference.changelog import decode_state_file
from reference.state_store import StateStore as ReferenceStateStore
from reference.state_store import load_version
from reference.storage import CheckpointFormatError, DurableStorage, LocalStorage, StorageError
from spark_impl.state_store import RocksDBStateStore

OP, PART = "agg", 0
GATE_TIMEOUT_S = 10.0


class GatedStorage(LocalStorage):
    """LocalStorage whose writes of matching paths block until ``release()``."""

    def __init__(self, root: Path, match: str):
        super().__init__(root)
        self.match = match
        self.armed = False
        self.entered = threading.Event()
        self.gate = threading.Event()

    def write(self, path: str, data: bytes, *, overwrite: bool = False) -> None:
        if self.armed and self.match in path:
            self.entered.set()
            assert self.gate.wait(GATE_TIMEOUT_S), "gate never released"
        super().write(path, data, overwrite=overwrite)

    def arm(self) -> None:
        self.armed, self.gate = True, threading.Event()
        self.entered.clear()

    def release(self) -> None:
        self.armed = False
        self.gate.set()


@pytest.fixture
def stores(tmp_path: Path):
    made: list[RocksDBStateStore] = []

    def make(storage, provider: str = "changelog", min_deltas: int = 2, **kw: Any) -> RocksDBStateStore:
        store = RocksDBStateStore(storage, OP, PART, provider, min_deltas,
                                  local_root=tmp_path / f"local{len(made)}", **kw)
        made.append(store)
        return store

    yield make
    for store in made:
        store.close()


apply = apply_writes


def snapshot_only(storage, path: str, tmp_path: Path, provider: str = "changelog") -> list:
    """Load the snapshot at ``path`` with every changelog hidden."""
    visible = DurableStorage({p: storage.read(p) for p in storage.list()
                              if not p.endswith((".changelog", ".delta"))})
    parsed = layout.parse_state_file(path)
    store = RocksDBStateStore(visible, OP, PART, provider, local_root=tmp_path / "snapshot-only")
    try:
        store.load(parsed.version, parsed.uid)
        return store.items()
    finally:
        store.close()


def snapshots(storage) -> list[str]:
    return [p for p in storage.list() if p.endswith(".snapshot")]


def load_fresh(storage, version: int, uid: str | None, tmp_path: Path, provider: str = "changelog") -> list:
    store = RocksDBStateStore(storage, OP, PART, provider, local_root=tmp_path / "fresh")
    try:
        store.load(version, uid)
        return store.items()
    finally:
        store.close()


def assert_every_snapshot_true(storage, truth: dict[tuple[int, str], dict], tmp_path: Path) -> int:
    paths = snapshots(storage)
    for path in paths:
        parsed = layout.parse_state_file(path)
        assert snapshot_only(storage, path, tmp_path) == sorted(truth[(parsed.version, parsed.uid)].items()), path
    return len(paths)


def test_spark_43404_retry_does_not_reuse_other_attempts_file(stores, tmp_path):
    storage = LocalStorage(tmp_path / "ck")
    first = stores(storage)
    v1 = apply(first, {}, {"x": 1})
    first.commit("a1")
    # Attempt t2a of batch 1 writes its changelog for version 2, then the task fails.
    a_state = apply(first, v1, {"x": 2, "y": 2})
    sealed = first.seal("t2a")
    first.write(sealed)
    # The retry runs elsewhere from version 1 and commits with its own id.
    retry = stores(storage)
    retry.load(1, "a1")
    b_state = apply(retry, v1, {"x": 20})
    retry.commit("t2b")
    names = {p.rsplit("/", 1)[-1] for p in storage.list()}
    assert {"2_t2a.changelog", "2_t2b.changelog"} <= names
    assert load_fresh(storage, 2, "t2b", tmp_path) == sorted(b_state.items())
    assert load_fresh(storage, 2, "t2a", tmp_path) == sorted(a_state.items())
    with pytest.raises(CheckpointFormatError, match="several attempts"):
        load_fresh(storage, 2, None, tmp_path)
    # Reusing an attempt id can never replace that attempt's file.
    before = storage.read("state/agg/0/2_t2a.changelog")
    again = stores(storage)
    again.load(1, "a1")
    again.put("x", 99)
    with pytest.raises(StorageError):
        again.commit("t2a")
    assert storage.read("state/agg/0/2_t2a.changelog") == before


def test_spark_45419_rollback_does_not_reuse_files_of_higher_versions(stores, tmp_path):
    storage = LocalStorage(tmp_path / "ck")
    store = stores(storage, min_deltas=1)
    truth: dict[tuple[int, str], dict] = {(0, ""): {}}
    state: dict = {}
    for v in range(1, 5):
        state = apply(store, state, {f"k{v}": v, "shared": v})
        store.commit(f"u{v}")
        store.do_maintenance()
        truth[(v, f"u{v}")] = state
    store.load(2, "u2")  # roll back two versions
    state = truth[(2, "u2")]
    for v in (3, 4):
        state = apply(store, state, {f"k{v}": -v, "shared": -v, "k1": None})
        store.commit(f"w{v}")
        store.do_maintenance()
        truth[(v, f"w{v}")] = state
    assert assert_every_snapshot_true(storage, truth, tmp_path) == 6
    assert load_fresh(storage, 4, "w4", tmp_path) == sorted(truth[(4, "w4")].items())
    assert load_fresh(storage, 4, "u4", tmp_path) == sorted(truth[(4, "u4")].items())


def test_spark_46711_rollback_racing_commit_keeps_changelog(stores, tmp_path):
    storage = GatedStorage(tmp_path / "ck", ".changelog")
    store = stores(storage)
    v1 = apply(store, {}, {"a": 1})
    store.commit("c1")
    v2 = apply(store, v1, {"b": 2, "a": None})
    storage.arm()
    committer = threading.Thread(target=store.commit, args=("c2",))
    committer.start()
    assert storage.entered.wait(GATE_TIMEOUT_S)
    # A cancelled task's rollback arrives while the commit is writing its changelog.
    aborter = threading.Thread(target=store.abort)
    aborter.start()
    time.sleep(0.2)
    assert aborter.is_alive(), "rollback must wait for the in-flight commit"
    storage.release()
    committer.join(GATE_TIMEOUT_S)
    aborter.join(GATE_TIMEOUT_S)
    assert storage.exists("state/agg/0/2_c2.changelog")
    assert store.version == 2 and store.items() == sorted(v2.items())
    assert load_fresh(storage, 2, "c2", tmp_path) == sorted(v2.items())


def test_spark_47568_maintenance_after_reload_uploads_only_its_own_version(stores, tmp_path):
    storage = GatedStorage(tmp_path / "ck", "/SSTs/")
    store = stores(storage, min_deltas=2)
    truth = {(0, ""): {}}
    v1 = apply(store, {}, {"a": 1})
    store.commit("u1")
    truth[(1, "u1")] = v1
    truth[(2, "u2")] = apply(store, v1, {"b": 2})
    store.commit("u2")  # snapshot of version 2 is due and pending
    # Case 1: the task reloads version 1 before maintenance runs.
    store.load(1, "u1")
    truth[(2, "w2")] = apply(store, v1, {"c": 3})
    store.commit("w2")
    store.do_maintenance()
    names = {p.rsplit("/", 1)[-1] for p in snapshots(storage)}
    assert names == {"2_w2.snapshot"}
    # Case 2: maintenance already holds version 3's checkpoint when the task reloads.
    truth[(3, "w3")] = apply(store, truth[(2, "w2")], {"d": 4})
    store.commit("w3")
    truth[(4, "w4")] = apply(store, truth[(3, "w3")], {"e": 5})
    store.commit("w4")  # pending snapshot of version 4
    storage.arm()
    uploader = threading.Thread(target=store.do_maintenance)
    uploader.start()
    assert storage.entered.wait(GATE_TIMEOUT_S)
    store.load(3, "w3")
    truth[(4, "x4")] = apply(store, truth[(3, "w3")], {"a": None, "f": 6})
    store.commit("x4")
    truth[(5, "x5")] = apply(store, truth[(4, "x4")], {"g": 7})
    store.commit("x5")
    storage.release()
    uploader.join(GATE_TIMEOUT_S)
    store.do_maintenance()
    assert assert_every_snapshot_true(storage, truth, tmp_path) >= 3
    assert load_fresh(storage, 5, "x5", tmp_path) == sorted(truth[(5, "x5")].items())


def test_spark_48105_unload_racing_snapshot_upload(stores, tmp_path):
    storage = GatedStorage(tmp_path / "ck", "/SSTs/")
    store = stores(storage, min_deltas=1)
    state = apply(store, {}, {f"k{i}": i for i in range(50)})
    store.commit("u1")
    storage.arm()
    uploader = threading.Thread(target=store.do_maintenance)
    uploader.start()
    assert storage.entered.wait(GATE_TIMEOUT_S)
    closer = threading.Thread(target=store.close)  # the executor unloads the provider
    closer.start()
    time.sleep(0.2)
    assert closer.is_alive(), "unload must wait for the in-flight snapshot upload"
    storage.release()
    uploader.join(GATE_TIMEOUT_S)
    closer.join(GATE_TIMEOUT_S)
    assert not store.local_dir.exists()
    assert snapshot_only(storage, "state/agg/0/1_u1.snapshot", tmp_path) == sorted(state.items())


def test_spark_49363_49770_reloaded_version_never_gets_a_wrong_snapshot(stores, tmp_path):
    storage = LocalStorage(tmp_path / "ck")
    store = stores(storage, min_deltas=2)
    truth = {(0, ""): {}}
    state: dict = {}
    for v in (1, 2):
        state = apply(store, state, {f"k{v}": v})
        store.commit(f"u{v}")
        truth[(v, f"u{v}")] = state
    store.do_maintenance()
    for round_ in range(3):  # reload the same version, which has a snapshot, again and again
        store.load(2, "u2")
        state = truth[(2, "u2")]
        for v in (3, 4):
            state = apply(store, state, {f"k{v}": [round_, v], "k1": None if round_ % 2 else round_})
            store.commit(f"r{round_}v{v}")
            truth[(v, f"r{round_}v{v}")] = state
        store.do_maintenance()
    assert assert_every_snapshot_true(storage, truth, tmp_path) == 4


def test_spark_51717_first_snapshot_pending_when_next_batch_fails(stores, tmp_path):
    storage = GatedStorage(tmp_path / "ck", "/SSTs/")
    store = stores(storage, min_deltas=2)
    truth = {(0, ""): {}}
    state: dict = {}
    for v in (1, 2):
        state = apply(store, state, {f"k{i}": [v, i] for i in range(20)})
        store.commit(f"u{v}")
        truth[(v, f"u{v}")] = state
    # Maintenance starts uploading the first ever snapshot (version 2) ...
    storage.arm()
    uploader = threading.Thread(target=store.do_maintenance)
    uploader.start()
    assert storage.entered.wait(GATE_TIMEOUT_S)
    # ... the next batch fails, the store reloads version 2 (no snapshot yet:
    # a fresh DB from changelogs, whose local SST numbers restart) ...
    store.put("k0", "doomed")
    store.abort()
    store.load(2, "u2")
    assert store.last_load.base_file is None
    for v in (3, 4):
        state = apply(store, state, {f"k{i}": [v, i] for i in range(0, 20, 3)})
        store.commit(f"u{v}")
        truth[(v, f"u{v}")] = state
    # ... then the first snapshot lands and the next one is uploaded.
    storage.release()
    uploader.join(GATE_TIMEOUT_S)
    store.do_maintenance()
    assert assert_every_snapshot_true(storage, truth, tmp_path) == 2


def test_spark_55892_maintenance_never_deletes_an_sst_a_newer_snapshot_reuses(stores, tmp_path):
    storage = LocalStorage(tmp_path / "ck")
    a = stores(storage, min_deltas=2)
    truth = {(0, ""): {}}
    state: dict = {}
    for v in (1, 2):
        state = apply(a, state, {f"k{i}": [v, i] for i in range(30)})
        a.commit(f"a{v}")
        truth[(v, f"a{v}")] = state
    a.do_maintenance()  # snapshot 2 uploads its SSTs
    v2_ssts = {p for p in storage.list() if "/SSTs/" in p}
    for v in (3, 4):
        state = apply(a, state, {f"k{v}": "new"})
        a.commit(f"a{v}")
        truth[(v, f"a{v}")] = state
    # Snapshot 4 is created (sharing snapshot 2's SSTs) but its upload is delayed.
    # Meanwhile the store moved to another executor, which compacts, snapshots
    # version 5 and purges everything below it, including snapshot 2's SSTs.
    b = stores(storage, min_deltas=2, compact_on_commit=True)
    b.load(4, "a4")
    truth[(5, "b5")] = apply(b, state, {"k0": None})
    b.commit("b5")
    b.do_maintenance()
    b.cleanup(1)
    assert v2_ssts - set(storage.list()), "precondition: the other executor deleted a reused SST"
    a.do_maintenance()  # the delayed upload of snapshot 4
    assert snapshot_only(storage, "state/agg/0/4_a4.snapshot", tmp_path) == sorted(truth[(4, "a4")].items())
    assert snapshot_only(storage, "state/agg/0/5_b5.snapshot", tmp_path) == sorted(truth[(5, "b5")].items())


def test_spark_55892_own_cleanup_keeps_ssts_of_retained_snapshots(stores, tmp_path):
    storage = LocalStorage(tmp_path / "ck")
    store = stores(storage, min_deltas=2)
    truth = {(0, ""): {}}
    state: dict = {}
    for v in range(1, 11):
        state = apply(store, state, {f"k{v % 4}": v, f"n{v}": v})
        store.commit(f"u{v}")
        truth[(v, f"u{v}")] = state
        store.do_maintenance()
        store.cleanup(3)
        for keep in range(max(v - 2, 1), v + 1):
            assert load_fresh(storage, keep, f"u{keep}", tmp_path) == sorted(truth[(keep, f"u{keep}")].items())
    assert assert_every_snapshot_true(storage, truth, tmp_path) >= 1


def test_spark_55510_range_delete_is_in_the_changelog(stores, tmp_path):
    storage = LocalStorage(tmp_path / "ck")
    store = stores(storage)
    state = apply(store, {}, {f"k{i}": i for i in range(10)})
    store.commit("u1")
    store.delete_range("k2", "k6")
    expected = {k: v for k, v in state.items() if not "k2" <= k < "k6"}
    store.commit("u2")
    header, records = decode_state_file(storage.read("state/agg/0/2_u2.changelog"), "2_u2.changelog")
    assert header.parent_uid == "u1"
    assert sorted(records) == [(f"k{i}", None) for i in range(2, 6)]
    assert store.items() == sorted(expected.items())
    assert load_fresh(storage, 2, "u2", tmp_path) == sorted(expected.items())
    # The reference's own loader reads this store's changelogs to the same state.
    assert sorted(load_version(storage, OP, PART, 2, "u2").items()) == sorted(expected.items())


@pytest.mark.parametrize("provider", ["changelog", "delta"])
def test_spark_19677_rerun_batch_does_not_rewrite_existing_delta(stores, tmp_path, provider):
    storage = LocalStorage(tmp_path / "ck")
    store = stores(storage, provider=provider)
    v1 = apply(store, {}, {"a": 1})
    store.commit("u1")
    first = apply(store, v1, {"a": 2})
    store.commit("r2a")
    kind = "delta" if provider == "delta" else "changelog"
    path = f"state/agg/0/2_r2a.{kind}"
    before = storage.read(path)
    # The batch is re-run after a restart: reload version 1 and commit again.
    store.load(1, "u1")
    second = apply(store, v1, {"a": 3, "b": 3})
    store.commit("r2b")
    assert storage.read(path) == before
    assert load_fresh(storage, 2, "r2a", tmp_path, provider) == sorted(first.items())
    assert load_fresh(storage, 2, "r2b", tmp_path, provider) == sorted(second.items())


@pytest.mark.parametrize("corruption", ["truncate_manifest", "flip_sst_byte", "delete_sst"])
def test_spark_21696_corrupt_snapshot_falls_back_to_changelogs(stores, tmp_path, corruption):
    storage = LocalStorage(tmp_path / "ck")
    store = stores(storage, min_deltas=2)
    truth = {}
    state: dict = {}
    for v in range(1, 6):
        state = apply(store, state, {f"k{v}": v, "k0": v, f"k{v - 1}": None})
        store.commit(f"u{v}")
        truth[v] = state
        store.do_maintenance()
    manifest = "state/agg/0/4_u4.snapshot"
    newest_ssts = {p for p in storage.list() if "/SSTs/" in p}
    if corruption == "truncate_manifest":
        storage.write(manifest, storage.read(manifest)[:-7], overwrite=True)
    else:
        from spark_impl.state_store.sst_files import decode_manifest
        refs = {s.dfs_name for s in decode_manifest(storage.read(manifest), manifest).ssts}
        victim = sorted(p for p in newest_ssts if p.rsplit("/", 1)[-1] in refs)[-1]
        if corruption == "flip_sst_byte":
            data = bytearray(storage.read(victim))
            data[len(data) // 2] ^= 0xFF
            storage.write(victim, bytes(data), overwrite=True)
        else:
            storage.delete(victim)
    fresh = stores(storage)
    report = fresh.load(5, "u5")
    assert fresh.items() == sorted(truth[5].items())
    assert manifest in report.skipped_snapshots and report.base_version < 4
    # Without the changelogs to fall back on, the load fails loudly, naming the file and version.
    storage.delete("state/agg/0/4_u4.changelog")
    with pytest.raises(CheckpointFormatError, match=r"4_u4\.snapshot.*version 4"):
        stores(storage).load(5, "u5")


# SPARK-21696 on both stores. Each test below fails for a different broken fallback; the
# history they share: versions 1..7 of lineage u1..u7, snapshots of 2, 4 and 6, and a
# failed attempt's valid snapshot 5_z5 (another lineage) beside the committed version 5.
@pytest.fixture(params=["rocksdb", "reference"])
def open_store(request, stores):
    """A store of either implementation over a given storage (the RocksDB ones are closed at the end)."""
    def make(storage, min_deltas: int = 2) -> Any:
        if request.param == "reference":
            return ReferenceStateStore(storage, OP, PART, "changelog", min_deltas)
        return stores(storage, min_deltas=min_deltas)
    make.impl = request.param  # type: ignore[attr-defined]
    return make


def seven_versions_with_a_zombie_snapshot(open_store, storage) -> dict[int, dict]:
    """Commit u1..u7 (snapshots of 2, 4, 6), then a failed attempt z5 snapshots its own version 5."""
    store = open_store(storage)
    truth: dict[int, dict] = {0: {}}
    for v in range(1, 8):
        truth[v] = apply(store, truth[v - 1], {f"k{v}": v, "k0": v, f"k{v - 2}": None})
        store.commit(f"u{v}")
        store.do_maintenance()
    zombie = open_store(storage, min_deltas=1)
    zombie.load(4, "u4")
    apply(zombie, truth[4], {"zombie": 1})
    zombie.commit("z5")
    zombie.do_maintenance()
    assert {f"{v}_u{v}.snapshot" for v in (2, 4, 6)} | {"5_z5.snapshot"} == \
        {p.rsplit("/", 1)[-1] for p in snapshots(storage)}
    return truth


def corrupt(storage, path: str) -> None:
    storage.write(path, storage.read(path)[:-5], overwrite=True)


@pytest.mark.parametrize("damaged, base", [((6,), 4), ((6, 4), 2)])
def test_spark_21696_falls_back_to_the_next_snapshot_down_its_own_lineage(open_store, tmp_path, damaged, base):
    """Caught: a fallback that takes the newest snapshot below by version alone (5_z5, another
    lineage: its zombie key shows), that goes below the next usable snapshot (the changelogs
    there are gone), or that falls back only once."""
    storage = LocalStorage(tmp_path / "ck")
    truth = seven_versions_with_a_zombie_snapshot(open_store, storage)
    for v in damaged:
        corrupt(storage, f"state/agg/0/{v}_u{v}.snapshot")
    for v in range(1, base + 1):
        storage.delete(f"state/agg/0/{v}_u{v}.changelog")
    fresh = open_store(storage)
    fresh.load(7, "u7")
    assert sorted(fresh.items()) == sorted(truth[7].items())
    if open_store.impl == "rocksdb":
        report = fresh.last_load
        assert report.base_file == f"state/agg/0/{base}_u{base}.snapshot"
        assert report.skipped_snapshots == tuple(f"state/agg/0/{v}_u{v}.snapshot" for v in damaged)
        assert report.replayed == tuple(f"state/agg/0/{v}_u{v}.changelog" for v in range(base + 1, 8))


def test_spark_21696_loading_the_damaged_version_itself_replays_its_own_changelog(open_store, tmp_path):
    """Caught: a fallback that only works when the damaged snapshot lies below the version being
    loaded (here it is that version: nothing is replayed yet when its snapshot fails)."""
    storage = LocalStorage(tmp_path / "ck")
    truth = seven_versions_with_a_zombie_snapshot(open_store, storage)
    corrupt(storage, "state/agg/0/6_u6.snapshot")
    for v in range(1, 5):
        storage.delete(f"state/agg/0/{v}_u{v}.changelog")
    fresh = open_store(storage)
    fresh.load(6, "u6")
    assert sorted(fresh.items()) == sorted(truth[6].items())
    if open_store.impl == "rocksdb":
        assert fresh.last_load.base_version == 4
        assert fresh.last_load.replayed == ("state/agg/0/5_u5.changelog", "state/agg/0/6_u6.changelog")


def test_spark_21696_another_attempts_changelog_is_no_fallback(open_store, tmp_path):
    """Caught: a fallback that checks for a changelog of the damaged snapshot's version by version
    alone. Only a failed attempt's 6_z6.changelog is there; reading it would build version 7 on
    that attempt's state. The load must fail, naming the snapshot and the missing changelog."""
    storage = LocalStorage(tmp_path / "ck")
    seven_versions_with_a_zombie_snapshot(open_store, storage)
    other = open_store(storage, min_deltas=100)
    other.load(5, "u5")
    apply(other, {}, {"k6": "zombie"})
    other.commit("z6")
    storage.delete("state/agg/0/6_u6.changelog")
    corrupt(storage, "state/agg/0/6_u6.snapshot")
    with pytest.raises(CheckpointFormatError, match=r"6_u6\.snapshot.*no changelog of version 6 to fall back on"):
        open_store(storage).load(7, "u7")


@pytest.mark.parametrize("impl", ["rocksdb", "reference"])
def test_a_corrupt_snapshot_whose_older_changelogs_are_cleaned_up_is_named_in_the_error(stores, tmp_path, impl):
    """The fallback of SPARK-21696 needs the changelogs below the snapshot; cleanup may have deleted them.
    The load then fails, and the error names the corrupt snapshot (the cause), not only the missing file."""
    storage = LocalStorage(tmp_path / "ck")
    make = (lambda: stores(storage, min_deltas=1)) if impl == "rocksdb" else \
        (lambda: ReferenceStateStore(storage, "agg", 0, "changelog", 1))
    store = make()
    for v in (1, 2, 3):
        store.put(f"k{v}", v)
        store.commit(f"u{v}")
        store.do_maintenance()
    store.cleanup(2)  # keeps versions 2 and 3: version 1's files go
    snapshot = "state/agg/0/2_u2.snapshot"
    storage.write(snapshot, storage.read(snapshot)[:-5], overwrite=True)
    with pytest.raises(CheckpointFormatError, match=r"2_u2\.snapshot.*falling back.*version 1"):
        make().load(2, "u2")  # a restart re-running batch 2 loads version 2


def test_truncated_changelog_is_a_loud_error_naming_file_and_version(stores, tmp_path):
    storage = LocalStorage(tmp_path / "ck")
    store = stores(storage, min_deltas=100)
    for v in (1, 2, 3):
        store.put(f"k{v}", v)
        store.commit(f"u{v}")
    path = "state/agg/0/2_u2.changelog"
    storage.write(path, storage.read(path)[:-3], overwrite=True)
    with pytest.raises(CheckpointFormatError, match=r"2_u2\.changelog.*version 2"):
        stores(storage).load(3, "u3")
