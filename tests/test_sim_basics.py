"""Determinism, profiles, trace and outcome shape of the simulator (SPEC sections 4 and 5)."""

from __future__ import annotations

import json
import os

import pytest

from reference.oracles import check_outcome, determinism, failures
from reference.outcome import dumps
from reference.scenario import Scenario
from reference.storage import DurableStorage
from sim import ProfileError, load_profile, run_sim, simulate
from sim.cost_model import PROFILE_DIR, profile_from_dict
from sim.trace import load_trace

SCENARIO = {
    "name": "sim-basics", "seed": 11,
    "source": {"kind": "generated", "partitions": 2, "keys": 9, "records_per_partition_per_batch": 6,
               "batches": 4, "event_time": {"start_ms": 0, "step_ms": 7, "max_disorder_ms": 30}},
    "query": {"operator": {"kind": "window_aggregate", "agg": "sum", "window_ms": 40, "watermark_delay_ms": 10},
              "state_partitions": 2},
    "engine": {"state_store": {"min_deltas_for_snapshot": 2, "maintenance_interval_ms": 200},
               "pipelining": True},
    "faults": [{"at": {"step": "changelog_write", "batch": 1, "partition": 0}, "kind": "task_failure"},
               {"at": {"time_ms": 150}, "kind": "driver_crash"},
               {"at": {"time_ms": 20}, "kind": "storage_latency", "ms": 50}],
}


def test_same_seed_gives_identical_outcome_and_trace(tmp_path: object) -> None:
    scenario = Scenario.from_dict(SCENARIO)
    first, second = simulate(scenario, "lightspeed_cluster"), simulate(scenario, "lightspeed_cluster")
    assert determinism(dumps(first.outcome()), dumps(second.outcome())).ok
    assert first.trace.dumps() == second.trace.dumps()
    assert first.outcome()["recoveries"], "the timed crash must have fired"
    other = simulate(scenario.with_changes(seed=12), "lightspeed_cluster")
    assert other.trace.dumps() != first.trace.dumps()


def test_outcome_has_timing_fields_and_passes_oracles(tmp_path: os.PathLike) -> None:
    scenario = Scenario.from_dict(SCENARIO)
    trace_path = os.path.join(str(tmp_path), "trace.jsonl")
    outcome = run_sim(scenario, "local_spark", trace_path)
    assert outcome["backend"] == "sim"
    assert set(outcome["latency_ms"]) >= {"p50", "p90", "p99", "max"}
    assert outcome["latency_ms"]["p50"] <= outcome["latency_ms"]["p99"] <= outcome["latency_ms"]["max"]
    for progress in outcome["progress"]:
        durations = progress["durationMs"]
        assert set(durations) == {"latestOffset", "walCommit", "queryPlanning", "addBatch", "commitOffsets",
                                  "triggerExecution"}
        assert durations["triggerExecution"] >= durations["walCommit"] + durations["addBatch"] > 0
    events = load_trace(trace_path)
    assert events and all(a.time_ms <= b.time_ms for a, b in zip(events, events[1:]))
    assert {e.component for e in events} >= {"driver", "supervisor", "faults"}
    storage = simulate(scenario, "local_spark").service.files
    assert not failures(check_outcome(scenario, outcome, storage))


def test_run_sim_returns_the_checkpoint_for_the_file_oracles() -> None:
    scenario = Scenario.from_dict(SCENARIO)
    outcome, storage = run_sim(scenario, "local_spark", return_storage=True)
    assert isinstance(storage, DurableStorage)
    assert outcome == run_sim(scenario, "local_spark")
    assert set(outcome["checkpoint_files"]) <= set(storage.list())
    verdicts = {v.check: v for v in check_outcome(scenario, outcome, storage)}
    for check in ("reconstruction", "lineage", "retention"):
        assert verdicts[check].status == "pass", verdicts[check].describe()
    assert {v.status for v in check_outcome(scenario, outcome)} >= {"n/a"}, "without it those oracles cannot run"


def test_shipped_profiles_load() -> None:
    cluster = load_profile(os.path.join(PROFILE_DIR, "lightspeed_cluster.json"))
    assert cluster.slots == 28
    assert load_profile("local_spark").slots == 2


@pytest.mark.parametrize("parameter", ["per_record_us", "planning_ms", "storage.rename_ms",
                                       "straggler_probability"])
def test_profile_missing_or_negative_parameter_is_refused_by_name(parameter: str) -> None:
    with open(os.path.join(PROFILE_DIR, "local_spark.json")) as fh:
        raw = json.load(fh)
    holder, name = (raw["storage"], parameter.split(".")[1]) if "." in parameter else (raw, parameter)
    missing = json.loads(json.dumps(raw))
    (missing["storage"] if "." in parameter else missing).pop(name)
    with pytest.raises(ProfileError, match=parameter.replace(".", r"\.")) as info:
        profile_from_dict(missing)
    assert info.value.parameter == parameter and isinstance(info.value, ValueError)
    holder[name] = -1
    with pytest.raises(ValueError, match=f"{parameter.replace('.', '[.]')}.*negative"):
        profile_from_dict(raw)


def test_profile_file_errors_name_the_file(tmp_path: os.PathLike) -> None:
    path = os.path.join(str(tmp_path), "bad.json")
    with open(path, "w") as fh:
        json.dump({"name": "bad"}, fh)
    with pytest.raises(ValueError, match="bad.json"):
        load_profile(path)
