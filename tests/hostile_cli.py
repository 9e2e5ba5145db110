"""What the hostile-input suites (``test_cli_hostile*.py``) share: the checkpoint they damage and how they run
the command line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from experiments.checkpoint_dir import write_checkpoint
from experiments.cli import main
from streamtest import check, crash, make


def write_crashed_count(out: Path, operator: str = "aggregate", batches: int = 5) -> Path:
    """A running count (or another operator) with a crash after a state commit into ``out``: scenario.json,
    outcome.json and checkpoint/ (the reference's run, judged: every oracle holds)."""
    scenario = make(operator, batches=batches, faults=[crash("state_commit", 2, partition=0)])
    result = check(scenario, on="reference")
    (out / "scenario.json").write_text(scenario.to_json())
    (out / "outcome.json").write_text(result.outcome.to_json())
    assert result.checkpoint is not None
    write_checkpoint(result.checkpoint, out / "checkpoint")
    return out


def lightspeed(capsys: pytest.CaptureFixture[str], *argv: Any) -> tuple[int, str, str]:
    """Run the command line; (exit code, stdout, stderr). A traceback anywhere fails the test."""
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err, out + err
    return code, out, err


def failed_lines(out: str) -> list[str]:
    """The lines of the failed verdicts: each ``[FAIL]`` line, and the findings listed under it (a check that
    found several problems names each on a line of its own)."""
    lines, failing = [], False
    for line in out.splitlines():
        if line.lstrip().startswith("["):
            failing = "[FAIL]" in line
        if failing and not line.lstrip().startswith(("expected:", "actual:")):
            lines.append(line)
    return lines
