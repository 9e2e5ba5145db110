"""Effects in the right direction on small simulations (directions and bounds, not figures).

- pipelining with stragglers raises throughput over sequential micro-batches;
- asynchronous progress tracking lowers end-to-end latency by about the time the log writes took;
- asynchronous state checkpointing makes a restart re-run two batches where sync re-runs one.
"""

from __future__ import annotations

import json
import statistics
from typing import Any

from reference.language.scenario import Scenario
from sim import simulate
from sim.cost_model import PROFILE_DIR


def cluster_profile(**changes: Any) -> dict[str, Any]:
    """The shipped cluster profile without jitter, with ``changes`` applied."""
    with open(f"{PROFILE_DIR}/lightspeed_cluster.json") as fh:
        raw = json.load(fh)
    raw["storage"]["jitter_sigma"] = 0.0
    raw["straggler_probability"] = 0.0
    raw.update(changes)
    return raw


def aggregate_scenario(seed: int = 3, faults: list[Any] | None = None, **engine: Any) -> Scenario:
    return Scenario.from_dict({
        "name": "effects-aggregate", "seed": seed,
        "source": {"kind": "generated", "partitions": 2, "keys": 50, "records_per_partition_per_batch": 200,
                   "batches": 5, "event_time": {"start_ms": 0, "step_ms": 0}},
        "query": {"operator": {"kind": "aggregate", "agg": "count"}, "state_partitions": 8},
        "sink": {"mode": "exactly_once"}, "engine": engine, "faults": faults or []})


def test_pipelining_with_stragglers_raises_throughput() -> None:
    profile = cluster_profile(straggler_probability=0.25, straggler_slowdown=6.0, executors=2)
    for seed in range(3):
        records = 5 * 2 * 200
        sequential = simulate(aggregate_scenario(seed, pipelining=False), profile)
        pipelined = simulate(aggregate_scenario(seed, pipelining=True), profile)
        assert sequential.outcome().error is None and pipelined.outcome().error is None
        throughput = records / sequential.end_ms, records / pipelined.end_ms
        assert throughput[1] > throughput[0] * 1.02, (seed, throughput)


def stateless_scenario(progress_mode: str) -> Scenario:
    return Scenario.from_dict({
        "name": "effects-map", "seed": 1,
        "source": {"kind": "generated", "partitions": 2, "keys": 50, "records_per_partition_per_batch": 100,
                   "batches": 5, "event_time": {"start_ms": 0, "step_ms": 1}},
        "query": {"operator": {"kind": "map"}, "state_partitions": 2},
        "sink": {"mode": "at_least_once"},
        "engine": {"progress": {"mode": progress_mode, "checkpoint_interval_ms": 100_000}}})


def test_async_progress_cuts_latency_by_about_the_log_writes() -> None:
    profile = cluster_profile()
    sync = simulate(stateless_scenario("sync"), profile).outcome()
    asynchronous = simulate(stateless_scenario("async"), profile).outcome()
    log_writes_ms = statistics.mean(p.duration_ms["walCommit"] + p.duration_ms["commitOffsets"]
                                    for p in sync.progress)
    assert log_writes_ms > 0
    assert all(p.duration_ms["walCommit"] == 0 for p in asynchronous.progress)
    sync_p50, async_p50 = sync.latency().p50, asynchronous.latency().p50
    assert sync_p50 is not None and async_p50 is not None
    saved_ms = sync_p50 - async_p50
    # a record waits for the batch before its own and its own batch, both shorter by the log writes
    assert 0.5 * log_writes_ms <= saved_ms <= 2.5 * log_writes_ms, (saved_ms, log_writes_ms)


def test_async_state_checkpointing_replays_two_batches_after_a_crash() -> None:
    profile = cluster_profile(state_commit_base_ms=400.0)
    crash = [{"at": {"step": "commit_log_write", "batch": 2}, "kind": "driver_crash"}]
    sync = simulate(aggregate_scenario(faults=crash, state_checkpoint="sync"), profile).outcome()
    asynchronous = simulate(aggregate_scenario(faults=crash, state_checkpoint="async"), profile).outcome()
    assert sync.recoveries[0].rerun_batches == (2,)
    assert asynchronous.recoveries[0].rerun_batches == (2, 3)
    assert sync.error is None and asynchronous.error is None
    assert sync.state == asynchronous.state or sync.sink == asynchronous.sink
