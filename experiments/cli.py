"""The ``lightspeed`` command line.

It lives in ``experiments/`` because it drives every backend; the reference
model itself imports nothing outside ``reference/``.

    lightspeed validate SCENARIO.json
    lightspeed run SCENARIO.json --backend reference [--out OUTCOME.json] [--checkpoint DIR]
    lightspeed check OUTCOME.json --scenario SCENARIO.json [--checkpoint DIR]
    lightspeed explore SCENARIO.json [--depth 2] [--out REPORT.json]
    lightspeed diff SCENARIO.json --backends reference,sim
    lightspeed demo [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from reference.oracles import Verdict, check_outcome, failures
from reference.outcome import Outcome, OutcomeError, build_outcome, dumps
from reference.runner import run_scenario
from reference.scenario import Scenario, ScenarioError, load_scenario
from reference.storage import LocalStorage

SCENARIOS = Path(__file__).parent / "scenarios"
BACKENDS = ("reference", "sim", "spark", "spark-native")


def _tally(verdicts: list[Verdict]) -> str:
    held = sum(v.status == "pass" for v in verdicts)
    na = sum(v.status == "n/a" for v in verdicts)
    text = f"{held} of {len(verdicts)} oracles hold"
    return text + (f" ({na} not applicable: no checkpoint)" if na else "")


def _print_verdicts(verdicts: list[Verdict]) -> None:
    for verdict in verdicts:
        print("  " + verdict.describe().replace("\n", "\n  "))


def run_backend(name: str, scenario: Scenario, profile: str | None = None, *, master: str | None = None,
                workdir: str | None = None, crash: str = "in-process", group: int = 1,
                straggler: tuple[float, float, int] | None = None) -> tuple[dict[str, Any], Any]:
    """Run one backend; returns (outcome, checkpoint storage or None). ``group`` and ``straggler`` are the
    Spark engine's (``spark_impl.engine.run_spark``)."""
    if name == "reference":
        result = run_scenario(scenario)
        return build_outcome(result), result.storage
    if name == "sim":
        import sim
        loaded = sim.load_profile(profile) if profile else None
        return sim.run_sim(scenario, loaded, return_storage=True)
    if name == "spark":
        from spark_impl.session import SparkUnavailable
        try:
            if crash == "process":
                import tempfile

                from spark_impl.engine.supervisor import run_spark_processes
                where = workdir or tempfile.mkdtemp(prefix="lightspeed-spark-")
                return run_spark_processes(scenario, where, master=master, group=group,
                                           progress=lambda s: print("  ... " + s, file=sys.stderr))
            from spark_impl.engine import run_spark
            return run_spark(scenario, master=master, workdir=workdir, group=group, straggler=straggler)
        except (SparkUnavailable, ValueError) as exc:
            raise SystemExit(f"backend spark: {exc}") from None
    if name == "spark-native":
        from spark_impl.session import SparkUnavailable
        try:
            from spark_impl.native import run_native
        except ImportError as exc:
            raise SystemExit(f"backend spark-native is not available: {exc}") from None
        try:
            return run_native(scenario, workdir=workdir, master=master)
        except SparkUnavailable as exc:
            raise SystemExit(f"backend spark-native: {exc}") from None
    raise SystemExit(f"unknown backend {name!r}; available: {', '.join(BACKENDS)}")


def cmd_validate(args: argparse.Namespace) -> int:
    scenario = load_scenario(args.scenario)
    print(f"{args.scenario}: valid scenario {scenario.name!r} (seed {scenario.seed}, "
          f"operator {scenario.operator.kind}, {len(scenario.faults)} fault(s))")
    for path, why in scenario.unsupported_reasons():
        print(f"  note: explores an unsupported combination ({path}): {why}")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    scenario = load_scenario(args.scenario)
    print(f"running {scenario.name!r} on {args.backend} with seed {scenario.seed}", file=sys.stderr)
    outcome, storage = run_backend(args.backend, scenario, args.profile, master=args.master,
                                   workdir=args.workdir, crash=args.crash, group=args.group)
    text = dumps(outcome)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text)
        print(f"outcome written to {args.out}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    if args.checkpoint and storage is not None and hasattr(storage, "dump_to"):
        storage.dump_to(args.checkpoint)
        print(f"checkpoint written to {args.checkpoint}", file=sys.stderr)
    return 0 if outcome.get("error") is None else 1


def cmd_check(args: argparse.Namespace) -> int:
    scenario = load_scenario(args.scenario)
    try:
        outcome = json.loads(Path(args.outcome).read_text())
    except FileNotFoundError:
        raise SystemExit(f"{args.outcome}: no such outcome file") from None
    except json.JSONDecodeError as exc:
        raise SystemExit(f"{args.outcome}: not valid JSON: {exc}") from None
    try:
        outcome = Outcome.from_dict(outcome).to_dict()
    except OutcomeError as exc:
        raise SystemExit(f"{args.outcome}: not an outcome: {exc}") from None
    storage = LocalStorage(args.checkpoint) if args.checkpoint else None
    verdicts = check_outcome(scenario, outcome, storage)
    bad = failures(verdicts)
    print(f"{args.outcome}: {_tally(verdicts)}")
    _print_verdicts(verdicts)
    return 1 if bad else 0


def cmd_explore(args: argparse.Namespace) -> int:
    from reference.explorer import explore
    scenario = load_scenario(args.scenario)
    print(f"exploring {scenario.name!r} (seed {scenario.seed}), depth {args.depth}; the scenario's own faults "
          "are replaced by every single-fault placement", file=sys.stderr)
    report = explore(scenario, depth=args.depth, workers=args.workers,
                     progress=lambda s: print("  ... " + s, file=sys.stderr))
    print(report.summary())
    for violation in report.violations:
        print(violation.describe())
        print("  reproduce with: " + json.dumps(violation.reproduce)[:500])
    if args.out:
        Path(args.out).write_text(json.dumps({
            "summary": report.summary(), "schedules": report.schedules,
            "distinct_checkpoints": report.distinct_checkpoints, "truncated": report.truncated,
            "violations": [{"schedule": v.schedule, "verdicts": [x.to_dict() for x in v.verdicts],
                            "reproduce": v.reproduce} for v in report.violations]}, indent=1))
    return 1 if report.violations or report.truncated else 0


def cmd_diff(args: argparse.Namespace) -> int:
    scenario = load_scenario(args.scenario)
    names = [n.strip() for n in args.backends.split(",") if n.strip()]
    unknown = [n for n in names if n not in BACKENDS]
    if unknown or len(names) < 2:
        raise SystemExit(f"--backends: give two or more of {', '.join(BACKENDS)}; got {args.backends!r}")
    outcomes = {}
    ok = True
    for name in names:
        outcome, storage = run_backend(name, scenario, args.profile, master=args.master)
        verdicts = check_outcome(scenario, outcome, storage)
        bad = failures(verdicts)
        print(f"{name}: {_tally(verdicts)}")
        if bad:
            ok = False
            _print_verdicts(bad)
        outcomes[name] = outcome
    first = names[0]
    for other in names[1:]:
        difference = first_difference(outcomes[first], outcomes[other], scenario.sink_mode)
        if difference:
            ok = False
            print(f"{first} and {other} differ at {difference}")
        else:
            print(f"{first} and {other} agree on batches, state and sink")
    return 0 if ok else 1


COMPARED = ("batches", "state", "sink")


def first_difference(a: dict[str, Any], b: dict[str, Any], sink_mode: str = "exactly_once") -> str | None:
    """The first place two outcomes disagree, over what every backend must agree on."""
    for key in COMPARED:
        left, right = _comparable(key, a.get(key), sink_mode), _comparable(key, b.get(key), sink_mode)
        if key == "state" and isinstance(left, dict) and isinstance(right, dict):
            left, right = _common_versions(left, right)
        found = _first_difference(left, right, key)
        if found:
            return found
    return None


def _common_versions(a: dict[str, Any], b: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """State versions both backends still hold, plus each store's newest version.

    Which versions older than the retention window survive depends on when a
    purge ran, which is timing, not semantics (the retention oracle judges each
    backend on its own). The newest version of every store must be in both.
    """
    def trim(mine: dict[str, Any], theirs: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for sid, parts in mine.items():
            for p, versions in parts.items():
                other = theirs.get(sid, {}).get(p, {})
                newest = max(versions, key=int, default=None)
                keep = {v: pairs for v, pairs in versions.items() if v in other or v == newest}
                out.setdefault(sid, {})[p] = keep
        return out
    return trim(a, b), trim(b, a)


def _first_difference(a: Any, b: Any, path: str) -> str | None:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b), key=str):
            if key not in a or key not in b:
                return f"{path}.{key}: present in only one ({'first' if key in a else 'second'})"
            found = _first_difference(a[key], b[key], f"{path}.{key}")
            if found:
                return found
        return None
    if isinstance(a, list) and isinstance(b, list):
        for i, (x, y) in enumerate(zip(a, b)):
            found = _first_difference(x, y, f"{path}[{i}]")
            if found:
                return found
        if len(a) != len(b):
            return f"{path}: {len(a)} items against {len(b)}"
        return None
    return None if a == b else f"{path}: {json.dumps(a)} against {json.dumps(b)}"


def _comparable(key: str, value: Any, sink_mode: str) -> Any:
    """Drop what legitimately differs between backends: delivery counts and digests, and under an
    at-least-once sink how many duplicates a re-run left (the oracles bound those)."""
    if key == "batches" and isinstance(value, list):
        return [{k: v for k, v in b.items() if k in ("id", "start_offsets", "end_offsets")} for b in value]
    if key == "sink" and isinstance(value, list):
        if sink_mode == "at_least_once":
            return [{"batch": e["batch"], "rows": sorted({json.dumps(r) for r in e["rows"]})} for e in value]
        return [{"batch": e["batch"], "rows": e["rows"]} for e in value]
    return value


def cmd_demo(args: argparse.Namespace) -> int:
    """The README's main job: a failure-replay differential on every backend, the explorer, and the
    quick offset-management experiment on the simulator."""
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    scenario_path = SCENARIOS / "running-count-crash-after-wal.json"
    scenario = load_scenario(str(scenario_path))
    print(f"== 1. Failure and replay on every backend: {scenario.name} (seed {scenario.seed})")
    print("   A running count over 2 partitions, 6 batches; the driver crashes right after writing offsets/3.")
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    outcomes: dict[str, dict[str, Any]] = {}
    rows = []
    ok = True
    for name in backends:
        print(f"   running on {name} ...", flush=True)
        outcome, storage = run_backend(name, scenario, master=args.master,
                                       workdir=str(out / f"{name}-work") if name.startswith("spark") else None)
        outcomes[name] = outcome
        (out / f"outcome-{name}.json").write_text(dumps(outcome))
        if storage is not None and hasattr(storage, "dump_to"):
            storage.dump_to(out / f"checkpoint-{name}")
        verdicts = check_outcome(scenario, outcome, storage)
        bad = failures(verdicts)
        ok = ok and not bad and outcome.get("error") is None
        rerun = [r["rerun_batches"] for r in outcome["recoveries"]]
        latency = (outcome.get("latency_ms") or {}).get("p50")
        rows.append((name, _tally(verdicts), str(rerun), "-" if latency is None else f"{latency:.0f} ms"))
        for verdict in bad:
            print("   " + verdict.describe())
    first = backends[0]
    agreement = []
    for other in backends[1:]:
        difference = first_difference(outcomes[first], outcomes[other], scenario.sink_mode)
        ok = ok and difference is None
        agreement.append(f"{first} and {other} " + ("agree on batches, state and sink" if difference is None
                                                      else f"DIFFER at {difference}"))
    print(f"\n   {'backend':<13}{'oracles':<34}{'re-run batches':<18}p50 latency")
    for name, tally, rerun, latency in rows:
        print(f"   {name:<13}{tally:<34}{rerun:<18}{latency}")
    for line in agreement:
        print("   " + line)

    from reference.explorer import explore
    print(f"\n== 2. Explorer: every single-fault schedule of {scenario.name} on the reference model")
    report = explore(scenario)
    print("   " + report.summary())
    ok = ok and not report.violations

    print("\n== 3. Experiment offset-management (quick) on the simulator with the published cluster profile")
    from experiments.runner import RunContext, run_experiment
    result = run_experiment("offset-management", RunContext(backend="sim", quick=True, executor="processes",
                                                           out_dir=out / "offset-management", quiet=True))
    if result.unavailable:
        print(f"   not run: {result.unavailable}")
    for line in result.experiment.report(result.summary, result.ctx) if result.summary else []:
        print("   " + line)
    for check in result.checks:
        print("   " + check.describe())
    ok = ok and result.exit_code == 0
    print(f"\nWritten under {out}: outcome-<backend>.json, the checkpoints, {result.results_path.relative_to(out)}"
          f" and the figures {', '.join(p.name for p in result.figures if p.suffix == '.png')}")
    print(f"Check an outcome again with: lightspeed check {out / ('outcome-' + first + '.json')} "
          f"--scenario {scenario_path} --checkpoint {out / ('checkpoint-' + first)}")
    return 0 if ok else 1


def _spark_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--master", help="spark backends: the Spark master (local[N] or spark://host:port; default "
                                    "local[2]); on a cluster every worker must reach the checkpoint path")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lightspeed",
        description="Reference implementation of Spark Structured Streaming's Project Lightspeed protocol: "
                    "run scenarios on a backend, judge outcomes with the reference oracles, explore faults.")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("validate", help="check a scenario file and explain what is wrong")
    p.add_argument("scenario")
    p.set_defaults(fn=cmd_validate)
    p = sub.add_parser("run", help="run a scenario on one backend and write its outcome JSON")
    p.add_argument("scenario")
    p.add_argument("--backend", choices=BACKENDS, default="reference")
    p.add_argument("--profile", help="cost-model profile JSON (sim backend)")
    p.add_argument("--out", help="write the outcome here (default: stdout)")
    p.add_argument("--checkpoint", help="also write the checkpoint directory here (reference and sim backends; "
                                        "the spark backends keep theirs under --workdir)")
    _spark_options(p)
    p.add_argument("--workdir", help="spark backends: where checkpoint/, coord/ and local/ go (default: a new "
                                     "temporary directory); an existing checkpoint there is resumed")
    p.add_argument("--crash", choices=("in-process", "process"), default="in-process",
                   help="spark backend: a driver_crash fault drops the incarnation in-process (default), or "
                        "SIGKILLs the driver process and a supervisor starts a new one")
    p.add_argument("--group", type=int, default=1, metavar="G",
                   help="spark backend: run G consecutive batches per Spark job (group scheduling, as in "
                        "Drizzle); needs a task slot per state partition (default 1: a job per batch)")
    p.set_defaults(fn=cmd_run)
    p = sub.add_parser("check", help="judge an outcome from any backend with every oracle (exit 0 iff all hold)")
    p.add_argument("outcome")
    p.add_argument("--scenario", required=True)
    p.add_argument("--checkpoint", help="the run's checkpoint directory, for the reconstruction and lineage "
                                        "oracles (without it they report n/a)")
    p.set_defaults(fn=cmd_check)
    p = sub.add_parser("explore", help="run every single-fault schedule and check every oracle")
    p.add_argument("scenario")
    p.add_argument("--depth", type=int, choices=(1, 2), default=1, help="2 adds a second crash during recovery")
    p.add_argument("--out", help="write the report JSON here")
    p.add_argument("--workers", type=int, default=None,
                   help="processes sharing the schedules (default: one per core, at most 4; 1 shows progress)")
    p.set_defaults(fn=cmd_explore)
    p = sub.add_parser("diff", help="run several backends, judge each, and compare their outcomes")
    p.add_argument("scenario")
    p.add_argument("--backends", default="reference,sim")
    p.add_argument("--profile")
    _spark_options(p)
    p.set_defaults(fn=cmd_diff)
    p = sub.add_parser("demo", help="the README's main job: a crash replayed on every backend, judged and "
                                    "compared; the explorer; the quick offset-management experiment")
    p.add_argument("--out", default=os.path.join("results", "demo"))
    p.add_argument("--backends", default="reference,sim,spark",
                   help="backends for the failure-replay differential (default reference,sim,spark)")
    _spark_options(p)
    p.set_defaults(fn=cmd_demo)
    from experiments.runner import add_experiment_parser
    add_experiment_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.fn(args)
    except ScenarioError as exc:
        print(f"error: invalid scenario: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
