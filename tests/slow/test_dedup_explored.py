"""``dedup`` under the explorer and against the simulator, in the forms the catalogue leaves out.

The catalogue's plain dedup is explored under every mode by ``test_reference_explorer.py`` (its pins name
them). Here: the watermarked form (``dropDuplicates(key, ts)``: late rows dropped, entries evicted) under every
mode Spark allows (the short form under ``make test``), real-time mode's dedup in both forms (Spark's
``RealTimeModeAllowlist`` holds ``StreamingDeduplicateExec``), and the simulator judged against the reference
on generated dedup scenarios of both forms.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, note, settings
from soak import soak_or_short
from test_dedup import dedup_scenarios

from reference.judge.compare import first_difference
from reference.judge.explorer import explore
from reference.judge.oracles import check_outcome, failures
from reference.language.catalogue import MODES, scenario_dict, spark_allows
from reference.language.scenario import Scenario
from reference.protocol.run import run_scenario
from sim import simulate

SCENARIOS = Path(__file__).resolve().parents[2] / "experiments" / "scenarios"
WATERMARKED = {"kind": "dedup", "watermark_delay_ms": 10}   # below the source's 20 ms disorder: rows are late
DEDUP_MODES = [m for m in MODES if spark_allows("dedup", m)]


def watermarked(mode: str) -> Scenario:
    d = scenario_dict("dedup", mode, batches=4)
    d["query"]["operator"] = WATERMARKED
    return Scenario.from_dict(d)


@pytest.mark.slow
@pytest.mark.soak
@pytest.mark.parametrize("mode", soak_or_short(DEDUP_MODES, ["async_state"]))
def test_the_explorer_finds_nothing_wrong_in_watermarked_dedup(mode):
    report = explore(watermarked(mode))
    assert not report.truncated and report.distinct_checkpoints > 0
    assert report.violations == [], "\n".join(v.describe() for v in report.violations[:3])


@pytest.mark.slow
@pytest.mark.parametrize("operator", [{"kind": "dedup"}, {"kind": "dedup", "watermark_delay_ms": 2000}],
                         ids=["plain", "watermarked"])
def test_the_explorer_finds_nothing_wrong_in_real_time_dedup(operator: dict[str, Any]):
    raw = json.loads((SCENARIOS / "real-time-dedup.json").read_text())
    scenario = Scenario.from_dict({**raw, "query": {"operator": operator, "state_partitions": 2}})
    report = explore(scenario, workers=1)
    assert report.schedules > 100 and not report.truncated
    assert report.violations == [], "\n".join(v.describe() for v in report.violations[:3])


@pytest.mark.slow
@settings(max_examples=40)
@given(dedup_scenarios())
def test_the_simulator_passes_every_oracle_the_reference_passes_on_dedup(scenario: Scenario):
    note(scenario.to_json())
    reference = run_scenario(scenario)
    sim = simulate(scenario)
    outcome = sim.outcome()
    ref_fail = {v.check for v in failures(check_outcome(scenario, reference.outcome(), reference.storage))}
    sim_fail = {v.check for v in failures(check_outcome(scenario, outcome, sim.storage))}
    assert ref_fail == set(), f"the reference fails {sorted(ref_fail)}"
    assert sim_fail == set(), f"the simulator fails {sorted(sim_fail)}"
    # without its fault (which may land where the schedule puts it) the simulator's outcome is the reference's
    clean = scenario.with_changes(faults=())
    difference = first_difference(run_scenario(clean).outcome(), simulate(clean).outcome(), clean.sink_mode)
    assert difference is None, f"the reference and the simulator differ at {difference}"
