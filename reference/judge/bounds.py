"""Every numeric bound the judge enforces, derived in one place from the scenario's step graph.

An oracle or a checkpoint rule that allows "at most n" or "at least n" reads n
here, and n is read off the step graph of the scenario's mode
(``modes.shape_of``, ``graph.most_not_waiting``): never from a table of modes. Each bound is the largest (or smallest) value some legal
schedule of the graph gives, so a backend that re-runs, keeps or delivers more
than the protocol can is convicted:

- ``in_flight``: batches with an offset entry and no commit entry at once
  under sync progress (the ``offsets_committed`` rule). The largest number of
  batches b' >= b whose ``offset_log_write`` does not wait for
  ``commit_log_write`` of b.
- ``pending_state_commits``: batches whose state is not durable while a later
  batch's task of the same partition runs (async state checkpointing: one). It
  is part of ``in_flight`` (the batch whose state is pending is in flight), and
  is listed on its own so the report shows it.
- ``replay``: the most batches one restart re-runs (``replay_bound``), as the
  scenario's mode reads it off its graph (``modes``, ``replay_most``): under
  sync progress ``in_flight``; under async progress on the untimed clock from
  the batch after the previous persisted offset entry to the newest planned
  (the clock gives the spacing of persisted entries, the graph how many
  batches are planned and not committed, ``planned_in_flight``); in real-time
  mode ``planned_in_flight``, from the last committed offsets.
- ``copies_per_rerun``: at-least-once sink, how many more copies of a batch's
  rows each re-run or retried attempt may deliver (one: an attempt writes each
  part once).
- ``offset_entries_kept`` and ``commit_entries_kept``: the fewest log entries
  purge leaves while every batch is logged, by the mode's own purge rule
  (``log_floors``): micro-batch purge cuts both logs below the latest offset
  entry minus ``min_batches_to_retain``, never past the latest commit; real-time
  purge below the batch being built minus it, before that batch's entry exists.
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
steps, and its replay by its own reading (``replay_most``). A shape may also supply its bounds itself: a method ``judge_bounds(scenario)``
returning ``Bounds`` takes precedence over the derivation.
"""

from __future__ import annotations

import functools
from dataclasses import asdict, dataclass
from typing import Any, Callable

from ..language.scenario import Scenario
from ..protocol.graph import BatchShape, UnboundedGraph, most_not_waiting
from ..protocol.modes import MicroBatch, mode_of, shape_of


@dataclass(frozen=True)
class Bounds:
    """The numbers the judge enforces for one scenario (see the module docstring for each)."""

    in_flight: int
    pending_state_commits: int
    planned_in_flight: int
    replay: int | None
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
    return derive(shape, mode_of(scenario))


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


def derive(shape: BatchShape, mode: MicroBatch) -> Bounds:
    """Every bound, read off ``shape``'s step graph (the replay, by the mode's own reading of it)."""
    try:
        return _derived(shape, mode)   # type: ignore[arg-type]   # a shape is hashable, or the except reads it
    except TypeError:   # a shape that is not hashable is read every time
        return _derive(shape, mode)


@functools.lru_cache(maxsize=256)
def _derived(shape: BatchShape, mode: MicroBatch) -> Bounds:
    return _derive(shape, mode)


def _derive(shape: BatchShape, mode: MicroBatch) -> Bounds:
    counts = graph_counts(shape)
    retain = mode.cfg.min_batches_to_retain
    lag: int | None = None
    ceiling: int | None = None
    if counts.purge_lag is not None:
        # after purge b-1 cut the logs below min(L - retain, C) (L, C: the newest offset and commit entries
        # then, L - C <= in_flight), offset entries of b on are written until purge b runs
        lag = counts.purge_lag
        ceiling = lag + max(retain, counts.in_flight) + 1
    offsets_kept, commits_kept = mode.log_floors(retain, counts.in_flight)
    return Bounds(in_flight=counts.in_flight, pending_state_commits=counts.pending_state_commits,
                  planned_in_flight=counts.planned_in_flight, replay=mode.replay_most(shape), copies_per_rerun=1,
                  offset_entries_kept=offsets_kept, commit_entries_kept=commits_kept,
                  purge_lag=lag, offset_entries_ceiling=ceiling, versions_kept=retain)
