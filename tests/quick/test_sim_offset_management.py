"""The simulator's offset-management mechanisms, each against a hand-derived expectation on a tiny run.

- under async progress, purge follows ``plan``, not the queued offset write
  (Spark: ``markMicroBatchStart`` only queues it; reference/protocol/graph.py);
- purge costs what ``HDFSMetadataLog.purge`` does: blind deletes of the ids
  due since the last round, a listing only when more than three are due;
- an async purge round is skipped while the previous one still runs
  (``AsyncLogPurge.purgeAsync``);
- a stat sink (``sink_part_files`` 0) writes nothing.

Costs are made exact with no jitter, so each expectation is arithmetic on the
profile's numbers.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from reference.language.scenario import Scenario
from sim import simulate
from sim.cost_model import ProfileError, profile_from_dict, shipped_profile
from sim.simulation import Simulation

BATCH_MS = 1000      # trigger interval: batch b is planned at b * BATCH_MS
DELETE_MS = 1200.0   # one purge delete: a round with one entry due per log (2 deletes) outlasts a batch
LIST_MS = 7.0
WRITE_MS = 1.0       # small write; rename 0: a log entry costs 1 ms plus 256 bytes at 1000 MB/s
PLAN_MS = 2.0        # latest_offset_ms + planning_ms


def exact_profile(**changes: Any) -> dict[str, Any]:
    """A profile with no jitter or stragglers, one executor, and storage costs chosen for the arithmetic."""
    doc: dict[str, Any] = {
        "name": "exact", "executors": 1, "cores_per_executor": 4, "per_record_us": 0.0,
        "per_task_overhead_ms": 1.0, "scheduling_delay_ms": 0.0, "planning_ms": 1.0, "latest_offset_ms": 1.0,
        "network_rtt_ms": 0.0, "state_load_cached_ms": 0.0, "state_replay_per_key_us": 0.0,
        "state_commit_base_ms": 0.0, "state_commit_per_changed_key_us": 0.0, "state_commit_per_total_key_us": 0.0,
        "snapshot_base_ms": 0.0, "snapshot_per_key_us": 0.0, "bytes_per_state_key": 64, "bytes_per_output_row": 48,
        "source_commit_ms": 0.0, "restart_ms": 0.0, "executor_replacement_ms": 0.0,
        "straggler_probability": 0.0, "straggler_slowdown": 1.0,
        "storage": {"small_write_ms": WRITE_MS, "rename_ms": 0.0, "list_ms": LIST_MS, "delete_ms": DELETE_MS,
                    "read_ms": 0.0, "bandwidth_mb_per_s": 1000.0, "jitter_sigma": 0.0}}
    doc.update(changes)
    return doc


def stateless(batches: int, progress: str, purge: str, retain: int = 1, interval_ms: int = BATCH_MS) -> Scenario:
    return Scenario.from_dict({
        "name": "offset-mechanisms", "seed": 3,
        "source": {"kind": "generated", "partitions": 1, "keys": 4, "records_per_partition_per_batch": 2,
                   "batches": batches, "event_time": {"start_ms": 0, "step_ms": 0}},
        "query": {"operator": {"kind": "map"}, "state_partitions": 1},
        "sink": {"mode": "at_least_once"},
        "engine": {"trigger_interval_ms": interval_ms,
                   "progress": {"mode": progress, "checkpoint_interval_ms": 1000},
                   "log_purge": {"mode": purge, "min_batches_to_retain": retain}}})


def step_spans(sim: Simulation, step: str) -> dict[int, tuple[float, float]]:
    """(start, end) of every ``step`` node of the first incarnation, by batch, from the trace."""
    out = {}   # (the trace keeps a start to the microsecond)
    for event in sim.trace:
        match = re.fullmatch(rf"{step} b(\d+)", event.action)
        if match and event.detail.startswith("start="):
            out.setdefault(int(match.group(1)), (float(event.detail[len("start="):]), event.time_ms))
    return out


def test_under_async_progress_purge_follows_plan_not_the_queued_offset_write() -> None:
    # The offset write takes 500 ms; under async progress it is only queued (markMicroBatchStart), so the
    # inline purge of batch b starts when plan b ends, before the write lands.
    sim = simulate(stateless(3, "async", "inline"), exact_profile(storage={**exact_profile()["storage"],
                                                                          "small_write_ms": 500.0}))
    plans, purges, writes = step_spans(sim, "plan"), step_spans(sim, "purge"), step_spans(sim, "offset_log_write")
    for b in range(3):
        assert purges[b][0] == pytest.approx(plans[b][1])
    assert writes[0][1] > purges[0][0] + 400   # the first entry is written (the interval starts there) after


def test_a_purge_round_deletes_what_is_due_and_lists_only_past_three() -> None:
    # Sync progress, inline purge, retention 1, batches 1000 ms apart. Round b's threshold is b - 1
    # (latest offset entry b minus 1), so rounds 0 and 1 have nothing due and cost nothing; from round 2 on
    # one id per log is due: two blind deletes, 2 * DELETE_MS, no listing.
    sim = simulate(stateless(5, "sync", "inline", interval_ms=3000), exact_profile())
    spans = step_spans(sim, "purge")
    durations = {b: end - start for b, (start, end) in spans.items()}
    assert durations == pytest.approx({0: 0.0, 1: 0.0, 2: 2 * DELETE_MS, 3: 2 * DELETE_MS, 4: 2 * DELETE_MS},
                                      abs=1e-3)


def test_under_async_progress_a_purge_round_costs_only_when_a_durable_entry_moves_the_threshold() -> None:
    # Async progress with a 1000 ms checkpoint interval, batches planned 300 ms apart, retention 1: the
    # threshold is the newest durable offset entry. Entry 0 is durable (the first write is always issued);
    # 1-3 are not (less than 1000 ms since 0 was issued); 4 (planned at 1200 ms) is. Round 4 starts as
    # plan 4 ends, before entry 4 lands, so it still sees threshold 0: nothing due. Round 5 sees 4: four
    # ids due (0-3), more than three, so it lists both logs and deletes what exists below 4 (offsets/0,
    # commits/0): 2 * LIST_MS + 2 * DELETE_MS. The round is inline, so batch 6 is planned only after it
    # (~3918 ms), over 1000 ms after entry 4 was issued: entry 6 is durable. Round 6 starts before it
    # lands (nothing due); round 7 sees threshold 6: ids 4 and 5 due, blind deletes in both logs,
    # 4 * DELETE_MS. Every other round costs nothing.
    sim = simulate(stateless(8, "async", "inline", interval_ms=300), exact_profile())
    durations = {b: end - start for b, (start, end) in step_spans(sim, "purge").items()}
    paid = {b: d for b, d in durations.items() if d > 0.01}
    assert paid == pytest.approx({5: 2 * LIST_MS + 2 * DELETE_MS, 7: 4 * DELETE_MS}, abs=1e-3), durations


def test_an_async_purge_round_is_skipped_while_the_previous_one_runs() -> None:
    # Sync progress, async purge, retention 1, batch b planned at b * 1000 ms and its round due right
    # after its offset write; round b's threshold is b - 1. Round 2 is the first with work: id 0 due in
    # each log, 2 deletes, 2400 ms, so it runs to ~4400 ms; rounds 3 and 4 fall due while it runs and are
    # skipped. Round 5 (due ~5000 ms) finds the purger idle and runs: threshold 4, ids 1-3 due (the last
    # round purged below 1), six blind deletes, 7200 ms, to ~12200 ms; rounds 6-9 are skipped. Queued
    # instead of skipped, round 3 would start the moment round 2 ended and cost 2400 ms.
    sim = simulate(stateless(10, "sync", "async"), exact_profile())
    durations = {b: end - start for b, (start, end) in step_spans(sim, "purge").items()}
    paid = {b: d for b, d in durations.items() if d > 0.01}
    assert paid == pytest.approx({2: 2 * DELETE_MS, 5: 6 * DELETE_MS}, abs=1e-3), durations


def test_a_stat_sink_writes_nothing() -> None:
    # One task per batch: with a file sink its sink write is an atomic write (1 ms plus a few hundred
    # bytes at 1000 MB/s, under a microsecond), with the stat sink it is free.
    files = simulate(stateless(2, "sync", "inline"), exact_profile())
    stat = simulate(stateless(2, "sync", "inline"), exact_profile(sink_part_files=0))
    file_spans = _task_spans(files, "sink_write")
    stat_spans = _task_spans(stat, "sink_write")
    assert [e - s for s, e in file_spans] == pytest.approx([WRITE_MS] * 2, abs=1e-3)
    assert [e - s for s, e in stat_spans] == pytest.approx([0.0, 0.0], abs=1e-3)


def _task_spans(sim: Simulation, step: str) -> list[tuple[float, float]]:
    out = []
    for event in sim.trace:
        if re.fullmatch(rf"{step} b\d+ p0", event.action) and event.detail.startswith("start="):
            out.append((float(event.detail[len("start="):]), event.time_ms))
    return out


def test_sink_part_files_is_optional_and_only_0_or_1() -> None:
    assert shipped_profile("lightspeed_cluster").sink_part_files == 1
    assert profile_from_dict(exact_profile(sink_part_files=0)).sink_part_files == 0
    with pytest.raises(ProfileError, match="sink_part_files"):
        profile_from_dict(exact_profile(sink_part_files=0.5))
