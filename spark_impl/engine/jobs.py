"""Spark jobs of one incarnation: the task steps of a batch (or of a group of batches) as one job.

A job has one task per state partition (``task.py``), runs in the FAIR
scheduler's ``lightspeed`` pool, and is tagged with the incarnation's epoch so
that a crash cancels every job it left. Its input RDD asks for each
partition's last executor (``locality.py``). Jobs are submitted in batch
order: the scheduler (FIFO within the pool) then runs every task of batch
b-1 before any of batch b, so a pipelined task that waits on the executor for
its partition of the previous batch never holds the slot that task needs.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from reference.protocol.failures import QueryFailure

from .task import PartitionFunction, TaskResult, group_entry, task_entry
from .task_spec import IndexedFault

if TYPE_CHECKING:
    from .incarnation import SparkIncarnation

POOL = "lightspeed"
SUBMISSION_TIMEOUT_S = 60.0
SUBMISSION_POLL_S = 0.002


class SparkJobs:
    """Submits an incarnation's jobs and remembers which were submitted and which ended."""

    def __init__(self, inc: "SparkIncarnation"):
        self.inc = inc
        self.state: dict[str, str] = {}   # job label (batch or group) -> "submitted" | "ended"

    def run_batch(self, b: int, faults: tuple[IndexedFault, ...]) -> list[TaskResult]:
        """The job of batch ``b``: one task per partition, results through ``collect``."""
        inc = self.inc
        spec = inc.task_spec(b, faults)
        previous = str(b - 1) if b - 1 in inc.plans and b - 1 >= inc.restart.first_batch else None
        inc.batch_timing[b]["job_start"] = time.time()
        out = self._collect(str(b), f"batch {b}", previous, task_entry(spec), inc.wanted_executors(b))
        inc.batch_timing[b]["job_end"] = time.time()
        return out

    def run_group(self, g: int, batches: tuple[int, ...]) -> None:
        """The job of group ``g``: each task runs its partition of ``batches`` as the driver releases them."""
        entry = group_entry(self.inc.group_spec(batches[0]), batches)
        # a group job's tasks stay where they start: the placement of its first batch
        self._collect(f"g{g}", f"batches {batches[0]}-{batches[-1]}", None, entry,
                      self.inc.wanted_executors(batches[0]))

    def _collect(self, label: str, description: str, previous: str | None, fn: PartitionFunction,
                 wanted: dict[int, str] | None = None) -> list[Any]:
        inc = self.inc
        sc = inc.engine.spark.sparkContext
        sc.setLocalProperty("spark.scheduler.pool", POOL)
        sc.setJobGroup(f"{inc.epoch}:{label}", description, interruptOnCancel=True)
        sc.addJobTag(inc.epoch)
        if previous is not None:
            self._wait_for_submission(previous)
        self.state[label] = "submitted"
        inc.engine.jobs += 1
        try:
            return list(inc.engine.placement.rdd(inc.parts, wanted).mapPartitionsWithIndex(fn).collect())
        finally:
            self.state[label] = "ended"
            inc.engine.placement.ran(f"{inc.epoch}:{label}")

    def _wait_for_submission(self, label: str) -> None:
        """Until the job ``label`` has reached Spark's scheduler (or ended): jobs go in batch order."""
        tracker = self.inc.engine.spark.sparkContext.statusTracker()
        group = f"{self.inc.epoch}:{label}"
        deadline = time.monotonic() + SUBMISSION_TIMEOUT_S
        while self.state.get(label) is None or \
                (self.state[label] != "ended" and not tracker.getJobIdsForGroup(group)):
            if time.monotonic() > deadline:
                raise QueryFailure(f"the job of {label} was never submitted")
            time.sleep(SUBMISSION_POLL_S)
