"""A query over one batch: routing, the operator pipeline per partition, watermarks.

This is the semantic core every backend shares. A task for state partition
``p`` of batch ``b`` calls ``run_partition`` with the states it loaded, and the
driver folds the tasks' event-time maxima into the watermark trackers with
``advance_trackers``. ``run_sequential`` does the same failure-free and in
order: it is what the oracles compare against (spec section 5).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Protocol, Sequence

from ..language.operators import (
    Row,
    State,
    Watermark,
    advance_watermark,
    apply_operator,
    initial_watermark_state,
    max_event_times,
    sort_rows,
    store_names,
    watermark_of,
)
from ..language.scenario import OperatorSpec, Scenario
from .sources import Record, SourceData, partition_of

Trackers = list[dict[str, Any]]  # one watermark tracker per operator in the pipeline


def store_id(op_index: int, name: str) -> str:
    """The ``<op>`` of the checkpoint layout: ``"0"``, or ``"0.left"`` for a join's side."""
    return f"{op_index}.{name}" if name else str(op_index)


def pipeline_store_ids(ops: Sequence[OperatorSpec]) -> list[str]:
    return [store_id(i, name) for i, op in enumerate(ops) for name in store_names(op)]


def rows_of(records: Sequence[Record]) -> list[Row]:
    return [Row(r.key, r.value, r.event_time_ms, r.side) for r in records]


def route(records: Sequence[Record], partitions: int) -> list[list[Record]]:
    out: list[list[Record]] = [[] for _ in range(partitions)]
    for record in records:
        out[partition_of(record.key, partitions)].append(record)
    return out


def initial_trackers(ops: Sequence[OperatorSpec]) -> Trackers:
    return [initial_watermark_state() for _ in ops]


def watermarks_of(trackers: Trackers) -> list[int]:
    """Each operator's eviction watermark: the watermark in force for the batch (what ``commits/b`` holds)."""
    return [t["watermark_ms"] for t in trackers]


def operator_watermarks(trackers: Trackers) -> list[Watermark]:
    """Each operator's two watermarks for the batch the trackers are in force for."""
    return [watermark_of(t) for t in trackers]


@dataclass(frozen=True)
class PartitionResult:
    states: dict[str, State]
    output: list[Row]
    max_event_ms: list[dict[str, int]]  # per operator: its input's event-time maxima


def run_partition(ops: Sequence[OperatorSpec], states: dict[str, State], rows: Sequence[Row],
                  watermarks: Sequence[Watermark]) -> PartitionResult:
    """The whole operator pipeline on one state partition for one batch."""
    new_states = dict(states)
    maxima = []
    current = list(rows)
    for index, op in enumerate(ops):
        maxima.append(max_event_times(current))
        names = store_names(op)
        mine = {name: states.get(store_id(index, name), {}) for name in names}
        updated, current = apply_operator(op, mine, current, watermarks[index])
        for name in names:
            new_states[store_id(index, name)] = updated[name]
    return PartitionResult(new_states, current, maxima)


class KeyValueStore(Protocol):
    """What a task needs of a state store to apply a batch: every store of every backend has these."""

    def items(self) -> Iterable[tuple[str, Any]]: ...
    def put(self, key: str, value: Any) -> None: ...
    def delete(self, key: str) -> None: ...


@dataclass(frozen=True)
class StoreChanges:
    """What one batch did to one store of one partition (``stateOperators`` progress)."""

    updated: int
    removed: int
    total: int


def apply_partition(ops: Sequence[OperatorSpec], stores: Mapping[str, KeyValueStore], rows: Sequence[Row],
                    watermarks: Sequence[Watermark]) -> tuple[PartitionResult, dict[str, StoreChanges]]:
    """``task_apply`` on one partition: run the pipeline over the stores' state and write the difference
    back into each store (deletes, then puts of changed values). Every backend's task calls this."""
    states = {sid: dict(store.items()) for sid, store in stores.items()}
    result = run_partition(ops, states, rows, watermarks)
    changes = {}
    for sid, store in stores.items():
        old, new = states[sid], result.states[sid]
        removed = [k for k in old if k not in new]
        for key in removed:
            store.delete(key)
        updated = 0
        for key, value in new.items():
            if old.get(key) != value:
                store.put(key, value)
                updated += 1
        changes[sid] = StoreChanges(updated, len(removed), len(new))
    return result, changes


def advance_trackers(ops: Sequence[OperatorSpec], trackers: Trackers,
                     maxima: Sequence[Sequence[dict[str, int]]]) -> Trackers:
    """After a batch: fold every partition's maxima, operator by operator."""
    out = []
    for index, op in enumerate(ops):
        merged: dict[str, int] = {}
        for per_partition in maxima:
            for side, t in per_partition[index].items():
                merged[side] = max(merged.get(side, t), t)
        out.append(advance_watermark(op, trackers[index], merged))
    return out


@dataclass(frozen=True)
class BatchBounds:
    batch: int
    start: tuple[int, ...]
    end: tuple[int, ...]


@dataclass(frozen=True)
class SequentialRun:
    """Failure-free, in-order results over given boundaries: what every backend must match."""

    # version -> store id -> partition -> sorted [key, value] pairs; version = batch id + 1
    states: dict[int, dict[str, dict[int, list[list[Any]]]]]
    outputs: dict[int, list[list[Any]]]  # batch id -> sorted [key, value] rows
    watermarks: dict[int, int]           # batch id -> first operator's watermark
    trackers: dict[int, Trackers] = field(default_factory=dict)   # batch id -> trackers after it (its commit's)


def sink_rows(rows: Sequence[Row]) -> list[list[Any]]:
    return [[r.key, r.value] for r in sort_rows(list(rows))]


def state_pairs(state: State) -> list[list[Any]]:
    return [[k, state[k]] for k in sorted(state)]


def run_sequential(scenario: Scenario, data: SourceData, bounds: Sequence[BatchBounds]) -> SequentialRun:
    ops = scenario.operator.flatten()
    parts = scenario.state_partitions
    ids = pipeline_store_ids(ops)
    states: list[dict[str, State]] = [{sid: {} for sid in ids} for _ in range(parts)]
    trackers = initial_trackers(ops)
    out_states, outputs, wms = {}, {}, {}
    after: dict[int, Trackers] = {}
    for b in bounds:
        routed = route(data.slice(b.start, b.end), parts)
        wm = watermarks_of(trackers)
        results = [run_partition(ops, states[p], rows_of(routed[p]), operator_watermarks(trackers))
                   for p in range(parts)]
        states = [r.states for r in results]
        trackers = advance_trackers(ops, trackers, [r.max_event_ms for r in results])
        outputs[b.batch] = sink_rows([row for r in results for row in r.output])
        wms[b.batch] = wm[0] if wm else 0
        after[b.batch] = json.loads(json.dumps(trackers))   # as a commit entry holds them
        out_states[b.batch + 1] = {sid: {p: state_pairs(states[p][sid]) for p in range(parts)} for sid in ids}
    return SequentialRun(out_states, outputs, wms, after)
