"""The engine cuts batches by Spark's trigger (``engine.batch_cuts: trigger``) on the wall clock.

The input arrives in four bursts, 1.5 s apart, and the fixed cut (``batch_ms`` of a minute) would make one
batch; only cutting by the trigger makes several, so the faults at batch 1 and 2 fire only if the engine
planned open-ended. Which burst lands in which batch depends on the machine's speed, so nothing here
asserts a boundary: the engine records the boundaries it chose, every oracle judges them, and the
reference, replaying them, must reach the same state and sink.
"""

from __future__ import annotations

from typing import Any

import pytest

from reference.protocol.backend import RunOptions, RunResult
from reference.judge.compare import first_difference
from reference.protocol.logs import OffsetEntry, log_batches
from reference.protocol import layout
from reference.judge.oracles import check_outcome, failures
from reference.protocol.run import recorded_cuts_of, run_scenario
from reference.language.scenario import Scenario

pytestmark = pytest.mark.spark

BURSTS_MS = (0, 1500, 3000, 4500)
PER_BURST = 3      # records per burst and source partition


def _records() -> list[list[Any]]:
    return [[p, f"k{(i + p) % 4}", i + 1, at, at] for p in range(2) for n, at in enumerate(BURSTS_MS)
            for i in range(n * PER_BURST, (n + 1) * PER_BURST)]


def _scenario(name: str, operator: dict[str, Any], sink: str, engine: dict[str, Any], faults: list[dict[str, Any]],
              batch_ms: int = 60_000) -> Scenario:
    return Scenario.from_dict({"name": name, "seed": 5,
                               "source": {"kind": "explicit", "batch_ms": batch_ms, "records": _records()},
                               "query": {"operator": operator, "state_partitions": 2},
                               "sink": {"mode": sink}, "engine": engine, "faults": faults})


def _run(scenario: Scenario, workdir: Any) -> RunResult:
    from spark_impl.engine.backend import SparkEngineBackend
    return SparkEngineBackend().run(scenario, RunOptions(workdir=str(workdir), pace=True))


def _judge(scenario: Scenario, result: RunResult) -> None:
    outcome = result.outcome
    assert outcome.error is None, outcome.error
    assert outcome.faults_not_fired == (), "every fault fired: the trigger cut more than one batch"
    bad = failures(check_outcome(scenario, outcome, result.checkpoint))
    assert not bad, "\n".join(v.describe() for v in bad)
    for batch in outcome.batches:
        assert batch.start_offsets != batch.end_offsets, f"batch {batch.id} is empty: no new input, no batch"


def _replayed_by_the_reference(scenario: Scenario, result: RunResult) -> None:
    """The reference, given the engine's boundaries and the same faults, holds the same batches, state and
    sink; without the faults, the same state (a failure-free run over those boundaries)."""
    outcome = result.outcome
    cuts = recorded_cuts_of(outcome)
    # A batch a restart dropped (async progress folds it into the re-run) is not among the outcome's batches,
    # but its output reached the at-least-once sink: its cut is the one its first delivery carried.
    for b, _start, end, _seen_ms in outcome.details["spark"]["sink_deliveries"]:
        cuts.setdefault(b, tuple(end))
    same_faults = run_scenario(scenario, recorded_cuts=cuts).outcome()
    difference = first_difference(same_faults, outcome, scenario.sink_mode)
    assert difference is None, f"reference and spark differ at {difference}"
    assert same_faults.state == outcome.state
    failure_free = Scenario.from_dict({**scenario.to_dict(), "faults": []})
    assert run_scenario(failure_free, recorded_cuts=cuts).outcome().state == outcome.state


@pytest.mark.parametrize("interval_ms,pipelining", [(0, False), (1000, True)])
def test_sync_progress_re_runs_exactly_the_offsets_a_trigger_cut_logged(spark, tmp_path, interval_ms, pipelining):
    crash = [{"kind": "driver_crash", "at": {"step": "offset_log_write", "batch": 1, "when": "after"}}]
    scenario = _scenario(f"trigger-sync-{interval_ms}", {"kind": "aggregate", "agg": "sum"}, "exactly_once",
                         {"trigger_interval_ms": interval_ms, "pipelining": pipelining}, crash)
    result = _run(scenario, tmp_path)
    _judge(scenario, result)
    outcome = result.outcome
    [recovery] = outcome.recoveries
    assert 1 in recovery.rerun_batches
    by_id = {b.id: b for b in outcome.batches}
    for b in recovery.rerun_batches:
        logged = OffsetEntry.read(result.checkpoint, b)
        assert (logged.start, logged.end) == (by_id[b].start_offsets, by_id[b].end_offsets), \
            f"batch {b} re-ran with other offsets than offsets/{b} holds"
        assert by_id[b].attempts == 2
    _replayed_by_the_reference(scenario, result)


@pytest.mark.slow
def test_a_killed_driver_process_re_runs_the_trigger_cut_it_logged(tmp_path):
    """``--crash process``: the driver is SIGKILLed after writing ``offsets/1``; a new driver process, with the
    run's time 0 from the journal, re-runs batch 1 with the logged offsets and cuts the rest by its trigger."""
    crash = [{"kind": "driver_crash", "at": {"step": "offset_log_write", "batch": 1, "when": "after"}}]
    scenario = _scenario("trigger-process", {"kind": "aggregate", "agg": "count"}, "exactly_once", {}, crash)
    from spark_impl.engine.backend import SparkEngineBackend
    result = SparkEngineBackend().run(scenario, RunOptions(workdir=str(tmp_path), pace=True, crash="process"))
    _judge(scenario, result)
    outcome = result.outcome
    assert [p["ended"] for p in outcome.details["spark"]["driver_processes"]] == ["killed (SIGKILL)", "finished"]
    [recovery] = outcome.recoveries
    assert recovery.rerun_batches == (1,)
    logged = OffsetEntry.read(result.checkpoint, 1)
    batch_1 = next(b for b in outcome.batches if b.id == 1)
    assert (logged.start, logged.end) == (batch_1.start_offsets, batch_1.end_offsets)
    _replayed_by_the_reference(scenario, result)


def test_async_progress_folds_the_unpersisted_batches_a_trigger_cut(spark, tmp_path):
    """Entries persist every 200 ms of the batch clock (batches 0 and 2); a crash before ``commits/2``
    re-runs batch 2 from the end of ``offsets/0``: batch 1, never logged, is folded into it."""
    crash = [{"kind": "driver_crash", "at": {"step": "commit_log_write", "batch": 2, "when": "before"}}]
    scenario = _scenario("trigger-async", {"kind": "map"}, "at_least_once",
                         {"progress": {"mode": "async", "checkpoint_interval_ms": 200}}, crash)
    result = _run(scenario, tmp_path)
    _judge(scenario, result)
    outcome = result.outcome
    assert log_batches(result.checkpoint, layout.OFFSETS)[:2] == [0, 2], "batch 1 was never logged"
    [recovery] = outcome.recoveries
    assert recovery.rerun_batches == (1, 2), "the restart dropped batch 1 and re-ran batch 2"
    by_id = {b.id: b for b in outcome.batches}
    assert 1 not in by_id
    assert by_id[2].start_offsets == OffsetEntry.read(result.checkpoint, 0).end, "batch 1 folded into batch 2"
    assert by_id[2].end_offsets == OffsetEntry.read(result.checkpoint, 2).end
    _replayed_by_the_reference(scenario, result)


def test_fixed_cuts_stay_deterministic_and_agree_with_the_reference_and_the_simulator(spark, tmp_path):
    """``batch_cuts: fixed`` cuts every ``batch_ms`` of arrival time on a paced run too: the differential
    tests' choice. Bursts at 0, 1.5, 3 and 4.5 s with 1 s cuts: batches 0, 1, 2 (empty), 3, 4."""
    scenario = _scenario("fixed-cuts", {"kind": "aggregate", "agg": "count"}, "exactly_once",
                         {"batch_cuts": "fixed"}, [], batch_ms=1000)
    result = _run(scenario, tmp_path)
    outcome = result.outcome
    assert outcome.error is None, outcome.error
    assert not failures(check_outcome(scenario, outcome, result.checkpoint))
    assert [b.end_offsets for b in outcome.batches] == [(3, 3), (6, 6), (6, 6), (9, 9), (12, 12)]
    assert first_difference(run_scenario(scenario).outcome(), outcome, scenario.sink_mode) is None
    from sim.backend import SimBackend
    assert first_difference(SimBackend().run(scenario).outcome, outcome, scenario.sink_mode) is None


def test_only_a_paced_run_of_arrival_timed_sources_with_one_job_per_batch_cuts_by_the_trigger():
    from types import SimpleNamespace

    from spark_impl.engine.incarnation import cuts_by_trigger
    explicit = _scenario("rule", {"kind": "map"}, "at_least_once", {}, [])
    fixed = _scenario("rule", {"kind": "map"}, "at_least_once", {"batch_cuts": "fixed"}, [])
    generated = Scenario.from_dict({"name": "rule", "seed": 1,
                                    "source": {"kind": "generated", "partitions": 2, "keys": 4,
                                               "records_per_partition_per_batch": 3, "batches": 2},
                                    "query": {"operator": {"kind": "map"}, "state_partitions": 2}})
    paced, unpaced, grouped = (SimpleNamespace(pace=True, group=1), SimpleNamespace(pace=False, group=1),
                               SimpleNamespace(pace=True, group=3))
    assert cuts_by_trigger(explicit, paced)
    assert not cuts_by_trigger(explicit, unpaced)
    assert not cuts_by_trigger(explicit, grouped)
    assert not cuts_by_trigger(fixed, paced)
    assert not cuts_by_trigger(generated, paced)
