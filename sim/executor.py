"""Executors: task slots, a state-commit thread and a maintenance thread each (SPEC section 2).

Structure: an executor owns ``cores`` task slots (a ``simpy.Resource``) and two
background queues. State partition ``p`` lives on executor ``p % executors``
(its state store is cached there). Behaviour: ``task_runner`` runs one task's
foreground steps back to back in one slot; a state-commit ``step_thread`` runs
the background changelog writes and commits of asynchronous state
checkpointing, and a maintenance ``step_thread`` uploads snapshots.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Generator, Sequence

import simpy

from reference.engine import NodeId

from .step_thread import step_thread

if TYPE_CHECKING:
    from .engine import IncarnationRun


class Executor:
    """One executor of one incarnation (a restarted query gets fresh executors)."""

    def __init__(self, env: simpy.Environment, index: int, cores: int, run: "IncarnationRun"):
        assert cores >= 1, "an executor has at least one task slot"
        self.env, self.index, self.run = env, index, run
        self.slots = simpy.Resource(env, capacity=cores)
        self.state_commit_queue = simpy.Store(env)
        self.maintenance_queue = simpy.Store(env)
        env.process(step_thread(env, self.state_commit_queue, run))
        env.process(step_thread(env, self.maintenance_queue, run))

    def launch_task(self, steps: Sequence[NodeId], launch_delay_ms: float) -> None:
        self.env.process(task_runner(self.env, self.slots, steps, launch_delay_ms, self.run))

    def submit_background(self, node_id: NodeId) -> None:
        if node_id.step == "snapshot_upload":
            self.maintenance_queue.put(node_id)
        else:
            self.state_commit_queue.put(node_id)


def task_runner(env: simpy.Environment, slots: simpy.Resource, steps: Sequence[NodeId],
                launch_delay_ms: float, run: "IncarnationRun") -> Generator:
    """Launch one task (scheduling delay + network), take a slot, run its steps in order."""
    yield env.timeout(launch_delay_ms)
    with slots.request() as slot:
        yield slot
        for node_id in steps:
            if run.stopped:
                return
            yield from run.run_step(node_id)


