"""Micro-batch execution (spec section 2): Spark's ``MicroBatchExecution``, the mode every other mode changes.

``MicroBatch`` is the synchronous protocol: batch b's offset entry is written
before its tasks run (``markMicroBatchStart``), its commit entry after them
(``markMicroBatchEnd``), and a restart re-runs every logged, uncommitted batch
with exactly its logged offsets. Every hook a mode may change is a method here,
with the synchronous behaviour; another mode is a subclass that overrides a
few of them, as Spark's ``AsyncProgressTrackingMicroBatchExecution`` overrides
``markMicroBatchStart``, ``markMicroBatchEnd`` and ``purge`` and keeps its own
validation in the same file.

``AsyncProgress`` is that subclass: offset and commit entries are written by
a background writer, only once ``checkpoint_interval_ms`` has passed since the
last persisted one, and a restart folds the unlogged batches into one.

The hooks, by what they serve:

- the scenario's rules (``check``, ``unsupported_reasons``, ``last_batch``);
- the step graph (``shape``);
- the clock (``untimed_cut``);
- the driver steps (``batch_start``, ``logged_offsets``, ``offset_entry_due``,
  ``same_offset_entry``, ``commit_entry_due``, ``purge_threshold``);
- the restart (``on_start``, ``restart_plan``);
- the judge's numbers (``replay_most``, ``replay_rule``, ``logs_every_batch``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Sequence

from ...language.engine_config import EngineConfig
from ...language.fault_reach import unreachable
from ...language.field_reader import ScenarioError
from ...language.scenario import Scenario
from ...language.source_spec import source_batches, source_records
from ..graph import LOGICAL_BATCH_MS, BatchShape, GraphShape, most_not_waiting
from ..logs import OffsetEntry
from ..recovery import (CommittedBase, RestartLogs, RestartPlan, committed_base, read_restart_logs, rerun_logged,
                        resume_after)
from ..sources import SourceData
from ..storage import Storage


@dataclass(frozen=True)
class ReplayRule:
    """What the judge's ``replay_bound`` oracle holds a restart to in this mode (spec section 5).

    ``most`` is how many batches one restart may re-run (``replay_most``); ``clock_free`` says the limit holds
    on any clock (False: it is read off the untimed clock's spacing of persisted entries, and only a contiguous
    range is asked of a timed backend); ``contiguous`` asks for one range of batch ids; ``from_last_commit``
    asks that the replay start with the batch right after the last commit entry."""

    what: str
    contiguous: bool = False
    from_last_commit: bool = False
    clock_free: bool = True


def keep_newest_durable(offsets: Sequence[int], commits: Sequence[int], retain: int) -> int | None:
    """``AsyncProgressTrackingMicroBatchExecution.purge``: the threshold that keeps the newest ``retain`` offset
    entries known to be durable (``writtenToDurableStorage``), never past the latest commit; None before both
    logs exist."""
    if not commits or not offsets:
        return None
    threshold = offsets[-retain] if len(offsets) >= retain else offsets[0]
    return min(threshold, commits[-1])


class MicroBatch:
    """Synchronous micro-batch execution: the base of every mode (Spark's ``MicroBatchExecution``)."""

    name: ClassVar[str] = "micro_batch"
    replay: ClassVar[ReplayRule] = ReplayRule("a restart")
    # the judge reads a log entry of every batch, in batch order (False: entries only at the persisted points)
    logs_every_batch: ClassVar[bool] = True
    # the offsets logged are what the tasks reported at the end of the batch, not those planned before it
    offsets_from_tasks: ClassVar[bool] = False
    # how many attempts a task gets before its failure fails the query (spark.task.maxFailures, default 4)
    task_attempts: ClassVar[int] = 4

    def __init__(self, cfg: EngineConfig):
        self.cfg = cfg

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MicroBatch) and type(other) is type(self) and other.cfg == self.cfg

    def __hash__(self) -> int:
        return hash((type(self), self.cfg))

    # ------------------------------------------------------------ scenario rules (spec section 1)
    def check(self, scenario: Scenario) -> None:
        """Refuse what this mode cannot run, naming the field (``ScenarioError``): Spark's refusals, then a fault
        no step of this mode can reach (``fault_reach``)."""
        reasons = self.unsupported_reasons(scenario)
        if reasons and not scenario.explore_unsupported:
            path, why = reasons[0]
            raise ScenarioError(path, f"unsupported combination: {why}. "
                                      "Set \"explore_unsupported\": true to run it anyway.")
        refused = unreachable(scenario, self.last_batch(scenario))
        if refused is not None:
            raise ScenarioError(*refused)

    def unsupported_reasons(self, scenario: Scenario) -> list[tuple[str, str]]:
        """Combinations Spark refuses (that ``explore_unsupported`` runs anyway), each with its field and why."""
        return scenario.unsupported_reasons()

    def last_batch(self, scenario: Scenario) -> int:
        """One past the highest batch id any backend can run: fixed cuts give ``source_batches``; a timed backend
        cutting by its trigger takes at least one new record per batch."""
        fixed = self.cfg.batch_cuts == "fixed"
        return max(source_batches(src) if fixed or src.kind == "generated" else
                   max(source_batches(src), source_records(src))
                   for src in scenario.sources.values())

    # ------------------------------------------------------------ the step graph (spec section 2)
    def shape(self, scenario: Scenario, *, store_commit_nodes: bool = True) -> BatchShape:
        """The step graph's shape (``graph.GraphShape``: sync or async progress, pipelining, async state)."""
        return GraphShape.of(scenario, store_commit_nodes=store_commit_nodes)

    # ------------------------------------------------------------ the clock
    def untimed_cut(self, b: int, data: SourceData) -> tuple[int, ...]:
        """Where the untimed clock ends batch ``b``: the source's planned cut."""
        return tuple(data.planned_end_offsets(b))

    # ------------------------------------------------------------ the driver steps
    def batch_start(self, b: int, planned: tuple[int, ...], reported_ends: dict[int, tuple[int, ...]]
                    ) -> tuple[int, ...]:
        """Where batch ``b`` starts once it plans: where it was planned to."""
        return planned

    def logged_offsets(self, start: tuple[int, ...], end: tuple[int, ...], tasks_reported: bool
                       ) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """What ``offsets/b`` holds: the planned offsets, logged before the tasks run (``markMicroBatchStart``)."""
        return start, end

    def offset_entry_due(self, b: int, first_batch: int, last_persisted_ms: int | None, now_ms: int) -> bool:
        """Whether ``offset_log_write`` of ``b`` writes its entry: always, under synchronous progress."""
        return True

    def same_offset_entry(self, logged: OffsetEntry, start: tuple[int, ...], end: tuple[int, ...]) -> bool:
        """Whether an entry already logged for the batch is the one it would write: a re-run batch runs with
        exactly its logged offsets."""
        return logged.start == start and logged.end == end

    def commit_entry_due(self, b: int, persisted_offsets: set[int]) -> bool:
        """Whether ``commit_log_write`` of ``b`` writes its entry: always, under synchronous progress."""
        return True

    def purge_threshold(self, offsets: Sequence[int], commits: Sequence[int], retain: int, batch: int
                        ) -> int | None:
        """Below which batch id purge ``batch`` deletes log entries of both logs, from their ids as the driver
        knows them, never past the latest commit; None before both logs exist. Spark's ``purge(batchId -
        minLogEntriesToMaintain)`` runs once ``markMicroBatchStart`` has written ``offsets/batchId``, so the
        newest offset entry stands for the batch (under pipelining a later one may already be logged)."""
        if not commits or not offsets:
            return None
        return min(offsets[-1] - retain, commits[-1])

    def log_floors(self, retain: int, in_flight: int) -> tuple[int, int]:
        """The fewest offset and commit entries purge leaves (the judge's floors): the newest offset entry and
        the ``retain`` before it; of their commit entries all but those in flight."""
        return retain + 1, max(1, retain + 1 - in_flight)

    # ------------------------------------------------------------ the restart
    def on_start(self, storage: Storage) -> None:
        """What a (re)started query does to the checkpoint before it plans: nothing in micro-batch mode."""

    def restart_plan(self, storage: Storage, source_partitions: int) -> RestartPlan:
        """Where a restarted query resumes (``recovery.py``): after the latest commit entry, re-running every
        logged and uncommitted batch with exactly its logged offsets."""
        logs = read_restart_logs(storage, source_partitions)
        if isinstance(logs, RestartPlan):
            return logs
        base = committed_base(storage, logs)
        if logs.committed == logs.latest:
            return resume_after(storage, logs, base)
        return self.rerun_uncommitted(storage, logs, base)

    def rerun_uncommitted(self, storage: Storage, logs: RestartLogs, base: CommittedBase) -> RestartPlan:
        """The logged batches after the latest commit entry: each re-runs with exactly its logged offsets."""
        return rerun_logged(storage, logs, base)

    # ------------------------------------------------------------ the judge's numbers (spec section 5)
    def replay_most(self, shape: BatchShape) -> int | None:
        """The most batches one restart re-runs: those the step graph lets hold an offset entry and no commit
        entry at once (``graph.most_not_waiting``)."""
        return most_not_waiting(shape, "commit_log_write", "offset_log_write")


class AsyncProgress(MicroBatch):
    """Asynchronous progress tracking (Spark's ``AsyncProgressTrackingMicroBatchExecution``): log entries only
    every ``checkpoint_interval_ms``, written in the background; a restart folds the unlogged batches."""

    name: ClassVar[str] = "async_progress"
    replay: ClassVar[ReplayRule] = ReplayRule("async progress", contiguous=True, clock_free=False)
    logs_every_batch: ClassVar[bool] = False

    def unsupported_reasons(self, scenario: Scenario) -> list[tuple[str, str]]:
        """Spark's own validation of the mode (``AsyncProgressTrackingMicroBatchExecution``): no stateful
        operator, and an at-least-once sink."""
        reasons = []
        if scenario.operator.stateful:
            reasons.append(("engine.progress.mode",
                            "asynchronous progress tracking is refused for stateful queries: after a restart "
                            "the unpersisted batches are folded into one with new boundaries, but state "
                            "versions of the old boundaries survive, so state would be counted twice "
                            "(Spark: AsyncProgressTrackingMicroBatchExecution refuses stateful operators)"))
        if scenario.sink_mode == "exactly_once":
            reasons.append(("sink.mode",
                            "asynchronous progress tracking gives at-least-once output: re-run batches get "
                            "new ids and boundaries, so an exactly-once commit by batch id cannot dedupe them; "
                            "use sink.mode = at_least_once"))
        return reasons + super().unsupported_reasons(scenario)

    def offset_entry_due(self, b: int, first_batch: int, last_persisted_ms: int | None, now_ms: int) -> bool:
        """An offset entry is written only once ``checkpoint_interval_ms`` has passed since the last persisted
        one (and always for the first batch of an incarnation)."""
        return b == first_batch or last_persisted_ms is None or \
            now_ms - last_persisted_ms >= self.cfg.checkpoint_interval_ms

    def same_offset_entry(self, logged: OffsetEntry, start: tuple[int, ...], end: tuple[int, ...]) -> bool:
        """Async progress folds unlogged batches into a re-run, so only its end is fixed."""
        return logged.end == end

    def commit_entry_due(self, b: int, persisted_offsets: set[int]) -> bool:
        """A commit entry only for a batch whose offset entry was persisted."""
        return b in persisted_offsets

    def purge_threshold(self, offsets: Sequence[int], commits: Sequence[int], retain: int, batch: int
                        ) -> int | None:
        """The threshold comes from the entries known to be durable (``AsyncOffsetSeqLog``): keep the newest
        ``retain`` offset entries, never past the latest commit."""
        return keep_newest_durable(offsets, commits, retain)

    def rerun_uncommitted(self, storage: Storage, logs: RestartLogs, base: CommittedBase) -> RestartPlan:
        """``commits/L`` is missing: L re-runs from the end offsets of the previous persisted entry, so the
        batches between, never logged, are folded into L."""
        previous = [b for b in logs.offsets if b < logs.latest]
        start = OffsetEntry.read(storage, previous[-1]).end if previous else (0,) * logs.source_partitions
        end = OffsetEntry.read(storage, logs.latest).end
        kept = previous[-1] if previous else -1
        return RestartPlan(logs.latest, start, {logs.latest: (start, end)}, base.trackers, base.lineage,
                           base.version, kept)

    def replay_most(self, shape: BatchShape) -> int | None:
        """On the untimed clock, a restart re-runs from the batch after the previous persisted offset entry P
        through the newest batch planned. An entry persists once ``checkpoint_interval_ms`` has passed on the
        clock that plans batch b at ``b * max(trigger_interval_ms, LOGICAL_BATCH_MS)`` (a ``clock_skew`` fault
        only sets it forward, which persists an entry sooner), so the latest persisted entry L is at most
        ``between`` batches after P; and at most as many batches as the step graph lets be planned and not
        committed are planned from L on (L itself among them)."""
        batch_ms = max(self.cfg.trigger_interval_ms, LOGICAL_BATCH_MS)
        between = -(-self.cfg.checkpoint_interval_ms // batch_ms)   # ceil
        return between + most_not_waiting(shape, "commit_log_write", "plan") - 1
