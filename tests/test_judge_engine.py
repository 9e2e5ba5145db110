"""The reference engine's protocol under faults, with outcomes worked out from SPEC sections 2 and 4.

Found by mutation testing the judge (reference/engine.py): task retries up to
Spark's ``spark.task.maxFailures`` (4), a zombie writer's file, the batches a
restart re-runs, progress events of an untimed model, and that every operator
under every mode Spark allows passes every check on its own checkpoint.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from reference.catalogue import make, scenario_dict, supported_pairs
from reference.engine import Incarnation
from reference.observer import Observer
from reference.oracles import check_outcome, failures
from reference.recovery import plan_restart
from reference.run import run_scenario
from reference.scenario import Scenario
from reference.sources import SourceData
from reference.storage import DurableStorage


def fault(kind: str, step: str, batch: int, when: str = "before", partition: int | None = None) -> dict[str, Any]:
    at: dict[str, Any] = {"step": step, "batch": batch, "when": when}
    if partition is not None:
        at["partition"] = partition
    return {"at": at, "kind": kind}


def judged(scenario: Any) -> Any:
    finished = run_scenario(scenario)
    outcome = finished.outcome()
    assert [v.describe() for v in failures(check_outcome(scenario, outcome, finished.storage))] == []
    return outcome, finished.storage


@pytest.mark.parametrize("operator, mode", supported_pairs())
def test_every_operator_under_every_allowed_mode_passes_on_its_own_checkpoint(operator, mode):
    outcome, _ = judged(make(operator, mode, batches=3))
    assert outcome.error is None and outcome.batches


TASK_FAILURES = [("state_load", "before"), ("task_apply", "before"), ("task_apply", "after"), ("sink_write", "before")]


def test_a_task_failing_three_times_is_retried_and_a_fourth_failure_restarts_the_query():
    """spark.task.maxFailures = 4: three failed attempts of task (1, 0) leave the fourth to succeed."""
    three = make("aggregate", batches=3, faults=[fault("task_failure", s, 1, w, 0) for s, w in TASK_FAILURES[:3]])
    outcome, _ = judged(three)
    assert [b.task_retries for b in outcome.batches] == [0, 3, 0] and outcome.recoveries == ()
    four = make("aggregate", batches=3, faults=[fault("task_failure", s, 1, w, 0) for s, w in TASK_FAILURES])
    outcome, _ = judged(four)
    assert [(r.restart, r.resumed_at, r.rerun_batches) for r in outcome.recoveries] == [(1, 1, (1,))]


def test_a_crash_after_an_offset_entry_re_runs_exactly_that_batch():
    outcome, _ = judged(make("aggregate", batches=3, faults=[fault("driver_crash", "offset_log_write", 2, "after")]))
    assert [(r.restart, r.resumed_at, r.rerun_batches) for r in outcome.recoveries] == [(1, 2, (2,))]
    assert [b.attempts for b in outcome.batches] == [1, 1, 2]


def test_a_zombie_sink_writer_lands_the_failed_attempts_part_file_beside_the_retry():
    """SPEC additions: a zombie writer of a sink part file lands the failed attempt's own rows, which are the
    rows its retry computes (the same input and state)."""
    _, storage = judged(make("aggregate", batches=3, faults=[fault("zombie_write", "sink_write", 1, partition=1)]))
    assert sorted(storage.list("sink/1/")) == ["sink/1/part-0-r0b1p0a0.json", "sink/1/part-1-r0b1p1a0.json",
                                               "sink/1/part-1-r0b1p1a1.json"]
    zombie, retry = (json.loads(storage.read(f"sink/1/part-1-r0b1p1a{a}.json")) for a in (0, 1))
    assert zombie == retry != []


@pytest.mark.parametrize("operator, mode, faults", [
    ("map", "sync", [fault("task_failure", "sink_write", 1, partition=0)]),           # a task without state
    ("aggregate", "async_state", [fault("task_failure", "sink_write", 1, partition=0)]),
    ("aggregate", "async_state", [fault("task_failure", "state_load", 1, partition=1)]),
    ("aggregate", "async_state", [fault("task_failure", "sink_write", 1, "after", 1)]),
    ("aggregate", "async_state", [fault("task_failure", "task_apply", 1, "after", 1)]),
    ("aggregate", "async_state", [fault("executor_loss", "sink_write", 1, partition=1)]),
    ("window_aggregate", "async_state", [fault("task_failure", "sink_write", 2, partition=1),
                                         fault("task_failure", "sink_write", 1, "after", 0)]),
    ("aggregate", "sync", [fault("task_failure", "changelog_write", 1, "after", 0),   # two files of version 2
                           fault("driver_crash", "commit_log_write", 1, "after")]),
    # a restart resumes the watermark trackers commits/b holds
    ("window_aggregate", "sync", [fault("driver_crash", "commit_log_write", 1, "after")]),
    ("stateful_function", "async_state", [fault("driver_crash", "commit_log_write", 1, "after")]),
    ("join", "pipelining", [fault("driver_crash", "offset_log_write", 2, "after")]),
    ("dedup_within_watermark", "sync", [fault("driver_crash", "state_commit", 1, "after", 1)]),
    # under pipelining b+1's watermark is known before commits/b is written, which must still hold it
    ("window_aggregate", "pipelining", [fault("driver_crash", "commit_log_write", 1, "after")]),
    ("join", "pipelining", [fault("driver_crash", "commit_log_write", 1, "after")]),
    ("dedup_within_watermark", "pipelining", [fault("driver_crash", "commit_log_write", 2, "after")]),
])
def test_retries_and_restarts_keep_every_check(operator, mode, faults):
    outcome, _ = judged(make(operator, mode, batches=3, faults=faults))
    assert outcome.error is None and outcome.faults_not_fired == ()


def test_progress_events_of_the_untimed_model():
    """2 source partitions x 3 records per batch; a running count only updates keys, never removes them."""
    outcome, _ = judged(make("aggregate", batches=3))
    assert [e.num_input_rows for e in outcome.progress] == [6, 6, 6]
    assert all(e.input_rows_per_second == 0.0 and e.processed_rows_per_second == 0.0 for e in outcome.progress)
    assert all(len(e.state_operators) == 1 for e in outcome.progress)
    assert all(op.num_rows_removed == 0 and 0 < op.num_rows_updated <= 4 and op.num_rows_total <= 4   # 4 keys
               for e in outcome.progress for op in e.state_operators)


def test_window_evictions_are_counted_as_removed_rows_and_durations_are_zero():
    """Every window the sink receives was popped from state in the batch that emitted it."""
    outcome, _ = judged(make("window_aggregate", batches=6))
    removed = sum(op.num_rows_removed for e in outcome.progress for op in e.state_operators)
    emitted = sum(len(entry.rows) for entry in outcome.sink)
    assert removed == emitted > 0
    assert all(set(e.duration_ms.values()) == {0} for e in outcome.progress)


def test_inline_purge_cleans_state_below_the_snapshot_the_retained_versions_load_from():
    """Retain 3 of versions 1..5: versions 3..5 load from the snapshot of 2 (snapshots every 2 versions), so
    only version 1's changelog goes."""
    _, storage = judged(make("aggregate", batches=5, retain=3))
    assert sorted(storage.list("state/0/1/")) == [
        "state/0/1/2_r0b1p1a0.changelog", "state/0/1/2_r0b1p1a0.snapshot", "state/0/1/3_r0b2p1a0.changelog",
        "state/0/1/4_r0b3p1a0.changelog", "state/0/1/4_r0b3p1a0.snapshot", "state/0/1/5_r0b4p1a0.changelog"]


def test_async_progress_persists_an_offset_entry_once_the_interval_has_passed():
    """Batch b is planned at b * 100 ms; an entry persists for the first batch and then once 200 ms have
    passed since the last persisted one: batches 0, 2, 4 and 6 of 8 (retain 10 keeps them all)."""
    _, storage = judged(make("map", "async_progress", batches=8, retain=10))
    assert sorted(storage.list("offsets/")) == ["offsets/0", "offsets/2", "offsets/4", "offsets/6"]
    assert sorted(storage.list("commits/")) == ["commits/0", "commits/2", "commits/4", "commits/6"]


def test_a_batch_whose_sink_commit_a_restart_repeats_is_delivered_twice():
    outcome, _ = judged(make("aggregate", batches=3, faults=[fault("driver_crash", "sink_commit", 1, "after")]))
    assert [(e.batch, e.deliveries) for e in outcome.sink] == [(0, 1), (1, 2), (2, 1)]


def test_an_incarnations_recorded_cuts_are_keyword_only():
    scenario = make("aggregate", batches=2)
    data = SourceData.of(scenario)
    restart = plan_restart(DurableStorage(), "sync", len(data.partitions))
    with pytest.raises(TypeError):
        Incarnation(scenario, data, DurableStorage(), restart, 0, Observer(), {})   # type: ignore[misc]
    assert Incarnation(scenario, data, DurableStorage(), restart, 0, Observer(), recorded_cuts={}).plans


def test_a_clock_jump_moves_when_async_progress_persists():
    """The driver's clock jumps 150 ms ahead at batch 1: batch 1 is planned at 250 ms, 200 ms after batch 0's
    entry, so it persists; from then on every second batch: 3 (450 ms), 5 and 7."""
    skew = {"at": {"step": "offset_log_write", "batch": 1, "when": "before"}, "kind": "clock_skew", "ms": 150}
    _, storage = judged(make("map", "async_progress", batches=8, retain=10, faults=[skew]))
    assert sorted(storage.list("offsets/")) == ["offsets/0", "offsets/1", "offsets/3", "offsets/5", "offsets/7"]


def test_a_sink_manifest_is_canonical_json():
    _, storage = judged(make("aggregate", batches=2))
    assert storage.read("sink/_manifest/1") == json.dumps(
        {"batch": 1, "delivery": 1, "files": ["sink/1/part-0-r0b1p0a0.json", "sink/1/part-1-r0b1p1a0.json"]},
        sort_keys=True).encode()
    assert list(json.loads(storage.read("sink/_manifest/1"))) == ["batch", "delivery", "files"]


@pytest.mark.parametrize("faults", [[], [fault("driver_crash", "commit_log_write", 1, "after")]])
def test_a_chain_of_two_watermarked_operators_reports_the_query_watermark(faults):
    """Dedup (delay 20) then a window (delay 5): each operator keeps its own watermark, and the batch reports
    the one the failure-free run gives the query, before and after a restart."""
    d = scenario_dict("chain", batches=4, faults=faults)
    d["query"]["operator"] = {"kind": "chain", "operators": [
        {"kind": "dedup_within_watermark", "watermark_delay_ms": 20},
        {"kind": "window_aggregate", "agg": "sum", "window_ms": 30, "watermark_delay_ms": 5}]}
    outcome, _ = judged(Scenario.from_dict(d))
    assert outcome.batches[-1].watermark_ms > 0
