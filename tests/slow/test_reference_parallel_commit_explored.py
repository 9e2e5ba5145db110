"""Parallel store commit under the explorer: both orders and both half-committed partitions are crash cuts, and
a partition committed by one store alone is caught (moved from tests/quick/test_reference_parallel_commit.py:
each explores a whole scenario)."""

from __future__ import annotations

from test_reference_parallel_commit import OneStoreCommitsThePartition, _join

from reference.judge.explorer import Model, explore, first_graph, writing_cuts
from reference.protocol.run import run_scenario


def test_the_explorer_covers_both_orders_and_both_half_committed_partitions():
    """Among the crash cuts, each store alone has written its version of a partition (both orders), and no
    interleaving breaks an oracle."""
    scenario = _join(True, batches=2)
    report = explore(scenario, workers=1)
    assert not report.truncated and report.violations == [], report.violations[:1]
    inc = first_graph(scenario, Model())
    halves = set()
    for prefix in writing_cuts(inc):
        written = {(n.tag, n.batch, n.partition) for n in prefix if n.step == "changelog_write"}
        for tag, other in (("0.left", "0.right"), ("0.right", "0.left")):
            halves |= {(tag, b, p) for (t, b, p) in written if t == tag and (other, b, p) not in written}
    assert halves == {(tag, b, p) for tag in ("0.left", "0.right") for b in (0, 1) for p in (0, 1)}


def test_the_explorer_catches_a_partition_committed_by_one_store():
    scenario = _join(True, batches=2)
    assert run_scenario(scenario, incarnation_class=OneStoreCommitsThePartition).error is None, \
        "the plant is invisible without a crash"
    report = explore(scenario, model=Model(OneStoreCommitsThePartition), workers=1)
    assert report.violations, "a commit entry naming an unwritten store version must be caught"
    assert all(v.schedule.startswith("driver_crash") for v in report.violations)
