"""The spark-native backend: Spark's own Structured Streaming, judged by the reference oracles.

Every operator the reference models with Spark's semantics runs on Spark's own
operator and its outcome must pass the oracles; driver crashes, task failures
and damaged checkpoint files restart Spark from its checkpoint and must pass
the oracles that apply. Where Spark's event-time rules differ from the
reference's, a test asserts the exact difference, so it fails if either side
changes. Scenarios use event times after the epoch and disorder no larger than
the watermark delay unless a test is about lateness (see spark_impl.native).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from reference.oracles import FAIL, NA, PASS, check_outcome, failures
from reference.outcome import Outcome, build_outcome
from reference.runner import run_scenario
from reference.scenario import Scenario, ScenarioError
from spark_impl.native import NativeUnsupported, run_native

OPERATORS: dict[str, dict[str, Any]] = {
    "map": {"kind": "map"},
    "aggregate": {"kind": "aggregate", "agg": "count"},
    "window_aggregate": {"kind": "window_aggregate", "agg": "sum", "window_ms": 30, "watermark_delay_ms": 10},
    "dedup_within_watermark": {"kind": "dedup_within_watermark", "watermark_delay_ms": 20},
    "join": {"kind": "join", "time_bound_ms": 20, "watermark_delay_ms": 15},
    "stateful_function": {"kind": "stateful_function", "timeout_ms": 25, "watermark_delay_ms": 10},
}


def generated(batches: int = 3, per_batch: int = 3, keys: int = 4, disorder_ms: int = 0) -> dict[str, Any]:
    return {"kind": "generated", "partitions": 2, "keys": keys, "records_per_partition_per_batch": per_batch,
            "batches": batches, "event_time": {"start_ms": 1000, "step_ms": 10, "max_disorder_ms": disorder_ms}}


def scenario_dict(operator: str, *, faults: list[dict[str, Any]] | None = None, batches: int = 3,
                  provider: str = "changelog", sink: str = "exactly_once", retain: int = 2,
                  source: dict[str, Any] | None = None) -> dict[str, Any]:
    src = source or generated(batches)
    d: dict[str, Any] = {
        "name": f"native-{operator}", "seed": 5,
        "query": {"operator": copy.deepcopy(OPERATORS[operator]), "state_partitions": 2},
        "sink": {"mode": sink},
        "engine": {"state_store": {"provider": provider, "min_deltas_for_snapshot": 2,
                                   "maintenance_interval_ms": 200},
                   "log_purge": {"mode": "inline", "min_batches_to_retain": retain}},
        "faults": faults or []}
    if operator == "join":
        d["sources"] = {"left": src, "right": copy.deepcopy(src)}
    else:
        d["source"] = src
    return d


def make(operator: str, **kw: Any) -> Scenario:
    return Scenario.from_dict(scenario_dict(operator, **kw))


def explicit(operator: str, records: list[list[Any]], **op: Any) -> Scenario:
    d = scenario_dict(operator, source={"kind": "explicit", "batch_ms": 1000, "records": records})
    d["query"]["operator"].update(op)
    return Scenario.from_dict(d)


def statuses(scenario: Scenario, outcome: dict[str, Any]) -> dict[str, str]:
    return {v.check: v.status for v in check_outcome(scenario, outcome)}


def assert_oracles_hold(scenario: Scenario, outcome: dict[str, Any]) -> None:
    bad = failures(check_outcome(scenario, outcome))
    assert not bad, "\n".join(v.describe() for v in bad)
    held = statuses(scenario, outcome)
    for check in ("state_equivalence", "output_semantics", "replay_bound", "no_loss", "retention"):
        assert held[check] == PASS, (check, held)
    # Spark's checkpoint is not in the reference's file formats: the file-reading oracles say so
    assert held["reconstruction"] == NA and held["lineage"] == NA


def fault(kind: str, step: str, batch: int, when: str = "before", **extra: Any) -> dict[str, Any]:
    at = {"step": step, "batch": batch, "when": when}
    at.update({k: extra.pop(k) for k in ("partition", "restart") if k in extra})
    return {"at": at, "kind": kind, **extra}


def reference_sink(scenario: Scenario) -> dict[int, list[Any]]:
    return {e["batch"]: e["rows"] for e in build_outcome(run_scenario(scenario))["sink"]}


def native_sink(outcome: dict[str, Any]) -> dict[int, list[Any]]:
    return {e["batch"]: e["rows"] for e in outcome["sink"]}


# ------------------------------------------------------------- operators


@pytest.mark.spark
@pytest.mark.parametrize("operator", ["map", "aggregate", "window_aggregate", "dedup_within_watermark", "join"])
def test_operator_on_spark_passes_the_oracles(spark, tmp_path, operator):
    scenario = make(operator)
    outcome, storage = run_native(scenario, workdir=str(tmp_path))
    assert storage is None
    assert outcome["backend"] == "spark-native" and outcome["error"] is None, outcome["error"]
    Outcome.from_dict(outcome)  # the shape of SPEC section 4
    assert_oracles_hold(scenario, outcome)
    # the boundaries are Spark's own (read from its offset and file-source logs) and equal the plan
    reference = build_outcome(run_scenario(scenario))
    assert [(b["id"], b["end_offsets"], b["watermark_ms"]) for b in outcome["batches"]] == \
        [(b["id"], b["end_offsets"], b["watermark_ms"]) for b in reference["batches"]]
    assert any(entry["rows"] for entry in outcome["sink"]), "the scenario should produce output"
    if operator != "map":
        assert outcome["state"] and outcome["progress"][0]["stateOperators"]
        assert set(outcome["state"]["0.left" if operator == "join" else "0"]["0"]) == {"2", "3"}


@pytest.mark.spark
@pytest.mark.parametrize("provider", ["snapshot", "delta"])
def test_other_state_store_providers_pass_the_oracles(spark, tmp_path, provider):
    """``snapshot``: RocksDB without changelog checkpointing; ``delta``: the HDFS-backed provider."""
    scenario = make("aggregate", provider=provider)
    outcome, _ = run_native(scenario, workdir=str(tmp_path))
    assert_oracles_hold(scenario, outcome)


SESSIONS = [[0, "a", 1, 1000, 0], [0, "b", 5, 1005, 0], [0, "a", 2, 1040, 1000], [1, "a", 3, 1080, 2000],
            [1, "a", 4, 1120, 3000]]


@pytest.mark.spark
def test_stateful_function_on_apply_in_pandas_with_state_passes_the_oracles(spark, tmp_path):
    """``session_sum`` as applyInPandasWithState with an event-time timeout: key b times out in batch 3."""
    import pandas  # noqa: F401 - dependencies of the project: a missing one must fail here, loudly
    import pyarrow  # noqa: F401
    scenario = explicit("stateful_function", SESSIONS)
    outcome, _ = run_native(scenario, workdir=str(tmp_path))
    assert_oracles_hold(scenario, outcome)
    assert native_sink(outcome)[3] == [["b", [5, 1]]]


def test_stateful_function_without_pandas_is_refused(monkeypatch):
    import spark_impl.native.support as support
    real = support.importlib.util.find_spec
    monkeypatch.setattr(support.importlib.util, "find_spec", lambda name: None if name == "pandas" else real(name))
    with pytest.raises(NativeUnsupported) as caught:
        run_native(explicit("stateful_function", SESSIONS))
    assert caught.value.field == "query.operator.kind"
    assert "stateful_function" in str(caught.value) and "pandas" in str(caught.value)


# ----------------------------------------------------------------- faults


@pytest.mark.spark
@pytest.mark.slow
def test_driver_crashes_and_a_task_failure_restart_from_the_checkpoint(spark, tmp_path):
    """Crashes inside batches 1 and 2 and between 2 and 3, and a failed task in batch 0, all pass the oracles.

    Batch 1 crashes after ``offsets/1`` is written, before its state: Spark re-runs
    it. Batch 2 crashes after its sink commit, before ``commits/2``: Spark re-runs
    it and the exactly-once sink replaces its output with identical rows. The
    crash before batch 3's plan leaves nothing to re-run.
    """
    scenario = make("aggregate", batches=4, faults=[
        fault("driver_crash", "offset_log_write", 1, "after"),
        fault("driver_crash", "sink_commit", 2, "after"),
        fault("driver_crash", "plan", 3),
        fault("task_failure", "task_apply", 0, partition=0),
    ])
    outcome, _ = run_native(scenario, workdir=str(tmp_path))
    assert_oracles_hold(scenario, outcome)
    assert outcome["recoveries"] == [{"restart": 1, "resumed_at": 1, "rerun_batches": [1]},
                                     {"restart": 2, "resumed_at": 2, "rerun_batches": [2]},
                                     {"restart": 3, "resumed_at": 3, "rerun_batches": []}]
    assert [b["attempts"] for b in outcome["batches"]] == [1, 2, 2, 1]
    batch2 = native_sink(outcome)[2]
    entry = next(e for e in outcome["sink"] if e["batch"] == 2)
    assert batch2 and entry["deliveries"] == 2 and len(set(entry["delivery_digests"])) == 1
    fired = outcome["native"]["faults_fired"]
    assert sorted(f["fault"] for f in fired) == [0, 1, 2, 3] and not outcome["native"]["faults_not_fired"]
    task = next(f for f in fired if f["kind"] == "task_failure")
    assert (task["batch"], task["partition"]) == (0, 0)


@pytest.mark.spark
@pytest.mark.slow
def test_window_crash_after_state_commit_keeps_the_watermark(spark, tmp_path):
    """A re-run batch gets its watermark from ``offsets/<b>``, so state and output match the reference."""
    scenario = make("window_aggregate", batches=4, faults=[fault("driver_crash", "state_commit", 2, "after")])
    outcome, _ = run_native(scenario, workdir=str(tmp_path))
    assert_oracles_hold(scenario, outcome)
    assert outcome["recoveries"] == [{"restart": 1, "resumed_at": 2, "rerun_batches": [2]}]
    reference = build_outcome(run_scenario(scenario))
    assert [b["watermark_ms"] for b in outcome["batches"]] == [b["watermark_ms"] for b in reference["batches"]]


@pytest.mark.spark
@pytest.mark.slow
def test_at_least_once_sink_duplicates_only_the_rerun_batch(spark, tmp_path):
    scenario = make("aggregate", sink="at_least_once", faults=[fault("driver_crash", "sink_commit", 1, "after")])
    outcome, _ = run_native(scenario, workdir=str(tmp_path))
    assert_oracles_hold(scenario, outcome)
    once = reference_sink(scenario.with_changes(faults=()))[1]
    assert native_sink(outcome)[1] == sorted(once + once, key=repr)


@pytest.mark.spark
@pytest.mark.slow
def test_deleted_commit_makes_spark_rerun_the_batch(spark, tmp_path):
    scenario = make("aggregate", batches=4, faults=[fault("delete_file", "source_commit", 1, path="commits/1")])
    outcome, _ = run_native(scenario, workdir=str(tmp_path))
    assert_oracles_hold(scenario, outcome)
    assert outcome["recoveries"] == [{"restart": 1, "resumed_at": 1, "rerun_batches": [1]}]


@pytest.mark.spark
@pytest.mark.slow
def test_corrupt_changelog_fails_loudly(spark, tmp_path):
    """A truncated RocksDB changelog stops the restarted query with Spark's error; nothing is silently lost.

    ``min_deltas_for_snapshot`` is above the number of batches, so no snapshot
    exists and the restart must replay ``2.changelog`` to load version 2.
    """
    d = scenario_dict("aggregate", batches=4,
                      faults=[fault("corrupt_file", "source_commit", 1, path="state/0/0/2.changelog")])
    d["engine"]["state_store"]["min_deltas_for_snapshot"] = 10
    scenario = Scenario.from_dict(d)
    outcome, _ = run_native(scenario, workdir=str(tmp_path))
    assert outcome["error"] and "state/0/0/2.changelog" in outcome["error"]
    assert "CANNOT_LOAD_STATE_STORE" in outcome["error"] or "EOFException" in outcome["error"]
    held = statuses(scenario, outcome)
    assert held["no_loss"] == PASS and held["state_equivalence"] == PASS and held["output_semantics"] == PASS
    assert [b["id"] for b in outcome["batches"]] == [0, 1]


# ------------------------------------------------------ Spark's semantics


@pytest.mark.spark
def test_difference_late_rows_are_judged_by_the_previous_batch_watermark(spark, tmp_path):
    """Spark filters late rows with the previous batch's watermark, the reference with the current one.

    Batch 0 sees event time 105, so batch 1 runs with watermark 105. Its row at 55
    is late for the reference (55 < 105) and dropped. Spark (3.4+) filters late
    events with the watermark of the batch before (0), so it aggregates the row
    into window [50, 60), then evicts that window with the eviction watermark 105
    and emits it in the same batch. The state agrees (the window is gone either
    way); only batch 1's output differs, and only that oracle fails.
    """
    records = [[0, "a", 1, 105, 0], [0, "a", 2, 55, 1000], [0, "b", 4, 120, 2000]]
    scenario = explicit("window_aggregate", records, window_ms=10, watermark_delay_ms=0)
    outcome, _ = run_native(scenario, workdir=str(tmp_path))
    assert outcome["error"] is None
    assert reference_sink(scenario)[1] == []
    assert native_sink(outcome)[1] == [["a", [50, 60, 2]]]
    verdicts = {v.check: v for v in check_outcome(scenario, outcome)}
    assert verdicts["output_semantics"].status == FAIL and verdicts["output_semantics"].batch == 1
    assert all(v.status != FAIL for name, v in verdicts.items() if name != "output_semantics")


@pytest.mark.spark
def test_difference_late_means_at_or_before_the_watermark(spark, tmp_path):
    """Spark calls a row late when ``event_time <= watermark``; the reference when ``event_time < watermark``.

    Batch 0 runs with watermark 0: Spark drops ``z`` at event time 0, the
    reference keeps it. Batch 2 runs with watermark 100 (and so did batch 1, the
    watermark Spark uses for late rows): ``c`` at exactly 100 is kept by the
    reference and dropped by Spark. The dedup state is equal in both, since the
    reference's entries for ``z`` and ``c`` expire at once.
    """
    records = [[0, "z", 9, 0, 0], [0, "a", 1, 100, 0], [0, "b", 2, 100, 1000], [0, "c", 3, 100, 2000]]
    scenario = explicit("dedup_within_watermark", records, watermark_delay_ms=0)
    outcome, _ = run_native(scenario, workdir=str(tmp_path))
    reference = reference_sink(scenario)
    native = native_sink(outcome)
    assert reference[0] == [["a", 1], ["z", 9]] and native[0] == [["a", 1]]
    assert reference[1] == native[1] == [["b", 2]]
    assert reference[2] == [["c", 3]] and native[2] == []
    held = statuses(scenario, outcome)
    assert held["state_equivalence"] == PASS and held["output_semantics"] == FAIL


# ------------------------------------------------------- latency (timed)


@pytest.mark.spark
@pytest.mark.slow
def test_realtime_run_reports_end_to_end_latency(spark, tmp_path):
    """Paced input: batch b's file appears when its last record arrives; latency is creation to sink commit."""
    d = scenario_dict("aggregate", source={"kind": "rate", "partitions": 2, "keys": 10, "rows_per_second": 40,
                                           "duration_s": 3, "batch_ms": 1000})
    scenario = Scenario.from_dict(d)
    outcome, _ = run_native(scenario, workdir=str(tmp_path), realtime=True)
    assert_oracles_hold(scenario, outcome)
    latency = outcome["latency_ms"]
    assert latency["count"] == 120 and 0 < latency["p50"] <= latency["p99"] <= latency["max"]
    assert outcome["native"]["batch_duration_ms"]["count"] == 3


# ------------------------------------------------------------- refusals


def _with(d: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    d = copy.deepcopy(d)
    *parents, last = path.split(".")
    node = d
    for name in parents:
        node = node.setdefault(name, {})
    node[last] = value
    return d


UNSUPPORTED = [
    ("chain", _with(scenario_dict("aggregate"), "query.operator",
                    {"kind": "chain", "operators": [OPERATORS["dedup_within_watermark"], OPERATORS["aggregate"]]}),
     "query.operator.kind"),
    ("executor_loss", scenario_dict("aggregate", faults=[fault("executor_loss", "task_apply", 1)]), "faults[0].kind"),
    ("storage_write_error", scenario_dict("aggregate", faults=[fault("storage_write_error", "commit_log_write", 1)]),
     "faults[0].kind"),
    ("storage_latency", scenario_dict("aggregate", faults=[fault("storage_latency", "commit_log_write", 1, ms=50)]),
     "faults[0].kind"),
    ("zombie_write", scenario_dict("aggregate", faults=[fault("zombie_write", "sink_write", 1)]), "faults[0].kind"),
    ("clock_skew", scenario_dict("aggregate", faults=[fault("clock_skew", "plan", 1, ms=50)]), "faults[0].kind"),
    ("time_ms", scenario_dict("aggregate", faults=[{"at": {"time_ms": 500}, "kind": "driver_crash"}]),
     "faults[0].at.time_ms"),
    ("asynchronous progress", _with(_with(scenario_dict("map"), "engine.progress", {"mode": "async"}),
                                    "sink", {"mode": "at_least_once"}), "engine.progress.mode"),
    ("asynchronous state checkpointing", _with(scenario_dict("aggregate"), "engine.state_checkpoint", "async"),
     "engine.state_checkpoint"),
    ("pipelining", _with(scenario_dict("aggregate"), "engine.pipelining", True), "engine.pipelining"),
]


@pytest.mark.parametrize("name,raw,field", UNSUPPORTED, ids=[u[0] for u in UNSUPPORTED])
def test_unsupported_scenarios_are_refused_naming_the_field(name, raw, field):
    scenario = Scenario.from_dict(raw)
    with pytest.raises(NativeUnsupported) as caught:
        run_native(scenario)
    assert isinstance(caught.value, ScenarioError)
    assert caught.value.field == field
    assert name in str(caught.value) and "spark-native" in str(caught.value)
