"""What a state snapshot writes, by provider: the whole map (HDFS-backed, ``delta``) or only what is new since the
last snapshot (RocksDB, ``changelog``: new SST files are uploaded, the others reused).

Spark: ``HDFSBackedStateStoreProvider.doSnapshot`` writes every entry of the version it snapshots;
``RocksDBFileManager.saveCheckpointToDfs`` copies only the files the checkpoint store does not hold yet. The
simulator charges a snapshot by ``Profile.snapshot_upload_keys``; the expected key counts below come from the
input records, worked out by hand.
"""

from __future__ import annotations

from typing import Any

import pytest

from reference.language.scenario import Scenario
from sim import simulate
from sim.cost_model import Profile

KEYS = 10


def test_the_keys_a_snapshot_writes_by_provider():
    assert Profile.snapshot_upload_keys("delta", 1000, 30) == 1000
    assert Profile.snapshot_upload_keys("changelog", 1000, 30) == 30
    assert Profile.snapshot_upload_keys("changelog", 1000, 5000) == 1000   # never more than the state


def scenario(provider: str) -> Scenario:
    """One partition. Batch 0 (every record at 0 ms) counts keys k0..k9; every later batch (one record each 100 ms)
    touches k0 only. A snapshot after every version."""
    records = [[0, f"k{i}", 1, 0, 0] for i in range(KEYS)] + [[0, "k0", 1, 100 * b, 100 * b] for b in range(1, 8)]
    return Scenario.from_dict({
        "name": f"snapshot-upload-{provider}", "seed": 1, "source": {"kind": "explicit", "records": records, "batch_ms": 100},
        "query": {"operator": {"kind": "aggregate", "agg": "count"}, "state_partitions": 1},
        "engine": {"trigger_interval_ms": 100,
                   "state_store": {"provider": provider, "min_deltas_for_snapshot": 1, "maintenance_interval_ms": 1}}})


@pytest.mark.parametrize("mode", ["data", "volume"])
def test_rocksdb_uploads_what_changed_since_its_last_snapshot_and_hdfs_the_whole_map(mode, monkeypatch):
    seen: list[int] = []
    original = Profile.snapshot_ms

    def spy(self: Profile, keys: int) -> Any:
        seen.append(keys)
        return original(self, keys)
    monkeypatch.setattr(Profile, "snapshot_ms", spy)
    uploads = {}
    for provider in ("delta", "changelog"):
        seen.clear()
        sim = simulate(scenario(provider), mode=mode)
        assert sim.outcome().error is None
        uploads[provider] = list(seen)
    assert len(uploads["delta"]) == len(uploads["changelog"]) > 3, uploads
    assert all(k == 1 for k in uploads["changelog"][1:]), uploads   # each later snapshot: k0 only
    if mode == "data":   # volume mode estimates the distinct keys of its counts, data mode holds them
        assert uploads["delta"] == [KEYS] * len(uploads["delta"]), uploads   # the whole map every time
        assert uploads["changelog"][0] == KEYS, uploads   # the first snapshot: everything batch 0 counted
    else:
        assert all(c <= d for c, d in zip(uploads["changelog"], uploads["delta"])), uploads
        assert uploads["delta"][1:] == sorted(uploads["delta"][1:]) and uploads["delta"][-1] > 1, uploads


def test_the_state_kept_counts_one_rocksdb_snapshot_per_store_and_every_hdfs_snapshot():
    """Store 0/0 holds snapshots of versions 2 (3 keys) and 4 (4 keys) and changelogs of versions 3 and 4 (one
    entry each); store 0/1 a snapshot of version 4 (2 keys). HDFS (``delta``): every file is a copy, 3 + 4 + 1 +
    1 + 2 = 11 entries. RocksDB (``changelog``): the newest snapshot of each store, 4 + 2, and the changelogs,
    1 + 1: 8."""
    from experiments.changelog_checkpointing.definition import kept_state_keys
    from reference.protocol import layout
    from reference.protocol.changelog import StateFileHeader, encode_state_file

    def file(partition: int, version: int, kind: str, keys: int) -> tuple[str, bytes]:
        path = layout.state_file("0", partition, version, f"u{version}", kind)
        changes = [(f"k{i}", i) for i in range(keys)]
        return path, encode_state_file(StateFileHeader(kind, version, f"u{version}", f"u{version - 1}"), changes)

    files = dict([file(0, 2, "snapshot", 3), file(0, 4, "snapshot", 4), file(0, 3, "changelog", 1),
                  file(0, 4, "changelog", 1), file(1, 4, "snapshot", 2)])
    files["offsets/0"] = b"not a state file"
    assert kept_state_keys(files, "delta") == 11
    assert kept_state_keys(files, "changelog") == 8
