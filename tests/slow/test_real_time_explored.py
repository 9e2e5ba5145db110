"""Real-time mode under the explorer: every crash cut of the example scenarios and of the bounded-replay
variant, and the planted bugs the named checks catch (moved from tests/quick/test_real_time.py: each explores a
whole scenario)."""

from __future__ import annotations

import pytest
from test_real_time import LogsOffsetsBeforeTheTasksReport, load, replays_after_the_last_commit

from reference.judge.explorer import Model, explore
from reference.language.scenario import Scenario


@pytest.mark.parametrize("name", ["real-time-aggregate", "real-time-window"])
def test_the_explorer_finds_no_violation_on_real_time_scenarios(name):
    report = explore(Scenario.from_dict(load(name)), workers=1)
    assert report.schedules > 100 and not report.violations and not report.truncated


@pytest.mark.parametrize("name, model, check", [
    ("real-time-aggregate", Model(LogsOffsetsBeforeTheTasksReport), "state_equivalence"),
    ("real-time-aggregate", Model(plan_restart_fn=replays_after_the_last_commit), "checkpoint"),   # commit_order
    ("real-time-bounded-replay", Model(LogsOffsetsBeforeTheTasksReport), "state_equivalence"),
    ("real-time-bounded-replay", Model(plan_restart_fn=replays_after_the_last_commit), "checkpoint"),
])
def test_a_planted_real_time_bug_is_caught_by_a_named_check(name, model, check):
    report = explore(Scenario.from_dict(load(name)), model=model, workers=1)
    caught = {v.check for violation in report.violations for v in violation.verdicts}
    assert check in caught, caught


def test_the_explorer_finds_no_violation_on_the_bounded_replay_variant():
    report = explore(Scenario.from_dict(load("real-time-bounded-replay")), workers=1)
    assert report.schedules > 1000 and not report.violations and not report.truncated
