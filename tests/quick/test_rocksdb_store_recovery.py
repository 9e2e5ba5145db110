"""Recovery from the checkpoint directory alone, format compatibility and the memory bound.

spec section 5 (``reconstruction``, ``retention``): with no local RocksDB files
a fresh store loads every retained version to exactly the state the live store
had, for all three providers; the reference's own reader decodes this store's
changelogs; and 32 stores in one process stay within the configured memory.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest
from store_workloads import manifest_snapshot_readers, random_changes

from reference.protocol.changelog import StateFileHeader, encode_state_file
from reference.protocol.state_store import StateStore, apply_plan, load_version, plan_load
from reference.protocol.storage import CheckpointFormatError, DurableStorage, LocalStorage
from spark_impl.state_store import MemoryBudget, RocksDBStateStore, memory_usage, read_snapshot_records
from spark_impl.state_store.changelog_codec import decode_raw, encode_state_file_raw

OP, PART = "join-left", 7


def workload(store: RocksDBStateStore, rng: random.Random, versions: int, retain: int) -> dict[int, list]:
    """Random puts / deletes / range deletes with maintenance and cleanup; the live state per version."""
    live: dict[int, list] = {0: []}
    for v in range(1, versions + 1):
        random_changes(store, rng, max_ops=40, key_space=60)
        if rng.random() < 0.2:
            store.put("doomed", 1)
            store.abort()
        store.commit(f"v{v}-{rng.randint(0, 10**6)}")
        live[v] = store.items()
        if rng.random() < 0.5:
            store.do_maintenance()
        if rng.random() < 0.3:
            store.cleanup(retain)
    return live


@pytest.mark.parametrize("provider", ["changelog", "delta", "snapshot"])
@pytest.mark.parametrize("seed", [1, 2])
def test_recovery_from_checkpoint_alone_matches_live_store(tmp_path: Path, provider: str, seed: int):
    storage = LocalStorage(tmp_path / "ck")
    retain = 4
    store = RocksDBStateStore(storage, OP, PART, provider, 3, local_root=tmp_path / "live")
    live = workload(store, random.Random(seed), 14, retain)
    lineage = {0: ""}
    lineage.update({v: store.uid for v in [store.version]})
    latest = store.version
    uids = {}
    for path in storage.list():
        if path.endswith((".changelog", ".delta", ".snapshot")):
            name = path.rsplit("/", 1)[-1]
            uids[int(name.split("_")[0])] = name.split("_", 1)[1].rsplit(".", 1)[0]
    store.crash()
    assert not (tmp_path / "live").exists() or not any((tmp_path / "live").iterdir())
    fresh = RocksDBStateStore(storage, OP, PART, provider, 3, local_root=tmp_path / "fresh")
    for version in range(latest - retain + 1, latest + 1):
        fresh.load(version, uids[version])
        assert fresh.items() == live[version], f"{provider} version {version}"
    assert fresh.items() == live[latest]
    fresh.close()


def test_recovery_uses_the_newest_snapshot_and_reference_reads_our_changelogs(tmp_path: Path):
    storage = LocalStorage(tmp_path / "ck")
    store = RocksDBStateStore(storage, OP, PART, "changelog", 4, local_root=tmp_path / "live")
    live = workload(store, random.Random(3), 10, 100)
    store.do_maintenance()
    store.close()
    fresh = RocksDBStateStore(storage, OP, PART, "changelog", 4, local_root=tmp_path / "fresh")
    report = fresh.load(10)
    assert report.base_version == 8 and len(report.replayed) == 2
    assert fresh.items() == live[10]
    # The reference's loader, skipping our (manifest) snapshots, rebuilds the same state.
    ref_view = load_version(storage, OP, PART, 10, None, skip_snapshots=frozenset(range(11)))
    assert sorted(ref_view.items()) == live[10]
    snap = [p for p in storage.list() if p.endswith("8_" + p.rsplit("8_", 1)[-1]) and p.endswith(".snapshot")]
    assert read_snapshot_records(storage, OP, PART, snap[0], tmp_path / "verify") == live[8]
    fresh.close()


def test_reference_loads_read_our_manifests_only_through_the_storage_readers(tmp_path: Path):
    """spec section 5 (``reconstruction``) on a RocksDB checkpoint: the reference's loader decodes
    our snapshot manifests when, and only when, the storage carries the manifest reader. Nothing
    is registered process-wide: a storage without it fails, naming the manifest, even after the
    reader was imported (and used) in this process."""
    store = RocksDBStateStore(LocalStorage(tmp_path / "ck"), OP, PART, "changelog", 3, local_root=tmp_path / "live")
    live = workload(store, random.Random(4), 9, 100)
    store.do_maintenance()
    store.close()
    with_readers = LocalStorage(tmp_path / "ck", snapshot_readers=manifest_snapshot_readers())
    plans = [plan_load(with_readers, OP, PART, v, None) for v in range(1, 10)]
    based = [plan for plan in plans if plan.base_file is not None]
    assert based, "precondition: some version loads from an uploaded manifest"
    for plan in plans:  # apply_plan never falls back: a snapshot it cannot decode is an error
        assert sorted(apply_plan(with_readers, plan).items()) == live[plan.version], plan.version
    without_readers = LocalStorage(tmp_path / "ck")
    with pytest.raises(CheckpointFormatError, match=re.escape(based[0].base_file)):
        apply_plan(without_readers, based[0])


def test_changelog_bytes_identical_to_reference(tmp_path: Path):
    storage = LocalStorage(tmp_path / "ck")
    ref_storage = DurableStorage()
    mine = RocksDBStateStore(storage, OP, PART, "changelog", 50, local_root=tmp_path / "l")
    ref = StateStore(ref_storage, OP, PART, "changelog", 50)
    rng = random.Random(9)
    for v in range(1, 6):
        for _ in range(30):
            key, value = f"κ{rng.randint(0, 20)}", [rng.randint(0, 3), {"z": None, "a": 1.5}]
            is_put = rng.random() < 0.8
            for s in (mine, ref):
                if is_put:
                    s.put(key, value)
                else:
                    s.delete(key)
        mine.commit(f"u{v}")
        ref.commit(f"u{v}")
    for path in ref_storage.list():
        assert storage.read(path) == ref_storage.read(path), path
    mine.close()


def test_codec_roundtrip_and_rejects_corruption():
    header = StateFileHeader("changelog", 3, "abc", "xyz")
    changes = [("a", 1), ("b", None), ("ü", {"k": [1, 2]})]
    from reference.protocol.changelog import encode_value
    raw = [(k.encode(), None if v is None else encode_value(v)) for k, v in changes]
    data = encode_state_file_raw(header, raw)
    assert data == encode_state_file(header, changes)
    assert decode_raw(data, "f")[1] == raw
    from reference.protocol.storage import CheckpointFormatError
    for bad in (data[:-1], data[:20], data[:-9] + b"\x00" + data[-8:], b"LSXX" + data[4:]):
        with pytest.raises(CheckpointFormatError, match="f"):
            decode_raw(bad, "f")


def test_32_stores_stay_within_the_memory_bound(tmp_path: Path):
    budget = MemoryBudget(total_bytes=48 << 20, write_buffer_fraction=0.5, per_db_write_buffer_bytes=1 << 20)
    stores = [RocksDBStateStore(DurableStorage(), OP, p, "changelog", 5, local_root=tmp_path / "l", memory=budget)
              for p in range(32)]
    peak = 0
    payload = "x" * 200
    for round_ in range(3):
        for p, store in enumerate(stores):
            for i in range(1500):
                store.put(f"{round_}-{i:05d}", payload)
            peak = max(peak, memory_usage().total_bytes)
            store.commit(f"r{round_}")
            for i in range(0, 1500, 7):
                store.get(f"{round_}-{i:05d}")
            peak = max(peak, memory_usage().total_bytes)
    usage = memory_usage()
    assert usage.bound_bytes == budget.total_bytes
    assert 0 < peak <= budget.total_bytes, f"peak {peak} over bound {budget.total_bytes}"
    assert usage.write_buffer_bytes <= budget.write_buffer_bytes
    assert stores[5].get("2-00003") == payload
    for store in stores:
        store.close()


def test_sealed_changes_are_a_frozen_tuple_like_view(tmp_path: Path):
    from reference.protocol.changelog import encode_value
    store = RocksDBStateStore(DurableStorage(), OP, PART, "changelog", 50, local_root=tmp_path / "l")
    store.put("b", 1)
    store.put("a", [2])
    store.put("b", {"x": 3})  # last write wins, first-touch order stays
    store.commit("u1")
    store.put("c", 4)
    store.delete("a")
    sealed = store.seal("u2")
    expected = ((b"c", encode_value(4)), (b"a", None))
    store.put("a", 5)  # the next batch must not leak into the sealed version
    store.abort()
    store.put("d", 6)
    assert sealed.changes == expected and expected == tuple(sealed.changes)
    assert len(sealed.changes) == 2 and sealed.changes[1] == (b"a", None) and sealed.changes[-1:] == expected[1:]
    assert list(sealed.changes) == list(expected)
    assert sealed.changes + ((b"z", None),) == expected + ((b"z", None),)
    assert hash(sealed.changes) == hash(expected)
    store.write(sealed)
    store.mark_durable(sealed)
    _header, records = decode_raw(store.storage.read(f"state/{OP}/{PART}/2_u2.changelog"), "2_u2")
    assert tuple(records) == expected
    store.close()


def test_a_snapshot_rocksdb_refuses_to_open_is_named_and_the_load_falls_back(tmp_path: Path):
    """A manifest whose checksum holds and whose SSTs match their entries, but whose inline RocksDB
    MANIFEST is garbage: RocksDB refuses to open the restored directory. The load must fall back to the
    changelogs below it (the state is still right), and a verifier must get a ``CheckpointFormatError``
    naming the snapshot, not a bare exception from rocksdict."""
    from spark_impl.state_store.sst_files import InlineFile, SnapshotManifest, decode_manifest

    storage = LocalStorage(tmp_path / "ck")
    store = RocksDBStateStore(storage, OP, PART, "changelog", 2, local_root=tmp_path / "live")
    live = workload(store, random.Random(5), 6, 100)
    store.do_maintenance()
    store.close()
    snapshots = sorted((p for p in storage.list() if p.endswith(".snapshot")),
                       key=lambda p: int(p.rsplit("/", 1)[-1].split("_", 1)[0]))
    newest = snapshots[-1]
    version = int(newest.rsplit("/", 1)[-1].split("_", 1)[0])
    manifest = decode_manifest(storage.read(newest), newest)
    broken = tuple(InlineFile(f.name, f.size_bytes, b"\0" * f.size_bytes) if f.name.startswith("MANIFEST")
                   else f for f in manifest.other_files)
    assert broken != manifest.other_files, "precondition: the snapshot carries RocksDB's MANIFEST inline"
    tampered = SnapshotManifest(manifest.version, manifest.uid, manifest.parent_uid, manifest.ssts, broken)
    storage.write(newest, tampered.encode(), overwrite=True)

    with pytest.raises(CheckpointFormatError, match=re.escape(newest)):
        read_snapshot_records(storage, OP, PART, newest, tmp_path / "verify")
    fresh = RocksDBStateStore(storage, OP, PART, "changelog", 2, local_root=tmp_path / "fresh")
    report = fresh.load(version)
    assert report.base_version != version, "the load fell back past the snapshot RocksDB refused"
    assert fresh.items() == live[version]
    fresh.close()


def test_an_upload_whose_local_checkpoint_lost_rocksdbs_own_files_writes_no_manifest(tmp_path: Path):
    """SPARK-48105's effect on the shipped upload: if RocksDB's CURRENT vanishes from the local checkpoint
    under the upload, no manifest is written (one would name a snapshot that can never be restored)."""
    from spark_impl.state_store.sst_files import upload_checkpoint

    storage = LocalStorage(tmp_path / "ck")
    store = RocksDBStateStore(storage, OP, PART, "changelog", 100, local_root=tmp_path / "live")
    store.put("k", 1)
    store.commit("u1")
    local = store._workspace.checkpoint(1, "u1", "", compact=False)
    (Path(local.path) / "CURRENT").unlink()
    manifest_path = f"state/{OP}/{PART}/1_u1.snapshot"
    with pytest.raises(FileNotFoundError, match="CURRENT or MANIFEST"):
        upload_checkpoint(storage, store.store, local, manifest_path)
    assert not storage.exists(manifest_path)
    store.close()
