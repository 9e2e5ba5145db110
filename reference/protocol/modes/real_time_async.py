"""Real-time mode with asynchronous progress tracking: Spark's default for a stateless real-time query.

Spark (``StreamingQueryManager.useAsyncProgressTracking``) runs a real-time
query on ``AsyncProgressTrackingMicroBatchExecution`` when the query is
stateless, unless ``asyncProgressTrackingEnabled`` says otherwise (the conf
``STREAMING_ASYNC_PROGRESS_TRACKING_REAL_TIME_MODE_ENABLED_BY_DEFAULT``); the
checkpoint interval is then 0 (every batch's entries are written) and any
other is refused (``STREAMING_REAL_TIME_MODE.ASYNC_PROGRESS_TRACKING_
CHECKPOINTING_INTERVAL_NON_ZERO``). The language picks the default
(``engine_config.EngineConfig.parse``).

What changes against ``real_time.RealTime``: ``markMicroBatchEnd`` only queues
batch N's offset write and then its commit write on one writer thread whose
queue holds one task ("at most 2 writes are in flight"), and batch N+1 starts.
So N+1's tasks run, and deliver, before N's entries are durable; N+2 plans only
once N's commit entry is (queueing N+1's writes waits for it). A crash can
therefore replay N and the part of N+1 already emitted: the replay bound, read
off ``RealTimeAsyncShape``'s graph, is two batches. The restart rule is
real-time mode's (an offset entry after the last commit is purged), and purge
counts the entries known to be durable, as ``AsyncProgressTrackingMicroBatch
Execution.purge`` does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Sequence

from ...language.field_reader import ScenarioError
from ...language.scenario import Scenario
from ...language.steps import NodeId
from ..graph import BatchShape, GraphShape, Node
from .micro_batch import ReplayRule, keep_newest_durable
from .real_time import RealTime, RealTimeShape


@dataclass(frozen=True)
class RealTimeAsyncShape(RealTimeShape):
    """Real-time batches whose log writes run on one background writer, at most two writes in flight."""

    def plan_deps(self, b: int) -> tuple[NodeId, ...]:
        """Batch b plans once b-1's tasks ended and its writes are queued: queueing waits for b-2's commit."""
        n = NodeId.of
        return (n("plan", b - 1), *self.tasks_ended(b - 1), n("sink_commit", b - 1), n("commit_log_write", b - 2))

    def batch_nodes(self, b: int) -> list[Node]:
        n = NodeId.of
        prev = b - 1
        out = [Node(n("plan", b), self.plan_deps(b)),
               Node(n("purge", b), (n("plan", b), n("purge", prev)), self.async_purge)]
        gate = [n("plan", b)] + ([] if self.async_purge else [n("purge", b)])
        for p in range(self.partitions):
            out += self._task_nodes(b, p, gate)
        ended = tuple(self.tasks_ended(b))
        # one writer thread: b's offset write follows b-1's commit write, b's commit write its offset write
        out += [Node(n("offset_log_write", b), ended + (n("offset_log_write", prev), n("commit_log_write", prev)),
                     True),
                Node(n("sink_commit", b), tuple(n("sink_write", b, p) for p in range(self.partitions))
                     + (n("sink_commit", prev),)),
                Node(n("commit_log_write", b), ended + (n("offset_log_write", b), n("sink_commit", b),
                                                        n("commit_log_write", prev)), True),
                Node(n("source_commit", b), (n("commit_log_write", b),))]
        return out


class RealTimeAsync(RealTime):
    """Spark's real-time mode on ``AsyncProgressTrackingMicroBatchExecution`` (stateless queries)."""

    name: ClassVar[str] = "real_time_async"
    replay: ClassVar[ReplayRule] = ReplayRule("a real-time restart (async progress)", from_last_commit=True)

    def check_engine(self) -> None:
        super().check_engine()
        if self.cfg.checkpoint_interval_ms != 0:
            raise ScenarioError("engine.progress.checkpoint_interval_ms",
                                f"{self.cfg.checkpoint_interval_ms} ms: asynchronous progress tracking in real-time "
                                "mode writes every batch's entries, at interval 0 (Spark: STREAMING_REAL_TIME_MODE."
                                "ASYNC_PROGRESS_TRACKING_CHECKPOINTING_INTERVAL_NON_ZERO)")

    def unsupported_reasons(self, scenario: Scenario) -> list[tuple[str, str]]:
        """``AsyncProgressTrackingMicroBatchExecution``'s own validation: no stateful operator."""
        if scenario.operator.stateful:
            return [("engine.progress.mode",
                     "asynchronous progress tracking is refused for stateful queries (Spark: "
                     "AsyncProgressTrackingMicroBatchExecution.checkNotStatefulStreamingQuery, \"Stateful streaming "
                     "queries does not support async progress tracking\"); a stateful real-time query keeps "
                     "synchronous logs")] + super().unsupported_reasons(scenario)
        return super().unsupported_reasons(scenario)

    def shape(self, scenario: Scenario, *, store_commit_nodes: bool = True) -> BatchShape:
        base = GraphShape.of(scenario, store_commit_nodes=store_commit_nodes)
        return RealTimeAsyncShape(base.cfg, base.partitions, base.stateful, base.uses_watermark, base.moved,
                                  base.commit_stores, step_ms=self.step_ms)

    def purge_threshold(self, offsets: Sequence[int], commits: Sequence[int], retain: int, batch: int
                        ) -> int | None:
        """``AsyncProgressTrackingMicroBatchExecution.purge`` ignores the batch id: it keeps the newest ``retain``
        entries known to be durable (``writtenToDurableStorage``); never past the latest commit."""
        return keep_newest_durable(offsets, commits, retain)

    def log_floors(self, retain: int, in_flight: int) -> tuple[int, int]:
        """Purge keeps the newest ``retain`` durable offset entries; of their commit entries, all but the
        newest may still be on the writer thread."""
        return retain, max(1, retain - in_flight)
