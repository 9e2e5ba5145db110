"""The driver: the micro-batch thread, the async log writer, the async purger (spec section 2).

Structure: the driver owns one ``StepThread`` per thread. The micro-batch
thread runs the driver steps on the critical path (plan, sync log writes,
inline purge, sink commit, source commit) one at a time; the async log writer
runs background offset and commit log writes (Spark's
``AsyncProgressTrackingMicroBatchExecution`` uses one writer thread whose queue
holds at most ``ASYNC_LOG_QUEUE_DEPTH`` batches: the step graph makes plan b
wait for the log writes of b-2); the async purger runs background purges.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .step_thread import StepRunner, StepThread

if TYPE_CHECKING:
    from .graph import SimNode

ASYNC_LOG_QUEUE_DEPTH = 2


class Driver:
    """One driver incarnation; its threads die with it."""

    def __init__(self, run: StepRunner):
        self.micro_batch = StepThread(run)
        self.log_writer = StepThread(run)
        self.purger = StepThread(run)

    def submit(self, node: "SimNode") -> None:
        if not node.background:
            self.micro_batch.put(node)
        elif node.step == "purge":
            self.purger.put(node)
        else:
            assert len(self.log_writer) <= ASYNC_LOG_QUEUE_DEPTH * 2, \
                "the async log writer's queue is bounded by the step graph"
            self.log_writer.put(node)
