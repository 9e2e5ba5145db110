"""The PySpark engine when a task fails in the Python worker that runs another task's background state commit.

PySpark ends a Python worker whose task raised, and every thread in it. On a
Spark executor a failed task leaves the executor, and the commits it runs in
the background, alive. The engine must not turn an ordinary task failure into
the loss of an unrelated pending commit: the driver would wait for that commit
in vain, then restart the query with no fault to explain it.
"""

from __future__ import annotations

import pytest

from reference.catalogue import scenario_dict
from reference.run import run_scenario
from reference.scenario import Scenario
from test_spark_engine import _agree, _judge, _run

pytestmark = pytest.mark.spark


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
