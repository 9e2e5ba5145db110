"""The ``lightspeed`` command line: the one entry point; nothing imports this module.

    lightspeed validate SCENARIO.json
    lightspeed run SCENARIO.json --backend reference [--out OUTCOME.json] [--checkpoint DIR [--overwrite]]
                   [--storage-profile local_disk|hdfs|object_store]
    lightspeed check OUTCOME.json --scenario SCENARIO.json [--checkpoint DIR]
    lightspeed explore SCENARIO.json [--depth 2] [--workers N] [--master URL] [--out REPORT.json]
    lightspeed explore SCENARIO.json --backend spark-native --sample N [--seed S] [--workers K] [--master URL]
    lightspeed soak SCENARIO.json --backend spark|spark-native --seeds A..Z [--budget MIN] [--out DIR [--overwrite]]
    lightspeed diff SCENARIO.json --backends reference,sim [--out DIR]
    lightspeed demo [--out DIR]
    lightspeed experiment NAME ...
    lightspeed zoo [--only JIRA] [--out FILE] [--paper-out FILE] [--seed N]
    lightspeed cluster start|status|stop [--dir DIR]

Every subcommand does its work through library functions that raise typed
errors; ``main`` alone turns them into a one-line message and an exit code
(``exit_codes.py``).
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import signal
import sys
import textwrap
import threading
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Callable

from experiments import exit_codes
from experiments.arguments import once_only
from experiments.backends import (
    BACKEND_NAMES,
    BackendListError,
    MasterError,
    UnknownBackend,
    check_master,
    parse_backend_list,
    run_backend,
)
from experiments.cluster_cli import add_cluster_parser
from experiments.checkpoint_dir import Claim, CheckpointDirError, check_target, claimed, open_checkpoint
from experiments.demo import cmd_demo
from experiments.diff import claim_outputs, compare_backends, comparison_lines, options_per_backend
from experiments.experiment import ExperimentError
from experiments.experiment_cli import add_experiment_parser
from experiments.exploration import explore_with_progress, report_lines
from experiments.explore_native import cmd_explore_native
from experiments.fault_soak import SoakError, cmd_soak
from experiments.input_files import InputFileError, check_regular, load_scenario
from experiments.judging import fired_lines, load_outcome, tally, unfired_lines, verdict_lines
from experiments.output_paths import OutputPathError, output_dir, output_file, write_text
from experiments.zoo import DEFAULT_OUT as ZOO_OUT
from experiments.zoo import JIRAS as ZOO_JIRAS
from experiments.zoo import ZooError, all_held, resolve, run_zoo, table_lines, write_rows
from reference.protocol.backend import BackendError, BackendUnavailable, RunOptions
from reference.judge.explorer import ExplorationInterrupted
from reference.judge.oracles import check_outcome, failures
from reference.protocol.modes import mode_of
from reference.protocol.outcome import OutcomeError
from reference.language.scenario import Scenario, ScenarioError
from reference.language.size import MATERIALISED, explore_refusal, refusal
from reference.protocol.storage import CheckpointFormatError
from reference.protocol.storage_profiles import STORAGE_PROFILES, StorageProfileError

DEFAULT_DIFF_BACKENDS = "reference,sim"
DEFAULT_DEMO_BACKENDS = "reference,sim,spark"
BAD_INPUT_ERRORS = (ScenarioError, OutcomeError, BackendError, UnknownBackend, BackendListError, ExperimentError,
                    CheckpointDirError, InputFileError, ZooError, StorageProfileError, OutputPathError, MasterError,
                    SoakError)
WORKERS_PER_CORE = 4   # explore --workers: more processes than this per core only contend for the cores


# ------------------------------------------------------------------ commands


def cmd_validate(args: argparse.Namespace) -> int:
    scenario = load_scenario(args.scenario)
    print(f"{args.scenario}: valid scenario {scenario.name!r} (seed {scenario.seed}, "
          f"operator {scenario.operator.kind}, {len(scenario.faults)} fault(s))")
    for path, why in mode_of(scenario).unsupported_reasons(scenario):
        print(f"  note: explores an unsupported combination ({path}): {why}")
    large = refusal(scenario, MATERIALISED)
    if large is not None:
        print(f"  note: too large for the reference, the simulator's data mode and the Spark backends: {large}")
    return exit_codes.OK


def _run_options(args: argparse.Namespace) -> RunOptions:
    """The options given on the command line, each checked where it can be before anything runs (each backend
    refuses those it does not take)."""
    check_master(getattr(args, "master", None))
    workdir = getattr(args, "workdir", None)
    if workdir is not None:
        output_dir(workdir, "the spark backends' work files (--workdir)")
        checkpoint = getattr(args, "checkpoint", None)
        if checkpoint is not None and _overlap(checkpoint, workdir):
            raise CheckpointDirError(f"--checkpoint {checkpoint} and --workdir {workdir} overlap: the spark backends "
                                     f"write (and resume) their own checkpoint in {Path(workdir) / 'checkpoint'}, "
                                     "and --checkpoint gets a copy of it; give a --checkpoint outside --workdir")
        if (Path(workdir) / "checkpoint" / "metadata").exists():
            print(f"note: --workdir {workdir} holds a checkpoint ({Path(workdir) / 'checkpoint'}): this run RESUMES "
                  "it rather than starting afresh; give a new --workdir to start afresh", file=sys.stderr)
    profile = getattr(args, "profile", None)
    if profile is not None and os.path.lexists(profile):   # a profile file (else a shipped profile's name)
        check_regular(profile, "a cost profile JSON file")
    given = {name: getattr(args, name, None)
             for name in ("profile", "sim_mode", "master", "workdir", "crash", "group", "storage_profile")}
    return RunOptions(**{k: v for k, v in given.items() if v is not None})


def _overlap(a: str, b: str) -> bool:
    """Whether one of the two paths is the other or lies inside it (after resolving links)."""
    first, second = Path(os.path.realpath(a)), Path(os.path.realpath(b))
    return first == second or first in second.parents or second in first.parents


def cmd_run(args: argparse.Namespace) -> int:
    if args.overwrite and args.checkpoint is None:
        raise CheckpointDirError("--overwrite replaces the checkpoint --checkpoint DIR names; without --checkpoint "
                                 "there is nothing to overwrite (the outcome --out names is replaced anyway)")
    scenario = load_scenario(args.scenario)
    options = _run_options(args)
    if args.checkpoint is not None:
        check_target(args.checkpoint, scenario, overwrite=args.overwrite)   # its refusals come first
    inside = [p for p in (args.checkpoint, args.workdir and os.path.join(args.workdir, "checkpoint")) if p]
    out = output_file(args.out, "the outcome (--out)", inputs=[args.scenario], inside=inside) \
        if args.out is not None else None
    if args.checkpoint is None:
        return _run_and_write(args, scenario, options, out, None)
    with claimed(args.checkpoint, scenario, overwrite=args.overwrite) as claim:
        return _run_and_write(args, scenario, options, out, claim)


def _run_and_write(args: argparse.Namespace, scenario: Scenario, options: RunOptions, out: Path | None,
                   claim: Claim | None) -> int:
    print(f"running {scenario.name!r} on {args.backend} with seed {scenario.seed}", file=sys.stderr)
    started = time.perf_counter()
    result = run_backend(args.backend, scenario, options)
    print(f"{args.backend} finished in {time.perf_counter() - started:.2f} s", file=sys.stderr)
    text = result.outcome.to_json()
    if out is not None:
        write_text(out, text, "the outcome")
        print(f"outcome written to {out}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    if claim is not None:
        if result.checkpoint is None:
            print(f"note: backend {args.backend} keeps no checkpoint the reference can read; {claim.root} holds "
                  "none", file=sys.stderr)
        claim.write(result.checkpoint)
        if result.checkpoint is not None:
            print(f"checkpoint written to {claim.root}", file=sys.stderr)
    for line in fired_lines(scenario, result.outcome) + unfired_lines(scenario, result.outcome):
        print(shown(line), file=sys.stderr)
    if result.outcome.error is not None:
        print(f"the run stopped with an error: {result.outcome.error}", file=sys.stderr)
        return exit_codes.CHECK_FAILED
    return exit_codes.OK


def cmd_check(args: argparse.Namespace) -> int:
    scenario = load_scenario(args.scenario)
    outcome = load_outcome(args.outcome)
    storage = None
    if args.checkpoint is not None:
        storage, note = open_checkpoint(args.checkpoint)
        if note:
            print(f"note: {note}", file=sys.stderr)
    verdicts = check_outcome(scenario, outcome, storage)
    print(shown(f"{args.outcome}: {tally(verdicts)}"))
    print("\n".join(shown(part) for line in verdict_lines(verdicts) for part in line.split("\n")))
    for line in fired_lines(scenario, outcome) + unfired_lines(scenario, outcome):
        print(shown(line), file=sys.stderr)
    return exit_codes.CHECK_FAILED if failures(verdicts) else exit_codes.OK


def workers_ceiling() -> int:
    return WORKERS_PER_CORE * (os.cpu_count() or 1)


def cmd_explore(args: argparse.Namespace) -> int:
    check_master(args.master)
    if args.backend == "spark-native":
        return cmd_explore_native(args)
    if args.sample is not None:
        raise ExperimentError("--sample draws crash cuts for --backend spark-native; the reference explores all")
    scenario = load_scenario(args.scenario)
    large = explore_refusal(scenario)
    if large is not None:
        raise ExperimentError(f"{args.scenario}: cannot be explored: {large}")
    if args.workers is not None and args.workers < 1:
        raise ExperimentError(f"--workers {args.workers}: expected at least 1")
    if args.workers is not None and not args.master and args.workers > workers_ceiling():
        raise ExperimentError(f"--workers {args.workers}: expected 1 to {workers_ceiling()} ({WORKERS_PER_CORE} per "
                              "core of this machine); more processes only contend for the cores")
    out = output_file(args.out, "the exploration report (--out)", inputs=[args.scenario]) \
        if args.out is not None else None
    if args.master:
        from experiments.explore_spark import explore_on_spark
        report = explore_on_spark(scenario, args.master, depth=args.depth, shares=args.workers, quiet=args.quiet)
    else:
        report = explore_with_progress(scenario, depth=args.depth, workers=args.workers, quiet=args.quiet)
    print("\n".join(report_lines(report)))
    print("\n".join(report.tightness_lines()))
    for violation in report.violations:
        print(f"reproduce {violation.schedule} with: " + json.dumps(violation.reproduce)[:500])
    if out is not None:
        write_text(out, json.dumps({
            "summary": report.summary(), "schedules": report.schedules,
            "distinct_checkpoints": report.distinct_checkpoints, "truncated": report.truncated,
            "checkpoint_fingerprint": report.checkpoint_fingerprint, "seconds": round(report.seconds, 3),
            "bounds": report.tightness_dict(),
            "violations": [{"schedule": v.schedule, "verdicts": [x.to_dict() for x in v.verdicts],
                            "reproduce": v.reproduce} for v in report.violations]}, indent=1), "the report")
        print(f"report written to {out}", file=sys.stderr)
    return exit_codes.CHECK_FAILED if report.violations or report.truncated else exit_codes.OK


def cmd_diff(args: argparse.Namespace) -> int:
    names = parse_backend_list(args.backends, at_least=2)
    scenario = load_scenario(args.scenario)
    options = options_per_backend(names, _run_options(args))
    with ExitStack() as stack:
        keep = None
        if args.out is not None:
            keep = claim_outputs(stack, output_dir(args.out, "the outcomes and checkpoints (--out)"), names,
                                 scenario, overwrite=args.overwrite)
        comparison = compare_backends(scenario, names, options, keep, announce=lambda name: print(
            f"running on {name} ...", file=sys.stderr, flush=True))
    print("\n".join(comparison_lines(comparison)))
    for run in comparison.ran:
        assert run.result is not None
        for line in fired_lines(scenario, run.result.outcome):
            print(shown(f"{run.name}: {line}"))
        for line in unfired_lines(scenario, run.result.outcome):
            print(f"{run.name}: {line}", file=sys.stderr)
    if args.out:
        print(f"outcomes and checkpoints written under {args.out}")
    return comparison.exit_code


def cmd_zoo(args: argparse.Namespace) -> int:
    jiras = resolve(args.only)
    output_file(args.out, "the zoo's rows (--out)")
    if args.paper_out is not None:
        output_file(args.paper_out, "the zoo's rows for the paper (--paper-out)")
    if args.seed is not None:
        print(f"seed {args.seed}: the bugs run in a shuffled order", file=sys.stderr)
    start = time.perf_counter()
    rows = run_zoo(jiras, seed=args.seed,
                   announce=None if args.quiet else lambda jira: print(f"planting {jira} ...", file=sys.stderr,
                                                                      flush=True))
    print("\n".join(table_lines(rows)))
    print(f"{time.perf_counter() - start:.1f} s")
    out = Path(args.out)
    write_rows(rows, out)
    print(f"results written to {out}")
    if args.paper_out is not None:
        if len(rows) == len(ZOO_JIRAS):
            write_rows(rows, Path(args.paper_out))
            print(f"and to {args.paper_out}")
        else:
            print(f"{args.paper_out} not written: --only ran part of the zoo")
    return exit_codes.OK if all_held(rows) else exit_codes.CHECK_FAILED


# -------------------------------------------------------------------- parser


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions as written, and an option's default in its help when it has one."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if action.default not in (None, False, argparse.SUPPRESS) and action.option_strings \
                and "%(default)" not in text:
            text += " (default: %(default)s)"
        return text


SCHEME_TEXT = textwrap.fill(exit_codes.SCHEME, 100)


def _sub(sub: Any, name: str, summary: str, description: str, fn: Callable[[argparse.Namespace], int]
         ) -> argparse.ArgumentParser:
    p = once_only(sub.add_parser(name, help=summary, description=description + "\n\n" + SCHEME_TEXT,
                                 formatter_class=_Formatter))
    p.set_defaults(fn=fn)
    return p


def _spark_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--master", default=None,
                   help="spark backends: the Spark master (local[N] or spark://host:port; the backend's default "
                        "is local[2]); on a cluster every worker must reach the checkpoint path")


def _sim_mode_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--sim-mode", choices=("data", "volume"), default=None,
                   help="sim backend: data mode holds every record (and writes a checkpoint the oracles read); "
                        "volume mode counts records instead, for scenarios too large to hold (no checkpoint, and "
                        "the oracles that need records or files cannot judge it); the backend's default: data")


def _storage_profile_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--storage-profile", default=None, metavar="NAME",
                   help=f"the checkpoint storage's latency ({', '.join(STORAGE_PROFILES)}): the spark engine "
                        "sleeps each checkpoint operation's seeded draw from the named profile, on the driver "
                        "and in the tasks; the sim charges the same profile on its clock")


def build_parser() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """The top-level parser and each subcommand's parser by name."""
    parser = argparse.ArgumentParser(
        prog="lightspeed", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Reference implementation of Spark Structured Streaming's Project Lightspeed protocol: run "
                    "scenarios on a backend,\njudge outcomes with the reference oracles, explore faults, run the "
                    "experiments.",
        epilog=f"backends: {', '.join(BACKEND_NAMES)}\n{SCHEME_TEXT}\n\n"
               "Run 'lightspeed COMMAND --help' for a command's options.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    subs: dict[str, argparse.ArgumentParser] = {}

    p = subs["validate"] = _sub(sub, "validate", "check a scenario file and explain what is wrong",
                                "Read a scenario JSON file (spec section 1) and validate it; an invalid one is named "
                                "by file and field,\nwith what was expected.", cmd_validate)
    p.add_argument("scenario", help="the scenario JSON file")

    p = subs["run"] = _sub(sub, "run", "run a scenario on one backend and write its outcome JSON",
                           "Run a scenario on one backend and write its outcome (spec section 4); exit 1 when the "
                           "run stopped with an error.", cmd_run)
    p.add_argument("scenario", help="the scenario JSON file")
    p.add_argument("--backend", choices=BACKEND_NAMES, default="reference", help="where the scenario runs")
    p.add_argument("--profile", default=None,
                   help="sim backend: a cost-model profile (a shipped name such as local_spark, or a JSON file)")
    p.add_argument("--out", default=None, help="write the outcome here (default: stdout)")
    p.add_argument("--checkpoint", default=None, metavar="DIR",
                   help="also write the run's checkpoint directory here; refused if DIR holds a checkpoint, "
                        "anything that is not a checkpoint's, or is /, the home or the working directory")
    p.add_argument("--overwrite", action="store_true",
                   help="with --checkpoint: replace the checkpoint DIR holds, removing only its own files, once "
                        "the run has produced the new one; a directory holding other files is still refused")
    _sim_mode_option(p)
    _spark_options(p)
    p.add_argument("--workdir", default=None,
                   help="spark backends: where checkpoint/, coord/ and local/ go (default: a new temporary "
                        "directory); an existing checkpoint there is resumed")
    p.add_argument("--crash", choices=("in-process", "process"), default=None,
                   help="spark backend: a driver_crash fault drops the incarnation in-process (the backend's "
                        "default), or SIGKILLs the driver process and a supervisor starts a new one")
    p.add_argument("--group", type=int, default=None, metavar="G",
                   help="spark backend: run G consecutive batches per Spark job (group scheduling, as in "
                        "Drizzle); needs a task slot per state partition (the backend's default: 1, a job per "
                        "batch)")
    _storage_profile_option(p)

    p = subs["check"] = _sub(sub, "check", "judge an outcome from any backend with every oracle (exit 0 iff all hold)",
                             "Judge an outcome file from any backend with every oracle of spec section 5 (and the "
                             "checks\nthe README adds). Exit 0 when every oracle holds, 1 when one fails, 2 when "
                             "the outcome,\nthe scenario or the checkpoint directory cannot be read.", cmd_check)
    p.add_argument("outcome", help="the outcome JSON file")
    p.add_argument("--scenario", required=True, help="the scenario JSON file the outcome is of")
    p.add_argument("--checkpoint", default=None, metavar="DIR",
                   help="the run's checkpoint directory, for the checkpoint, reconstruction and lineage oracles "
                        "(without it they report n/a); snapshots in a backend's own format are decoded with the "
                        "reader its metadata names")

    p = subs["explore"] = _sub(sub, "explore", "run every single-fault schedule and check every oracle",
                               "Explore every single-fault schedule of a scenario on the reference model (every "
                               "crash cut\nand every other fault at every step) and check every oracle. The plan "
                               "is printed up front,\na progress bar runs on stderr, and the summary says "
                               "INCOMPLETE when the explorer's cap cut it\nshort (exit 1). Ctrl-C stops every "
                               "worker and says where it got to (exit 130).", cmd_explore)
    p.add_argument("scenario", help="the scenario JSON file (its own faults are ignored)")
    p.add_argument("--depth", type=int, choices=(1, 2), default=1, help="2 adds a second crash during recovery")
    p.add_argument("--out", default=None, help="write the report JSON here")
    p.add_argument("--workers", type=int, default=None,
                   help=f"processes sharing the schedules (default: one per core, at most 4; at most "
                        f"{WORKERS_PER_CORE} per core); with --master, the Spark tasks (default: two per task slot)")
    p.add_argument("--master", default=None, metavar="URL",
                   help="spread the schedules as Spark tasks over this cluster (spark://HOST:PORT, or local[N]); "
                        "the report is the same as a local run's")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--backend", choices=("reference", "spark-native"), default="reference",
                   help="spark-native: run --sample crash cuts of the reference's on Spark's own Structured "
                        "Streaming, each a driver crash inside its checkpoint code (experiments/explore_native.py)")
    p.add_argument("--sample", type=int, default=None, metavar="N",
                   help="spark-native: how many crash cuts to draw")
    p.add_argument("--seed", type=int, default=0, help="spark-native: the seed that draws the crash cuts")

    p = subs["soak"] = _sub(sub, "soak", "seeded random faults on a Spark backend, each seed judged (VOPR-style)",
                            "Run a scenario on a Spark backend once per seed, each seed with one to three faults "
                            "drawn at random\nsteps, batches and partitions from the kinds the backend runs, and "
                            "judge each outcome with every\noracle. A violation is shrunk to a smaller scenario "
                            "that still breaks the oracle, written to --out.\nThe report gives the seeds per hour "
                            "(experiments/fault_soak.py). Exit 1 when a seed broke an oracle.", cmd_soak)
    p.add_argument("scenario", help="the scenario JSON file (its own faults are replaced)")
    p.add_argument("--backend", choices=("spark", "spark-native"), required=True,
                   help="the Spark backend the seeds run on: the engine, or Spark's own Structured Streaming")
    p.add_argument("--seeds", required=True, metavar="A..Z", help="the seeds to run, inclusive (or one seed)")
    p.add_argument("--budget", type=float, default=None, metavar="MIN",
                   help="start no seed after this many minutes")
    p.add_argument("--out", default=os.path.join("results", "soak"), metavar="DIR",
                   help="where the report and each shrunk violation go")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an earlier soak's report and shrunk scenarios in --out (refused without it)")
    _spark_options(p)

    p = subs["diff"] = _sub(sub, "diff", "run several backends, judge each, and compare their outcomes",
                            "Run a scenario on several backends, judge each outcome with every oracle on its own "
                            "checkpoint,\nand compare the outcomes (batches, watermarks, state, sink). A backend "
                            "that refuses the\nscenario or cannot run here is reported with the reason, and the "
                            "others are still compared.\nExit 1 when an oracle fails or outcomes differ; else 3 "
                            "when a backend is unavailable, 2 when\none refused the scenario.", cmd_diff)
    p.add_argument("scenario", help="the scenario JSON file")
    p.add_argument("--backends", default=DEFAULT_DIFF_BACKENDS, metavar="A,B[,...]",
                   help=f"two or more of {', '.join(BACKEND_NAMES)}, separated by commas")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="keep each outcome as DIR/outcome-<backend>.json and its checkpoint as "
                        "DIR/checkpoint-<backend>/ (a checkpoint already there is refused, as run --checkpoint "
                        "refuses one, unless --overwrite)")
    p.add_argument("--overwrite", action="store_true",
                   help="with --out: replace the checkpoints DIR/checkpoint-<backend>/ hold, removing only their "
                        "own files")
    p.add_argument("--profile", default=None, help="sim backend: a cost-model profile (shipped name or JSON file)")
    _sim_mode_option(p)
    _spark_options(p)
    _storage_profile_option(p)

    p = subs["demo"] = _sub(sub, "demo", "the README's main job: a crash replayed on every backend, judged and "
                                         "compared; the explorer; the quick offset-management experiment",
                            "A running count whose driver crashes right after writing offsets/3, replayed on "
                            "every backend,\njudged by every oracle and compared; every single-fault schedule of "
                            "it explored on the\nreference model; and the quick offset-management experiment on "
                            "the simulator.", cmd_demo)
    p.add_argument("--out", default=os.path.join("results", "demo"), help="where outcomes, checkpoints, results "
                                                                         "and figures go")
    p.add_argument("--backends", default=DEFAULT_DEMO_BACKENDS, metavar="A,B[,...]",
                   help=f"backends for the failure-replay differential, of {', '.join(BACKEND_NAMES)}")
    _spark_options(p)

    p = subs["zoo"] = _sub(sub, "zoo", "plant each real Spark state-store bug (spec section 6) and show which "
                                       "check catches it",
                           "The bug zoo. For each of the 11 real Spark state-store bugs of spec section 6, run the "
                           "failing\nsequence of its bug report on a copy of the RocksDB store with that one mistake "
                           "planted, and on\nthe real store, and judge both with the same checks (steps_complete, "
                           "state_equivalence,\nreconstruction, lineage, checkpoint, maintenance). Each run is judged as every step "
                           "of its sequence ends\nand at the end. Prints one row per bug: which checks caught it, "
                           "after which step and how\nmany seconds into the planted run a check first failed, and "
                           "whether the real store passes\nthe same sequence; then what the first failed check found.\nWrites the rows as JSON. Exit 1 "
                           "when a planted bug is not caught or the real store fails a\nsequence. No JVM: the RocksDB "
                           "store and the reference's loader only.", cmd_zoo)
    p.add_argument("--only", action="append", metavar="JIRA",
                   help="run only this bug (SPARK-43404, 43404; repeat the option or separate ids with commas); "
                        f"one of {', '.join(ZOO_JIRAS)}")
    p.add_argument("--out", default=str(ZOO_OUT), metavar="FILE", help="write the rows as JSON here")
    p.add_argument("--paper-out", default=None, metavar="FILE",
                   help="also write the rows here when the whole zoo ran (paper/collect_results.py gives the file "
                        "the paper reads; nothing is written into the source tree unless named)")
    p.add_argument("--seed", type=int, default=None,
                   help="run the bugs in an order shuffled by this seed (no entry may depend on another); the "
                        "sequences themselves are fixed")
    p.add_argument("--quiet", action="store_true", help="do not announce each bug on stderr")

    subs["experiment"] = add_experiment_parser(sub)
    subs["cluster"] = add_cluster_parser(sub, _Formatter)
    return parser, subs


# ---------------------------------------------------------------------- main


def _unknown_command(parser: argparse.ArgumentParser, commands: list[str], word: str) -> int:
    near = difflib.get_close_matches(word, commands, n=1)
    hint = f"; did you mean {near[0]!r}?" if near else ""
    parser.print_usage(sys.stderr)
    print(f"lightspeed: error: unknown command {word!r}{hint} (commands: {', '.join(commands)})", file=sys.stderr)
    return exit_codes.BAD_INPUT


MESSAGE_CHARS = 1_000   # an error quotes what it names; a hostile file must not turn that into megabytes


def shown(text: str, limit: int = MESSAGE_CHARS) -> str:
    """``text`` as it may reach the terminal: its first ``limit`` characters (saying how many there were in all)
    with every control character (a terminal escape, a NUL, a carriage return) escaped as ``\\xNN``, so a file or
    folder name cannot forge what is printed."""
    safe = "".join(c if c.isprintable() or c == " " else f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}"
                   for c in text[:limit])
    return safe if len(text) <= limit else f"{safe}... ({len(text):,} characters in all)"


def said(exc: BaseException) -> str:
    """An error's message on one line, escaped and cut at ``MESSAGE_CHARS`` (``shown``)."""
    return shown(" ".join(str(exc).splitlines()))


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv``, run the subcommand, and turn its typed errors into a message and an exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser, subs = build_parser()
    if argv and not argv[0].startswith("-") and argv[0] not in subs:
        return _unknown_command(parser, list(subs), argv[0])
    try:
        args, extra = parser.parse_known_args(argv)
        if extra:   # an unknown option belongs to the subcommand: show its usage, not the top level's
            subs[args.command].error(f"unrecognized arguments: {' '.join(extra)}")
    except SystemExit as exc:   # argparse has printed the usage and the error (or the help)
        return exc.code if isinstance(exc.code, int) else exit_codes.BAD_INPUT
    previous = signal.signal(signal.SIGTERM, _terminated) if threading.current_thread() is threading.main_thread() \
        else None
    try:
        return int(args.fn(args))
    except ExplorationInterrupted as exc:
        print(f"\ninterrupted: {exc}; the exploration is INCOMPLETE", file=sys.stderr)
        return exit_codes.INTERRUPTED
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return exit_codes.INTERRUPTED
    except BrokenPipeError:   # the reader of the output went away (| head): stop quietly, as an interrupt
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())   # so exit's flush has nowhere to fail
        return exit_codes.INTERRUPTED
    except BackendUnavailable as exc:
        print(f"error: {said(exc)}", file=sys.stderr)
        return exit_codes.UNAVAILABLE
    except CheckpointFormatError as exc:   # a checkpoint file an oracle had to read is damaged: a failed check
        print(f"FAIL: the checkpoint cannot be read: {said(exc)}", file=sys.stderr)
        return exit_codes.CHECK_FAILED
    except BAD_INPUT_ERRORS as exc:
        print(f"error: {said(exc)}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _terminated(_signum: int, _frame: Any) -> None:
    """SIGTERM stops a command as Ctrl-C does: what it was writing is undone or finished whole, never left half
    (``checkpoint_swap.py``), and it exits 130."""
    raise KeyboardInterrupt


if __name__ == "__main__":
    sys.exit(main())
