"""Every numeric bound the judge enforces, derived in one place from the scenario's step graph.

An oracle or a checkpoint rule that allows "at most n" or "at least n" reads n
here, and n is read off the step graph (``graph.shape_of``): never from a
table of modes. Each bound is the largest (or smallest) value some legal
schedule of the graph gives, so a backend that re-runs, keeps or delivers more
than the protocol can is convicted:

- ``in_flight``: batches with an offset entry and no commit entry at once
  under sync progress, so the batches a restart re-runs (``replay_bound``,
  the ``offsets_committed`` rule). The largest number of batches b' >= b whose
  ``offset_log_write`` does not wait for ``commit_log_write`` of b.
- ``pending_state_commits``: batches whose state is not durable while a later
  batch's task of the same partition runs (async state checkpointing: one). It
  is part of ``in_flight`` (the batch whose state is pending is in flight), and
  is listed on its own so the report shows it.
- ``async_progress_rerun``: async progress on the untimed clock, the batches a
  restart re-runs: from the batch after the previous persisted offset entry to
  the newest planned (``async_progress_rerun``); the clock gives the spacing of
  persisted entries, the graph how many batches are planned and not committed
  (``planned_in_flight``).
- ``copies_per_rerun``: at-least-once sink, how many more copies of a batch's
  rows each re-run or retried attempt may deliver (one: an attempt writes each
  part once).
- ``offset_entries_kept`` and ``commit_entries_kept``: the fewest log entries
  purge leaves under sync progress (purge cuts both logs below the latest
  offset entry minus ``min_batches_to_retain``, never past the latest commit).
  ``offset_entries_ceiling``: the most it leaves under inline purge, given how
  many offset entries the graph lets be written before a batch's purge runs
  (``purge_lag``: one, the batch's own, without pipelining); None under async
  purge, whose rounds the graph lets run arbitrarily late.
- ``versions_kept``: the newest committed versions that must load
  (``retention``, ``lineage_reachable``): ``min_batches_to_retain``. The
  reference reaches it only under async purge: an inline purge of batch b runs
  before b's commit (tasks wait for it), so the last purge of a run sees the
  version before the last, and a finished run keeps one more. The floor stays
  ``min_batches_to_retain``: it is the protocol's (Spark's state cleanup keeps
  exactly that many, ``spark_impl/native/native_outcome.py``), and async purge
  shows the model reaching it.

A mode whose batches are made otherwise is one more ``BatchShape``; its bounds
come from its own graph by the same derivation, as long as it names the same
steps. A shape may also supply its bounds itself: a method ``judge_bounds(scenario)``
returning ``Bounds`` takes precedence over the derivation.
"""

from __future__ import annotations

import functools
from dataclasses import asdict, dataclass
from typing import Any, Callable

from ..protocol.graph import LOGICAL_BATCH_MS, BatchShape, Node, build_graph, shape_of
from ..language.scenario import Scenario
from ..language.steps import NodeId

GRAPH_BATCHES = 8          # the graph the bounds are read from starts this long, and doubles ...
GRAPH_BATCHES_MAX = 64     # ... up to this (GRAPH_BATCHES times a power of two), while no batch waits at all


class UnboundedGraph(ValueError):
    """The step graph lets a count grow with the number of batches: the protocol bounds nothing there."""


@dataclass(frozen=True)
class Bounds:
    """The numbers the judge enforces for one scenario (see the module docstring for each)."""

    in_flight: int
    pending_state_commits: int
    planned_in_flight: int
    async_progress_rerun: int | None
    copies_per_rerun: int
    offset_entries_kept: int
    commit_entries_kept: int
    purge_lag: int | None
    offset_entries_ceiling: int | None
    versions_kept: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def bounds_of(scenario: Scenario) -> Bounds:
    """The scenario's bounds: its shape's own (``judge_bounds``), or derived from its step graph."""
    shape = shape_of(scenario)
    own: Callable[[Scenario], Bounds] | None = getattr(shape, "judge_bounds", None)
    if own is not None:
        return own(scenario)
    return derive(shape, scenario)


@dataclass(frozen=True)
class GraphCounts:
    """What the step graph alone says (``most_not_waiting``), read once per shape."""

    in_flight: int
    planned_in_flight: int
    pending_state_commits: int
    purge_lag: int | None   # None: nothing waits for a purge round (async purge)


def graph_counts(shape: BatchShape) -> GraphCounts:
    try:
        return _counted(shape)   # type: ignore[arg-type]   # a shape is hashable, or the except reads it
    except TypeError:   # a shape that is not hashable is read every time
        return _count(shape)


@functools.lru_cache(maxsize=256)
def _counted(shape: BatchShape) -> GraphCounts:
    return _count(shape)


def _count(shape: BatchShape) -> GraphCounts:
    return GraphCounts(in_flight=most_not_waiting(shape, "commit_log_write", "offset_log_write"),
                       planned_in_flight=most_not_waiting(shape, "commit_log_write", "plan"),
                       pending_state_commits=max(0, most_not_waiting(shape, "state_commit", "task_apply", 0) - 1),
                       purge_lag=_purge_lag(shape))


def _purge_lag(shape: BatchShape) -> int | None:
    try:
        return most_not_waiting(shape, "purge", "offset_log_write")
    except UnboundedGraph:
        return None


def derive(shape: BatchShape, scenario: Scenario) -> Bounds:
    """Every bound, read off ``shape``'s step graph (and, for the async-progress cadence, its clock)."""
    e = scenario.engine
    counts = graph_counts(shape)
    rerun = None
    if e.progress_mode == "async":
        rerun = async_progress_rerun(scenario, counts.planned_in_flight)
    retain = e.min_batches_to_retain
    lag: int | None = None
    ceiling: int | None = None
    if counts.purge_lag is not None:
        # after purge b-1 cut the logs below min(L - retain, C) (L, C: the newest offset and commit entries
        # then, L - C <= in_flight), offset entries of b on are written until purge b runs
        lag = counts.purge_lag
        ceiling = lag + max(retain, counts.in_flight) + 1
    return Bounds(in_flight=counts.in_flight, pending_state_commits=counts.pending_state_commits,
                  planned_in_flight=counts.planned_in_flight, async_progress_rerun=rerun, copies_per_rerun=1,
                  offset_entries_kept=retain + 1, commit_entries_kept=max(1, retain + 1 - counts.in_flight),
                  purge_lag=lag, offset_entries_ceiling=ceiling, versions_kept=retain)


def async_progress_rerun(scenario: Scenario, planned_in_flight: int) -> int:
    """Async progress on the untimed clock: a restart re-runs from the batch after the previous persisted offset
    entry P through the newest batch planned. An entry persists once ``checkpoint_interval_ms`` has passed on
    the clock that plans batch b at ``b * max(trigger_interval_ms, LOGICAL_BATCH_MS)`` (a ``clock_skew`` fault
    only sets it forward, which persists an entry sooner), so the latest persisted entry L is at most
    ``between`` batches after P; and at most ``planned_in_flight`` batches from L on are planned and not
    committed (L itself among them)."""
    e = scenario.engine
    batch_ms = max(e.trigger_interval_ms, LOGICAL_BATCH_MS)
    between = -(-e.checkpoint_interval_ms // batch_ms)   # ceil
    return between + planned_in_flight - 1


def most_not_waiting(shape: BatchShape, first: str, then: str, partition: int = -1) -> int:
    """The most batches b' >= b whose ``then`` step may run before ``first`` of batch b (b' = b counts when
    ``then`` of b does not wait for ``first`` of b): over every b of a graph longer than the count. A shape
    without ``first`` steps (a stateless query's state commits) gives 0."""
    batches = GRAPH_BATCHES
    while True:
        nodes = build_graph(shape, range(batches))
        found = _most_not_waiting(nodes, batches, first, then, partition)
        if found < batches:   # some batch waits: the count is the bound (it is below the graph's length)
            return found
        if batches == GRAPH_BATCHES_MAX:
            raise UnboundedGraph(f"the step graph lets {found} batches run {then} before {first} of an earlier "
                                 f"one in {batches} batches: it bounds nothing")
        batches *= 2


def _most_not_waiting(nodes: dict[NodeId, Node], batches: int, first: str, then: str, partition: int) -> int:
    ancestors: dict[NodeId, frozenset[NodeId]] = {}
    for n, each in nodes.items():
        acc: set[NodeId] = set()
        for d in each.deps:
            acc.add(d)
            acc |= ancestors[d]
        ancestors[n] = frozenset(acc)
    most = 0
    for b in range(batches):   # (the last batches see fewer after them: they never give the most)
        waited = NodeId.of(first, b, partition)
        if waited in nodes:   # (``first`` and ``then`` are other steps: a missing ``then`` node waits)
            free = sum(1 for later in range(b, batches)
                       if waited not in ancestors.get(NodeId.of(then, later, partition), {waited}))
            most = max(most, free)
    return most
