"""Verdicts: a published claim (``experiments.claims``) against what an experiment measured.

A sanity check (``experiments.experiment.Check``) says whether a run is
correct (orderings, bounds); a verdict says how close it came to a published
number, and is a finding, not a failure: it never changes an exit code.
Verdicts are judged once, where they are measured (an experiment's
``summarize``), with the claim's own kind and tolerance; reports and the
paper only show them.

- ``reproduced``: the measured value lies within the claim's tolerance of
  the published value or range (in the claim's unit; percentage points for
  a cut), or, for a ceiling, anywhere from no effect up to it;
- ``direction only``: not that close, but on the same side of the claim's
  ``neutral`` (no effect: 0 for a cut, 1 for a speed-up) as the published
  value (a ceiling: an effect larger than the ceiling);
- ``not reproduced``: no effect, or the opposite one; for an absolute number
  (no direction), anything outside the tolerance; for a direction claim, a
  difference not past the tolerance on the claimed side;
- ``not measured``: no value.

A verdict records the basis of the measurement: ``measured`` on a real
engine, ``first principles`` on the simulator with unfitted costs, ``fitted
to the claim`` on the simulator with costs fitted to the very figures it is
judged against (such a verdict shows the model can produce them, not that it
predicts them), or ``fitted to other runs``. ``findings`` folds a run's
verdicts into one per claim and basis: the overall verdict over its scopes
(rates, sizes, distributions), the measured span and the tolerance.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

from experiments.claims import claim as claim_named
from experiments.experiment import FIRST_PRINCIPLES, FITTED, FITTED_ELSEWHERE, MEASURED  # noqa: F401 - the bases
from experiments.publications import Claim

REPRODUCED, DIRECTION_ONLY, NOT_REPRODUCED, NOT_MEASURED = (
    "reproduced", "direction only", "not reproduced", "not measured")
PARTLY = "partly reproduced"
VERDICTS = (REPRODUCED, PARTLY, DIRECTION_ONLY, NOT_REPRODUCED, NOT_MEASURED)


@dataclass(frozen=True)
class Verdict:
    """One measurement of one claim: the published value or range, the measured value, the tolerance the claim
    states and the verdict; ``scope`` says which measurement (a rate, a state size), ``basis`` how it was
    made, ``unmet`` the published conditions the run did not honour (``experiments.conditions``)."""

    claim: str
    published_low: float
    published_high: float
    measured: float | None
    tolerance: float
    unit: str
    verdict: str
    kind: str = "range"
    scope: str = ""
    basis: str = MEASURED
    unmet: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        known = _known(self.claim)
        what = known.what if known else self.claim
        return what + (f" ({self.scope})" if self.scope else "")

    def line(self) -> str:
        if self.kind == "direction":
            pub = f"{'more' if self.published_high > 0 else 'less'} than {_num(0.0, self.unit)}"
        elif self.kind == "ceiling" and self.published_low == self.published_high:
            pub = f"at most {_num(self.published_high, self.unit)}"
        elif self.published_low == self.published_high:
            pub = _num(self.published_low, self.unit)
        else:
            pub = f"{_num(self.published_low, '')}-{_num(self.published_high, self.unit)}"
        got = "-" if self.measured is None else _num(self.measured, self.unit)
        return (f"[{self.verdict}] {self.label}: measured {got}, published {pub} "
                f"(tolerance {_num(self.tolerance, 'pp' if self.unit == '%' else self.unit)}"
                + (f"; {self.basis}" if self.basis != MEASURED else "") + ")"
                + (f"; conditions not met: {', '.join(self.unmet)}" if self.unmet else ""))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_dict(raw: dict[str, Any]) -> "Verdict":
        known = set(Verdict.__dataclass_fields__)
        fields: dict[str, Any] = {k: (tuple(v) if k == "unmet" else v) for k, v in raw.items() if k in known}
        return Verdict(**fields)


def judge(claim_id: str, measured: float | None, *, scope: str = "", basis: str = MEASURED) -> Verdict:
    """The verdict on the claim ``claim_id`` (``experiments.claims``) for one measured value, by the claim's
    kind, published value, neutral and tolerance."""
    c = claim_named(claim_id)
    low, high = c.low, c.high
    value = None if measured is None else float(measured)
    if value is None:
        verdict = NOT_MEASURED
    elif c.kind == "direction":
        verdict = REPRODUCED if value * c.high > c.tolerance else NOT_REPRODUCED
        low, high = 0.0, c.high
    elif c.kind == "ceiling":
        verdict, low, high = _ceiling(c, value)
    elif low - c.tolerance <= value <= high + c.tolerance:
        verdict = REPRODUCED
    elif c.neutral is not None and (value - c.neutral) * ((low + high) / 2 - c.neutral) > 0:
        verdict = DIRECTION_ONLY
    else:
        verdict = NOT_REPRODUCED
    return Verdict(claim_id, float(low), float(high), value, float(c.tolerance), c.unit, verdict, c.kind, scope,
                   basis)


def _ceiling(c: Claim, value: float) -> tuple[str, float, float]:
    """"Up to" or "below": with a neutral, any effect in the ceiling's direction up to it (plus the tolerance)
    reproduces it and a larger one is direction only; without one, anything up to it (plus the tolerance)."""
    if c.neutral is None:
        return (REPRODUCED if value <= c.high + c.tolerance else NOT_REPRODUCED), c.high, c.high
    sign = 1.0 if c.high >= c.neutral else -1.0
    low, high = min(c.neutral, c.high), max(c.neutral, c.high)   # the published range: no effect to the ceiling
    gain = (value - c.neutral) * sign > 0
    if not gain:
        return NOT_REPRODUCED, low, high
    return (REPRODUCED if (value - c.high) * sign <= c.tolerance else DIRECTION_ONLY), low, high


@dataclass
class _Fold:
    claim: str
    basis: str
    verdicts: list[dict[str, Any]] = field(default_factory=list)


def findings(verdicts: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One finding per (claim, basis), in the order the verdicts come: the overall verdict over the claim's
    scopes (all the same: that one; some reproduced: partly reproduced; none reproduced but every one on the
    published side: direction only; else not reproduced), how many scopes gave each verdict, the measured span,
    and the claim's published value, tolerance and reason, with the conditions the run did not meet."""
    folds: dict[tuple[str, str], _Fold] = {}
    for v in verdicts:
        key = (v["claim"], v.get("basis", MEASURED))
        folds.setdefault(key, _Fold(*key)).verdicts.append(v)
    out = []
    for fold in folds.values():
        c = _known(fold.claim)
        values = [v["measured"] for v in fold.verdicts if v.get("measured") is not None]
        counts = {name: sum(1 for v in fold.verdicts if v["verdict"] == name) for name in VERDICTS}
        first = fold.verdicts[0]
        out.append({"claim": fold.claim, "basis": fold.basis, "verdict": overall([v["verdict"] for v in fold.verdicts]),
                    "scopes": len(fold.verdicts), "counts": {k: n for k, n in counts.items() if n},
                    "measured_min": min(values) if values else None, "measured_max": max(values) if values else None,
                    "published_low": first["published_low"], "published_high": first["published_high"],
                    "unit": first["unit"], "kind": first.get("kind", "range"), "tolerance": first["tolerance"],
                    "tolerance_reason": c.tolerance_reason if c else "", "unmet": list(first.get("unmet") or [])})
    return out


def overall(verdicts: Sequence[str]) -> str:
    """One verdict for a claim judged at several scopes."""
    judged = [v for v in verdicts if v != NOT_MEASURED]
    if not judged:
        return NOT_MEASURED
    if all(v == judged[0] for v in judged):
        return judged[0]
    if REPRODUCED in judged:
        return PARTLY
    return DIRECTION_ONLY if all(v == DIRECTION_ONLY for v in judged) else NOT_REPRODUCED


def report_lines(verdicts: list[dict[str, Any]]) -> list[str]:
    """The report's lines for verdicts stored in a summary (``Verdict.to_dict`` each)."""
    if not verdicts:
        return []
    return ["verdicts against the published claims (findings, not failures):"] + \
        ["  " + Verdict.from_dict(v).line() for v in verdicts]


def _known(claim_id: str) -> Claim | None:
    try:
        return claim_named(claim_id)
    except KeyError:
        return None


def _num(value: float, unit: str) -> str:
    text = f"{value:,.0f}" if abs(value) >= 10 or value == int(value) else f"{value:,.2f}"
    return f"{text}{'' if not unit else (unit if unit in ('%', 'x') else ' ' + unit)}"
