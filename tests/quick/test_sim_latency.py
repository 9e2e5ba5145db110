"""End-to-end latency ends when a record FIRST becomes visible at the sink, never at a re-delivery.

Issue 14 (items 6 and 8): measuring a record's latency at its last delivery
turned a p50 of 87 ms into 5 s after a crash, and nothing noticed. These
tests pin the rule with hand-derived times: a profile in which every step is
free, so a batch is visible the moment its input has arrived, and a restart
takes exactly ``restart_ms``.
"""

from __future__ import annotations

import json
from typing import Any

from reference.language.scenario import Scenario
from reference.protocol.timing import LatencySummary
from sim import simulate
from sim.cost_model import PROFILE_DIR
from sim.latency import RangeLatency

RESTART_MS = 1000


def free_profile() -> dict[str, Any]:
    """Every step costs nothing; a restart takes ``RESTART_MS``."""
    with open(f"{PROFILE_DIR}/local_spark.json") as fh:
        raw = json.load(fh)
    for name, value in raw.items():
        if isinstance(value, (int, float)) and name not in ("executors", "cores_per_executor"):
            raw[name] = 0
    raw.update(executors=1, cores_per_executor=1, straggler_slowdown=1, restart_ms=RESTART_MS)
    raw["storage"] = {"small_write_ms": 0, "rename_ms": 0, "list_ms": 0, "delete_ms": 0, "read_ms": 0,
                      "bandwidth_mb_per_s": 1e9, "jitter_sigma": 0}
    return raw


# One source partition, batches of 100 ms of arrivals: batch 0 holds the records arriving at 10 and 20,
# batch 1 those at 110 and 150, batch 2 the one at 210. [partition, key, value, event_time_ms, arrival_ms]
RECORDS = [[0, "a", 1, 10, 10], [0, "b", 1, 20, 20], [0, "a", 1, 110, 110], [0, "c", 1, 150, 150],
           [0, "b", 1, 210, 210]]


def crash_after_sink_commit_of_batch_1() -> Scenario:
    return Scenario.from_dict({
        "name": "latency-first-visibility", "seed": 1,
        "source": {"kind": "explicit", "batch_ms": 100, "records": RECORDS},
        "query": {"operator": {"kind": "aggregate", "agg": "count"}, "state_partitions": 1},
        "sink": {"mode": "exactly_once"}, "engine": {},
        "faults": [{"at": {"step": "sink_commit", "batch": 1, "when": "after"}, "kind": "driver_crash"}]})


def test_a_redelivery_after_a_crash_keeps_the_first_visibility() -> None:
    """Hand-derived, with free steps:

    - batch 0 is visible at 20 (its last record's arrival): latencies 10 and 0;
    - batch 1 is visible at 150: latencies 40 and 0; then the driver crashes, before ``commits/1``;
    - the restart (at 150 + 1000) re-runs batch 1 and delivers it again at 1150: not a new latency;
    - batch 2 (arrived at 210) is first visible at 1150: latency 940.

    First visibility: [0, 0, 10, 40, 940], p50 10. The last delivery would give [0, 10, 940, 1000, 1040], p50 940.
    """
    sim = simulate(crash_after_sink_commit_of_batch_1(), free_profile())
    outcome = sim.outcome()
    assert outcome.error is None
    assert [r.rerun_batches for r in outcome.recoveries] == [(1,)]
    assert outcome.sink_by_batch()[1].deliveries == 2, "batch 1 was delivered twice"
    commits = [(round(e.time_ms, 6), e.action) for e in sim.trace if e.action.startswith("sink_commit")]
    assert commits == [(20, "sink_commit b0"), (150, "sink_commit b1"), (1150, "sink_commit b1"),
                       (1150, "sink_commit b2")]
    assert outcome.timing is not None
    assert outcome.timing.latency_ms == LatencySummary(count=5, p50=10.0, p90=940.0, p99=940.0, max=940.0)


def test_range_latency_counts_only_offsets_not_yet_visible() -> None:
    """Volume mode: offsets 0-3 visible at 100; a re-run delivers 2-5 at 500, so only 4 and 5 are new."""
    book = RangeLatency()
    arrival = {offset: 10.0 * offset for offset in range(8)}.__getitem__
    book.delivered(0, 0, 4, 100.0, arrival)
    book.delivered(0, 2, 6, 500.0, arrival)
    book.delivered(0, 0, 6, 900.0, arrival)   # all seen already
    book.delivered(1, 0, 1, 50.0, arrival)
    assert sorted(book.segments()) == [(1, 50.0, 50.0), (2, 450.0, 460.0), (4, 70.0, 100.0)]
    assert book.summary().count == 7


def test_volume_mode_counts_each_record_once_when_a_rerun_folds_batches() -> None:
    """Async progress folds unlogged batches into the re-run: new boundaries, the same records, counted once."""
    sc = Scenario.from_dict({
        "name": "latency-folded-rerun", "seed": 341,
        "source": {"kind": "rate", "rows_per_second": 2000, "duration_s": 6, "partitions": 3, "keys": 300},
        "query": {"operator": {"kind": "map"}, "state_partitions": 6}, "sink": {"mode": "at_least_once"},
        "engine": {"trigger_interval_ms": 200, "progress": {"mode": "async", "checkpoint_interval_ms": 1000}},
        "faults": [{"at": {"step": "sink_commit", "batch": 4, "when": "after"}, "kind": "driver_crash"}]})
    outcome = simulate(sc, "local_spark", mode="volume").outcome()
    assert outcome.error is None and outcome.recoveries
    rerun = outcome.recoveries[0].rerun_batches
    assert len(rerun) > 1, "the re-run folds several batches into one"
    records = sum(outcome.batches[-1].end_offsets)
    assert records == 12_000 < sum(p.num_input_rows for p in outcome.progress), "some records were re-run"
    assert outcome.timing is not None and outcome.timing.latency_ms.count == records


def test_range_latency_fills_only_the_gaps_between_visible_ranges() -> None:
    """Offsets 0-3 and 10-11 visible; a delivery of 0-11 adds the gap 4-9 only, as one segment; a delivery right
    after the visible end (12-13) is new, and afterwards the partition holds one range."""
    book = RangeLatency()
    arrival = float
    book.delivered(0, 0, 4, 100.0, arrival)
    book.delivered(0, 10, 12, 200.0, arrival)
    book.delivered(0, 0, 12, 300.0, arrival)
    book.delivered(0, 12, 14, 400.0, arrival)
    assert book.segments() == [(4, 97.0, 100.0), (2, 189.0, 190.0), (6, 291.0, 296.0), (2, 387.0, 388.0)]
    assert book.visible == {0: [(0, 14)]}


def test_adjacent_and_nested_visible_ranges_merge_into_one() -> None:
    from sim.latency import _merge   # noqa: PLC0415 (the helper behind RangeLatency.visible)

    assert _merge([(0, 2), (2, 4), (5, 6)]) == [(0, 4), (5, 6)]
    assert _merge([(0, 1), (3, 4), (4, 6)]) == [(0, 1), (3, 6)]   # the last range grows, not the first
    assert _merge([(0, 1), (3, 8), (4, 6)]) == [(0, 1), (3, 8)]   # a range inside the last one changes nothing
    assert _merge([(0, 5), (1, 3), (3, 4)]) == [(0, 5)]
    assert _merge([]) == []


def test_a_delivery_before_and_between_visible_ranges_is_new_only_up_to_the_next_visible_one() -> None:
    """Visible 10-11: a delivery of 0-3 is all new (it stops before 10). Visible 0-1 and 4-5: a delivery of
    2-7 is new in 2-3 and 6-7, two segments."""
    book = RangeLatency()
    book.delivered(0, 10, 12, 100.0, float)
    book.delivered(0, 0, 4, 200.0, float)
    assert book.segments()[-1] == (4, 197.0, 200.0)
    book = RangeLatency()
    book.delivered(0, 0, 2, 100.0, float)
    book.delivered(0, 4, 6, 100.0, float)
    book.delivered(0, 2, 8, 300.0, float)
    assert book.segments()[2:] == [(2, 297.0, 298.0), (2, 293.0, 294.0)]
    assert book.visible == {0: [(0, 8)]}
