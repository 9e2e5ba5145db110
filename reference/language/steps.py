"""The named protocol steps of spec section 2: the crash-point vocabulary."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# In the order one micro-batch runs them.
STEP_NAMES = (
    "plan",
    "offset_log_write",
    "purge",
    "state_load",
    "task_apply",
    "changelog_write",
    "state_commit",
    "snapshot_upload",
    "sink_write",
    "sink_commit",
    "commit_log_write",
    "source_commit",
)

# Steps a task runs for one partition of one batch.
TASK_STEPS = ("state_load", "task_apply", "changelog_write", "state_commit", "sink_write")
# Steps that run per partition but in the background (maintenance).
MAINTENANCE_STEPS = ("snapshot_upload",)
# Steps the driver runs once per batch.
DRIVER_STEPS = ("plan", "offset_log_write", "purge", "sink_commit", "commit_log_write", "source_commit")
# Steps that write a file, and so can meet a storage error or a zombie write.
WRITING_STEPS = ("offset_log_write", "changelog_write", "snapshot_upload", "sink_write", "sink_commit",
                 "commit_log_write")

FAULT_KINDS = (
    "driver_crash",
    "task_failure",
    "executor_loss",
    "storage_write_error",
    "storage_latency",
    "zombie_write",
    "corrupt_file",
    "delete_file",
    "clock_skew",
)

assert set(TASK_STEPS) | set(MAINTENANCE_STEPS) | set(DRIVER_STEPS) == set(STEP_NAMES)

# The position of each step within a batch, for the canonical schedule (``zombie_write`` is the
# explorer's landing point of a late write; it is not a protocol step).
STEP_ORDER = {name: i for i, name in enumerate((
    "plan", "offset_log_write", "purge", "state_load", "task_apply", "changelog_write", "state_commit",
    "sink_write", "snapshot_upload", "sink_commit", "commit_log_write", "source_commit", "zombie_write"))}


@dataclass(frozen=True, order=True)
class NodeId:
    """One node of the step graph: a step of a batch, on a partition for task and maintenance steps."""

    batch: int
    order: int       # position of the step within a batch, for the canonical schedule
    step: str
    partition: int = -1
    tag: str = ""

    @staticmethod
    def of(step: str, batch: int, partition: int = -1, tag: str = "") -> "NodeId":
        return NodeId(batch, STEP_ORDER[step], step, partition, tag)

    def __str__(self) -> str:
        part = f" p{self.partition}" if self.partition >= 0 else ""
        tag = f" ({self.tag})" if self.tag else ""
        return f"{self.step} b{self.batch}{part}{tag}"

    def to_json(self) -> list[Any]:
        return [self.step, self.batch, self.partition, self.tag]
