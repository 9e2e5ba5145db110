"""The explorer's results pinned before it was made faster (``explorer_pins.json``): what a test compares.

A pin holds the schedule count, the distinct crash checkpoints and their
fingerprint (``Report.checkpoint_fingerprint``), whether the exploration was
cut short, and the violations (how many, and a digest of each one's position,
schedule and failed checks). Any change to what the explorer explores or finds
changes one of them.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from reference.judge.explorer import Report

PINS = json.loads((Path(__file__).parent / "explorer_pins.json").read_text())["pins"]


def observed(report: Report) -> dict:
    violations = [[v.order, v.schedule, sorted({x.check for x in v.verdicts})] for v in report.violations]
    return {"schedules": report.schedules, "distinct_checkpoints": report.distinct_checkpoints,
            "truncated": report.truncated, "checkpoint_fingerprint": report.checkpoint_fingerprint,
            "violations": len(violations),
            "violations_sha256": hashlib.sha256(json.dumps(violations).encode()).hexdigest()}


def assert_pinned(name: str, report: Report) -> None:
    assert observed(report) == PINS[name], f"the exploration of {name} changed"
