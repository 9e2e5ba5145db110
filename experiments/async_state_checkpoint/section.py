"""The paper's asynchronous state checkpointing section: mean and peak batch duration across state sizes, the
cadence, the commit's share, the price in re-run batches, and the verdicts on the post's four claims."""

from __future__ import annotations

from experiments.async_state_checkpoint.definition import MODES
from experiments.stats import keep_up_text
from experiments.writeup import BACKEND_NAME, BACKENDS, Run, Table, Writeup, esc, fmt, key, lookup

EXPERIMENT = "async-state-checkpoint"
FIGURES = (("async_state_checkpoint", "100%"),)
CLAIM_IDS = ("asc_mean_cut", "asc_peak", "asc_millions", "asc_rerun")
SIM_VALUES = ("mean_cut_span", "peak_cut_max", "p50_cut_max", "interval_change_small", "interval_change_large",
              "sync_rerun", "async_rerun", "async_rerun_mean")
ENGINE_VALUES = ("commit_task", "commit_share", "interval_change", "mean_cut", "async_rerun", "async_rerun_mean",
                 "sync_rerun")


def write(w: Writeup) -> None:
    rows = [["published", "", "", w.v.claim("pub_asc_mean_cut", "asc_mean_cut"),
             w.v.claim("pub_asc_peak", "asc_peak") + " than the mean", w.v.claim("pub_asc_rerun", "asc_rerun"), ""]]
    for backend in BACKENDS:
        run = w.run(EXPERIMENT, backend)
        if run is None:
            rows.append([f"{esc(BACKEND_NAME[backend])}: " + w.absent_cell(EXPERIMENT, backend)])
            continue
        for size in sorted(run.doc["summary"]["sizes"], key=float):
            base = ["summary", "sizes", size]
            n = f"asc_{key(backend)}_{size}"
            entry = run.doc["summary"]["sizes"][size]
            keep = "; ".join(f"{m} {keep_up_text(entry[m].get('keep_up'))}" for m in MODES if m in entry)
            rows.append([esc(f"{run.tag}, {fmt('keys', float(size))} keys"),
                         w.v.of(run, f"{n}_sync", base + ["sync", "batch_mean", "median"], "ms"),
                         w.v.of(run, f"{n}_async", base + ["async", "batch_mean", "median"], "ms"),
                         w.v.of(run, f"{n}_mean_cut", base + ["mean_cut"], "cut"),
                         w.v.of(run, f"{n}_peak_cut", base + ["peak_cut"], "cut"),
                         w.v.of(run, f"{n}_rerun", ["summary", "price", "async", "rerun_batches_max", "max"], "int"),
                         esc(keep)])
    w.table("async_state", Table(["Run, state size", "Mean batch, sync", "Mean batch, async", "Mean cut", "Peak cut",
                                  "Worst re-run (batches)", "Keep-up"], rows, aligns=["left"] + ["right"] * 5 + ["left"]),
            label="tab-asc", runs=[w.run(EXPERIMENT, b) for b in BACKENDS])
    w.text("asc_availability", w.availability(EXPERIMENT))
    w.add_figures(EXPERIMENT, FIGURES)
    sim, spark = w.run(EXPERIMENT, "sim"), w.run(EXPERIMENT, "spark")
    w.verdicts("asc_verdicts_sim", sim, CLAIM_IDS)
    w.verdicts("asc_verdicts_spark", spark, CLAIM_IDS)
    _sim(w, sim)
    _engine(w, spark)


def _sim(w: Writeup, run: Run | None) -> None:
    if run is None:
        for name in SIM_VALUES:
            w.v.absent(f"asc_sim_{name}")
        w.text("asc_price", "The price has not been measured in this build (no simulator run).")
        return
    sizes = sorted(run.doc["summary"]["sizes"], key=float)
    w.span("asc_sim_mean_cut_span", run, [["summary", "sizes", k, "mean_cut"] for k in sizes], "pct")
    w.v.add("asc_sim_peak_cut_max", [(run.file, ["summary", "sizes", k, "peak_cut"]) for k in sizes], "pct", "max")
    w.v.add("asc_sim_p50_cut_max", [(run.file, ["summary", "sizes", k, "p50_cut"]) for k in sizes], "pct", "max")
    # the cadence: a negative cut is a longer interval between batches
    w.v.of(run, "asc_sim_interval_change_small", ["summary", "sizes", sizes[0], "interval_cut"], "cut")
    w.v.of(run, "asc_sim_interval_change_large", ["summary", "sizes", sizes[-1], "interval_cut"], "cut")
    _price(w, run, "asc_sim", "asc_price", "the simulator's")


def _price(w: Writeup, run: Run, prefix: str, text: str, whose: str) -> None:
    """What an asynchronous and a synchronous restart re-ran, as a sentence that follows the numbers."""
    price = ["summary", "price"]
    worst = w.v.of(run, f"{prefix}_async_rerun", price + ["async", "rerun_batches_max", "max"], "int")
    mean = w.v.of(run, f"{prefix}_async_rerun_mean", price + ["async", "rerun_batches_mean", "median"], "num1")
    sync = w.v.of(run, f"{prefix}_sync_rerun", price + ["sync", "rerun_batches_max", "max"], "int")
    worst_async = lookup(run.doc, price + ["async", "rerun_batches_max", "max"])
    worst_sync = lookup(run.doc, price + ["sync", "rerun_batches_max", "max"])
    if not worst_async:
        w.text(text, f"On {whose} crashes no restart re-ran a batch.")
    elif worst_sync is not None and worst_async > worst_sync:
        w.text(text, f"On {whose} crashes an asynchronous restart re-ran up to {worst} batches ({mean} on average) "
                     f"against {sync} for a synchronous one.")
    else:
        w.text(text, f"On {whose} crashes an asynchronous restart re-ran at most {worst}, as many as a synchronous "
                     f"one ({sync}); the explorer, which cuts every such interleaving, finds every restart within "
                     "the bound.")


def _engine(w: Writeup, run: Run | None) -> None:
    """The engine's state commit at its largest state: a task's time, its share of a synchronous batch, the
    cuts; and its crashes."""
    if run is None or not run.doc["summary"]["sizes"]:
        for name in ENGINE_VALUES:
            w.v.absent(f"asc_spark_{name}")
        w.text("asc_engine_price", "")
        return
    largest = ["summary", "sizes", max(run.doc["summary"]["sizes"], key=float)]
    w.v.of(run, "asc_spark_commit_task", largest + ["sync", "commit_per_task", "median"], "ms")
    w.v.of(run, "asc_spark_commit_share", largest + ["commit_share"], "pct")
    w.v.of(run, "asc_spark_interval_change", largest + ["interval_cut"], "cut")
    w.v.of(run, "asc_spark_mean_cut", largest + ["mean_cut"], "pct")
    _price(w, run, "asc_spark", "asc_engine_price", "the engine's")
