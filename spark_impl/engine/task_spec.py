"""What the driver ships to the tasks of one batch: the batch, its inputs and the faults that travel with it."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from reference.language.operators import Watermark
from reference.protocol.query import pipeline_store_ids
from reference.language.scenario import Fault, Scenario

from .coordination import Coordination
from .storage_latency import StorageLatency

IndexedFault = tuple[int, Fault]   # a scenario fault and its position in ``scenario.faults``


@dataclass(frozen=True)
class TaskSpec:
    """Everything a task of one batch needs; shipped to executors with the job (or a group's release)."""

    scenario: Scenario | None  # None only in a released batch's spec (the group job's spec has it)
    root: str                 # the checkpoint directory (shared by every worker)
    coord: str                # coordination directory (shared, outside the checkpoint)
    local_root: str           # executor-local scratch for RocksDB instances
    epoch: str
    number: int               # the incarnation: part of every lineage id
    batch: int
    start: tuple[int, ...]
    end: tuple[int, ...]
    watermarks: tuple[Watermark, ...]   # each operator's late-events and eviction watermarks
    lineage_in: dict[tuple[str, int], str] = field(default_factory=dict)  # (store, p) -> uid of version b
    first_batch: int = 0      # first batch of the incarnation (its input lineage is always known)
    maintenance: bool = False
    faults: tuple[IndexedFault, ...] = ()   # this batch's task-step faults, fired on the executor
    background_steps: frozenset[str] = frozenset()  # task steps the graph runs off the critical path
    driver_pid: int = 0
    kill_driver: bool = False  # driver_crash by SIGKILL (else the driver is asked to crash)
    straggler: tuple[float, float, int] | None = None  # (probability, extra ms, seed): synthetic slow tasks
    storage_latency: StorageLatency | None = None  # checkpoint storage sleeps this profile's draws (None: none)
    ledgers: tuple[tuple[int, tuple[int, ...]], ...] = ()  # redelivering source partition -> ids behind the offsets
    # partitions the placement moves to another executor at this batch (``reference.protocol.rebalancing``): their
    # tasks find no copy of the state where they now run, and load it from the checkpoint
    moved: frozenset[int] = frozenset()
    # partition -> the executor the placement runs its task on in this batch (``reference.protocol.rebalancing``): an
    # executor loss drops the stores cached by that executor, as the reference's does
    executors: tuple[str, ...] = ()

    @property
    def query(self) -> Scenario:
        assert self.scenario is not None, f"the spec of batch {self.batch} was used before it got its scenario"
        return self.scenario

    def executor(self, p: int) -> str:
        """The executor that runs partition ``p``'s task of this batch and caches its state."""
        assert len(self.executors) > p, f"the spec of batch {self.batch} names no executor for partition {p}"
        return self.executors[p]

    @property
    def coordination(self) -> Coordination:
        return Coordination(self.coord, self.epoch)

    @property
    def async_state(self) -> bool:
        """The state commit runs in the background, after the task returned (async state checkpointing)."""
        return "state_commit" in self.background_steps

    @property
    def delta_kind(self) -> str:
        """The suffix of a committed state file: ``delta`` for the HDFS-style provider, else ``changelog``."""
        return "delta" if self.query.engine.provider == "delta" else "changelog"

    def store_ids(self) -> list[str]:
        return pipeline_store_ids(self.query.operator.flatten())

    def straggler_ms(self, p: int) -> float:
        """Extra work of task (batch, p): a seeded draw, the same on every attempt and every backend run."""
        if self.straggler is None:
            return 0.0
        probability, extra_ms, seed = self.straggler
        return extra_ms if random.Random(f"{seed}/{self.batch}/{p}").random() < probability else 0.0
