"""The named protocol steps of SPEC section 2: the crash-point vocabulary."""

from __future__ import annotations

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
