"""The simulator's RocksDB commit without changelog checkpointing is Spark's: new SST files and a zip, not the state.

Spark's RocksDB state store with changelog checkpointing off makes every commit a version: the commit's flush
writes the keys the version changed into new SST files, and ``RocksDBFileManager.saveCheckpointToDfs`` copies
to the checkpoint only the files it does not hold yet, plus the version's zip (file list, MANIFEST, OPTIONS,
CURRENT), reusing every SST file uploaded before. So a commit's upload is the changed keys and a small zip, not
a copy of the whole state (which the simulator charged before). Expected bytes are counted here from the
reference's own committed states, not from the simulator's code.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from reference.language.catalogue import make
from reference.protocol.run import run_scenario
from sim import simulate
from sim.cost_model import ROCKSDB_VERSION_ZIP_BYTES, shipped_profile


def test_a_commit_without_changelog_uploads_the_changed_keys_and_a_zip():
    profile = shipped_profile()
    bpk = profile.bytes_per_state_key
    assert profile.commit_files_bytes("snapshot", 30) == [30 * bpk, ROCKSDB_VERSION_ZIP_BYTES]
    assert profile.commit_files_bytes("changelog", 30) == [30 * bpk]
    assert profile.commit_files_bytes("delta", 30) == [30 * bpk]
    # nothing in it depends on how many keys the store holds: the files already uploaded are reused
    assert ROCKSDB_VERSION_ZIP_BYTES < 100 * bpk


def _changed_keys(states: dict, version: int) -> int:
    """Keys whose value version ``version`` added or changed against version ``version - 1`` (one store)."""
    new = dict(map(tuple, states.get(str(version), [])))
    old = dict(map(tuple, states.get(str(version - 1), [])))
    return sum(1 for k, v in new.items() if old.get(k) != v) + sum(1 for k in old if k not in new)


@pytest.mark.parametrize("batches", [3, 5])
def test_the_bytes_charged_are_the_changes_and_a_zip_per_commit_whatever_the_state_holds(batches):
    """A running count with changelog checkpointing off, retention past the run: every committed version is
    retained, so the reference's outcome holds each partition's state at every version. The simulator must
    charge, per task commit, the keys the version changed and one zip, and nothing else."""
    scenario = make("aggregate", "sync", batches=batches, retain=100,
                    state_store={"provider": "snapshot", "min_deltas_for_snapshot": 1, "maintenance_interval_ms": 200})
    states = run_scenario(scenario).outcome().state
    sim = simulate(scenario, replace(shipped_profile(), straggler_probability=0.0))
    assert sim.outcome().error is None
    bpk = shipped_profile().bytes_per_state_key
    expected = 0.0
    for _store, partitions in states.items():
        for _p, versions in partitions.items():
            for version in range(1, batches + 1):
                expected += _changed_keys(versions, version) * bpk + ROCKSDB_VERSION_ZIP_BYTES
    assert sim.service.state_bytes_charged == pytest.approx(expected)
    whole_state = sum(len(versions[str(v)]) for partitions in states.values() for versions in partitions.values()
                      for v in range(1, batches + 1)) * bpk
    assert sim.service.state_bytes_charged < whole_state + batches * 2 * ROCKSDB_VERSION_ZIP_BYTES
