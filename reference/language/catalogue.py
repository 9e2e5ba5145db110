"""The scenario catalogue: every operator, every engine mode, and a scenario builder over them.

One table of operators (each with Spark's semantics, spec section 1) and one
of engine modes (each one Lightspeed feature over the synchronous baseline,
spec section 2). The tests, the fault matrix and the native Spark tests all
build their scenarios here, so a test reads like the scenario it checks and
no two places disagree on what "window_aggregate under pipelining" means.
"""

from __future__ import annotations

import copy
from typing import Any

from .scenario import Scenario

OPERATORS: dict[str, dict[str, Any]] = {
    "map": {"kind": "map"},
    "aggregate": {"kind": "aggregate", "agg": "count"},
    "window_aggregate": {"kind": "window_aggregate", "agg": "sum", "window_ms": 30, "watermark_delay_ms": 10},
    "dedup_within_watermark": {"kind": "dedup_within_watermark", "watermark_delay_ms": 20},
    "join": {"kind": "join", "time_bound_ms": 20, "watermark_delay_ms": 10},
    "stateful_function": {"kind": "stateful_function", "timeout_ms": 20, "watermark_delay_ms": 10},
    "chain": {"kind": "chain", "operators": [{"kind": "dedup_within_watermark", "watermark_delay_ms": 20},
                                             {"kind": "aggregate", "agg": "sum"}]},
    # Spark's plain dropDuplicates(key), on a stream without a watermark: its state only grows (last, so that
    # the rotations over the catalogue that came before it keep their cases)
    "dedup": {"kind": "dedup"},
}

# Engine modes, each one Lightspeed feature on top of the synchronous baseline.
MODES: dict[str, dict[str, Any]] = {
    "sync": {},
    "async_purge": {"log_purge": {"mode": "async", "min_batches_to_retain": 2}},
    "async_state": {"state_checkpoint": "async"},
    "pipelining": {"pipelining": True},
    "delta_provider": {"state_store": {"provider": "delta", "min_deltas_for_snapshot": 2,
                                       "maintenance_interval_ms": 200}},
    "snapshot_provider": {"state_store": {"provider": "snapshot"}},
    "async_progress": {"progress": {"mode": "async", "checkpoint_interval_ms": 200}},
    "parallel_store_commit": {"parallel_store_commit": True},
}


def source(partitions: int = 2, batches: int = 4, per_batch: int = 3, keys: int = 4,
           disorder_ms: int = 20) -> dict[str, Any]:
    return {"kind": "generated", "partitions": partitions, "keys": keys,
            "records_per_partition_per_batch": per_batch, "batches": batches,
            "event_time": {"start_ms": 0, "step_ms": 10, "max_disorder_ms": disorder_ms}}


def redelivering_source(batches: int = 4, per_batch: int = 6, keys: int = 4) -> dict[str, Any]:
    """A redelivering broker (``reference/protocol/redelivery.py``) whose first deliveries fill about ``batches`` batches of
    60 ms: out of order (up to 25 ms late), half the messages redelivered two batches later (after their
    ACK), half of those to the other subscriber."""
    batch_ms = 60
    return {"kind": "redelivering", "keys": keys, "batch_ms": batch_ms, "messages": batches * per_batch,
            "interval_ms": batch_ms // per_batch, "reorder_ms": 25, "redelivery_rate": 0.5,
            "redeliver_after_ms": 2 * batch_ms, "ack_coverage": 0.5}


CATALOGUE_SOURCES = ("generated", "redelivering")
# Keys of the source under an operator that needs more than the default: dedup's state only grows, and with
# 4 keys every key is seen in batch 0 (and all 4 route to one state partition), so later batches would
# change nothing.
SOURCE_KEYS = {"dedup": 12}


def scenario_dict(operator: str = "aggregate", mode: str = "sync", *, faults: list[dict[str, Any]] | None = None,
                  seed: int = 1, batches: int = 4, partitions: int = 2, sink: str | None = None,
                  retain: int = 3, source_kind: str = "generated", **engine: Any) -> dict[str, Any]:
    eng: dict[str, Any] = {"state_store": {"provider": "changelog", "min_deltas_for_snapshot": 2,
                                           "maintenance_interval_ms": 200},
                           "log_purge": {"mode": "inline", "min_batches_to_retain": retain}}
    eng.update(MODES[mode])
    eng.update(engine)
    if source_kind not in CATALOGUE_SOURCES:
        raise ValueError(f"source_kind: expected one of {', '.join(CATALOGUE_SOURCES)}; got {source_kind!r}")
    redelivering = source_kind == "redelivering"
    keys = SOURCE_KEYS.get(operator, 4)
    src = redelivering_source(batches, keys=keys) if redelivering else source(partitions=partitions, batches=batches,
                                                                               keys=keys)
    d: dict[str, Any] = {"name": f"{operator}-{mode}" + ("-redelivering" if redelivering else ""), "seed": seed,
                         "query": {"operator": OPERATORS[operator], "state_partitions": 2},
                         "engine": eng, "faults": faults or []}
    if operator == "join":
        d["sources"] = {"left": src, "right": dict(src)}
    else:
        d["source"] = src
    stateful = operator != "map"
    if mode == "async_progress":
        d["sink"] = {"mode": "at_least_once"}
        if stateful:
            d["explore_unsupported"] = True
    if sink:
        d["sink"] = {"mode": sink}
    return copy.deepcopy(d)


def make(operator: str = "aggregate", mode: str = "sync", **kw: Any) -> Scenario:
    return Scenario.from_dict(scenario_dict(operator, mode, **kw))


def spark_allows(operator: str, mode: str) -> bool:
    """Whether Spark allows ``mode`` for ``operator`` (asynchronous progress tracking: stateless queries only)
    and the mode changes anything for it (parallel store commit: a query with two stores per partition)."""
    if mode == "parallel_store_commit":
        return len(make(operator).store_ids) > 1
    return not (mode == "async_progress" and operator != "map")


def unsupported_reason(operator: str, mode: str) -> str:
    """Why ``spark_allows`` says no, in a sentence."""
    if mode == "parallel_store_commit":
        return f"a {operator} query has one state store per partition: there is nothing to commit in parallel"
    return "Spark forbids asynchronous progress tracking on a stateful query (its batch boundaries change on restart)"


def supported_pairs() -> list[tuple[str, str]]:
    """Every operator under every mode Spark allows for it."""
    return [(op, mode) for op in OPERATORS for mode in MODES if spark_allows(op, mode)]
