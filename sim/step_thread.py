"""A thread of a simulated process: it runs the steps put on its queue, one at a time, in order.

The driver's micro-batch thread, async log writer and async purger, and each
executor's state-commit and maintenance threads all behave this way. What
tells them apart is which steps their component puts on their queue.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Generator

import simpy

if TYPE_CHECKING:
    from .engine import IncarnationRun


def step_thread(env: simpy.Environment, queue: simpy.Store, run: "IncarnationRun") -> Generator:
    """Run queued steps until the incarnation stops."""
    while not run.stopped:
        node_id = yield queue.get()
        yield from run.run_step(node_id)
