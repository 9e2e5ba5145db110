"""One test per state-store bug of spec section 6, rebuilt against the RocksDB store.

Each test replays the sequence of events from the Spark bug report (JIRA /
pull request description), shared with ``lightspeed zoo`` in
``experiments/store_bug_sequences.py``, and checks the outcome against an
independent ground truth: a plain dict the sequence keeps itself, never a
number taken from the code under test. The store-level checks of
``experiments/zoo_checks.py`` judge it (every committed version loads to its
truth, every snapshot loaded on its own does, the reference's loader agrees,
no attempt's file is rewritten, every snapshot upload completes); each test
then asserts what its bug report adds. "Snapshot-only" loads hide every
changelog, so a snapshot must stand on its own.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from store_workloads import apply_writes, scratch_directory

from experiments.store_bug_sequences import (
    StoreBench,
    Trace,
    spark_19677,
    spark_21696,
    spark_43404,
    spark_45419,
    spark_46711,
    spark_47568,
    spark_48105,
    spark_49363_49770,
    spark_51717,
    spark_55510,
    spark_55892,
)
from experiments.zoo_checks import judge
from reference.protocol import layout
from reference.protocol.changelog import decode_state_file
from reference.protocol.state_store import StateStore as ReferenceStateStore
from reference.protocol.storage import CheckpointFormatError, DurableStorage, LocalStorage, StorageError
from spark_impl.state_store import RocksDBStateStore

OP, PART = "agg", 0


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


@pytest.fixture
def bench():
    """The shared sequences' store builder, on the real RocksDB store, in memory where the machine allows."""
    root = scratch_directory("store-bugs-")
    made = StoreBench(RocksDBStateStore, root)
    yield made
    made.close_all()
    shutil.rmtree(root, ignore_errors=True)


apply = apply_writes


def judged_clean(trace: Trace, bench: StoreBench) -> Trace:
    """Every check of the zoo holds on what the sequence left (the real store must pass them all)."""
    failed = [f"{f.check}: {f.detail}" for f in judge(trace, bench) if not f.ok]
    assert failed == [], "\n".join(failed)
    assert trace.must_load, "the sequence committed versions that must load"
    return trace


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


def test_spark_43404_retry_does_not_reuse_other_attempts_file(bench, tmp_path):
    trace = judged_clean(spark_43404(bench), bench)
    storage = trace.storage
    names = {p.rsplit("/", 1)[-1] for p in storage.list()}
    assert {"2_t2a.changelog", "2_t2b.changelog"} <= names
    assert load_fresh(storage, 2, "t2b", tmp_path) == sorted(trace.observed["b_state"].items())
    assert load_fresh(storage, 2, "t2a", tmp_path) == sorted(trace.observed["a_state"].items())
    with pytest.raises(CheckpointFormatError, match="several attempts"):
        load_fresh(storage, 2, None, tmp_path)
    # Reusing an attempt id can never replace that attempt's file.
    before = storage.read("state/agg/0/2_t2a.changelog")
    again = bench.store(storage)
    again.load(1, "a1")
    again.put("x", 99)
    with pytest.raises(StorageError):
        again.commit("t2a")
    assert storage.read("state/agg/0/2_t2a.changelog") == before


@pytest.mark.parametrize("min_deltas, rollback_to, snapshot_count", [(1, 2, 6), (2, 1, 4)])
def test_spark_45419_rollback_does_not_reuse_files_of_higher_versions(bench, min_deltas, rollback_to,
                                                                       snapshot_count):
    """Rolling back to a version with a snapshot (restored DB), and to one without (a DB rebuilt from
    changelogs, whose local SST numbers restart and collide with the rolled-back versions')."""
    trace = judged_clean(spark_45419(bench, min_deltas=min_deltas, rollback_to=rollback_to), bench)
    assert len(snapshots(trace.storage)) == snapshot_count
    assert (4, "u4") in trace.must_load and (4, "w4") in trace.must_load


def test_spark_46711_rollback_racing_commit_keeps_changelog(bench):
    trace = judged_clean(spark_46711(bench), bench)
    assert trace.observed["commit_reached_write"]
    assert trace.observed["rollback_waited"], "rollback must wait for the in-flight commit"
    assert trace.storage.exists("state/agg/0/2_c2.changelog")


def test_spark_47568_maintenance_after_reload_uploads_only_its_own_version(bench):
    trace = judged_clean(spark_47568(bench), bench)
    assert trace.observed["case1_snapshots"] == {"2_w2.snapshot"}
    assert trace.observed["upload_started"]
    assert len(snapshots(trace.storage)) >= 3


def test_spark_48105_unload_racing_snapshot_upload(bench):
    trace = judged_clean(spark_48105(bench), bench)
    assert trace.observed["upload_started"]
    assert trace.observed["unload_waited"], "unload must wait for the in-flight snapshot upload"
    assert trace.observed["local_dir_gone"]
    assert "state/agg/0/1_u1.snapshot" in snapshots(trace.storage)


def test_spark_49363_49770_reloaded_version_never_gets_a_wrong_snapshot(bench):
    trace = judged_clean(spark_49363_49770(bench), bench)
    assert len(snapshots(trace.storage)) == 4


def test_spark_51717_first_snapshot_pending_when_next_batch_fails(bench):
    trace = judged_clean(spark_51717(bench), bench)
    assert trace.observed["upload_started"]
    assert trace.observed["reload_base_file"] is None, "the reload rebuilds the DB from changelogs"
    assert len(snapshots(trace.storage)) == 2


def test_spark_55892_maintenance_never_deletes_an_sst_a_newer_snapshot_reuses(bench):
    trace = judged_clean(spark_55892(bench), bench)
    assert trace.observed["reused_sst_deleted"], "precondition: the other executor deleted a reused SST"
    assert {"state/agg/0/4_a4.snapshot", "state/agg/0/5_b5.snapshot"} <= set(snapshots(trace.storage))


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



def test_spark_55510_range_delete_is_in_the_changelog(bench):
    trace = judged_clean(spark_55510(bench), bench)
    header, records = decode_state_file(trace.storage.read("state/agg/0/2_u2.changelog"), "2_u2.changelog")
    assert header.parent_uid == "u1"
    assert sorted(records) == [(f"k{i}", None) for i in range(2, 6)]


@pytest.mark.parametrize("provider", ["changelog", "delta"])
def test_spark_19677_rerun_batch_does_not_rewrite_existing_delta(bench, provider):
    trace = judged_clean(spark_19677(bench, provider=provider), bench)
    kind = "delta" if provider == "delta" else "changelog"
    assert {f"state/agg/0/2_r2a.{kind}", f"state/agg/0/2_r2b.{kind}"} <= set(trace.written)


@pytest.mark.parametrize("corruption", ["truncate_manifest", "flip_sst_byte", "delete_sst"])
def test_spark_21696_corrupt_snapshot_falls_back_to_changelogs(bench, corruption):
    trace = judged_clean(spark_21696(bench, corruption=corruption), bench)
    storage, manifest = trace.storage, trace.observed["manifest"]
    fresh = bench.store(storage)
    report = fresh.load(5, "u5")
    assert fresh.items() == sorted(trace.truth[(5, "u5")].items())
    assert manifest in report.skipped_snapshots and report.base_version < 4
    # Without the changelogs to fall back on, the load fails loudly, naming the file and version.
    storage.delete("state/agg/0/4_u4.changelog")
    with pytest.raises(CheckpointFormatError, match=r"4_u4\.snapshot.*version 4"):
        bench.store(storage).load(5, "u5")


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
