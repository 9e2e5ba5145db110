"""The Spark engine commits a join's two stores on two threads under ``engine.parallel_store_commit``
(issue 17, part 3): judged by every oracle and agreeing with the reference, also with a crash or a task
failure between the two stores' commits. The first tests need no Spark: they run the task's commit on
stand-in stores and time it."""

from __future__ import annotations

import json
import threading
import time
from types import SimpleNamespace
from typing import Any

import pytest

from reference.protocol.backend import RunOptions
from reference.language.catalogue import scenario_dict
from reference.judge.compare import first_difference
from reference.protocol.logs import CommitEntry
from reference.judge.oracles import check_outcome, failures
from reference.protocol.run import run_scenario
from reference.language.scenario import Scenario
from spark_impl.engine.task import commit_state, run_concurrently

STORE_COMMIT_S = 0.2


class SlowStore:
    """A stand-in state store whose file write takes ``STORE_COMMIT_S``; it records which thread wrote."""

    def __init__(self) -> None:
        self.writer: str | None = None
        self.durable: list[Any] = []

    def write(self, sealed: Any) -> None:
        time.sleep(STORE_COMMIT_S)
        self.writer = threading.current_thread().name

    def mark_durable(self, sealed: Any) -> None:
        self.durable.append(sealed)


class NoFaults:
    p = 0

    def at(self, step: str, when: str) -> bool:
        return False


def _commit(parallel: bool) -> tuple[float, dict[str, SlowStore]]:
    spec = SimpleNamespace(query=SimpleNamespace(engine=SimpleNamespace(parallel_store_commit=parallel)),
                           maintenance=False, batch=3)
    stores = {"0.left": SlowStore(), "0.right": SlowStore()}
    started = time.perf_counter()
    commit_state(spec, NoFaults(), stores, {"0.left": "L", "0.right": "R"})  # type: ignore[arg-type]
    return time.perf_counter() - started, stores


def test_two_stores_commit_in_turn_or_at_once() -> None:
    """Two 0.2 s commits take 0.4 s one after the other and about 0.2 s in parallel, each store on its own
    thread; both are durable when the partition's commit returns."""
    sequential, one_thread = _commit(False)
    parallel, two_threads = _commit(True)
    assert sequential >= 2 * STORE_COMMIT_S
    assert parallel < 1.5 * STORE_COMMIT_S
    assert one_thread["0.left"].writer == one_thread["0.right"].writer
    assert two_threads["0.left"].writer != two_threads["0.right"].writer
    assert [s.durable for s in two_threads.values()] == [["L"], ["R"]]


def test_a_failing_store_commit_fails_the_partition_after_the_other_ends() -> None:
    finished: list[str] = []

    def fails() -> None:
        raise RuntimeError("left store: write failed")

    def slow() -> None:
        time.sleep(0.05)
        finished.append("right")

    with pytest.raises(RuntimeError, match="left store"):
        run_concurrently([fails, slow], "commit-test")
    assert finished == ["right"], "the other store's commit is waited for, not abandoned"


# ----------------------------------------------------------------- on Spark

FAULTS = {
    "crash_between_commits": {"kind": "driver_crash",
                              "at": {"step": "changelog_write", "batch": 1, "partition": 0, "when": "after"}},
    "task_failure_between_commits": {"kind": "task_failure",
                                     "at": {"step": "changelog_write", "batch": 2, "partition": 1, "when": "after"}},
}


@pytest.mark.spark
@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_engine_commits_a_join_in_parallel_through_a_fault_and_agrees_with_the_reference(spark, tmp_path, fault):
    from spark_impl.engine.backend import SparkEngineBackend
    d = scenario_dict("join", "sync", batches=4, parallel_store_commit=True, faults=[json.loads(json.dumps(
        FAULTS[fault]))])
    d["name"] = f"join-parallel-commit-{fault}"
    scenario = Scenario.from_dict(d)
    result = SparkEngineBackend().run(scenario, RunOptions(workdir=str(tmp_path), pace=False))
    outcome = result.outcome
    assert outcome.error is None, outcome.error
    bad = failures(check_outcome(scenario, outcome, result.checkpoint))
    assert not bad, "\n".join(v.describe() for v in bad)
    assert outcome.faults_not_fired == (), "the fault must have fired"
    if fault.startswith("crash"):
        assert outcome.recoveries, "a driver crash must show up as a recovery"
    else:   # the retry (attempt 1) wrote and committed both stores' version 3 of partition 1
        assert result.checkpoint is not None
        lineage = CommitEntry.read(result.checkpoint, 2).state_lineage
        assert {sid: lineage[sid]["1"] for sid in ("0.left", "0.right")} == {"0.left": "r0b2p1a1",
                                                                           "0.right": "r0b2p1a1"}
    difference = first_difference(run_scenario(scenario).outcome(), outcome, scenario.sink_mode)
    assert difference is None, f"reference and spark differ at {difference}"
