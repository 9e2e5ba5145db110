"""Sanity checks that compare two configurations and know the noise of the run that measured them.

A check such as "async purge's p50 is no higher than the baseline's" holds
when the measured order is the expected one. When it is not, the difference
is a *real inversion* only if it is larger than the spread the run measured:
the larger of the two configurations' ranges (max - min) over the run's own
seeds. A smaller difference is *within noise* and decides nothing. A run with
one seed has no spread to judge by, so any inversion it shows is within
noise. Only a real inversion fails the check (and the run's exit code);
a fixed percentage of slack never stands in for the measured spread.
"""

from __future__ import annotations

from typing import Any, Callable

from experiments.experiment import Check

Spread = dict[str, Any]      # ``experiments.stats.over_seeds``: median, min, max and n over the seeds


def spread_of(*groups: Spread) -> float | None:
    """The noise of a comparison: the largest range over seeds among ``groups``; None when no group has two
    seeds (no spread was measured)."""
    ranges = [g["max"] - g["min"] for g in groups if (g.get("n") or 0) >= 2 and g.get("max") is not None
              and g.get("min") is not None]
    return max(ranges) if ranges else None


def no_worse(name: str, candidate: Spread, reference: Spread, *, higher_is_better: bool = False,
             show: Callable[[float], str] = lambda v: f"{v:,.1f} ms") -> Check:
    """The check that ``candidate`` is no worse than ``reference`` (medians over seeds): PASS when the order
    holds, within noise when the inversion is inside the measured spread (or one seed cannot tell), FAIL only
    on an inversion larger than the spread."""
    a, b = candidate.get("median"), reference.get("median")
    if a is None or b is None:
        return Check(name, None, "not measured")
    inversion = (b - a) if higher_is_better else (a - b)
    detail = f"{show(a)} against {show(b)}"
    if inversion <= 0:
        return Check(name, True, detail)
    noise = spread_of(candidate, reference)
    if noise is None:
        return Check(name, None, f"{detail}: within noise (one seed: no spread over seeds to judge an "
                                 f"inversion of {show(inversion)} by)", within_noise=True)
    seeds = max(candidate.get("n") or 0, reference.get("n") or 0)
    if inversion <= noise:
        return Check(name, None, f"{detail}: within noise (inversion {show(inversion)}, spread over {seeds} "
                                 f"seeds {show(noise)})", within_noise=True)
    return Check(name, False, f"{detail}: a real inversion ({show(inversion)}, beyond the spread over {seeds} "
                              f"seeds, {show(noise)})")
