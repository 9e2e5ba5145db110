"""``dedup`` (Spark's plain ``dropDuplicates``) on the two Spark backends, judged by the reference oracles.

Native Spark runs ``dropDuplicates([key])``, or ``withWatermark`` + ``dropDuplicates([key, ts])``
(``spark_impl/native/plan.py``), so its ``StreamingDeduplicateExec`` is compared with the reference's
operator: rows, batches, watermarks and the state read back with the state data source. The PySpark engine
runs the reference's operator in its tasks; it must agree with the reference and the simulator. The
catalogue's plain dedup also runs in ``test_spark_native.py``'s operator test and the engine's matrix.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from streamtest import RunOptions, check, crash, fault
from test_spark_native import assert_oracles_hold, generated, native_dict, native_sink, run

from reference.judge.compare import first_difference
from reference.language.catalogue import scenario_dict
from reference.protocol.run import run_scenario
from reference.language.scenario import Scenario
from sim.backend import SimBackend

pytestmark = pytest.mark.spark

WATERMARKED = {"kind": "dedup", "watermark_delay_ms": 20}


def native_dedup(operator: dict[str, Any], *, faults: list[dict[str, Any]] | None = None, batches: int = 4,
                 disorder_ms: int = 0, sink: str | None = None) -> Scenario:
    """The catalogue's dedup scenario, on a source Spark judges as the reference does (``generated``), with 12
    keys so that every batch can insert one."""
    d = native_dict("dedup", faults=faults, batches=batches, sink=sink,
                    source=generated(batches, keys=12, disorder_ms=disorder_ms))
    d["query"]["operator"] = operator
    return Scenario.from_dict(d)


def agrees_with_the_reference(scenario: Scenario, outcome: Any) -> None:
    reference = run_scenario(scenario).outcome()
    difference = first_difference(reference, outcome, scenario.sink_mode)
    assert difference is None, f"the reference and spark-native differ at {difference}"


@pytest.mark.parametrize("operator", [{"kind": "dedup"}, WATERMARKED], ids=["plain", "watermarked"])
def test_native_dedup_gives_the_reference_s_rows_state_and_watermarks(spark, tmp_path, operator):
    """Rows reach the state partitions in file order, so Spark keeps the same first row of a key as the
    reference; a disorder of 15 ms under a 20 ms delay makes no row late, and the watermarked form evicts."""
    scenario = native_dedup(operator, disorder_ms=15 if "watermark_delay_ms" in operator else 0)
    outcome = run(scenario, tmp_path)
    assert outcome.error is None, outcome.error
    assert_oracles_hold(scenario, outcome)
    agrees_with_the_reference(scenario, outcome)
    emitted = [row[0] for rows in native_sink(outcome).values() for row in rows]
    state = outcome.state["0"]
    last = str(len(outcome.batches))
    held = sum(len(state[p][last]) for p in state)
    if "watermark_delay_ms" in operator:
        assert [b.watermark_ms for b in outcome.batches][-1] > 0
        assert held < len(emitted), "entries the watermark passed are evicted"
    else:
        assert len(emitted) == len(set(emitted)) == held, "a key is emitted once and held for ever"
    assert sum(1 for rows in native_sink(outcome).values() if rows) >= 3


@pytest.mark.slow
def test_native_dedup_restarts_from_its_checkpoint_without_emitting_a_key_again(spark, tmp_path):
    """Micro-batch mode's counterpart of StreamRealTimeModeSuite's "dedup recovers from a task failure via
    checkpoint restart" (there one failed task fails the query, since real-time mode does not retry tasks, and
    the restart keeps batch 0's keys): here Spark retries the task that fails in batch 1, and the driver
    crashes after ``offsets/2`` and between batches 2 and 3; each restart loads the dedup state from the
    checkpoint, so no key is emitted twice (the sink is exactly-once)."""
    scenario = native_dedup({"kind": "dedup"}, faults=[
        fault("task_failure", "task_apply", 1, partition=0),
        crash("offset_log_write", 2),
        crash("plan", 3, "before"),
    ])
    outcome = run(scenario, tmp_path)
    assert_oracles_hold(scenario, outcome)
    agrees_with_the_reference(scenario, outcome)
    assert [r.to_dict() for r in outcome.recoveries] == [{"restart": 1, "resumed_at": 2, "rerun_batches": [2]},
                                                         {"restart": 2, "resumed_at": 3, "rerun_batches": []}]
    emitted = [row[0] for rows in native_sink(outcome).values() for row in rows]
    assert emitted and len(emitted) == len(set(emitted))


@pytest.mark.slow
@pytest.mark.parametrize("operator, mode, faults", [
    ({"kind": "dedup"}, "pipelining", [crash("offset_log_write", 2)]),
    ({"kind": "dedup"}, "async_state", [fault("task_failure", "state_commit", 1, "after", partition=0)]),
    (WATERMARKED, "sync", [fault("executor_loss", "task_apply", 2, partition=1)]),
    (WATERMARKED, "delta_provider", [crash("commit_log_write", 1, "before")]),
], ids=["plain-pipelining", "plain-async_state", "watermarked-sync", "watermarked-delta"])
def test_the_engine_runs_dedup_and_agrees_with_the_reference_and_the_simulator(spark, tmp_path: Path, operator,
                                                                                 mode, faults):
    d = scenario_dict("dedup", mode, faults=faults, batches=4)
    d["query"]["operator"] = operator
    scenario = Scenario.from_dict(d)
    result = check(scenario, on="spark", agree_with="reference",
                   options=RunOptions(workdir=str(tmp_path), pace=False))
    assert result.outcome.recoveries or faults[0]["kind"] != "driver_crash"
    difference = first_difference(SimBackend().run(scenario).outcome, result.outcome, scenario.sink_mode)
    assert difference is None, f"the simulator and the engine differ at {difference}"
