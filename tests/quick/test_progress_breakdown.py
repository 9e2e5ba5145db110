"""Where a batch's time goes: ``durationMs`` and ``stateOperators`` as Spark reports them, on the timed backends.

- Spark times an inline log purge inside ``walCommit`` (``MicroBatchExecution.constructNextBatch`` runs
  the offset write and the purge in one ``reportTimeTaken("walCommit")`` block); an async purge is only
  submitted there. Our ``purge`` key is the purge's part of walCommit.
- ``commitTimeMs`` and ``memoryUsedBytes`` add up over a batch's tasks: each task adds its store metrics
  to one SQLMetric and the driver merges by summing (``StateStoreWriter``, ``SQLMetric``). A commit in
  the background (async state checkpointing) is not the task's.

The simulator's expectations are arithmetic on an exact profile (no jitter); the engine's
``measured_progress`` is fed wall-clock marks chosen for the arithmetic.
"""

from __future__ import annotations

from typing import Any

import pytest

from experiments.outcome_metrics import BREAKDOWN_PARTS, duration_breakdown
from reference.protocol.outcome import ProgressEvent
from reference.language.scenario import Scenario
from sim import simulate
from spark_impl.engine.progress import measured_progress
from tests.quick.test_sim_offset_management import DELETE_MS, WRITE_MS, exact_profile, stateless

COMMIT_BASE_MS = 5.0


def test_an_inline_purge_is_inside_wal_commit_and_named_on_its_own() -> None:
    # Sync progress, inline purge, retention 1, batches 3000 ms apart: round b's threshold is b - 1, so
    # rounds 0 and 1 delete nothing and every later round deletes one entry of each log (2 * DELETE_MS).
    # The offset write is WRITE_MS plus 256 bytes at 1000 MB/s; the tasks start after the purge.
    sim = simulate(stateless(4, "sync", "inline", interval_ms=3000), exact_profile())
    durations = [p.duration_ms for p in sim.outcome().progress]
    assert [d["purge"] for d in durations] == pytest.approx([0.0, 0.0, 2 * DELETE_MS, 2 * DELETE_MS], abs=1e-3)
    for d in durations:
        assert d["walCommit"] == pytest.approx(WRITE_MS + d["purge"], abs=1e-2)
        assert d["addBatch"] < DELETE_MS, "the purge is walCommit's, not addBatch's"
        assert d["triggerExecution"] >= d["walCommit"] + d["addBatch"]


def test_an_async_purge_costs_the_batch_nothing() -> None:
    sim = simulate(stateless(4, "sync", "async", interval_ms=3000), exact_profile())
    durations = [p.duration_ms for p in sim.outcome().progress]
    assert [d["purge"] for d in durations] == [0.0] * 4
    assert all(d["walCommit"] == pytest.approx(WRITE_MS, abs=1e-2) for d in durations)


def counting(state_checkpoint: str) -> Scenario:
    return Scenario.from_dict({
        "name": "commit-time", "seed": 5,
        "source": {"kind": "generated", "partitions": 1, "keys": 4, "records_per_partition_per_batch": 8,
                   "batches": 3, "event_time": {"start_ms": 0, "step_ms": 0}},
        "query": {"operator": {"kind": "aggregate", "agg": "count"}, "state_partitions": 2},
        "sink": {"mode": "at_least_once"},
        "engine": {"trigger_interval_ms": 1000, "state_checkpoint": state_checkpoint,
                   "progress": {"mode": "sync", "checkpoint_interval_ms": 1000},
                   "log_purge": {"mode": "inline", "min_batches_to_retain": 10}}})


def test_commit_time_is_the_sum_over_the_batch_tasks() -> None:
    # Two state partitions, each task pays its changelog write (WRITE_MS plus a few hundred bytes at
    # 1000 MB/s) and its commit (COMMIT_BASE_MS, per-key costs 0): 2 * (1 + 5) = 12 ms a batch. The
    # slowest task alone would be 6 ms.
    sim = simulate(counting("sync"), exact_profile(state_commit_base_ms=COMMIT_BASE_MS))
    for progress in sim.outcome().progress:
        (op,) = progress.state_operators
        assert op.commit_time_ms == pytest.approx(2 * (WRITE_MS + COMMIT_BASE_MS), abs=1e-2)


def test_an_async_state_commit_is_not_the_tasks() -> None:
    sim = simulate(counting("async"), exact_profile(state_commit_base_ms=COMMIT_BASE_MS))
    assert [op.commit_time_ms for p in sim.outcome().progress for op in p.state_operators] == [0.0] * 3


def result(commit_ms: float, memory: int) -> dict[str, Any]:
    return {"changes": {"agg": [1, 0, 3]}, "commit_ms": {"agg": commit_ms}, "memory_bytes": {"agg": memory}}


def test_engine_progress_from_its_marks() -> None:
    # Marks in seconds: planned at 10.000, plan done 10.002, offset write 10.002-10.012, inline purge
    # 10.012-10.112, job 10.115-10.415, commit log 10.420-10.425, last step 10.430.
    marks = {"plan": 10.000, "plan:end": 10.002, "offset_log_write:start": 10.002, "offset_log_write:end": 10.012,
             "purge:start": 10.012, "purge:end": 10.112, "job_start": 10.115, "job_end": 10.415,
             "commit_log_write:start": 10.420, "commit_log_write:end": 10.425, "source_commit": 10.430}
    event = measured_progress(3, 40, marks, [result(7.5, 1000), result(2.5, 3000)], ["agg"])
    d = event.duration_ms
    assert d["latestOffset"] == pytest.approx(2.0, abs=1e-6)
    assert d["purge"] == pytest.approx(100.0, abs=1e-6)
    assert d["walCommit"] == pytest.approx(110.0, abs=1e-6)
    assert d["addBatch"] == pytest.approx(300.0, abs=1e-6)
    assert d["commitOffsets"] == pytest.approx(5.0, abs=1e-6)
    assert d["triggerExecution"] == pytest.approx(430.0, abs=1e-6)
    (op,) = event.state_operators
    assert op.commit_time_ms == pytest.approx(10.0) and op.memory_used_bytes == 4000
    assert (op.num_rows_total, op.num_rows_updated, op.num_rows_removed) == (6, 2, 0)


def test_engine_steps_in_the_background_count_nothing() -> None:
    # Async progress and async purge: the writes and the purge ran on their lanes, so they left no span.
    marks = {"plan": 1.0, "plan:end": 1.001, "job_start": 1.001, "job_end": 1.201, "source_commit": 1.202}
    d = measured_progress(0, 1, marks, [], []).duration_ms
    assert (d["walCommit"], d["purge"], d["commitOffsets"]) == (0.0, 0.0, 0.0)
    assert d["addBatch"] == pytest.approx(200.0, abs=1e-6)


def test_the_breakdown_splits_a_batch_into_disjoint_parts() -> None:
    # Warm-up batches 0 and 1 are skipped; batches 2 and 3 give each part's mean.
    def event(b: int, wal: float, purge: float, add: float, commit: float, total: float) -> ProgressEvent:
        return ProgressEvent(b, duration_ms={"latestOffset": 3.0, "queryPlanning": 1.0, "walCommit": wal,
                                             "purge": purge, "addBatch": add, "commitOffsets": commit,
                                             "triggerExecution": total})
    progress = [event(0, 999, 0, 999, 999, 9999), event(1, 999, 0, 999, 999, 9999),
                event(2, 110.0, 100.0, 300.0, 5.0, 430.0), event(3, 10.0, 0.0, 100.0, 5.0, 125.0)]
    assert duration_breakdown(progress) == {"planning": 4.0, "offsetWrite": 10.0, "purge": 50.0,
                                            "addBatch": 200.0, "commitOffsets": 5.0, "other": 8.5}
    assert set(BREAKDOWN_PARTS) == set(duration_breakdown(progress) or {})


def test_under_async_progress_a_batch_ends_when_its_output_is_committed() -> None:
    # The commit log write and the source commit are queued (AsyncProgressTrackingMicroBatchExecution):
    # triggerExecution runs from the plan to the sink's commit, 10.000 to 10.300, not to 10.900.
    marks = {"plan": 10.0, "plan:end": 10.001, "job_start": 10.001, "job_end": 10.25,
             "sink_commit:start": 10.25, "sink_commit:end": 10.3, "source_commit": 10.9}
    assert measured_progress(0, 1, marks, [], [], async_progress=True).duration_ms["triggerExecution"] == \
        pytest.approx(300.0, abs=1e-6)
    assert measured_progress(0, 1, marks, [], []).duration_ms["triggerExecution"] == pytest.approx(900.0, abs=1e-6)
    # on the simulator, with both features on, no part of a batch waits for the queued log writes
    slow_writes = exact_profile(storage={**exact_profile()["storage"], "small_write_ms": 200.0})
    sim = simulate(stateless(6, "async", "async", interval_ms=300), slow_writes)
    for progress in sim.outcome().progress:
        d = progress.duration_ms
        assert d["walCommit"] == d["commitOffsets"] == 0.0
        assert d["triggerExecution"] == pytest.approx(d["latestOffset"] + d["queryPlanning"] + d["addBatch"],
                                                      abs=1e-2)
