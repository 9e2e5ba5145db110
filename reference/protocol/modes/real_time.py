"""Spark's real-time mode (4.1+, ``trigger(realTime=...)``): every rule of the mode, in one place.

Spark runs it as a set of overrides of ``MicroBatchExecution``, gated there and in
``StreamingQueryManager``; ``RealTime`` is the same overrides of ``micro_batch.MicroBatch``:

- the scenario's rules (what ``StreamingQueryManager`` and ``RealTimeModeAllowlist`` refuse);
- the step graph (``RealTimeShape``): long-running tasks, offsets logged at the end of the batch;
- the clock: a batch ends at its deadline (``deadline_ms``);
- the driver steps: ``markMicroBatchStart`` writes no offset entry; ``markMicroBatchEnd`` writes the offsets
  the tasks reported (``logged_offsets``), and the next batch starts there (``batch_start``);
- the restart (``MicroBatchExecution.initializeExecution``): an offset entry newer than the latest commit entry
  is purged (``offsetLog.purgeAfter``), never replayed to its recorded end; the query runs the batch after the
  last commit, from its end offsets, with a new end (micro-batch mode replays such an entry exactly);
- the judge's numbers: a restart replays what the step graph lets be planned and not committed, from the last
  committed offsets.

Spark's files (4.3): ``sql/core/.../streaming/runtime/MicroBatchExecution.scala`` (the real-time path of
``markMicroBatchStart``, ``markMicroBatchEnd``, ``initializeExecution``),
``.../streaming/runtime/RealTimeModeAllowlist.scala``, ``.../datasources/v2/RealTimeStreamScanExec.scala``,
``StreamingQueryManager.scala`` and ``RealTimeTrigger`` in ``sql/api/.../Triggers.scala``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar, Hashable, Sequence

from .. import layout
from ...language.field_reader import ScenarioError
from ...language.scenario import Scenario
from ...language.source_spec import source_batches
from ...language.steps import NodeId
from ..graph import BatchShape, GraphShape, Node, most_not_waiting
from ..logs import log_batches
from ..recovery import RestartPlan, committed_base, fresh_plan, read_restart_logs, resume_after
from ..sources import SourceData
from ..storage import Storage
from .micro_batch import MicroBatch, ReplayRule

# ``spark.sql.streaming.realTimeMode.minBatchDuration`` (SQLConf, default 5000 ms): the shortest batch
# ``StreamingQueryManager.createQuery`` accepts
REAL_TIME_MIN_BATCH_MS = 5_000
REAL_TIME_OPERATORS = ("map", "aggregate", "window_aggregate", "dedup")
REAL_TIME_SOURCES = ("rate", "explicit", "redelivering")

_REFUSED_OPERATORS = {
    "join": "stream-stream joins are not in real-time mode's operator allowlist "
            "(StreamingSymmetricHashJoinExec; RealTimeModeAllowlist, Spark 4.3)",
    "dedup_within_watermark": "dropDuplicatesWithinWatermark is not in real-time mode's operator allowlist "
                              "(StreamingDeduplicateWithinWatermarkExec; RealTimeModeAllowlist, Spark 4.3; "
                              "SPARK-59385 adds it after 4.3)",
    "stateful_function": "flatMapGroupsWithState is not in real-time mode's operator allowlist "
                         "(FlatMapGroupsWithStateExec; RealTimeModeAllowlist, Spark 4.3 allows only the JVM "
                         "transformWithState, which the reference does not model)",
}


def deadline_ms(batch: int, batch_ms: int) -> int:
    """When batch ``batch``'s long-running tasks stop reading: ``(batch + 1) x`` the batch duration.

    Spark (``RealTimeStreamScanExec.inputRDD``) sets the deadline to the batch's start plus its duration,
    so its boundaries drift later by each boundary gap; the model fixes them at multiples of the duration,
    so that every backend cuts the same records into the same batch, and a gap shortens the next batch's
    reading time instead of delaying its deadline."""
    return (batch + 1) * batch_ms


def purge_uncommitted_offsets(storage: Storage) -> list[int]:
    """Delete every offset entry newer than the latest commit entry (``offsetLog.purgeAfter``); the ids."""
    commits = log_batches(storage, layout.COMMITS)
    extra = [b for b in log_batches(storage, layout.OFFSETS) if not commits or b > commits[-1]]
    for b in extra:
        storage.delete(layout.offset_path(b))
    return extra


@dataclass(frozen=True)
class RealTimeShape(GraphShape):
    """Spark's real-time mode: one long-running batch at a time, its offsets known only at its end.

    Spark 4.3, ``MicroBatchExecution``: ``markMicroBatchStart`` writes no offset entry for a real-time
    trigger ("Delay offset logging"); each input partition's task reads until the batch's deadline and
    delivers every record downstream at once (``RealTimeStreamScanExec``, the pipelined shuffle), so the
    sink writes while the task runs, not after the state commit; the stateful task commits its state when
    it ends (``StatefulStreamlineAggregateExec``: ``StateStore.commit`` in a ``CompletionIterator``). When
    the job is complete, ``markMicroBatchEnd`` merges the offsets the tasks reported
    (``populateBatchOffsetsForRTM``), writes the offset log, then the commit log. Batch N+1 plans only
    after that: the boundary gap, in which no task runs. The logs are synchronous here (Spark's stateful
    real-time queries, and a stateless one that disables async progress); ``real_time_async`` writes them
    in the background.

    A task's one ``sink_write`` node stands for its records' deliveries, each made as its record is
    processed: a crash between two of them leaves a prefix of that output, which the at-least-once
    judge treats like the whole (duplicates from the replayed range only).

    One graph batch covers ``step_ms`` of arrival time (the batch duration); a mode that persists progress
    inside a batch (``bounded_replay``) overrides where a batch opens, what a plan waits for and whether
    the logs run behind."""

    step_ms: int = 1

    def opens_batch(self, b: int) -> bool:
        """Whether graph batch ``b`` starts a real-time batch (after the boundary gap): every one."""
        return True

    def plan_deps(self, b: int) -> tuple[NodeId, ...]:
        """Batch ``b`` plans after b-1 committed: the boundary gap."""
        return NodeId.of("plan", b - 1), NodeId.of("source_commit", b - 1)

    def logs_in_background(self, b: int) -> bool:
        """Whether ``b``'s log writes run in the background: no, the next batch waits for them."""
        return False

    def maintenance_every(self) -> int:
        """Maintenance every ``maintenance_interval_ms`` of input: that many graph batches of ``step_ms``."""
        return max(1, self.cfg.maintenance_interval_ms // self.step_ms)

    def batch_nodes(self, b: int) -> list[Node]:
        n = NodeId.of
        prev = b - 1
        logs_behind = self.logs_in_background(b)
        out = [Node(n("plan", b), self.plan_deps(b)),
               Node(n("purge", b), (n("plan", b), n("purge", prev)), self.async_purge)]
        gate = [n("plan", b)] + ([] if self.async_purge else [n("purge", b)])
        for p in range(self.partitions):
            out += self._task_nodes(b, p, gate)
        ended = self.tasks_ended(b)
        out += [Node(n("offset_log_write", b), tuple(ended) + (n("offset_log_write", prev),), logs_behind),
                Node(n("sink_commit", b), tuple(n("sink_write", b, p) for p in range(self.partitions))
                     + (n("sink_commit", prev),)),
                Node(n("commit_log_write", b), tuple(ended) + (n("offset_log_write", b), n("sink_commit", b),
                                                              n("commit_log_write", prev)), logs_behind),
                Node(n("source_commit", b), (n("commit_log_write", b),))]
        return out

    def tasks_ended(self, b: int) -> list[NodeId]:
        """The last nodes of batch ``b``'s tasks: each partition's deliveries and its state commit."""
        steps = ("sink_write", "state_commit") if self.stateful else ("sink_write",)
        return [NodeId.of(step, b, p) for p in range(self.partitions) for step in steps]

    def _task_nodes(self, b: int, p: int, gate: list[NodeId]) -> list[Node]:
        n = NodeId.of
        out = []
        if self.stateful:
            out.append(Node(n("state_load", b, p), tuple(gate) + (n("state_commit", b - 1, p),)))
            out.append(Node(n("task_apply", b, p), (n("state_load", b, p),)))
            out += self._commit_nodes(b, p, (n("task_apply", b, p),))
            if self.is_maintenance_batch(b):
                previous = n("snapshot_upload", b - self.maintenance_every(), p)
                out.append(Node(n("snapshot_upload", b, p), (n("state_commit", b, p), previous), True))
        else:
            out.append(Node(n("task_apply", b, p), tuple(gate) + (n("task_apply", b - 1, p),)))
        # each record's output is delivered as it is produced, not after the task's state commit
        out.append(Node(n("sink_write", b, p), (n("task_apply", b, p),)))
        return out

    def batch_variant(self, b: int) -> Hashable:
        return (super().batch_variant(b), self.opens_batch(b))


class RealTime(MicroBatch):
    """Spark's real-time mode: long-running batches of ``trigger_interval_ms`` each, offsets logged at the end."""

    name: ClassVar[str] = "real_time"
    replay: ClassVar[ReplayRule] = ReplayRule("a real-time restart", from_last_commit=True)
    offsets_from_tasks: ClassVar[bool] = True
    # "Real-time Mode does not retry tasks" (Spark's guide; StreamRealTimeModeSuite, "dedup recovers from a task
    # failure via checkpoint restart"): one failure fails the query, and a restart from the checkpoint recovers it
    task_attempts: ClassVar[int] = 1

    @property
    def step_ms(self) -> int:
        """The arrival time one step-graph batch covers: the batch duration."""
        return self.cfg.trigger_interval_ms

    def opens_batch(self, b: int) -> bool:
        """Whether graph batch ``b`` starts a real-time batch: every one (one graph batch per batch)."""
        return True

    def deadline_ms(self, b: int) -> int:
        """When graph batch ``b``'s tasks stop reading (``deadline_ms``)."""
        return deadline_ms(b, self.step_ms)

    # ------------------------------------------------------------ scenario rules
    def check(self, scenario: Scenario) -> None:
        """Spark's refusals of the engine section (``StreamingQueryManager``), then of the query, its sources
        and its sink (``RealTimeModeAllowlist``), then the micro-batch rules."""
        self.check_engine()
        self.check_query(scenario)
        super().check(scenario)

    def check_engine(self) -> None:
        cfg = self.cfg
        if cfg.trigger_interval_ms < REAL_TIME_MIN_BATCH_MS:
            raise ScenarioError("engine.trigger_interval_ms",
                                f"the real-time trigger interval is {cfg.trigger_interval_ms} ms, less than the "
                                f"{REAL_TIME_MIN_BATCH_MS} ms minimum (Spark: INVALID_STREAMING_REAL_TIME_MODE_"
                                "TRIGGER_INTERVAL, spark.sql.streaming.realTimeMode.minBatchDuration)")
        if cfg.pipelining:
            raise ScenarioError("engine.pipelining",
                                "real-time mode runs one long-running batch at a time: MicroBatchExecution plans "
                                "batch N+1 only after markMicroBatchEnd of batch N, so it cannot be pipelined")
        if cfg.state_checkpoint != "sync":
            raise ScenarioError("engine.state_checkpoint",
                                "real-time mode commits state when each long-running task ends "
                                "(StatefulStreamlineAggregateExec's CompletionIterator calls StateStore.commit), "
                                "before the driver writes the logs; asynchronous state checkpointing is not part "
                                "of it")
        if cfg.provider == "delta":
            raise ScenarioError("engine.state_store.provider",
                                "real-time mode needs the RocksDB state store provider (Spark: STREAMING_REAL_TIME_"
                                "MODE.SQL_CONFIGURATION_NOT_SUPPORTED, StreamingQueryManager."
                                "throwIfConfsAreRealTimeModeIncompatible); use changelog or snapshot")
        if cfg.parallel_store_commit:
            raise ScenarioError("engine.parallel_store_commit",
                                "parallel store commit is for queries with two stores per partition (joins), which "
                                "real-time mode refuses")

    def check_query(self, scenario: Scenario) -> None:
        """What ``RealTimeModeAllowlist`` and ``UnsupportedOperationChecker`` refuse of the query, its sources
        and its sink, each refusal naming Spark's rule (Spark 4.3):

        - operators: the allowlist lists the physical operators a real-time plan may hold. It allows
          projections and filters (``map``), the streamline aggregation (``aggregate``, and a windowed one
          with a watermark, ``window_aggregate``), ``dropDuplicates`` (``StreamingDeduplicateExec``: ``dedup``,
          with or without a watermark, since ``EventTimeWatermarkExec`` is allowed too) and the JVM
          ``transformWithState``; it
          does not allow ``StreamingSymmetricHashJoinExec`` (stream-stream joins),
          ``StreamingDeduplicateWithinWatermarkExec`` (until SPARK-59385, after 4.3) or
          ``FlatMapGroupsWithStateExec``;
        - output mode: Update only (``STREAMING_REAL_TIME_MODE.OUTPUT_MODE_NOT_SUPPORTED``); the reference's
          stateful operators emit updated rows, as Update mode does;
        - sources: only streams that implement ``SupportsRealTimeMode`` (Kafka, and the in-jar
          ``LowLatencyMemoryStream``) deliver records as they arrive; any other is refused
          (``STREAMING_REAL_TIME_MODE.INPUT_STREAM_NOT_SUPPORTED``), Spark's own ``rate`` source among them. Of
          the scenario's sources, those with arrival times (``rate``, ``explicit``, ``redelivering``) stand for
          a Kafka topic whose records arrive at those times (the ``rate`` source for one written at that rate,
          not Spark's ``rate``); ``generated`` has none;
        - sink: ``RealTimeModeAllowlist.allowedSinks`` (console, ``ContinuousMemorySink``, ForeachWriter,
          Kafka) are at-least-once; foreachBatch, a DSv1 ``Sink`` like the v1 memory sink, is refused by
          ``MicroBatchExecution.runBatch`` (``STREAMING_REAL_TIME_MODE.SINK_NOT_SUPPORTED``), so no real-time
          sink commits a batch exactly once."""
        operator = scenario.operator
        for index, op in enumerate(operator.flatten()):
            where = "query.operator" if operator.kind != "chain" else f"query.operator.operators[{index}]"
            if op.kind in _REFUSED_OPERATORS:
                raise ScenarioError(f"{where}.kind", f"real-time mode: {_REFUSED_OPERATORS[op.kind]}")
        if operator.kind == "chain" and sum(op.stateful for op in operator.operators) > 1:
            raise ScenarioError("query.operator", "real-time mode runs in Update output mode, where Spark refuses "
                                                  "a second streaming aggregation (UnsupportedOperationChecker: "
                                                  "\"Multiple streaming aggregations are not supported\" outside "
                                                  "Append mode)")
        for side, src in sorted(scenario.sources.items()):
            if src.kind not in REAL_TIME_SOURCES:
                where = "source.kind" if side == "main" else f"sources.{side}.kind"
                raise ScenarioError(where, f"real-time mode reads only streams that deliver records as they arrive "
                                           f"(SupportsRealTimeMode: Kafka in Spark 4.3; any other source, Spark's own "
                                           f"rate source among them, is refused with STREAMING_REAL_TIME_MODE."
                                           f"INPUT_STREAM_NOT_SUPPORTED). Of the scenario's sources, "
                                           f"{', '.join(REAL_TIME_SOURCES)} stand for such a stream, a Kafka topic "
                                           f"whose records arrive at their times; not {src.kind!r}, which has no "
                                           "arrival times")
        if scenario.sink_mode == "exactly_once":
            raise ScenarioError("sink.mode", "real-time mode's sinks are at-least-once (RealTimeModeAllowlist."
                                             "allowedSinks: console, ContinuousMemorySink, ForeachWriter, Kafka); "
                                             "foreachBatch, a DSv1 Sink, is refused when MicroBatchExecution.runBatch "
                                             "adds a batch to it (STREAMING_REAL_TIME_MODE.SINK_NOT_SUPPORTED): use "
                                             "sink.mode = at_least_once")

    def last_batch(self, scenario: Scenario) -> int:
        """Every backend ends a real-time graph batch at its deadline: one per ``step_ms`` of arrival time."""
        return max(source_batches(replace(src, batch_ms=self.step_ms)) for src in scenario.sources.values())

    # ------------------------------------------------------------ the step graph
    def shape(self, scenario: Scenario, *, store_commit_nodes: bool = True) -> BatchShape:
        base = GraphShape.of(scenario, store_commit_nodes=store_commit_nodes)
        return RealTimeShape(base.cfg, base.partitions, base.stateful, base.uses_watermark, base.moved,
                             base.commit_stores, step_ms=self.step_ms)

    # ------------------------------------------------------------ the clock
    def untimed_cut(self, b: int, data: SourceData) -> tuple[int, ...]:
        """Batch ``b`` ends at its deadline (Spark: ``RealTimeStreamScanExec`` sets the deadline to the batch's
        start plus its duration, and a reader returns no more records once it has passed)."""
        return data.arrived_by(self.deadline_ms(b) - 1, (0,) * len(data.partitions))

    # ------------------------------------------------------------ the driver steps
    def batch_start(self, b: int, planned: tuple[int, ...], reported_ends: dict[int, tuple[int, ...]]
                    ) -> tuple[int, ...]:
        """Batch ``b`` starts where batch b-1's offset entry ended (Spark: ``committedOffsets ++= endOffsets``
        in ``markMicroBatchEnd``, then ``runBatch`` reads from them)."""
        return reported_ends.get(b - 1, planned)

    def logged_offsets(self, start: tuple[int, ...], end: tuple[int, ...], tasks_reported: bool
                       ) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """The end is collected from the tasks at the end of the batch (Spark: ``populateBatchOffsetsForRTM``
        reads each task's report from ``RealTimeStreamScanExec``'s accumulator and merges them): every task
        that reached the deadline reported the batch's cut; while a task has not reported, the driver has only
        the batch's start."""
        return start, end if tasks_reported else start

    def purge_threshold(self, offsets: Sequence[int], commits: Sequence[int], retain: int, batch: int
                        ) -> int | None:
        """``constructNextBatch`` purges ``batchId - minLogEntriesToMaintain`` right after
        ``markMicroBatchStart``, which in real-time mode writes no offset entry: the threshold counts from the
        batch being built, whose entry does not exist yet (with retention 2 and batches 0-6, {4, 5, 6} stay).
        Never past the latest commit."""
        if not commits or not offsets:
            return None
        return min(batch - retain, commits[-1])

    def log_floors(self, retain: int, in_flight: int) -> tuple[int, int]:
        """Purge b runs before ``offsets/b`` exists and after ``commits/b-1``: the ``retain`` entries before b
        stay, every one committed; ``offsets/b`` joins them only once b's tasks reported."""
        return retain, retain

    # ------------------------------------------------------------ the restart
    def on_start(self, storage: Storage) -> None:
        """``initializeExecution``: "Deleting extra entries in offset log to sync up with commit log"."""
        purge_uncommitted_offsets(storage)

    def restart_plan(self, storage: Storage, source_partitions: int) -> RestartPlan:
        """The query runs C + 1 next, from the end offsets of C: the offset entries after the last commit are
        purged, not re-run."""
        logs = read_restart_logs(storage, source_partitions)
        if isinstance(logs, RestartPlan):
            return logs
        if logs.committed is None:
            return fresh_plan(source_partitions)
        logs = logs.but_latest(min(logs.latest, logs.committed))
        return resume_after(storage, logs, committed_base(storage, logs))

    # ------------------------------------------------------------ the judge's numbers
    def replay_most(self, shape: BatchShape) -> int | None:
        """A restart replays everything since the last commit entry: as many batches as the step graph lets be
        planned and not committed (``graph.most_not_waiting``: 1 + the later batches whose ``plan`` can run
        before ``commit_log_write`` of a batch)."""
        return most_not_waiting(shape, "commit_log_write", "plan")
