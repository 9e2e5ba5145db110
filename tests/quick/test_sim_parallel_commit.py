"""The simulator's charge for a join's two store commits: their sum one after the other (Spark OSS), the
slower one's time in parallel (Lightspeed, ``engine.parallel_store_commit``); issue 17, part 3."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from typing import Any

import pytest

from reference.language.catalogue import make
from reference.judge.compare import first_difference
from reference.judge.oracles import check_outcome, failures
from reference.protocol.storage_profiles import StorageProfile
from sim import simulate
from sim.cost_model import PROFILE_DIR, profile_from_dict, shipped_profile, store_commits_ms
from sim.storage_service import StorageService


def test_store_commits_add_up_in_turn_and_take_the_slower_in_parallel() -> None:
    """Commit costs base 2 ms + 0.5 ms per changed key + 0.1 ms per key held: the left store (4 changed,
    10 held) takes 2 + 2 + 1 = 5 ms, the right (2 changed, 30 held) 2 + 1 + 3 = 6 ms."""
    profile = replace(shipped_profile(), state_commit_base_ms=2.0, state_commit_per_changed_key_us=500.0,
                      state_commit_per_total_key_us=100.0)
    costs = [profile.state_commit_ms(4, 10), profile.state_commit_ms(2, 30)]
    assert costs == pytest.approx([5.0, 6.0])
    assert store_commits_ms(costs, parallel=False) == pytest.approx(11.0)
    assert store_commits_ms(costs, parallel=True) == pytest.approx(6.0)


def test_store_files_are_written_in_turn_or_in_parallel() -> None:
    """A write is 2 ms + a 0.5 ms rename + the transfer at 1 MB/s: 1000 bytes take 3.5 ms, 3000 bytes 5.5 ms."""
    storage = StorageProfile(small_write_ms=2.0, rename_ms=0.5, list_ms=0.0, delete_ms=0.0, read_ms=0.0,
                             bandwidth_mb_per_s=1.0, jitter_sigma=0.0)
    service = StorageService(storage, 0)
    assert service.store_writes_ms([1000, 3000], parallel=False) == pytest.approx(9.0)
    assert service.store_writes_ms([1000, 3000], parallel=True) == pytest.approx(5.5)


def _flat_profile() -> dict[str, Any]:
    """local_spark with every per-key and per-byte cost, the jitter and the stragglers taken out: a store's
    commit is 3 ms and its file 2 ms + 0.5 ms whatever it holds."""
    with open(os.path.join(PROFILE_DIR, "local_spark.json")) as f:
        raw = json.load(f)
    raw.update(state_commit_base_ms=3.0, state_commit_per_changed_key_us=0.0, state_commit_per_total_key_us=0.0,
               straggler_probability=0.0)
    raw["storage"].update(small_write_ms=2.0, rename_ms=0.5, bandwidth_mb_per_s=1e9, jitter_sigma=0.0)
    return raw


def test_a_join_batch_is_shorter_by_one_store_commit_and_one_file_write() -> None:
    """Each of the two partitions runs on its own slot and saves the same time: one store's commit (3 ms)
    and one file write (2.5 ms). So every batch's addBatch is 5.5 ms shorter, and the query computes the
    same batches, state and sink."""
    profile = profile_from_dict(_flat_profile())
    runs = {parallel: simulate(make("join", "sync", batches=4, parallel_store_commit=parallel), profile)
            for parallel in (False, True)}
    before, after = (runs[p].outcome() for p in (False, True))
    assert [e.duration_ms["addBatch"] - f.duration_ms["addBatch"]
            for e, f in zip(before.progress, after.progress)] == pytest.approx([5.5] * 4, abs=1e-3)
    assert first_difference(before, after, "exactly_once") is None
    scenario = make("join", "sync", batches=4, parallel_store_commit=True)
    assert not failures(check_outcome(scenario, after, runs[True].storage))


def test_one_store_per_partition_costs_the_same_either_way() -> None:
    profile = profile_from_dict(_flat_profile())
    times = [simulate(make("aggregate", "sync", batches=3, parallel_store_commit=p), profile).outcome().progress
             for p in (False, True)]
    assert [e.duration_ms for e in times[0]] == [e.duration_ms for e in times[1]]
