"""State rebalancing under the explorer: every crash cut and single fault of a scenario with a move passes (moved
from tests/quick/test_reference_rebalancing.py: it explores a whole scenario)."""

from __future__ import annotations

import pytest
from test_reference_rebalancing import moves_of

from reference.language.scenario import Scenario
from reference.judge.explorer import explore
from reference.protocol.run import run_scenario
from reference.language.catalogue import scenario_dict


@pytest.mark.parametrize("mode", ["sync", pytest.param("async_state", marks=pytest.mark.slow)])
def test_every_crash_cut_and_single_fault_of_a_scenario_with_a_move_passes(mode):
    """About 700 schedules under sync state checkpointing (3 s on an idle core), 1,000 under async (5 s)."""
    d = scenario_dict("aggregate", mode, batches=4)
    d["executors"], d["events"] = ["a"], [{"kind": "executor_join", "executor": "b", "before_batch": 2}]
    scenario = Scenario.from_dict(d)
    assert moves_of(run_scenario(scenario).outcome()) == [(2, 1, "a", "b")]   # home of 1 over a, b is b
    report = explore(scenario, workers=1)
    assert not report.truncated and report.distinct_checkpoints > 0
    assert report.violations == [], "\n".join(v.describe() for v in report.violations[:3])
