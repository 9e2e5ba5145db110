"""Exploring a scenario's single-fault schedules with the plan said up front and a progress bar.

``reference.judge.explorer`` does the work; this adds what a user at a terminal
needs: how many schedules the exploration will run (and whether it will stop
incomplete at the explorer's cap) before it starts, a bar while it runs, and
a summary that says INCOMPLETE when it was cut short. An interrupt raises
``ExplorationInterrupted`` with what was explored by then.
"""

from __future__ import annotations

import signal
import sys
import threading
from contextlib import contextmanager
from typing import Any, Callable, Iterator

from experiments.progress import ExploreBar
from reference.judge.explorer import ExplorationInterrupted, Report, explore, plan_exploration
from reference.language.scenario import Scenario


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def explore_with_progress(scenario: Scenario, *, depth: int = 1, workers: int | None = None, quiet: bool = False,
                          say: Callable[[str], None] = _stderr) -> Report:
    """Say the plan, explore with a progress bar, and return the report."""
    plan = plan_exploration(scenario)
    say(f"exploring {scenario.name!r} (seed {scenario.seed}), depth {depth}; the scenario's own faults are "
        f"replaced by every single-fault placement")
    say(f"plan: {plan.describe()}: {plan.schedules:,} schedules"
        + (", plus a second crash during every recovery" if depth >= 2 else ""))
    bar = ExploreBar(plan.schedules, "explore", quiet)
    with _interrupts():
        try:
            report = explore(scenario, depth=depth, workers=workers, progress=bar)
        except ExplorationInterrupted:
            bar.bar.close()
            raise
    bar.finish(report.schedules, len(report.violations))
    return report


@contextmanager
def _interrupts() -> Iterator[list[bool]]:
    """While the block runs, a SIGINT is noted (the list becomes ``[True]``) and then raised as usual."""
    noted: list[bool] = []
    if threading.current_thread() is not threading.main_thread():
        yield noted
        return

    def note(signum: int, frame: Any) -> None:
        noted.append(True)
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, note)
    try:
        yield noted
    finally:
        signal.signal(signal.SIGINT, previous)


def report_lines(report: Report) -> list[str]:
    """The summary, a plain statement when the exploration is incomplete, and each violation."""
    lines = [report.summary()]
    if report.truncated:
        lines.append("INCOMPLETE: the exploration stopped at the explorer's cap on crash cuts; schedules past it "
                     "were not checked (explore a smaller scenario: fewer batches or partitions)")
    for violation in report.violations:
        lines.append(violation.describe())
    return lines
