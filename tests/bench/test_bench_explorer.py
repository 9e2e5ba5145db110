"""Explorer speed: schedules checked per second on the 2-partition, 4-batch scenario, beside raw SimPy.

Run with ``pytest tests/bench --benchmark-only``. For each operator and mode
pair it prints the schedules and the distinct crash checkpoints explored
(the explorer's distinct states, as TLC reports them), the schedules per wall
second and per CPU second of this process and its workers, and the raw SimPy
timeout rate measured just before (``yardstick.py``) with the ratio of the
two, which is what compares across machines and loads. Issue 28's target is
twice the previous round's schedules per second per pair: run this file on
both commits in one session and compare the ratios. The schedule and
checkpoint counts must not move (``tests/explorer_pins.json``).
"""

from __future__ import annotations

import os
import resource
import time

import pytest
from yardstick import simpy_raw_rate

from reference.language.catalogue import make
from reference.judge.explorer import explore


def _cpu_s() -> float:
    """CPU seconds of this process and of its finished children (the explorer's worker processes)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.mark.parametrize("operator,mode", [("aggregate", "sync"), ("aggregate", "async_state"),
                                           ("window_aggregate", "pipelining"), ("join", "sync")])
def test_explorer_schedules_per_second(benchmark, capsys, operator, mode):
    scenario = make(operator, mode, batches=4, partitions=2)
    raw: list[float] = []
    cpu: list[float] = []

    def run():
        raw.append(simpy_raw_rate()[0])   # untimed by the benchmark: just before the run, the same machine state
        start = _cpu_s()
        report = explore(scenario)
        cpu.append(_cpu_s() - start)
        return report

    report = benchmark.pedantic(run, rounds=1, iterations=1)
    rate = report.schedules / report.seconds
    per_cpu = report.schedules / cpu[0]
    benchmark.extra_info.update(schedules=report.schedules, distinct_checkpoints=report.distinct_checkpoints,
                                schedules_per_second=round(rate, 1), schedules_per_cpu_second=round(per_cpu, 1),
                                simpy_raw_timeouts_per_s=round(raw[0]),
                                schedules_per_million_raw_timeouts=round(rate / raw[0] * 1e6, 1),
                                load_average=os.getloadavg()[0])
    with capsys.disabled():
        print(f"\nexplorer {operator}/{mode}: {report.schedules:,} schedules, {report.distinct_checkpoints:,} distinct "
              f"checkpoints in {report.seconds:.2f} s: {rate:,.0f} schedules/s ({per_cpu:,.0f} per CPU s); SimPy raw "
              f"{raw[0]:,.0f} timeouts/s; {rate / raw[0] * 1e6:.1f} schedules per million raw timeouts "
              f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores, {time.strftime('%H:%M:%S')})")
    assert report.violations == [] and not report.truncated
