"""Cleanup: orphan SSTs go, SSTs of an upload in progress stay, a rollback does not break it.

An upload copies the SSTs first and writes the manifest last (the atomic
step), so an executor that dies between the two leaves SSTs no manifest will
ever reference. Cleanup must delete them once their snapshot version is below
the retention bound, and must never delete the fresh SSTs of an upload that is
still running on another executor (its manifest is simply not written yet).

Ground truth here is the test's own reading of the checkpoint: which SST names
are listed and which ones the manifests on storage reference (decoded by the
test), plus a dict of the state every version must have.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from store_workloads import apply_writes

from reference.protocol import layout
from reference.protocol.state_store import StateStore as ReferenceStateStore
from reference.protocol.storage import DurableStorage, LocalStorage, StorageError
from spark_impl.state_store import RocksDBStateStore
from spark_impl.state_store.sst_files import decode_manifest

OP, PART = "agg", 0
SST_DIR = f"state/{OP}/{PART}/SSTs/"
GATE_TIMEOUT_S = 10.0


class FaultyStorage(LocalStorage):
    """LocalStorage whose next write of a matching path fails (``fail``) or waits (``hold``)."""

    def __init__(self, root: Path):
        super().__init__(root)
        self.fail_match: str | None = None
        self.hold_match: str | None = None
        self.held = threading.Event()
        self.release = threading.Event()

    def write(self, path: str, data: bytes, *, overwrite: bool = False) -> None:
        if self.fail_match is not None and self.fail_match in path:
            self.fail_match = None
            raise StorageError(f"{path}: injected failure (the executor died here)")
        if self.hold_match is not None and self.hold_match in path:
            self.hold_match = None
            self.held.set()
            assert self.release.wait(GATE_TIMEOUT_S), "never released"
        super().write(path, data, overwrite=overwrite)


def sst_names(storage) -> set[str]:
    return {p[len(SST_DIR):] for p in storage.list(SST_DIR)}


def referenced(storage) -> set[str]:
    out: set[str] = set()
    for path in storage.list(f"state/{OP}/{PART}/"):
        if path.endswith(".snapshot"):
            out |= {s.dfs_name for s in decode_manifest(storage.read(path), path).ssts}
    return out


def snapshot_only(storage, path: str, tmp_path: Path) -> list:
    """Load the snapshot at ``path`` with every changelog hidden."""
    visible = DurableStorage({p: storage.read(p) for p in storage.list() if not p.endswith(".changelog")})
    parsed = layout.parse_state_file(path)
    store = RocksDBStateStore(visible, OP, PART, local_root=tmp_path / "snapshot-only")
    try:
        store.load(parsed.version, parsed.uid)
        return store.items()
    finally:
        store.close()


@pytest.fixture
def stores(tmp_path: Path):
    made: list[RocksDBStateStore] = []

    def make(storage, min_deltas: int = 2, **kw: Any) -> RocksDBStateStore:
        store = RocksDBStateStore(storage, OP, PART, "changelog", min_deltas,
                                  local_root=tmp_path / f"local{len(made)}", **kw)
        made.append(store)
        return store

    yield make
    for store in made:
        store.close()


def commit(store: Any, truth: dict, state: dict, uid: str, writes: dict) -> dict:
    state = apply_writes(store, state, writes)
    store.commit(uid)
    truth[(store.version, uid)] = state
    return state


def test_orphans_of_a_crashed_upload_are_deleted_once_below_retention(stores, tmp_path):
    storage = FaultyStorage(tmp_path / "ck")
    store = stores(storage)
    truth: dict = {}
    state: dict = {}
    for v in (1, 2):
        state = commit(store, truth, state, f"u{v}", {f"k{i}": [v, i] for i in range(200)})
    storage.fail_match = ".snapshot"  # the SSTs of snapshot 2 land, its manifest never does
    with pytest.raises(StorageError):
        store.do_maintenance()
    orphans = sst_names(storage)
    assert orphans and not referenced(storage), "precondition: the failed upload left unreferenced SSTs"
    store.cleanup(10)  # version 2 is still within retention: the orphans stay
    assert orphans <= sst_names(storage)
    for v in range(3, 11):
        state = commit(store, truth, state, f"u{v}", {f"k{v}": v, f"k{v + 100}": None})
        store.do_maintenance()
        store.cleanup(2)
        # Never adopted: no manifest ever references an orphan.
        assert not orphans & referenced(storage)
    assert not orphans & sst_names(storage), "orphans below the retention bound must be deleted"
    assert sst_names(storage) <= referenced(storage), "every SST left is referenced by a manifest"
    fresh = stores(storage)
    for v in (9, 10):
        fresh.load(v, f"u{v}")
        assert fresh.items() == sorted(truth[(v, f"u{v}")].items())


def test_cleanup_on_another_executor_spares_an_upload_in_progress(stores, tmp_path):
    storage = FaultyStorage(tmp_path / "ck")
    a = stores(storage)
    truth: dict = {}
    state: dict = {}
    for v in (1, 2):
        state = commit(a, truth, state, f"u{v}", {f"k{i}": [v, i] for i in range(200)})
    storage.fail_match = ".snapshot"
    with pytest.raises(StorageError):
        a.do_maintenance()  # orphans of snapshot 2
    orphans = sst_names(storage)
    for v in (3, 4):
        state = commit(a, truth, state, f"u{v}", {f"k{i}": [v, i] for i in range(0, 200, 3)})
    a.do_maintenance()  # snapshot 4 lands
    for v in (5, 6):
        state = commit(a, truth, state, f"u{v}", {f"k{i}": [v, i] for i in range(0, 200, 5)})
    # Executor A uploads snapshot 6: its SSTs land, then it stalls before the manifest.
    storage.hold_match = "6_u6.snapshot"
    uploader = threading.Thread(target=a.do_maintenance)
    uploader.start()
    assert storage.held.wait(GATE_TIMEOUT_S)
    in_flight = sst_names(storage) - referenced(storage) - orphans
    assert in_flight, "precondition: the upload in progress wrote SSTs no manifest references yet"
    # Meanwhile the partition runs on executor B, which commits and cleans up.
    b = stores(storage)
    b.load(6, "u6")
    commit(b, truth, truth[(6, "u6")], "w7", {"k1": None, "new": 7})
    b.cleanup(2)  # keeps version 6 and up: the newest snapshot at or below 6 is 4
    remaining = sst_names(storage)
    storage.release.set()
    uploader.join(GATE_TIMEOUT_S)
    assert in_flight <= remaining, "cleanup deleted SSTs of an upload in progress"
    assert not orphans & remaining, "orphans of version 2 < 4 must be deleted"
    assert snapshot_only(storage, "state/agg/0/6_u6.snapshot", tmp_path) == sorted(truth[(6, "u6")].items())
    assert snapshot_only(storage, "state/agg/0/4_u4.snapshot", tmp_path) == sorted(truth[(4, "u4")].items())
    fresh = stores(storage)
    fresh.load(7, "w7")
    assert fresh.items() == sorted(truth[(7, "w7")].items())


def test_an_unreadable_retained_manifest_stops_all_sst_deletion(stores, tmp_path):
    storage = FaultyStorage(tmp_path / "ck")
    store = stores(storage)
    truth: dict = {}
    state: dict = {}
    for v in (1, 2):
        state = commit(store, truth, state, f"u{v}", {f"k{i}": v for i in range(100)})
    storage.fail_match = ".snapshot"
    with pytest.raises(StorageError):
        store.do_maintenance()
    orphans = sst_names(storage)
    for v in range(3, 7):
        state = commit(store, truth, state, f"u{v}", {f"k{v}": v})
        store.do_maintenance()
    storage.write("state/agg/0/6_u6.snapshot", b"{not a manifest", overwrite=True)
    store.cleanup(1)
    assert orphans <= sst_names(storage), "with a retained manifest unreadable, no SST may be deleted"


def _open_store(impl: str, storage, provider: str, local_root: Path):
    if impl == "reference":
        return ReferenceStateStore(storage, OP, PART, provider, 1)
    return RocksDBStateStore(storage, OP, PART, provider, 1, local_root=local_root)


@pytest.mark.parametrize("impl", ["rocksdb", "reference"])
@pytest.mark.parametrize("provider", ["snapshot", "changelog", "delta"])
def test_cleanup_after_reloading_an_older_retained_version(tmp_path, provider, impl):
    """Both stores: a cleanup after a rollback must not walk into versions an earlier cleanup deleted."""
    storage = LocalStorage(tmp_path / "ck")
    store = _open_store(impl, storage, provider, tmp_path / "live")
    truth: dict = {}
    state: dict = {}
    for v in (1, 2, 3):
        state = commit(store, truth, state, f"u{v}", {f"k{v}": v, "k1": [v]})
        store.do_maintenance()
    store.cleanup(2)  # keeps versions 2 and 3: everything below snapshot 2 goes
    assert not any(p.rsplit("/", 1)[-1].startswith("1_") for p in storage.list())
    store.load(2, "u2")  # e.g. a restart re-runs batch 2
    store.cleanup(2)  # would keep versions 1 and 2, but version 1 is already gone
    state = commit(store, truth, truth[(2, "u2")], "w3", {"k1": None, "k9": 9})
    store.do_maintenance()
    store.cleanup(2)
    fresh = _open_store(impl, storage, provider, tmp_path / "fresh")
    for version, uid in ((2, "u2"), (3, "w3")):
        fresh.load(version, uid)
        assert sorted(fresh.items()) == sorted(truth[(version, uid)].items())
    for opened in (fresh, store):
        if impl == "rocksdb":
            opened.close()
