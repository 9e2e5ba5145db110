"""The Spark engine's executor loss drops what the lost executor cached, by the reference's placement.

An ``executor_loss`` on the reference drops the stores of every partition the
placement (``reference.protocol.rebalancing``) puts on that executor. The engine's tasks
learn their executor from ``TaskSpec.executors`` (the placement, per batch) and
count losses per executor in the coordination folder; a cached store is dropped
when its executor's count moved. Before, the engine keyed the count by
``p % 2`` of its own, which disagrees with the placement as soon as a scenario
names its executors or moves partitions. No SparkSession is needed here.
"""

from __future__ import annotations

import pytest

from spark_impl.engine.task_spec import TaskSpec


def spec(tmp_path, executors: tuple[str, ...]) -> TaskSpec:
    return TaskSpec(None, str(tmp_path / "ckpt"), str(tmp_path / "coord"), str(tmp_path / "local"), "e0", 0, 1,
                    (), (), (), executors=executors)


def lose(s: TaskSpec, p: int) -> None:
    """What ``TaskFaults.lose_executor`` records before the worker exits (it then ends the process)."""
    s.coordination.record_loss(s.executor(p))


@pytest.mark.parametrize("executors, dropped", [(("0", "1"), [False, True]), (("0", "0"), [True, True]),
                                                (("1", "0"), [False, True]), (("2", "2", "1"), [True, True, False])])
def test_losing_a_partitions_executor_drops_every_partition_placed_on_it(tmp_path, executors, dropped):
    s = spec(tmp_path, executors)
    before = [s.coordination.eviction_generation(s.executor(p)) for p in range(len(executors))]
    lose(s, 1)
    after = [s.coordination.eviction_generation(s.executor(p)) for p in range(len(executors))]
    assert [a != b for a, b in zip(after, before)] == dropped


def test_a_spec_without_the_placement_says_so_instead_of_guessing(tmp_path):
    with pytest.raises(AssertionError, match="names no executor for partition 0"):
        spec(tmp_path, ()).executor(0)
