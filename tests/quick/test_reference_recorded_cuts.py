"""The reference replays the batch boundaries a timed backend chose (spec section 1, triggers).

A timed backend cuts explicit and rate sources by its trigger on its own
clock, so its boundaries differ from the untimed clock's. Given those
boundaries, the reference runs the same batches, and its state and output
are the failure-free run over them.
"""

from __future__ import annotations

from reference.judge.oracles import check_outcome, failures
from reference.protocol.run import recorded_cuts_of, run_scenario
from reference.language.scenario import Scenario


def scenario(faults: list[dict] | None = None) -> Scenario:
    # ten records per partition, one every 100 ms; the untimed clock cuts every second: one batch
    records = [[p, f"k{i % 3}", i, i * 100, i * 100] for p in range(2) for i in range(10)]
    return Scenario.from_dict({"name": "recorded-cuts", "seed": 3,
                               "source": {"kind": "explicit", "batch_ms": 1000, "records": records},
                               "query": {"operator": {"kind": "aggregate", "agg": "sum"}, "state_partitions": 2},
                               "faults": faults or []})


def test_the_untimed_clock_cuts_every_batch_ms_but_a_recorded_cut_is_replayed_as_given():
    assert [b.end_offsets for b in run_scenario(scenario()).outcome().batches] == [(10, 10)]
    cuts = {0: (3, 4), 1: (7, 7), 2: (10, 10)}     # as a trigger on a faster clock might have cut
    outcome = run_scenario(scenario(), recorded_cuts=cuts).outcome()
    assert [(b.start_offsets, b.end_offsets) for b in outcome.batches] == \
        [((0, 0), (3, 4)), ((3, 4), (7, 7)), ((7, 7), (10, 10))]
    assert failures(check_outcome(scenario(), outcome)) == []


def test_replaying_an_outcome_s_own_cuts_reproduces_its_state_and_sink_after_a_crash():
    crash = [{"at": {"step": "offset_log_write", "batch": 1, "when": "after"}, "kind": "driver_crash"}]
    cuts = {0: (2, 2), 1: (5, 6), 2: (10, 10)}
    first = run_scenario(scenario(crash), recorded_cuts=cuts)
    again = run_scenario(scenario(), recorded_cuts=recorded_cuts_of(first.outcome()))
    assert first.outcome().recoveries[0].rerun_batches == (1,)
    assert again.outcome().state == first.outcome().state
    assert again.outcome().sink == first.outcome().sink
