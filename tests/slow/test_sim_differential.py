"""Differential tests: the simulator (data mode) against the reference model and its oracles.

The reference model plays the store "assumed to be perfect" (spec section 5):
every simulated outcome must pass every oracle the reference's own outcome of
the same scenario passes, and fault-free or synchronous runs must agree with
the reference's outcome (``reference.judge.compare.first_difference``). The judge
is never excused: a scenario on which the reference itself crashes fails the
test (issue 14, item 9), it is not discarded.
"""

from __future__ import annotations

import os
from typing import Any

from hypothesis import HealthCheck, given, note, settings
from test_sim_strategies import scenario_strategy

from reference.judge.compare import first_difference
from reference.judge.oracles import check_outcome, failures
from reference.protocol.outcome import Outcome
from reference.protocol.run import run_scenario
from reference.language.scenario import Scenario
from reference.protocol.storage import Storage
from sim import simulate

THOROUGH = os.environ.get("HYPOTHESIS_PROFILE") == "thorough"
# CI runs at least 300 examples across the differential tests (150 + 100 + 60); thorough runs more.
FAULTY_EXAMPLES = 1500 if THOROUGH else 150
CLEAN_EXAMPLES = 500 if THOROUGH else 100
SYNC_CRASH_EXAMPLES = 300 if THOROUGH else 60
REDELIVERING_EXAMPLES = 300 if THOROUGH else 40
QUICK: dict[str, Any] = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def final_state(outcome: Outcome) -> dict[str, Any]:
    """The newest retained version of every store and partition."""
    return {sid: {p: versions[max(versions, key=int)] if versions else None for p, versions in parts.items()}
            for sid, parts in outcome.state.items()}


def _failing_checks(scenario: Scenario, outcome: Outcome, storage: Storage) -> set[str]:
    return {v.check for v in failures(check_outcome(scenario, outcome, storage))}


@settings(max_examples=FAULTY_EXAMPLES, **QUICK)
@given(scenario_strategy())
def test_sim_passes_every_oracle_the_reference_passes(scenario: Scenario) -> None:
    note(scenario.to_json())
    reference = run_scenario(scenario)
    sim = simulate(scenario)
    outcome = sim.outcome()
    note(f"sim error: {outcome.error}; recoveries {outcome.recoveries}")
    sim_fail = _failing_checks(scenario, outcome, sim.storage)
    ref_fail = _failing_checks(scenario, reference.outcome(), reference.storage)
    for verdict in failures(check_outcome(scenario, outcome, sim.storage)):
        note(verdict.describe())
    assert sim_fail <= ref_fail, f"the simulator fails {sorted(sim_fail - ref_fail)} where the reference passes"
    if not scenario.faults:
        assert outcome.error is None


@settings(max_examples=REDELIVERING_EXAMPLES, **QUICK)
@given(scenario_strategy(source_kind="redelivering"))
def test_sim_passes_every_oracle_the_reference_passes_on_a_redelivering_source(scenario: Scenario) -> None:
    test_sim_passes_every_oracle_the_reference_passes.hypothesis.inner_test(scenario)


@settings(max_examples=REDELIVERING_EXAMPLES, **QUICK)
@given(scenario_strategy(faults=False, source_kind="redelivering"))
def test_fault_free_sim_matches_reference_on_a_redelivering_source(scenario: Scenario) -> None:
    test_fault_free_sim_matches_reference.hypothesis.inner_test(scenario)


@settings(max_examples=CLEAN_EXAMPLES, **QUICK)
@given(scenario_strategy(faults=False))
def test_fault_free_sim_matches_reference(scenario: Scenario) -> None:
    note(scenario.to_json())
    reference = run_scenario(scenario).outcome()
    outcome = simulate(scenario).outcome()
    # Which files (and so which old versions) are retained depends on the order of background
    # maintenance and purge, which any legal schedule may change: first_difference compares the
    # versions both retain, and each store's newest.
    assert first_difference(outcome, reference, scenario.sink_mode) is None
    assert (outcome.batches, outcome.recoveries, outcome.error, outcome.state_errors) == \
        (reference.batches, reference.recoveries, reference.error, reference.state_errors)
    assert final_state(outcome) == final_state(reference)
    assert len(outcome.progress) == len(reference.progress)
    assert outcome.timing is not None
    assert outcome.timing.latency_ms.count == sum(
        e - s for b in outcome.batches for s, e in zip(b.start_offsets or (), b.end_offsets))


@settings(max_examples=SYNC_CRASH_EXAMPLES, **QUICK)
@given(scenario_strategy(sync_only=True))
def test_sync_sim_with_step_faults_matches_reference(scenario: Scenario) -> None:
    """Faults at foreground steps only, synchronous modes: the same outcome as the reference.

    A fault at a background step (maintenance, async purge) lands at a point the schedule chooses, so
    there the oracles judge instead (the first test).
    """
    background = {"snapshot_upload"} | ({"purge"} if scenario.engine.log_purge_mode == "async" else set())
    stepped = scenario.with_changes(faults=tuple(f for f in scenario.faults
                                                 if f.at.step is not None and f.at.step not in background))
    note(stepped.to_json())
    reference = run_scenario(stepped).outcome()
    outcome = simulate(stepped).outcome()
    assert outcome.error == reference.error
    if outcome.error is None:
        assert first_difference(outcome, reference, stepped.sink_mode) is None
        assert final_state(outcome) == final_state(reference)
