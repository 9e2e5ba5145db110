"""Explorer speed: schedules checked per second on the 2-partition, 4-batch scenario.

Run with ``pytest tests/bench --benchmark-only``. The issue's target is a full
single-fault exploration under 10 s for any one operator and mode.
"""

from __future__ import annotations

import pytest

from reference.explorer import explore
from reference.catalogue import make


@pytest.mark.parametrize("operator,mode", [("aggregate", "sync"), ("aggregate", "async_state"),
                                           ("window_aggregate", "pipelining"), ("join", "sync")])
def test_explorer_schedules_per_second(benchmark, operator, mode):
    scenario = make(operator, mode, batches=4, partitions=2)
    report = benchmark.pedantic(explore, args=(scenario,), rounds=1, iterations=1)
    benchmark.extra_info["schedules"] = report.schedules
    benchmark.extra_info["distinct_checkpoints"] = report.distinct_checkpoints
    benchmark.extra_info["schedules_per_second"] = round(report.schedules / report.seconds, 1)
    assert report.violations == []
