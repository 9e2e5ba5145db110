"""The simulator's state cache misses (``state_cache_miss_probability``, ``state_open_ms``).

On Spark an executor's JVM keeps a partition's loaded store for its next task; on the Spark engine each of an
executor's Python workers keeps its own, and a task lands on any of them. The two optional profile parameters
charge such a miss as a load from the checkpoint; they change costs only, never what a run computes.
"""

from __future__ import annotations

import dataclasses

import pytest

from experiments.outcome_metrics import step_durations
from experiments.scenario_builders import rate_scenario
from reference.judge.compare import first_difference
from reference.protocol.run import run_scenario
from reference.language.scenario import Scenario
from sim import shipped_profile, simulate
from sim.cost_model import ProfileError, profile_from_dict

OPEN_MS = 40.0


def counting(seed: int = 3) -> Scenario:
    raw = rate_scenario("cache-miss", seed, rate=400, duration_s=3, operator={"kind": "aggregate"}, keys=50,
                        partitions=2, state_partitions=4, sink="exactly_once", engine={"batch_cuts": "fixed"})
    raw["source"]["batch_ms"] = 200   # 15 batches of 4 tasks
    return Scenario.from_dict(raw)


def loads(miss: float, mode: str, seed: int = 3) -> dict[tuple[int, int], float]:
    base = shipped_profile("local_spark")
    profile = dataclasses.replace(base, state_cache_miss_probability=miss, state_open_ms=OPEN_MS)
    sim = simulate(counting(seed), profile, mode=mode)
    return {(b, p): ms for b, p, _start, ms in step_durations(sim.trace, ("state_load",))["state_load"]}


@pytest.mark.parametrize("mode", ["data", "volume"])
def test_a_task_that_always_misses_pays_the_open_cost_and_one_that_never_does_pays_the_cached_cost(mode):
    cached = shipped_profile("local_spark").state_load_cached_ms
    never, always = loads(0.0, mode), loads(1.0, mode)
    assert len(never) > 8 and len(always) > 8   # (volume mode cuts by the clock: the batches differ)
    for (b, p), ms in never.items():
        assert ms == pytest.approx(cached, abs=0.01), (b, p)
    for (b, p), ms in always.items():
        if b == 0:   # nothing to load before the first batch
            assert ms == pytest.approx(cached, abs=0.01)
        else:
            assert ms >= OPEN_MS, f"batch {b} partition {p} missed but loaded in {ms} ms"


@pytest.mark.parametrize("mode", ["data", "volume"])
def test_misses_follow_their_probability_and_the_seed(mode):
    """Half the loads after the first batch miss, within what chance allows for this many draws; the same seed
    misses the same tasks, another seed others."""
    first = loads(0.5, mode)
    missed = {key for key, ms in first.items() if key[0] > 0 and ms >= OPEN_MS}
    draws = sum(1 for b, _p in first if b > 0)
    assert draws >= 40
    assert 0.25 * draws <= len(missed) <= 0.75 * draws, (len(missed), draws)
    assert {key for key, ms in loads(0.5, mode).items() if key[0] > 0 and ms >= OPEN_MS} == missed
    assert {key for key, ms in loads(0.5, mode, seed=4).items() if key[0] > 0 and ms >= OPEN_MS} != missed


def test_a_miss_changes_the_cost_never_the_result():
    scenario = counting()
    profile = dataclasses.replace(shipped_profile("local_spark"), state_cache_miss_probability=1.0,
                                  state_open_ms=OPEN_MS)
    outcome = simulate(scenario, profile).outcome()
    assert outcome.error is None
    assert first_difference(outcome, run_scenario(scenario).outcome(), scenario.sink_mode) is None


def test_the_miss_parameters_are_optional_and_a_probability_above_one_is_refused_by_name():
    raw = dict(vars(shipped_profile("lightspeed_cluster")))
    raw["storage"] = dataclasses.asdict(raw["storage"])
    for name in ("state_cache_miss_probability", "state_open_ms"):
        raw.pop(name)
    profile = profile_from_dict(raw)
    assert (profile.state_cache_miss_probability, profile.state_open_ms) == (0.0, 0.0)
    with pytest.raises(ProfileError, match="state_cache_miss_probability"):
        profile_from_dict({**raw, "state_cache_miss_probability": 1.5})
    with pytest.raises(ProfileError, match="state_open_ms"):
        profile_from_dict({**raw, "state_open_ms": -1})
