"""The bounded-replay variant of real-time mode (beyond Spark, ``engine.real_time_progress_ms``).

Spark's real-time mode persists progress only where a batch ends, so a crash
replays the whole batch. The variant persists the tasks' progress every
``real_time_progress_ms`` inside a batch: at each point the tasks commit their
state and report their offsets, and the driver writes both logs in the
background, at most two points behind; the tasks go on without a gap, which
opens only where a real-time batch ends. A restart then replays at most what
followed the last persisted point.

Each point is one batch of the step graph (``BoundedReplayShape``): a
real-time batch holds ``steps_per_batch`` of them. Everything else is
``real_time.RealTime``'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ...language.field_reader import ScenarioError
from ...language.scenario import Scenario
from ...language.steps import NodeId
from ..graph import BatchShape, GraphShape
from .real_time import RealTime, RealTimeShape

REAL_TIME_MIN_PROGRESS_MS = 100   # the shortest persistence interval (the model's limit)


@dataclass(frozen=True)
class BoundedReplayShape(RealTimeShape):
    """A real-time batch split into ``steps_per_batch`` graph batches, one per persisted progress point."""

    steps_per_batch: int = 1

    def opens_batch(self, b: int) -> bool:
        """Whether graph batch ``b`` starts a real-time batch (after the boundary gap)."""
        return b % self.steps_per_batch == 0

    def plan_deps(self, b: int) -> tuple[NodeId, ...]:
        """Inside a real-time batch the long-running tasks go on: b-1's logs in the background, two at most."""
        if self.opens_batch(b):
            return super().plan_deps(b)
        n = NodeId.of
        return (n("plan", b - 1), *self.tasks_ended(b - 1), n("commit_log_write", b - 2))

    def logs_in_background(self, b: int) -> bool:
        """The logs of a point run behind unless the real-time batch ends there."""
        return not self.opens_batch(b + 1)

    def variant_batches(self) -> tuple[int, ...]:
        return tuple(sorted({*super().variant_batches(), *range(min(self.steps_per_batch, 2))}))


class BoundedReplay(RealTime):
    """Real-time mode that persists its progress every ``real_time_progress_ms`` inside a batch."""

    name: ClassVar[str] = "bounded_replay"

    @property
    def step_ms(self) -> int:
        """The arrival time one step-graph batch covers: the persistence interval."""
        return self.cfg.real_time_progress_ms

    @property
    def steps_per_batch(self) -> int:
        """How many persisted progress points a real-time batch holds."""
        return max(1, self.cfg.trigger_interval_ms // self.step_ms)

    def check_engine(self) -> None:
        super().check_engine()
        if self.cfg.progress_mode != "sync":
            raise ScenarioError("engine.progress.mode", "the bounded-replay variant persists its progress itself, at "
                                                        "each point, with synchronous logs; asynchronous progress "
                                                        "tracking is not part of it")
        progress, batch_ms = self.cfg.real_time_progress_ms, self.cfg.trigger_interval_ms
        if progress < REAL_TIME_MIN_PROGRESS_MS:
            raise ScenarioError("engine.real_time_progress_ms", f"the bounded-replay variant persists progress at "
                                                                f"most every {REAL_TIME_MIN_PROGRESS_MS} ms; got "
                                                                f"{progress}")
        if batch_ms % progress:
            raise ScenarioError("engine.real_time_progress_ms", f"{progress} ms does not divide the batch duration "
                                                                f"{batch_ms} ms: a batch holds a whole number of "
                                                                "persisted progress points")

    def shape(self, scenario: Scenario, *, store_commit_nodes: bool = True) -> BatchShape:
        base = GraphShape.of(scenario, store_commit_nodes=store_commit_nodes)
        return BoundedReplayShape(base.cfg, base.partitions, base.stateful, base.uses_watermark, base.moved,
                                  base.commit_stores, step_ms=self.step_ms, steps_per_batch=self.steps_per_batch)

    def opens_batch(self, b: int) -> bool:
        """Whether graph batch ``b`` starts a real-time batch (the others are progress points inside one)."""
        return b % self.steps_per_batch == 0
