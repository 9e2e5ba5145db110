"""The PySpark engine when a task fails in the Python worker that runs another task's background state commit.

PySpark ends a Python worker whose task raised, and every thread in it. On a
Spark executor a failed task leaves the executor, and the commits it runs in
the background, alive. The engine must not turn an ordinary task failure into
the loss of an unrelated pending commit: the driver would wait for that commit
in vain, then restart the query with no fault to explain it.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Iterable, Iterator

import pytest

from reference.language.catalogue import scenario_dict
from reference.protocol.run import run_scenario
from reference.language.scenario import Scenario
from spark_impl.engine.coordination import TaskWaitFailed, atomic_write
from spark_impl.engine.task import commits_outlive_failure, group_entry, start_background_commit, task_entry
from spark_impl.engine.task_spec import TaskSpec
from test_spark_engine import _agree, _judge, _run


def test_a_failing_task_returns_its_failure_only_once_the_workers_background_commits_ended():
    """No SparkSession: the guard every task function of the engine runs in."""
    committed = threading.Event()

    def slow_commit() -> None:
        time.sleep(0.3)
        committed.set()

    def failing_task(p: int, rows: Iterable[Any]) -> Iterator[Any]:
        start_background_commit(slow_commit, "a-pending-commit")
        raise TaskWaitFailed("this attempt failed")
        yield  # a generator, as every partition function

    with pytest.raises(TaskWaitFailed, match="this attempt failed"):
        list(commits_outlive_failure(failing_task)(0, iter([])))
    assert committed.is_set(), "the failure left the task while the worker's background commit still ran"


def _ended_spec(tmp_path: Any) -> TaskSpec:
    spec = TaskSpec(None, str(tmp_path / "ckpt"), str(tmp_path / "coord"), str(tmp_path / "local"), "e0", 0, 3,
                    (), (), (), executors=("0", "1"))
    atomic_write(spec.coordination.stop(), "stopped")
    return spec


@pytest.mark.spark
def test_a_task_of_an_incarnation_that_has_ended_runs_nothing_and_does_not_fail(tmp_path):
    """A job submitted just after the driver cancelled its incarnation's jobs still runs; its tasks used to
    fail (and each failure ended a Python worker shared with the next incarnation or query)."""
    spec = _ended_spec(tmp_path)
    assert list(task_entry(spec)(0, iter([0]))) == []
    assert list(group_entry(spec, (3, 4))(1, iter([1]))) == []
    assert not spec.coordination.started(0, 3).exists() and not spec.coordination.started(1, 3).exists()


@pytest.mark.spark
def test_a_task_failure_in_the_worker_of_a_pending_commit_lets_that_commit_finish(spark, tmp_path):
    """Group scheduling puts batches 0-3 of partition 0 in one task, so in one Python worker: batch 2's
    background commit (slowed by 3 s) is still pending there when the same task fails at batch 3. The failed
    attempt must not take the commit with it: Spark retries the task, and the query goes on without a
    restart, as in the reference. The engine used to lose the commit, its retries waited in vain for
    version 3, and the driver restarted the query."""
    slow = {"kind": "storage_latency", "ms": 3000,
            "at": {"step": "changelog_write", "batch": 2, "partition": 0, "when": "before"}}
    fail = {"kind": "task_failure", "at": {"step": "task_apply", "batch": 3, "partition": 0, "when": "before"}}
    scenario = Scenario.from_dict(scenario_dict("aggregate", "async_state", faults=[slow, fail], batches=5))
    result = _run(scenario, tmp_path, group=4)
    _judge(scenario, result.outcome, result.checkpoint)
    _agree(scenario, result.outcome)
    reference = run_scenario(scenario).outcome()
    assert not reference.recoveries, reference.recoveries   # a retried task failure restarts nothing
    assert result.outcome.recoveries == reference.recoveries, result.outcome.recoveries
