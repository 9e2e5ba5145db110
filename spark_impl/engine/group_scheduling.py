"""Group scheduling, in the manner of Drizzle (SOSP'17): one Spark job runs the task steps of G batches.

Spark's per-job cost is then paid once per group instead of once per batch.
Each task of a group job runs its partition's batches in order; before each
batch it waits for the driver to release that batch (``go/<b>``, written when
the batch's task steps are ready in the graph, exactly when the job of that
batch would otherwise be submitted), and after it the task reports its result
in a file (``result/<b>/<p>``) instead of through ``collect``. The driver
submits the job of group g+1 the moment the job of group g ends (see
``_run_groups`` for why not earlier), so its tasks are usually waiting before
their first batch's input has arrived. A group job holds one slot per
partition for its whole life, so it needs at least as many task slots as
state partitions.
"""

from __future__ import annotations

import json
import pickle
import threading
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Protocol

from .coordination import atomic_write, count_files
from .jobs import SparkJobs
from .task import TaskResult
from .task_spec import IndexedFault

if TYPE_CHECKING:
    from .incarnation import SparkIncarnation

RESULT_POLL_S = 0.002


class GroupListener(Protocol):
    """What the step scheduler hears from group jobs."""

    def active(self) -> bool: ...
    def finish_results(self, b: int, results: list[TaskResult]) -> None: ...
    def job_failed(self, what: str, exc: BaseException) -> None: ...


def group_batches(batches: list[int], size: int) -> list[tuple[int, ...]]:
    """Consecutive chunks of ``size`` of an incarnation's batches, one Spark job each."""
    return [tuple(batches[i:i + size]) for i in range(0, len(batches), size)]


class GroupScheduling:
    """The group jobs of one incarnation, the batches released to them, and their reported results."""

    def __init__(self, inc: "SparkIncarnation", jobs: SparkJobs, batches: list[int], listener: GroupListener):
        self.inc, self.jobs, self.listener = inc, jobs, listener
        self.groups = group_batches(batches, inc.engine.group)
        self.lock = threading.Lock()
        self.released: list[int] = []     # batches handed to group jobs whose results are awaited
        self.started = False

    def start(self) -> None:
        threading.Thread(target=self._collect_results, name="group-results", daemon=True).start()

    def release(self, b: int, faults: tuple[IndexedFault, ...]) -> None:
        """Hand batch ``b`` to the tasks of its group job (submitting the group jobs on the first release)."""
        if not self.started:
            self.started = True
            threading.Thread(target=self._run_groups, name="group-jobs", daemon=True).start()
        spec = replace(self.inc.task_spec(b, faults), scenario=None)
        self.inc.batch_timing[b]["job_start"] = time.time()
        atomic_write(self.inc.coordination.go(b), pickle.dumps(spec))
        with self.lock:
            self.released.append(b)

    def _run_groups(self) -> None:
        """Run the group jobs one after the other, each submitted the moment the previous one ends.

        The next group's job is not submitted earlier (Drizzle would pre-schedule it): when a task
        fails, Spark frees its slot before it re-queues the retry, and a task of a newer job that
        takes the slot then waits for a batch that needs the retry, which cannot get a slot.
        """
        for g, batches in enumerate(self.groups):
            try:
                self.jobs.run_group(g, batches)
            except BaseException as exc:  # noqa: BLE001 - handed to the scheduler
                if self.listener.active():
                    self.listener.job_failed(f"batches {batches[0]}-{batches[-1]}", exc)
                return
            if not self.listener.active():
                return

    def _collect_results(self) -> None:
        """Finish a released batch's task nodes once every partition reported."""
        while self.listener.active():
            with self.lock:
                waiting = list(self.released)
            for b in waiting:
                results = self._results(b)
                if results is None:
                    continue
                with self.lock:
                    self.released.remove(b)
                self.inc.batch_timing[b]["job_end"] = time.time()
                self.listener.finish_results(b, results)
            time.sleep(RESULT_POLL_S)

    def _results(self, b: int) -> list[TaskResult] | None:
        where, parts = self.inc.coordination, self.inc.parts
        if count_files(where.results(b)) < parts:
            return None
        return [json.loads(where.result(b, p).read_text()) for p in range(parts)]
