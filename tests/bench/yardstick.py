"""The yardstick every benchmark here is measured against: SimPy's raw event rate, in the same run.

Absolute times drift 2x with the machine's load, so a benchmark reports its
figure beside the raw rate of a plain SimPy chain of timeouts (one process
yielding ``env.timeout(1)`` in a loop) measured just before it, and their
ratio. Issue 28's targets are ratios of that kind.
"""

from __future__ import annotations

import time
from typing import Generator

import simpy

RAW_TIMEOUTS = 300_000


def raw_timeout_chain(env: simpy.Environment, n: int) -> Generator:
    for _ in range(n):
        yield env.timeout(1)


def simpy_raw_rate(timeouts: int = RAW_TIMEOUTS) -> tuple[float, float]:
    """Timeouts per wall second and per CPU second of a plain SimPy timeout chain."""
    env = simpy.Environment()
    env.process(raw_timeout_chain(env, timeouts))
    start, start_cpu = time.perf_counter(), time.process_time()
    env.run()
    return timeouts / (time.perf_counter() - start), timeouts / (time.process_time() - start_cpu)
