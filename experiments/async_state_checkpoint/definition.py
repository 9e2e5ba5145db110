"""async-state-checkpoint: synchronous against asynchronous state checkpointing, across state sizes.

With asynchronous state checkpointing, batch b+1 starts before batch b's state
is durable (at most one batch pending); ``commits/b`` is written once it is.
The gain is the state commit taken off the critical path; the price is that a
restart may re-run two batches instead of one.

Two measurements:

- batches: a running count (``aggregate``) over a rate source with
  ``keys`` distinct keys, on the published cluster profile (volume mode);
  the batch duration is the time from planning a batch to its output being
  committed, mean and peak (the longest batch), plus end-to-end latency;
- crash: the same query on a backlog of fixed-size batches (data mode, real
  state files), crashed at seeded random times; how many batches and rows
  the restart re-ran and how long until they were done again. Each
  data-mode key stands for a block of keys of the largest state size
  (``scenario_builders.blocked_profile``), so a state commit costs what it costs there.

On the Spark engine (``--backend spark``) the batches runs write their
checkpoint to the modelled object store (``storage_default``, the post's
"cloud blob storage"), unless ``--storage-profile`` names another for every
point; the crash runs keep local disk, where their crash times are placed.

Claim under test: batches up to 25% shorter on average with millions of
keys, a larger gain at the peak; the price is up to two batches re-processed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from experiments.outcome_metrics import (batch_metrics, commit_time_ms, check_outcome_ok, latency_metrics,
                                         plan_starts_before, recovery_metrics)
from experiments.scenario_builders import blocked_profile, crash_at, generated_scenario, rate_scenario, with_faults
from experiments.conditions import Condition
from experiments.experiment import BackendRun, Check, Experiment, Point, RunContext
from experiments.stopping import Stopping
from experiments.figures import WIDE, backend_label, figure_context, grouped_bars, save_figure, seed_span
from experiments.measure import run_point_scenario, simulate_point
from experiments.profiles import sim_profile
from experiments.sanity import no_worse
from experiments.stats import (config_median, fmt_ms, fmt_pct, group, keep_up, keep_up_text, latency_over_seeds,
                               mean_or_none, over_seeds, reduction)
from experiments.claims import CLAIMS, describe
from experiments.verdicts import judge, report_lines

MODES = ("sync", "async")
VOLUME_PARTITIONS = 64          # state partitions of the batches runs (the published example query's count)
SIM_KEYS = {"quick": (100_000, 1_000_000), "full": (100_000, 1_000_000, 10_000_000, 50_000_000)}
SPARK_KEYS = {"quick": (10_000,), "full": (10_000, 100_000)}
CRASHES = {"quick": 2, "full": 8}
REPLAY_BOUND = {"sync": 1, "async": 2}
# the engine's batches runs keep their checkpoint on the modelled object store: the published commits went to
# cloud storage ("e.g., cloud blob storage"), and on local disk a task's commit takes 0.3 ms (measured), leaving
# nothing to take off the critical path. The crash runs stay on local disk, where their crash times are placed.
CLAIM_STORAGE = "object_store"
MILLIONS = 1_000_000             # "large state sizes with millions of entries"


def _engine(mode: str) -> dict[str, Any]:
    return {"state_checkpoint": mode, "log_purge": {"mode": "async", "min_batches_to_retain": 100},
            "state_store": {"provider": "changelog", "min_deltas_for_snapshot": 10,
                            "maintenance_interval_ms": 60_000}}


class AsyncStateCheckpoint(Experiment):
    name = "async-state-checkpoint"
    version = "2"
    title = "async state checkpointing: mean and peak batch duration across state sizes, and its price"
    claim = describe("async-state-checkpoint")
    unsupported = {"spark-native": "asynchronous state checkpointing is a Databricks Runtime feature, not part of "
                                   "open-source Spark"}
    runs = {"sim": BackendRun(0.5, 20.0), "spark": BackendRun(4.0, 30.0)}
    # adaptive stopping (experiments.stopping): the batch-duration points; a crash point measures one recovery
    stopping = Stopping(tasks=("batches",))
    storage_default = {"spark": CLAIM_STORAGE}

    def conditions(self, ctx: RunContext) -> list[Condition]:
        """The post's conditions: state checkpoints on cloud storage, and streams with millions of state
        entries (its workloads are not described further)."""
        sim = ctx.backend == "sim"
        storage = self.storage(ctx)
        largest = max((SIM_KEYS if sim else SPARK_KEYS)[ctx.mode])
        return [
            Condition("checkpoint storage", "cloud storage ('e.g., cloud blob storage')",
                      "the cluster profile's object store" if sim and storage is None else storage or "local disk",
                      honoured=(sim and storage is None) or storage == CLAIM_STORAGE,
                      note="the crash runs keep local disk, where their crash times are placed"),
            Condition("state size", "millions of entries", f"up to {largest:,} keys", honoured=largest >= MILLIONS,
                      note="" if largest >= MILLIONS else "a 2-core engine holds a small state at a rate it "
                                                          "sustains"),
        ]

    def points(self, ctx: RunContext) -> list[Point]:
        sim = ctx.backend == "sim"
        keys_list = (SIM_KEYS if sim else SPARK_KEYS)[ctx.mode]
        profile = sim_profile("lightspeed_cluster") if sim else None
        out = []
        for keys in keys_list:
            for mode in MODES:
                for seed in self.seed_list(ctx):
                    scenario = rate_scenario(
                        f"async-state-{mode}-{keys}", seed,
                        rate=(500_000 if ctx.quick else 1_000_000) if sim else 2_000,
                        duration_s=(20 if ctx.quick else 120) if sim else (20 if ctx.quick else 60),
                        operator={"kind": "aggregate", "agg": "count"}, keys=keys, partitions=8 if sim else 2,
                        state_partitions=VOLUME_PARTITIONS if sim else 2, sink="exactly_once", engine=_engine(mode))
                    out.append(Point(self.name, "batches", mode, {"keys": keys}, seed, ctx.backend, scenario,
                                     profile, "volume"))
        crash_keys = (2_000 if ctx.quick else 20_000) if sim else 1_000
        crash_parts = 8 if sim else 2
        # the crash runs stand for the largest state: each data-mode key is a block of that state's keys
        block = (max(keys_list) / VOLUME_PARTITIONS) / (crash_keys / crash_parts) if sim else 1.0
        crash_profile = blocked_profile(profile, block) if profile else None
        for mode in MODES:
            for seed in self.seed_list(ctx):
                backlog = generated_scenario(
                    f"async-state-crash-{mode}", seed, operator={"kind": "aggregate", "agg": "count"},
                    records_per_partition=250, batches=12 if ctx.quick else 24, keys=crash_keys, partitions=4,
                    state_partitions=crash_parts, engine=_engine(mode))
                # storage_profile None: local disk, whatever the batches runs use by default
                out.append(Point(self.name, "crash", mode, {"keys": crash_keys}, seed, ctx.backend, backlog,
                                 crash_profile, "data", {"crashes": CRASHES[ctx.mode], "key_block": block,
                                                         "storage_profile": None}))
        return out

    def measure(self, point: Point) -> dict[str, Any]:
        if point.task == "batches":
            outcome = run_point_scenario(point).outcome
            check_outcome_ok(outcome)
            metrics = batch_metrics(outcome.progress)
            metrics.update(latency_metrics(outcome))
            last = outcome.progress[-1].state_operators if outcome.progress else ()
            metrics["state_rows"] = last[0].num_rows_total if last else None
            metrics["commit_ms_mean"] = commit = commit_time_ms(outcome.progress)
            tasks = int(point.scenario["query"].get("state_partitions", 1))
            metrics["commit_per_task_ms"] = None if commit is None else commit / tasks
            return metrics
        return _crash_metrics(point)

    def summarize(self, records: list[dict[str, Any]], ctx: RunContext) -> dict[str, Any]:
        sizes: dict[str, Any] = {}
        for (keys, mode), recs in group(records, "params.keys", "config", task="batches").items():
            sizes.setdefault(str(keys), {})[mode] = {
                "batch_mean": over_seeds(recs, "batch_ms_mean"), "batch_peak": over_seeds(recs, "batch_ms_max"),
                "batch_p99": over_seeds(recs, "batch_ms_p99"), "interval_mean": over_seeds(recs, "interval_ms_mean"),
                "p50": latency_over_seeds(recs, "latency_p50"), "p99": latency_over_seeds(recs, "latency_p99"),
                "keep_up": keep_up(recs),
                "state_rows": over_seeds(recs, "state_rows"), "commit_ms": over_seeds(recs, "commit_ms_mean"),
                "commit_per_task": over_seeds(recs, "commit_per_task_ms")}
        for entry in sizes.values():
            # interval_cut: the start-to-start interval, the batch cadence under the default trigger. The batch
            # duration (planning to the sink commit) leaves out what an asynchronous batch defers until its state is
            # durable (its commit log write) and what the next batch waits for meanwhile; the cadence counts both
            for name, metric in (("mean_cut", "batch_mean"), ("peak_cut", "batch_peak"), ("p50_cut", "p50"),
                                 ("interval_cut", "interval_mean")):
                entry[name] = reduction(config_median(entry, "sync", metric), config_median(entry, "async", metric))
            # commitTimeMs sums over the tasks, which run in parallel: a task's own commit is the part of
            # a sync batch that async state checkpointing takes off its critical path
            commit, batch = config_median(entry, "sync", "commit_per_task"), config_median(entry, "sync", "batch_mean")
            entry["commit_share"] = commit / batch if commit is not None and batch else None
        price: dict[str, Any] = {}
        for (mode,), recs in group(records, "config", task="crash").items():
            price[mode] = {"rerun_batches_mean": over_seeds(recs, "rerun_batches_mean"),
                           "rerun_batches_max": over_seeds(recs, "rerun_batches_max"),
                           "rerun_rows_mean": over_seeds(recs, "rerun_rows_mean"),
                           "rerun_ms_mean": over_seeds(recs, "rerun_ms_mean"),
                           "lost_ms_mean": over_seeds(recs, "lost_ms_mean"),
                           "recovery_ms_mean": over_seeds(recs, "recovery_ms_mean")}
        return {"sizes": sizes, "price": price, "verdicts": self.verdicts(sizes, price, ctx)}

    def verdicts(self, sizes: dict[str, Any], price: dict[str, Any], ctx: RunContext) -> list[dict[str, Any]]:
        """The post's claims: the mean cut at the largest state ("up to 25%"), more at the peak, more with more
        state ("with millions of entries"), and at most two batches re-run (the crash runs)."""
        basis = self.basis(ctx)
        largest = max(sizes, key=float, default=None)
        smallest = min(sizes, key=float, default=None)
        at = f"{int(float(largest or 0)):,} keys"
        cut = sizes[largest]["mean_cut"] if largest is not None else None
        peak = sizes[largest]["peak_cut"] if largest is not None else None
        out = [judge("asc_mean_cut", None if cut is None else cut * 100, scope=at, basis=basis),
               judge("asc_peak", None if peak is None or cut is None else (peak - cut) * 100, scope=at, basis=basis)]
        if smallest is not None and smallest != largest:
            small = sizes[smallest]["mean_cut"]
            out.append(judge("asc_millions", None if small is None or cut is None else (cut - small) * 100,
                             scope=f"{at} over {int(float(smallest)):,}", basis=basis))
        worst = ((price.get("async") or {}).get("rerun_batches_max") or {}).get("max")
        out.append(judge("asc_rerun", worst, scope="async, worst restart", basis=basis))
        return [v.to_dict() for v in out]

    def checks(self, summary: dict[str, Any], ctx: RunContext) -> list[Check]:
        out = []
        for keys, entry in summary["sizes"].items():
            out.append(no_worse(f"async mean batch duration <= sync ({int(float(keys)):,} keys)",
                                entry.get("async", {}).get("batch_mean", {}),
                                entry.get("sync", {}).get("batch_mean", {})))
        for mode, bound in REPLAY_BOUND.items():
            worst = summary["price"].get(mode, {}).get("rerun_batches_max", {}).get("max")
            name = f"{mode} restart re-runs at most {bound} batch{'es' if bound > 1 else ''}"
            out.append(Check(name, None, "not measured") if worst is None else
                       Check(name, worst <= bound, f"worst {worst:.0f}"))
        return out

    def report(self, summary: dict[str, Any], ctx: RunContext) -> list[str]:
        lines = [f"{'keys':>12}  {'mean sync':>10} {'mean async':>10} {'cut':>6}  {'peak sync':>10} "
                 f"{'peak async':>10} {'cut':>6}  {'p50 cut':>7}  keep-up"]
        for keys, e in summary["sizes"].items():
            lines.append(f"{int(float(keys)):>12,}  {fmt_ms(config_median(e, 'sync', 'batch_mean')):>10} "
                         f"{fmt_ms(config_median(e, 'async', 'batch_mean')):>10} {fmt_pct(_neg(e['mean_cut'])):>6}  "
                         f"{fmt_ms(config_median(e, 'sync', 'batch_peak')):>10} "
                         f"{fmt_ms(config_median(e, 'async', 'batch_peak')):>10} "
                         f"{fmt_pct(_neg(e['peak_cut'])):>6}  {fmt_pct(_neg(e['p50_cut'])):>7}  "
                         + "; ".join(f"{mode} {keep_up_text(e.get(mode, {}).get('keep_up'))}" for mode in MODES))
        lines.append(f"published: mean {CLAIMS['asc_mean_cut'].published} shorter, larger at the peak")
        for keys, e in summary["sizes"].items():
            if e.get("interval_cut") is not None:
                lines.append(f"{int(float(keys)):>12,}  interval between batches "
                             f"{fmt_ms(config_median(e, 'sync', 'interval_mean'))} sync, "
                             f"{fmt_ms(config_median(e, 'async', 'interval_mean'))} async "
                             f"({fmt_pct(_neg(e['interval_cut']))}): the cadence under the default trigger")
        lines.append("commitTimeMs (sync, mean per batch; Spark sums it over the tasks) against the mean cut, "
                     "the post's way of picking the queries that benefit:")
        for keys, e in summary["sizes"].items():
            share = e.get("commit_share")
            lines.append(f"{int(float(keys)):>12,}  commitTimeMs {fmt_ms(config_median(e, 'sync', 'commit_ms')):>9}, "
                         f"per task {fmt_ms(config_median(e, 'sync', 'commit_per_task')):>7}"
                         f" ({'-' if share is None else f'{share:.0%}'} of a sync batch)"
                         f"  mean cut {fmt_pct(_neg(e['mean_cut'])):>6}")
        lines += report_lines(summary.get("verdicts", []))
        for mode in MODES:
            p = summary["price"].get(mode)
            if p and p["rerun_batches_mean"]["median"] is None:
                lines.append(f"price ({mode}): no crash landed inside a run, so nothing was re-run to measure")
            elif p:
                lines.append(f"price ({mode}): re-ran {p['rerun_batches_mean']['median']:.1f} batches "
                             f"(worst {p['rerun_batches_max']['max']:.0f}), "
                             f"{p['rerun_rows_mean']['median']:,.0f} rows, work lost "
                             f"{fmt_ms(p['lost_ms_mean']['median'])}, re-run time "
                             f"{fmt_ms(p['rerun_ms_mean']['median'])}, "
                             f"recovery {fmt_ms(p['recovery_ms_mean']['median'])}")
        return lines

    def figures(self, summary: dict[str, Any], ctx: RunContext, out_dir: Path) -> list[Path]:
        import matplotlib.pyplot as plt
        sizes = list(summary["sizes"])
        labels = [_keys_label(k) for k in sizes]
        with figure_context():
            fig, axes = plt.subplots(1, 3, figsize=(WIDE, 3.8), gridspec_kw={"width_ratios": [2, 2, 1.3]},
                                     layout="constrained")
            for ax, metric, title in ((axes[0], "batch_mean", "Mean batch duration"),
                                      (axes[1], "batch_peak", "Peak batch duration")):
                grouped_bars(ax, labels, {mode: [config_median(summary["sizes"][k], mode, metric) for k in sizes]
                                          for mode in MODES}, unit="ms",
                             spread={mode: [seed_span(summary["sizes"][k].get(mode, {}).get(metric)) for k in sizes]
                                     for mode in MODES})
                ax.set_xlabel("state size (keys)")
                ax.set_title(title)
            price = summary["price"]
            modes = [m for m in MODES if m in price]
            grouped_bars(axes[2], modes, {
                "mean": [price[m]["rerun_batches_mean"]["median"] for m in modes],
                "worst": [price[m]["rerun_batches_max"]["max"] for m in modes]},
                unit="batches re-run after a crash", value_format="{:.1f}")
            axes[2].set_title("The price: re-processing")
            seeds = len(self.seed_list(ctx))
            fig.suptitle(f"Asynchronous state checkpointing ({backend_label(ctx.backend)}, {ctx.mode}, {seeds} seed"
                         f"{'s' * (seeds != 1)}{'; whiskers: min-max' if seeds > 1 else ''});\npublished: mean "
                         f"{CLAIMS['asc_mean_cut'].published} shorter, more at the peak")
            return save_figure(fig, out_dir, "async_state_checkpoint")


def _crash_metrics(point: Point) -> dict[str, Any]:
    """Crash the run at seeded random times within its failure-free span; average what each crash cost."""
    clean = run_point_scenario(point).outcome
    check_outcome_ok(clean)
    # The run's span on its own clock, from its first batch: a timed engine stamps progress with epoch
    # milliseconds, the simulator from 0, and a crash's time_ms counts from the run's start on both.
    stamped = [(float(p.timestamp_ms), float(p.duration_ms.get("triggerExecution", 0) or 0))
               for p in clean.progress if p.timestamp_ms is not None]
    first = min((start for start, _ in stamped), default=0.0)
    span = max((start - first + took for start, took in stamped), default=0.0)
    if span <= 0:
        raise RuntimeError("the failure-free run reported no batch times; cannot place crashes")
    rng = np.random.default_rng(point.seed)
    results = []
    for i, fraction in enumerate(rng.uniform(0.3, 0.8, size=int(point.extra.get("crashes", 1)))):
        crash_ms = float(int(span * fraction))
        scenario = with_faults(point.scenario, [crash_at(crash_ms)], f"crash{i}")
        if point.backend == "sim":
            sim = simulate_point(point, scenario, trace=True)
            outcome, starts = sim.outcome(), plan_starts_before(sim.trace, crash_ms)
        else:
            outcome, starts = run_point_scenario(point, scenario).outcome, None
        check_outcome_ok(outcome)
        origin = min((float(p.timestamp_ms) for p in outcome.progress if p.timestamp_ms is not None), default=0.0)
        results.append(recovery_metrics(outcome, crash_ms, starts, origin))
    crashed = [r for r in results if r["crashed"]]
    return {"span_ms": span, "crashes": len(results), "crashed": len(crashed),
            "rerun_batches_mean": mean_or_none([r["rerun_batches"] for r in crashed]),
            "rerun_batches_max": max((r["rerun_batches"] for r in crashed), default=None),
            "rerun_rows_mean": mean_or_none([r["rerun_rows"] for r in crashed]),
            "lost_ms_mean": mean_or_none([r["lost_ms"] for r in crashed]),
            "rerun_ms_mean": mean_or_none([r["rerun_ms"] for r in crashed if r["rerun_ms"] is not None]),
            "recovery_ms_mean": mean_or_none([r["recovery_ms"] for r in crashed if r["recovery_ms"] is not None])}


def _neg(value: float | None) -> float | None:
    return -value if value is not None else None


def _keys_label(keys: str) -> str:
    n = int(float(keys))
    return f"{n // 1_000_000}M" if n >= 1_000_000 else f"{n // 1000}K"


EXPERIMENT = AsyncStateCheckpoint()
