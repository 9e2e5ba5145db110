"""parallel-store-commit: a stream-stream join's two state stores committed in turn or in parallel.

A join keeps two state stores per partition (one per side). Spark OSS
commits them one after the other inside the task (the join's state manager
commits its stores in turn), so a partition's commit takes the sum of the
two; Lightspeed commits them in parallel, so it takes the slower one
(``engine.parallel_store_commit``). Both modes run side by side in one run,
on the same join workload:

- sim: an inner join of two rate sources (volume mode) at a few input rates
  on the published cluster profile (checkpoint on an object store, where a
  store's commit is dominated by its file upload). The commit time is a
  partition's ``changelog_write`` plus ``state_commit`` from the trace, per
  batch and partition;
- spark: the same join on generated input, on the engine, with the
  checkpoint on local disk and on an object store (``--storage-profile``
  runs the one named); the commit time is the mean wall time of a task's
  state commit (``details.spark.task_step_ms_mean``: Spark's
  ``commitTimeMs`` is each store's own time, the same in both modes).

Reported per input: mean commit time and mean batch duration in each mode, and
the ratio parallel / sequential. The post gives no figure, only a direction
("thereby improving latency"): the verdict (``experiments.claims``,
``psc_latency``) asks the mean batch to be shorter by more than the noise the
claim states.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from experiments.outcome_metrics import batch_metrics, check_outcome_ok, latency_metrics, step_durations
from experiments.scenario_builders import generated_scenario
from experiments.claims import describe
from experiments.verdicts import judge, report_lines
from experiments.conditions import Condition
from experiments.experiment import BackendRun, Check, Experiment, Point, RunContext
from experiments.stopping import Stopping
from experiments.figures import WIDE, backend_label, figure_context, grouped_bars, save_figure, seed_span
from experiments.measure import run_point_scenario, simulate_point
from experiments.profiles import sim_profile
from experiments.sanity import no_worse
from experiments.stats import config_median, fmt_ms, group, keep_up, keep_up_text, over_seeds

MODES = ("sequential", "parallel")
JOIN: dict[str, Any] = {"kind": "join", "time_bound_ms": 1000, "watermark_delay_ms": 1000}
SIM_RATES = {"quick": (10_000, 100_000), "full": (10_000, 100_000, 500_000)}
SIM_DURATION_S = {"quick": 20, "full": 60}
SIM_STATE_PARTITIONS = 16
SPARK_BATCHES = {"quick": 8, "full": 20}
SPARK_STORAGE = ("local_disk", "object_store")
COMMIT_STEPS = ("changelog_write", "state_commit")


def _engine(mode: str) -> dict[str, Any]:
    return {"parallel_store_commit": mode == "parallel", "log_purge": {"mode": "async"},
            "state_store": {"provider": "changelog", "min_deltas_for_snapshot": 10,
                            "maintenance_interval_ms": 60_000}}


def join_rate_scenario(mode: str, seed: int, rate: int, duration_s: int) -> dict[str, Any]:
    """Two rate sources of ``rate`` rows/s each, joined within a second."""
    src = {"kind": "rate", "rows_per_second": rate, "duration_s": duration_s, "partitions": 8, "keys": 100_000}
    return {"name": f"join-commit-{mode}-{rate}", "seed": seed, "sources": {"left": src, "right": dict(src)},
            "query": {"operator": JOIN, "state_partitions": SIM_STATE_PARTITIONS},
            "sink": {"mode": "at_least_once"}, "engine": _engine(mode), "faults": []}


def join_generated_scenario(mode: str, seed: int, batches: int) -> dict[str, Any]:
    """The join on fixed batches of generated input (both sides), for the engine."""
    d = generated_scenario(f"join-commit-{mode}", seed, operator=JOIN, records_per_partition=200, batches=batches,
                           keys=200, partitions=2, state_partitions=2, step_ms=5, engine=_engine(mode))
    src = d.pop("source")
    d["sources"] = {"left": src, "right": dict(src)}
    return d


class ParallelStoreCommit(Experiment):
    name = "parallel-store-commit"
    version = "2"      # 2: the sim's points record whether they kept up
    title = "a join's two state stores committed in turn (Spark OSS) or in parallel (Lightspeed)"
    claim = describe("parallel-store-commit")
    unsupported = {"spark-native": "open-source Spark commits a join's stores in turn; the adapter refuses the option"}
    runs = {"sim": BackendRun(0.5, 1.0), "spark": BackendRun(4.0, 8.0)}
    # adaptive stopping (experiments.stopping): every point: the join's batch and commit times
    stopping = Stopping(tasks=("join",))

    def conditions(self, ctx: RunContext) -> list[Condition]:
        """The post gives no benchmark; Databricks' checkpoints are on cloud storage, which the simulator's cluster
        profile and the engine's object-store rows meet (its local-disk rows show the case without)."""
        storage = "the cluster profile's object store" if ctx.backend == "sim" else \
            (self.storage(ctx) or "local disk and the object store, one row each")
        return [Condition("checkpoint storage", "cloud storage (not named)", storage, honoured=True,
                          note="" if ctx.backend == "sim" else "the object-store rows meet it")]

    def points(self, ctx: RunContext) -> list[Point]:
        out = []
        if ctx.backend == "sim":
            profile = sim_profile("lightspeed_cluster")
            for rate in SIM_RATES[ctx.mode]:
                for mode in MODES:
                    for seed in self.seed_list(ctx):
                        scenario = join_rate_scenario(mode, seed, rate, SIM_DURATION_S[ctx.mode])
                        out.append(Point(self.name, "join", mode, {"input": f"{rate // 1000}K/s"}, seed,
                                         ctx.backend, scenario, profile, "volume"))
            return out
        # the engine's checkpoint storage: local disk, where a store's commit is well under a millisecond,
        # and an object store, where it is an upload (--storage-profile runs that one only)
        for storage in (ctx.storage_profile,) if ctx.storage_profile else SPARK_STORAGE:
            for mode in MODES:
                for seed in self.seed_list(ctx):
                    scenario = join_generated_scenario(mode, seed, SPARK_BATCHES[ctx.mode])
                    out.append(Point(self.name, "join", mode, {"input": f"generated, {storage}"}, seed,
                                     ctx.backend, scenario, extra={"storage_profile": storage}))
        return out

    def measure(self, point: Point) -> dict[str, Any]:
        if point.backend == "sim":
            sim = simulate_point(point, trace=True)
            outcome = sim.outcome()
            commits = _commit_ms_from_trace(sim.trace)
        else:
            outcome = run_point_scenario(point).outcome
            mean = (outcome.details.get("spark", {}).get("task_step_ms_mean") or {}).get("state_commit")
            commits = [mean] if mean is not None else []
        check_outcome_ok(outcome)
        metrics = batch_metrics(outcome.progress)
        metrics["commit_ms_mean"] = statistics.fmean(commits) if commits else None
        if point.backend == "sim":     # rate sources: whether the run kept up (the engine's input is generated)
            metrics.update({k: v for k, v in latency_metrics(outcome).items()
                            if k in ("kept_up", "input_rows_per_s", "processed_rows_per_s")})
        return metrics

    def summarize(self, records: list[dict[str, Any]], ctx: RunContext) -> dict[str, Any]:
        inputs: dict[str, Any] = {}
        for (workload, mode), recs in group(records, "params.input", "config", task="join").items():
            inputs.setdefault(workload, {})[mode] = {"commit_mean": over_seeds(recs, "commit_ms_mean"),
                                                     "batch_mean": over_seeds(recs, "batch_ms_mean"),
                                                     "batch_p99": over_seeds(recs, "batch_ms_p99"),
                                                     "keep_up": keep_up(recs)}
        for entry in inputs.values():
            entry["commit_ratio"] = _ratio(entry, "commit_mean")
            entry["batch_ratio"] = _ratio(entry, "batch_mean")
        verdicts = [judge("psc_latency", None if e["batch_ratio"] is None else (1.0 - e["batch_ratio"]) * 100,
                          scope=workload, basis=self.basis(ctx)).to_dict() for workload, e in inputs.items()]
        return {"inputs": inputs, "verdicts": verdicts}

    def checks(self, summary: dict[str, Any], ctx: RunContext) -> list[Check]:
        """A partition's commit and the mean batch no slower in parallel than in turn; an inversion inside the
        spread over the run's seeds is noise (``experiments.sanity``)."""
        out = []
        for workload, entry in summary["inputs"].items():
            for metric, what in (("commit_mean", "commit time"), ("batch_mean", "mean batch duration")):
                out.append(no_worse(f"parallel {what} <= sequential ({workload})",
                                    entry.get("parallel", {}).get(metric, {}),
                                    entry.get("sequential", {}).get(metric, {})))
        return out

    def report(self, summary: dict[str, Any], ctx: RunContext) -> list[str]:
        lines = [f"{'input':>24}  {'commit seq':>10} {'commit par':>10} {'ratio':>6}  "
                 f"{'batch seq':>10} {'batch par':>10} {'ratio':>6}  keep-up"]
        for workload, e in summary["inputs"].items():
            lines.append(f"{workload:>24}  {fmt_ms(config_median(e, 'sequential', 'commit_mean')):>10} "
                         f"{fmt_ms(config_median(e, 'parallel', 'commit_mean')):>10} "
                         f"{_fmt_ratio(e['commit_ratio']):>6}  "
                         f"{fmt_ms(config_median(e, 'sequential', 'batch_mean')):>10} "
                         f"{fmt_ms(config_median(e, 'parallel', 'batch_mean')):>10} {_fmt_ratio(e['batch_ratio']):>6}  "
                         + ("; ".join(f"{mode} {keep_up_text(e.get(mode, {}).get('keep_up'))}" for mode in MODES)
                            if ctx.backend == "sim" else "generated input (no input rate to keep up with)"))
        lines.append("ratio: parallel / sequential (commit: a partition's two store commits; batch: mean duration)")
        return lines + report_lines(summary.get("verdicts", []))

    def figures(self, summary: dict[str, Any], ctx: RunContext, out_dir: Path) -> list[Path]:
        import matplotlib.pyplot as plt
        inputs = list(summary["inputs"])
        with figure_context():
            fig, axes = plt.subplots(1, 2, figsize=(WIDE, 3.6))
            for ax, metric, title in ((axes[0], "commit_mean", "A partition's state commit"),
                                      (axes[1], "batch_mean", "Mean batch duration")):
                grouped_bars(ax, inputs, {mode: [config_median(summary["inputs"][w], mode, metric) for w in inputs]
                                          for mode in MODES}, unit="ms",
                             spread={mode: [seed_span(summary["inputs"][w].get(mode, {}).get(metric)) for w in inputs]
                                     for mode in MODES})
                ax.set_xlabel("input (simulator: rows/s per side; PySpark engine: checkpoint storage)")
                ax.set_title(title)
            seeds = len(self.seed_list(ctx))
            fig.suptitle(f"A join's two state stores committed in turn or in parallel ({backend_label(ctx.backend)}, "
                         f"{ctx.mode}, {seeds} seed{'s' * (seeds != 1)}{'; whiskers: min-max' if seeds > 1 else ''})")
            return save_figure(fig, out_dir, "parallel_store_commit")


def _commit_ms_from_trace(trace: Any) -> list[float]:
    """Per (batch, partition): the time its store commits took, file writes and commits together."""
    per: dict[tuple[int, int], float] = {}
    for rows in step_durations(trace, COMMIT_STEPS).values():
        for b, p, _start, ms in rows:
            per[(b, p)] = per.get((b, p), 0.0) + ms
    return list(per.values())


def _ratio(entry: dict[str, Any], metric: str) -> float | None:
    before, after = config_median(entry, "sequential", metric), config_median(entry, "parallel", metric)
    return after / before if before and after is not None else None


def _fmt_ratio(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio:.2f}"




EXPERIMENT = ParallelStoreCommit()
