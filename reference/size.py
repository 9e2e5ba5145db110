"""How big a scenario is, estimated before anything runs, so a run that cannot fit is refused with the numbers.

A backend that materialises every record (the reference, the simulator's data
mode, the Spark engine) holds the input, one step-graph node per step, batch
and partition, and every retained state version in memory. The estimate
counts records, batches, state partitions and graph nodes from the scenario
alone; ``too_large`` compares it with a backend's limits and says which limit
it passes, by how much. Nothing here allocates the input.
"""

from __future__ import annotations

from dataclasses import dataclass

from .scenario import Scenario, Source
from .steps import DRIVER_STEPS, TASK_STEPS


@dataclass(frozen=True)
class SizeEstimate:
    records: int
    batches: int
    state_partitions: int
    graph_nodes: int

    def describe(self) -> str:
        return (f"{self.records:,} records in {self.batches:,} batches over {self.state_partitions:,} state "
                f"partitions ({self.graph_nodes:,} protocol steps)")


@dataclass(frozen=True)
class SizeLimits:
    """What a backend that materialises every record can hold on this machine (24 GiB, Python objects)."""

    records: int = 5_000_000
    batches: int = 100_000
    state_partitions: int = 4_096
    graph_nodes: int = 5_000_000


MATERIALISED = SizeLimits()


def _source_records(src: Source) -> int:
    if src.kind == "generated":
        return src.partitions * src.records_per_partition_per_batch * src.batches
    if src.kind == "explicit":
        return len(src.records)
    if src.broker is not None:
        return src.broker.messages
    per_partition = int(src.rows_per_second * src.duration_s) // src.partitions
    return per_partition * src.partitions


def _source_batches(src: Source) -> int:
    """Batches an untimed backend cuts (timed backends cut by their clock, usually no more)."""
    if src.kind == "generated":
        return src.batches
    if src.kind == "explicit":
        last_ms = max((r[4] for r in src.records), default=0)
        return last_ms // src.batch_ms + 1
    if src.broker is not None:   # the last first delivery: the last publish, at most reorder_ms late
        return ((src.broker.messages - 1) * src.broker.interval_ms + src.broker.reorder_ms) // src.batch_ms + 1
    return int(src.duration_s * 1000) // src.batch_ms + 1


def estimate(scenario: Scenario) -> SizeEstimate:
    records = sum(_source_records(src) for src in scenario.sources.values())
    batches = max(_source_batches(src) for src in scenario.sources.values())
    parts = scenario.state_partitions
    per_batch = len(DRIVER_STEPS) + parts * (len(TASK_STEPS) + 1)
    return SizeEstimate(records, batches, parts, batches * per_batch)


def too_large(scenario: Scenario, limits: SizeLimits = MATERIALISED) -> str | None:
    """None when the scenario fits ``limits``; else which limit it passes, with the numbers."""
    size = estimate(scenario)
    for name in ("records", "batches", "state_partitions", "graph_nodes"):
        have, allowed = getattr(size, name), getattr(limits, name)
        if have > allowed:
            return (f"{size.describe()}: {name.replace('_', ' ')} {have:,} exceed the {allowed:,} a backend that "
                    "holds every record in memory can run here; shrink the scenario (or use the simulator's "
                    "volume mode, which counts records instead of holding them)")
    return None
