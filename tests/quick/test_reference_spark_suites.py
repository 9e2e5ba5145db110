"""Cases mirrored from Spark's own state-store and streaming suites, run on the reference model."""

from __future__ import annotations

from dataclasses import replace

from reference.protocol import layout
from reference.language.catalogue import make
from reference.protocol.faults import ZOMBIE_KEY
from reference.protocol.logs import CommitEntry, OffsetEntry, log_batches, purge_logs, write_metadata
from reference.judge.oracles import check_outcome, failures
from reference.protocol.query import BatchBounds, run_sequential
from reference.protocol.recovery import plan_restart
from reference.protocol.retained import committed_chain, latest_lineage
from reference.protocol.run import Run, run_scenario
from reference.language.scenario import EngineConfig
from reference.protocol.sources import SourceData
from reference.protocol.state_store import StateStore, load_version
from reference.protocol.storage import DurableStorage


def state_files(storage: DurableStorage, kind: str) -> list[int]:
    return sorted(layout.parse_state_file(p).version for p in storage.list("state/0/0/")
                  if layout.parse_state_file(p) and layout.parse_state_file(p).kind == kind)


def one_partition_count(batches: int, **engine) -> object:
    sc = make("aggregate", batches=batches, partitions=1, retain=1000)
    return replace(sc, state_partitions=1, engine=replace(sc.engine, **engine))


def test_maintenance_every_five_versions_snapshots_exactly_multiples_of_five():
    # RocksDBSuite: minDeltasForSnapshot = 1, maintenance after every 5th commit.
    sc = one_partition_count(50, min_deltas_for_snapshot=1, maintenance_interval_ms=500)
    result = run_scenario(sc)
    assert result.error is None
    assert state_files(result.storage, "changelog") == list(range(1, 51))
    assert state_files(result.storage, "snapshot") == list(range(5, 51, 5))


def test_no_snapshot_before_min_deltas_for_snapshot():
    sc = one_partition_count(9, min_deltas_for_snapshot=10, maintenance_interval_ms=100)
    assert state_files(run_scenario(sc).storage, "snapshot") == []
    sc = one_partition_count(10, min_deltas_for_snapshot=10, maintenance_interval_ms=100)
    assert state_files(run_scenario(sc).storage, "snapshot") == [10]


def test_purge_with_retention_three_keeps_exactly_what_versions_10_to_12_need():
    storage = DurableStorage()
    store = StateStore(storage, "0", 0, "changelog", min_deltas_for_snapshot=5)
    for version in range(1, 13):
        store.put(f"k{version % 4}", version)
        store.commit(f"u{version}")
        if version % 5 == 0:
            store.do_maintenance()
    deleted = store.cleanup(3)
    # versions 10..12 load from snapshot 10: everything below version 10 goes
    assert sorted(deleted) == sorted([f"state/0/0/{v}_u{v}.changelog" for v in range(1, 10)]
                                     + ["state/0/0/5_u5.snapshot"])
    assert storage.list() == sorted(["state/0/0/10_u10.changelog", "state/0/0/10_u10.snapshot",
                                     "state/0/0/11_u11.changelog", "state/0/0/12_u12.changelog"])
    assert load_version(storage, "0", 0, 12, "u12") == {"k0": 12, "k1": 9, "k2": 10, "k3": 11}
    assert load_version(storage, "0", 0, 10, "u10") == {"k0": 8, "k1": 9, "k2": 10, "k3": 7}


def _expected_states(sc):
    data = SourceData(sc)
    bounds = []
    start = (0,) * len(data.partitions)
    for b in range(data.planned_batches()):
        end = tuple(data.planned_end_offsets(b))
        bounds.append(BatchBounds(b, start, end))
        start = end
    return run_sequential(sc, data, bounds)


def _switch_provider(first: str, second: str) -> None:
    sc = make("aggregate", batches=8, retain=100)
    first_sc = replace(sc, engine=replace(sc.engine, provider=first), faults=())
    crash = make("aggregate", batches=8, faults=[{"at": {"step": "source_commit", "batch": 3, "when": "after"},
                                                    "kind": "driver_crash"}]).faults
    run = Run(replace(first_sc, faults=crash))
    run.life()
    second_sc = replace(first_sc, engine=replace(first_sc.engine, provider=second))
    result = Run(second_sc, storage=run.storage).finish()
    assert result.error is None
    expected = _expected_states(sc)
    version, lineage = latest_lineage(result.storage)
    for p in range(2):
        chain = committed_chain(result.storage, "0", p, version, lineage["0"][str(p)])
        uids = {link.version: link.uid for link in chain}
        for v in range(1, 9):
            loaded = load_version(result.storage, "0", p, v, uids[v])
            assert [[k, loaded[k]] for k in sorted(loaded)] == expected.states[v]["0"][p], (p, v)


def test_turning_changelog_checkpointing_on_over_an_existing_checkpoint_reloads_every_version():
    _switch_provider("snapshot", "changelog")


def test_turning_changelog_checkpointing_off_over_an_existing_checkpoint_reloads_every_version():
    _switch_provider("changelog", "snapshot")


def test_async_progress_offsets_0_2_5_commits_0_2_reruns_3_to_5_and_commits_0_2_5():
    sc = make("map", "async_progress", batches=6)
    sc = replace(sc, engine=replace(sc.engine, checkpoint_interval_ms=10_000))
    data = SourceData(sc)
    storage = DurableStorage()
    write_metadata(storage, "q", sc.query_digest())
    ends = {b: tuple(data.planned_end_offsets(b)) for b in range(6)}
    starts = {0: (0, 0), 2: ends[1], 5: ends[4]}
    for b in (0, 2, 5):
        storage.write(layout.offset_path(b), OffsetEntry(b, starts[b], ends[b]).encode())
    for b in (0, 2):
        storage.write(layout.commit_path(b), CommitEntry(b, 0, [{"watermark_ms": 0, "max_event_ms": {}}],
                                                         {}).encode())
    plan = plan_restart(storage, "async", 2)
    assert plan.first_batch == 5 and plan.fixed_offsets == {5: (ends[2], ends[5])}
    result = run_scenario(sc, storage=storage)
    assert result.error is None
    assert result.observer.recoveries[0].rerun_batches == (3, 4, 5)
    assert log_batches(result.storage, layout.COMMITS) == [0, 2, 5]


def test_a_zombie_write_from_a_failed_attempt_is_never_read_as_committed():
    sc = make("aggregate", batches=5, faults=[{"at": {"step": "changelog_write", "batch": 2, "partition": 1},
                                               "kind": "zombie_write"}])
    result = run_scenario(sc)
    zombie = [p for p in result.storage.list("state/0/1/") if p.startswith("state/0/1/3_") and "a0" in p]
    assert zombie, "the zombie's file must have landed beside the retry's"
    outcome = result.outcome()
    assert failures(check_outcome(sc, outcome, result.storage)) == []
    for per_part in outcome.state.values():
        for versions in per_part.values():
            for pairs in versions.values():
                assert ZOMBIE_KEY not in dict(map(tuple, pairs))


def test_engine_config_defaults_match_spark():
    # spark.sql.streaming.minBatchesToRetain = 100; stateStore.minDeltasForSnapshot = 10;
    # stateStore.maintenanceInterval = 60s.
    cfg = EngineConfig()
    assert (cfg.min_batches_to_retain, cfg.min_deltas_for_snapshot, cfg.maintenance_interval_ms) == (100, 10, 60000)


def test_purge_before_any_commit_keeps_every_offset_entry():
    """With retention 1 and two batches in flight, purging before batch 0 commits must not drop offsets/0:
    a restart then re-runs from the first offset entry, and batch 0's input would be lost without it."""
    storage = DurableStorage()
    for b in range(2):
        storage.write(layout.offset_path(b), OffsetEntry(b, (3 * b,), (3 * b + 3,)).encode())
    assert purge_logs(storage, 1) == []
    assert log_batches(storage, layout.OFFSETS) == [0, 1]
