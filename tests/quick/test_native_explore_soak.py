"""The native explorer's sample of crash cuts and the random-fault soak, without a JVM.

The sample: seeded (the same seed, the same cuts), drawn from the reference
explorer's own enumeration, and each cut's crash lands after one of its
maximal writing steps, a foreground one when it has one. The soak: the same
seed draws the same faults, every fault it draws is a valid fault of the kinds
the backend runs, a held run is reported as held, and a planted violation is
shrunk to its one guilty fault on fewer batches and written out. The runs
here are the reference's (the soak takes the function that runs a backend).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from experiments import explore_native
from experiments.explore_native import crash_after, merged, sample_cuts
from experiments.output_paths import OutputPathError
from experiments.fault_soak import SOAK_KINDS, SoakError, draw_faults, parse_seeds, shrink, soak
from reference.protocol.backend import RunOptions, RunResult
from reference.judge.explorer import Model, ancestors_of, first_graph, writing_cuts, writing_steps
from reference.judge.oracles import check_outcome, failures
from reference.protocol.run import run_scenario
from reference.language.scenario import Scenario, load_scenario
from reference.protocol.sources import SourceData
from reference.language.steps import TASK_STEPS

RUNNING_COUNT = Path(__file__).resolve().parents[2] / "experiments" / "scenarios" / \
    "running-count-crash-after-wal.json"


@pytest.fixture(scope="module")
def scenario() -> Scenario:
    return load_scenario(str(RUNNING_COUNT))


def test_the_sample_is_seeded_and_drawn_from_the_reference_explorers_cuts(scenario):
    total, capped, cuts = sample_cuts(scenario, 50, seed=3)
    again = sample_cuts(scenario, 50, seed=3)[2]
    other = sample_cuts(scenario, 50, seed=4)[2]
    # the running count's first graph has 2,372 crash cuts: a pin, so a change to the enumeration or the graph shows
    assert (total, capped) == (2_372, False)
    assert cuts == again and cuts != other
    orders = [c.order for c in cuts]
    assert len(set(orders)) == 50 and orders == sorted(orders) and 1 <= orders[0] and orders[-1] <= total
    assert all(c.crash.kind == "driver_crash" and c.crash.at.when == "after" for c in cuts)
    assert sample_cuts(scenario, 10_000, seed=1)[2][-1].order == total   # a sample past the whole is the whole


def test_a_sample_from_a_cut_short_enumeration_says_so(scenario, monkeypatch):
    monkeypatch.setattr(explore_native, "count_writing_cuts", lambda inc: (40, True))
    total, capped, cuts = sample_cuts(scenario, 10_000, seed=1)
    assert (total, capped, len(cuts), cuts[-1].order) == (40, True, 40, 40)
    report = merged("s", 1, total, [], capped)
    assert "of the reference explorer's first 40 crash cuts (the enumeration stops at 200,000; the scenario has " \
           "more)" in report.summary() and report.to_dict()["cuts_truncated"] is True
    assert "the scenario has more" not in merged("s", 1, total, []).summary()


def test_a_cuts_crash_follows_its_latest_maximal_writing_step_in_the_foreground_when_there_is_one(scenario):
    base = replace(scenario, faults=())
    inc = first_graph(base, Model())
    ancestors = ancestors_of(inc)
    writing = writing_steps(base)
    for count, cut in enumerate(writing_cuts(inc)):
        if count % 37:
            continue
        node = crash_after(inc, cut, ancestors)
        members = [n for n in cut if n.step in writing]
        assert node in members and not any(node in ancestors[m] for m in members)
        later = [m for m in members if m > node and not any(m in ancestors[x] for x in members)]
        assert all(inc.nodes[m].background for m in later) and \
            (not inc.nodes[node].background or all(inc.nodes[m].background for m in members if m != node
                                                   and not any(m in ancestors[x] for x in members)))


def test_the_report_counts_distinct_crash_checkpoints_and_violations_from_its_shares():
    def result(order: int, shape: list[str] | None, bad: bool = False) -> dict[str, Any]:
        return {"order": order, "label": "", "crash": {"at": {"step": "sink_write", "batch": 1}},
                "reached": shape is not None, "checkpoint": shape, "verdicts": [{"check": "no_loss"}] if bad else [],
                "described": ["[FAIL] no_loss"] if bad else [], "seconds": 1.0, "reproduce": {"name": "s"}}
    report = merged("s", 7, 100, [[result(3, ["a"]), result(1, ["a", "b"], bad=True)], [result(2, ["a"]),
                                                                                          result(4, None)]])
    assert [r["order"] for r in report.results] == [1, 2, 3, 4]
    assert report.distinct_checkpoints() == 2 and len(report.violations) == 1 and len(report.reached) == 3
    assert "4 crash cuts sampled (seed 7) of the reference explorer's 100" in report.summary()
    assert "VIOLATION at cut 1 (driver_crash after sink_write b1)" in "\n".join(report.lines())


# ------------------------------------------------------------------ the soak


def test_seeds_parse_as_an_inclusive_range_and_bad_ones_say_what_is_wrong():
    assert list(parse_seeds("3..6")) == [3, 4, 5, 6] and list(parse_seeds("9")) == [9]
    for bad in ("6..3", "a..b", "1-4", ""):
        with pytest.raises(SoakError):
            parse_seeds(bad)


@pytest.mark.parametrize("backend", sorted(SOAK_KINDS))
def test_a_seed_draws_the_same_valid_faults_of_the_backends_kinds(scenario, backend):
    batches = SourceData.of(scenario).planned_batches()
    drawn = {seed: draw_faults(scenario, backend, seed) for seed in range(60)}
    assert drawn[5] == draw_faults(scenario, backend, 5)
    kinds = {f.kind for faults in drawn.values() for f in faults}
    assert kinds == set(SOAK_KINDS[backend])
    for faults in drawn.values():
        assert 1 <= len(faults) <= 3
        raw = json.loads(replace(scenario, faults=faults).to_json())
        assert Scenario.from_dict(raw).faults == faults   # each is a valid fault
        for f in faults:
            assert 0 <= f.at.batch < batches
            if f.kind in ("task_failure", "executor_loss", "zombie_write"):
                assert f.at.step in TASK_STEPS
            if backend == "spark-native" and f.kind == "task_failure":
                assert f.at.partition is None   # any partition: one of Spark's may get no rows


def reference_run(_backend: str, sc: Scenario, _options: RunOptions) -> RunResult:
    result = run_scenario(sc)
    return RunResult(result.outcome(), result.storage)


def planted_run(backend: str, sc: Scenario, options: RunOptions) -> RunResult:
    """The reference, with a planted mistake: a run with a storage error at an offset log write loses the sink's
    last batch."""
    result = reference_run(backend, sc, options)
    if any(f.kind == "storage_write_error" and f.at.step == "offset_log_write" for f in sc.faults):
        outcome = result.outcome
        sink = tuple(e for e in outcome.sink if e.batch != outcome.sink[-1].batch)
        result = RunResult(replace(outcome, sink=sink), result.checkpoint)
    return result


def test_the_soak_reports_held_seeds_and_their_rate(scenario, tmp_path):
    report = soak(scenario, "spark", range(0, 4), out=tmp_path, run=reference_run)
    assert [r.seed for r in report.results] == [0, 1, 2, 3] and not report.violations
    assert report.seeds_per_hour() > 0 and "4 seeds in" in report.lines()[0]
    assert not list(tmp_path.iterdir())


@pytest.fixture(scope="module")
def guilty(scenario) -> int:
    """A soak seed whose three drawn faults include the one ``planted_run`` punishes, early enough to shrink."""
    return next(s for s in range(200) if len(draw_faults(scenario, "spark", s)) == 3 and any(
        f.kind == "storage_write_error" and f.at.step == "offset_log_write" and f.at.batch < 3
        for f in draw_faults(scenario, "spark", s)))


def test_a_violation_is_shrunk_to_its_guilty_fault_on_fewer_batches_and_written_out(scenario, guilty, tmp_path):
    report = soak(scenario, "spark", [guilty], out=tmp_path, run=planted_run)
    [result] = report.violations
    assert result.failed and result.shrunk_path
    small = Scenario.from_dict(json.loads(Path(result.shrunk_path).read_text()))
    assert [(f.kind, f.at.step) for f in small.faults] == [("storage_write_error", "offset_log_write")]
    assert SourceData.of(small).planned_batches() < SourceData.of(scenario).planned_batches()
    assert failures(check_outcome(small, planted_run("spark", small, RunOptions()).outcome))


def test_shrinking_stops_at_its_run_budget(scenario, guilty):
    faulted = replace(scenario, faults=draw_faults(scenario, "spark", guilty))

    def runs_taken(max_runs: int) -> int:
        calls: list[int] = []

        def counting(backend: str, sc: Scenario, options: RunOptions) -> RunResult:
            calls.append(1)
            return planted_run(backend, sc, options)

        shrink(faulted, "spark", RunOptions(), ["no_loss"], counting, max_runs=max_runs)
        return len(calls)

    assert runs_taken(100) > 2      # two faults to drop, then batches to cut: more than the budget below
    assert runs_taken(2) == 2


def test_the_soak_refuses_a_backend_it_does_not_run_and_a_bad_budget(scenario):
    with pytest.raises(SoakError):
        soak(scenario, "sim", [1], run=reference_run)
    with pytest.raises(SoakError):
        soak(scenario, "spark", [1], budget_min=0, run=reference_run)


# ------------------------------------------------------------------ what the commands write


def test_a_soak_refuses_to_replace_an_earlier_soaks_files_without_overwrite(tmp_path, capsys):
    from experiments.cli import main
    out = tmp_path / "soak"
    out.mkdir()
    (out / "soak-report.json").write_text("{\"mine\": 1}")
    code = main(["soak", str(RUNNING_COUNT), "--backend", "spark", "--seeds", "1", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and "soak-report.json" in err and "--overwrite" in err, err
    assert (out / "soak-report.json").read_text() == "{\"mine\": 1}"


def test_a_shrunk_scenario_is_never_written_through_a_link(scenario, guilty, tmp_path):
    target = tmp_path / "elsewhere.json"
    target.write_text("mine")
    (tmp_path / f"soak-spark-seed{guilty}.json").symlink_to(target)
    with pytest.raises(OutputPathError, match="symbolic link"):
        soak(scenario, "spark", [guilty], out=tmp_path, run=planted_run)
    assert target.read_text() == "mine"


def test_native_explore_refuses_an_out_that_is_its_scenario(tmp_path, capsys):
    from experiments.cli import main
    scenario_file = tmp_path / "s.json"
    scenario_file.write_text(RUNNING_COUNT.read_text())
    code = main(["explore", str(scenario_file), "--backend", "spark-native", "--sample", "1",
                 "--out", str(scenario_file)])
    assert code == 2, capsys.readouterr().err
    assert scenario_file.read_text() == RUNNING_COUNT.read_text()
