"""The driver: the micro-batch thread, the async log writer, the async purger (SPEC section 2).

Structure: the driver owns one work queue per thread. Behaviour: one generator
process per thread, named for what it does. The micro-batch thread runs the
driver steps on the critical path (plan, sync log writes, inline purge, sink
commit, source commit) one at a time; the async log writer runs background
offset and commit log writes (Spark's ``AsyncProgressTrackingMicroBatchExecution``
uses one writer thread whose queue holds at most ``ASYNC_LOG_QUEUE_DEPTH``
batches: the step graph makes plan b wait for the log writes of b-2); the async
purger runs background purges.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Generator

import simpy

from reference.engine import NodeId

if TYPE_CHECKING:
    from .engine import IncarnationRun

ASYNC_LOG_QUEUE_DEPTH = 2


class Driver:
    """One driver incarnation; its queues die with it."""

    def __init__(self, env: simpy.Environment, run: "IncarnationRun"):
        self.env = env
        self.micro_batch_queue = simpy.Store(env)
        self.log_writer_queue = simpy.Store(env)
        self.purge_queue = simpy.Store(env)
        env.process(micro_batch_thread(env, self.micro_batch_queue, run))
        env.process(async_log_writer(env, self.log_writer_queue, run))
        env.process(async_purger(env, self.purge_queue, run))

    def submit(self, node_id: NodeId, background: bool) -> None:
        if not background:
            self.micro_batch_queue.put(node_id)
        elif node_id.step == "purge":
            self.purge_queue.put(node_id)
        else:
            assert len(self.log_writer_queue.items) <= ASYNC_LOG_QUEUE_DEPTH * 2, \
                "the async log writer's queue is bounded by the step graph"
            self.log_writer_queue.put(node_id)


def micro_batch_thread(env: simpy.Environment, queue: simpy.Store, run: "IncarnationRun") -> Generator:
    """Run critical-path driver steps one at a time, in the order they become ready."""
    while not run.stopped:
        node_id = yield queue.get()
        yield from run.run_step(node_id)


def async_log_writer(env: simpy.Environment, queue: simpy.Store, run: "IncarnationRun") -> Generator:
    """Write offset and commit log entries in the background (asynchronous progress tracking)."""
    while not run.stopped:
        node_id = yield queue.get()
        yield from run.run_step(node_id)


def async_purger(env: simpy.Environment, queue: simpy.Store, run: "IncarnationRun") -> Generator:
    """Purge old log entries and state files in the background (``log_purge.mode = async``)."""
    while not run.stopped:
        node_id = yield queue.get()
        yield from run.run_step(node_id)
