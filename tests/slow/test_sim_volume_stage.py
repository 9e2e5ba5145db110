"""Volume mode's stages (``sim/stage.py``): a batch's tasks under one SimPy event give the same run, to the byte.

Three holds on it: the task-by-task path and the stage path are run side by side on every engine mode, operator
and fault family of ``volume_grid``; the grid's outcomes are pinned to the digests the simulator gave before
stages existed (``volume_grid_pins.json``, written by ``python tests/volume_grid.py`` at commit c01df48); and the
parts a stage computes at once (its costs, its jitter draws) are checked against the per-task functions.
"""

from __future__ import annotations

import json
import math
import os
import random
from typing import Any

import numpy as np
import pytest
from hypothesis import given, note, settings
from test_sim_strategies import scenario_strategy
from volume_grid import STEADY, digest, grid, profile_of, scenario

from reference.language.scenario import Scenario
from reference.protocol.storage_profiles import jitter_factor, normal_quantile
from sim import Simulation, simulate
from sim.simulation import CountingEnvironment
from sim.stage import StageRun, StageTemplate
from sim.stage_jitter import _normal_quantile, stage_jitter
from sim.volume import TaskStep, VolumeCosts, VolumeIncarnation

PINS = os.path.join(os.path.dirname(__file__), "volume_grid_pins.json")
CASES = list(grid())


def test_stage_jitter_is_the_scalar_draw_function_to_the_bit() -> None:
    rng = random.Random(28)
    bases = [0, 1, 2 ** 62 - 1] + [rng.getrandbits(62) for _ in range(12)]
    for base in bases:
        for sigma in (0.05, 0.3, 2.5):
            for count in (1, 10, 11, 101, 1001):   # every width of the partition number's digits
                got = stage_jitter(sigma, base, count).tolist()
                assert got == [jitter_factor(sigma, f"stage/{base}/{i}") for i in range(count)], (base, sigma, count)
    assert stage_jitter(0.0, 5, 3).tolist() == [1.0, 1.0, 1.0]
    # each branch of the quantile and the edges between them
    edges = [1e-300, 1e-10, 1e-4, 0.02424, 0.02425, 0.02426, 0.3, 0.5, 0.7, 0.97574, 0.97575, 0.97576, 0.9999,
             1 - 1e-16]
    assert _normal_quantile(np.array(edges)).tolist() == [normal_quantile(u) for u in edges]


def test_volume_outcomes_are_the_pinned_ones() -> None:
    """Every grid case gives the outcome, trace count and end time it gave before stages existed."""
    with open(PINS) as f:
        pins = json.load(f)
    assert set(pins) == {name for name, _sc, _profile in CASES}
    changed = [name for name, sc, profile in CASES if digest(sc, profile) != pins[name]]
    assert not changed, f"volume outcomes changed: {changed}"


def run(sc: Any, profile: str, stages: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[str, int, float, int]:
    monkeypatch.setattr(VolumeIncarnation, "run_stages", stages)
    env = CountingEnvironment()
    sim = Simulation(sc, profile_of(profile), "volume", trace_enabled=False, env=env)
    sim.run()
    return sim.outcome().to_json(), sim.trace.count, sim.end_ms, env.processed


@pytest.mark.parametrize("name", [name for name, _sc, _p in CASES if name.startswith("2/")])
def test_stages_give_the_run_of_task_by_task(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    _name, sc, profile = next(case for case in CASES if case[0] == name)
    staged = run(sc, profile, True, monkeypatch)
    tasks = run(sc, profile, False, monkeypatch)
    assert staged[:3] == tasks[:3]
    assert staged[3] <= tasks[3]


def test_a_sync_batch_runs_as_one_stage_and_pipelining_does_not(monkeypatch: pytest.MonkeyPatch) -> None:
    """Stages take the SimPy events of a batch's tasks away; pipelined batches share slots, so they keep them."""
    sync = run(scenario(1, "sync", "aggregate", "none"), "lightspeed_cluster", True, monkeypatch)
    sync_tasks = run(scenario(1, "sync", "aggregate", "none"), "lightspeed_cluster", False, monkeypatch)
    assert sync[3] * 2 < sync_tasks[3]
    piped = run(scenario(1, "pipelining", "aggregate", "none"), "lightspeed_cluster", True, monkeypatch)
    piped_tasks = run(scenario(1, "pipelining", "aggregate", "none"), "lightspeed_cluster", False, monkeypatch)
    assert piped[3] == piped_tasks[3]


def test_a_fault_still_to_fire_keeps_the_batches_task_by_task(monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch instantiated while a fault may still fire runs its tasks one by one; after it, stages resume."""
    started: list[int] = []
    original = StageRun.start

    def spy(self: StageRun, node: Any) -> None:
        started.append(node.batch)
        original(self, node)

    monkeypatch.setattr(StageRun, "start", spy)
    sim = simulate(scenario(1, "sync", "window", "driver-crash"), "lightspeed_cluster", mode="volume",
                   trace_enabled=False)
    assert sim.outcome().error is None and not sim.outcome().faults_not_fired
    assert started and min(started) >= 3, "no stage before the crash at batch 3's commit log write"


def test_stages_resume_once_a_latency_spike_is_over(monkeypatch: pytest.MonkeyPatch) -> None:
    """A spike makes steps that start inside it wait; once it has ended no step waits, so batches run as stages."""
    started: list[tuple[int, float]] = []
    original = StageRun.start

    def spy(self: StageRun, node: Any) -> None:
        started.append((node.batch, self.run.env.now))
        original(self, node)

    monkeypatch.setattr(StageRun, "start", spy)
    sim = simulate(scenario(1, "sync", "window", "spike", partitions=64), "lightspeed_cluster", mode="volume",
                   trace_enabled=False)
    assert sim.outcome().error is None and not sim.outcome().faults_not_fired
    (spike_start, spike_end), = sim.service.spikes
    assert started and all(at >= spike_start for _b, at in started)
    assert min(at for _b, at in started) >= spike_end


@pytest.mark.parametrize("name", ["1/sync/aggregate", "1/sync/join", "1/parallel-commit/join", "1/sync/map",
                                  "1/sync/dedup", "1/sync/aggregate/local_spark",
                                  "1/sync/aggregate/lightspeed_cluster_fitted", "1/inline-purge/window/timed-crash",
                                  "1/sync/window/driver-crash", "1/sync/aggregate/placed",
                                  "1/sync/window/64/lightspeed_cluster"])
def test_stage_costs_are_the_task_costs(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    _name, sc, profile = next(case for case in CASES if case[0] == name)
    original = VolumeCosts.stage_costs
    checked: list[int] = []

    def compare(self: VolumeCosts, b: int, steps: tuple[str, ...]) -> dict[str, list[float]]:
        got = original(self, b, steps)
        for step in steps:
            assert got[step] == [self.task_cost_ms(TaskStep(step, b, p)) for p in range(self.parts)], (step, b)
        checked.append(b)
        return got

    monkeypatch.setattr(VolumeCosts, "stage_costs", compare)
    assert simulate(sc, profile_of(profile), mode="volume", trace_enabled=False).outcome().error is None
    assert checked


def test_the_schedule_per_executor_is_the_event_queue_s_or_defers_to_it() -> None:
    """Random stages, with costs that tie often (whole milliseconds) and never (jittered): where the per-executor
    schedule answers, its end and its order of charges are the event queue's; where charges tie, it defers."""
    rng = random.Random(7)
    answered = deferred = 0
    for trial in range(400):
        parts, executors, cores = rng.randint(1, 40), rng.randint(1, 5), rng.randint(1, 3)
        steady = trial % 2 == 0
        runs = (("state_load", "task_apply", "changelog_write", "state_commit"), ("sink_write",))
        tasks = tuple((p, runs) for p in range(parts))
        template = StageTemplate((), 0, tasks, charging=tuple((p, (0,)) for p in range(parts)))

        def cost() -> float:
            return float(rng.randint(0, 3)) if steady else rng.uniform(0.1, 50.0)

        run_costs = {p: [tuple(cost() for _ in steps) for steps in runs] for p in range(parts)}
        home = {p: p % executors for p in range(parts)}
        arrive = rng.choice([0.0, 1.5, 1234.567])
        fast = StageRun.schedule_by_executor(list(range(parts)), run_costs, dict(template.charging), home, cores,
                                             arrive)
        last, started, chain = StageRun.schedule(template, run_costs, home, [cores] * executors, arrive)
        at = arrive
        for delay in chain:   # the chain of timeouts reaches the last end, in SimPy's sums
            at = at + delay
        assert at == last
        queued = [(p, k) for p, k in started if k == 0]
        if fast is None:
            deferred += 1
        else:
            answered += 1
            assert fast[:2] == (last, queued), trial
            at = arrive
            for delay in fast[2]:
                at = at + delay
            assert at == last
    assert answered > 100 and deferred > 50


def test_steady_costs_defer_to_the_event_queue_and_give_the_same_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without jitter many tasks end together: the stage asks the event queue for the order, to the same bytes."""
    sc = scenario(1, "sync", "window", "none", partitions=64)
    assert run(sc, STEADY, True, monkeypatch)[:3] == run(sc, STEADY, False, monkeypatch)[:3]


@settings(max_examples=40)
@given(scenario_strategy())
def test_stages_give_the_run_of_task_by_task_on_generated_scenarios(scenario: Scenario) -> None:
    """The differential tests' scenarios (every operator, mode and fault schedule): the same bytes both ways."""
    note(scenario.to_json())
    with pytest.MonkeyPatch.context() as patch:
        for profile in ("lightspeed_cluster", STEADY):
            assert run(scenario, profile, True, patch)[:3] == run(scenario, profile, False, patch)[:3]


def test_a_stage_reaches_its_end_along_its_tasks_timeouts() -> None:
    """Why a stage follows its last task's chain of timeouts: SimPy adds a delay to the clock, and some times
    lie between two sums it can form from a given start (seen in the checkpoint-interval experiment's run)."""
    start, end = 222.1512478683858, 479.1491640934167
    delay = end - start
    near = [delay]
    for _ in range(4):
        near += [math.nextafter(near[-1], math.inf)]
    below = [delay]
    for _ in range(4):
        below += [math.nextafter(below[-1], -math.inf)]
    assert all(start + d != end for d in near + below)
