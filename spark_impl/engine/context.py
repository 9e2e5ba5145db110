"""What outlives one incarnation inside one driver process: the session, the directories, what was measured."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

from ..latency import SinkDelivery
from .locality import Placement
from .storage_latency import StorageLatency


@dataclass
class EngineContext:
    """The engine's state across the incarnations that one driver process runs."""

    spark: Any
    root: str                            # the checkpoint directory (the layout of spec section 3)
    coord: str                           # the coordination directory (``coordination.py``)
    local_root: str                      # executor-local scratch for RocksDB instances
    kill_driver: bool = False            # driver_crash by SIGKILL (a supervisor restarts the process)
    pace: bool = True                    # plan a batch only once its input has arrived (wall clock)
    t0: float = field(default_factory=time.time)  # wall time of the scenario's time 0
    listeners: list[Any] = field(default_factory=list)
    deliveries: list[SinkDelivery] = field(default_factory=list)  # every sink commit, re-deliveries included
    task_log: list[dict[str, Any]] = field(default_factory=list)
    on_step: Callable[[str], None] | None = None   # called after each driver step (journal for SIGKILL mode)
    straggler: tuple[float, float, int] | None = None  # synthetic slow tasks: (probability, extra ms, seed)
    group: int = 1                       # batches per Spark job (group scheduling when > 1)
    storage_latency: StorageLatency | None = None  # checkpoint storage sleeps this profile's latencies
    driver_storage: Any = None           # the driver's checkpoint storage (with its latency, if any)
    jobs: int = 0                        # Spark jobs submitted (every incarnation)
    placement: Placement = field(init=False)   # where each partition ran last (preferred locations)

    def __post_init__(self) -> None:
        self.placement = Placement(self.spark)
