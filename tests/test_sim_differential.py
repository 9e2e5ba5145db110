"""Differential tests: the simulator (data mode) against the reference model and its oracles.

The reference model plays the store "assumed to be perfect" (SPEC section 5):
every simulated outcome must pass every oracle the reference's own outcome of
the same scenario passes, and fault-free or synchronous runs must end in the
same state and sink output as the reference.
"""

from __future__ import annotations

import json
import os

from hypothesis import HealthCheck, given, note, reject, settings
from test_sim_strategies import scenario_strategy

from reference.oracles import check_outcome, failures
from reference.outcome import build_outcome
from reference.runner import run_scenario
from reference.scenario import Scenario
from sim import simulate

THOROUGH = os.environ.get("HYPOTHESIS_PROFILE") == "thorough"
# CI runs at least 300 examples across the differential tests (150 + 100 + 60); thorough runs more.
FAULTY_EXAMPLES = 1500 if THOROUGH else 150
CLEAN_EXAMPLES = 500 if THOROUGH else 100
SYNC_CRASH_EXAMPLES = 300 if THOROUGH else 60
QUICK = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _reference_run(scenario: Scenario):  # type: ignore[no-untyped-def]
    """The reference's run; scenarios the reference itself cannot run (a reference bug) are skipped."""
    try:
        return run_scenario(scenario)
    except (KeyError, AttributeError, TypeError) as exc:  # reported as reference bugs, not sim bugs
        note(f"reference raised {exc!r}")
        reject()


def _reference(scenario: Scenario) -> dict:
    return build_outcome(_reference_run(scenario))


def final_state(outcome: dict) -> dict:
    """The newest retained version of every store and partition."""
    return {sid: {p: versions[max(versions, key=int)] if versions else None for p, versions in parts.items()}
            for sid, parts in outcome["state"].items()}


def sink_rows(outcome: dict, at_least_once: bool) -> list:
    """Visible output per batch; at-least-once duplicates (from re-run ranges) collapsed."""
    out = []
    for entry in outcome["sink"]:
        rows = entry["rows"]
        if at_least_once:
            rows = sorted({json.dumps(r) for r in rows})
            rows = [json.loads(r) for r in rows]
        if rows:
            out.append((entry["batch"], rows))
    return out


def _failing_checks(scenario: Scenario, outcome: dict, storage: object) -> set[str]:
    return {v.check for v in failures(check_outcome(scenario, outcome, storage))}


@settings(max_examples=FAULTY_EXAMPLES, **QUICK)
@given(scenario_strategy())
def test_sim_passes_every_oracle_the_reference_passes(scenario: Scenario) -> None:
    note(scenario.to_json())
    ref_result = _reference_run(scenario)
    sim = simulate(scenario)
    outcome = sim.outcome()
    note(f"sim error: {outcome['error']}; recoveries {outcome['recoveries']}")
    sim_fail = _failing_checks(scenario, outcome, sim.service.files)
    ref_fail = _failing_checks(scenario, build_outcome(ref_result), ref_result.storage)
    for verdict in failures(check_outcome(scenario, outcome, sim.service.files)):
        note(verdict.describe())
    assert sim_fail <= ref_fail, f"the simulator fails {sorted(sim_fail - ref_fail)} where the reference passes"
    if not scenario.faults:
        assert outcome["error"] is None


@settings(max_examples=CLEAN_EXAMPLES, **QUICK)
@given(scenario_strategy(faults=False))
def test_fault_free_sim_matches_reference(scenario: Scenario) -> None:
    note(scenario.to_json())
    reference = _reference(scenario)
    outcome = simulate(scenario).outcome()
    # Which files (and so which old versions) are retained depends on the order of background
    # maintenance and purge, which any legal schedule may change: compare what every schedule agrees on.
    for field in ("batches", "recoveries", "error", "state_errors"):
        assert outcome[field] == reference[field], field
    assert final_state(outcome) == final_state(reference)
    alo = scenario.sink_mode == "at_least_once"
    assert sink_rows(outcome, alo) == sink_rows(reference, alo)
    assert len(outcome["progress"]) == len(reference["progress"])
    assert outcome["latency_ms"]["count"] == sum(
        e - s for b in outcome["batches"] for s, e in zip(b["start_offsets"], b["end_offsets"]))


@settings(max_examples=SYNC_CRASH_EXAMPLES, **QUICK)
@given(scenario_strategy(sync_only=True))
def test_sync_sim_with_step_faults_matches_reference(scenario: Scenario) -> None:
    """Faults at foreground steps only, synchronous modes: the same final state and output as the reference.

    A fault at a background step (maintenance, async purge) lands at a point the schedule chooses, so
    there the oracles judge instead (the first test).
    """
    background = {"snapshot_upload"} | ({"purge"} if scenario.engine.log_purge_mode == "async" else set())
    stepped = scenario.with_changes(faults=tuple(f for f in scenario.faults
                                                 if f.at.step is not None and f.at.step not in background))
    note(stepped.to_json())
    reference = _reference(stepped)
    outcome = simulate(stepped).outcome()
    assert outcome["error"] == reference["error"]
    alo = stepped.sink_mode == "at_least_once"
    if outcome["error"] is None:
        assert final_state(outcome) == final_state(reference)
        assert sink_rows(outcome, alo) == sink_rows(reference, alo)
