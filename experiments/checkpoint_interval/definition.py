"""checkpoint-interval: latency and recovery under failures as the checkpoint intervals vary, against Young's formula.

Two intervals trade normal-operation cost against what a failure costs:

- progress: the async-progress checkpoint interval (``checkpoint_interval_ms``).
  A short interval keeps the background log writer busy and slows batches
  down; a long one makes a restart re-run every batch since the last
  persisted offset entry. Stateless query, rate source, volume mode.
- snapshot: the changelog provider's snapshot interval
  (``min_deltas_for_snapshot``). Frequent snapshots cost maintenance time;
  rare ones make a restart replay more changelogs. Running count, data mode
  (real state files), each key standing for a block of keys.

For every interval the experiment measures, on the published cluster
profile: the failure-free cost (batch cadence, latency; snapshot upload
time) and, over crashes at seeded random times, what a failure costs (the
work lost: time since the planning of the oldest batch the restart redoes;
the state load after a restart). With a mean time between failures ``M`` it
computes the fraction of time lost,

    lost(T) = overhead(T) + (restart + redo(T)) / M

(``overhead`` of the progress interval: the batch cadence's slowdown against
an interval so long that nothing is persisted; of the snapshot interval: the
maintenance time per unit of time, ``C / (T * batch)``), takes the interval
with the least loss as the simulated optimum and compares it with Young's
first-order optimum ``T = sqrt(2 C M)``, where ``C`` is the time one
checkpoint takes (a synchronous log write; one snapshot upload).
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any

import numpy as np

from experiments.outcome_metrics import (MIN_STEP_MS, batch_metrics, check_outcome_ok, latency_metrics, log_write_ms,
                                         plan_starts_before, recovery_metrics, step_durations)
from experiments.scenario_builders import blocked_profile, crash_at, generated_scenario, rate_scenario, with_faults
from experiments.experiment import BackendRun, Check, Experiment, Point, RunContext
from experiments.figures import LABEL_PT, PALETTE, WIDE, figure_context, save_figure
from experiments.measure import run_point_scenario, simulate_point
from experiments.profiles import sim_profile
from experiments.stats import (fmt_ms, group, keep_up, keep_up_text, latency_over_seeds, mean_or_none,
                               median_or_none, over_seeds)
from experiments.claims import CLAIMS, describe
from experiments.verdicts import FIRST_PRINCIPLES, judge, report_lines

NEVER_MS = 10**9                 # an interval longer than any run: only the first offset entry is persisted
PROGRESS_INTERVALS_MS = {"quick": (500, 2000, 8000),  # Young with C ~ 0.2 s: ~16 s (quick M), ~38 s (full M)
                         "full": (250, 500, 1000, 2000, 4000, 8000, 16000, 32000, 64000)}
# full grid: Young's optimum is ~70-100 versions with the cluster profile's costs; the grid runs two doublings
# past it, far enough that an optimum at its edge refutes Young's, and on to 2,048 versions, past the replay-aware
# optimum (~600 versions; a restart's load grows ~14 ms per version of interval). Cleanup remembers the lineage it
# walked (reference.protocol.lineage_memo), so a run's cost grows linearly with its length
SNAPSHOT_INTERVALS = {"quick": (2, 32), "full": (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048)}
SNAPSHOT_BATCHES = {"quick": 36, "full": 160}    # at least; a run covers two of its snapshot intervals (see below)
YOUNG_DOUBLINGS = CLAIMS["young_optimum"].tolerance   # the verdict's tolerance: a factor of two, either way
EDGE_NOTE = " (at the edge of the grid: the optimum may lie beyond it)"
MTBF_S = {"quick": 600.0, "full": 3600.0}
CRASHES = {"quick": 4, "full": 8}
STATE_KEYS, KEYS, PARTITIONS = 10_000_000, 4_000, 8


class CheckpointInterval(Experiment):
    name = "checkpoint-interval"
    version = "3"
    title = "async-progress and snapshot intervals under a failure rate: simulated optimum vs Young's formula"
    claim = describe("checkpoint-interval")
    unsupported = {"spark": "it runs on the simulator only (it needs hundreds of crashes)",
                   "spark-native": "it runs on the simulator only"}
    # full: about 60 min, estimated from its points (49 min measured before the grid reached 2,048 versions; the
    # 2,048-version point takes about 7 CPU minutes a seed, the 1,024 one about 3.5; the others run faster now)
    runs = {"sim": BackendRun(1.0, 60.0)}

    def points(self, ctx: RunContext) -> list[Point]:
        profile = sim_profile("lightspeed_cluster")
        duration = 30 if ctx.quick else 300
        crashes = CRASHES[ctx.mode]
        out = []
        for seed in self.seed_list(ctx):
            def progress_point(config: str, engine: dict[str, Any], interval: int, n: int) -> Point:
                scenario = rate_scenario(f"interval-progress-{config}-{interval}", seed, rate=500_000,
                                         duration_s=duration, operator={"kind": "map"}, engine=engine)
                return Point(self.name, "progress", config, {"interval_ms": interval}, seed, "sim", scenario,
                             profile, "volume", {"crashes": n})
            out.append(progress_point("sync", {"log_purge": {"mode": "async"}}, 0, 0))
            for interval in PROGRESS_INTERVALS_MS[ctx.mode] + (NEVER_MS,):
                engine = {"progress": {"mode": "async", "checkpoint_interval_ms": interval},
                          "log_purge": {"mode": "async"}}
                out.append(progress_point("async", engine, interval, 0 if interval == NEVER_MS else crashes))
            blocked = blocked_profile(profile, STATE_KEYS / KEYS)
            for interval in SNAPSHOT_INTERVALS[ctx.mode]:
                # crashes fall in the run's second half: with two intervals and a few batches before it, a crash
                # finds a snapshot behind it and replays up to one interval of changelogs, as in a long run
                batches = max(SNAPSHOT_BATCHES[ctx.mode], 2 * interval + 8)
                scenario = generated_scenario(
                    f"interval-snapshot-{interval}", seed, operator={"kind": "aggregate", "agg": "count"},
                    records_per_partition=50, batches=batches, keys=KEYS, partitions=4, state_partitions=PARTITIONS,
                    step_ms=1, engine={"state_store": {"provider": "changelog", "min_deltas_for_snapshot": interval,
                                                       "maintenance_interval_ms": 100},
                                       "log_purge": {"mode": "async", "min_batches_to_retain": 100}})
                out.append(Point(self.name, "snapshot", "changelog", {"min_deltas": interval}, seed, "sim", scenario,
                                 blocked, "data", {"crashes": crashes}))
        # the longest snapshot runs first (the 2,048-version point is the longest by far), so the worker
        # processes do not end on one of them alone
        return sorted(out, key=lambda p: -p.scenario["source"]["batches"] if p.task == "snapshot" else 0)

    # ---------------------------------------------------------------- measure
    def measure(self, point: Point) -> dict[str, Any]:
        return self._progress(point) if point.task == "progress" else self._snapshot(point)

    def _crash_times(self, point: Point, span_ms: float) -> list[float]:
        rng = np.random.default_rng(point.seed * 7919 + int(point.params.get("interval_ms", 0)) % 7919
                                    + int(point.params.get("min_deltas", 0)))
        return [float(int(span_ms * f)) for f in rng.uniform(0.3, 0.8, size=int(point.extra.get("crashes", 0)))]

    def _progress(self, point: Point) -> dict[str, Any]:
        clean = run_point_scenario(point).outcome
        check_outcome_ok(clean)
        progress = clean.progress
        metrics: dict[str, Any] = latency_metrics(clean)
        batches = batch_metrics(progress)
        metrics.update({k: batches[k] for k in ("interval_ms_mean", "batch_ms_mean", "trigger_ms_mean")})
        metrics["log_write_ms_mean"] = log_write_ms(progress)
        span = float(point.scenario["source"]["duration_s"]) * 1000.0
        redo = []
        for i, crash_ms in enumerate(self._crash_times(point, span)):
            sim = simulate_point(point, with_faults(point.scenario, [crash_at(crash_ms)], f"crash{i}"), trace=True)
            outcome = sim.outcome()
            check_outcome_ok(outcome)
            redo.append(recovery_metrics(outcome, crash_ms, plan_starts_before(sim.trace, crash_ms)))
        crashed = [r for r in redo if r["crashed"]]
        metrics["crashed"] = len(crashed)
        metrics["rerun_batches_mean"] = mean_or_none([r["rerun_batches"] for r in crashed])
        metrics["lost_ms_mean"] = mean_or_none([r["lost_ms"] for r in crashed])
        metrics["restart_ms"] = _restart_ms(point)
        return metrics

    def _snapshot(self, point: Point) -> dict[str, Any]:
        sim = simulate_point(point, trace=True)
        outcome = sim.outcome()
        check_outcome_ok(outcome)
        uploads = [ms for _b, _p, _s, ms in step_durations(sim.trace, ("snapshot_upload",))["snapshot_upload"]
                   if ms > MIN_STEP_MS]
        batches = batch_metrics(outcome.progress)
        loads = []
        total = len(outcome.batches)
        rng = np.random.default_rng(point.seed * 104729 + int(point.params["min_deltas"]))
        for batch in sorted({int(b) for b in rng.integers(total // 2, total - 1, size=int(point.extra["crashes"]))}):
            fault = {"at": {"step": "plan", "batch": batch, "when": "before"}, "kind": "driver_crash"}
            crashed = simulate_point(point, with_faults(point.scenario, [fault], f"crash{batch}"), trace=True)
            check_outcome_ok(crashed.outcome())
            crash_ms = next(e.time_ms for e in crashed.trace if e.component == "faults")
            steps = step_durations(crashed.trace, ("state_load",), since_ms=crash_ms)["state_load"]
            first = min((b for b, _p, _s, _ms in steps), default=None)
            loads.append(max((ms for b, _p, _s, ms in steps if b == first), default=0.0))
        return {"snapshot_ms_mean": statistics.fmean(uploads) if uploads else None, "snapshot_uploads": len(uploads),
                "batch_ms_mean": batches["batch_ms_mean"], "interval_ms_mean": batches["interval_ms_mean"],
                "recovery_load_ms_mean": mean_or_none(loads), "restart_ms": _restart_ms(point)}

    # ------------------------------------------------------------- summary
    def summarize(self, records: list[dict[str, Any]], ctx: RunContext) -> dict[str, Any]:
        mtbf_ms = MTBF_S[ctx.mode] * 1000.0
        progress = {}
        for (config, interval), recs in group(records, "config", "params.interval_ms", task="progress").items():
            progress[f"{config}/{interval}"] = {"config": config, "interval_ms": interval, "keep_up": keep_up(recs),
                                                "latency_p50": latency_over_seeds(recs, "latency_p50"),
                                                "latency_p99": latency_over_seeds(recs, "latency_p99"), **{
                m: over_seeds(recs, m) for m in ("interval_ms_mean", "log_write_ms_mean", "rerun_batches_mean",
                                                 "lost_ms_mean", "restart_ms")}}
        c_ms = _m(progress.get("sync/0", {}), "log_write_ms_mean")
        free = _m(progress.get(f"async/{NEVER_MS}", {}), "interval_ms_mean")
        curve = []
        for row in progress.values():
            if row["config"] != "async" or row["interval_ms"] == NEVER_MS:
                continue
            cadence, redo = _m(row, "interval_ms_mean"), _m(row, "lost_ms_mean")
            if cadence is None or free is None or redo is None:
                continue
            overhead = cadence / free - 1.0
            lost = overhead + ((_m(row, "restart_ms") or 0.0) + redo) / mtbf_ms
            curve.append({"interval_ms": row["interval_ms"], "overhead": overhead, "redo_ms": redo, "lost": lost,
                          "p50": _m(row, "latency_p50"), "keep_up": row["keep_up"]})
        young_ms = math.sqrt(2.0 * c_ms * mtbf_ms) if c_ms else None
        best = min(curve, key=lambda r: r["lost"]) if curve else None
        snapshot = {}
        for (interval,), recs in group(records, "params.min_deltas", task="snapshot").items():
            snapshot[str(interval)] = {"min_deltas": interval, **{
                m: over_seeds(recs, m) for m in ("snapshot_ms_mean", "batch_ms_mean", "interval_ms_mean",
                                                 "recovery_load_ms_mean", "restart_ms")}}
        snap_curve = []
        for row in snapshot.values():
            c, d, load = _m(row, "snapshot_ms_mean"), _m(row, "interval_ms_mean"), _m(row, "recovery_load_ms_mean")
            if c is None or not d or load is None:
                continue
            overhead = c / (row["min_deltas"] * d)
            snap_curve.append({"min_deltas": row["min_deltas"], "overhead": overhead, "load_ms": load,
                               "lost": overhead + ((_m(row, "restart_ms") or 0.0) + load) / mtbf_ms})
        snap_c = median_or_none(_m(r, "snapshot_ms_mean") for r in snapshot.values()) or None
        batch = median_or_none(_m(r, "interval_ms_mean") for r in snapshot.values()) or None
        young_batches = math.sqrt(2.0 * snap_c * mtbf_ms) / batch if snap_c and batch else None
        snap_best = min(snap_curve, key=lambda r: r["lost"]) if snap_curve else None
        # Young charges a failure half an interval of work redone at the batches' pace; a changelog restart
        # replays the interval's changelogs instead, at the load curve's slope per version of interval
        slope = _slope([r["min_deltas"] for r in snap_curve], [r["load_ms"] for r in snap_curve])
        replay_batches = math.sqrt(snap_c * mtbf_ms / (batch * slope)) if snap_c and batch and slope else None
        progress_grid = [r["interval_ms"] for r in curve]
        snapshot_grid = [r["min_deltas"] for r in snap_curve]
        verdicts = [
            _optimum_verdict("async-progress interval", best["interval_ms"] if best else None, young_ms,
                             progress_grid, self.basis(ctx)),
            _optimum_verdict("snapshot interval", snap_best["min_deltas"] if snap_best else None, young_batches,
                             snapshot_grid, self.basis(ctx))]
        return {"mtbf_s": MTBF_S[ctx.mode], "verdicts": verdicts,
                "progress": {"rows": progress, "checkpoint_cost_ms": c_ms, "free_cadence_ms": free, "curve": curve,
                             "young_ms": young_ms, "simulated_best_ms": best["interval_ms"] if best else None,
                             "best_at_edge": _at_edge(best["interval_ms"] if best else None, progress_grid)},
                "snapshot": {"rows": snapshot, "snapshot_cost_ms": snap_c, "batch_ms": batch, "curve": snap_curve,
                             "young_batches": young_batches, "load_ms_per_version": slope,
                             "replay_batches": replay_batches,
                             "simulated_best_batches": snap_best["min_deltas"] if snap_best else None,
                             "best_at_edge": _at_edge(snap_best["min_deltas"] if snap_best else None,
                                                      snapshot_grid)}}

    def checks(self, summary: dict[str, Any], ctx: RunContext) -> list[Check]:
        out = []
        curve = sorted(summary["progress"]["curve"], key=lambda r: r["interval_ms"])
        if len(curve) >= 2:
            lo, hi = curve[0], curve[-1]
            out.append(Check(f"a longer progress interval loses more work to a crash ({lo['interval_ms']} -> "
                             f"{hi['interval_ms']} ms)", hi["redo_ms"] >= lo["redo_ms"],
                             f"lost {lo['redo_ms']:,.0f} -> {hi['redo_ms']:,.0f} ms"))
        else:
            out.append(Check("a longer progress interval loses more work to a crash", None, "not measured"))
        snap = sorted(summary["snapshot"]["curve"], key=lambda r: r["min_deltas"])
        if len(snap) >= 2:
            lo, hi = snap[0], snap[-1]
            out.append(Check(f"a longer snapshot interval loads longer after a crash ({lo['min_deltas']} -> "
                             f"{hi['min_deltas']} deltas)", hi["load_ms"] >= lo["load_ms"],
                             f"state load {lo['load_ms']:,.1f} -> {hi['load_ms']:,.1f} ms"))
            out.append(Check(f"a longer snapshot interval costs less maintenance ({lo['min_deltas']} -> "
                             f"{hi['min_deltas']} deltas)", hi["overhead"] <= lo["overhead"],
                             f"{lo['overhead']:.3f} -> {hi['overhead']:.3f} of the time"))
        return out

    def report(self, summary: dict[str, Any], ctx: RunContext) -> list[str]:
        p, s = summary["progress"], summary["snapshot"]
        lines = [f"mean time between failures M = {summary['mtbf_s']:.0f} s"]
        lines.append(f"progress interval: checkpoint cost C = {fmt_ms(p['checkpoint_cost_ms'])} (a synchronous log "
                     f"write); batch cadence without checkpoints {fmt_ms(p['free_cadence_ms'])}")
        lines.append(f"  {'interval':>9} {'overhead':>9} {'work lost':>9} {'p50':>8} {'lost':>8}  keep-up")
        for r in sorted(p["curve"], key=lambda r: r["interval_ms"]):
            lines.append(f"  {r['interval_ms']:>7} ms {r['overhead'] * 100:>8.1f}% {fmt_ms(r['redo_ms']):>9} "
                         f"{fmt_ms(r['p50']):>8} {r['lost'] * 100:>7.2f}%  {keep_up_text(r.get('keep_up'))}")
        lines.append(f"  simulated optimum {_fmt_opt(p['simulated_best_ms'], 'ms')}"
                     f"{EDGE_NOTE if p['best_at_edge'] else ''}; Young sqrt(2CM) = "
                     f"{_fmt_opt(p['young_ms'], 'ms')}")
        lines.append(f"snapshot interval: snapshot cost C = {fmt_ms(s['snapshot_cost_ms'])}, batch "
                     f"{fmt_ms(s['batch_ms'])}")
        lines.append(f"  {'deltas':>9} {'overhead':>9} {'load':>9} {'lost':>8}")
        for r in sorted(s["curve"], key=lambda r: r["min_deltas"]):
            lines.append(f"  {r['min_deltas']:>9} {r['overhead'] * 100:>8.2f}% {fmt_ms(r['load_ms']):>9} "
                         f"{r['lost'] * 100:>7.2f}%")
        lines.append(f"  simulated optimum {_fmt_opt(s['simulated_best_batches'], 'batches')}"
                     f"{EDGE_NOTE if s['best_at_edge'] else ''}; Young sqrt(2CM) = "
                     f"{_fmt_opt(s['young_batches'], 'batches')}")
        if s.get("load_ms_per_version"):
            lines.append(f"  a restart replays changelogs, not batches: the load grows "
                         f"{s['load_ms_per_version']:,.1f} ms per version of interval (least squares), against a "
                         f"batch of {fmt_ms(s['batch_ms'])}; "
                         f"with that redo cost the optimum is sqrt(C M / (batch * slope)) = "
                         f"{_fmt_opt(s['replay_batches'], 'batches')}")
        return lines + report_lines(summary.get("verdicts", []))

    def figures(self, summary: dict[str, Any], ctx: RunContext, out_dir: Path) -> list[Path]:
        import matplotlib.pyplot as plt
        with figure_context():
            fig, axes = plt.subplots(1, 2, figsize=(WIDE, 3.4), layout="constrained")
            # the progress intervals are labelled in seconds: in milliseconds the eight ticks ran into each other
            for ax, part, key, unit, young_key, scale, suffix in (
                    (axes[0], summary["progress"], "interval_ms", "async-progress checkpoint interval (s)",
                     "young_ms", 1000.0, " s"),
                    (axes[1], summary["snapshot"], "min_deltas", "snapshot interval (min_deltas_for_snapshot)",
                     "young_batches", 1.0, "")):
                curve = sorted(part["curve"], key=lambda r: r[key])
                xs = [r[key] for r in curve]
                if xs:
                    ax.plot(xs, [r["lost"] * 100 for r in curve], "o-", color=PALETTE[0], label="time lost (total)")
                    ax.plot(xs, [r["overhead"] * 100 for r in curve], "s--", color=PALETTE[2],
                                label="checkpoint overhead")
                    ax.plot(xs, [(r["lost"] - r["overhead"]) * 100 for r in curve], "^--", color=PALETTE[3],
                            label="failures (restart + redo) / M")
                    ax.set_xscale("log")
                    ax.set_xticks(xs)
                    ax.set_xticklabels([f"{x / scale:g}" for x in xs], fontsize=LABEL_PT)
                    ax.minorticks_off()
                if part.get(young_key):
                    ax.axvline(part[young_key], color=PALETTE[1], linestyle=":",
                               label=f"Young sqrt(2CM) = {part[young_key] / scale:,.{1 if scale > 1 else 0}f}{suffix}")
                if part.get("replay_batches"):
                    ax.axvline(part["replay_batches"], color=PALETTE[4], linestyle="-.",
                               label=f"Young, redo = replay: {part['replay_batches']:,.0f}")
                ax.set_xlabel(unit)
                ax.set_ylabel("% of time")
                ax.set_ylim(bottom=0)
            # the panels plot the same three curves: one legend under both, its text as large as the axes'
            # (each panel's own Young interval stays in that panel's legend)
            curves = [line for line in axes[0].get_lines() if not str(line.get_label()).startswith("Young")]
            fig.legend(handles=curves, loc="outside lower center", ncol=3, fontsize=9)
            for ax in axes:
                young = [line for line in ax.get_lines() if str(line.get_label()).startswith("Young")]
                if young:
                    ax.legend(handles=young, fontsize=LABEL_PT, loc="best")
            axes[0].set_title("Async progress tracking")
            axes[1].set_title("Changelog snapshots")
            fig.suptitle(f"Checkpoint intervals under failures (M = {summary['mtbf_s']:.0f} s, {ctx.backend})")
            return save_figure(fig, out_dir, "checkpoint_interval")


def _restart_ms(point: Point) -> float:
    """The profile's restart time: the part of a failure's cost that no interval changes."""
    if point.profile is None:
        raise RuntimeError(f"point {point.id} has no cost profile; this experiment runs on the simulator")
    return point.profile["restart_ms"]


def _m(row: dict[str, Any], metric: str) -> float | None:
    return (row.get(metric) or {}).get("median")


def _at_edge(best: float | None, grid: list[float]) -> bool:
    """Whether the grid's best interval is one of its ends (or the grid is too short to have an inside), so the
    optimum may lie beyond it."""
    return best is not None and (len(grid) < 3 or best in (min(grid), max(grid)))


def _slope(xs: list[float], ys: list[float]) -> float | None:
    """The least-squares slope of ys on xs (None with fewer than two distinct xs, or a slope that is not
    positive: a load that does not grow with the interval gives no replay cost)."""
    if len(set(xs)) < 2:
        return None
    slope = float(np.polyfit(np.asarray(xs, dtype=float), np.asarray(ys, dtype=float), 1)[0])
    return slope if slope > 0 else None


def _optimum_verdict(scope: str, best: float | None, predicted: float | None, grid: list[float],
                     basis: str = FIRST_PRINCIPLES) -> dict[str, Any]:
    """The verdict on "the simulated optimum is near ``predicted``", in doublings (log2 of their ratio): within
    YOUNG_DOUBLINGS of it (a factor of two either way) reproduces it.

    A best interval inside the grid is the estimate. One at an edge is only a bound: if the loss falls all the way
    to the grid's longest interval, the optimum is past the one before it (the curve need not turn at the edge
    itself), and symmetrically at the short end. Such a bound refutes a prediction more than the tolerance on the
    other side of it, and measures nothing otherwise."""
    measured = None
    points = sorted(set(grid))
    if best is not None and predicted and len(points) >= 2 and best in points:
        if _at_edge(best, points):
            bound = points[-2] if best == points[-1] else points[1]
            doublings = math.log2(bound / predicted)
            past = doublings > 0 if best == points[-1] else doublings < 0
            if past and abs(doublings) > YOUNG_DOUBLINGS:
                measured = doublings
            scope += ", the grid's edge: a bound"
        else:
            measured = math.log2(best / predicted)
    return judge("young_optimum", measured, scope=scope, basis=basis).to_dict()


def _fmt_opt(value: float | None, unit: str) -> str:
    return "-" if value is None else f"{value:,.0f} {unit}" if value >= 10 else f"{value:,.1f} {unit}"


EXPERIMENT = CheckpointInterval()
