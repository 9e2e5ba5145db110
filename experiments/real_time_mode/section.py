"""The paper's real-time-mode section: Spark's real-time mode against micro-batch with every Lightspeed feature,
its batch-duration trade-off, and Databricks' published figures as anchors, on the simulator."""

from __future__ import annotations

from experiments.real_time_mode.definition import CLAIMS as ANCHORS
from experiments.real_time_mode.definition import CONFIGS, VARIANT, WORKLOADS
from experiments.writeup import Table, Writeup, esc, key

EXPERIMENT = "real-time-mode"
FIGURES = (("real_time_mode", "100%"),)


def write(w: Writeup) -> None:
    run = w.run(EXPERIMENT, "sim")
    published = {workload: [w.v.claim(f"rtm_{key(workload)}_published_{q}", ANCHORS[(workload, q)])
                            for q in ("p50", "p99")] for workload in WORKLOADS}
    rows = []
    if run is not None:
        for workload in run.doc["summary"]["latency"]:
            base = ["summary", "latency", workload]
            n = f"rtm_{key(workload)}"
            cells = [w.v.of(run, f"{n}_{key(config)}_{q}", base + [config, q, "median"], "ms1")
                     for config in CONFIGS for q in ("p50", "p99")]
            rows.append([esc(workload)] + cells + published.get(workload, ["-", "-"]))
    else:
        rows.append(["simulator: " + w.absent_cell(EXPERIMENT, "sim")])
    w.table("real_time_mode_latency", Table(["Query", "Real-time p50", "Real-time p99", "Micro-batch p50",
                                             "Micro-batch p99", "Databricks p50", "Databricks p99"], rows,
                                            aligns=["left"] + ["right"] * 6),
            label="tab-rtm", runs=[run])
    trade = []
    if run is not None:
        for seconds in run.doc["summary"]["tradeoff"]:
            base = ["summary", "tradeoff", seconds]
            n = f"rtm_trade_{seconds}"
            trade.append([esc(f"{seconds} s"),
                          w.v.of(run, f"{n}_p99", base + ["latency_p99", "median"], "ms1"),
                          w.v.of(run, f"{n}_boundary_p99", base + ["boundary_p99", "median"], "ms"),
                          w.v.of(run, f"{n}_gap", base + ["gap_ms_mean", "median"], "ms"),
                          w.v.of(run, f"{n}_reprocessed", base + ["records_reprocessed", "median"], "int"),
                          w.v.of(run, f"{n}_recovery", base + ["recovery_ms", "median"], "ms")])
    else:
        trade.append(["simulator: " + w.absent_cell(EXPERIMENT, "sim")])
    for name, path, spec in (("rtm_rate", ["rate_rows_per_s"], "int"),
                             ("rtm_tradeoff_rate", ["tradeoff_rate_rows_per_s"], "int"),
                             ("rtm_min_batch", ["min_batch_s"], "s"), ("rtm_default_batch", ["default_batch_s"], "min")):
        w.v.of(run, name, ["summary"] + path, spec)
    w.table("real_time_mode_tradeoff", Table(["Batch", "p99, all", "p99, after a deadline", "Gap",
                                              "Re-processed", "Recovery"], trade,
                                             aligns=["left"] + ["right"] * 5),
            label="tab-rtm-tradeoff", runs=[run])
    bounded = []
    if run is not None:
        for seconds in run.doc["summary"].get("bounded_replay", {}):
            base = ["summary", "bounded_replay", seconds]
            n = f"rtm_bounded_{seconds}"
            bounded.append([esc(f"{seconds} s"),
                            w.v.of(run, f"{n}_reprocessed", base + ["records_reprocessed", "median"], "int"),
                            w.v.of(run, f"{n}_p99", base + ["latency_p99", "median"], "ms1"),
                            w.v.of(run, f"{n}_entries", base + ["progress_points", "median"], "int")])
        for workload in run.doc["summary"]["latency"]:
            w.v.of(run, f"rtm_{key(workload)}_bounded_p99", ["summary", "latency", workload, VARIANT, "p99",
                                                              "median"], "ms1")
    else:
        bounded.append(["simulator: " + w.absent_cell(EXPERIMENT, "sim")])
        for workload in WORKLOADS:
            w.v.absent(f"rtm_{key(workload)}_bounded_p99")
    w.table("real_time_mode_bounded", Table(["Batch", "Re-processed", "p99, all", "Progress entries"], bounded,
                                            aligns=["left"] + ["right"] * 3),
            label="tab-rtm-bounded", runs=[run])
    w.v.of(run, "rtm_progress", ["summary", "progress_ms"], "ms")
    w.text("rtm_availability", w.availability(EXPERIMENT))
    w.add_figures(EXPERIMENT, FIGURES)
    w.verdicts("rtm_verdict_sim", run, tuple(ANCHORS.values()))
