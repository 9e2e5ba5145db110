"""The reference's progress reporter (the ``ProgressReporter`` seam, ``seams.py``): spec section 4's progress.

The reference is untimed: a batch's progress record has its input rows and its
state operators' sizes, and every duration 0; nobody listens, and no latency is
measured. It reads the batch book's plans and the task table's stores and tasks.
"""

from __future__ import annotations

from .outcome import DURATION_KEYS, ProgressEvent, StateOperatorProgress
from .records import BatchBook, QueryFacts, TaskTable


class UntimedProgress:
    """A StreamingQueryProgress-shaped record per batch, with durations 0."""

    def __init__(self, facts: QueryFacts, book: BatchBook, table: TaskTable):
        self.store_ids, self.parts, self.plans, self.table = facts.store_ids, facts.parts, book.plans, table

    def progress_event(self, b: int) -> ProgressEvent:
        plan = self.plans[b]
        rows = sum(e - s for s, e in zip(*plan.bounds))
        stores, tasks = self.table.stores, self.table.tasks
        operators = []
        for sid in self.store_ids:
            total = sum(len(stores[(sid, p)].data) for p in range(self.parts) if (sid, p) in stores)
            changes = [c for p in range(self.parts) for c in tasks[(b, p)].sealed[sid].changes]
            operators.append(StateOperatorProgress(sid, total, sum(1 for _k, v in changes if v is not None),
                                                   sum(1 for _k, v in changes if v is None)))
        return ProgressEvent(b, rows, 0.0, 0.0, {k: 0 for k in DURATION_KEYS}, tuple(operators))

    def output_visible(self, b: int) -> None:
        """The reference measures no latency."""

    def progress_reported(self, b: int) -> None:
        """Nobody listens to the reference's progress."""
