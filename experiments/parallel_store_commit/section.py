"""The paper's parallel-store-commit section: a join's two state stores committed in turn (Spark OSS) or in
parallel (Lightspeed), on the simulator and the engine, with the verdict on the post's direction."""

from __future__ import annotations

from experiments.parallel_store_commit.definition import MODES
from experiments.stats import keep_up_text
from experiments.writeup import BACKEND_NAME, BACKENDS, Table, Writeup, esc, key

EXPERIMENT = "parallel-store-commit"
FIGURES = (("parallel_store_commit", "100%"),)


def write(w: Writeup) -> None:
    rows = []
    for backend in BACKENDS:
        run = w.run(EXPERIMENT, backend)
        if run is None:
            rows.append([f"{esc(BACKEND_NAME[backend])}: " + w.absent_cell(EXPERIMENT, backend)])
            continue
        for workload, entry in run.doc["summary"]["inputs"].items():
            base = ["summary", "inputs", workload]
            n = f"psc_{key(backend)}_{key(workload.replace(',', ''))}"
            keep = "; ".join(f"{m} {keep_up_text(entry[m].get('keep_up'))}" for m in MODES if m in entry) \
                if backend == "sim" else "generated input"
            rows.append([esc(f"{run.tag}, {workload}"),
                         w.v.of(run, f"{n}_commit_seq", base + ["sequential", "commit_mean", "median"], "ms1"),
                         w.v.of(run, f"{n}_commit_par", base + ["parallel", "commit_mean", "median"], "ms1"),
                         w.v.of(run, f"{n}_commit_ratio", base + ["commit_ratio"], "num2"),
                         w.v.of(run, f"{n}_batch_seq", base + ["sequential", "batch_mean", "median"], "ms"),
                         w.v.of(run, f"{n}_batch_par", base + ["parallel", "batch_mean", "median"], "ms"),
                         w.v.of(run, f"{n}_batch_ratio", base + ["batch_ratio"], "num2"), esc(keep)])
    w.table("parallel_store_commit", Table(["Run, input", "Commit, in turn", "Commit, parallel", "Ratio",
                                            "Batch, in turn", "Batch, parallel", "Ratio", "Keep-up"], rows,
                                           aligns=["left"] + ["right"] * 6 + ["left"]),
            label="tab-psc", runs=[w.run(EXPERIMENT, b) for b in BACKENDS])
    w.text("psc_availability", w.availability(EXPERIMENT))
    w.add_figures(EXPERIMENT, FIGURES)
    for backend in ("sim", "spark"):
        w.verdicts(f"psc_verdict_{backend}", w.run(EXPERIMENT, backend), ("psc_latency",))
