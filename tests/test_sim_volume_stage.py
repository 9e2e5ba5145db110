"""Volume mode's stages (``sim/stage.py``): a batch's tasks under one SimPy event give the same run, to the byte.

Three holds on it: the task-by-task path and the stage path are run side by side on every engine mode, operator
and fault family of ``volume_grid``; the grid's outcomes are pinned to the digests the simulator gave before
stages existed (``volume_grid_pins.json``, written by ``python tests/volume_grid.py`` at that commit); and the
parts a stage computes at once (its costs, its jitter draws) are checked against the per-task functions.
"""

from __future__ import annotations

import json
import os
import random
from typing import Any

import pytest
from volume_grid import digest, grid, scenario

from reference.storage_profiles import jitter_factor
from sim import Simulation, shipped_profile, simulate
from sim.simulation import CountingEnvironment
from sim.stage import StageRun
from sim.stage_jitter import stage_jitter
from sim.volume import VolumeIncarnation, _TaskStep

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
    sim = Simulation(sc, shipped_profile(profile), "volume", trace_enabled=False, env=env)
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


@pytest.mark.parametrize("name", ["1/sync/aggregate", "1/sync/join", "1/parallel-commit/join", "1/sync/map",
                                  "1/sync/dedup", "1/sync/aggregate/local_spark",
                                  "1/sync/aggregate/lightspeed_cluster_fitted", "1/inline-purge/window/timed-crash"])
def test_stage_costs_are_the_task_costs(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    _name, sc, profile = next(case for case in CASES if case[0] == name)
    original = VolumeIncarnation.stage_costs
    checked: list[int] = []

    def compare(self: VolumeIncarnation, b: int, steps: tuple[str, ...]) -> dict[str, list[float]]:
        got = original(self, b, steps)
        for step in steps:
            assert got[step] == [self.task_cost_ms(_TaskStep(step, b, p)) for p in range(self.parts)], (step, b)
        checked.append(b)
        return got

    monkeypatch.setattr(VolumeIncarnation, "stage_costs", compare)
    assert simulate(sc, profile, mode="volume", trace_enabled=False).outcome().error is None
    assert checked
