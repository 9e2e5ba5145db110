"""The paper's calibration section: the simulator's local profile fitted to the engine's stateless runs, its
prediction error on the configurations the fit did not see, and the verdicts against the published model
errors (Doppio, Ernest), on the held-out workload and on every unseen configuration, whose state costs leaked."""

from __future__ import annotations

from experiments.calibration.definition import HELD_OUT
from experiments.stats import keep_up_text
from experiments.verdicts import FITTED_ELSEWHERE
from experiments.writeup import BACKEND_NAME, Run, Table, Writeup, esc, key, lookup

EXPERIMENT = "calibration"
FIGURES = (("calibration", "100%"),)
BACKENDS = ("spark", "spark-native")
QUOTED_ROWS = ("stateless/baseline", "stateless/both", "running-count/sync", "running-count/async-state")
# where the engine's batch time goes, quoted by the prose: (value name, row, side, part)
PARTS = (("cal_spark_addbatch_measured", "stateless/baseline", "measured_targets", "addBatch"),
         ("cal_spark_addbatch_fitted", "stateless/baseline", "predicted_targets_fitted", "addBatch"),
         ("cal_spark_planning_measured", "stateless/baseline", "measured_targets", "planning"),
         ("cal_spark_offset_write_measured", "stateless/baseline", "measured_targets", "offsetWrite"))
LOADS = (("cal_spark_load_stateless_span", "stateless", "baseline"),
         ("cal_spark_load_count_span", "running-count", "sync"))


def write(w: Writeup) -> None:
    w.text("cal_availability", w.availability(EXPERIMENT, BACKENDS))
    w.add_figures(EXPERIMENT, FIGURES)
    rows = []
    for backend in BACKENDS:
        run = w.run(EXPERIMENT, backend)
        if run is None:
            rows.append([f"{esc(BACKEND_NAME[backend])}: " + w.absent_cell(EXPERIMENT, backend)])
            w.v.absent(f"cal_{key(backend)}_validation")
            continue
        order = _order(run)
        for k, row in sorted(run.doc["summary"].get("rows", {}).items(), key=lambda i: order.get(i[0], len(order))):
            base = ["summary", "rows", k]
            n = f"cal_{key(backend)}_{key(k)}"
            rows.append([esc(f"{run.tag}, {k} ({row['role']})"),
                         w.v.of(run, f"{n}_measured", base + ["measured_p50"], "ms"),
                         w.v.of(run, f"{n}_shipped", base + ["predicted_p50_shipped"], "ms"),
                         w.v.of(run, f"{n}_err_shipped", base + ["error_shipped"], "change"),
                         w.v.of(run, f"{n}_fitted", base + ["predicted_p50_fitted"], "ms"),
                         w.v.of(run, f"{n}_err_fitted", base + ["error_fitted"], "change"),
                         esc(keep_up_text(row.get("keep_up")))])
        w.v.of(run, f"cal_{key(backend)}_validation", ["summary", "validation_mean_abs_error"], "pct")
    spark = w.run(EXPERIMENT, "spark")
    _parts(w, spark)
    for k in QUOTED_ROWS:          # rows the prose quotes by name: n/a when this build did not measure them
        for part in ("measured", "shipped", "err_shipped", "fitted", "err_fitted"):
            if f"cal_spark_{key(k)}_{part}" not in w.v.entries:
                w.v.absent(f"cal_spark_{key(k)}_{part}")
    w.table("calibration", Table(["Run, workload/config (role)", "Measured p50", "Sim, shipped", "Error",
                                  "Sim, fitted", "Error", "Keep-up"], rows, aligns=["left"] + ["right"] * 5 + ["left"]),
            label="tab-cal", runs=[w.run(EXPERIMENT, b) for b in BACKENDS])
    measured = [b for b in BACKENDS if w.run(EXPERIMENT, b) is not None]
    w.text("cal_status", ("The calibration was measured on " + " and ".join(esc(BACKEND_NAME[b]) for b in measured)
                          + "; its errors are in the table.") if measured else
           "*The calibration has not been measured in this build*: it needs a Spark backend.")
    w.span("cal_spark_unseen_err_span", spark, [["summary", "rows", k, "error_fitted"]
                                                for k, r in (lookup(spark.doc if spark else None,
                                                                    ["summary", "rows"]) or {}).items()
                                                if r["role"] != "fit"], "change")
    w.verdicts("cal_verdicts", spark, ("doppio_error", "ernest_error"), basis=FITTED_ELSEWHERE)
    w.text("cal_held_out", esc(HELD_OUT))


def _order(run: Run) -> dict[str, int]:
    """Each row's place in the experiment's own order (the fit's workload first): where the first seed ran it."""
    measured = [pt["point"] for pt in run.doc["points"] if pt["point"]["task"] == "measure"]
    first = min((pt["seed"] for pt in measured), default=None)
    order = [f"{pt['params']['workload']}/{pt['config']}" for pt in measured if pt["seed"] == first]
    return {row: i for i, row in enumerate(order)}


def _parts(w: Writeup, run: Run | None) -> None:
    """The batch parts and the tasks' state loads the prose quotes (n/a when the run lacks them)."""
    rows = lookup(run.doc if run else None, ["summary", "rows"]) or {}
    for name, row, side, part in PARTS:
        if run is not None and part in (rows.get(row, {}).get(side) or {}):
            w.v.of(run, name, ["summary", "rows", row, side, part], "ms1" if part != "addBatch" else "ms")
        else:
            w.v.absent(name)
    for name, workload, config in LOADS:
        found = [] if run is None else [
            ["points", i, "metrics", "task_step_ms_mean", "state_load"] for i, pt in enumerate(run.doc["points"])
            if pt["point"]["config"] == config and pt["point"]["params"].get("workload") == workload
            and ((pt.get("metrics") or {}).get("task_step_ms_mean") or {}).get("state_load") is not None]
        w.span(name, run if found else None, found, "ms1")
