"""Realtime stateless runs on Spark's own Structured Streaming: the stat sink and asynchronous progress tracking.

A realtime run of a stateless query delivers through the stat sink (Spark's foreach sink in the JVM), the only
kind of run in which Spark accepts asynchronous progress tracking; each record's latency is its creation to its
first processing. The Spark test runs the offset-management query with both features on the object-store
profile and checks the outcome against Spark's own progress events.
"""

from __future__ import annotations

import os

import pytest

from reference.language.catalogue import scenario_dict
from reference.language.scenario import Scenario
from spark_impl.native import NativeUnsupported
from spark_impl.native.stat_sink import first_processed, read_stat_sink, rows_recorded
from spark_impl.native.support import check_supported, needs_file_order, uses_stat_sink


def _rate_map(engine: dict, rate: int = 200, seconds: int = 3, **extra) -> Scenario:
    return Scenario.from_dict({"name": "stat-sink", "seed": 3,
                               "source": {"kind": "rate", "rows_per_second": rate, "duration_s": seconds,
                                          "partitions": 2, "keys": 20, "batch_ms": 50},
                               "query": {"operator": {"kind": "map"}, "state_partitions": 2},
                               "sink": {"mode": "at_least_once"}, "engine": engine, **extra})


ASYNC_BOTH = {"progress": {"mode": "async", "checkpoint_interval_ms": 1000},
              "log_purge": {"mode": "async", "min_batches_to_retain": 2}}


def test_the_sinks_files_are_read_back_and_a_record_counts_at_its_first_processing(tmp_path):
    (tmp_path / "e0-p0-n2-aa.tsv").write_text("0\t5\t100.5\n1\t7\t100.25\n")
    (tmp_path / "e1-p1-n1-bb.tsv").write_text("0\t5\t101.0\n")        # processed again (a retried batch)
    (tmp_path / ".e2-p0-n9-cc.tsv.tmp").write_text("junk\n")          # still being written: not counted
    assert rows_recorded(str(tmp_path)) == 3
    rows = read_stat_sink(str(tmp_path))
    assert sorted((r.epoch, r.ids) for r in rows) == [(0, (0, 5)), (0, (1, 7)), (1, (0, 5))]
    first = first_processed(rows)
    assert first[(0, 5)].seen_s == 100.5 and first[(0, 5)].epoch == 0 and first[(1, 7)].seen_s == 100.25
    assert rows_recorded(str(tmp_path / "missing")) == 0


def test_asynchronous_progress_runs_only_realtime_and_stateless_as_spark_allows():
    check_supported(_rate_map(ASYNC_BOTH), realtime=True)
    with pytest.raises(NativeUnsupported) as err:
        check_supported(_rate_map(ASYNC_BOTH), realtime=False)      # availableNow: Spark refuses it
    assert err.value.field == "engine.progress.mode"
    stateful = Scenario.from_dict({**scenario_dict("aggregate", "async_progress"), "explore_unsupported": True})
    with pytest.raises(NativeUnsupported, match="stateless"):
        check_supported(stateful, realtime=True)


def test_a_stat_sink_run_refuses_faults_naming_the_field():
    fault = {"at": {"step": "sink_write", "batch": 1, "when": "after"}, "kind": "driver_crash"}
    with pytest.raises(NativeUnsupported) as err:
        check_supported(_rate_map({}, faults=[fault]), realtime=True)
    assert err.value.field == "faults[0]"


def test_which_runs_use_the_stat_sink_and_which_keep_one_task_per_file():
    assert uses_stat_sink(_rate_map({}), realtime=True) and not uses_stat_sink(_rate_map({}), realtime=False)
    aggregate = Scenario.from_dict(scenario_dict("aggregate"))
    dedup = Scenario.from_dict(scenario_dict("dedup_within_watermark"))
    assert not uses_stat_sink(aggregate, realtime=True)
    assert needs_file_order(aggregate, realtime=False) and not needs_file_order(aggregate, realtime=True)
    assert needs_file_order(dedup, realtime=True)


@pytest.mark.spark
def test_both_features_on_the_object_store_deliver_every_record_with_its_batchs_timing(spark, tmp_path):
    """Async progress and async purge, realtime, on the object-store profile: every oracle holds (at-least-once
    output of a map), every record is delivered, every offset and commit log entry is written on Spark's
    asynchronous log writer, off the query's thread (what walCommit and commitOffsets then time is their
    queuing: the experiment measures it), and each record's first processing falls inside its batch as Spark's
    progress event times it."""
    from reference.judge.oracles import check_outcome, failures
    from spark_impl.native import run_native
    scenario = _rate_map(ASYNC_BOTH)
    outcome = run_native(scenario, workdir=str(tmp_path), realtime=True, storage_profile="object_store").outcome
    assert outcome.error is None, outcome.error
    assert not failures(check_outcome(scenario, outcome, None))
    assert outcome.details["native"]["stat_sink"] is True
    total = 200 * 3
    assert outcome.timing is not None and outcome.timing.latency_ms.count == total
    assert outcome.batches[-1].end_offsets == (total // 2, total // 2)
    for prev, batch in zip(outcome.batches, outcome.batches[1:]):
        assert batch.start_offsets == prev.end_offsets
    storage = outcome.details["native"]["storage"]
    for log in ("offsets", "commits"):
        written = storage["operations"][f"driver/{log}/create"]["count"]
        assert written >= 1 and storage["async_log_write"].get(f"driver/{log}/create") == written, log
    windows = {p.batch_id: (p.timestamp_ms, p.timestamp_ms + float(p.duration_ms["triggerExecution"]))
               for p in outcome.progress}
    records = read_stat_sink(os.path.join(str(tmp_path), "stat"))
    epochs = {r.epoch for r in records}
    # the adapter stops the query once the sink has every record, so the last batch may end without its event
    assert windows and epochs - set(windows) <= {max(epochs)}
    for record in records:
        if record.epoch in windows:
            begin, end = windows[record.epoch]
            assert begin - 2 <= record.seen_s * 1000.0 <= end + 2, record
