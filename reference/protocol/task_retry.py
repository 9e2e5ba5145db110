"""A failed task attempt and a lost executor (spec section 2's ``task_failure`` and ``executor_loss``).

Spark retries a failed attempt (up to ``spark.task.maxFailures``, the mode's
``task_attempts``; real-time mode retries none); the retry redoes the task's
steps from ``state_load``, and the failed attempt's sealed version must never
be reused. An executor loss drops every store cached on it,
with every version sealed there and not yet durable. The fault table
(``faults.apply_fault``) decides when these run; a backend's fault substrate
calls them.
"""

from __future__ import annotations

from typing import Callable

from .failures import QueryFailure
from .incarnation_views import IncarnationViews
from .records import TaskState
from ..language.steps import TASK_STEPS, NodeId


class TaskRetries(IncarnationViews):
    """What a failed attempt and a lost executor do to the incarnation's tasks and cached stores."""

    run_step: Callable[[NodeId], None]   # the incarnation's (``incarnation.py``)

    def fail_task(self, b: int, p: int, reason: str) -> None:
        """Abandon the current attempt of task (b, p); the next attempt starts from state_load."""
        task = self.tasks.setdefault((b, p), TaskState())
        task.attempt += 1
        if task.attempt >= self.mode.task_attempts:
            raise QueryFailure(f"task b{b} p{p} failed {task.attempt} time(s), the most the {self.mode.name} mode "
                               f"tries it: {reason}")
        if self.cfg.state_checkpoint == "async" and task.sealed and \
                all(sid in task.written and task.written[sid].uid == task.sealed[sid].uid for sid in self.store_ids):
            task.state_handed_off = True  # the written version stands; the retry redoes the output only
            task.sink_file = None
            return
        for sid in self.store_ids:
            store = self.stores.get((sid, p))
            if store is not None and sid in task.before and store.version > b:
                store.restore(task.before[sid])  # the attempt's version must never be reused
            elif store is not None and store.changes:
                store.abort()
        task.result, task.sealed, task.sink_file, task.before = None, {}, None, {}
        record = self.obs.batches.setdefault(b, {})
        record["task_retries"] = record.get("task_retries", 0) + 1

    def lose_executor(self, p: int, failing: tuple[int, int] | None = None) -> None:
        """Every store cached on p's executor is gone, with every version sealed there but not yet durable.

        The failing task (``failing``: its batch and partition) is retried as any failed attempt. Another
        task whose sealed version was lost: under async state checkpointing its commit was already handed to
        the background and the query fails, as Spark fails it; under sync state checkpointing the task had
        not finished, so Spark retries it too (the reference redoes its steps up to where it stood).
        """
        batch = failing[0] if failing is not None else max(self.plans)
        executor = self.executor_of(batch, p)
        lost = [key for key in self.stores if self.store_executor.get(key) == executor]
        durable = {key: self.stores.pop(key).durable_versions for key in lost}
        stranded = sorted({(bb, qq) for (bb, qq), t in self.tasks.items() for (sid, q) in lost
                           if qq == q and (bb, qq) != failing and sid in t.sealed
                           and t.sealed[sid].version > max(durable[(sid, q)], default=0)})
        if stranded and self.cfg.state_checkpoint == "async":
            raise QueryFailure(f"executor {executor} lost with a pending state commit of partition {stranded[0][1]}")
        for bb, qq in stranded:
            task = self.tasks[(bb, qq)]
            reached = "changelog_write" if all(sid in task.written for sid in task.sealed) else "task_apply"
            self.fail_task(bb, qq, f"executor {executor} lost")
            self.retry_task_steps(bb, qq, reached)

    def retry_task_steps(self, b: int, p: int, upto: str) -> None:
        """Re-run the task's foreground steps from state_load through ``upto`` for the new attempt."""
        for step in TASK_STEPS:
            for node_id in self.step_nodes(step, b, p):
                if not self.nodes[node_id].background:
                    self.run_step(node_id)
            if step == upto:
                break

    def previous_task_step(self, node_id: NodeId) -> str | None:
        """The foreground task step before ``node_id``'s in its task (None for the first)."""
        b, p = node_id.batch, node_id.partition
        steps = [s for s in TASK_STEPS if any(not self.nodes[n].background for n in self.step_nodes(s, b, p))]
        index = steps.index(node_id.step) if node_id.step in steps else 0
        return steps[index - 1] if index > 0 else None
