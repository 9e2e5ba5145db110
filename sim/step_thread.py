"""A thread of a simulated process: it runs the steps put on its queue, one at a time, in order.

The driver's micro-batch thread, async log writer and async purger, and each
executor's state-commit and maintenance threads all behave this way. What
tells them apart is which steps their component puts on their queue. A step
put on an idle thread starts at once (at the current simulated time); a step
put on a busy thread waits for the steps before it.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Callable, Protocol, Sequence

if TYPE_CHECKING:
    from .graph import SimNode


class StepRunner(Protocol):
    """What runs a step for a simulated thread or a task slot (``incarnation_run.IncarnationRun``): charge its
    cost, land its effect, then call ``on_done``; nothing runs once the incarnation has stopped."""

    @property
    def stopped(self) -> bool: ...

    def run_step(self, node: "SimNode", on_done: Callable[[], None]) -> None: ...

    def may_fuse(self) -> bool: ...

    def run_fused(self, nodes: Sequence["SimNode"], on_done: Callable[[], None]) -> None: ...


class StepThread:
    """One simulated thread draining a FIFO queue of steps (it dies with its incarnation)."""

    __slots__ = ("run", "queue", "busy")

    def __init__(self, run: StepRunner):
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
