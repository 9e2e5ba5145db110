"""The command line on the Spark backends: a Spark-engine checkpoint judged in a fresh process, and ``diff`` when
native Spark refuses a scenario (issue 13 items 5 and 11).

Both need a JVM and PySpark (marked ``spark``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from experiments import exit_codes
from experiments.checkpoint_dir import write_checkpoint
from experiments.cli import main
from streamtest import RunOptions, check, crash, make

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.spark


def test_check_decodes_a_spark_engine_checkpoint_in_a_fresh_process(spark: Any, tmp_path: Path) -> None:
    """The engine's stores write RocksDB snapshots; ``check --checkpoint`` finds their reader from the metadata,
    with nothing registered in the process beforehand."""
    scenario = make("aggregate", "sync", batches=5, faults=[crash("offset_log_write", 3)])
    result = check(scenario, on="spark", options=RunOptions(workdir=str(tmp_path / "work")))
    assert result.checkpoint is not None
    (tmp_path / "scenario.json").write_text(scenario.to_json())
    (tmp_path / "outcome.json").write_text(result.outcome.to_json())
    write_checkpoint(result.checkpoint, tmp_path / "checkpoint")
    assert "snapshot_format" in (tmp_path / "checkpoint" / "metadata").read_text()
    proc = subprocess.run([sys.executable, "-m", "experiments.cli", "check", str(tmp_path / "outcome.json"),
                           "--scenario", str(tmp_path / "scenario.json"), "--checkpoint",
                           str(tmp_path / "checkpoint")], cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == exit_codes.OK, proc.stdout + proc.stderr
    assert "[PASS] reconstruction" in proc.stdout and "[PASS] checkpoint" in proc.stdout


def test_diff_says_native_spark_refuses_pipelining_and_compares_the_rest(spark: Any, tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "pipelined.json"
    path.write_text(make("aggregate", "pipelining", batches=3).to_json())
    code = main(["diff", str(path), "--backends", "reference,spark-native,sim", "--out", str(tmp_path / "out")])
    out = capsys.readouterr().out
    assert code == exit_codes.BAD_INPUT, out
    assert "REFUSED: backend spark-native refuses engine.pipelining" in out
    assert "reference and sim agree" in out
    assert (tmp_path / "out" / "outcome-reference.json").exists() and (tmp_path / "out" / "outcome-sim.json").exists()
