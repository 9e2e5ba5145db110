"""The pipelining bound the speed report prints next to its measurement (pure Python, no Spark)."""

from __future__ import annotations

from spark_impl.engine.speed import pipelining_bound


def test_without_stragglers_pipelining_cannot_help():
    assert pipelining_bound(4, (0.0, 300.0, 1), base_ms=20.0, batches=200) == 1.0


def test_the_bound_grows_with_depth_and_partitions_and_never_exceeds_the_partition_count():
    straggler = (0.3, 300.0, 7)
    two = pipelining_bound(2, straggler, 20.0, batches=2000)
    assert 1.0 < two < pipelining_bound(2, straggler, 20.0, batches=2000, depth=8) <= 2.0
    assert two < pipelining_bound(8, straggler, 20.0, batches=2000)


def test_one_partition_gains_nothing_from_pipelining():
    assert pipelining_bound(1, (0.5, 300.0, 3), base_ms=20.0, batches=500) == 1.0
