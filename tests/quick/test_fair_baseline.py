"""A fair native baseline: Spark's own Structured Streaming reads all available input under its default trigger
in latency runs, and a run that did not keep up is reported as backlogged, never as a latency (no Spark)."""

from __future__ import annotations

import dataclasses
import json

from experiments.outcome_metrics import latency_metrics
from experiments.offset_management.definition import EXPERIMENT as OFFSET_MANAGEMENT
from experiments.experiment import RunContext
from reference.protocol.outcome import Timing
from reference.protocol.run import run_scenario
from reference.language.scenario import Scenario
from reference.protocol.timing import LatencySummary, Throughput, describe_reported, reported_latency
from spark_impl.engine.speed import CONFIGS, p50_ratio, running_count
from spark_impl.native.plan import InputFiles, batch_file, stream_settings
from spark_impl.native.spark_checkpoint import SparkCheckpoint

LATENCY = LatencySummary(400, 900.0, 1500.0, 2000.0, 2100.0)
BEHIND = Throughput(400, 200.0, 120.0, 400.0, False)      # processed 60% of the input rate
KEPT_UP = Throughput(400, 200.0, 199.0, 1.0, True)


def test_latency_runs_of_the_native_adapter_read_all_available_input_under_the_default_trigger():
    scenario = running_count("native", 200, 2, CONFIGS["baseline"], batch_ms=500)
    realtime = stream_settings(scenario, realtime=True)
    assert "maxFilesPerTrigger" not in realtime.source_options and realtime.source_options == {}
    assert realtime.trigger is None   # Spark's default trigger: the next batch as soon as the previous ends


def test_a_named_trigger_interval_is_kept_and_untimed_runs_keep_one_planned_batch_per_trigger():
    raw = json.loads(running_count("native", 200, 2, CONFIGS["baseline"]).to_json())
    raw["engine"]["trigger_interval_ms"] = 250
    assert stream_settings(Scenario.from_dict(raw), realtime=True).trigger == {"processingTime": "250 milliseconds"}
    untimed = stream_settings(Scenario.from_dict(raw), realtime=False)
    assert untimed.source_options == {"maxFilesPerTrigger": "1"} and untimed.trigger == {"availableNow": True}


def test_a_spark_batch_that_read_several_planned_files_ends_at_the_last_one(tmp_path):
    scenario = running_count("native", 200, 2, CONFIGS["baseline"], batch_ms=500)
    files = InputFiles(scenario, str(tmp_path), base_mtime=0.0)
    ckpt = tmp_path / "checkpoint"
    (ckpt / "offsets").mkdir(parents=True)
    (ckpt / "sources" / "0").mkdir(parents=True)
    # Spark's batch 0 read planned batches 0..2 (three files logged at log offset 0), batch 1 read planned 3
    entries = [{"path": f"file://{batch_file(str(tmp_path), 'main', b)}", "timestamp": b, "batchId": 0}
               for b in (0, 1, 2)]
    (ckpt / "sources" / "0" / "0").write_text("v1\n" + "\n".join(json.dumps(e) for e in entries))
    (ckpt / "sources" / "0" / "1").write_text("v1\n" + json.dumps(
        {"path": f"file://{batch_file(str(tmp_path), 'main', 3)}", "timestamp": 3, "batchId": 1}))
    for b in (0, 1):
        (ckpt / "offsets" / str(b)).write_text(f'v1\n{{"batchWatermarkMs":0}}\n{{"logOffset":{b}}}')
    spark_ckpt = SparkCheckpoint(str(ckpt), files)
    assert spark_ckpt.read_batch(0).files == {"main": 2}
    assert spark_ckpt.end_of(0) == files.ends[2] and spark_ckpt.end_of(1) == files.ends[3]
    restart = spark_ckpt.restart_plan()   # batch 1 logged, not committed: re-run it with its own input
    assert restart.first_batch == 1 and restart.start_offsets == files.ends[2]
    assert restart.fixed_offsets == {1: (files.ends[2], files.ends[3])}


def test_a_run_that_did_not_keep_up_is_reported_as_backlogged_never_as_a_latency():
    reported = reported_latency(LATENCY, BEHIND)
    assert reported["backlogged"] is True and reported["kept_up"] is False
    assert "latency_ms" not in reported and reported["throughput"]["processed_rows_per_s"] == 120.0
    line = describe_reported("native", reported)
    assert "BACKLOGGED" in line and "900" not in line
    kept = reported_latency(LATENCY, KEPT_UP)
    assert kept["backlogged"] is False and kept["latency_ms"]["p50"] == 900.0
    assert "p50 900.0 ms" in describe_reported("engine", kept)
    assert reported_latency(LATENCY, None)["latency_ms"]["p50"] == 900.0   # no rate to judge: as measured


def test_no_ratio_is_taken_against_a_backlogged_run():
    engine = {"backlogged": False, "latency_ms": {"p50": 500.0}}
    assert p50_ratio(engine, {"backlogged": False, "latency_ms": {"p50": 1000.0}}) == 0.5
    assert p50_ratio(engine, reported_latency(LATENCY, BEHIND)) is None


def _outcome(throughput: Throughput | None):
    scenario = Scenario.from_dict(json.loads(running_count("m", 200, 1, {}, stateful=False).to_json()))
    outcome = run_scenario(scenario).outcome()
    return dataclasses.replace(outcome, timing=Timing(LATENCY, 3.0, throughput))


def test_experiment_metrics_of_a_backlogged_run_carry_no_percentiles():
    metrics = latency_metrics(_outcome(BEHIND))
    assert metrics["backlogged"] is True and metrics["latency_p50"] is None and metrics["latency_p99"] is None
    assert metrics["processed_rows_per_s"] == 120.0 and metrics["input_rows_per_s"] == 200.0
    kept = latency_metrics(_outcome(KEPT_UP))
    assert kept["backlogged"] is False and kept["latency_p50"] == 900.0


def test_the_offset_management_report_says_backlogged_for_a_configuration_that_fell_behind():
    def record(config: str, throughput: Throughput) -> dict:
        metrics = {**latency_metrics(_outcome(throughput)), "batch_ms_mean": 100.0}
        return {"point": {"task": "latency", "config": config, "params": {"rate": 1000}, "seed": 1},
                "metrics": metrics}
    records = [record("baseline", KEPT_UP), record("async-purge", BEHIND), record("async-progress", KEPT_UP),
               record("both", KEPT_UP)]
    ctx = RunContext(backend="spark", quick=True)
    summary = OFFSET_MANAGEMENT.summarize(records, ctx)
    entry = summary["rates"]["1000"]
    assert entry["async-purge"]["backlogged"] == 1 and entry["async-purge"]["p50"]["median"] is None
    assert entry["async-purge"]["cut_p50"] is None and entry["async-progress"]["cut_p50"] == 0.0
    lines = OFFSET_MANAGEMENT.report(summary, ctx)
    purge = next(line for line in lines if "async-purge" in line)
    assert "backlogged" in purge
    assert any(line.startswith("BACKLOGGED") for line in lines)
