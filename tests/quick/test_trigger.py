"""Spark's trigger as arithmetic (``reference/protocol/trigger.py``), with numbers derived by hand, no clock.

``ProcessingTimeExecutor.nextBatchTime(now) = now / interval * interval + interval`` (integer division),
``now`` itself for a zero interval; the executor waits until that time after a batch, and a batch that ran
past it is followed at once. A batch plans only when new input has arrived.
"""

from __future__ import annotations

import pytest

from reference.language.scenario import Scenario
from reference.protocol.sources import SourceData
from reference.protocol.trigger import next_batch_time_ms, trigger_plan_ms


def test_the_next_batch_time_is_the_next_multiple_of_the_interval_strictly_after_the_trigger():
    assert next_batch_time_ms(0, 100) == 100
    assert next_batch_time_ms(99, 100) == 100
    assert next_batch_time_ms(100, 100) == 200     # Spark's own example: nextBatchTime(nextBatchTime(0)) = 200
    assert next_batch_time_ms(250.5, 100) == 300
    assert next_batch_time_ms(250.5, 0) == 250.5   # the default trigger: no wait
    with pytest.raises(ValueError, match="must not be negative"):
        next_batch_time_ms(0, -1)


def test_a_positive_interval_plans_at_the_next_multiple_or_at_once_after_an_overrun():
    # batch 0 planned at 0; batch 1 ready (batch 0 done) at 30; input waiting since 50: the tick at 100
    assert trigger_plan_ms(100, 0, 30, 50) == 100
    # batch 0 ran until 250, past its interval: batch 1 plans at once
    assert trigger_plan_ms(100, 0, 250, 50) == 250
    # planned at 250 (an overrun), ready at 260: the next tick is 300, not 350
    assert trigger_plan_ms(100, 250, 260, 255) == 300
    # no input at the ticks 100..400; the record arriving at 420 is taken at the tick of 500
    assert trigger_plan_ms(100, 0, 30, 420) == 500
    # a record arriving exactly on a tick is taken at that tick (arrival_ms <= now is in)
    assert trigger_plan_ms(100, 0, 30, 400) == 400
    # an overrun, and the record arrives exactly when the batch is ready: it plans then, not at the next tick
    assert trigger_plan_ms(100, 0, 250, 250) == 250
    # a 1 ms interval is a positive interval too: the next tick after a trigger at 10 is 11
    assert trigger_plan_ms(1, 10, 10, 5) == 11
    # an incarnation's first batch: the trigger fires when the query starts
    assert trigger_plan_ms(100, None, 30, 10) == 30
    assert trigger_plan_ms(100, None, 30, 170) == 200


def test_the_default_trigger_plans_as_soon_as_ready_and_input_has_arrived():
    assert trigger_plan_ms(0, 0, 30, 10) == 30    # input waiting: plan when the protocol allows
    assert trigger_plan_ms(0, 0, 30, 75) == 75    # nothing new at 30: plan when the record arrives
    assert trigger_plan_ms(0, None, 0, 0) == 0
    assert trigger_plan_ms(0, 0, 30, None) is None   # nothing left to plan


def _data() -> SourceData:
    # partition 0 arrives at 0, 100, 100, 250; partition 1 at 50, 300
    records = [[0, "a", 1, 0, 0], [0, "b", 1, 0, 100], [0, "c", 1, 0, 100], [0, "d", 1, 0, 250],
               [1, "a", 1, 0, 50], [1, "b", 1, 0, 300]]
    return SourceData(Scenario.from_dict({"name": "arrivals", "seed": 1,
                                          "source": {"kind": "explicit", "batch_ms": 1000, "records": records},
                                          "query": {"operator": {"kind": "aggregate", "agg": "count"}}}))


def test_a_trigger_cut_takes_every_record_that_has_arrived_and_never_ends_before_the_start():
    data = _data()
    assert data.arrived_by(100, (0, 0)) == (3, 1)
    assert data.arrived_by(99.9, (0, 0)) == (1, 1)
    assert data.arrived_by(0, (2, 0)) == (2, 0)
    assert data.arrived_by(10_000, (0, 0)) == (4, 2)
    assert data.next_arrival_ms((0, 0)) == 0
    assert data.next_arrival_ms((3, 1)) == 250
    assert data.next_arrival_ms((4, 1)) == 300
    assert data.next_arrival_ms((4, 2)) is None


def _rate_scenario(interval_ms: int) -> Scenario:
    # four records a second: they arrive at 0, 250, 500 and 750 ms
    return Scenario.from_dict({
        "name": "sim-trigger", "seed": 1,
        "source": {"kind": "rate", "rows_per_second": 4, "duration_s": 1, "partitions": 1, "keys": 2},
        "query": {"operator": {"kind": "map"}, "state_partitions": 1}, "sink": {"mode": "at_least_once"},
        "engine": {"trigger_interval_ms": interval_ms, "progress": {"mode": "sync"}, "log_purge": {"mode": "async"}}})


@pytest.mark.parametrize("interval_ms, plans", [
    # the default trigger plans each record as it arrives (a batch takes a few ms on the exact profile)
    (0, [0.0, 250.0, 500.0, 750.0]),
    # ticks at multiples of 100: the tick at 100 and 200 find nothing, 300 takes the record of 250; the
    # tick at 400 finds nothing, 500 takes the one arriving on it; 800 the one of 750. One interval after
    # the last plan instead would plan at 250, 500 and 750.
    (100, [0.0, 300.0, 500.0, 800.0]),
])
def test_the_simulator_plans_at_the_trigger_spark_would_fire(interval_ms: int, plans: list[float]) -> None:
    from sim import simulate
    from tests.quick.test_sim_offset_management import exact_profile
    sim = simulate(_rate_scenario(interval_ms), exact_profile(), mode="volume")
    progress = sim.outcome().progress
    assert [p.timestamp_ms for p in progress] == plans
    assert [p.num_input_rows for p in progress] == [1, 1, 1, 1]
