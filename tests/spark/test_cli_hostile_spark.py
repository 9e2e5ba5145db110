"""Hostile input to the Spark backends from the command line: what tests/quick/test_cli_hostile.py asks of the
reference and the simulator, asked of the backends that need Java to get as far as reading the scenario (without
Java they say so, exit 3, first)."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_cli_hostile import SIZES, refused_before_spending_memory

from experiments import exit_codes
from experiments.cli import main
from spark_impl.engine.speed import running_count


@pytest.mark.spark
@pytest.mark.parametrize("backend", ["spark", "spark-native"])
@pytest.mark.parametrize("what, limit", SIZES)
def test_every_backend_refuses_a_scenario_it_cannot_hold_before_spending_memory(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, backend: str, what: str, limit: str) -> None:
    refused_before_spending_memory(capsys, tmp_path, backend, what, limit)


@pytest.mark.spark
def test_the_command_line_names_an_unknown_profile(tmp_path, capsys):
    path = tmp_path / "s.json"
    path.write_text(running_count("p", 100, 1, {}, stateful=False).to_json())
    assert main(["run", str(path), "--backend", "spark", "--storage-profile", "floppy"]) == exit_codes.BAD_INPUT
    err = capsys.readouterr().err
    assert "'floppy'" in err and "object_store" in err
