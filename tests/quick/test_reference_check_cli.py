"""``lightspeed check`` convicts wrong outcomes; ``validate`` names what is wrong."""

from __future__ import annotations

import json

import pytest

from experiments.checkpoint_dir import write_checkpoint
from experiments.cli import main
from reference.judge.oracles import check_outcome, failures
from reference.protocol.outcome import Outcome
from reference.protocol.run import run_scenario
from reference.language.scenario import Scenario, ScenarioError
from streamtest import check, crash, make, scenario_dict

CRASH = [crash("state_commit", 2, partition=0)]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A running count whose driver crashes after a state commit of batch 2: its scenario, outcome (as a dict)
    and checkpoint, written out as the command line reads them."""
    scenario = make("aggregate", batches=5, faults=CRASH)
    result = check(scenario, on="reference")
    out = tmp_path_factory.mktemp("run")
    (out / "scenario.json").write_text(scenario.to_json())
    (out / "outcome.json").write_text(result.outcome.to_json())
    write_checkpoint(result.checkpoint, out / "checkpoint")
    return scenario, result.outcome.to_dict(), out


def judge(scenario, outcome_dict):
    return check_outcome(scenario, Outcome.from_dict(outcome_dict))


def test_check_passes_a_correct_outcome_with_its_checkpoint(run, capsys):
    _, _, out = run
    code = main(["check", str(out / "outcome.json"), "--scenario", str(out / "scenario.json"),
                 "--checkpoint", str(out / "checkpoint")])
    assert code == 0, capsys.readouterr().out


def every_state_value(outcome):
    for sid, parts in outcome["state"].items():
        for p, versions in parts.items():
            for v, pairs in versions.items():
                for i in range(len(pairs)):
                    yield sid, p, v, i


def test_changing_any_one_committed_state_value_is_convicted_with_its_location(run):
    scenario, outcome, _ = run
    locations = list(every_state_value(outcome))
    assert len(locations) > 10
    for sid, p, v, i in locations:
        wrong = json.loads(json.dumps(outcome))
        key, value = wrong["state"][sid][p][v][i]
        wrong["state"][sid][p][v][i] = [key, value + 1]
        bad = [x for x in failures(judge(scenario, wrong)) if x.check == "state_equivalence"]
        assert bad, (sid, p, v, key)
        assert (bad[0].operator, bad[0].partition, bad[0].version, bad[0].key) == (sid, int(p), int(v), key)
        assert (bad[0].expected, bad[0].actual) == (value, value + 1)


def test_check_cli_exits_nonzero_and_prints_the_verdict(run, tmp_path, capsys):
    scenario, outcome, out = run
    wrong = json.loads(json.dumps(outcome))
    key, value = wrong["state"]["0"]["1"]["3"][0]
    wrong["state"]["0"]["1"]["3"][0] = [key, value + 7]
    (tmp_path / "wrong.json").write_text(json.dumps(wrong))
    assert main(["check", str(tmp_path / "wrong.json"), "--scenario", str(out / "scenario.json")]) == 1
    printed = capsys.readouterr().out
    assert "[FAIL] state_equivalence (operator 0, partition 1, version 3, batch 2, key " + key in printed


def test_dropped_sink_rows_are_convicted(run):
    scenario, outcome, _ = run
    wrong = json.loads(json.dumps(outcome))
    wrong["sink"][1]["rows"] = wrong["sink"][1]["rows"][1:]
    bad = failures(judge(scenario, wrong))
    assert [x.check for x in bad] == ["output_semantics"] and bad[0].batch == 1


@pytest.mark.parametrize("path,value,field", [
    (("engine", "progress", "mode"), "fast", "engine.progress.mode"),
    (("query", "operator", "kind"), "reduce", "query.operator.kind"),
    (("source", "batches"), -1, "source.batches"),
    (("engine", "pipelinning"), True, "engine.pipelinning"),
    (("engine", "pipeline_depth"), 1, "engine.pipeline_depth"),
    (("engine", "pipeline_depth"), 4, "engine.pipeline_depth"),   # without "pipelining": true
    (("faults",), [{"at": {"step": "nap", "batch": 1}, "kind": "driver_crash"}], "faults[0].at.step"),
    (("faults",), [{"at": {"step": "plan"}, "kind": "driver_crash"}], "faults[0].at.batch"),
    (("faults",), [{"at": {"step": "plan", "batch": 0}, "kind": "task_failure"}], "faults[0].at.step"),
])
def test_validation_names_the_offending_field(path, value, field):
    d = scenario_dict("aggregate")
    target = d
    for name in path[:-1]:
        target = target.setdefault(name, {})
    target[path[-1]] = value
    with pytest.raises(ScenarioError) as err:
        Scenario.from_dict(d)
    assert err.value.field == field


@pytest.mark.parametrize("change,field,reason", [
    ({"progress": {"mode": "async"}}, "engine.progress.mode", "stateful"),
    ({"state_checkpoint": "async", "state_store": {"provider": "delta"}}, "engine.state_checkpoint", "changelog"),
])
def test_combinations_spark_forbids_are_refused_with_the_reason_unless_explored(change, field, reason):
    d = scenario_dict("aggregate", sink="at_least_once")
    d["engine"].update(change)
    with pytest.raises(ScenarioError) as err:
        Scenario.from_dict(d)
    assert err.value.field == field and reason in str(err.value)
    d["explore_unsupported"] = True
    assert Scenario.from_dict(d).unsupported_reasons()


def test_exploring_async_progress_on_a_stateful_query_shows_why_spark_forbids_it():
    d = scenario_dict("aggregate", "async_progress", batches=6, faults=[crash("sink_commit", 3, "before")])
    d["engine"]["progress"]["checkpoint_interval_ms"] = 300
    check(d, on="reference", expect="fail", names="state_equivalence")


def test_validate_cli_reports_a_missing_file_and_bad_json(tmp_path, capsys):
    assert main(["validate", str(tmp_path / "nope.json")]) == 2
    (tmp_path / "bad.json").write_text("{not json")
    assert main(["validate", str(tmp_path / "bad.json")]) == 2
    err = capsys.readouterr().err
    assert "nope.json: no such file, expected a scenario JSON file" in err and "not valid JSON" in err


def test_scenario_round_trips_through_json():
    scenario = make("join", "pipelining", faults=CRASH)
    assert Scenario.from_dict(json.loads(scenario.to_json())) == scenario


def test_checkpoint_of_a_different_scenario_is_refused():
    first = run_scenario(make("aggregate", batches=3))
    other = make("window_aggregate", batches=3)
    result = run_scenario(other, storage=first.storage)
    assert result.error and "different query" in result.error


def test_diff_cli_agrees_between_reference_and_simulator_on_the_example_scenarios(capsys):
    from experiments.demo import SCENARIOS
    for path in sorted(SCENARIOS.glob("*.json")):
        assert main(["diff", str(path), "--backends", "reference,sim"]) == 0, capsys.readouterr().out


def test_first_difference_names_the_path(run):
    from reference.judge.compare import first_difference
    _, outcome, _ = run
    wrong = json.loads(json.dumps(outcome))
    key, value = wrong["state"]["0"]["1"]["3"][0]
    wrong["state"]["0"]["1"]["3"][0] = [key, value + 1]
    assert first_difference(Outcome.from_dict(outcome), Outcome.from_dict(wrong)) == \
        f"state.0.1.3[0][1]: {value} against {value + 1}"


def test_outcome_round_trips_through_the_outcome_type(run):
    _, outcome, _ = run
    assert Outcome.from_dict(outcome).to_dict() == outcome


def test_check_refuses_a_malformed_outcome_naming_the_field(run, tmp_path, capsys):
    _, outcome, out = run
    wrong = json.loads(json.dumps(outcome))
    wrong["batches"][2]["end_offsets"] = ["twelve"]
    (tmp_path / "bad.json").write_text(json.dumps(wrong))
    assert main(["check", str(tmp_path / "bad.json"), "--scenario", str(out / "scenario.json")]) == 2
    err = capsys.readouterr().err
    assert "bad.json" in err and "batches[2].end_offsets" in err and "Traceback" not in err
