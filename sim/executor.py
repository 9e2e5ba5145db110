"""Executors: task slots, a state-commit thread and a maintenance thread each (spec section 2).

Structure: an executor owns ``cores`` task slots and two background
``StepThread``s. State partition ``p`` lives on executor ``p % executors``
(its state store is cached there), or, when the scenario names its executors
and has them join and leave, where the placement puts it in that batch
(``TimedIncarnation.slot_executor_of``). Behaviour: a launched task reaches the
executor after the launch delay, waits for a free slot (first come, first
served), and runs its foreground steps back to back in that slot (those
nothing outside the task waits for may share one timeout, see
``IncarnationRun.run_fused``); the
state-commit thread runs the background changelog writes and commits of
asynchronous state checkpointing, and the maintenance thread uploads snapshots.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Sequence

import simpy

from .step_thread import StepRunner, StepThread

if TYPE_CHECKING:
    from .graph import SimNode


class Executor:
    """One executor of one incarnation (a restarted query gets fresh executors)."""

    def __init__(self, env: simpy.Environment, index: int, cores: int, run: StepRunner):
        assert cores >= 1, "an executor has at least one task slot"
        self.env, self.index, self.run = env, index, run
        self.free_slots = cores
        self.waiting: deque[TaskRun] = deque()
        self.state_commit = StepThread(run)
        self.maintenance = StepThread(run)

    def launch_task(self, steps: Sequence["SimNode"], launch_delay_ms: float) -> None:
        task = TaskRun(self, steps)
        self.env.timeout(launch_delay_ms).callbacks.append(task.arrive)

    def submit_background(self, node: "SimNode") -> None:
        if node.step == "snapshot_upload":
            self.maintenance.put(node)
        else:
            self.state_commit.put(node)

    def release_slot(self) -> None:
        if self.waiting and not self.run.stopped:
            self.waiting.popleft().start()
        else:
            self.free_slots += 1


class TaskRun:
    """One task: take a slot, run the steps in order, give the slot back."""

    __slots__ = ("executor", "steps", "index")

    def __init__(self, executor: Executor, steps: Sequence["SimNode"]):
        self.executor, self.steps, self.index = executor, steps, 0

    def arrive(self, _event: object = None) -> None:
        executor = self.executor
        if executor.run.stopped:
            return
        if executor.free_slots:
            executor.free_slots -= 1
            self.start()
        else:
            executor.waiting.append(self)

    def start(self) -> None:
        self._run()

    def _run(self) -> None:
        """Run the next step, or the next steps up to one something outside the task waits for."""
        run, steps, i = self.executor.run, self.steps, self.index
        if run.may_fuse():
            j = i
            while j < len(steps) - 1 and steps[j].template.fusable:
                j += 1
            if j > i:
                self.index = j
                run.run_fused(steps[i:j + 1], self.next_step)
                return
        run.run_step(steps[i], self.next_step)

    def next_step(self) -> None:
        self.index += 1
        run = self.executor.run
        if self.index < len(self.steps) and not run.stopped:
            self._run()
        else:
            self.executor.release_slot()
