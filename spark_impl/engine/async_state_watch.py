"""Async state checkpointing on the driver: the background state commits it waits for.

Under async state checkpointing a task returns before its state commit; the
commit runs on a background thread of the executor's Python worker, which
reports its outcome in ``async/<p>/<b>`` (``coordination.py``). The driver
finishes the background ``changelog_write``/``state_commit`` nodes when the
commit succeeded, and fails the query when it failed or never finished (its
executor may be lost), as Spark fails a query whose pending commit failed.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from reference.protocol.failures import QueryFailure
from reference.language.steps import NodeId

if TYPE_CHECKING:
    from .incarnation import SparkIncarnation

STATE_WATCH_TIMEOUT_S = 60.0
BACKGROUND_STEPS = ("changelog_write", "state_commit")


class AsyncStateWatch:
    """The state commits of (batch, partition) still running in the background, and since when."""

    def __init__(self, inc: "SparkIncarnation"):
        self.inc = inc
        self.pending: dict[tuple[int, int], float] = {}

    def watch(self, b: int, partitions: set[int]) -> None:
        for p in partitions:
            self.pending[(b, p)] = time.monotonic()

    def poll(self) -> tuple[list[NodeId], QueryFailure | None]:
        """The nodes of the commits that succeeded since the last poll (their effects applied), or the failure
        of one that failed or never finished."""
        inc = self.inc
        finished: list[NodeId] = []
        for (b, p), since in list(self.pending.items()):
            status = inc.coordination.async_status(p, b)
            if status.exists():
                text = status.read_text()
                if text.startswith("failed"):
                    return finished, QueryFailure(f"async state commit of batch {b} partition {p} {text}")
                self.pending.pop((b, p))
                for step in BACKGROUND_STEPS:
                    inc.run_step(inc.nid(step, b, p))
                    finished.append(inc.nid(step, b, p))
            elif time.monotonic() - since > STATE_WATCH_TIMEOUT_S:
                return finished, QueryFailure(f"async state commit of batch {b} partition {p} never finished "
                                              "(its executor may be lost)")
        return finished, None
