"""The explorer and the bug zoo are experiments like the others (issue 41 point 7): registered by one line,
planned as points, measured one point at a time, summarised and checked by the runner."""

from __future__ import annotations

from experiments.bug_zoo.definition import EXPERIMENT as BUG_ZOO
from experiments.experiment import RunContext
from experiments.explorer.definition import EXPERIMENT as EXPLORER
from experiments.explorer.definition import RUNS, merge
from experiments.registry import get_experiment, get_section
from experiments.zoo import JIRAS


def test_both_are_registered_with_a_definition_and_a_section() -> None:
    for name, experiment in (("explorer", EXPLORER), ("bug-zoo", BUG_ZOO)):
        assert get_experiment(name) is experiment
        assert experiment.backends == ("reference",)
        assert callable(get_section(name).write)


def test_the_explorer_plans_one_point_per_example_run_at_the_modes_depth() -> None:
    quick = EXPLORER.points(RunContext(backend="reference", quick=True))
    full = EXPLORER.points(RunContext(backend="reference", quick=False))
    assert [p.config for p in quick] == [r.label for r in RUNS]
    assert {p.params["depth"] for p in quick} == {1} and {p.params["depth"] for p in full} == {2}
    assert all(p.scenario["faults"] == [] for p in quick)
    depth3 = next(p for p in quick if p.config == "pipelining, depth 3")
    assert depth3.scenario["engine"]["pipelining"] is True and depth3.scenario["engine"]["pipeline_depth"] == 3


def test_an_explorer_point_explores_and_its_summary_states_the_scope() -> None:
    point = next(p for p in EXPLORER.points(RunContext(backend="reference", quick=True))
                 if p.config == "async progress, stateless (example)")
    metrics = EXPLORER.measure(point)
    assert metrics["violations"] == 0 and not metrics["truncated"]
    assert metrics["schedules"] > metrics["crash_cuts"] > 0 and metrics["operator"] == "map"
    summary = EXPLORER.summarize([{"point": point.to_dict(), "metrics": metrics}],
                                 RunContext(backend="reference", quick=True))
    assert summary["scope"]["depth"] == 1 and summary["scope"]["operators"] == ["map"]
    assert summary["schedules"] == metrics["schedules"]
    assert [c.ok for c in EXPLORER.checks(summary, RunContext(backend="reference", quick=True))] == [True, True]


def test_merge_changes_nested_sections_key_by_key() -> None:
    base = {"log_purge": {"mode": "async", "min_batches_to_retain": 3}, "pipelining": False}
    assert merge(base, {"log_purge": {"mode": "inline"}}) == {"log_purge": {"mode": "inline",
                                                                            "min_batches_to_retain": 3},
                                                              "pipelining": False}
    assert base["log_purge"]["mode"] == "async"


def test_a_zoo_point_plants_one_bug_and_the_summary_counts_what_was_caught() -> None:
    points = BUG_ZOO.points(RunContext(backend="reference", quick=True))
    assert [p.config for p in points] == list(JIRAS)
    metrics = BUG_ZOO.measure(points[0])
    assert metrics["jira"] == JIRAS[0] and metrics["checks_failed"] and metrics["unplanted_passes"]
    summary = BUG_ZOO.summarize([{"point": points[0].to_dict(), "metrics": metrics}], RunContext(quick=True))
    assert (summary["planted"], summary["caught"], summary["unplanted_pass"]) == (1, 1, 1)
