"""The timing block's one latency summary and one throughput rule (``reference/protocol/timing.py``)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from reference.protocol.timing import LatencySummary, summarize_latency, summarize_segments, summarize_throughput


@given(st.lists(st.floats(0, 1e6, allow_nan=False), min_size=1, max_size=200))
def test_percentiles_are_numpy_s_inverted_cdf(samples):
    summary = summarize_latency(samples)
    for q, value in ((50, summary.p50), (90, summary.p90), (99, summary.p99)):
        assert value == pytest.approx(round(float(np.percentile(samples, q, method="inverted_cdf")), 3), abs=1e-3)
    assert summary.count == len(samples) and summary.max == pytest.approx(round(max(samples), 3), abs=1e-3)


def test_hand_derived_percentiles_and_the_empty_summary():
    # ten samples 1..10 ms: p50 is the 5th (5 ms), p90 the 9th, p99 the 10th
    assert summarize_latency(range(1, 11)) == LatencySummary(10, 5.0, 9.0, 10.0, 10.0)
    assert summarize_latency([]) == LatencySummary() == LatencySummary(0, None, None, None, None)


def test_spread_segments_interpolate_inside_and_exact_segments_are_exact():
    # 100 records spread evenly over [0, 100] ms: p50 at 50, p90 at 90
    spread = summarize_segments([(100, 0.0, 100.0)])
    assert spread.p50 == pytest.approx(50.0, abs=0.01) and spread.p90 == pytest.approx(90.0, abs=0.01)
    assert summarize_segments([(1, 5.0, 5.0), (1, 7.0, 7.0)]) == summarize_latency([5.0, 7.0])


def test_a_run_with_a_steady_latency_kept_up_and_one_whose_latency_grows_did_not():
    created = [i * 10.0 for i in range(100)]                  # 100 records over 0.99 s: about 101 rows/s
    steady = summarize_throughput(created, [c + 500 for c in created])
    assert steady is not None and steady.kept_up and steady.latency_growth_ms_per_s == 0.0
    # processing at a third of the rate: record i is visible at 30 i ms, its latency grows 2 ms per ms
    behind = summarize_throughput(created, [3 * c for c in created])
    assert behind is not None and not behind.kept_up
    assert behind.latency_growth_ms_per_s == pytest.approx(2000.0)
    assert behind.processed_rows_per_s == pytest.approx(behind.input_rows_per_s / 3, rel=1e-3)


def test_throughput_needs_two_records_created_apart():
    assert summarize_throughput([], []) is None
    assert summarize_throughput([5.0, 5.0], [9.0, 9.0]) is None


def test_a_run_that_delivered_everything_at_once_has_no_processed_rate_to_judge():
    # one batch held every record (a cold query's first batch drained the whole input): not "kept up"
    created = [i * 10.0 for i in range(100)]
    assert summarize_throughput(created, [20_000.0] * 100) is None
