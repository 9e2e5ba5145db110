"""Progress bars (tqdm) on stderr: the points of an experiment, the schedules of an exploration.

Both show inside ``lightspeed demo`` as on their own. On a terminal a bar is
redrawn in place; written to a file or a pipe it is a line now and then.
"""

from __future__ import annotations

import sys
from typing import Any

from tqdm import tqdm

from reference.judge.explorer import ExploreProgress

MIN_INTERVAL_S = 0.5        # redraw a bar at most this often on a terminal
PIPE_INTERVAL_S = 10.0      # and this often into a file or a pipe


def _bar(total: int | None, label: str, unit: str, quiet: bool) -> Any:
    tty = sys.stderr.isatty()
    return tqdm(total=total, desc=label, unit=unit, file=sys.stderr, disable=quiet, dynamic_ncols=tty,
                mininterval=MIN_INTERVAL_S if tty else PIPE_INTERVAL_S, leave=True)


class PointsBar:
    """Points done out of planned, and how many failed."""

    def __init__(self, total: int, label: str, quiet: bool = False):
        self.bar = _bar(total, label, "point", quiet)
        self.failed = 0

    def update(self, record: dict[str, Any]) -> None:
        if record.get("error"):
            self.failed += 1
            self.bar.set_postfix(failed=self.failed, refresh=False)
        self.bar.update(1)

    def close(self) -> None:
        self.bar.close()


class ExploreBar:
    """Schedules explored out of planned, and violations found; fed by ``explore(progress=...)``."""

    def __init__(self, planned: int, label: str, quiet: bool = False):
        self.bar = _bar(planned, label, "schedule", quiet)

    def __call__(self, progress: ExploreProgress) -> None:
        if progress.done > (self.bar.total or 0):
            self.bar.total = progress.done
        self.bar.set_postfix(violations=progress.violations, refresh=False)
        self.bar.update(progress.done - self.bar.n)

    def finish(self, schedules: int, violations: int) -> None:
        """The final count (the explorer reports about once a second, so the last tick may be behind)."""
        self(ExploreProgress(schedules, self.bar.total or schedules, violations, 0.0))
        self.bar.close()
