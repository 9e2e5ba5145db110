"""The paper's offset-management section: the rate-source ablation on every backend, where a batch's time goes,
the verdicts on the rate-source claims (first principles and fitted apart), the fitted profile."""

from __future__ import annotations

from experiments.offset_management.definition import CONFIGS
from experiments.stats import keep_up_text
from experiments.verdicts import FITTED
from experiments.writeup import BACKEND_NAME, BACKENDS, Run, Table, Writeup, esc, fmt, key, lookup

EXPERIMENT = "offset-management"
FIGURES = (("offset_management_reduction", "49%"), ("offset_management_latency", "100%"),
           ("offset_management_latency_fitted", "100%"))
FIGURE_GROUPS = (("offset_management_reduction",), ("offset_management_latency", "offset_management_latency_fitted"))
RATE_CLAIMS = ("om_cut_purge", "om_cut_progress", "om_cut_both", "om_both_below_ms", "om_saved_per_feature_ms",
               "om_saved_both_ms")
BREAKDOWN_PARTS = ("planning", "offsetWrite", "purge", "addBatch", "commitOffsets", "other")
# the values the prose quotes of the engine's run, at its lowest and highest rate
ENGINE_PARTS = ("baseline_p50", "purge_cut", "progress_cut", "both_cut", "both_p50", "hi_rate", "hi_purge_cut",
                "hi_progress_cut", "hi_both_cut", "hi_both_p50", "hi_addbatch_baseline", "hi_addbatch_both",
                "storage", "judged", "backlogged")
SIM_PARTS = ("base_p50", "purge_cut", "progress_cut", "both_cut", "both_p50", "purge_saved", "progress_saved")


def write(w: Writeup) -> None:
    rows = [["published (rate source)", "not stated"] +
            [w.v.claim(f"pub_{key(c)}", c) for c in ("om_cut_purge", "om_cut_progress", "om_cut_both")] +
            [w.v.claim("pub_om_both_below_ms", "om_both_below_ms"), ""]]
    for backend in BACKENDS:
        run = w.run(EXPERIMENT, backend)
        if run is None:
            rows.append([f"{esc(BACKEND_NAME[backend])}: " + w.absent_cell(EXPERIMENT, backend)])
            continue
        rows += _rows(w, run, ["summary", "rates"], "")
        if lookup(run.doc, ["summary", "fitted", "rates"]):
            rows += _rows(w, run, ["summary", "fitted", "rates"], "fitted profile")
    w.table("offset_management", Table(["Run, rate", "Baseline p50", "Async purge", "Async progress", "Both",
                                        "Both p50", "Keep-up"], rows,
                                       aligns=["left"] + ["right"] * 5 + ["left"]),
            label="tab-om", runs=[w.run(EXPERIMENT, b) for b in BACKENDS])
    _breakdown(w)
    w.text("om_availability", w.availability(EXPERIMENT))
    w.add_figures(EXPERIMENT, FIGURES, FIGURE_GROUPS)
    sim, spark = w.run(EXPERIMENT, "sim"), w.run(EXPERIMENT, "spark")
    w.verdicts("om_verdicts_sim", sim, RATE_CLAIMS, basis=None if sim is None else _first_basis(sim))
    w.verdicts("om_verdicts_sim_fitted", sim if sim and w.finding(sim, "om_cut_purge", FITTED) else None,
               RATE_CLAIMS, basis=FITTED)
    w.verdicts("om_verdicts_spark", spark, RATE_CLAIMS)
    _sim_values(w, sim, "om_sim", ["summary", "rates"])
    _sim_values(w, sim if sim and lookup(sim.doc, ["summary", "fitted"]) else None, "om_fit",
                ["summary", "fitted", "rates"])
    _fitted_profile(w, sim)
    _engine_values(w, spark)


def _first_basis(run: Run) -> str:
    """The basis of the run's own (not fitted) verdicts: first principles on the simulator, measured else."""
    bases = [f["basis"] for f in lookup(run.doc, ["summary", "findings"]) or [] if f["basis"] != FITTED]
    return bases[0] if bases else ""


def _rows(w: Writeup, run: Run, path: list[str], label: str) -> list[list[str]]:
    """One row per rate: the baseline's p50, each configuration's cut, the p50 with both, and keep-up."""
    out = []
    rates = lookup(run.doc, path) or {}
    for rate in sorted(rates, key=float):
        base = path + [rate]
        n = f"om_{key(run.backend)}{'_fit' if label else ''}_{rate}"
        entry = rates[rate]
        behind = [c for c in CONFIGS if (entry.get(c, {}).get("keep_up") or {}).get("backlogged")]
        judged = all((entry.get(c, {}).get("keep_up") or {}).get("judged") for c in CONFIGS if c in entry)
        keep = "; ".join(f"{c} {keep_up_text(entry[c]['keep_up'])}" for c in behind) if behind else \
            "kept up" if judged else "not judged"
        out.append([esc(f"{run.tag}{', ' + label if label else ''}, {fmt('rate', float(rate))}/s"),
                    w.v.of(run, f"{n}_baseline_p50", base + ["baseline", "p50", "median"], "ms"),
                    w.v.of(run, f"{n}_purge_cut", base + ["async-purge", "cut_p50"], "cut"),
                    w.v.of(run, f"{n}_progress_cut", base + ["async-progress", "cut_p50"], "cut"),
                    w.v.of(run, f"{n}_both_cut", base + ["both", "cut_p50"], "cut"),
                    w.v.of(run, f"{n}_both_p50", base + ["both", "p50", "median"], "ms"), esc(keep)])
    return out


def _breakdown(w: Writeup) -> None:
    """Where a batch's time goes (the experiment's ``breakdown_ms``: durationMs in disjoint parts), per
    configuration at each run's lowest rate; the simulator with both of its profiles."""
    rows = []
    for backend in ("sim", "spark"):
        run = w.run(EXPERIMENT, backend)
        if run is None:
            rows.append([f"{esc(BACKEND_NAME[backend])}: " + w.absent_cell(EXPERIMENT, backend)])
            for config in CONFIGS:      # the prose quotes these; without the run they read n/a
                for part in BREAKDOWN_PARTS + ("total",):
                    w.v.absent(f"ombd_{key(backend)}_{key(config)}_{key(part)}")
            continue
        for label, path in (("", ["summary", "rates"]), (", fitted profile", ["summary", "fitted", "rates"])):
            rates = lookup(run.doc, path)
            if not rates:
                continue
            lo = min(rates, key=float)
            for config in CONFIGS:
                base = path + [lo, config, "breakdown_ms"]
                if lookup(run.doc, base) is None:
                    continue
                n = f"ombd_{key(backend)}{'_fit' if label else ''}_{key(config)}"
                rows.append([esc(f"{run.tag}{label}, {fmt('rate', float(lo))}/s, {config}")] +
                            [w.v.of(run, f"{n}_{key(part)}", base + [part], "ms") for part in BREAKDOWN_PARTS] +
                            [w.v.add(f"{n}_total", [(run.file, base + [part]) for part in BREAKDOWN_PARTS],
                                     "ms", "sum")])
    w.table("om_breakdown", Table(["Run, rate, configuration", "Planning", "Offset write", "Purge", "addBatch",
                                   "Commit log", "Other", "Total"], rows),
            label="tab-om-breakdown", runs=[w.run(EXPERIMENT, b) for b in ("sim", "spark")])


def _sim_values(w: Writeup, run: Run | None, prefix: str, path: list[str]) -> None:
    """The simulator's spans over the three rates of one profile: the baseline p50, each cut, the p50 with both,
    and the p50 each single feature saves (the run's own numbers; its verdicts say how they compare)."""
    rates = list(lookup(run.doc, path) or {}) if run is not None else []
    if not rates:
        for part in SIM_PARTS:
            if part.endswith("_saved"):
                w.text(f"{prefix}_{part}", "n/a")
            else:
                w.v.absent(f"{prefix}_{part}")
        return
    per = {"base_p50": ("baseline", "p50", "median"), "both_p50": ("both", "p50", "median"),
           "purge_cut": ("async-purge", "cut_p50"), "progress_cut": ("async-progress", "cut_p50"),
           "both_cut": ("both", "cut_p50")}
    for part, tail in per.items():
        w.span(f"{prefix}_{part}", run, [path + [r, *tail] for r in rates], "ms" if "p50" in part else "pct")
    assert run is not None
    for part, config in (("purge_saved", "async-purge"), ("progress_saved", "async-progress")):
        # a saving is a difference of two values: its ends are the smallest and largest over the rates
        savings = [(r, (lookup(run.doc, path + [r, "baseline", "p50", "median"]) or 0.0) -
                    (lookup(run.doc, path + [r, config, "p50", "median"]) or 0.0)) for r in rates]
        lo, hi = min(savings, key=lambda s: s[1])[0], max(savings, key=lambda s: s[1])[0]
        low = w.v.add(f"{prefix}_{part}_min", [(run.file, path + [lo, "baseline", "p50", "median"]),
                                               (run.file, path + [lo, config, "p50", "median"])], "ms", "diff")
        high = w.v.add(f"{prefix}_{part}_max", [(run.file, path + [hi, "baseline", "p50", "median"]),
                                                (run.file, path + [hi, config, "p50", "median"])], "ms", "diff")
        w.text(f"{prefix}_{part}", low if low == high else f"{low} to {high}")


def _fitted_profile(w: Writeup, run: Run | None) -> None:
    """The fitted profile the run used (its recorded parameters), and whether it is the one shipped now."""
    from experiments.offset_management.definition import FITTED_PROFILE
    from experiments.profiles import sim_profile
    index = None if run is None else next(
        (i for i, r in enumerate(run.doc["points"]) if "profile" in r["point"]["params"]), None)
    names = ("fit_delete_ms", "fit_rename_ms", "fit_planning_ms")
    if run is None or index is None:
        for name in names:
            w.v.absent(name)
        w.text("om_fit_profile_note", "no fitted-profile run is in this build")
        return
    prof = ["points", index, "point", "profile"]
    for name, path in zip(names, (["storage", "delete_ms"], ["storage", "rename_ms"], ["planning_ms"])):
        w.v.of(run, name, prof + path, "ms1")
    used, shipped = lookup(run.doc, prof), sim_profile(FITTED_PROFILE)
    same = all(lookup(used, p) == lookup(shipped, p) for p in (["storage", "delete_ms"], ["storage", "rename_ms"],
                                                               ["planning_ms"]))
    w.text("om_fit_profile_note", "the profile shipped now" if same else
           "an earlier fit, to the mixed targets this version no longer uses; the shipped profile has since been "
           "re-fitted to the rate-source figures alone, and the run must be repeated to judge it")


def _engine_values(w: Writeup, run: Run | None) -> None:
    """The engine's numbers the prose quotes: at its lowest and highest rate, and its keep-up counts."""
    if run is None or not lookup(run.doc, ["summary", "rates"]):
        for part in ENGINE_PARTS:
            w.v.absent(f"om_engine_{part}")
        return
    rates = run.doc["summary"]["rates"]
    lo, hi = min(rates, key=float), max(rates, key=float)
    for prefix, rate in (("", lo), ("hi_", hi)):
        base = ["summary", "rates", rate]
        for part, path, spec in (("purge_cut", ["async-purge", "cut_p50"], "cut"),
                                 ("progress_cut", ["async-progress", "cut_p50"], "cut"),
                                 ("both_cut", ["both", "cut_p50"], "cut"), ("both_p50", ["both", "p50", "median"], "ms")):
            w.v.of(run, f"om_engine_{prefix}{part}", base + path, spec)
    w.v.of(run, "om_engine_baseline_p50", ["summary", "rates", lo, "baseline", "p50", "median"], "ms")
    at_hi = next((i for i, r in enumerate(run.doc["points"]) if str(r["point"]["params"].get("rate")) == hi), None)
    w.v.of(run, "om_engine_hi_rate", ["points", at_hi, "point", "params", "rate"], "rate")
    for config in ("baseline", "both"):
        w.v.of(run, f"om_engine_hi_addbatch_{config}", ["summary", "rates", hi, config, "breakdown_ms", "addBatch"], "ms")
    w.v.of(run, "om_engine_storage", ["storage_profile"], "str")
    w.v.of(run, "om_engine_judged", ["points"], "int", "judged")
    w.v.of(run, "om_engine_backlogged", ["points"], "int", "backlogged")

