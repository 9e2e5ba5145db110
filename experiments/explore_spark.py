"""The explorer on a Spark cluster: an exploration's schedules as Spark tasks (``lightspeed explore --master``).

An exploration is the merge of its shares (``reference.judge.explorer.explore_share``:
the schedules whose position is the share's number modulo the number of
shares). Here each share is one Spark task, in a job of its own so the bar
moves as shares finish; the driver merges what they found
(``reference.judge.explorer.merged``), so the report is the one a local run gives:
the same schedules, distinct checkpoints (and their fingerprint) and
violations, whatever the number of shares. Only ``seconds`` differs.

The cluster's executors run this project's code shipped as a zip (the Python
they run needs the standard library only: the explorer is ``reference/``).
Every share enumerates every crash cut and runs its own, so more shares cost
a little more enumeration and balance the load better; the default is two per
task slot. An interrupt cancels the jobs and says how far they got.
"""

from __future__ import annotations

import concurrent.futures
import sys
import time
from typing import Any, Callable

from experiments.progress import ExploreBar
from reference.protocol.backend import BackendUnavailable
from reference.judge.explorer import (ExplorationInterrupted, ExploreProgress, Model, Report, Share, explore_share,
                                merged, plan_exploration)
from reference.language.scenario import Scenario

SHARES_PER_SLOT = 2


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def explore_on_spark(scenario: Scenario, master: str, *, depth: int = 1, shares: int | None = None,
                     model: Model | None = None, quiet: bool = False,
                     say: Callable[[str], None] = _stderr) -> Report:
    """Explore ``scenario`` with its schedules spread over the Spark cluster at ``master`` (as ``explore``
    does over local processes); say the plan first, show a bar of shares done, return the merged report."""
    if shares is not None and shares < 1:
        raise ValueError(f"shares must be at least 1, got {shares}")
    plan = plan_exploration(scenario, model)
    say(f"exploring {scenario.name!r} (seed {scenario.seed}), depth {depth}, on Spark at {master}; the "
        f"scenario's own faults are replaced by every single-fault placement")
    say(f"plan: {plan.describe()}: {plan.schedules:,} schedules"
        + (", plus a second crash during every recovery" if depth >= 2 else ""))
    sc, slots = _spark_context(master)
    count = shares or SHARES_PER_SLOT * slots
    say(f"{count} shares as Spark tasks")
    bar = ExploreBar(plan.schedules, "explore", quiet)
    started = time.perf_counter()
    found: list[Share] = []

    def one(i: int) -> Share:
        sc.setJobDescription(f"explore {scenario.name}: share {i + 1} of {count}")
        return sc.parallelize([i], 1).map(lambda k: explore_share(scenario, k, count, depth=depth,
                                                                   model=model)).collect()[0]

    pool = concurrent.futures.ThreadPoolExecutor(count)
    try:
        for future in concurrent.futures.as_completed([pool.submit(one, i) for i in range(count)]):
            found.append(future.result())
            so_far = merged(scenario.name, found)
            bar(ExploreProgress(so_far.schedules, plan.schedules, len(so_far.violations),
                                time.perf_counter() - started))
    except KeyboardInterrupt:
        sc.cancelAllJobs()
        pool.shutdown(wait=False, cancel_futures=True)
        bar.bar.close()
        partial = merged(scenario.name, found)
        partial.truncated, partial.seconds = True, time.perf_counter() - started
        partial.interrupted_violations = len(partial.violations)
        raise ExplorationInterrupted(partial) from None
    pool.shutdown()
    report = merged(scenario.name, found)
    report.seconds = time.perf_counter() - started
    bar.finish(report.schedules, len(report.violations))
    return report


def _spark_context(master: str) -> tuple[Any, int]:
    """The SparkContext on ``master`` (this project's code shipped to a real cluster's executors) and how many
    tasks it runs at once."""
    from experiments.execution import _package_zip
    from spark_impl.session import SparkUnavailable, session, task_slots
    try:
        spark = session(master)
    except SparkUnavailable as exc:
        raise BackendUnavailable("spark", f"cannot explore on Spark ({master}): {exc}") from None
    sc = spark.sparkContext
    if not master.startswith("local"):
        sc.addPyFile(str(_package_zip()))   # the one zip of this process (the experiment runner ships it too)
    return sc, max(1, task_slots(spark))
