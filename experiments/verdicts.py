"""Verdicts: a published claim against what an experiment measured, with the tolerance the experiment states.

A sanity check (``experiments.experiment.Check``) says whether a run is
correct (orderings, bounds); a verdict says how close it came to a published
number, and is a finding, not a failure: it never changes an exit code.

- ``reproduced``: the measured value lies within ``tolerance`` of the
  published value or range (tolerance in the claim's unit, e.g. percentage
  points for a cut);
- ``direction only``: not that close, but on the same side of ``neutral``
  (the value meaning "no effect": 0 for a cut, 1 for a speed-up) as the
  published value;
- ``not reproduced``: no effect, or the opposite one (or, for an absolute
  number such as a latency, which has no direction, anything outside the
  tolerance);
- ``not measured``: no value.

A claim of a direction with no size ("more at the peak") is judged by
``judge_direction``: reproduced when the measured difference lies past 0 in
the claimed direction by more than the tolerance (the noise the experiment
allows), not reproduced otherwise.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

REPRODUCED, DIRECTION_ONLY, NOT_REPRODUCED, NOT_MEASURED = (
    "reproduced", "direction only", "not reproduced", "not measured")


@dataclass(frozen=True)
class Verdict:
    """One claim: the published value or range, the measured value, the tolerance and the verdict."""

    claim: str
    published_low: float
    published_high: float
    measured: float | None
    tolerance: float
    unit: str
    verdict: str
    direction: bool = False     # a claim of direction only: published_low is 0 and the sign says which way

    def line(self) -> str:
        if self.direction:
            pub = f"{'more' if self.published_high > 0 else 'less'} than {_num(0.0, self.unit)}"
        elif self.published_low == self.published_high:
            pub = _num(self.published_low, self.unit)
        else:
            pub = f"{_num(self.published_low, '')}-{_num(self.published_high, self.unit)}"
        got = "-" if self.measured is None else _num(self.measured, self.unit)
        return (f"[{self.verdict}] {self.claim}: measured {got}, published {pub} "
                f"(tolerance {_num(self.tolerance, 'pp' if self.unit == '%' else self.unit)})")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def judge(claim: str, measured: float | None, published: float | tuple[float, float], *, tolerance: float,
          neutral: float | None = 0.0, unit: str = "", up_to: bool = False) -> Verdict:
    """The verdict on ``claim``: ``measured`` against a published value or (low, high) range.

    ``neutral`` None: the claim is an absolute number (a latency), which has no direction, so a value
    outside the tolerance is ``not reproduced``. ``up_to``: the claim is a ceiling ("batches up to 25%
    shorter"), so any effect in its direction, from just past ``neutral`` to ``high`` plus the tolerance,
    reproduces it; a larger one is ``direction only``.
    """
    low, high = (published, published) if isinstance(published, (int, float)) else published
    assert low <= high, f"{claim}: published range {low}..{high} is reversed"
    assert tolerance >= 0, f"{claim}: negative tolerance {tolerance}"
    if up_to:
        if neutral is None:
            raise ValueError(f"{claim}: a ceiling claim needs the value meaning no effect (neutral)")
        sign = 1.0 if high >= neutral else -1.0
        ceiling = high if sign > 0 else low
        low, high = min(neutral, ceiling), max(neutral, ceiling)   # the published range: no effect to the ceiling
    if measured is None:
        verdict = NOT_MEASURED
    elif up_to and neutral is not None:
        gain = (measured - neutral) * sign > 0
        verdict = (REPRODUCED if gain and (measured - ceiling) * sign <= tolerance else
                   DIRECTION_ONLY if gain else NOT_REPRODUCED)
    elif low - tolerance <= measured <= high + tolerance:
        verdict = REPRODUCED
    elif neutral is not None and (measured - neutral) * ((low + high) / 2 - neutral) > 0:
        verdict = DIRECTION_ONLY
    else:
        verdict = NOT_REPRODUCED
    return Verdict(claim, float(low), float(high), None if measured is None else float(measured),
                   float(tolerance), unit, verdict)


def judge_direction(claim: str, measured: float | None, *, tolerance: float, unit: str = "",
                    sign: float = 1.0) -> Verdict:
    """The verdict on a claim of direction only: ``measured`` (a difference, 0 meaning none) must lie more than
    ``tolerance`` past 0 on the side ``sign`` names (+1: more, -1: less)."""
    assert tolerance >= 0, f"{claim}: negative tolerance {tolerance}"
    assert sign in (1.0, -1.0), f"{claim}: sign {sign} is neither +1 nor -1"
    if measured is None:
        verdict = NOT_MEASURED
    else:
        verdict = REPRODUCED if measured * sign > tolerance else NOT_REPRODUCED
    return Verdict(claim, 0.0, float(sign), None if measured is None else float(measured), float(tolerance), unit,
                   verdict, direction=True)


def report_lines(verdicts: list[dict[str, Any]]) -> list[str]:
    """The report's lines for verdicts stored in a summary (``Verdict.to_dict`` each)."""
    if not verdicts:
        return []
    return ["verdicts against the published claims (findings, not failures):"] + \
        ["  " + Verdict(**v).line() for v in verdicts]


def _num(value: float, unit: str) -> str:
    text = f"{value:,.0f}" if abs(value) >= 10 or value == int(value) else f"{value:,.2f}"
    return f"{text}{'' if not unit else (unit if unit in ('%', 'x') else ' ' + unit)}"
