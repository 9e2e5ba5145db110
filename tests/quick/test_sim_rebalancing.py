"""State rebalancing in the simulator (issue 17, part 1): tasks follow the placement, a move pays a load.

The scenario is the hand case of ``test_reference_rebalancing.py``: state partitions 0..3 on a, b; c joins
before batch 2 (p3 b->c); a leaves before batch 4 (p0 a->b, p2 a->c). The simulated cluster has one executor
per id the scenario names, in sorted order: a = executor-0, b = executor-1, c = executor-2.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from test_reference_rebalancing import HAND_MOVES, counts, moves_of

from experiments.outcome_metrics import step_durations
from experiments.scenario_builders import rate_scenario
from reference.judge.compare import first_difference
from reference.judge.oracles import check_outcome, failures
from reference.protocol.run import run_scenario
from reference.language.scenario import Scenario
from sim import shipped_profile, simulate


@pytest.mark.parametrize("mode", ["sync", "async_state", "pipelining", "delta_provider"])
def test_the_simulator_moves_what_the_reference_moves_and_ends_in_the_same_state(mode):
    scenario = Scenario.from_dict(counts(mode))
    reference = run_scenario(scenario).outcome()
    sim = simulate(scenario)
    outcome = sim.outcome()
    assert outcome.error is None
    assert moves_of(outcome) == moves_of(reference) == HAND_MOVES
    assert first_difference(outcome, reference, scenario.sink_mode) is None
    assert failures(check_outcome(scenario, outcome, sim.storage)) == []


def test_tasks_run_on_the_executor_the_placement_names():
    sim = simulate(Scenario.from_dict(counts()))
    where = {e.action: e.component for e in sim.trace if e.action.startswith("task_apply")}
    assert [where[f"task_apply b1 p{p}"] for p in range(4)] == ["executor-0", "executor-1"] * 2   # a b a b
    assert [where[f"task_apply b2 p{p}"] for p in range(4)] == ["executor-0", "executor-1", "executor-0",
                                                                "executor-2"]                    # a b a c
    assert [where[f"task_apply b4 p{p}"] for p in range(4)] == ["executor-1", "executor-1", "executor-2",
                                                                "executor-2"]                    # b b c c


def test_only_a_moved_partition_pays_a_load_from_the_checkpoint():
    cached = shipped_profile("lightspeed_cluster").state_load_cached_ms
    sim = simulate(Scenario.from_dict(counts()), "lightspeed_cluster")   # S3-like: tens of ms a read
    loads = {(b, p): ms for b, p, _start, ms in step_durations(sim.trace, ("state_load",))["state_load"]}
    moved = {(b, p) for b, p, _f, _t in HAND_MOVES}
    for (b, p), ms in loads.items():
        if (b, p) in moved:
            assert ms > cached * 10, f"moved partition {p} of batch {b} loaded in {ms} ms"
        else:
            assert ms == pytest.approx(cached, abs=0.01), f"partition {p} of batch {b} was not cached ({ms} ms)"


def volume_run(state_scale: float, events: list[dict[str, Any]]) -> Any:
    raw = rate_scenario("rebalance-volume", 1, rate=20_000, duration_s=6, operator={"kind": "aggregate"},
                        keys=8_000, partitions=4, state_partitions=8)
    raw["executors"], raw["events"] = ["a", "b"], events
    base = shipped_profile("lightspeed_cluster")
    profile = dataclasses.replace(base, bytes_per_state_key=base.bytes_per_state_key * state_scale,
                                  state_replay_per_key_us=base.state_replay_per_key_us * state_scale)
    return simulate(Scenario.from_dict(raw), profile, mode="volume")


def test_in_volume_mode_a_move_costs_more_the_larger_the_state():
    """p4 (home a) and p5 (home b) go to c, whose home they are over a, b, c; the load reads and replays the
    keys the partition held, so ten times the bytes and replay per key cost more."""
    join = [{"kind": "executor_join", "executor": "c", "before_batch": 4}]
    costs = []
    for scale in (1, 10, 100):
        sim = volume_run(scale, join)
        assert moves_of(sim.outcome()) == [(4, 4, "a", "c"), (4, 5, "b", "c")]
        loads = {(b, p): ms for b, p, _s, ms in step_durations(sim.trace, ("state_load",))["state_load"]}
        costs.append(loads[(4, 4)])
        assert loads[(4, 3)] == pytest.approx(shipped_profile("lightspeed_cluster").state_load_cached_ms, abs=0.01)
    assert costs[0] < costs[1] < costs[2]
    assert costs[2] > 5 * costs[0]
