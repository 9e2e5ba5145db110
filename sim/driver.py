"""The driver: the micro-batch thread, the async log writer, the async purger (SPEC section 2).

Structure: the driver owns one work queue per thread, and each thread is a
``step_thread`` draining its queue. The micro-batch thread runs the
driver steps on the critical path (plan, sync log writes, inline purge, sink
commit, source commit) one at a time; the async log writer runs background
offset and commit log writes (Spark's ``AsyncProgressTrackingMicroBatchExecution``
uses one writer thread whose queue holds at most ``ASYNC_LOG_QUEUE_DEPTH``
batches: the step graph makes plan b wait for the log writes of b-2); the async
purger runs background purges.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import simpy

from reference.engine import NodeId

from .step_thread import step_thread

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
        env.process(step_thread(env, self.micro_batch_queue, run))
        env.process(step_thread(env, self.log_writer_queue, run))
        env.process(step_thread(env, self.purge_queue, run))

    def submit(self, node_id: NodeId, background: bool) -> None:
        if not background:
            self.micro_batch_queue.put(node_id)
        elif node_id.step == "purge":
            self.purge_queue.put(node_id)
        else:
            assert len(self.log_writer_queue.items) <= ASYNC_LOG_QUEUE_DEPTH * 2, \
                "the async log writer's queue is bounded by the step graph"
            self.log_writer_queue.put(node_id)



