"""The command line as a new user meets it: help texts, mistakes in the command line itself, one exit-code scheme,
and ``diff`` comparing what ran when a backend refuses or is missing.

Exit codes: ``experiments/exit_codes.py`` (0 ok, 1 a check failed, 2 bad input, 3 unavailable, 130 interrupted).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from experiments import backends, exit_codes
from experiments.cli import build_parser, main
from experiments.demo import SCENARIO
from reference.protocol.backend import ReferenceBackend, RunOptions, RunResult, ScenarioRefused
from reference.language.scenario import Scenario


def lightspeed(capsys: pytest.CaptureFixture[str], *argv: Any) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err, out + err
    return code, out, err


# ------------------------------------------------------------------------ help


def test_every_subcommand_has_a_description_and_every_option_help_text() -> None:
    _parser, subs = build_parser()
    assert set(subs) == {"validate", "run", "check", "explore", "diff", "demo", "experiment", "zoo", "cluster",
                         "soak"}
    for name, sub in subs.items():
        assert sub.description and len(sub.description) > 40, name
        for action in sub._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            assert action.help, f"lightspeed {name} {'/'.join(action.option_strings) or action.dest}: no help text"


def test_top_level_help_documents_the_exit_codes_and_the_backends(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = lightspeed(capsys, "--help")
    assert code == exit_codes.OK
    flat = " ".join(out.split())
    for text in ("0 ok", "1 a check or oracle failed", "2 bad input", "3 a backend is not available here",
                 "130 interrupted", "reference, sim, spark, spark-native"):
        assert text in flat, text


def test_diff_help_lists_the_backends_and_the_default(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = lightspeed(capsys, "diff", "--help")
    flat = " ".join(out.split())
    assert code == exit_codes.OK
    assert "two or more of reference, sim, spark, spark-native" in flat and "(default: reference,sim)" in flat


# ------------------------------------------------------- mistakes on the line


def test_a_mistyped_flag_prints_the_subcommands_usage(capsys: pytest.CaptureFixture[str]) -> None:
    for argv, usage in ((["run", SCENARIO, "--bakend", "sim"], "usage: lightspeed run "),
                        (["check", "o.json", "--scenario", "s.json", "--checkpiont", "d"], "usage: lightspeed check "),
                        (["experiment", "list", "--quik"], "usage: lightspeed experiment ")):
        code, _, err = lightspeed(capsys, *argv)
        assert code == exit_codes.BAD_INPUT and usage in err and "unrecognized arguments" in err, err
        assert "usage: lightspeed [-h]" not in err


def test_a_mistyped_subcommand_suggests_the_nearest(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = lightspeed(capsys, "expore", SCENARIO)
    assert code == exit_codes.BAD_INPUT and "unknown command 'expore'; did you mean 'explore'?" in err
    code, _, err = lightspeed(capsys, "experimnet", "list")
    assert code == exit_codes.BAD_INPUT and "did you mean 'experiment'?" in err


@pytest.mark.parametrize("backends_arg,says", [
    ("reference,flink", "unknown backend 'flink'"),
    ("reference,smi", "did you mean 'sim'?"),
    ("reference", "give at least 2"),
    ("", "give at least 2"),
])
def test_a_bad_backend_list_is_bad_input(capsys: pytest.CaptureFixture[str], backends_arg: str, says: str) -> None:
    code, _, err = lightspeed(capsys, "diff", SCENARIO, "--backends", backends_arg)
    assert code == exit_codes.BAD_INPUT and says in err


def test_a_missing_scenario_file_is_bad_input_everywhere(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    for command in ("validate", "run", "explore", "diff"):
        code, _, err = lightspeed(capsys, command, tmp_path / "nope.json")
        assert code == exit_codes.BAD_INPUT and "nope.json: no such file, expected a scenario JSON file" in err, command


def test_an_option_no_chosen_backend_takes_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = lightspeed(capsys, "diff", SCENARIO, "--backends", "reference,spark-native", "--profile",
                              "local_spark")
    assert code == exit_codes.BAD_INPUT and "does not take --profile" in err


# ------------------------------------------------------------------------ diff


def test_diff_keeps_each_outcome_and_checkpoint_and_prints_wall_times(capsys: pytest.CaptureFixture[str],
                                                                       tmp_path: Path) -> None:
    code, out, _ = lightspeed(capsys, "diff", SCENARIO, "--backends", "reference,sim", "--out", tmp_path)
    assert code == exit_codes.OK and "reference and sim agree" in out
    assert out.count(" s\n") >= 2 and "wall time" in out
    for name in ("reference", "sim"):
        assert json.loads((tmp_path / f"outcome-{name}.json").read_text())["backend"] == name
        code, verdicts, _ = lightspeed(capsys, "check", tmp_path / f"outcome-{name}.json", "--scenario", SCENARIO,
                                       "--checkpoint", tmp_path / f"checkpoint-{name}")
        assert code == exit_codes.OK and "12 of 12 oracles hold" in verdicts


class Refusing(ReferenceBackend):
    """A backend that cannot run pipelined scenarios, as native Spark cannot."""

    name = "spark-native"

    def run(self, scenario: Scenario, options: RunOptions = RunOptions()) -> RunResult:
        raise ScenarioRefused(self.name, "engine.pipelining", "Spark's micro-batch engine has no pipelining")


class Missing(Refusing):
    name = "spark"

    def unavailable(self) -> str | None:
        return "Java is not installed"


def test_diff_compares_what_ran_and_says_which_backend_refused_and_why(capsys: pytest.CaptureFixture[str],
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(backends._INSTANCES, "spark-native", Refusing())
    code, out, _ = lightspeed(capsys, "diff", SCENARIO, "--backends", "reference,spark-native,sim")
    assert code == exit_codes.BAD_INPUT
    assert "REFUSED: backend spark-native refuses engine.pipelining: Spark's micro-batch engine has no pipelining" \
        in out
    assert "reference and sim agree on batches, state and sink" in out


def test_diff_compares_what_ran_and_says_which_backend_is_missing(capsys: pytest.CaptureFixture[str],
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(backends._INSTANCES, "spark", Missing())
    code, out, _ = lightspeed(capsys, "diff", SCENARIO, "--backends", "spark,reference,sim")
    assert code == exit_codes.UNAVAILABLE
    assert "NOT AVAILABLE: backend spark is not available here: Java is not installed" in out
    assert "reference and sim agree" in out


def test_a_backend_missing_for_run_is_exit_3(capsys: pytest.CaptureFixture[str],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(backends._INSTANCES, "spark", Missing())
    code, _, err = lightspeed(capsys, "run", SCENARIO, "--backend", "spark")
    assert code == exit_codes.UNAVAILABLE and "Java is not installed" in err


def test_a_backend_refusing_a_scenario_for_run_is_bad_input(capsys: pytest.CaptureFixture[str],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(backends._INSTANCES, "spark-native", Refusing())
    code, _, err = lightspeed(capsys, "run", SCENARIO, "--backend", "spark-native")
    assert code == exit_codes.BAD_INPUT and "refuses engine.pipelining" in err
