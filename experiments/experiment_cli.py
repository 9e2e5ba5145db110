"""``lightspeed experiment``: list, run or reproduce a named experiment from the command line.

    lightspeed experiment list
    lightspeed experiment NAME [--backend sim|spark|spark-native] [--quick] [--seeds N] [--out DIR]
                               [--storage-profile local_disk|hdfs|object_store]
                               [--master URL | --no-spark | --executor inline] [--workers N]
    lightspeed experiment NAME --reproduce RESULTS.json [--point ID]
    lightspeed experiment NAME --redraw RESULTS.json [--out DIR]
    lightspeed experiment NAME --resummarize RESULTS.json
    lightspeed experiment NAME --help        # the experiment's claim, defaults, backends, times, paper command

Bad input raises ``ExperimentError``; the command line's ``main`` turns it
into a message and exit code 2.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from experiments import exit_codes
from experiments.arguments import once_only
from experiments.backends import BACKEND_NAMES, check_master
from experiments.conditions import Condition, header_lines
from experiments.experiment import DEFAULT_MASTER, EXECUTORS, Experiment, ExperimentError, RunContext, json_ready
from experiments.figures import draw_figures
from experiments.registry import DEFINITIONS, get_experiment
from experiments.provenance import OUTPUTS, git_revision
from experiments.output_paths import output_dir, output_file
from experiments.results import default_out_dir, load_results, reproduce, write_results
from experiments.sweep import ExperimentResult, run_experiment, summarize_run


MAX_SEEDS = 100      # seeds per point: the paper's runs take 3 to 5; each seed multiplies every point
MAX_WORKERS = 1_024  # parallel points: more than any cluster this runs on offers task slots

# The one exit-code rule of every experiment (``ExperimentResult.exit_code``), as --help states it.
EXIT_RULE = (
    f"exit codes: {exit_codes.OK} every point ran and every correctness check held, whatever the verdicts\n"
    "against the published claims (verdicts are findings and never change the exit code);\n"
    f"{exit_codes.CHECK_FAILED} a correctness check failed: an oracle, a point that crashed or did not finish, or a\n"
    "sanity check that found a real inversion (a difference beyond the spread over the run's seeds; one\n"
    f"seed reports an inversion as within noise); {exit_codes.BAD_INPUT} bad input; {exit_codes.UNAVAILABLE} the "
    f"backend is not available here\n(nothing is estimated in its place); {exit_codes.INTERRUPTED} interrupted.")


def add_experiment_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``lightspeed experiment`` on the command line's subparsers; returns the subparser."""
    lines = [f"  {name:<24} {_title(name)}" for name in DEFINITIONS]
    description = (
        "Run a named, versioned experiment. Its points (scenario x seed) run in parallel as Spark\n"
        "tasks (--master, default local[*]) or local processes (--no-spark); points on a Spark backend\n"
        "run one after another, each being a Spark job itself. Results go to results.json with the\n"
        "scenario and seed of every point, the package versions and the environment; figures to PNG\n"
        "and PDF. A progress bar on stderr counts the points. By default a run uses the conditions its\n"
        "claim was published under wherever its backend can (say, an object-store checkpoint on the\n"
        "engine), and its report says which it could not meet. `lightspeed experiment NAME --help`\n"
        "describes one experiment: its claim, defaults, backends, times and the paper's command.\n\n"
        + EXIT_RULE)
    p = once_only(subparsers.add_parser(
        "experiment", help="run a named experiment (sweep, results JSON, figures); 'list' shows them",
        formatter_class=argparse.RawDescriptionHelpFormatter, description=description, add_help=False,
        epilog="experiments:\n" + "\n".join(lines) + "\n\nexamples:\n"
               "  lightspeed experiment list\n"
               "  lightspeed experiment offset-management --quick --no-spark\n"
               "  lightspeed experiment pipelining --seeds 5 --master spark://host:7077\n"
               "  lightspeed experiment calibration --backend spark\n"
               "  lightspeed experiment offset-management --reproduce results/experiments/"
               "offset-management/sim-quick/results.json\n"
               "  lightspeed experiment pipelining --redraw paper/results/pipelining/sim-quick/results.json"))
    p.add_argument("-h", "--help", action="store_true", dest="show_help",
                   help="show this help; after NAME, the experiment's own (claim, defaults, times, paper command)")
    p.add_argument("name", metavar="NAME", nargs="?", default=None, help="an experiment name, or 'list'")
    p.add_argument("--backend", choices=BACKEND_NAMES, default=None,
                   help="where the points run (default: the experiment's own; sim for most, spark for calibration)")
    p.add_argument("--quick", action="store_true", help="the small version (seconds; what CI runs)")
    p.add_argument("--seeds", type=int, default=None,
                   help=f"seeds per point (default: 1 quick, 3 full; at most {MAX_SEEDS})")
    p.add_argument("--out", default=None, help="output directory (default: results/experiments/NAME/BACKEND-MODE)")
    p.add_argument("--master", default=None,
                   help=f"Spark master the points run on (default {DEFAULT_MASTER}); the spark backends run "
                        "there too (default: their own, local[2])")
    p.add_argument("--executor", choices=EXECUTORS, default=None,
                   help="run points as Spark tasks (the default), in local processes, or one by one in this process")
    p.add_argument("--no-spark", action="store_true", help="same as --executor processes")
    p.add_argument("--workers", type=int, default=None,
                   help=f"parallel points (default: Spark's or the cores; at most {MAX_WORKERS})")
    p.add_argument("--overwrite", action="store_true",
                   help="replace the results.json an earlier run left in the output directory (refused without it); "
                        "the units of that run whose code has not changed are reused (--fresh measures them again)")
    p.add_argument("--no-figures", action="store_true", help="write results.json only")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--point-timeout", type=float, default=None, metavar="SECONDS",
                   help="a point on a spark backend that runs longer fails, and the backend's remaining points "
                        "are not run (default: the experiment's, 180 s to 900 s)")
    p.add_argument("--storage-profile", default=None, metavar="NAME",
                   help="every point's checkpoint storage latency, a reference.protocol.storage_profiles name (local_disk, "
                        "hdfs, object_store): the spark engine sleeps it, the sim charges it; results go to "
                        "BACKEND-MODE-NAME")
    p.add_argument("--budget", type=float, default=None, metavar="MINUTES",
                   help="start no point that is not expected to end within MINUTES; the points left are measured "
                        "by the next run (every point that ends is kept in OUT/units/, and a run reuses those "
                        "whose code has not changed)")
    p.add_argument("--fresh", action="store_true",
                   help="measure every point again, reusing none measured before (OUT/units/)")
    p.add_argument("--reproduce", metavar="RESULTS.json", default=None,
                   help="re-run the points of a results file and say whether every number is the same")
    p.add_argument("--redraw", metavar="RESULTS.json", default=None,
                   help="draw the figures again from a results file's stored summary, running nothing and "
                        "leaving the file as it is; they go next to it (or to --out)")
    p.add_argument("--resummarize", metavar="RESULTS.json", default=None,
                   help="judge a results file's stored points again with this version's summary, verdicts and "
                        "checks (running nothing: the measurements stay), rewrite its summary, record this source "
                        "revision under 'resummarized', and draw its figures again")
    p.add_argument("--point", action="append", default=None, metavar="ID",
                   help="with --reproduce: only this point (repeatable)")
    p.set_defaults(fn=cmd_experiment, experiment_parser=p)
    return p


def _title(name: str) -> str:
    try:
        return get_experiment(name).title
    except Exception as exc:  # noqa: BLE001 - a broken definition must not break --help
        return f"(cannot load: {exc})"


def cmd_experiment(args: argparse.Namespace) -> int:
    if args.name is None and not args.show_help:
        args.experiment_parser.print_usage(sys.stderr)
        print("lightspeed experiment: error: name an experiment (or 'list')", file=sys.stderr)
        return exit_codes.BAD_INPUT
    if args.show_help:
        if args.name in (None, "list"):
            args.experiment_parser.print_help()
        else:
            print(experiment_help(get_experiment(args.name)))
        return exit_codes.OK
    if args.name == "list":
        return list_experiments()
    experiment = get_experiment(args.name)
    if args.reproduce:
        return reproduce_results(experiment.name, experiment.version, args.reproduce, args.point)
    if args.resummarize:
        return resummarize(experiment, args.resummarize)
    if args.redraw:
        figures = redraw_figures(experiment, args.redraw, Path(args.out) if args.out else None)
        for path in figures:
            print(f"figure:  {path}")
        return exit_codes.OK
    if args.budget is not None and not args.budget > 0:
        raise ExperimentError(f"--budget must be a positive number of minutes, got {args.budget:g}")
    ctx = RunContext(backend=args.backend or experiment.default_backend, quick=args.quick, seeds=args.seeds,
                     out_dir=Path(args.out) if args.out else None, executor=_executor(args),
                     master=args.master or DEFAULT_MASTER, workers=args.workers, figures=not args.no_figures,
                     quiet=args.quiet, backend_master=args.master, point_timeout_s=args.point_timeout,
                     storage_profile=args.storage_profile, fresh=args.fresh,
                     deadline=None if args.budget is None else time.time() + args.budget * 60.0)
    _check_run_options(args)
    out_dir = ctx.out_dir if ctx.out_dir is not None else default_out_dir(experiment, ctx)
    output_dir(out_dir, "the experiment's results (--out)")
    output_file(out_dir / "results.json", "the experiment's results", replace=args.overwrite)
    result = run_experiment(args.name, ctx)
    print_result(result)
    return result.exit_code


def _executor(args: argparse.Namespace) -> str:
    """Where the points run: ``--executor``, or ``processes`` for ``--no-spark``; the two, or ``--no-spark`` with
    ``--master``, disagreeing is refused."""
    if args.no_spark:
        if args.executor not in (None, "processes"):
            raise ExperimentError(f"--no-spark runs the points in local processes; --executor {args.executor} "
                                  "says otherwise; give one of them")
        if args.master is not None:
            raise ExperimentError(f"--no-spark runs the points without Spark; --master {args.master} names a Spark "
                                  "master for them; give one of them")
        return "processes"
    return args.executor or "spark"


def _check_run_options(args: argparse.Namespace) -> None:
    """The counts and the master given, refused up front when they are out of range (``MAX_SEEDS``,
    ``MAX_WORKERS``) or malformed, before any point runs."""
    if args.seeds is not None and not 1 <= args.seeds <= MAX_SEEDS:
        raise ExperimentError(f"--seeds {args.seeds}: expected 1 to {MAX_SEEDS} seeds per point")
    if args.workers is not None and not 1 <= args.workers <= MAX_WORKERS:
        raise ExperimentError(f"--workers {args.workers}: expected 1 to {MAX_WORKERS} parallel points")
    check_master(args.master)


def experiment_help(experiment: Experiment) -> str:
    """``lightspeed experiment NAME --help``: the claim, the backends with their defaults and the conditions
    they meet, the expected time of each mode on this machine, and the commands of the paper's runs."""
    out = [f"lightspeed experiment {experiment.name}: {experiment.title} (version {experiment.version})", ""]
    if experiment.claim:
        out.append(f"claim under test: {experiment.claim}")
    out.append(f"backends: {', '.join(experiment.backends)} (default {experiment.default_backend}); seeds: "
               f"{experiment.seeds_quick} quick, {experiment.seeds_full} full")
    out.append("")
    for backend, run in experiment.runs.items():
        ctx = RunContext(backend=backend, quick=False)
        storage = experiment.storage(ctx)
        out.append(f"--backend {backend}: about {_minutes(run.quick_minutes)} quick, {_minutes(run.full_minutes)} "
                   "full on this project's 2-core machine; checkpoint storage "
                   + (storage if storage else "the backend's own (the simulator's profile, or local disk)"))
        out += ["  " + line for line in header_lines(experiment.conditions(ctx))]
        out.append(f"  the paper's run: {experiment.paper_command(backend)}")
    out += ["", "options: as `lightspeed experiment --help` lists them (--quick, --seeds N, --storage-profile NAME, "
            "--out DIR, ...)", "", EXIT_RULE]
    return "\n".join(out)


def _minutes(value: float) -> str:
    return f"{value * 60:.0f} s" if value < 1 else f"{value:.0f} min"


def list_experiments() -> int:
    for name in DEFINITIONS:
        exp = get_experiment(name)
        print(f"{name:<24} v{exp.version}  backends: {', '.join(exp.backends):<25} {exp.title}")
        if exp.claim:
            print(f"{'':<28}claim: {exp.claim}")
    return exit_codes.OK


def reproduce_results(name: str, version: str, results_path: str, point_ids: list[str] | None) -> int:
    document = load_results(results_path)
    if document["experiment"] != name:
        raise ExperimentError(f"{results_path} holds results of {document['experiment']}, not {name}")
    if str(document.get("version")) != version:
        print(f"note: {results_path} was made by version {document.get('version')} of {name}; "
              f"this is version {version}, so its points may measure something else", file=sys.stderr)
    entries = reproduce(results_path, point_ids)
    same = sum(e["same"] for e in entries)
    for e in entries:
        if not e["same"]:
            print(f"DIFFERS {e['id']}: recorded {json.dumps(e['recorded'])[:200]} "
                  f"again {json.dumps(e['again'])[:200]}" + (f" ({e['error']})" if e["error"] else ""))
    print(f"{same} of {len(entries)} points reproduce their numbers exactly")
    return exit_codes.OK if same == len(entries) else exit_codes.CHECK_FAILED


def redraw_figures(experiment: Experiment, results_path: str, out_dir: Path | None = None) -> list[Path]:
    """The experiment's figures drawn again from the summary stored in ``results_path`` (nothing runs, the file
    is only read), into ``out_dir`` (default: the results file's directory). The run's backend, mode, seeds and
    storage profile come from the file, as the figures label them."""
    document = load_results(results_path)
    target = out_dir if out_dir is not None else Path(results_path).parent
    ctx = stored_context(experiment, document, results_path, target)
    summary = document.get("summary")
    if not summary:
        raise ExperimentError(f"{results_path}: its summary is empty (the run measured nothing), so there is "
                              "nothing to draw")
    target.mkdir(parents=True, exist_ok=True)
    return draw_figures(experiment, summary, ctx, target)


def stored_context(experiment: Experiment, document: dict[str, Any], results_path: str,
                   target: Path | None = None) -> RunContext:
    """The run's context as its results file recorded it (backend, mode, seeds, storage); ``ExperimentError``
    naming the file when it holds another experiment's results or no usable mode."""
    if document.get("experiment") != experiment.name:
        raise ExperimentError(f"{results_path} holds results of {document.get('experiment')}, not {experiment.name}")
    mode = document.get("mode")
    if mode not in ("quick", "full"):
        raise ExperimentError(f"{results_path}: mode is {mode!r}, not 'quick' or 'full'")
    backend = str(document.get("backend"))
    storage = document.get("storage_profile")
    default = experiment.storage_default.get(backend)
    return RunContext(backend=backend, quick=mode == "quick", seeds=len(document.get("seeds") or []) or None,
                      out_dir=target, storage_profile=storage if storage != default else None, quiet=True)


def resummarize(experiment: Experiment, results_path: str) -> int:
    """Summarise a results file's stored points again (``sweep.summarize_run``: this version's summary, verdicts,
    findings and checks), write it back with the revision that did it, and draw the figures again. Nothing is
    measured: every point's metrics, the environment and the dates of the measurement stay as they were."""
    document = load_results(results_path)
    ctx = stored_context(experiment, document, results_path, Path(results_path).parent)
    good = [r for r in document["points"] if not r.get("error")]
    summary, checks = summarize_run(experiment, good, ctx, stored=document.get("summary") or {})
    document["summary"], document["checks"] = summary, [asdict(c) for c in checks]
    # the source that judged it; results being rewritten beside it do not make that source dirty
    document["resummarized"] = {"at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                                "git": git_revision(exclude=OUTPUTS),
                                "version": experiment.version}
    write_results(Path(results_path), json_ready(document))
    figures = draw_figures(experiment, summary, ctx, Path(results_path).parent)
    print(f"resummarized {results_path}: {len(summary.get('findings', []))} findings, {len(checks)} checks; "
          f"{len(figures) // 2} figures drawn again")
    return exit_codes.OK


def print_result(result: ExperimentResult, indent: str = "") -> None:
    """The experiment's report against its claim, failed points, sanity checks and the files written."""
    exp, ctx = result.experiment, result.ctx
    storage = exp.storage(ctx)
    seeds = len(exp.seed_list(ctx))
    where = f", checkpoint storage {storage}" if storage else ""
    out: list[str] = [f"== {exp.describe()}  [{ctx.backend}, {ctx.mode}, {seeds} seed{'s' * (seeds != 1)}{where}]"]
    if exp.claim:
        out.append(f"   claim under test: {exp.claim}")
    stored = (result.summary or {}).get("conditions")
    conditions = [Condition(**c) for c in stored] if stored is not None else exp.conditions(ctx)
    out += ["   " + line for line in header_lines(conditions)]
    if result.reused:
        out.append(f"   {result.reused} of {len(result.records) + len(result.remaining)} points were measured by an "
                   "earlier run of this code and reused (--fresh measures them again)")
    if result.remaining:
        out.append(f"   STOPPED AT THE BUDGET: {len(result.records)} of {len(result.records) + len(result.remaining)} "
                   f"points measured, {len(result.remaining)} remain; run the same command again to measure them "
                   f"(results.json is written once every point is measured; the units are in {result.out_dir}/units)")
        print("\n".join(indent + line for line in out))
        return
    if result.unavailable:
        out.append(f"   BACKEND NOT AVAILABLE: {result.unavailable}")
        if not result.summary:
            out.append("   nothing was measured; no numbers are reported.")
            out.append(f"   written: {result.results_path}")
            print("\n".join(indent + line for line in out))
            return
        out.append("   the points that could run are summarised below; the others are missing, not estimated.")
    out += ["   " + line for line in exp.report(result.summary, ctx)]
    skipped = [r for r in result.failed_points if r.get("skipped")]
    for record in result.failed_points:
        if not record.get("unavailable") and not record.get("skipped"):
            out.append(f"   POINT FAILED {record['id']}: {record['error']}")
    if skipped:
        out.append(f"   {len(skipped)} more points {skipped[0]['error']}")
    if result.checks:
        out.append("   sanity checks:")
        out += ["     " + check.describe() for check in result.checks]
    out.append(f"   written: {result.results_path}")
    for path in result.figures:
        if path.suffix == ".png":
            out.append(f"   figure:  {path} (and .pdf)")
        elif path.suffix != ".pdf":
            out.append(f"   written: {path}")
    print("\n".join(indent + line for line in out))
