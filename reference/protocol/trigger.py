"""When a timed backend that cuts by its trigger plans the next batch, and where it cuts (spec section 1).

Spark's ``ProcessingTimeExecutor`` (``TriggerExecutor.scala``) runs the trigger
handler at a trigger time T and then waits until ``nextBatchTime(T)``: T itself
with a zero interval, else the next multiple of the interval strictly after T
(``T / interval * interval + interval``, so ``nextBatchTime(200) = 300`` for an
interval of 100). A handler that ran longer than the interval finds that time
passed and the next trigger runs at once. The handler
(``MicroBatchExecution.runActivatedStream``) plans a batch only when the source
has new data; otherwise it waits (a poll with a zero interval, the next tick
with a positive one).

Here time is milliseconds since the scenario's time 0, and ticks fall on
multiples of the interval in that time. Everything is pure arithmetic, so the
rules are tested without a clock; a backend asks ``trigger_plan_ms`` when a
batch whose step-graph dependencies are met may plan, and cuts with
``SourceData.arrived_by`` at the moment it does.
"""

from __future__ import annotations


def next_batch_time_ms(trigger_ms: float, interval_ms: int) -> float:
    """``ProcessingTimeExecutor.nextBatchTime``: when the trigger after one at ``trigger_ms`` fires."""
    if interval_ms < 0:
        raise ValueError(f"trigger interval {interval_ms} ms: must not be negative")
    if interval_ms == 0:
        return trigger_ms
    return (trigger_ms // interval_ms) * interval_ms + interval_ms


def trigger_plan_ms(interval_ms: int, previous_trigger_ms: float | None, ready_ms: float,
                    next_arrival_ms: float | None) -> float | None:
    """When the next batch is planned; None when no input is left to plan.

    ``previous_trigger_ms`` is when the incarnation's previous batch was planned (None for its first
    batch: a query's first trigger fires when it starts); ``ready_ms`` is when the protocol lets the
    batch plan (its step-graph dependencies met: the previous batch done, or room in the pipeline);
    ``next_arrival_ms`` is the arrival of the first record not yet in a batch.

    The batch plans at the first trigger at or after ``ready_ms`` that finds new input: with a zero
    interval, once ready and the record has arrived; with a positive interval, at ``ready_ms`` if the
    previous batch overran its interval, else at the interval's next multiple, and while no input has
    arrived at the following multiples.
    """
    if next_arrival_ms is None:
        return None
    fire = ready_ms
    if interval_ms > 0 and previous_trigger_ms is not None:
        fire = max(fire, next_batch_time_ms(previous_trigger_ms, interval_ms))
    if next_arrival_ms <= fire:
        return fire
    if interval_ms == 0:
        return next_arrival_ms
    return -(-next_arrival_ms // interval_ms) * interval_ms   # the first multiple at or after the arrival
