"""Fit the cloud cost profile to the published rate-source figures of the offset-management post (least squares).

The sub-second post's "rate source to stat sink" benchmark (``experiments.claims``:
``om_cut_purge``, ``om_cut_progress``, ``om_cut_both``, ``om_both_below_ms``,
``om_saved_per_feature_ms``) gives, at 100K, 500K and 1M events/s, p50 cuts of
about 50% (async log purge), 65% (async progress) and 85-86% (both), a p50
below 100 ms with both, and 200-250 ms saved by each feature. Those are the
only targets: the post's headline (700-900 ms to 150-250 ms) belongs to its
Kafka benchmark and is not fitted. The fit runs the offset-management
experiment's quick points (4 configurations x 3 rates, seed 1, volume mode) on
``lightspeed_cluster.json`` with the stat sink and a few parameters changed,
and minimises the sum of squared residuals, each in percentage points: each cut
against its published value (the middle of a range), each feature's saving
against the middle of 200-250 ms (in percent of it), and the p50 with both
features past 100 ms (in percent of 100 ms; nothing below it).

The search is a Nelder-Mead simplex of our own over the logarithms of the
parameters (so they stay positive), started from the first-principles values
with a fixed initial simplex: the same command gives the same profile. What
the fit reaches is printed, and the offset-management experiment judges the
fitted profile against the same claims, labelled as fitted.

    python -m experiments.fit_profile            # fit, print residuals, write results/profiles/<fitted>.json
    python -m experiments.fit_profile --out sim/profiles/lightspeed_cluster_fitted.json   # replace the shipped one
    python -m experiments.fit_profile --check    # only evaluate the shipped fitted profile
"""

from __future__ import annotations

import argparse
import json
import math
import os
from typing import Any, Callable, Sequence

from experiments.claims import CLAIMS
from experiments.offset_management.definition import CONFIGS, CUT_CLAIMS, EXPERIMENT, FITTED_PROFILE, PROFILE
from experiments.experiment import RunContext
from experiments.profiles import sim_profile

# the parameters fitted: the object store's delete (the sync purge's cost), its rename (with the small
# write, the cost of an offset or commit log entry) and the driver's planning (the rest of a batch)
FIT_PARAMETERS = ("storage__delete_ms", "storage__rename_ms", "planning_ms")
MAX_EVALUATIONS = 60
INITIAL_STEP = 0.5            # the initial simplex: each log-parameter moved by this much
SAVING = CLAIMS["om_saved_per_feature_ms"]
BOUND = CLAIMS["om_both_below_ms"]


def profile_with(values: Sequence[float], base: dict[str, Any] | None = None) -> dict[str, Any]:
    """The first-principles profile with the stat sink and the fitted parameters set to ``values``."""
    changes = dict(zip(FIT_PARAMETERS, (round(v, 3) for v in values)))
    return sim_profile(base or sim_profile(PROFILE, sink_part_files=0), **changes)


def measure_p50(profile: dict[str, Any]) -> dict[tuple[int, str], float]:
    """p50 latency (ms) of every quick point (seed 1) on ``profile``, by (rate, configuration)."""
    ctx = RunContext(quick=True, seeds=1)
    out = {}
    for point in EXPERIMENT.profile_points(ctx, profile):
        out[(point.params["rate"], point.config)] = EXPERIMENT.measure(point)["latency_p50"]
    return out


def residuals(p50: dict[tuple[int, str], float]) -> list[dict[str, Any]]:
    """Each published rate-source figure against the model, in percentage points: a cut against its published
    value (the middle of a range), a feature's saving in percent of the published saving's middle, and the p50
    with both features past its published bound in percent of the bound (0 below it)."""
    out = []
    saving_target = (SAVING.low + SAVING.high) / 2
    for rate in sorted({r for r, _ in p50}):
        base = p50[(rate, "baseline")]
        for config, claim_id in CUT_CLAIMS.items():
            cut = (1 - p50[(rate, config)] / base) * 100
            target = (CLAIMS[claim_id].low + CLAIMS[claim_id].high) / 2
            out.append({"rate": rate, "figure": f"{config} p50 cut", "published": target, "model": cut,
                        "unit": "%", "residual_pp": cut - target})
        for config in ("async-purge", "async-progress"):
            saved = base - p50[(rate, config)]
            out.append({"rate": rate, "figure": f"{config} p50 saved", "published": saving_target, "model": saved,
                        "unit": "ms", "residual_pp": (saved - saving_target) / saving_target * 100})
        both = p50[(rate, "both")]
        out.append({"rate": rate, "figure": "both p50 (bound)", "published": BOUND.high, "model": both, "unit": "ms",
                    "residual_pp": max(0.0, both - BOUND.high) / BOUND.high * 100})
    return out


def sum_of_squares(rows: list[dict[str, Any]]) -> float:
    return sum(r["residual_pp"] ** 2 for r in rows)


def nelder_mead(f: Callable[[list[float]], float], start: list[float], step: float, max_evaluations: int
                ) -> tuple[list[float], float, int]:
    """Minimise ``f`` from ``start`` (standard coefficients: reflect 1, expand 2, contract 0.5, shrink 0.5)."""
    n = len(start)
    simplex = [list(start)] + [[x + (step if i == j else 0.0) for j, x in enumerate(start)] for i in range(n)]
    values = [f(x) for x in simplex]
    evaluations = len(simplex)
    while evaluations < max_evaluations:
        order = sorted(range(n + 1), key=lambda i: values[i])
        simplex, values = [simplex[i] for i in order], [values[i] for i in order]
        centroid = [sum(x[j] for x in simplex[:-1]) / n for j in range(n)]

        def toward(coefficient: float) -> list[float]:
            return [c + coefficient * (w - c) for c, w in zip(centroid, simplex[-1])]

        reflected = toward(-1.0)
        fr = f(reflected)
        evaluations += 1
        if fr < values[0]:
            expanded = toward(-2.0)
            fe = f(expanded)
            evaluations += 1
            simplex[-1], values[-1] = (expanded, fe) if fe < fr else (reflected, fr)
        elif fr < values[-2]:
            simplex[-1], values[-1] = reflected, fr
        else:
            contracted = toward(0.5)
            fc = f(contracted)
            evaluations += 1
            if fc < values[-1]:
                simplex[-1], values[-1] = contracted, fc
            else:
                kept = simplex[0]
                simplex = [kept] + [[b + 0.5 * (x - b) for b, x in zip(kept, point)] for point in simplex[1:]]
                values = [values[0]] + [f(x) for x in simplex[1:]]
                evaluations += n
    lowest = min(range(n + 1), key=lambda i: values[i])
    return simplex[lowest], values[lowest], evaluations


def fit(max_evaluations: int = MAX_EVALUATIONS, progress: Callable[[str], None] = print
        ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The fitted profile and its residuals."""
    base = sim_profile(PROFILE, sink_part_files=0)
    start = [math.log(_value(base, name)) for name in FIT_PARAMETERS]
    cache: dict[tuple[float, ...], float] = {}

    def objective(logs: list[float]) -> float:
        key = tuple(round(x, 9) for x in logs)
        if key not in cache:
            values = [math.exp(x) for x in logs]
            cache[key] = sum_of_squares(residuals(measure_p50(profile_with(values, base))))
            progress(f"  {', '.join(f'{n}={v:.1f}' for n, v in zip(FIT_PARAMETERS, values))}: "
                     f"sum of squares {cache[key]:.1f}")
        return cache[key]

    best, _value_best, _n = nelder_mead(objective, start, INITIAL_STEP, max_evaluations)
    profile = profile_with([math.exp(x) for x in best], base)
    profile["name"] = FITTED_PROFILE
    profile["description"] = (
        "lightspeed_cluster with the benchmark's stat sink (sink_part_files 0) and "
        f"{', '.join(n.replace('storage__', 'storage.') for n in FIT_PARAMETERS)} fitted by least squares to "
        "the sub-second post's rate-source figures only: the p50 cuts, the bound with both features and the "
        "saving per feature (python -m experiments.fit_profile; sim/profiles/README.md)")
    return profile, residuals(measure_p50(profile))


def residual_lines(rows: list[dict[str, Any]]) -> list[str]:
    lines = [f"{'rate':>10}  {'figure':<24} {'published':>10} {'model':>10} {'residual':>9}"]
    for r in rows:
        unit = r["unit"]
        lines.append(f"{r['rate']:>10,}  {r['figure']:<24} {r['published']:>8.1f}{unit:>2} {r['model']:>8.1f}{unit:>2} "
                     f"{r['residual_pp']:>+7.1f}pp")
    worst = max(abs(r["residual_pp"]) for r in rows)
    lines.append(f"sum of squares {sum_of_squares(rows):.1f}; largest residual {worst:.1f} pp")
    return lines


def _value(doc: dict[str, Any], name: str) -> float:
    return float(doc["storage"][name[len("storage__"):]] if name.startswith("storage__") else doc[name])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.fit_profile", description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="evaluate the shipped fitted profile, write nothing")
    parser.add_argument("--evaluations", type=int, default=MAX_EVALUATIONS, help="most objective evaluations")
    parser.add_argument("--out", default=os.path.join("results", "profiles", f"{FITTED_PROFILE}.json"),
                        metavar="FILE", help="where the fitted profile goes (the shipped one is sim/profiles/"
                                             f"{FITTED_PROFILE}.json: name it to replace it)")
    args = parser.parse_args(argv)
    path = args.out
    if args.check:
        print("\n".join(residual_lines(residuals(measure_p50(sim_profile(FITTED_PROFILE))))))
        return 0
    print(f"fitting {', '.join(FIT_PARAMETERS)} of {PROFILE} ({len(CONFIGS)} configurations x 3 rates)")
    profile, rows = fit(args.evaluations)
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w") as fh:
        json.dump(profile, fh, indent=2)
        fh.write("\n")
    print("\n".join(residual_lines(rows)))
    print(f"fitted: {', '.join(f'{n}={_value(profile, n)}' for n in FIT_PARAMETERS)}; written {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
