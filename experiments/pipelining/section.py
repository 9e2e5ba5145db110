"""The paper's pipelining section: throughput on a backlog and latency at a rate, per straggler distribution and
backend, with the verdicts on the published 2-3x."""

from __future__ import annotations

from experiments.pipelining.definition import MODES
from experiments.stats import keep_up_text
from experiments.writeup import BACKEND_NAME, BACKENDS, Run, Table, Writeup, esc, key, lookup

EXPERIMENT = "pipelining"
FIGURES = (("pipelining", "100%"),)
ORDER = {"none": 0, "mild": 1, "heavy": 2, "severe": 3, "extreme": 4}
ENGINE_VALUES = ("none_speedup", "heavy_speedup", "heavy_deep", "heavy_seeds_span", "heavy_deep_seeds_span",
                 "heavy_extra", "heavy_prob", "seeds", "lat_ratio_span", "judged", "backlogged")
SIM_VALUES = ("speedup_span", "deep_max", "none_speedup", "heavy_lat_ratio", "heavy_prob", "heavy_slow")


def write(w: Writeup) -> None:
    rows = [["published", "", "", "", w.v.claim("pub_pipe_speedup", "pipe_speedup"), "", "", ""]]
    deep = None
    for backend in BACKENDS:
        run = w.run(EXPERIMENT, backend)
        if run is None:
            rows.append([f"{esc(BACKEND_NAME[backend])}: " + w.absent_cell(EXPERIMENT, backend)])
            continue
        deep = deep or w.v.of(run, "pipe_deep", ["summary", "deep"], "int")
        for k in _ordered(run):
            base = ["summary", "rows", k]
            n = f"pipe_{key(backend)}_{key(k)}"
            entry = run.doc["summary"]["rows"][k]
            keep = "; ".join(f"{m} {keep_up_text(entry[m]['keep_up'])}" for m in MODES
                             if (entry.get(m) or {}).get("keep_up"))
            rows.append([esc(f"{run.tag}, {k}"),
                         w.v.of(run, f"{n}_seq", base + ["sequential", "rows_per_s", "median"], "krows"),
                         w.v.of(run, f"{n}_pipe", base + ["pipelined", "rows_per_s", "median"], "krows"),
                         w.v.of(run, f"{n}_deep", base + ["deep", "rows_per_s", "median"], "krows"),
                         w.v.of(run, f"{n}_speedup", base + ["speedup"], "x"),
                         w.v.of(run, f"{n}_speedup_deep", base + ["speedup_deep"], "x"),
                         w.v.of(run, f"{n}_lat_ratio", base + ["latency_ratio_p50"], "num2"),
                         esc(keep or "not judged")])
    deep = deep or w.v.absent("pipe_deep")
    w.table("pipelining", Table(["Run, operator/stragglers", "Sequential", "Pipelined", f"Depth {deep}", "Speedup",
                                 f"Speedup depth {deep}", "p50 ratio", "Keep-up (latency runs)"], rows,
                                aligns=["left"] + ["right"] * 6 + ["left"]),
            label="tab-pipe", runs=[w.run(EXPERIMENT, b) for b in BACKENDS])
    w.text("pipe_availability", w.availability(EXPERIMENT))
    w.add_figures(EXPERIMENT, FIGURES)
    sim, spark = w.run(EXPERIMENT, "sim"), w.run(EXPERIMENT, "spark")
    w.verdicts("pipe_verdict_sim", sim, ("pipe_speedup",))
    w.verdicts("pipe_verdict_spark", spark, ("pipe_speedup",))
    _engine(w, spark)
    _sim(w, sim)


def _ordered(run: Run) -> list[str]:
    rows = run.doc["summary"]["rows"]
    return sorted(rows, key=lambda k: (rows[k]["operator"] != "map", ORDER.get(rows[k]["stragglers"], 9)))


def _engine(w: Writeup, run: Run | None) -> None:
    """The engine's running count, without and with heavy stragglers; each seed paired with its own sequential
    run; and its latency runs at a rate the sequential engine sustains."""
    if run is None or not {"aggregate/none", "aggregate/heavy"} <= set(run.doc["summary"]["rows"]):
        for name in ENGINE_VALUES:
            w.v.absent(f"pipe_engine_{name}")
        return
    none, heavy = ["summary", "rows", "aggregate/none"], ["summary", "rows", "aggregate/heavy"]
    w.v.of(run, "pipe_engine_none_speedup", none + ["speedup"], "x")
    w.v.of(run, "pipe_engine_heavy_speedup", heavy + ["speedup"], "x")
    w.v.of(run, "pipe_engine_heavy_deep", heavy + ["speedup_deep"], "x")
    for field, name in (("speedup_seeds", "heavy_seeds_span"), ("speedup_deep_seeds", "heavy_deep_seeds_span")):
        w.span(f"pipe_engine_{name}", run, [heavy + [field, "min"], heavy + [field, "max"]], "x")
    w.v.of(run, "pipe_engine_seeds", heavy + ["speedup_deep_seeds", "n"], "int")
    w.v.of(run, "pipe_engine_heavy_extra", heavy + ["extra_ms"], "ms")
    w.v.of(run, "pipe_engine_heavy_prob", heavy + ["probability"], "pct")
    w.span("pipe_engine_lat_ratio_span", run, [["summary", "rows", k, "latency_ratio_p50"]
                                               for k in run.doc["summary"]["rows"]], "num2")
    w.v.of(run, "pipe_engine_judged", ["points"], "int", "judged")
    w.v.of(run, "pipe_engine_backlogged", ["points"], "int", "backlogged")


def _sim(w: Writeup, run: Run | None) -> None:
    if run is None or "map/heavy" not in (lookup(run.doc, ["summary", "rows"]) or {}):
        for name in SIM_VALUES:
            w.v.absent(f"pipe_sim_{name}")
        return
    rows = run.doc["summary"]["rows"]
    w.span("pipe_sim_speedup_span", run, [["summary", "rows", k, "speedup"] for k in rows], "x")
    w.v.add("pipe_sim_deep_max", [(run.file, ["summary", "rows", k, "speedup_deep"]) for k in rows], "x", "max")
    w.v.of(run, "pipe_sim_none_speedup", ["summary", "rows", "map/none", "speedup"], "x")
    w.v.of(run, "pipe_sim_heavy_lat_ratio", ["summary", "rows", "map/heavy", "latency_ratio_p50"], "num2")
    w.v.of(run, "pipe_sim_heavy_prob", ["summary", "rows", "map/heavy", "probability"], "pct")
    w.v.of(run, "pipe_sim_heavy_slow", ["summary", "rows", "map/heavy", "slowdown"], "int")
