"""The scenario's input as files, and its query built from Spark's own operators.

Input: every planned batch ``b`` of the reference (``SourceData.planned_end_offsets``)
becomes one JSON-lines file per input side, ``input/<side>/batch-<b>.json``, with
modification times in batch order. The query reads each side with Spark's file
source. Untimed runs set ``maxFilesPerTrigger = 1``, so Spark's batch ``b``
reads exactly the reference's records of batch ``b``, in (source partition,
offset) order, for the differential tests. Realtime runs, which measure
latency, read everything that has arrived at each trigger, as Spark does by
default, under Spark's default trigger (``stream_settings``): a throttle of
one file per trigger would let a slow batch's backlog grow and measure the
queue, not Spark.

Operators (``build_query``), each with the Spark operator whose semantics are
closest to the reference's (``reference/language/operators.py``):

=========================  ============================================================  ===========
scenario operator          Spark                                                         output mode
=========================  ============================================================  ===========
map                        projection                                                    append
aggregate                  ``groupBy(key).agg(count(1) | sum(value))``                    update
window_aggregate           ``withWatermark`` + ``groupBy(key, window(ts, window_ms))``     append
dedup_within_watermark     ``withWatermark`` + ``dropDuplicatesWithinWatermark([key])``    append
dedup                      ``dropDuplicates([key])``; with ``watermark_delay_ms``:        append
                           ``withWatermark`` + ``dropDuplicates([key, ts])``
join                       both sides ``withWatermark``; inner join on key and           append
                           ``lt >= rt - bound AND lt <= rt + bound``
stateful_function          ``withWatermark`` + ``groupBy(key).applyInPandasWithState``     update
                           with an event-time timeout (``session_sum``)
=========================  ============================================================  ===========
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from reference.language.scenario import Fault, OperatorSpec, Scenario
from reference.protocol.sources import Record, SourceData

_FILE = re.compile(r"/input/(main|left|right)/batch-(\d+)\.json$")


def batch_file(root: str, side: str, batch: int) -> str:
    return os.path.join(root, "input", side, f"batch-{batch:06d}.json")


def parse_batch_file(path: str) -> tuple[str, int] | None:
    """(side, planned batch) of an input file path as Spark logs it (``file:///...``), or None."""
    match = _FILE.search(path)
    return (match.group(1), int(match.group(2))) if match else None


class InputFiles:
    """The planned batches of a scenario and the files that feed them to Spark."""

    def __init__(self, scenario: Scenario, root: str, base_mtime: float):
        self.scenario, self.root = scenario, root
        self.data = SourceData.of(scenario)
        self.batches = self.data.planned_batches()
        self.ends = [tuple(self.data.planned_end_offsets(b)) for b in range(self.batches)]
        self.sides = sorted(scenario.sources)
        # global source partitions of each side (a join lays out left first, then right)
        self.partitions: dict[str, list[int]] = {side: [] for side in self.sides}
        for sp, rows in enumerate(self.data.partitions):
            side = rows[0].side if rows else self._side_of_empty(sp)
            self.partitions[side].append(sp)
        self.base_mtime = base_mtime
        self.written = 0
        for side in self.sides:
            os.makedirs(os.path.join(root, "input", side), exist_ok=True)

    def _side_of_empty(self, sp: int) -> str:
        base = 0
        for side in self.sides:
            count = self.scenario.sources[side].partitions
            if sp < base + count:
                return side
            base += count
        raise ValueError(f"source partition {sp} belongs to no side")

    def start(self, batch: int) -> tuple[int, ...]:
        return self.ends[batch - 1] if batch > 0 else (0,) * len(self.data.partitions)

    def records(self, batch: int, side: str) -> list[Record]:
        return [r for r in self.data.slice(self.start(batch), self.ends[batch]) if r.side == side]

    def ready_ms(self, batch: int) -> int:
        """When batch ``batch`` is complete on the scenario's clock: the one rule of every timed backend
        (``SourceData.input_ready_ms``, its last record's arrival)."""
        return self.data.input_ready_ms(self.start(batch), self.ends[batch])

    def write(self, upto: int) -> None:
        """Make the files of batches ``< upto`` visible to Spark (each side's file, in batch order)."""
        for b in range(self.written, min(upto, self.batches)):
            self.write_one(b)

    def write_one(self, b: int, mtime: float | None = None) -> None:
        if b < self.written:
            return
        stamp = self.base_mtime + b if mtime is None else mtime
        staged = []
        for side in self.sides:
            tmp = os.path.join(self.root, "input", f".{side}-{b}.tmp")
            with open(tmp, "w") as fh:
                for r in self.records(b, side):
                    fh.write(json.dumps({"key": r.key, "value": r.value, "event_ms": r.event_time_ms,
                                         "sp": r.source_partition, "off": r.offset,
                                         "arrival_ms": r.arrival_ms, "pb": b}) + "\n")
            os.utime(tmp, (stamp, stamp))
            staged.append((tmp, batch_file(self.root, side, b)))
        for tmp, path in staged:  # both sides of a join appear together
            os.replace(tmp, path)
        self.written = b + 1

    def end_offsets_of(self, side: str, planned: int | None, current: Sequence[int]) -> tuple[int, ...]:
        """``current`` with ``side``'s partitions moved to the end of planned batch ``planned``."""
        out = list(current)
        for sp in self.partitions[side]:
            out[sp] = self.ends[planned][sp] if planned is not None else 0
        return tuple(out)


# ------------------------------------------------------------------ query


def input_schema() -> Any:
    from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType
    return StructType([StructField("key", StringType()), StructField("value", LongType()),
                       StructField("event_ms", LongType()), StructField("sp", IntegerType()),
                       StructField("off", LongType()), StructField("arrival_ms", LongType()),
                       StructField("pb", LongType())])


@dataclass(frozen=True)
class StreamSettings:
    """How the adapter runs Spark's query: the file source's options, the trigger (None: Spark's default) and
    the query's own options (asynchronous progress tracking is one, not a session conf)."""

    source_options: dict[str, str]
    trigger: dict[str, Any] | None
    query_options: dict[str, str]


def stream_settings(scenario: Scenario, realtime: bool) -> StreamSettings:
    """Untimed: one planned batch's file per trigger, ``availableNow`` (batch b is the reference's batch b).
    Realtime: every file that has arrived, at each trigger; Spark's default trigger (the next batch as soon
    as the previous one ends) unless the scenario names an interval; asynchronous progress tracking with the
    scenario's checkpoint interval when it asks for it (``support`` allows it only then)."""
    if not realtime:
        return StreamSettings({"maxFilesPerTrigger": "1"}, {"availableNow": True}, {})
    e = scenario.engine
    query = {"asyncProgressTrackingEnabled": "true",
             "asyncProgressTrackingCheckpointIntervalMs": str(e.checkpoint_interval_ms)} \
        if e.progress_mode == "async" else {}
    interval = e.trigger_interval_ms
    return StreamSettings({}, {"processingTime": f"{interval} milliseconds"} if interval > 0 else None, query)


def _read(spark: Any, root: str, side: str, options: dict[str, str]) -> Any:
    from pyspark.sql import functions as F
    return (spark.readStream.schema(input_schema()).options(**options)
            .json(os.path.join(root, "input", side))
            .withColumn("ts", F.timestamp_millis("event_ms")))


def _ms(delay: int | None) -> str:
    return f"{delay or 0} milliseconds"


def output_mode(op: OperatorSpec) -> str:
    return "update" if op.kind in ("aggregate", "stateful_function") else "append"


@dataclass(frozen=True)
class TaskMarks:
    """Where a task fault marks itself fired, from inside the task, with Spark SQL's ``reflect``: a file in
    ``marks`` (``FaultMarks.claim`` of the checkpoint filesystem's jar: once across every JVM of the run, a
    driver that was halted and its successor, a cluster's executors on this host), or, when the session has no
    jar, a system property of the executor's JVM (once in that JVM: a local master only). Either call returns
    null the first time."""

    run_id: str
    marks: str | None

    def name(self, index: int) -> str:
        return f"task-{index}" if self.marks is not None else f"lightspeed.native.{self.run_id}.fault{index}"

    def reflect(self, index: int, detail: str) -> str:
        """The SQL call that marks fault ``index`` fired with the SQL string ``detail``."""
        if self.marks is None:
            return f"reflect('java.lang.System', 'setProperty', '{self.name(index)}', {detail})"
        assert "'" not in self.marks and "\\" not in self.marks, f"{self.marks}: not quotable in Spark SQL"
        return f"reflect('{FAULT_MARKS_CLASS}', 'claim', '{self.marks}', '{self.name(index)}', {detail})"

    def take(self, spark: Any, index: int) -> str | None:
        """The detail fault ``index`` was marked with (None: it never fired); a property is cleared."""
        if self.marks is None:
            system = spark._jvm.java.lang.System
            mark = system.getProperty(self.name(index))
            system.clearProperty(self.name(index))
            return None if mark is None else str(mark)
        path = os.path.join(self.marks, self.name(index))
        if not os.path.exists(path):
            return None
        with open(path) as fh:
            return str(json.loads(fh.read())["detail"])


FAULT_MARKS_CLASS = "lightspeed.checkpointfs.FaultMarks"


def task_fault_filter(df: Any, keys: Sequence[str], partitions: int | None, faults: Sequence[tuple[int, Fault]],
                      marks: TaskMarks) -> Any:
    """Make a task of the stateful operator fail once per fault, with Spark SQL expressions only.

    The input is hash-partitioned on the operator's own keys into
    ``partitions``: exactly the distribution the stateful operator requires, so
    Spark adds no further shuffle and a filter placed here runs inside the task
    of state partition p, after the operator loaded its state and before it
    commits. For a row of the fault's batch (the ``pb`` column: the planned
    batch of the input file, which is Spark's batch id) in the fault's partition
    (``spark_partition_id()``), the filter marks the fault fired (``TaskMarks``:
    a call that returns null only the first time), and then ``raise_error``
    fails the task. Spark's retry of the task finds the mark and passes. (A
    Python UDF would do, but Spark cannot see through a Python evaluation node
    that the rows are still partitioned, so it would shuffle again and the
    failure would land in another stage.)

    A stateless query (``partitions`` None) has no operator to place it in: the
    filter runs in the task that reads the batch's input file, and
    ``at.partition`` is not used (a batch is one task per input file).
    """
    if not faults:
        return df
    from pyspark.sql import functions as F
    condition = None
    for index, fault in faults:
        where = f"pb = {fault.at.batch}"
        if fault.at.partition is not None and partitions is not None:
            where += f" AND spark_partition_id() = {fault.at.partition}"
        mark = marks.reflect(index, f"concat('batch ', pb, ' partition ', spark_partition_id(), ' key ', {keys[0]})")
        fail = (f"raise_error(concat('injected task_failure (faults[{index}]) in batch ', pb, "
                f"', state partition ', spark_partition_id()))")
        clause = f"CASE WHEN {where} THEN (CASE WHEN {mark} IS NULL THEN {fail} ELSE true END) ELSE true END"
        condition = clause if condition is None else f"({condition}) AND ({clause})"
    assert condition is not None, "at least one fault makes a condition"
    return (df if partitions is None else df.repartition(partitions, *keys)).filter(F.expr(condition))


def executor_loss_filter(df: Any, faults: Sequence[tuple[int, Fault]], marks: TaskMarks) -> Any:
    """Halt the executor that runs a stateless query's task of the fault's batch, once per fault, while the task
    writes its output rows (the batch's sink write): ``FaultMarks.loseExecutor`` reads the task's micro-batch
    from its local property (``streaming.sql.batchId``) and halts only an executor's JVM. A batch of a stateless
    query is one task per input file, so ``at.partition`` is not used. The condition is always true; its calls
    are what matters."""
    if not faults:
        return df
    assert marks.marks is not None, "an executor loss is marked in a file (the checkpoint filesystem's jar)"
    from pyspark.sql import functions as F
    calls = [f"length(coalesce(reflect('{FAULT_MARKS_CLASS}', 'loseExecutor', '{marks.marks}', "
             f"'{EXECUTOR_MARK}{index}', '{fault.at.batch}'), '')) >= 0" for index, fault in faults]
    return df.filter(F.expr(" AND ".join(calls)))


EXECUTOR_MARK = "executor-"   # the mark of a stateless query's executor loss i: <marks>/executor-<i>


def session_sum_function(timeout_ms: int) -> Any:
    """The reference's ``session_sum`` for applyInPandasWithState (event-time timeout)."""

    def session_sum(key: tuple[str], frames: Iterable[Any], state: Any) -> Iterable[Any]:
        import pandas as pd
        if state.hasTimedOut:
            total, count, _last = state.get
            state.remove()
            yield pd.DataFrame({"key": [key[0]], "total": [int(total)], "cnt": [int(count)]})
            return
        total, count, last = state.get if state.exists else (0, 0, None)
        for frame in frames:
            if len(frame) == 0:
                continue
            total += int(frame["value"].sum())
            count += len(frame)
            newest = int(frame["event_ms"].max())
            last = newest if last is None else max(int(last), newest)
        if last is None:
            return
        state.update((int(total), int(count), int(last)))
        # Spark refuses a timeout before the current watermark, and a row the reference calls late can
        # reach here (late rows are filtered with the previous batch's watermark; see spark_impl.native)
        state.setTimeoutTimestamp(max(int(last) + timeout_ms, state.getCurrentWatermarkMs()))

    return session_sum


def build_query(spark: Any, scenario: Scenario, root: str, task_faults: Sequence[tuple[int, Fault]],
                marks: TaskMarks, source_options: dict[str, str] | None = None,
                losses: Sequence[tuple[int, Fault]] = ()) -> Any:
    """The scenario's query as a streaming DataFrame with columns (key, a, b, c) per operator; the file source
    takes ``source_options`` (by default the untimed runs' one file per trigger); ``losses``: a stateless
    query's executor losses (``executor_loss_filter``)."""
    from pyspark.sql import functions as F
    op = scenario.operator
    parts = scenario.state_partitions
    options = stream_settings(scenario, False).source_options if source_options is None else source_options

    def guarded(df: Any, keys: Sequence[str]) -> Any:
        return task_fault_filter(df, keys, parts, task_faults, marks)

    if op.kind == "join":
        delay = _ms(op.watermark_delay_ms)
        left = (_read(spark, root, "left", options).withWatermark("ts", delay)
                .select(F.col("key").alias("lk"), F.col("value").alias("lv"), F.col("ts").alias("lt"), "pb"))
        right = (_read(spark, root, "right", options).withWatermark("ts", delay)
                 .select(F.col("key").alias("rk"), F.col("value").alias("rv"), F.col("ts").alias("rt")))
        left = guarded(left, ["lk"]).drop("pb")
        bound = f"interval {op.time_bound_ms or 0} milliseconds"
        joined = left.join(right, F.expr(f"lk = rk AND lt >= rt - {bound} AND lt <= rt + {bound}"))
        return joined.select(F.col("lk").alias("key"), F.col("lv").alias("a"), F.col("rv").alias("b"))
    df = _read(spark, root, "main", options)
    if op.kind == "map":   # the record's identity travels along: the stat sink keys each record's latency by it
        df = task_fault_filter(df, ["key"], None, task_faults, marks)
        return executor_loss_filter(df.select("key", F.col("value").alias("a"), "sp", "off"), losses, marks)
    if op.kind == "aggregate":
        df = guarded(df, ["key"])
        agg = F.count(F.lit(1)) if op.agg == "count" else F.sum("value")
        return df.groupBy("key").agg(agg.alias("a"))
    if op.kind == "window_aggregate":
        df = df.withWatermark("ts", _ms(op.watermark_delay_ms)).withColumn(
            "window", F.window("ts", f"{op.window_ms} milliseconds"))
        df = guarded(df, ["key", "window"])
        agg = F.count(F.lit(1)) if op.agg == "count" else F.sum("value")
        out = df.groupBy("key", "window").agg(agg.alias("c"))
        return out.select("key", F.unix_millis(F.col("window.start")).alias("a"),
                          F.unix_millis(F.col("window.end")).alias("b"), "c")
    if op.kind == "dedup_within_watermark":
        df = guarded(df.withWatermark("ts", _ms(op.watermark_delay_ms)), ["key"])
        return df.dropDuplicatesWithinWatermark(["key"]).select("key", F.col("value").alias("a"))
    if op.kind == "dedup":   # by key for ever, or by key and event time until the watermark passes it
        if op.watermark_delay_ms is None:
            return guarded(df, ["key"]).dropDuplicates(["key"]).select("key", F.col("value").alias("a"))
        df = guarded(df.withWatermark("ts", _ms(op.watermark_delay_ms)), ["key", "ts"])
        return df.dropDuplicates(["key", "ts"]).select("key", F.col("value").alias("a"))
    if op.kind == "stateful_function":
        df = guarded(df.withWatermark("ts", _ms(op.watermark_delay_ms)), ["key"])
        df = df.select("key", "value", "event_ms", "ts")  # the function's input columns
        out = df.groupBy("key").applyInPandasWithState(
            session_sum_function(op.timeout_ms or 0), "key string, total long, cnt long",
            "total long, cnt long, last long", "update", "EventTimeTimeout")
        return out.select("key", F.col("total").alias("a"), F.col("cnt").alias("b"))
    raise ValueError(f"operator {op.kind!r} has no Spark plan in the adapter")


def sink_row(op: OperatorSpec, row: Any) -> list[Any]:
    """One Spark output row as the reference's sink row ``[key, value]``."""
    if op.kind in ("map", "aggregate", "dedup_within_watermark", "dedup"):
        return [row["key"], int(row["a"])]
    if op.kind == "window_aggregate":
        return [row["key"], [int(row["a"]), int(row["b"]), int(row["c"])]]
    return [row["key"], [int(row["a"]), int(row["b"])]]
