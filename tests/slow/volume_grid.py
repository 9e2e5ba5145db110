"""A grid of volume-mode scenarios x seeds whose outcomes pin the simulator's volume mode (``test_sim_volume_stage``).

Every engine mode, operator kind, shipped profile and fault family volume mode runs, at a few seeds, small
enough to run in seconds. ``digest`` is what is pinned: the outcome's JSON and the trace's step count.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from typing import Any, Iterator

from reference.language.scenario import Scenario
from sim import Profile, shipped_profile, simulate

SEEDS = (1, 2, 7)
PROFILES = ("lightspeed_cluster", "local_spark", "lightspeed_cluster_fitted")
STEADY = "steady_cluster"
ENGINES: dict[str, dict[str, Any]] = {
    "sync": {},
    "inline-purge": {"log_purge": {"mode": "inline", "min_batches_to_retain": 3}},
    "async-progress": {"progress": {"mode": "async"}},
    "pipelining": {"pipelining": True},
    "async-state": {"state_checkpoint": "async"},
    "pipelined-async-state": {"pipelining": True, "state_checkpoint": "async"},
    "pipelined-async-progress": {"pipelining": True, "progress": {"mode": "async"}},
    "parallel-commit": {"parallel_store_commit": True},
}
OPERATORS: dict[str, dict[str, Any]] = {
    "aggregate": {"kind": "aggregate", "agg": "count"},
    "window": {"kind": "window_aggregate", "agg": "count", "window_ms": 1000, "watermark_delay_ms": 500},
    "dedup": {"kind": "dedup_within_watermark", "watermark_delay_ms": 1000},
    "session": {"kind": "stateful_function", "function": "session_sum", "timeout_ms": 1000,
                "watermark_delay_ms": 500},
    "map": {"kind": "map"},
}
FAULTS: dict[str, list[dict[str, Any]]] = {
    "none": [],
    "driver-crash": [{"at": {"step": "commit_log_write", "batch": 3}, "kind": "driver_crash"}],
    "task-failure": [{"at": {"step": "task_apply", "batch": 2, "partition": 1}, "kind": "task_failure"}],
    "executor-loss": [{"at": {"step": "state_commit", "batch": 4, "partition": 0}, "kind": "executor_loss"}],
    "spike": [{"at": {"time_ms": 2500}, "kind": "storage_latency", "ms": 700}],
    # fires while the first batch is wired (its plan is ready at once): the batch must keep the shape it got
    "first-plan": [{"at": {"step": "plan", "batch": 0}, "kind": "storage_latency", "ms": 300}],
    "timed-crash": [{"at": {"time_ms": 3000}, "kind": "driver_crash"}],
}


def scenario(seed: int, engine: str, operator: str, fault: str, *, join: bool = False, partitions: int = 12,
             placed: bool = False) -> Scenario:
    src = {"kind": "rate", "rows_per_second": 20_000, "duration_s": 8, "partitions": 3, "keys": 2000}
    faults = FAULTS[fault]
    if operator == "map" and fault == "executor-loss":   # a stateless query has no state commit to fail at
        faults = [{**faults[0], "at": {**faults[0]["at"], "step": "task_apply"}}]
    raw: dict[str, Any] = {
        "name": f"grid-{engine}-{operator}-{fault}", "seed": seed,
        "query": {"operator": ({"kind": "join", "time_bound_ms": 1000, "watermark_delay_ms": 500} if join
                               else OPERATORS[operator]), "state_partitions": partitions},
        "sink": {"mode": "at_least_once" if "progress" in ENGINES[engine] else "exactly_once"},
        "engine": {"trigger_interval_ms": 500, "state_store": {"maintenance_interval_ms": 2000},
                   **ENGINES[engine]},
        "faults": faults}
    if placed:   # named executors, one joining and one leaving: partitions move between them
        raw["executors"] = ["a", "b"]
        raw["events"] = [{"kind": "executor_join", "executor": "c", "before_batch": 4},
                         {"kind": "executor_leave", "executor": "a", "before_batch": 9}]
    if join:
        raw["sources"] = {"left": src, "right": dict(src)}
    else:
        raw["source"] = src
    return Scenario.from_dict(raw)


def grid() -> Iterator[tuple[str, Scenario, str]]:
    """(name, scenario, profile) of every case: engines x operators on one profile, the rest on fewer."""
    for seed in SEEDS:
        for engine in ENGINES:
            if "progress" in ENGINES[engine]:   # asynchronous progress tracking: stateless queries only
                for fault in FAULTS:
                    yield f"{seed}/{engine}/map/{fault}", scenario(seed, engine, "map", fault), PROFILES[0]
                continue
            for operator in OPERATORS:
                yield f"{seed}/{engine}/{operator}", scenario(seed, engine, operator, "none"), PROFILES[0]
            yield f"{seed}/{engine}/join", scenario(seed, engine, "aggregate", "none", join=True), PROFILES[0]
            for fault in FAULTS:
                if fault != "none":
                    yield f"{seed}/{engine}/window/{fault}", scenario(seed, engine, "window", fault), PROFILES[0]
        for profile in PROFILES[1:]:
            for engine in ("sync", "pipelining"):
                yield f"{seed}/{engine}/aggregate/{profile}", scenario(seed, engine, "aggregate", "none"), profile
        # more partitions than task slots, so tasks queue for slots; without jitter, so many end together
        for profile in (PROFILES[0], STEADY):
            for engine in ("sync", "inline-purge", "pipelining", "async-state"):
                for operator in ("aggregate", "window"):
                    yield (f"{seed}/{engine}/{operator}/64/{profile}",
                           scenario(seed, engine, operator, "none", partitions=64), profile)
            yield f"{seed}/sync/window/64/{profile}/spike", scenario(seed, "sync", "window", "spike",
                                                                      partitions=64), profile
        for engine in ("sync", "async-state"):
            yield f"{seed}/{engine}/aggregate/placed", scenario(seed, engine, "aggregate", "none", placed=True), \
                PROFILES[0]
    # the checkpoint-interval experiment's async-progress run: a stage whose last end no delay from its start reaches
    yield "1/checkpoint-interval-progress", Scenario.from_dict({
        "name": "interval-progress", "seed": 1,
        "source": {"kind": "rate", "rows_per_second": 500_000, "duration_s": 30, "partitions": 8, "keys": 1000},
        "query": {"operator": {"kind": "map"}, "state_partitions": 28}, "sink": {"mode": "at_least_once"},
        "engine": {"progress": {"mode": "async", "checkpoint_interval_ms": 1_000_000_000},
                   "log_purge": {"mode": "async"}}}), PROFILES[0]


def profile_of(name: str) -> Profile:
    """A shipped profile, or ``STEADY``: the cluster profile without stragglers and storage jitter."""
    if name == STEADY:
        base = shipped_profile(PROFILES[0])
        return replace(base, name=STEADY, straggler_probability=0.0, storage=replace(base.storage, jitter_sigma=0.0))
    return shipped_profile(name)


def digest(sc: Scenario, profile: str) -> str:
    sim = simulate(sc, profile_of(profile), mode="volume", trace_enabled=False)
    body = json.dumps([sim.outcome().to_json(), sim.trace.count, sim.end_ms])
    return hashlib.sha256(body.encode()).hexdigest()[:16]


if __name__ == "__main__":
    print(json.dumps({name: digest(sc, profile) for name, sc, profile in grid()}, indent=1))
