"""Side-by-side speed measurements of the engine on this machine (issue figures; run, don't assert).

    python -m spark_impl.engine.speed [--rate 200] [--seconds 8] [--out results/spark-speed.json]
                                      [--parts ablation,group,pipelining,native]

Four measurements, each in one run on one SparkSession, so ratios compare
like with like:

1. ablation: a running count at a fixed input rate with the Lightspeed
   features off (sync logs, inline purge) and on, one at a time and together,
   reporting end-to-end p50/p99 latency per record;
2. group scheduling: every feature on, a job per batch against G batches per
   job, at the same rate with short batches (``--group-batch-ms``);
3. pipelining: throughput (input records per second of the engine's run, no
   pacing: the input is all there) with and without pipelining when a seeded
   fraction of tasks is slow (stragglers), with a job per batch and with group
   scheduling; 8 state partitions and a pipeline depth of 8 by default, since
   two partitions and two batches in flight cap the gain near 1.2x
   (``pipelining_bound``);
4. native: the same running count, on the same arrivals (the same scenario,
   its input files appearing when their records have arrived), on Spark's own
   Structured Streaming under its default trigger, reading all available input
   at each trigger (no ``maxFilesPerTrigger`` throttle), for the latency
   comparison.

Every latency run is judged by ``reference.protocol.timing``'s one rule
(``summarize_throughput``: processed at least ``KEPT_UP_RATE_FRACTION`` of the
input rate, latency growing by at most ``LATENCY_GROWTH_LIMIT_MS_PER_S``). A
run that did not keep up is reported as backlogged, with its rates, never
with a latency, and no ratio is taken against it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from reference.protocol.outcome import Outcome
from reference.language.scenario import Scenario
from reference.protocol.timing import describe_reported, reported_latency

PARTS = ("ablation", "group", "pipelining", "native")
CONFIGS: dict[str, dict[str, Any]] = {
    "baseline": {"progress": {"mode": "sync"}, "log_purge": {"mode": "inline", "min_batches_to_retain": 10}},
    "async_purge": {"progress": {"mode": "sync"}, "log_purge": {"mode": "async", "min_batches_to_retain": 10}},
    "async_progress": {"progress": {"mode": "async", "checkpoint_interval_ms": 1000},
                       "log_purge": {"mode": "inline", "min_batches_to_retain": 10}},
    "both": {"progress": {"mode": "async", "checkpoint_interval_ms": 1000},
             "log_purge": {"mode": "async", "min_batches_to_retain": 10}},
}


def running_count(name: str, rate: int, seconds: float, engine: dict[str, Any], *, stateful: bool = True,
                  batch_ms: int = 100, partitions: int = 2, seed: int = 11, cuts: str = "trigger") -> Scenario:
    """A running count at ``rate`` records/s. ``cuts``: ``trigger`` plans as Spark's default trigger does
    (what arrived by the time the previous batch allows), ``fixed`` cuts every ``batch_ms`` (group
    scheduling cuts no other way, so its runs, a job per batch and G per job, both take fixed cuts)."""
    operator = {"kind": "aggregate", "agg": "count"} if stateful else {"kind": "map"}
    body: dict[str, Any] = {
        "name": name, "seed": seed,
        "source": {"kind": "rate", "rows_per_second": rate, "duration_s": seconds, "partitions": 2,
                   "keys": 64, "batch_ms": batch_ms},
        "query": {"operator": operator, "state_partitions": partitions},
        "sink": {"mode": "at_least_once" if engine.get("progress", {}).get("mode") == "async" else "exactly_once"},
        "engine": {"state_store": {"provider": "changelog", "min_deltas_for_snapshot": 10,
                                   "maintenance_interval_ms": 1000}, "batch_cuts": cuts, **engine},
    }
    if stateful and engine.get("progress", {}).get("mode") == "async":
        body["explore_unsupported"] = True  # Spark refuses async progress on stateful queries; we measure it
    return Scenario.from_dict(body)


def _summary(outcome: Outcome) -> dict[str, Any]:
    """A latency run: its percentiles if it kept up, else backlogged (``reference.protocol.timing.reported_latency``)."""
    durations = [p.duration_ms["triggerExecution"] for p in outcome.progress]
    timing = outcome.timing
    return {**reported_latency(outcome.latency(), timing.throughput if timing else None),
            "batches": len(outcome.batches), "mean_batch_ms": round(sum(durations) / max(len(durations), 1), 1),
            "wall_s": timing.wall_s if timing else None, "error": outcome.error}


def p50_ratio(run: dict[str, Any], base: dict[str, Any]) -> float | None:
    """``run``'s p50 over ``base``'s; None when either was backlogged (a queue is not a latency)."""
    if run.get("backlogged") or base.get("backlogged"):
        return None
    p50, base_p50 = run["latency_ms"]["p50"], base["latency_ms"]["p50"]
    return round(p50 / base_p50, 3) if p50 is not None and base_p50 else None


def _latency_line(name: str, summary: dict[str, Any]) -> str:
    return "  " + describe_reported(f"{name:22s}", summary)


def ablation(rate: int, seconds: float, batch_ms: int, progress: Any = print,
             storage_profile: str | None = None) -> dict[str, Any]:
    """The features off, one at a time and together; ``storage_profile`` gives the checkpoint storage a real
    store's latency (``storage_latency.py``)."""
    from . import run_spark
    from .storage_latency import StorageLatency
    out = {}
    for name, engine in CONFIGS.items():
        scenario = running_count(f"ablation-{name}", rate, seconds, engine, batch_ms=batch_ms)
        latency = StorageLatency(storage_profile, scenario.seed) if storage_profile else None
        out[name] = _summary(run_spark(scenario, storage_latency=latency).outcome)
        progress(_latency_line(name, out[name]))
    for name in CONFIGS:
        out[name]["p50_vs_baseline"] = p50_ratio(out[name], out["baseline"])
    return out


def grouped(rate: int, seconds: float, batch_ms: int, group: int,
            progress: Any = print) -> dict[str, Any]:
    """Every feature on (async progress and purge, pipelining): a job per batch against group scheduling."""
    from . import run_spark
    out = {}
    for size in (1, group):
        engine = {**CONFIGS["both"], "pipelining": True}
        scenario = running_count(f"group-{size}", rate, seconds, engine, batch_ms=batch_ms, cuts="fixed")
        outcome = run_spark(scenario, group=size).outcome
        out[f"group_{size}"] = {**_summary(outcome), "jobs": outcome.details["spark"]["jobs"]}
        progress(_latency_line(f"all features, G={size}", out[f"group_{size}"]))
    return out


def pipelining_bound(partitions: int, straggler: tuple[float, float, int], base_ms: float, batches: int = 4000,
                     depth: int = 2) -> float:
    """The best pipelining speedup the protocol allows for this straggler distribution (no overheads).

    Task (b, p) takes ``base_ms`` plus the straggler draw. Without pipelining a
    batch ends when its slowest task does. With it, task (b, p) starts when
    (b-1, p) has ended and batch b-depth has committed: the reference plans
    batch b only after ``source_commit`` of batch b-2, so at most two batches
    are in flight (``depth`` = 2).
    """
    import random
    probability, extra_ms, seed = straggler
    draw = random.Random(seed)
    times = [[base_ms + (extra_ms if draw.random() < probability else 0.0) for _ in range(partitions)]
             for _ in range(batches)]
    sequential = sum(max(row) for row in times)
    ends = [0.0] * partitions
    batch_end: list[float] = []
    for b, row in enumerate(times):
        gate = batch_end[b - depth] if b >= depth else 0.0
        ends = [max(ends[p], gate) + row[p] for p in range(partitions)]
        batch_end.append(max(ends))
    return round(sequential / batch_end[-1], 3)


def pipelining(batches: int, straggler: tuple[float, float, int], groups: tuple[int, ...] = (1,),
               partitions: int = 8, depth: int = 8, batch_records: int = 200,
               progress: Any = print) -> dict[str, Any]:
    """Throughput with and without pipelining: input rows per second of the engine's run (from the first
    plan to the last commit; building the outcome afterwards is not part of it)."""
    from . import run_spark
    out: dict[str, Any] = {"partitions": partitions, "depth": depth}
    for size in groups:
        runs: dict[str, Any] = {}
        for on in (False, True):
            engine: dict[str, Any] = {"pipelining": on, "log_purge": {"mode": "async", "min_batches_to_retain": 10}}
            if on:
                engine["pipeline_depth"] = depth
            # 50 ms batches of batch_records rows, all there at the start (no pacing)
            scenario = running_count(f"pipelining-{on}", batch_records * 20, batches / 20, engine, batch_ms=50,
                                     partitions=partitions, cuts="fixed")
            outcome = run_spark(scenario, pace=False, straggler=straggler, group=size).outcome
            wall = outcome.details["spark"]["wall_s"]
            rows = sum(p.num_input_rows for p in outcome.progress)
            key = "on" if on else "off"
            runs[key] = {"records_per_s": round(rows / wall, 1), "wall_s": wall,
                         "batches": len(outcome.batches), "error": outcome.error}
            progress(f"  G={size} pipelining {key:3s}: {runs[key]['records_per_s']} records/s")
        runs["speedup"] = round(runs["on"]["records_per_s"] / runs["off"]["records_per_s"], 3)
        progress(f"  G={size} speedup {runs['speedup']}x")
        out[f"group_{size}"] = runs
    out["protocol_bound"] = pipelining_bound(partitions, straggler, base_ms=20.0, depth=depth)
    progress(f"  the protocol's bound for this distribution ({partitions} partitions, {depth} batches in flight, "
             f"20 ms tasks): {out['protocol_bound']}x")
    return out


def native(rate: int, seconds: float, batch_ms: int, progress: Any = print) -> dict[str, Any] | None:
    """The ablation's baseline running count on Spark's own Structured Streaming: the same scenario, so the
    same arrivals; Spark's default trigger, all available input at each trigger (``plan.stream_settings``)."""
    from spark_impl.native import run_native
    from spark_impl.native.plan import stream_settings
    scenario = running_count("native-running-count", rate, seconds, CONFIGS["baseline"], batch_ms=batch_ms)
    settings = stream_settings(scenario, realtime=True)
    outcome = run_native(scenario, realtime=True).outcome
    out = {**_summary(outcome), "source_options": settings.source_options, "trigger": settings.trigger or "default"}
    progress(_latency_line("native Structured Streaming", out))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=int, default=200, help="input records per second (default 200)")
    parser.add_argument("--seconds", type=float, default=8.0, help="input duration per run (default 8)")
    parser.add_argument("--batch-ms", type=int, default=100,
                        help="native: one input file per this many ms of input, written once its last record has "
                             "arrived, so a record waits for its file (on average half of this) before Spark's "
                             "trigger can see it; the engine plans by its trigger and sees each record on arrival "
                             "(default 100)")
    parser.add_argument("--batches", type=int, default=100,
                        help="pipelining: batches per run, 200 records each (default 100)")
    parser.add_argument("--straggler", default="0.1,300,5", help="pipelining: probability,extra_ms,seed of a "
                        "slow task (default 0.1,300,5)")
    parser.add_argument("--partitions", type=int, default=8, help="pipelining: state partitions (default 8)")
    parser.add_argument("--depth", type=int, default=8, help="pipelining: pipeline_depth (default 8)")
    parser.add_argument("--pipeline-group", type=int, default=50,
                        help="pipelining: batches per Spark job of the group-scheduled run (default 50)")
    parser.add_argument("--group", type=int, default=10, help="batches per Spark job for group scheduling "
                        "(default 10)")
    parser.add_argument("--group-batch-ms", type=int, default=100,
                        help="batch length of the group-scheduling latency runs (default 100)")
    parser.add_argument("--master", default="local[16]",
                        help="Spark master (default local[16]: the pipelining runs need two slots per partition "
                             "with a job per batch; slow tasks sleep, so slots beyond the cores cost no CPU)")
    parser.add_argument("--storage-profile", default=None, metavar="NAME",
                        help="ablation: the engine's checkpoint storage latency (local_disk, hdfs, object_store)")
    parser.add_argument("--parts", default=",".join(PARTS),
                        help=f"which measurements to run, of {', '.join(PARTS)} (default: all)")
    parser.add_argument("--out", default="results/spark-speed.json")
    args = parser.parse_args(argv)
    parts = [p for p in args.parts.split(",") if p]
    unknown = [p for p in parts if p not in PARTS]
    if unknown:
        parser.error(f"--parts: unknown measurement {unknown[0]!r}; expected some of {', '.join(PARTS)}")
    from spark_impl.session import session
    spark = session(args.master)
    spark.sparkContext.parallelize(range(4), 2).count()  # start the Python workers before measuring
    prob, extra, seed = args.straggler.split(",")
    report: dict[str, Any] = {"rate": args.rate, "seconds": args.seconds, "master": spark.sparkContext.master}
    report["batch_ms"] = args.batch_ms
    if "ablation" in parts:
        print(f"ablation: running count at {args.rate} records/s for {args.seconds} s per configuration")
        report["storage_profile"] = args.storage_profile
        report["ablation"] = ablation(args.rate, args.seconds, args.batch_ms, storage_profile=args.storage_profile)
    if "group" in parts:
        print(f"group scheduling: every feature on, {args.group_batch_ms} ms batches, G=1 against G={args.group}")
        report["group"] = grouped(args.rate, args.seconds, args.group_batch_ms, args.group)
    if "pipelining" in parts:
        print(f"pipelining: {args.batches} batches, {args.partitions} partitions, depth {args.depth}, "
              f"stragglers {args.straggler}")
        report["pipelining"] = pipelining(args.batches, (float(prob), float(extra), int(seed)),
                                          (1, args.pipeline_group), args.partitions, args.depth)
    if "native" in parts:
        print("native Structured Streaming, same running count and arrivals, default trigger, all available input")
        report["native"] = native(args.rate, args.seconds, args.batch_ms)
    if "ablation" in report and report.get("native") is not None:
        # the same running count, the same arrivals and Spark's default trigger on both sides
        report["engine_p50_vs_native"] = p50_ratio(report["ablation"]["baseline"], report["native"])
        report["engine_all_features_p50_vs_native"] = p50_ratio(report["ablation"]["both"], report["native"])
        print(f"engine baseline p50 / native p50: {report['engine_p50_vs_native']}; with every feature on: "
              f"{report['engine_all_features_p50_vs_native']} (target at most 0.333; None: a run was backlogged)")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=1))
    print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
