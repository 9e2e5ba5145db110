"""An executor loss under synchronous state checkpointing retries the task, as Spark does; only a commit
already handed to the background (async state checkpointing) fails the query.

Found by mutation testing the judge: the reference failed the whole query whenever an executor was lost
while a task on it had sealed a version not yet durable, whatever the state checkpointing mode. Under sync
state checkpointing that version is the failed attempt's own, nothing durable is lost, and Spark's
TaskSetManager retries the task; no oracle noticed, because a restart also gives the right answer.
"""

from __future__ import annotations

import pytest

from reference.protocol.incarnation import Incarnation
from reference.protocol.failures import QueryFailure
from reference.judge.explorer import Model, first_graph
from reference.protocol.logs import CommitEntry
from reference.protocol.run import run_scenario
from reference.language.scenario import Scenario


def sums(faults: list[dict], state_checkpoint: str = "sync") -> Scenario:
    records = [[0, "a", 1, 0, 0], [0, "b", 2, 10, 10], [0, "a", 3, 1000, 1000], [0, "b", 4, 2000, 2000]]
    return Scenario.from_dict({"name": "lost", "seed": 0,
                               "source": {"kind": "explicit", "records": records, "batch_ms": 1000},
                               "query": {"operator": {"kind": "aggregate", "agg": "sum"}, "state_partitions": 1},
                               "engine": {"state_store": {"provider": "changelog", "min_deltas_for_snapshot": 100},
                                          "state_checkpoint": state_checkpoint},
                               "faults": faults})


@pytest.mark.parametrize("step", ["task_apply", "changelog_write"])
def test_a_lost_executor_under_sync_state_checkpointing_retries_the_task_without_a_restart(step):
    faults = [{"at": {"step": step, "batch": 1, "partition": 0, "when": "after"}, "kind": "executor_loss"}]
    result = run_scenario(sums(faults))
    assert result.outcome().recoveries == ()
    # version 2 (after batch 1) is the retry's: restart 0, batch 1, partition 0, attempt 1
    assert CommitEntry.read(result.storage, 1).state_lineage["0"]["0"] == "r0b1p0a1"


def incarnation_with_batch_1_sealed(state_checkpoint: str) -> Incarnation:
    """Batch 0 done; batch 1's task applied (version 2 sealed in memory), its commit not yet durable."""
    scenario = sums([], state_checkpoint)
    inc = first_graph(scenario, Model())
    for node in inc.nodes:
        if node.batch == 0 or (node.batch == 1 and node.step in ("plan", "offset_log_write", "purge", "state_load",
                                                                 "task_apply")):
            inc.run_step(node)
    assert inc.tasks[(1, 0)].sealed["0"].version == 2
    return inc


def test_a_lost_executor_with_a_commit_handed_to_the_background_fails_the_query():
    inc = incarnation_with_batch_1_sealed("async")   # batch 1's commit belongs to the background writer
    with pytest.raises(QueryFailure, match="pending state commit of partition 0"):
        inc.lose_executor(0, failing=(2, 0))


def test_under_sync_state_a_task_stranded_on_the_lost_executor_is_retried_not_the_query():
    inc = incarnation_with_batch_1_sealed("sync")
    inc.lose_executor(0, failing=(2, 0))
    retried = inc.tasks[(1, 0)]
    assert retried.attempt == 1 and retried.sealed["0"].uid == "r0b1p0a1"
    assert inc.stores[("0", 0)].version == 2     # the retry reloaded version 1 and re-applied batch 1


def test_every_fault_at_one_point_fires_and_one_that_follows_a_crash_waits_for_its_next_match():
    """Two damage faults at the same step both fire there; a fault listed after a crash at the same point
    does not vanish: it fires when the point comes again (the re-run after the restart)."""
    from reference.protocol.faults import FaultBook
    from reference.language.steps import NodeId
    corrupt = [{"at": {"step": "plan", "batch": 1}, "kind": "corrupt_file", "path": f"offsets/{b}"} for b in (0, 1)]
    book = FaultBook(sums(corrupt).faults)
    assert [f.path for f in book.take(NodeId.of("plan", 1), "before", 0, 0)] == ["offsets/0", "offsets/1"]
    assert book.pending == []
    crash_first = sums([{"at": {"step": "plan", "batch": 1}, "kind": "driver_crash"}, corrupt[0]])
    book = FaultBook(crash_first.faults)
    first = next(book.take(NodeId.of("plan", 1), "before", 0, 0))
    assert first.kind == "driver_crash" and [f.kind for f in book.pending] == ["corrupt_file"]
