"""Verdicts: a published claim (``experiments.claims``) against what an experiment measured over its seeds.

A sanity check (``experiments.experiment.Check``) says whether a run is correct (orderings, bounds); a verdict
says whether it reproduced a published number, and is a finding, not a failure: it never changes an exit code.
Verdicts are judged once, where they are measured (an experiment's ``summarize``), from one value per seed; the
reports and the paper only show them.

The claim's rule (``experiments.publications``) gives its target, from the post's words alone; the only
widening is the measured noise. For a claim about a typical value the measurement is the mean over the seeds
and its 95% confidence interval (Student's t with n - 1 degrees of freedom); for an ``at most`` bound, which
every run must keep, the measurement is every seed's own value:

- ``reproduced``: the whole interval lies inside the target (a bound: every seed keeps it);
- ``not reproduced``: the whole interval lies outside it (a bound: a seed breaks it);
- ``inconclusive``: the interval straddles a boundary of the target;
- ``exploratory``: fewer than ``MIN_SEEDS`` seeds measured it: the numbers are shown, no verdict is given and
  it counts in no tally;
- ``not measured``: no seed gave a value (a backlogged point, a run that failed).

A verdict records the basis of the measurement: ``measured`` on a real engine, ``first principles`` on the
simulator with unfitted costs, ``fitted to the claim`` on the simulator with costs fitted to the very figures it
is judged against (such a verdict shows the model can produce them, not that it predicts them), or ``fitted to
other runs``. ``findings`` folds a run's verdicts into one per claim and basis: a claim must hold at every scope
(rate, state size) the experiment judges it at, so one scope not reproduced makes the finding not reproduced,
and one inconclusive scope makes it inconclusive.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

from experiments.claims import claim as claim_named
from experiments.experiment import FIRST_PRINCIPLES, FITTED, FITTED_ELSEWHERE, MEASURED  # noqa: F401 - the bases
from experiments.publications import Claim, Target, plain_number

REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE, EXPLORATORY, NOT_MEASURED = (
    "reproduced", "not reproduced", "inconclusive", "exploratory", "not measured")
VERDICTS = (REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE, EXPLORATORY, NOT_MEASURED)
JUDGED = (REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE)        # the verdicts a tally counts
MIN_SEEDS = 3                # no verdict rests on fewer seeds (the ledger's MIN_VERDICT_SEEDS says the same)
CONFIDENCE = 0.95
# Student's t, two-sided 95% (the 0.975 quantile), by degrees of freedom; between rows the smaller df's value
# (the wider interval) is taken, and beyond the last row the normal quantile
T_975 = ((1, 12.706), (2, 4.303), (3, 3.182), (4, 2.776), (5, 2.571), (6, 2.447), (7, 2.365), (8, 2.306),
         (9, 2.262), (10, 2.228), (12, 2.179), (15, 2.131), (20, 2.086), (25, 2.060), (30, 2.042), (40, 2.021),
         (60, 2.000), (120, 1.980))
Z_975 = 1.960


def t_quantile(df: int) -> float:
    """The two-sided 95% quantile of Student's t with ``df`` degrees of freedom (``T_975``, conservatively)."""
    assert df >= 1, "a confidence interval needs at least two values"
    if df > T_975[-1][0]:
        return Z_975
    return [t for d, t in T_975 if d <= df][-1]


def confidence_interval(values: Sequence[float]) -> tuple[float, float, float]:
    """The mean of ``values`` and its 95% confidence interval (low, high); one value is its own interval."""
    mean = statistics.fmean(values)
    if len(values) < 2:
        return mean, mean, mean
    half = t_quantile(len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values))
    return mean, mean - half, mean + half


@dataclass(frozen=True)
class Verdict:
    """One claim at one scope: the target its rule gives, the value of each seed, their mean and 95% interval
    (for a bound, the smallest and the largest seed), and the verdict. ``scope`` says which measurement (a
    rate, a state size), ``basis`` how it was made, ``unmet`` the published conditions the run did not honour
    (``experiments.conditions``)."""

    claim: str
    rule: str
    target_low: float | None          # None: unbounded on that side (JSON has no infinity)
    target_high: float | None
    low_open: bool
    high_open: bool
    unit: str
    samples: tuple[float, ...]
    mean: float | None
    ci_low: float | None
    ci_high: float | None
    verdict: str
    scope: str = ""
    basis: str = MEASURED
    unmet: tuple[str, ...] = ()
    missing: int = 0                  # seeds that gave no value

    @property
    def target(self) -> Target:
        return Target(-math.inf if self.target_low is None else self.target_low,
                      math.inf if self.target_high is None else self.target_high, self.low_open, self.high_open)

    @property
    def label(self) -> str:
        known = _known(self.claim)
        what = known.what if known else self.claim
        return what + (f" ({self.scope})" if self.scope else "")

    def line(self) -> str:
        known = _known(self.claim)
        published = known.published if known else target_text(self.target, self.unit)
        if self.mean is None:
            got = "not measured"
        else:
            spread = "seeds" if self.rule == "at most" else "95% CI"
            got = (f"mean {_num(self.mean, self.unit)}, {spread} {_num(self.ci_low or 0.0, '')}"
                   f"..{_num(self.ci_high or 0.0, self.unit)} over {len(self.samples)} seed"
                   f"{'s' * (len(self.samples) != 1)}")
        return (f"[{self.verdict}] {self.label}: {got}; published {published}, target "
                f"{target_text(self.target, self.unit)}" + (f" ({self.basis})" if self.basis != MEASURED else "")
                + (f"; conditions not met: {', '.join(self.unmet)}" if self.unmet else ""))

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["samples"] = list(self.samples)
        out["unmet"] = list(self.unmet)
        return out

    @staticmethod
    def from_dict(raw: dict[str, Any]) -> "Verdict":
        known = set(Verdict.__dataclass_fields__)
        fields: dict[str, Any] = {k: (tuple(v) if k in ("unmet", "samples") else v) for k, v in raw.items()
                                  if k in known}
        return Verdict(**fields)


def judge(claim_id: str, samples: Sequence[float | None], *, scope: str = "", basis: str = MEASURED) -> Verdict:
    """The verdict on the claim ``claim_id`` from one measured value per seed (None: that seed gave none)."""
    c = claim_named(claim_id)
    values = tuple(float(v) for v in samples if v is not None)
    missing = len(samples) - len(values)
    target = c.target
    if not values:
        mean = low = high = None
        verdict = NOT_MEASURED
    elif c.rule == "at most":                       # a bound: every seed keeps it, one seed breaks it
        mean, low, high = statistics.fmean(values), min(values), max(values)
        verdict = EXPLORATORY if len(values) < MIN_SEEDS else REPRODUCED if target.contains(high) else NOT_REPRODUCED
    else:
        mean, low, high = confidence_interval(values)
        verdict = _verdict(target, low, high, len(values))
    return Verdict(claim_id, c.rule, _finite(target.low), _finite(target.high), target.low_open, target.high_open,
                   c.unit, values, mean, low, high, verdict, scope, basis, missing=missing)


def _verdict(target: Target, low: float, high: float, n: int) -> str:
    if n < MIN_SEEDS:
        return EXPLORATORY
    if target.holds_all(low, high):
        return REPRODUCED
    if target.holds_none(low, high):
        return NOT_REPRODUCED
    return INCONCLUSIVE


def _finite(value: float) -> float | None:
    return None if math.isinf(value) else value


@dataclass
class _Fold:
    claim: str
    basis: str
    verdicts: list[dict[str, Any]] = field(default_factory=list)


def findings(verdicts: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One finding per (claim, basis), in the order the verdicts come: the verdict over the claim's scopes
    (``overall``), how many scopes gave each verdict, the smallest and largest mean and interval end over the
    scopes, the fewest seeds a scope had, and the claim's rule and target, with the conditions the run did not
    meet."""
    folds: dict[tuple[str, str], _Fold] = {}
    for v in verdicts:
        key = (v["claim"], v.get("basis", MEASURED))
        folds.setdefault(key, _Fold(*key)).verdicts.append(v)
    out = []
    for fold in folds.values():
        means = [v["mean"] for v in fold.verdicts if v.get("mean") is not None]
        lows = [v["ci_low"] for v in fold.verdicts if v.get("ci_low") is not None]
        highs = [v["ci_high"] for v in fold.verdicts if v.get("ci_high") is not None]
        counts = {name: sum(1 for v in fold.verdicts if v["verdict"] == name) for name in VERDICTS}
        first = fold.verdicts[0]
        out.append({"claim": fold.claim, "basis": fold.basis, "verdict": overall([v["verdict"] for v in fold.verdicts]),
                    "scopes": len(fold.verdicts), "counts": {k: n for k, n in counts.items() if n},
                    "measured_min": min(means) if means else None, "measured_max": max(means) if means else None,
                    "ci_min": min(lows) if lows else None, "ci_max": max(highs) if highs else None,
                    "seeds": min(len(v.get("samples") or []) for v in fold.verdicts),
                    "rule": first["rule"], "unit": first["unit"],
                    "target_low": first["target_low"], "target_high": first["target_high"],
                    "low_open": first["low_open"], "high_open": first["high_open"],
                    "unmet": list(first.get("unmet") or [])})
    return out


def overall(verdicts: Sequence[str]) -> str:
    """One verdict for a claim judged at several scopes: it must hold at each."""
    if all(v == NOT_MEASURED for v in verdicts):
        return NOT_MEASURED
    if EXPLORATORY in verdicts:
        return EXPLORATORY
    if NOT_REPRODUCED in verdicts:
        return NOT_REPRODUCED
    if INCONCLUSIVE in verdicts or NOT_MEASURED in verdicts:
        return INCONCLUSIVE
    return REPRODUCED


def report_lines(verdicts: list[dict[str, Any]]) -> list[str]:
    """The report's lines for verdicts stored in a summary (``Verdict.to_dict`` each)."""
    if not verdicts:
        return []
    return ["verdicts against the published claims (findings, not failures):"] + \
        ["  " + Verdict.from_dict(v).line() for v in verdicts]


def target_text(target: Target, unit: str) -> str:
    """A target as an interval: "45 to 55%", "0 (open) to 25%" as "(0, 25]%", "< 100 ms", "> 0%"."""
    u = "" if not unit else (unit if unit in ("%", "x") else " " + unit)
    at_most, at_least = "\u2264", "\u2265"
    if math.isinf(target.low) and math.isinf(target.high):
        return "any value"
    if math.isinf(target.low):
        return f"{'<' if target.high_open else at_most} {plain_number(target.high)}{u}"
    if math.isinf(target.high):
        return f"{'>' if target.low_open else at_least} {plain_number(target.low)}{u}"
    return (f"{'(' if target.low_open else '['}{plain_number(target.low)}, {plain_number(target.high)}"
            f"{')' if target.high_open else ']'}{u}")


def _known(claim_id: str) -> Claim | None:
    try:
        return claim_named(claim_id)
    except KeyError:
        return None


def _num(value: float, unit: str) -> str:
    text = plain_number(value)
    return f"{text}{'' if not unit else (unit if unit in ('%', 'x') else ' ' + unit)}"
