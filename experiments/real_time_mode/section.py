"""The paper's real-time-mode section: Spark's real-time mode against micro-batch with every Lightspeed feature,
its batch-duration trade-off, and Databricks' published figures as anchors, on the simulator."""

from __future__ import annotations

from experiments.real_time_mode.definition import CLAIMS as ANCHORS
from experiments.real_time_mode.definition import CONFIGS, VARIANT, WORKLOADS
from experiments.section_content import Row, Run, Table, Writeup, key

EXPERIMENT = "real-time-mode"
FIGURES = (("real_time_mode", "100%"),)


def write(w: Writeup) -> None:
    run = w.run(EXPERIMENT, "sim")
    published = {workload: [w.v.claim(f"rtm_{key(workload)}_published_{q}", ANCHORS[(workload, q)])
                            for q in ("p50", "p99")] for workload in WORKLOADS}
    rows: list[Row] = []
    if run is not None:
        for workload in run.doc["summary"]["latency"]:
            base = ["summary", "latency", workload]
            n = f"rtm_{key(workload)}"
            # three significant figures: the simulator's real-time floor is a few microseconds
            cells = [w.v.of(run, f"{n}_{key(config)}_{q}", base + [config, q, "median"], "ms_sig")
                     for config in CONFIGS for q in ("p50", "p99")]
            rows.append([workload] + cells + published.get(workload, ["-", "-"]))
    else:
        rows.append(["simulator: " + w.absent_cell(EXPERIMENT, "sim")])
    w.table("real_time_mode_latency", Table(["Query", "Real-time p50", "Real-time p99", "Micro-batch p50",
                                             "Micro-batch p99", "Databricks p50", "Databricks p99"], rows,
                                            aligns=["left"] + ["right"] * 6),
            label="tab-rtm", runs=[run],
            caption="End-to-end latency (medians over the seeds) in real-time mode and in micro-batch mode with "
                    "every Lightspeed feature, on the simulator, beside Databricks' published figures (anchors: "
                    "the simulator is not fitted to them).")
    trade: list[Row] = []
    if run is not None:
        for seconds in run.doc["summary"]["tradeoff"]:
            base = ["summary", "tradeoff", seconds]
            n = f"rtm_trade_{seconds}"
            trade.append([f"{seconds} s",
                          w.v.of(run, f"{n}_p99", base + ["latency_p99", "median"], "ms1"),
                          w.v.of(run, f"{n}_boundary_p99", base + ["boundary_p99", "median"], "ms"),
                          w.v.of(run, f"{n}_gap", base + ["gap_ms_mean", "median"], "ms"),
                          w.v.of(run, f"{n}_reprocessed", base + ["records_reprocessed", "median"], "int"),
                          w.v.of(run, f"{n}_recovery", base + ["recovery_ms", "median"], "ms"),
                          _keep_up(w, run, f"{n}_keep", "real-time", seconds)])
    else:
        trade.append(["simulator: " + w.absent_cell(EXPERIMENT, "sim")])
    for name, path, spec in (("rtm_rate", ["rate_rows_per_s"], "int"),
                             ("rtm_tradeoff_rate", ["tradeoff_rate_rows_per_s"], "int"),
                             ("rtm_min_batch", ["min_batch_s"], "s"), ("rtm_default_batch", ["default_batch_s"], "min")):
        w.v.of(run, name, ["summary"] + path, spec)
    w.table("real_time_mode_tradeoff", Table(["Batch", "p99, all", "p99, after a deadline", "Gap",
                                              "Re-processed", "Recovery", "Keep-up"], trade,
                                             aligns=["left"] + ["right"] * 5 + ["left"]),
            label="tab-rtm-tradeoff", runs=[run],
            caption="Real-time mode as the batch duration grows: tail latency overall and just after a deadline, "
                    "the boundary gap, a crash's re-processed records and recovery, and whether the runs kept up "
                    "(a backlogged run's latency measures its queue).")
    bounded: list[Row] = []
    if run is not None:
        for seconds in run.doc["summary"].get("bounded_replay", {}):
            base = ["summary", "bounded_replay", seconds]
            n = f"rtm_bounded_{seconds}"
            bounded.append([f"{seconds} s",
                            w.v.of(run, f"{n}_reprocessed", base + ["records_reprocessed", "median"], "int"),
                            w.v.of(run, f"{n}_p99", base + ["latency_p99", "median"], "ms1"),
                            w.v.of(run, f"{n}_entries", base + ["progress_points", "median"], "int"),
                            _keep_up(w, run, f"{n}_keep", "bounded-replay", seconds)])
        for workload in run.doc["summary"]["latency"]:
            w.v.of(run, f"rtm_{key(workload)}_bounded_p99", ["summary", "latency", workload, VARIANT, "p99",
                                                              "median"], "ms1")
    else:
        bounded.append(["simulator: " + w.absent_cell(EXPERIMENT, "sim")])
        for workload in WORKLOADS:
            w.v.absent(f"rtm_{key(workload)}_bounded_p99")
    w.table("real_time_mode_bounded", Table(["Batch", "Re-processed", "p99, all", "Progress entries", "Keep-up"],
                                            bounded, aligns=["left"] + ["right"] * 3 + ["left"]),
            label="tab-rtm-bounded", runs=[run],
            caption="The bounded-replay variant (beyond Spark) at each batch duration: records re-processed after "
                    "the same crash, tail latency, progress entries written, and whether the runs kept up.")
    w.v.of(run, "rtm_progress", ["summary", "progress_ms"], "ms")
    w.text("rtm_availability", w.availability(EXPERIMENT))
    w.add_figures(EXPERIMENT, FIGURES, ["Real-time mode on the simulator: latency against micro-batch mode, and the "
                                        "batch-duration trade-off."])
    w.verdicts("rtm_verdict_sim", run, tuple(ANCHORS.values()))


def _keep_up(w: Writeup, run: Run, name: str, config: str, seconds: str) -> str:
    """Whether the points of one row kept up with their input (``reference.protocol.timing``'s rule, each point's
    ``kept_up``): "kept up", or how many of them fell behind."""
    points = [i for i, r in enumerate(run.doc["points"]) if r["point"]["config"] == config
              and str(r["point"]["params"].get("batch_s")) == seconds]
    behind = w.v.add(f"{name}_behind", [(run.file, ["points", i]) for i in points], "int", "backlogged points")
    judged = w.v.add(f"{name}_judged", [(run.file, ["points", i]) for i in points], "int", "judged points")
    return "kept up" if behind == "0" and judged != "0" else "not judged" if judged == "0" else \
        f"{behind} of {judged} points backlogged"
