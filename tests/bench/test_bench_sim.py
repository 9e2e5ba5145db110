"""Simulator speed (pytest-benchmark; skipped by default, run with --benchmark-only).

The simulator's target (issue 28, item 1): volume mode on the cluster profile
(28 slots, 200 state partitions) at 1M events/s for 600 simulated seconds at
1000x real time or better: within 0.6 wall seconds on this machine, or within
``RAW_CHAIN_RATIO_TARGET`` times the raw SimPy chain measured in the same run
(the chain of ``yardstick.RAW_TIMEOUTS`` timeouts; 3x is 900,000 timeouts of
work for the whole run). The older bound (6 wall seconds, 100x real time) is
still asserted.

Two benchmarks, recorded by pytest-benchmark in the same run:

- ``test_simpy_raw_event_rate``: SimPy's raw event rate on this machine, a
  plain chain of timeouts (one process yielding ``env.timeout(1)`` in a loop);
- ``test_volume_mode_cluster_scale``: the cluster-scale volume run. Its
  ``extra_info`` holds the simulated, wall and CPU time, the protocol steps the
  simulator executed and the SimPy events it processed, each per wall second,
  their ratio to the raw timeout rate, and the run's time as a multiple of the
  raw chain's (``wall_ratio_to_raw_chain``, ``cpu_ratio_to_raw_chain``; the
  chain is measured again in the same test, before each round, so both see the
  same machine load; the best of each).

The run is single-threaded, so its CPU time is its wall time on an idle
machine: the bounds are asserted on CPU time, and on wall time too except
while the machine runs more processes than it has cores (the load average
says so, and the test prints it).
"""

from __future__ import annotations

import os
import time
from typing import Any

import simpy
from yardstick import RAW_TIMEOUTS, raw_timeout_chain, simpy_raw_rate

from reference.language.scenario import Scenario
from sim import Simulation, shipped_profile, simulate
from sim.simulation import CountingEnvironment

SIM_SECONDS = 600
EVENTS_PER_SECOND = 1_000_000
STATE_PARTITIONS = 200
WALL_SECONDS_LIMIT = 6.0          # 600 simulated seconds in under 6 wall seconds
REAL_TIME_SPEEDUP_FLOOR = 100
RAW_CHAIN_RATIO_TARGET = 3.0      # the run in at most 3x the raw chain's time, measured in the same run


def cluster_scenario() -> Scenario:
    return Scenario.from_dict({
        "name": "bench-volume", "seed": 1,
        "source": {"kind": "rate", "rows_per_second": EVENTS_PER_SECOND, "duration_s": SIM_SECONDS,
                   "partitions": 8, "keys": 100_000},
        "query": {"operator": {"kind": "aggregate", "agg": "count"}, "state_partitions": STATE_PARTITIONS},
        "sink": {"mode": "exactly_once"},
        "engine": {"trigger_interval_ms": 1000, "log_purge": {"min_batches_to_retain": 10}}})


def test_simpy_raw_event_rate(benchmark: Any) -> None:
    def run() -> None:
        env = simpy.Environment()
        env.process(raw_timeout_chain(env, RAW_TIMEOUTS))
        env.run()

    benchmark.pedantic(run, rounds=3, iterations=1)
    rate = RAW_TIMEOUTS / benchmark.stats.stats.min
    benchmark.extra_info.update(timeouts=RAW_TIMEOUTS, timeouts_per_s=rate)
    print(f"\nSimPy raw: {rate:,.0f} timeouts/s")
    assert rate > 0


def test_volume_mode_cluster_scale(benchmark: Any) -> None:
    scenario = cluster_scenario()
    runs: list[dict[str, float]] = []

    def run() -> None:
        start, start_cpu = time.perf_counter(), time.process_time()
        sim = simulate(scenario, "lightspeed_cluster", mode="volume", trace_enabled=False)
        wall_s, cpu_s = time.perf_counter() - start, time.process_time() - start_cpu
        assert sim.error is None
        runs.append(dict(wall_s=wall_s, cpu_s=cpu_s, sim_s=sim.end_ms / 1000.0, steps=sim.trace.count,
                         batches=len(sim.observer.batches), rows=sum(p.num_input_rows for p in sim.observer.progress)))

    raw_rates: list[tuple[float, float]] = []

    def measure_raw() -> None:   # before each round, untimed: the same machine state as the run after it
        raw_rates.append(simpy_raw_rate())

    benchmark.pedantic(run, setup=measure_raw, rounds=3, iterations=1)
    figures = min(runs, key=lambda r: r["wall_s"])
    figures["cpu_s"] = min(r["cpu_s"] for r in runs)
    load = os.getloadavg()[0]
    oversubscribed = load > (os.cpu_count() or 1)
    raw = max(r[0] for r in raw_rates)       # best of each, so the ratio compares like with like
    raw_cpu = max(r[1] for r in raw_rates)   # per CPU second: less sensitive to other processes
    # SimPy events of one more run, counted by the environment (not timed: counting slows it down)
    counting = CountingEnvironment()
    Simulation(scenario, shipped_profile("lightspeed_cluster"), "volume", trace_enabled=False, env=counting).run()
    steps_per_s = figures["steps"] / figures["wall_s"]
    events_per_s = counting.processed / figures["wall_s"]
    cpu_ratio = figures["steps"] / figures["cpu_s"] / raw_cpu
    speedup = figures["sim_s"] / figures["wall_s"]
    chain_ratio = figures["wall_s"] / (RAW_TIMEOUTS / raw)          # the run against the raw chain, in time
    chain_cpu_ratio = figures["cpu_s"] / (RAW_TIMEOUTS / raw_cpu)
    benchmark.extra_info.update(figures, simpy_events=counting.processed, steps_per_s=steps_per_s,
                                simpy_events_per_s=events_per_s, simpy_raw_timeouts_per_s=raw,
                                simpy_raw_timeouts_per_cpu_s=raw_cpu, steps_ratio_to_raw=steps_per_s / raw,
                                events_ratio_to_raw=events_per_s / raw, steps_ratio_to_raw_cpu=cpu_ratio,
                                real_time_speedup=speedup, load_average=load, wall_ratio_to_raw_chain=chain_ratio,
                                cpu_ratio_to_raw_chain=chain_cpu_ratio)
    print(f"\nvolume mode: {figures['sim_s']:.0f} simulated s, {figures['rows']:,.0f} events, in "
          f"{figures['wall_s']:.2f} wall s, {figures['cpu_s']:.2f} CPU s ({speedup:.0f}x real time; load average "
          f"{load:.1f} on {os.cpu_count()} cores); {figures['batches']:.0f} batches, "
          f"{figures['steps']:,.0f} protocol steps ({steps_per_s:,.0f}/s), {counting.processed:,} SimPy events "
          f"({events_per_s:,.0f}/s); SimPy raw {raw:,.0f} timeouts/s; ratio to raw: steps "
          f"{steps_per_s / raw:.3f}, SimPy events {events_per_s / raw:.3f}; per CPU second: steps {cpu_ratio:.3f}; "
          f"the run took {chain_ratio:.2f}x the raw chain's wall time ({chain_cpu_ratio:.2f}x its CPU time; "
          f"target {RAW_CHAIN_RATIO_TARGET:.0f}x)")
    assert figures["sim_s"] >= SIM_SECONDS
    assert figures["rows"] >= EVENTS_PER_SECOND * SIM_SECONDS * 0.999   # the whole input went through
    # The run is single-threaded: its CPU time is what its wall time is on an idle machine.
    assert figures["cpu_s"] < WALL_SECONDS_LIMIT
    assert chain_cpu_ratio <= RAW_CHAIN_RATIO_TARGET
    if oversubscribed:   # more runnable processes than cores: the wall clock measures the neighbours too
        print(f"wall-clock bound not judged: load average {load:.1f} > {os.cpu_count()} cores")
    else:
        assert figures["wall_s"] < WALL_SECONDS_LIMIT
        assert speedup >= REAL_TIME_SPEEDUP_FLOOR
        assert chain_ratio <= RAW_CHAIN_RATIO_TARGET
