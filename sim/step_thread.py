"""A thread of a simulated process: it runs the steps put on its queue, one at a time, in order.

The driver's micro-batch thread, async log writer and async purger, and each
executor's state-commit and maintenance threads all behave this way. What
tells them apart is which steps their component puts on their queue. A step
put on an idle thread starts at once (at the current simulated time); a step
put on a busy thread waits for the steps before it.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .engine import IncarnationRun
    from .graph import SimNode


class StepThread:
    """One simulated thread draining a FIFO queue of steps (it dies with its incarnation)."""

    __slots__ = ("run", "queue", "busy")

    def __init__(self, run: "IncarnationRun"):
        self.run = run
        self.queue: deque[SimNode] = deque()
        self.busy = False

    def put(self, node: "SimNode") -> None:
        if self.busy:
            self.queue.append(node)
            return
        self.busy = True
        self.run.run_step(node, self._next)

    def _next(self) -> None:
        if self.queue and not self.run.stopped:
            self.run.run_step(self.queue.popleft(), self._next)
        else:
            self.busy = False

    def __len__(self) -> int:
        return len(self.queue)
