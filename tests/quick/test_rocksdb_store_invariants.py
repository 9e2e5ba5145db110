"""The invariants the RocksDB store asserts about itself (TIGER_STYLE), each shown to fire.

``spark_impl/state_store/lineage.py`` and ``cleanup.py``: a seal moves the
version forward by one and finds at most one version pending; a commit lands
on the store's own line of versions and never changes a committed version's
lineage id; a retention plan never deletes what a retained version loads.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from reference.protocol.storage import DurableStorage
from spark_impl.state_store import RocksDBStateStore
from spark_impl.state_store.cleanup import RetentionPlan
from spark_impl.state_store.lineage import VersionLineage

OP, PART = "agg", 0


@pytest.fixture
def store(tmp_path: Path):
    opened = RocksDBStateStore(DurableStorage(), OP, PART, "changelog", 100, local_root=tmp_path / "local")
    yield opened
    opened.close()


def test_no_version_is_sealed_while_two_are_pending(store: RocksDBStateStore):
    store.commit("u1")
    store.seal("u2")  # pending: async state checkpointing has one batch in flight ...
    store.seal("u3")  # ... and the next batch may seal on top of it
    with pytest.raises(AssertionError, match="2 state commits pending; at most one may be"):
        store.seal("u4")


def test_a_committed_version_keeps_its_lineage_id(store: RocksDBStateStore):
    sealed = store.seal("u1")
    store.write(sealed)
    store.mark_durable(sealed)
    with pytest.raises(AssertionError, match="version 1 was committed as 'u1', now as 'z1'"):
        store.mark_durable(type(sealed)(1, "z1", "", (), None))


def test_a_commit_lands_above_the_loaded_version(store: RocksDBStateStore):
    for v in (1, 2):
        store.commit(f"u{v}")
    stale = store.seal("u3")
    store.load(2, "u2")  # a rollback drops the sealed version 3 ...
    store.commit("w3")
    store.load(3, "w3")
    with pytest.raises(AssertionError, match=r"commit of version 3 outside \(3, 3\]"):
        store.mark_durable(stale)  # ... so its late state_commit may not land on the new line


def test_sealing_moves_the_version_forward_by_exactly_one():
    lineage = VersionLineage("agg/0")
    lineage.advance(lineage.next_version(), "u1")
    with pytest.raises(AssertionError, match="sealed version 3 after 1"):
        lineage.advance(3, "u3")


def test_a_retention_plan_that_deletes_what_a_retained_version_loads_is_refused():
    needed = "state/agg/0/4_u4.snapshot"
    with pytest.raises(AssertionError, match="would delete files a retained version loads"):
        RetentionPlan(4, frozenset({needed}), frozenset(), (needed,), frozenset())
    with pytest.raises(AssertionError, match="would delete SSTs a retained snapshot references"):
        RetentionPlan(4, frozenset({needed}), frozenset({"000008-ab-v2.sst"}), (), frozenset({"000008-ab-v2.sst"}))
