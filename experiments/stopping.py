"""Adaptive stopping: a timed point runs until its p50 is precise, or until its time budget ends.

A definition opts in with ``Experiment.stopping = Stopping(...)`` (naming the
tasks that are timed); the runner (``experiments.measure.run_point``) then
measures each of those points in rounds, the same way on every timed backend:

1. Round 1 runs the point exactly as defined.
2. After a round, the point's p50 is the median of its batch durations
   (Spark's ``durationMs.triggerExecution`` of every micro-batch after the
   first ``outcome_metrics.WARMUP_BATCHES``, which every timed backend reports: simulated ms on
   the simulator, wall ms on the engine and native Spark). Its 95% confidence
   interval comes from a bootstrap over the batches (``RESAMPLES`` resamples
   of the batches with replacement, the generator seeded by the point's seed,
   so the same run gives the same interval).
3. The point is **precise** when both ends of the interval lie within
   ``HALF_WIDTH`` (5%) of the p50: it stops, and the round's metrics are the
   point's.
4. Otherwise the next round runs the point's scenario ``GROWTH`` (2) times as
   long as the last (a rate source's ``duration_s``, a generated source's
   ``batches``; same seed), replacing the last round's metrics, so a point's
   metrics always come from one run of its scenario. A round is started only
   if the time spent so far plus its expected cost (the first round's cost
   times its length) stays within the point's **budget**: ``budget_factor``
   (8) times the first round's cost, and for a wall-clock point at most
   ``TIMEOUT_SHARE`` of the experiment's point timeout (a point that runs
   longer is taken for stuck). Otherwise it stops at the **budget**, with the
   last round's metrics and interval.

Time is counted on the point's own clock: simulated seconds on the simulator
(the simulated end time of every run the round made), wall seconds on the
engine and native Spark. A scenario whose source cannot be lengthened (no
rate or generated source) runs once and says so (``fixed``); so does a round
with fewer than ``MIN_BATCHES`` batches once it cannot grow. The record of
every timed point carries ``stopping``: the rule that ended it, the rounds
(length, batches, p50, interval, cost), the clock, the budget and the time
spent.
"""

from __future__ import annotations

import random
import statistics
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from experiments.outcome_metrics import WARMUP_BATCHES

HALF_WIDTH = 0.05           # precise: the 95% interval of the p50 within +-5% of it
LEVEL = 0.95
RESAMPLES = 1000
MIN_BATCHES = 10            # fewer batches (after the warm-up) give no interval
GROWTH = 2                  # each round runs the scenario this many times as long as the last
BUDGET_FACTOR = 8.0         # a point may spend this many times its first round's cost, counting every round
TIMEOUT_SHARE = 0.8         # and a wall-clock point at most this share of its experiment's point timeout
PRECISE, BUDGET, FIXED = "precise", "budget", "fixed"


@dataclass(frozen=True)
class Stopping:
    """A definition's adaptive stopping: the tasks whose points are timed (None: every task) and the budget of
    each point as a multiple of its first round's cost."""

    tasks: tuple[str, ...] | None = None
    budget_factor: float = BUDGET_FACTOR

    def __post_init__(self) -> None:
        assert self.budget_factor >= 1.0, "a point's budget covers at least its first round"

    def applies(self, task: str) -> bool:
        """Whether the points of ``task`` are timed."""
        return self.tasks is None or task in self.tasks


@dataclass(frozen=True)
class Interval:
    """The p50 of a round's batch durations and its bootstrap interval (ms), over ``batches`` batches."""

    p50: float
    low: float
    high: float
    batches: int

    @property
    def precise(self) -> bool:
        return self.p50 > 0 and self.low >= self.p50 * (1 - HALF_WIDTH) and self.high <= self.p50 * (1 + HALF_WIDTH)


def p50_interval(durations: Sequence[float], seed: int, resamples: int = RESAMPLES) -> Interval | None:
    """The median of ``durations`` and the percentile-bootstrap 95% interval of it; None for fewer than
    ``MIN_BATCHES`` values."""
    if len(durations) < MIN_BATCHES:
        return None
    values = list(durations)
    draw = random.Random(seed)
    medians = sorted(statistics.median(draw.choices(values, k=len(values))) for _ in range(resamples))
    tail = (1 - LEVEL) / 2
    low = medians[int(tail * resamples)]
    high = medians[min(resamples - 1, int((1 - tail) * resamples))]
    return Interval(statistics.median(values), low, high, len(values))


def lengthened(scenario: dict[str, Any], factor: int) -> dict[str, Any] | None:
    """The scenario ``factor`` times as long: every rate source's ``duration_s`` and generated source's
    ``batches`` multiplied; None when it has neither (it cannot be lengthened)."""
    out = dict(scenario)
    grown = False
    for key in ("source", "sources"):
        if key not in scenario:
            continue
        sources = {"main": scenario["source"]} if key == "source" else dict(scenario[key])
        for side, src in sources.items():
            if src.get("kind") == "rate" and "duration_s" in src:
                sources[side], grown = dict(src, duration_s=src["duration_s"] * factor), True
            elif src.get("kind") == "generated" and "batches" in src:
                sources[side], grown = dict(src, batches=int(src["batches"]) * factor), True
        out[key] = sources["main"] if key == "source" else sources
    return out if grown else None


@dataclass
class Round:
    """What one round of a point ran: its outcomes' batch durations (ms) and its cost on the point's clock."""

    durations: list[float]
    cost_s: float


def run_in_rounds(scenario: dict[str, Any], seed: int, stopping: Stopping,
                  measure_round: Callable[[dict[str, Any]], tuple[dict[str, Any], Round]],
                  clock: str, cap_s: float | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """Measure a point of ``scenario`` round by round (``measure_round`` runs one on the scenario it is given and
    returns its metrics and what it ran) until it is precise or its budget ends; the last round's metrics and the
    ``stopping`` report. ``seed`` (the point's) seeds the bootstrap; ``cap_s`` caps the budget (a wall-clock
    point must end well within its timeout)."""
    metrics, first = measure_round(scenario)
    rounds = [_report(1, first, seed)]
    budget = first.cost_s * stopping.budget_factor
    if cap_s is not None:
        budget = max(first.cost_s, min(budget, cap_s))
    spent, length, last = first.cost_s, 1, first
    while True:
        interval = _interval(last, seed)
        if interval is not None and interval.precise:
            rule = PRECISE
            break
        longer = lengthened(scenario, length * GROWTH)
        if longer is None:
            rule = FIXED
            break
        if spent + first.cost_s * length * GROWTH > budget:
            rule = BUDGET
            break
        length *= GROWTH
        metrics, last = measure_round(longer)
        spent += last.cost_s
        rounds.append(_report(length, last, seed))
    return metrics, {"rule": rule, "clock": clock, "budget_s": round(budget, 3), "spent_s": round(spent, 3),
                     "length": length, "half_width": HALF_WIDTH, "rounds": rounds}


def _interval(done: Round, seed: int) -> Interval | None:
    return p50_interval(done.durations, seed)


def _report(length: int, done: Round, seed: int) -> dict[str, Any]:
    interval = _interval(done, seed)
    return {"length": length, "batches": len(done.durations), "cost_s": round(done.cost_s, 3),
            "p50_ms": None if interval is None else round(interval.p50, 3),
            "ci95_ms": None if interval is None else [round(interval.low, 3), round(interval.high, 3)],
            "precise": bool(interval and interval.precise)}
