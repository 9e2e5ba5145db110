"""The protocol of spec section 2 as data: the step graph of one incarnation.

One node per (step, batch, partition), with edges that say what each step must
wait for under the scenario's modes. Any topological order of the graph is a
legal execution, so the concurrency of every Lightspeed feature (pipelining,
async progress, async purge, async state checkpointing, maintenance) is
exactly the freedom the graph leaves:

- sync: batch b+1 plans after ``source_commit`` of b;
- async progress: offset and commit log writes are background steps, tasks do
  not wait for the offset log;
- async purge: purge rounds run in the background, in order; a timed backend
  skips a round while the previous one still runs (Spark's ``AsyncLogPurge``);
- async state checkpointing: ``changelog_write``/``state_commit`` of b are
  background steps; b+1 may start, b+2 may not until b's state is durable;
- pipelining: partition p of b+1 starts when partition p of b finished; batch
  b is planned once batch b - ``pipeline_depth`` has committed;
- parallel store commit: each store of a partition (a join's two sides) has its
  own ``changelog_write`` and ``state_commit``, tagged with the store, and
  neither waits for the other's;
- real-time mode (``RealTimeShape``): long-running tasks, offsets logged at the
  end of the batch, after every task reported; no batch overlaps another.

The graph is built once, as values; the reference's sequential scheduler, the
simulator and the Spark engine's scheduler all consume it and re-derive
nothing. ``GraphShape.batch_nodes`` gives one batch's nodes with every
dependency it may have; ``build_graph`` keeps the dependencies on nodes that
exist (a dependency on a batch before a restart is already satisfied).
Schedulers read a shape only through ``BatchShape``, so a mode whose batches
are made differently is one more shape, which ``shape_of`` picks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Hashable, Iterable, Protocol

from .rebalancing import PlacementTimeline
from ..language.scenario import EngineConfig, Scenario
from ..language.steps import NodeId

LOGICAL_BATCH_MS = 100   # the untimed clock: batch b is planned at b * max(trigger_interval_ms, this)


@dataclass(frozen=True)
class Node:
    """A step of the graph and the steps it waits for; a background step is off the critical path."""

    id: NodeId
    deps: tuple[NodeId, ...]
    background: bool = False


class BatchShape(Protocol):
    """A mode's step graph, one batch at a time: what every scheduler reads (the mode seam).

    ``GraphShape`` is the micro-batch protocol's shape, in every Lightspeed mode. A new mode of the protocol
    (one whose batches are made of other steps or other edges) is a new shape, chosen by ``shape_of``; the
    reference's sequential scheduler, the simulator's templates and the PySpark engine's scheduler consume
    any shape through these members alone.
    """

    @property
    def partitions(self) -> int: ...

    @property
    def uses_watermark(self) -> bool: ...

    @property
    def moved(self) -> frozenset[tuple[int, int]]:
        """(batch, partition) whose task runs on another executor than the batch before (``rebalancing.py``)."""
        ...

    @property
    def commit_stores(self) -> tuple[str, ...]:
        """The stores whose commits are nodes of their own, tagged with the store (parallel store commit)."""
        ...

    def batch_nodes(self, b: int) -> list[Node]:
        """The nodes of batch ``b`` in creation order, each with every dependency it may have."""
        ...

    def batch_variant(self, b: int) -> Hashable:
        """Batches of one variant have the same nodes and edges, shifted by their batch id (the simulator
        builds one template per variant)."""
        ...

    def variant_batches(self) -> tuple[int, ...]:
        """A batch of each variant every run meets; others (a moved partition's) are met as they come."""
        ...

    def maintenance_every(self) -> int: ...

    def is_maintenance_batch(self, batch: int) -> bool: ...


@dataclass(frozen=True)
class GraphShape:
    """Everything the step graph depends on: the engine modes, the partitions and what the query keeps."""

    cfg: EngineConfig
    partitions: int
    stateful: bool
    uses_watermark: bool
    # (batch, partition) whose task runs on another executor than the batch before (``rebalancing.py``)
    moved: frozenset[tuple[int, int]] = frozenset()
    # The stores whose commits are nodes of their own (parallel store commit with two or more stores per
    # partition); empty: one ``changelog_write`` and one ``state_commit`` node commit every store in turn.
    commit_stores: tuple[str, ...] = ()

    @staticmethod
    def of(scenario: Scenario, *, store_commit_nodes: bool = True) -> "GraphShape":
        """The scenario's shape. ``store_commit_nodes=False``: a backend that commits a partition's stores
        concurrently inside one step (the simulator, the Spark engine) keeps one commit node per partition."""
        ops = scenario.operator.flatten()
        moves = PlacementTimeline(scenario).moves()
        split = store_commit_nodes and scenario.engine.parallel_store_commit and len(scenario.store_ids) > 1
        return GraphShape(scenario.engine, scenario.state_partitions, bool(scenario.store_ids),
                          any(op.watermark_delay_ms is not None for op in ops),
                          frozenset((m.batch, m.partition) for m in moves), scenario.store_ids if split else ())

    @property
    def async_progress(self) -> bool:
        return self.cfg.progress_mode == "async"

    @property
    def async_state(self) -> bool:
        return self.cfg.state_checkpoint == "async" and self.stateful

    @property
    def async_purge(self) -> bool:
        return self.cfg.log_purge_mode == "async"

    def maintenance_every(self) -> int:
        """Maintenance runs every this many batches (``maintenance_interval_ms`` on the untimed clock)."""
        batch_ms = max(self.cfg.trigger_interval_ms, LOGICAL_BATCH_MS)
        return max(1, self.cfg.maintenance_interval_ms // batch_ms)

    def is_maintenance_batch(self, batch: int) -> bool:
        """Whether maintenance (``snapshot_upload``) runs after ``batch``'s state commit."""
        return self.stateful and self.cfg.provider != "snapshot" and (batch + 1) % self.maintenance_every() == 0

    def batch_variant(self, b: int) -> Hashable:
        """A maintenance batch has ``snapshot_upload`` nodes; under async state checkpointing a moved
        partition's ``state_load`` waits for its previous commit."""
        moved = tuple(sorted(p for bb, p in self.moved if bb == b)) if self.async_state else ()
        return (self.is_maintenance_batch(b), moved)

    def variant_batches(self) -> tuple[int, ...]:
        return (0, self.maintenance_every() - 1)

    def plan_lag(self) -> int:
        """How many batches may be planned and not yet committed."""
        return self.cfg.pipeline_depth if self.cfg.pipelining else 2

    # ------------------------------------------------------------ nodes
    def batch_nodes(self, b: int) -> list[Node]:
        """The nodes of batch ``b`` in creation order, each with every dependency it may have."""
        n = NodeId.of
        prev, prev2, lag = b - 1, b - 2, self.plan_lag()
        plan_deps = [n("plan", prev)]
        if self.cfg.pipelining:
            plan_deps += [n("offset_log_write", prev), n("source_commit", b - lag)]
        elif self.async_state or self.async_progress:
            plan_deps += [n("sink_commit", prev), n("commit_log_write", prev2)]
        else:
            plan_deps += [n("source_commit", prev)]
        if self.async_progress:
            plan_deps += [n("offset_log_write", b - lag), n("commit_log_write", b - lag)]
        # purge follows the offset log write (Spark: markMicroBatchStart, then purge); under async progress
        # that write is only queued, so purge does not wait for it to land. Rounds stay in order; a timed
        # backend skips an async round while the previous one still runs (AsyncLogPurge), so planning never
        # waits for purge.
        purge_after = n("plan", b) if self.async_progress else n("offset_log_write", b)
        out = [Node(n("plan", b), tuple(plan_deps)),
               Node(n("offset_log_write", b), (n("plan", b), n("offset_log_write", prev)), self.async_progress),
               Node(n("purge", b), (purge_after, n("purge", prev)), self.async_purge)]
        gate = [n("plan", b)] if self.async_progress else [n("offset_log_write", b)]
        if not self.async_purge:
            gate.append(n("purge", b))
        for p in range(self.partitions):
            out += self._task_nodes(b, p, gate)
        sink_commit_deps = [n("sink_write", b, p) for p in range(self.partitions)] + [n("sink_commit", prev)]
        commit_deps = [n("sink_commit", b), n("commit_log_write", prev)]
        commit_deps += [n("state_commit", b, p) for p in range(self.partitions)]
        if self.async_progress:
            commit_deps.append(n("offset_log_write", b))
        out += [Node(n("sink_commit", b), tuple(sink_commit_deps)),
                Node(n("commit_log_write", b), tuple(commit_deps), self.async_progress),
                Node(n("source_commit", b), (n("commit_log_write", b),))]
        return out

    def _task_nodes(self, b: int, p: int, gate: list[NodeId]) -> list[Node]:
        n = NodeId.of
        prev, async_state = b - 1, self.async_state
        out = []
        if self.stateful:
            order = [n("task_apply", prev, p) if async_state else n("state_commit", prev, p)]
            if async_state:
                order += [n("state_commit", b - 2, q) for q in range(self.partitions)]
            if async_state and (b, p) in self.moved:
                order.append(n("state_commit", prev, p))   # a moved partition loads a durable version
            out.append(Node(n("state_load", b, p), tuple(gate + order)))
            apply_deps = [n("state_load", b, p)]
        else:
            apply_deps = gate + [n("task_apply", prev, p)]
        if self.uses_watermark and self.cfg.pipelining:
            # the watermark of b depends on every partition's event times in b - 1
            apply_deps += [n("task_apply", prev, q) for q in range(self.partitions)]
        out.append(Node(n("task_apply", b, p), tuple(apply_deps)))
        sink_dep = n("task_apply", b, p)
        if self.stateful:
            clog_deps = [n("task_apply", b, p)] + ([n("state_commit", prev, p)] if async_state else [])
            out += self._commit_nodes(b, p, tuple(clog_deps))
            if not async_state:
                sink_dep = n("state_commit", b, p)
            if self.is_maintenance_batch(b):
                previous = n("snapshot_upload", b - self.maintenance_every(), p)
                out.append(Node(n("snapshot_upload", b, p), (n("state_commit", b, p), previous), True))
        out.append(Node(n("sink_write", b, p), (sink_dep,)))
        return out

    def _commit_nodes(self, b: int, p: int, clog_deps: tuple[NodeId, ...]) -> list[Node]:
        """Partition p's state commit. Sequential (Spark OSS): one ``changelog_write`` and one
        ``state_commit`` node, each over every store in turn. Parallel (Lightspeed): per store a
        ``changelog_write`` and a ``state_commit`` tagged with the store, independent of the other
        store's, then the untagged ``state_commit``: the partition's version counts as committed only
        once every store's is, and everything after the commit waits for that node alone."""
        n, bg = NodeId.of, self.async_state
        if not self.commit_stores:
            return [Node(n("changelog_write", b, p), clog_deps, bg),
                    Node(n("state_commit", b, p), (n("changelog_write", b, p),), bg)]
        out = []
        for sid in self.commit_stores:
            out += [Node(n("changelog_write", b, p, sid), clog_deps, bg),
                    Node(n("state_commit", b, p, sid), (n("changelog_write", b, p, sid),), bg)]
        every = tuple(n("state_commit", b, p, sid) for sid in self.commit_stores)
        return out + [Node(n("state_commit", b, p), every, bg)]


@dataclass(frozen=True)
class RealTimeShape(GraphShape):
    """Spark's real-time mode (4.1+): one long-running batch at a time, its offsets known only at its end.

    Spark 4.3, ``MicroBatchExecution``: ``markMicroBatchStart`` writes no offset entry for a real-time
    trigger ("Delay offset logging"); each input partition's task reads until the batch's deadline and
    delivers every record downstream at once (``RealTimeStreamScanExec``, the pipelined shuffle), so the
    sink writes while the task runs, not after the state commit; the stateful task commits its state when
    it ends (``StatefulStreamlineAggregateExec``: ``StateStore.commit`` in a ``CompletionIterator``). When
    the job is complete, ``markMicroBatchEnd`` merges the offsets the tasks reported
    (``populateBatchOffsetsForRTM``), writes the offset log, then the commit log. Batch N+1 plans only
    after that: the boundary gap, in which no task runs. The logs are synchronous (Spark's stateful
    real-time queries; ``engine_config.check_real_time_engine``).

    A task's one ``sink_write`` node stands for its records' deliveries, each made as its record is
    processed: a crash between two of them leaves a prefix of that output, which the at-least-once
    judge treats like the whole (duplicates from the replayed range only).

    The bounded-replay variant (beyond Spark, ``engine.real_time_progress_ms``) splits each batch into
    ``real_time_steps_per_batch`` graph batches, one per persisted progress point: at each the tasks commit
    their state and report their offsets, and the driver writes both logs in the background, at most two
    points behind; the tasks go on without a gap, which opens only where a real-time batch ends."""

    @property
    def steps_per_batch(self) -> int:
        return self.cfg.real_time_steps_per_batch

    def opens_batch(self, b: int) -> bool:
        """Whether graph batch ``b`` starts a real-time batch (after the boundary gap)."""
        return b % self.steps_per_batch == 0

    def maintenance_every(self) -> int:
        """Maintenance every ``maintenance_interval_ms`` of input: that many graph batches of
        ``real_time_step_ms`` each."""
        return max(1, self.cfg.maintenance_interval_ms // self.cfg.real_time_step_ms)

    def batch_variant(self, b: int) -> Hashable:
        return (super().batch_variant(b), self.opens_batch(b))

    def variant_batches(self) -> tuple[int, ...]:
        return tuple(sorted({*super().variant_batches(), *range(min(self.steps_per_batch, 2))}))

    def batch_nodes(self, b: int) -> list[Node]:
        n = NodeId.of
        prev = b - 1
        plan_deps: tuple[NodeId, ...] = (n("plan", prev), n("source_commit", prev))
        if not self.opens_batch(b):   # the long-running tasks go on: b-1's logs in the background, two at most
            plan_deps = (n("plan", prev), *self._tasks_ended(prev), n("commit_log_write", b - 2))
        logs_behind = not self.opens_batch(b + 1)
        out = [Node(n("plan", b), plan_deps),
               Node(n("purge", b), (n("plan", b), n("purge", prev)), self.async_purge)]
        gate = [n("plan", b)] + ([] if self.async_purge else [n("purge", b)])
        for p in range(self.partitions):
            out += self._task_nodes(b, p, gate)
        ended = self._tasks_ended(b)
        out += [Node(n("offset_log_write", b), tuple(ended) + (n("offset_log_write", prev),), logs_behind),
                Node(n("sink_commit", b), tuple(n("sink_write", b, p) for p in range(self.partitions))
                     + (n("sink_commit", prev),)),
                Node(n("commit_log_write", b), tuple(ended) + (n("offset_log_write", b), n("sink_commit", b),
                                                              n("commit_log_write", prev)), logs_behind),
                Node(n("source_commit", b), (n("commit_log_write", b),))]
        return out

    def _tasks_ended(self, b: int) -> list[NodeId]:
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


def shape_of(scenario: Scenario, *, store_commit_nodes: bool = True) -> BatchShape:
    """The step graph's shape for the scenario's mode: real-time mode's (``RealTimeShape``) when the engine
    section says ``real_time``, else the micro-batch protocol's (``GraphShape``). ``store_commit_nodes`` as
    ``GraphShape.of``."""
    shape = GraphShape.of(scenario, store_commit_nodes=store_commit_nodes)
    if scenario.engine.real_time:
        return RealTimeShape(shape.cfg, shape.partitions, shape.stateful, shape.uses_watermark, shape.moved,
                             shape.commit_stores)
    return shape


def build_graph(shape: BatchShape, batches: Iterable[int]) -> dict[NodeId, Node]:
    """The graph of an incarnation that runs ``batches``, in creation order (the canonical schedule).

    A pure function of its arguments, so the graph of a (shape, batches) built once is copied after that
    (the explorer builds the same incarnation's graph for every schedule). The copy is a new dict of the
    same frozen nodes: a caller may add or drop nodes in its own. Another shape than ``GraphShape`` (a
    subclass, another mode's) may derive nodes from more than its fields, so its graphs are always built."""
    ordered = tuple(sorted(batches))
    key = (shape, ordered)
    if type(shape) is GraphShape:
        built = _BUILT.get(key)
        if built is not None:
            return dict(built)
    nodes: dict[NodeId, Node] = {}
    for b in ordered:
        for node in shape.batch_nodes(b):
            real = tuple(d for d in node.deps if d in nodes)
            nodes[node.id] = Node(node.id, real, node.background)
    if type(shape) is GraphShape:
        if len(_BUILT) >= _BUILT_KEPT:
            _BUILT.clear()
        _BUILT[key] = dict(nodes)
    return nodes


_BUILT: dict[tuple[BatchShape, tuple[int, ...]], dict[NodeId, Node]] = {}
_BUILT_KEPT = 64   # graphs kept: an exploration needs a handful (the first incarnation, each restart point)
