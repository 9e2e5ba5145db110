"""The typed outcome of a run on Spark's own Structured Streaming, from what the driver saw and the checkpoint.

Batches and their boundaries come from Spark's ``offsets/<b>`` (``spark_checkpoint.py``),
state from Spark's state data source (``state.py``), the sink from the adapter's
sink directory (``sink.py``), recoveries from the supervisor, progress from
``query.recentProgress``. End-to-end latency (realtime runs) ends at a record's
first visibility at the sink, with the one percentile definition of
``reference.protocol.timing``; what only this backend reports goes under
``details["native"]``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from reference.protocol.outcome import BatchRecord, Outcome, SinkEntry, Timing, canonical_rows, digest_rows
from reference.protocol.timing import LatencySummary, Throughput, summarize_latency, summarize_throughput

from ..latency import SinkDelivery, record_latencies_ms, record_throughput
from .fault_plan import MARK_PREFIX
from .plan import EXECUTOR_MARK
from .query_run import NativeRun
from .stat_sink import first_processed, read_stat_sink
from .state import read_states
from .support import BACKEND


def native_outcome(run: NativeRun) -> Outcome:
    started = time.time()
    batches = committed_batches(run)
    state: dict[str, Any] = {}
    state_errors: list[str] = []
    committed = run.checkpoint.latest_commit()
    if run.sc.operator.stateful and committed >= 0:
        latest = committed + 1
        versions = list(range(max(1, latest - run.sc.engine.min_batches_to_retain + 1), latest + 1))
        state, state_errors = read_states(run.spark, run.checkpoint.path, run.sc, versions)
    run.timing["state_read_s"] = round(time.time() - started, 3)
    if run.stat_sink:
        stat = stat_sink_results(run)
        batches, sink, latency, throughput = stat.batches, stat.sink, stat.latency, stat.throughput
    else:
        # a run that is not realtime feeds all its input at once: its records have no arrival to measure from
        deliveries = sink_deliveries(run, batches)
        latency = summarize_latency(record_latencies_ms(run.files.data, deliveries, run.t0)) \
            if run.realtime else LatencySummary()
        # whether Spark kept up with the paced input (reference.protocol.timing's one rule); one that did not is backlogged
        throughput = record_throughput(run.files.data, deliveries, run.t0) if run.realtime else None
        sink = run.sink.entries()
    fired, not_fired = faults_fired(run)
    return Outcome(run.sc.name, BACKEND, tuple(batches), state, sink, tuple(run.observer.recoveries),
                   tuple(run.progress), tuple(run.checkpoint.file_list(run.sink.dir)), run.sc.seed, run.error,
                   tuple(state_errors), Timing(latency, run.timing.get("queries_s"), throughput),
                   {"native": details(run, fired, not_fired)}, tuple(sorted(f["fault"] for f in not_fired)))


@dataclass(frozen=True)
class StatResults:
    """What a run through the stat sink delivered: Spark's batches (epochs) with the input each processed,
    the sink's rows per batch, and each record's latency from creation to its first processing."""

    batches: list[BatchRecord]
    sink: tuple[SinkEntry, ...]
    latency: LatencySummary
    throughput: Throughput | None


def stat_sink_results(run: NativeRun) -> StatResults:
    """Batches, sink and latency from the stat sink's records (``stat_sink.py``). An epoch reads whole input
    files, so its records are a contiguous range of offsets per source partition; its boundaries are where
    each partition's processed offsets end, carried from the epoch before. The map operator's output row is
    the record's ``[key, value]``."""
    data = run.files.data
    processed = read_stat_sink(run.stat_dir)
    first = first_processed(processed)
    ends = [0] * len(data.partitions)
    batches, entries = [], []
    for epoch in sorted({p.epoch for p in processed}):
        mine = [p for p in processed if p.epoch == epoch]
        start = tuple(ends)
        for p in mine:
            ends[p.ids[0]] = max(ends[p.ids[0]], p.ids[1] + 1)
        batches.append(BatchRecord(epoch, tuple(ends), start, 0, 1))
        rows = canonical_rows([[data.partitions[sp][off].key, data.partitions[sp][off].value]
                               for sp, off in (p.ids for p in mine)])
        entries.append(SinkEntry(epoch, tuple(rows), 1, (digest_rows(rows),)))
    created = [float(data.partitions[sp][off].arrival_ms) for sp, off in first]
    visible = [(p.seen_s - run.t0) * 1000.0 for p in first.values()]
    return StatResults(batches, tuple(entries), summarize_latency(v - c for c, v in zip(created, visible)),
                       summarize_throughput(created, visible))


def committed_batches(run: NativeRun) -> list[BatchRecord]:
    """Every committed batch with the boundaries of the input files Spark logged for it."""
    out = []
    position = (0,) * len(run.files.data.partitions)
    for b in range(run.checkpoint.latest_commit() + 1):
        info = run.batch_info.get(b)
        if info is None:
            run.notes.append(f"batch {b} is committed but was never observed by foreachBatch")
            continue
        start = position
        for side, planned in sorted(info.files.items()):
            position = run.files.end_offsets_of(side, planned, position)
        out.append(BatchRecord(b, position, start, info.watermark_ms, max(1, run.plannings(b))))
    return out


def sink_deliveries(run: NativeRun, batches: list[BatchRecord]) -> list[SinkDelivery]:
    """Every delivery of a committed batch (Spark re-runs a batch with its logged input files)."""
    return [SinkDelivery(batch.id, batch.start_offsets or (), batch.end_offsets, sent.seen_s)
            for batch in batches for sent in run.sink.deliveries.get(batch.id, [])]


def details(run: NativeRun, fired: list[dict[str, Any]], not_fired: list[dict[str, Any]]) -> dict[str, Any]:
    """What only this backend reports: Spark's version, which faults fired where, notes, batch durations."""
    durations = [float(p.duration_ms["triggerExecution"]) for p in run.progress]
    return {"spark_version": run.spark.version, "checkpoint": run.checkpoint.path, "realtime": run.realtime,
            "faults_fired": fired, "faults_not_fired": not_fired, "jvm_deaths": run.jvm_deaths, "notes": run.notes,
            "batch_duration_ms": summarize_latency(durations).to_dict(), "timing_s": run.timing,
            "progress": run.progress_extras, "storage": run.storage, "stat_sink": run.stat_sink}


def faults_fired(run: NativeRun) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Every fault that fired, with where (damage: the batch boundary; a fault fired by path: the operation,
    the file relative to the checkpoint, the incarnation, the JVM and thread, and the task it was in; a task
    failure: the batch and Spark's partition), and every fault that did not."""
    fired = list(run.fired)
    not_fired = []
    marks = run.marked()
    for index, fault in enumerate(run.sc.faults):
        point, b = run.sites[index]
        if point == "fs":
            mark = marks.get(f"{MARK_PREFIX}{index}")
            if mark is None:
                trigger = run.triggers[index]
                not_fired.append({"fault": index, "kind": fault.kind, "point": point, "batch": b,
                                  "operation": trigger.describe() if trigger else "none: no file operation of "
                                                                                  "Spark's bounds this step"})
                continue
            fired.append({"fault": index, "kind": fault.kind, "point": point, "batch": b, "op": mark["op"],
                          "when": mark["when"], "path": run.relative(mark["path"]),
                          "incarnation": run.fired_in.get(f"{MARK_PREFIX}{index}"),
                          **{k: mark[k] for k in ("pid", "thread", "executor", "stageId", "partitionId",
                                                  "attemptNumber") if k in mark}})
        elif point == "executor":
            mark = marks.get(f"{EXECUTOR_MARK}{index}")
            if mark is None:
                not_fired.append({"fault": index, "kind": fault.kind, "point": point, "batch": b})
                continue
            fired.append({"fault": index, "kind": fault.kind, "point": point, "batch": b,
                          **{k: mark[k] for k in ("pid", "thread", "executor", "stageId", "partitionId",
                                                  "attemptNumber") if k in mark}})
        elif point == "task":
            detail = run.task_marks.take(run.spark, index)
            if detail is None:
                not_fired.append({"fault": index, "kind": fault.kind, "point": point, "batch": b})
                continue
            words = detail.split()   # "batch <b> partition <p> key <k>": the task that failed
            fired.append({"fault": index, "kind": fault.kind, "point": point, "batch": int(words[1]),
                          "partition": int(words[3])})
        elif not any(f["fault"] == index for f in fired):
            not_fired.append({"fault": index, "kind": fault.kind, "point": point, "batch": b})
    return sorted(fired, key=lambda f: f["fault"]), not_fired
