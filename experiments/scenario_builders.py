"""The scenarios the experiments sweep, built alike: a rate source or a generated one, faults added, the order
a timed backend runs configurations in, and the cost profile of a data-mode run whose records stand for blocks.
"""

from __future__ import annotations

from typing import Any, Sequence


# -------------------------------------------------------------- scenarios


def rate_scenario(name: str, seed: int, *, rate: float, duration_s: float, operator: dict[str, Any],
                  keys: int = 1000, partitions: int = 8, state_partitions: int = 28, sink: str = "at_least_once",
                  engine: dict[str, Any] | None = None, faults: list[dict[str, Any]] | None = None
                  ) -> dict[str, Any]:
    """A scenario on a ``rate`` source: records created at a constant rate, each carrying its creation time."""
    return {"name": name, "seed": seed,
            "source": {"kind": "rate", "rows_per_second": rate, "duration_s": duration_s,
                       "partitions": partitions, "keys": keys},
            "query": {"operator": operator, "state_partitions": state_partitions},
            "sink": {"mode": sink}, "engine": dict(engine or {}), "faults": list(faults or [])}


def generated_scenario(name: str, seed: int, *, operator: dict[str, Any], records_per_partition: int,
                       batches: int, keys: int, partitions: int = 4, state_partitions: int = 8,
                       step_ms: int = 0, sink: str = "exactly_once", engine: dict[str, Any] | None = None,
                       faults: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A scenario on a ``generated`` source: fixed batch boundaries (``step_ms`` 0: all input waiting at 0)."""
    return {"name": name, "seed": seed,
            "source": {"kind": "generated", "partitions": partitions, "keys": keys,
                       "records_per_partition_per_batch": records_per_partition, "batches": batches,
                       "event_time": {"start_ms": 0, "step_ms": step_ms, "max_disorder_ms": 0}},
            "query": {"operator": operator, "state_partitions": state_partitions},
            "sink": {"mode": sink}, "engine": dict(engine or {}), "faults": list(faults or [])}


def with_faults(scenario: dict[str, Any], faults: list[dict[str, Any]], suffix: str = "") -> dict[str, Any]:
    out = dict(scenario)
    out["faults"] = list(faults)
    if suffix:
        out["name"] = f"{scenario['name']}-{suffix}"
    return out


def interleaved(seeds: Sequence[int], configs: Sequence[Any]) -> list[tuple[int, Any]]:
    """Every (seed, configuration) pair in the order a timed backend should run them: seed by seed, each seed's
    configurations rotated by one more place than the last seed's. Points run one after another in long-lived
    processes, so a configuration that always ran last would carry whatever the process had accumulated by then
    (an earlier engine slowed down point by point, and all four configurations of one rate then measured the
    order, not the protocol)."""
    configs = list(configs)
    return [(seed, configs[(k + i) % len(configs)]) for k, seed in enumerate(seeds) for i in range(len(configs))]


def crash_at(time_ms: float) -> dict[str, Any]:
    return {"at": {"time_ms": int(time_ms)}, "kind": "driver_crash"}


BLOCK_SCALED = ("per_record_us", "state_commit_per_changed_key_us", "state_commit_per_total_key_us",
                "snapshot_per_key_us", "state_replay_per_key_us", "bytes_per_state_key", "bytes_per_output_row")


def blocked_profile(profile: dict[str, Any], block: float) -> dict[str, Any]:
    """The profile for a data-mode run in which each record and each key stands for ``block`` of them.

    Data mode processes real records, so it cannot hold millions of keys; with
    every per-record and per-key cost (CPU, commit, snapshot, replay, bytes)
    multiplied by ``block``, a task of a small run costs what a task of the
    large run it stands for costs.
    """
    out = dict(profile)
    out["storage"] = dict(profile["storage"])
    for name in BLOCK_SCALED:
        out[name] = profile[name] * block
    return out
