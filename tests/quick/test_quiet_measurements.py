"""Quiet measurements and points that stop when they are precise (issue 39, section 2).

- ``experiments.machine_load``: this process tree's CPU time is told apart from everything else's, children and
  reaped grandchildren included; a wall-clock unit above the threshold is noisy, a simulator unit never is.
- ``experiments.stopping``: the bootstrap interval of a p50 is seeded and says precise only within +-5%; a point
  that is not precise runs again twice as long until it is, or until its budget ends, and its record says which.
- The runner's budget starts no point that is not expected to end by the deadline.
"""

from __future__ import annotations

import resource
import subprocess
import sys
import time
from typing import Any

import pytest

from experiments.execution import Budget
from experiments.experiment import Experiment, Point
from experiments.machine_load import NOISY_SHARE, Load, LoadMeter, _Proc, tree_growth, tree_of
from experiments.measure import measure_point, run_point_scenario
from experiments.outcome_metrics import latency_metrics
from experiments.profiles import sim_profile
from experiments.scenario_builders import rate_scenario
from experiments.stopping import (BUDGET, FIXED, GROWTH, MIN_BATCHES, PRECISE, Round, Stopping, lengthened,
                                  p50_interval, run_in_rounds)

BUSY_CHILD = "sum(i * i for i in range(6_000_000))"


def test_the_meter_counts_a_child_process_as_this_tree_s_own_time() -> None:
    with LoadMeter() as meter:
        start = meter.mark()
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([sys.executable, "-c", BUSY_CHILD], check=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        load = meter.between(start, meter.mark(), judged=True)
    assert load is not None
    child = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    # the child's time is this tree's (clock ticks round each process's time down to a hundredth of a second)
    assert load.own_cpu_s >= child - 0.05, (load, child)
    assert load.other_cpu_s >= 0 and 0 <= load.other_share <= 1


def test_the_meter_counts_a_process_outside_the_tree_as_other_load() -> None:
    """The other half of the rule: CPU time spent outside the measured tree (here a sibling of its root) is other
    processes' load, and enough of it makes a wall-clock unit noisy."""
    root = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        with LoadMeter(root=root.pid) as meter:
            start = meter.mark()
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            subprocess.run([sys.executable, "-c", BUSY_CHILD], check=True)   # not a descendant of the root
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            load = meter.between(start, meter.mark(), judged=True)
    finally:
        root.kill()
        root.wait()
    assert load is not None
    busy = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    assert busy > 0.2 and load.other_cpu_s >= busy - 0.05, (load, busy)
    assert load.own_cpu_s < busy / 2, "the sleeping root used next to no CPU"
    assert load.noisy, "a core kept busy by another process is more than the threshold"


def test_a_process_reaped_inside_the_tree_is_counted_once() -> None:
    root = (100, 1)
    before = {root: _Proc(1, 50), (101, 2): _Proc(100, 30), (102, 3): _Proc(101, 7)}
    # 102 ended and its parent 101 reaped it: 101's cutime now holds 102's 9 ticks (7 seen before, 2 since)
    after = {root: _Proc(1, 55), (101, 2): _Proc(100, 30 + 4 + 9)}
    assert tree_growth(before, after) == 5 + 4 + 2
    # a pid used again by another process is a new process, and its whole time is new
    assert tree_growth({(7, 1): _Proc(100, 40)}, {(7, 2): _Proc(100, 3)}) == 3


def test_the_tree_is_the_root_and_its_descendants_only() -> None:
    processes = {(1, 0): _Proc(0, 1), (10, 5): _Proc(1, 1), (11, 6): _Proc(10, 1), (12, 7): _Proc(11, 1),
                 (20, 8): _Proc(1, 1)}
    assert set(tree_of(10, processes)) == {(10, 5), (11, 6), (12, 7)}


def test_only_wall_clock_units_are_noisy() -> None:
    busy = Load(wall_s=10.0, cpus=2, own_cpu_s=5.0, other_cpu_s=20.0 * NOISY_SHARE * 2, judged=True)
    assert busy.noisy and busy.to_dict()["noisy"] is True
    assert not Load(10.0, 2, 5.0, 20.0 * NOISY_SHARE / 2, judged=True).noisy
    assert not Load(10.0, 2, 5.0, 20.0, judged=False).noisy, "a simulator unit runs in simulated time"


def test_the_interval_is_seeded_and_says_precise_only_within_five_percent() -> None:
    steady = [100.0 + (i % 5) for i in range(200)]
    interval = p50_interval(steady, seed=1)
    assert interval is not None and interval.precise and interval == p50_interval(steady, seed=1)
    spread = [50.0 + 100.0 * ((i * 37) % 101) / 100 for i in range(40)]
    wide = p50_interval(spread, seed=1)
    assert wide is not None and not wide.precise and wide.low < wide.p50 < wide.high
    assert p50_interval(steady[:MIN_BATCHES - 1], seed=1) is None


def test_a_scenario_grows_by_its_source_and_one_without_a_growable_source_does_not() -> None:
    rate = rate_scenario("r", 1, rate=100, duration_s=3, operator={"kind": "map"})
    assert lengthened(rate, 4)["source"]["duration_s"] == 12 and rate["source"]["duration_s"] == 3
    assert lengthened({"name": "x", "source": {"kind": "explicit", "batches": []}}, 2) is None


def _rounds(durations_by_length: dict[int, list[float]], factor: float = 8.0) -> tuple[dict[str, Any], list[int]]:
    asked: list[int] = []
    scenario = rate_scenario("r", 1, rate=100, duration_s=10, operator={"kind": "map"})

    def one(sc: dict[str, Any]) -> tuple[dict[str, Any], Round]:
        length = int(sc["source"]["duration_s"] // 10)
        asked.append(length)
        return {"length": length}, Round(durations_by_length[length], cost_s=10.0 * length)

    metrics, report = run_in_rounds(scenario, 1, Stopping(budget_factor=factor), one, "simulated")
    assert metrics == {"length": asked[-1]} and report["length"] == asked[-1]
    return report, asked


def test_a_point_grows_until_it_is_precise_or_its_budget_ends() -> None:
    precise = [100.0] * 50
    noisy = [50.0 + 100.0 * ((i * 37) % 101) / 100 for i in range(40)]
    report, asked = _rounds({1: precise})
    assert report["rule"] == PRECISE and asked == [1]
    report, asked = _rounds({1: noisy, 2: noisy, 4: precise})
    assert report["rule"] == PRECISE and asked == [1, GROWTH, GROWTH ** 2]
    assert report["spent_s"] == 10 + 20 + 40 and [r["precise"] for r in report["rounds"]] == [False, False, True]
    # a budget of 4 rounds' worth allows the round of length 2 (3 in all), not the one of length 4 (7 in all)
    report, asked = _rounds({1: noisy, 2: noisy, 4: precise}, factor=4.0)
    assert report["rule"] == BUDGET and asked == [1, 2] and report["budget_s"] == 40


def test_a_point_whose_scenario_cannot_grow_runs_once() -> None:
    def one(sc: dict[str, Any]) -> tuple[dict[str, Any], Round]:
        return {}, Round([1.0, 2.0], 1.0)

    _metrics, report = run_in_rounds({"name": "x", "source": {"kind": "explicit"}}, 1, Stopping(), one, "wall")
    assert report["rule"] == FIXED and len(report["rounds"]) == 1


class _Timed(Experiment):
    name = "timed"
    stopping = Stopping()

    def measure(self, point: Point) -> dict[str, Any]:
        return latency_metrics(run_point_scenario(point).outcome)


def test_a_short_simulated_point_runs_longer_until_its_p50_is_precise() -> None:
    """Three simulated seconds hold too few batches for an interval: the point runs again, longer, on the
    simulator's clock, and its metrics are those of its last run."""
    scenario = rate_scenario("timed", 1, rate=2000, duration_s=3, operator={"kind": "map"}, partitions=2,
                             state_partitions=2)
    point = Point("timed", "latency", "c", {}, 1, "sim", scenario, sim_profile("lightspeed_cluster"), "volume")
    once = _Timed().measure(point)
    metrics, report = measure_point(_Timed(), point)
    assert report is not None and report["clock"] == "simulated" and report["rule"] == PRECISE
    assert report["length"] > 1 and report["rounds"][0]["batches"] < MIN_BATCHES
    assert metrics["latency_count"] == pytest.approx(once["latency_count"] * report["length"], rel=0.05)
    # simulated seconds, not wall time: every round ran at least its scenario's input seconds
    assert report["spent_s"] >= sum(3 * r["length"] for r in report["rounds"])
    assert measure_point(_Timed(), point) == (metrics, report), "the same point stops the same way"


def test_the_budget_starts_no_point_that_would_end_after_the_deadline() -> None:
    assert Budget().allows()
    assert Budget(time.time() + 100, expected_s=10).allows()
    assert not Budget(time.time() + 5, expected_s=10).allows()
    budget = Budget(time.time() + 50, expected_s=10)
    budget.ended({"wall_s": 80.0})
    assert not budget.allows(), "once points have ended, their mean time is what the next is expected to take"
