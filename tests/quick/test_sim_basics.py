"""Determinism, profiles, trace, outcome shape and the backend interface of the simulator (spec sections 4, 5)."""

from __future__ import annotations

import json
import os

import pytest

from reference.protocol.backend import BackendError, OptionRefused, RunOptions
from reference.judge.oracles import check_outcome, determinism, failures
from reference.protocol.outcome import DURATION_KEYS, Outcome
from reference.language.scenario import Scenario
from reference.protocol.storage import DurableStorage
from sim import ProfileError, load_profile, simulate
from sim.backend import SimBackend
from sim.cost_model import PROFILE_DIR, profile_from_dict
from sim.simulation import SimModeError
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


def test_same_seed_gives_identical_outcome_and_trace() -> None:
    scenario = Scenario.from_dict(SCENARIO)
    first, second = simulate(scenario, "lightspeed_cluster"), simulate(scenario, "lightspeed_cluster")
    assert determinism(first.outcome().to_json(), second.outcome().to_json()).ok
    assert first.trace.dumps() == second.trace.dumps()
    assert first.outcome().recoveries, "the timed crash must have fired"
    other = simulate(scenario.with_changes(seed=12), "lightspeed_cluster")
    assert other.trace.dumps() != first.trace.dumps()


def test_outcome_has_timing_fields_and_passes_oracles(tmp_path: os.PathLike) -> None:
    scenario = Scenario.from_dict(SCENARIO)
    trace_path = os.path.join(str(tmp_path), "trace.jsonl")
    sim = simulate(scenario, "local_spark")
    sim.trace.save(trace_path)
    outcome = sim.outcome()
    assert isinstance(outcome, Outcome) and outcome.backend == "sim"
    assert outcome.timing is not None and outcome.timing.wall_s is None, "a simulated run has no wall time"
    latency = outcome.timing.latency_ms
    assert latency.count > 0 and latency.p50 is not None and latency.p99 is not None and latency.max is not None
    assert latency.p50 <= latency.p99 <= latency.max
    assert outcome.details["sim"] == {"mode": "data", "profile": "local_spark",
                                      "end_time_ms": round(sim.end_ms, 3), "trace_events": sim.trace.count}
    for progress in outcome.progress:
        durations = progress.duration_ms
        assert set(durations) == set(DURATION_KEYS)
        assert durations["triggerExecution"] >= durations["walCommit"] + durations["addBatch"] > 0
        assert progress.timestamp_ms is not None
    events = load_trace(trace_path)
    assert events and all(a.time_ms <= b.time_ms for a, b in zip(events, events[1:]))
    assert {e.component for e in events} >= {"driver", "supervisor", "faults"}
    assert not failures(check_outcome(scenario, outcome, sim.storage))
    assert Outcome.from_json(outcome.to_json()) == outcome, "the outcome round-trips through its JSON"


def test_backend_returns_the_outcome_and_the_checkpoint_for_the_file_oracles() -> None:
    scenario = Scenario.from_dict(SCENARIO)
    backend = SimBackend()
    assert backend.unavailable() is None
    result = backend.run(scenario, RunOptions(profile="local_spark"))
    assert isinstance(result.checkpoint, DurableStorage)
    assert result.outcome == simulate(scenario, "local_spark").outcome(), "a run of the backend is a simulation"
    assert set(result.outcome.checkpoint_files) <= set(result.checkpoint.list())
    verdicts = {v.check: v for v in check_outcome(scenario, result.outcome, result.checkpoint)}
    for check in ("reconstruction", "lineage", "retention"):
        assert verdicts[check].status == "pass", verdicts[check].describe()
    assert {v.status for v in check_outcome(scenario, result.outcome)} >= {"n/a"}, "without it they cannot run"
    volume = backend.run(scenario, RunOptions(sim_mode="volume"))
    assert volume.checkpoint is None and volume.outcome.details["sim"]["mode"] == "volume"


def test_backend_refuses_bad_options_by_name() -> None:
    scenario = Scenario.from_dict(SCENARIO)
    backend = SimBackend()
    with pytest.raises(OptionRefused, match="--master"):
        backend.run(scenario, RunOptions(master="local[2]"))
    with pytest.raises(SimModeError, match="sim_mode 'fast'") as mode:
        backend.run(scenario, RunOptions(sim_mode="fast"))
    with pytest.raises(ProfileError, match="parameter executors: missing") as profile:
        backend.run(scenario, RunOptions(profile={"name": "typo", "storage": "s3"}))
    with pytest.raises(ProfileError, match="no such profile file"):
        backend.run(scenario, RunOptions(profile="no_such_profile"))
    with pytest.raises(ProfileError, match="expected a shipped profile name"):
        backend.run(scenario, RunOptions(profile=3))
    for error in (mode.value, profile.value):
        assert isinstance(error, BackendError) and isinstance(error, ValueError)


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
    with pytest.raises(ProfileError, match="cannot be read"):
        load_profile(str(tmp_path))   # a directory
    with open(path, "wb") as fh:
        fh.write(b"\xff\xfe{")
    with pytest.raises(ProfileError, match="bad.json: not a UTF-8"):
        load_profile(path)
