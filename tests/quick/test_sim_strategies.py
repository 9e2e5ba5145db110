"""Hypothesis strategies for small simulator scenarios: every operator, every mode, faults at steps and times."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from reference.language.catalogue import OPERATORS, spark_allows
from reference.language.scenario import Fault, Scenario, may_end_incarnation
from reference.language.steps import STEP_NAMES, TASK_STEPS
from streamtest import reachable
FAULT_KINDS_AT_STEPS = ("driver_crash", "task_failure", "executor_loss", "storage_write_error",
                        "storage_latency", "zombie_write", "clock_skew")
FAULT_KINDS_AT_TIMES = ("driver_crash", "storage_latency", "task_failure", "storage_write_error")


def _source(seed_keys: int, batches: int, rows: int, disorder: int) -> dict[str, Any]:
    return {"kind": "generated", "partitions": 2, "keys": seed_keys, "records_per_partition_per_batch": rows,
            "batches": batches, "event_time": {"start_ms": 0, "step_ms": 5, "max_disorder_ms": disorder}}


@st.composite
def redelivering_source(draw: Any, batches: int) -> dict[str, Any]:
    """A redelivering broker (``reference/protocol/redelivery.py``) whose first deliveries fill about ``batches`` batches."""
    batch_ms = draw(st.sampled_from((60, 100)))
    interval = draw(st.integers(5, 30))
    return {"kind": "redelivering", "keys": draw(st.integers(1, 6)), "batch_ms": batch_ms,
            "messages": max(1, batches * batch_ms // interval), "interval_ms": interval,
            "reorder_ms": draw(st.sampled_from((0, 10, 40))), "redelivery_rate": draw(st.sampled_from((0, 0.3, 1))),
            "redeliver_after_ms": draw(st.sampled_from((20, 100, 400))),
            "ack_coverage": draw(st.sampled_from((0, 0.5, 1)))}


@st.composite
def fault_strategy(draw: Any, batches: int) -> dict[str, Any]:
    if draw(st.booleans()):
        kind = draw(st.sampled_from(FAULT_KINDS_AT_STEPS))
        steps = TASK_STEPS if kind in ("task_failure", "executor_loss", "zombie_write") else STEP_NAMES
        at: dict[str, Any] = {"step": draw(st.sampled_from(steps)), "batch": draw(st.integers(0, batches - 1)),
                              "when": draw(st.sampled_from(("before", "after")))}
        if at["step"] in TASK_STEPS + ("snapshot_upload",) and draw(st.booleans()):
            at["partition"] = draw(st.integers(0, 1))
    else:
        kind = draw(st.sampled_from(FAULT_KINDS_AT_TIMES))
        at = {"time_ms": draw(st.integers(0, 400))}
        if draw(st.booleans()):
            at["restart"] = draw(st.integers(0, 1))   # a fault at a time that belongs to one incarnation
    fault: dict[str, Any] = {"at": at, "kind": kind}
    if kind in ("storage_latency", "clock_skew"):
        fault["ms"] = draw(st.integers(1, 300))
    return fault


def valid_faults(faults: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Drawn faults made valid, never discarded: a repeat is dropped, and a fault keeps ``at.restart`` only
    when the other faults can bring that restart (the scenario refuses one that could never fire)."""
    out: list[dict[str, Any]] = []
    for fault in faults:
        if fault not in out:
            out.append(fault)
    for fault in out:
        others = [Fault.from_dict(f) for f in out if f is not fault]
        if fault["at"].get("restart", 0) > sum(may_end_incarnation(f) for f in others):
            del fault["at"]["restart"]
    return out


@st.composite
def scenario_strategy(draw: Any, *, faults: bool = True, sync_only: bool = False,
                      source_kind: str = "generated") -> Scenario:
    """A small scenario (2 source partitions, or one redelivering source per side; 2 state partitions; <= 5
    batches) Spark supports."""
    op_name = draw(st.sampled_from(sorted(OPERATORS)))
    operator = OPERATORS[op_name]
    batches = draw(st.integers(1, 5))
    if source_kind == "redelivering":
        src = draw(redelivering_source(batches))
    else:
        src = _source(draw(st.integers(2, 12)), batches, draw(st.integers(1, 6)), draw(st.sampled_from((0, 10, 40))))
    async_progress_allowed = spark_allows(op_name, "async_progress")
    progress = "sync" if (sync_only or not async_progress_allowed) else draw(st.sampled_from(("sync", "async")))
    sink = "at_least_once" if progress == "async" else draw(st.sampled_from(("exactly_once", "at_least_once")))
    provider = draw(st.sampled_from(("changelog", "delta", "snapshot")))
    state_checkpoint = "sync" if (sync_only or provider != "changelog") else \
        draw(st.sampled_from(("sync", "async")))
    raw: dict[str, Any] = {
        "name": f"sim-{op_name}", "seed": draw(st.integers(0, 1000)),
        "query": {"operator": operator, "state_partitions": 2},
        "sink": {"mode": sink},
        "engine": {
            "progress": {"mode": progress, "checkpoint_interval_ms": draw(st.sampled_from((0, 50, 200)))},
            "log_purge": {"mode": draw(st.sampled_from(("inline", "async"))),
                          "min_batches_to_retain": draw(st.integers(1, 3))},
            "state_store": {"provider": provider, "min_deltas_for_snapshot": draw(st.integers(1, 3)),
                            "maintenance_interval_ms": draw(st.sampled_from((100, 200, 60000)))},
            "state_checkpoint": state_checkpoint,
            "pipelining": False if sync_only else draw(st.booleans()),
            "trigger_interval_ms": draw(st.sampled_from((0, 0, 100))),
        },
        "faults": valid_faults(draw(st.lists(fault_strategy(batches), max_size=2))) if faults else [],
    }
    if raw["engine"]["pipelining"]:
        raw["engine"]["pipeline_depth"] = draw(st.sampled_from((2, 3, 5)))
    if spark_allows(op_name, "parallel_store_commit"):   # two stores per partition: commit them in turn or at once
        raw["engine"]["parallel_store_commit"] = draw(st.booleans())
    if operator["kind"] == "join":
        raw["sources"] = {"left": src, "right": dict(src)}
    else:
        raw["source"] = src
    if batches >= 2 and draw(st.booleans()):
        raw["executors"], raw["events"] = ["a"], draw(executor_events(batches))
    raw["faults"] = valid_faults(reachable(raw))
    return Scenario.from_dict(raw)


@st.composite
def executor_events(draw: Any, batches: int) -> list[dict[str, Any]]:
    """State rebalancing from one executor a: b joins (partition 1 moves to b), then maybe a leaves (0 too)."""
    joins = draw(st.integers(1, batches - 1))
    events = [{"kind": "executor_join", "executor": "b", "before_batch": joins}]
    if draw(st.booleans()):
        events.append({"kind": "executor_leave", "executor": "a", "before_batch": draw(st.integers(joins, batches - 1))})
    return events
