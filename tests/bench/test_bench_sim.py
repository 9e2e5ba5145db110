"""Simulator speed (pytest-benchmark; skipped by default, run with --benchmark-only).

Volume mode on the cluster profile (28 slots, 200 state partitions) at 1M
events/s for 600 simulated seconds, against SimPy's raw event rate (a plain
chain of timeouts) measured in the same run. The target is >= 100x faster
than real time (under 6 wall seconds); the assertion below is the bound the
simulator meets today (see the report in docs), the ratio is printed.
"""

from __future__ import annotations

import time
from typing import Any, Generator

import simpy

from reference.scenario import Scenario
from sim import simulate

SIM_SECONDS = 600
EVENTS_PER_SECOND = 1_000_000
STATE_PARTITIONS = 200
RAW_TIMEOUTS = 300_000
REAL_TIME_SPEEDUP_FLOOR = 20     # the target is 100 (600 simulated s in < 6 wall s)


def cluster_scenario() -> Scenario:
    return Scenario.from_dict({
        "name": "bench-volume", "seed": 1,
        "source": {"kind": "rate", "rows_per_second": EVENTS_PER_SECOND, "duration_s": SIM_SECONDS,
                   "partitions": 8, "keys": 100_000},
        "query": {"operator": {"kind": "aggregate", "agg": "count"}, "state_partitions": STATE_PARTITIONS},
        "sink": {"mode": "exactly_once"},
        "engine": {"trigger_interval_ms": 1000, "log_purge": {"min_batches_to_retain": 10}}})


def raw_timeout_chain(env: simpy.Environment, n: int) -> Generator:
    for _ in range(n):
        yield env.timeout(1)


def simpy_raw_rate() -> float:
    env = simpy.Environment()
    env.process(raw_timeout_chain(env, RAW_TIMEOUTS))
    start = time.perf_counter()
    env.run()
    return RAW_TIMEOUTS / (time.perf_counter() - start)


def test_volume_mode_cluster_scale(benchmark: Any) -> None:
    scenario = cluster_scenario()
    figures: dict[str, float] = {}

    def run() -> None:
        start = time.perf_counter()
        sim = simulate(scenario, "lightspeed_cluster", mode="volume", trace_enabled=False)
        wall_s = time.perf_counter() - start
        assert sim.error is None
        figures.update(wall_s=wall_s, sim_s=sim.end_ms / 1000.0, steps=sim.trace.count,
                       batches=len(sim.observer.batches))

    benchmark.pedantic(run, rounds=1, iterations=1)
    raw = simpy_raw_rate()
    steps_per_s = figures["steps"] / figures["wall_s"]
    speedup = figures["sim_s"] / figures["wall_s"]
    benchmark.extra_info.update(figures, steps_per_s=steps_per_s, simpy_raw_timeouts_per_s=raw,
                                ratio_to_raw=steps_per_s / raw, real_time_speedup=speedup)
    print(f"\nvolume mode: {figures['sim_s']:.0f} simulated s in {figures['wall_s']:.2f} wall s "
          f"({speedup:.0f}x real time), {figures['batches']:.0f} batches, {figures['steps']:.0f} steps, "
          f"{steps_per_s:,.0f} steps/s; SimPy raw {raw:,.0f} timeouts/s; ratio {steps_per_s / raw:.3f}")
    assert figures["sim_s"] >= SIM_SECONDS
    assert speedup >= REAL_TIME_SPEEDUP_FLOOR
