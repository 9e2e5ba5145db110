"""The paper's checkpoint-interval section: the time lost per interval on the simulator, against Young's optimum,
with the experiment's own verdicts (``young_optimum``, one per interval)."""

from __future__ import annotations

from typing import Any

from experiments.writeup import Run, Table, Writeup, esc, lookup

EXPERIMENT = "checkpoint-interval"
FIGURES = (("checkpoint_interval", "100%"),)
VALUES = ("ci_mtbf", "ci_c_ms", "ci_free", "ci_young_ms", "ci_best_ms", "ci_snap_c", "ci_batch", "ci_young_batches",
          "ci_best_batches", "ci_grid_max_ms", "ci_grid_max_deltas", "ci_grid_min_ms", "ci_grid_min_deltas",
          "ci_restart", "ci_load_slope", "ci_replay_batches", "ci_p_0_overhead")


def write(w: Writeup) -> None:
    run = w.run(EXPERIMENT, "sim")
    w.text("ci_availability", w.availability(EXPERIMENT))
    w.add_figures(EXPERIMENT, FIGURES)
    if run is None:
        for name in VALUES:
            w.v.absent(name)
        w.table("interval", Table(["Interval", "Value"], [[w.absent_cell(EXPERIMENT, "sim")]]), label="tab-ci")
        w.text("ci_snap_finding", "the simulated optimum has not been measured in this build")
        w.text("ci_progress_verdict", "not run")
        w.text("ci_replay_where", "")
        return
    s = ["summary"]
    for name, path, spec in (("ci_mtbf", ["mtbf_s"], "s"), ("ci_c_ms", ["progress", "checkpoint_cost_ms"], "ms"),
                             ("ci_free", ["progress", "free_cadence_ms"], "ms"),
                             ("ci_young_ms", ["progress", "young_ms"], "ms"),
                             ("ci_best_ms", ["progress", "simulated_best_ms"], "ms"),
                             ("ci_snap_c", ["snapshot", "snapshot_cost_ms"], "ms"),
                             ("ci_batch", ["snapshot", "batch_ms"], "ms"),
                             ("ci_young_batches", ["snapshot", "young_batches"], "num1"),
                             ("ci_best_batches", ["snapshot", "simulated_best_batches"], "int"),
                             ("ci_load_slope", ["snapshot", "load_ms_per_version"], "ms1"),
                             ("ci_replay_batches", ["snapshot", "replay_batches"], "int")):
        w.v.of(run, name, s + path, spec)
    curve, snap = run.doc["summary"]["progress"]["curve"], run.doc["summary"]["snapshot"]["curve"]
    for agg in ("min", "max"):
        w.v.add(f"ci_grid_{agg}_ms", [(run.file, s + ["progress", "curve", i, "interval_ms"])
                                      for i in range(len(curve))], "ms", agg)
        w.v.add(f"ci_grid_{agg}_deltas", [(run.file, s + ["snapshot", "curve", i, "min_deltas"])
                                          for i in range(len(snap))], "int", agg)
    first = next((i for i, r in enumerate(run.doc["points"]) if r["point"]["task"] == "progress"), 0)
    w.v.of(run, "ci_restart", ["points", first, "point", "profile", "restart_ms"], "ms")
    _snap_finding(w, run)
    replay, grid = lookup(run.doc, s + ["snapshot", "replay_batches"]), [r["min_deltas"] for r in snap]
    w.text("ci_replay_where", "" if replay is None or not grid else
           "past the grid's end, where the simulated loss has nearly stopped falling" if replay > max(grid) else
           "inside the grid, where the simulated loss is least" if replay >= min(grid) else "before the grid")
    rows = []
    for i, r in enumerate(sorted(range(len(curve)), key=lambda j: curve[j]["interval_ms"])):
        base = s + ["progress", "curve", r]
        rows.append([esc(run.tag) + f", progress, {w.v.of(run, f'ci_p_{i}_interval', base + ['interval_ms'], 'ms')}",
                     w.v.of(run, f"ci_p_{i}_overhead", base + ["overhead"], "pct1"),
                     w.v.of(run, f"ci_p_{i}_redo", base + ["redo_ms"], "ms"),
                     w.v.of(run, f"ci_p_{i}_lost", base + ["lost"], "pct1")])
    for i, r in enumerate(sorted(range(len(snap)), key=lambda j: snap[j]["min_deltas"])):
        base = s + ["snapshot", "curve", r]
        rows.append([esc(run.tag) + f", snapshot every {w.v.of(run, f'ci_s_{i}_deltas', base + ['min_deltas'], 'int')}"
                     " versions", w.v.of(run, f"ci_s_{i}_overhead", base + ["overhead"], "pct1"),
                     w.v.of(run, f"ci_s_{i}_load", base + ["load_ms"], "ms"),
                     w.v.of(run, f"ci_s_{i}_lost", base + ["lost"], "pct1")])
    w.table("interval", Table(["Run, interval", "Overhead", "Redo / state load", "Time lost"], rows),
            label="tab-ci", runs=[run])


def _scope_verdict(run: Run, part: str) -> tuple[int, dict[str, Any]] | None:
    """The experiment's own verdict on Young's optimum for one interval (its scope names it)."""
    return next(((i, v) for i, v in enumerate(lookup(run.doc, ["summary", "verdicts"]) or [])
                 if part in (v.get("scope") or v.get("claim", ""))), None)


def _snap_finding(w: Writeup, run: Run) -> None:
    """Where the simulated optima lie against Young's, as the experiment's verdicts say (clauses)."""
    for part, name in (("progress", "ci_progress_verdict"), ("snapshot", "ci_snap_verdict")):
        found = _scope_verdict(run, part)
        w.text(name, "not judged in this results file" if found is None else
               esc(w.v.of(run, f"{name}_v", ["summary", "verdicts", found[0], "verdict"], "str")) +
               " (tolerance " + w.v.of(run, f"{name}_tol", ["summary", "verdicts", found[0], "tolerance"], "num1") +
               " doubling either way)")
    found = _scope_verdict(run, "snapshot")
    if found is None:
        w.text("ci_snap_finding", "the run has no verdict on Young's optimum")
        return
    index, verdict = found
    if verdict["measured"] is None:
        w.text("ci_snap_finding", "the loss still falls at the grid's edge, short of where Young's optimum would "
                                  "be refuted, so the simulation does not decide (" + w.t["ci_snap_verdict"] + ")")
        return
    doublings = w.v.of(run, "ci_snap_doublings", ["summary", "verdicts", index, "measured"], "num1")
    snapshot = run.doc["summary"]["snapshot"]
    if not snapshot.get("best_at_edge"):
        where = "the loss curve turns inside the grid, its minimum"
    elif snapshot["simulated_best_batches"] == max(r["min_deltas"] for r in snapshot["curve"]):
        where = ("the loss falls all the way to the grid's longest interval, so the optimum lies past the one before "
                 "it, already")
    else:
        where = ("the loss is least at the grid's shortest interval, so the optimum lies before the one after it, "
                 "already")
    w.text("ci_snap_finding", f"{where} {doublings} doublings from Young's optimum: " + w.t["ci_snap_verdict"])
