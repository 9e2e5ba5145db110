"""Hypothesis property tests: random scenarios with one fault satisfy every oracle, deterministically."""

from __future__ import annotations

from hypothesis import given, note
from hypothesis import strategies as st

from reference.judge.oracles import check_outcome, determinism, failures
from reference.protocol.run import run_scenario
from reference.language.scenario import Scenario
from reference.language.steps import DRIVER_STEPS, TASK_STEPS, WRITING_STEPS
from reference.language.catalogue import OPERATORS, scenario_dict
from streamtest import reachable

FAULT_KINDS = ("driver_crash", "task_failure", "executor_loss", "storage_write_error", "zombie_write",
               "storage_latency", "clock_skew")


@st.composite
def fault(draw: st.DrawFn, batches: int) -> dict:
    kind = draw(st.sampled_from(FAULT_KINDS))
    if kind in ("task_failure", "executor_loss"):
        step = draw(st.sampled_from(TASK_STEPS))
    elif kind == "zombie_write":
        step = draw(st.sampled_from(("changelog_write", "sink_write")))
    elif kind == "storage_write_error":
        step = draw(st.sampled_from(WRITING_STEPS))
    else:
        step = draw(st.sampled_from(DRIVER_STEPS + TASK_STEPS + ("snapshot_upload",)))
    at = {"step": step, "batch": draw(st.integers(0, batches - 1)),
          "when": draw(st.sampled_from(("before", "after")))}
    if step in TASK_STEPS + ("snapshot_upload",):
        at["partition"] = draw(st.integers(0, 1))
    out = {"at": at, "kind": kind}
    if kind in ("storage_latency", "clock_skew"):
        out["ms"] = draw(st.integers(1, 500))
    return out


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    operator = draw(st.sampled_from(sorted(OPERATORS)))
    batches = draw(st.integers(2, 5))
    modes = ["sync", "async_purge", "async_state", "pipelining", "delta_provider", "snapshot_provider"]
    if operator == "map":
        modes.append("async_progress")
    mode = draw(st.sampled_from(modes))
    d = scenario_dict(operator, mode, seed=draw(st.integers(0, 10_000)), batches=batches,
                      retain=draw(st.integers(1, 4)), faults=[draw(fault(batches))])
    d["engine"]["state_store"]["min_deltas_for_snapshot"] = draw(st.integers(1, 3))
    if mode == "async_state":
        d["engine"]["state_store"]["provider"] = "changelog"
    if mode == "pipelining":
        d["engine"]["pipeline_depth"] = draw(st.sampled_from((2, 3, 4)))
    d["faults"] = reachable(d)
    return Scenario.from_dict(d)


@given(scenarios())
def test_every_oracle_holds_after_a_single_fault(scenario: Scenario):
    note(scenario.to_json())
    result = run_scenario(scenario)
    outcome = result.outcome()
    note("\n".join(result.observer.events))
    bad = failures(check_outcome(scenario, outcome, result.storage))
    assert bad == [], "\n".join(v.describe() for v in bad)


@given(scenarios())
def test_the_same_scenario_and_seed_give_identical_outcome_bytes(scenario: Scenario):
    first = run_scenario(scenario).outcome().to_json()
    second = run_scenario(Scenario.from_dict(scenario.to_dict())).outcome().to_json()
    verdict = determinism(first, second)
    assert verdict.ok, verdict.describe()
