"""The paper's fault-matrix section: every fault kind x mode x column on every backend, from the fullest run
that holds each backend (the three-backend full run holds the reference model and the simulator too)."""

from __future__ import annotations

from experiments.writeup import BACKEND_NAME, BACKENDS, MODES, Run, Table, Writeup, esc, key, lookup

EXPERIMENT = "fault-matrix"
FIGURES = (("fault_matrix", "100%"),)
MATRIX_BACKENDS = ("reference", "sim", "spark", "spark-native")
STATUSES = ("pass", "loud", "fail", "unsupported")


def fullest(w: Writeup, backend: str) -> Run | None:
    """The run whose matrix holds ``backend``: full before quick, then the one with the most backends."""
    runs = [r for b in BACKENDS for m in MODES if (r := w.results.run(EXPERIMENT, b, m)) is not None
            and backend in (lookup(r.doc, ["summary", "counts"]) or {})]
    return min(runs, key=lambda r: (MODES.index(r.mode), -len(r.doc["summary"]["counts"])), default=None)


def write(w: Writeup) -> None:
    rows, shown = [], []
    for backend in MATRIX_BACKENDS:
        run = fullest(w, backend)
        if run is None:
            rows.append([f"{esc(BACKEND_NAME[backend])}: " + w.absent_cell(EXPERIMENT, backend)])
            for s in STATUSES:
                w.v.absent(f"fm_{key(backend)}_{s}")
            continue
        shown.append(run)
        rows.append([esc(f"{BACKEND_NAME[backend]} ({run.mode} run {run.file.split('/')[-2]}, {run.seeds} seed"
                         f"{'s' * (run.seeds != 1)})")] +
                    [w.v.of(run, f"fm_{key(backend)}_{s}", ["summary", "counts", backend, s], "int") for s in STATUSES])
    runs = list(dict.fromkeys(shown))
    w.table("fault_matrix", Table(["Backend (run)", "Pass", "Loud", "Fail", "Unsupported"], rows),
            label="tab-fm", runs=runs)
    w.text("fm_availability", "; ".join(w.describe_run(r) for r in runs) + "." if runs else "not run.")
    w.add_figures(EXPERIMENT, FIGURES, only=runs[:1])
    run = runs[0] if runs else None
    for name, path in (("fm_operators", ["summary", "operators"]), ("fm_modes", ["summary", "modes"]),
                       ("fm_faults", ["summary", "faults"]), ("fm_points", ["points"])):
        w.v.of(run, name, path, "int", "len")
