"""Two stores writing one store directory: the stale one must not clean up the other's files.

Spark keeps one active instance per state store (the state store coordinator unloads the others), so
a second live writer is a bug or a hostile set-up. Cleanup walks the cleaning store's own lineage and
deletes every state file below its base snapshot, of any attempt; run by a store another writer has
overtaken, it would delete that writer's files. A store therefore remembers which files above its
version it knows of (on file when it loaded: a dead lineage; or its own failed attempts) and refuses to
clean up, naming the file, when the directory holds any other: ``SecondWriterError``, and nothing is
deleted. A rollback to an older version and a failed attempt of its own stay legal.
"""

from __future__ import annotations

import pytest

from reference.protocol.storage import DurableStorage
from spark_impl.state_store import RocksDBStateStore
from spark_impl.state_store.cleanup import SecondWriterError

OP, PART = "agg", 0


def _commit(store: RocksDBStateStore, version_key: int, uid: str) -> None:
    store.put(f"k{version_key}", version_key)
    store.commit(uid)


def _store(storage: DurableStorage, tmp_path, name: str) -> RocksDBStateStore:
    return RocksDBStateStore(storage, OP, PART, "changelog", 1, local_root=tmp_path / name)


def test_a_store_overtaken_by_a_second_writer_refuses_to_clean_up(tmp_path) -> None:
    storage = DurableStorage()
    first = _store(storage, tmp_path, "first")
    for v in (1, 2, 3):
        _commit(first, v, f"a{v}")
    second = _store(storage, tmp_path, "second")
    second.load(3)
    for v in (4, 5):
        _commit(second, v, f"b{v}")
    before = sorted(storage.files)
    with pytest.raises(SecondWriterError, match=r"state/agg/0/4_b4\.changelog \(version 4, lineage id 'b4'\)"):
        first.cleanup(1)
    assert sorted(storage.files) == before, "nothing is deleted"
    # the writer that overtook it still cleans up its own directory (no snapshot yet: nothing is due)
    assert second.cleanup(1) == [] and sorted(storage.files) == before
    assert second.get("k5") == 5
    first.close()
    second.close()


def test_a_rollback_and_a_failed_attempt_of_its_own_still_clean_up(tmp_path) -> None:
    storage = DurableStorage()
    store = _store(storage, tmp_path, "one")
    for v in (1, 2, 3, 4):
        _commit(store, v, f"a{v}")
    # a restart re-runs from version 2: versions 3 and 4 of lineage a are a dead lineage on file
    store.load(2)
    store.put("k3", 30)
    sealed = store.seal("c3")
    store.write(sealed)
    store.load(2)   # the attempt failed after its changelog landed; the retry reloads version 2
    _commit(store, 3, "d3")
    store.cleanup(1)
    assert store.get("k3") == 3 and store.version == 3
    store.close()


def test_a_long_run_remembers_only_the_files_above_its_version(tmp_path) -> None:
    # every commit's own file is at or below the store's version once durable: nothing accumulates
    storage = DurableStorage()
    store = _store(storage, tmp_path, "long")
    for v in range(1, 41):
        _commit(store, v, f"a{v}")
    assert store._known_files == set()
    store.close()
