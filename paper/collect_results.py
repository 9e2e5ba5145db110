"""Measure the units the paper reads, resumably and within a budget (``make paper-results``); say what is fresh.

Every number and figure in the paper comes from a file under
``paper/results/``. Each run the paper reports (``RUNS``: every backend of
every experiment in ``experiments.registry``, with the options its definition
states) is a set of *units* (one point x seed each) kept in its ledger,
``paper/results/<experiment>/<backend>-<mode>/units/`` (``experiments.ledger``):
written as each ends, with its commit, the code it measured and how busy the
machine was; ``results.json`` is assembled from them once all are there.

``--status`` measures nothing. It prints, for every unit the paper uses,
whether it is fresh, stale (the code it measured changed since, by the rule of
``experiments.staleness``), dirty (measured from a tree with uncommitted
changes), noisy (other processes used more than ``machine_load.NOISY_SHARE``
of the CPU while it ran), failed or missing, grouped by run and by reason; it
writes the same to ``paper/results/README.md``, and exits 1 unless every unit
is fresh.

Without ``--status`` it measures, in order, native Spark's runs first, then
the engine's, then the simulator's, every unit that is not fresh (a run
reuses its fresh units), each run through the project's own command line
(``lightspeed experiment NAME --out paper/results/...``). ``--budget MINUTES``
spends that much and no more: no unit is started that is not expected to end
within the budget (a started unit always ends: it cannot be stopped half-way
without losing it), and what remains is said at the end, for the next stretch.
An interrupted collection (Ctrl-C, a closed laptop) loses at most the unit
that was running. The explorer and the bug zoo are registered experiments of the reference backend, measured
last.

``--quick`` plans the experiments' quick modes instead (minutes, what
CI-sized checks use); ``--backends sim`` keeps to the simulator.

Usage::

    python paper/collect_results.py --status [--quick] [--backends ...] [--only NAME ...]
    python paper/collect_results.py [--budget MINUTES] [--quick] [--backends sim,spark,spark-native]
                                    [--only NAME ...] [--seeds N] [--dry-run]
    python paper/collect_results.py --redraw [--only NAME ...]

``--redraw`` runs nothing: it draws the figures of every stored run under
``paper/results/`` again from its ``results.json`` (after a change to how
the figures are drawn), leaving the numbers as they are.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "paper" / "results"
SCENARIOS = ROOT / "experiments" / "scenarios"
# the order runs are measured in (the reference's are the explorer and the bug zoo, deterministic but timed)
BACKEND_ORDER = ("spark-native", "spark", "sim", "reference")
EXAMPLES_SHOWN = 2          # a status group names this many of its units

from experiments.exit_codes import INTERRUPTED  # noqa: E402 - the repository root is on the path now
from experiments.ledger import (FRESH, MIN_VERDICT_SEEDS, RERUN, STATUSES, CodeKeys, RunPlan,  # noqa: E402
                                RunStatus, run_status)
from experiments.machine_load import NOISY_SHARE  # noqa: E402
from experiments.stopping import HALF_WIDTH  # noqa: E402


@dataclass(frozen=True)
class Run:
    """One experiment run the paper reports: ``lightspeed experiment NAME --backend BACKEND [--quick]``."""

    experiment: str
    backend: str
    # the rough wall-clock time of the full mode on a 2-core machine, for the estimates printed up front
    full_minutes: float
    quick_minutes: float
    options: tuple[str, ...] = ()      # more options of ``lightspeed experiment`` (the paper's settings)

    def out_dir(self, quick: bool) -> Path:
        return RESULTS / self.experiment / self.plan(quick).folder

    def plan(self, quick: bool, seeds: int | None = None) -> RunPlan:
        """The run's units as the ledger plans them (its options' ``--seeds`` and ``--storage-profile`` read)."""
        parser = argparse.ArgumentParser(prog=f"{self.experiment} options", add_help=False)
        parser.add_argument("--seeds", type=int, default=None)
        parser.add_argument("--storage-profile", default=None)
        known, _rest = parser.parse_known_args(list(self.options))
        return RunPlan(self.experiment, self.backend, "quick" if quick else "full",
                       seeds if seeds is not None else known.seeds, known.storage_profile)


def registry_runs() -> tuple[Run, ...]:
    """The runs behind the paper: every backend of every registered experiment (``experiments.registry``), with
    its times and options as the experiment's definition states them (``Experiment.runs``); native Spark's first,
    then the engine's, then the simulator's (issue 39: Spark's own runs first)."""
    from experiments.registry import EXPERIMENTS, get_experiment
    runs = [Run(name, backend, run.full_minutes, run.quick_minutes, run.options)
            for name in EXPERIMENTS for backend, run in get_experiment(name).runs.items()]
    return tuple(sorted(runs, key=lambda r: BACKEND_ORDER.index(r.backend) if r.backend in BACKEND_ORDER
                        else len(BACKEND_ORDER)))


RUNS: tuple[Run, ...] = registry_runs()


def _say(text: str) -> None:
    print(text, flush=True)


def run_experiment(run: Run, quick: bool, seeds: int | None, dry_run: bool,
                   budget_minutes: float | None = None) -> dict[str, Any]:
    """Run one experiment into its results folder: its units that are not fresh (the run reuses the others),
    within ``budget_minutes``; ``results.json`` is assembled once every unit is there."""
    target = run.out_dir(quick)
    cmd = [sys.executable, "-m", "experiments.cli", "experiment", run.experiment, "--backend", run.backend,
           "--no-spark", "--out", str(target), "--overwrite"]
    cmd += list(run.options)
    if quick:
        cmd.append("--quick")
    if seeds is not None:
        cmd += ["--seeds", str(seeds)]
    if budget_minutes is not None:
        cmd += ["--budget", f"{budget_minutes:.2f}"]
    ran = _lightspeed(cmd, dry_run)
    if ran is None:
        return {"status": "dry-run", "seconds": 0.0}
    returncode, seconds = ran
    status = {0: "ok", 1: "checks failed (kept)", 2: "bad input", 3: "backend not available",
              INTERRUPTED: "stopped (the budget ended, or interrupted); its units are kept"}.get(
        returncode, f"exit {returncode}")
    return {"status": status, "seconds": seconds}


def _lightspeed(cmd: list[str], dry_run: bool) -> tuple[int, float] | None:
    """Print and run one ``lightspeed`` command from the repository root; its exit code and seconds (None: dry run)."""
    _say("   $ " + " ".join(cmd[1:]))
    if dry_run:
        return None
    started = time.perf_counter()
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run(cmd, cwd=ROOT, env=env)
    return proc.returncode, time.perf_counter() - started


def redraw_all(only: list[str] | None) -> int:
    """Every stored run's figures drawn again from its results.json, in place; 1 if one could not be drawn."""
    from experiments.experiment_cli import redraw_figures
    from experiments.registry import DEFINITIONS, get_experiment
    failed = 0
    for results in sorted(RESULTS.glob("*/*/results.json")):
        name = results.parent.parent.name
        if name not in DEFINITIONS or (only and name not in only):
            continue
        if not json.loads(results.read_text(encoding="utf-8")).get("summary"):
            _say(f"   {results.relative_to(ROOT)}: nothing measured, no figures")
            continue
        try:
            drawn = redraw_figures(get_experiment(name), str(results))
        except Exception as exc:  # noqa: BLE001 - one broken run must not stop the others; it is reported
            failed += 1
            _say(f"   {results.relative_to(ROOT)}: FAILED {exc}")
            continue
        _say(f"   {results.relative_to(ROOT)}: {', '.join(p.name for p in drawn)}")
    return 1 if failed else 0


# ------------------------------------------------------------------ status


def run_statuses(runs: list[Run], quick: bool, seeds: int | None) -> list[RunStatus]:
    """The ledger's status of every unit of ``runs``, against the code at HEAD."""
    head = CodeKeys.at_head()
    return [run_status(run.out_dir(quick), run.plan(quick, seeds), head) for run in runs]


def _head_label() -> str:
    from experiments.ledger import OUTPUTS
    from experiments.provenance import git_revision
    git = git_revision(exclude=OUTPUTS)
    if git is None:
        return "no git checkout (every unit counts as dirty)"
    return f"HEAD {git['commit'][:10]}" + (" (the tree has uncommitted changes)" if git["dirty"] else "")


def _groups(status: RunStatus) -> list[tuple[str, str, list[str]]]:
    """The run's units that are not fresh, grouped by status and reason (worst status first)."""
    groups: dict[tuple[str, str], list[str]] = {}
    for unit in status.units.values():
        if unit.status != FRESH:
            groups.setdefault((unit.status, unit.reason), []).append(unit.point_id)
    order = {name: i for i, name in enumerate(reversed(STATUSES))}
    return [(st, reason, ids) for (st, reason), ids in sorted(groups.items(), key=lambda kv: order[kv[0][0]])]


def _counts_text(status: RunStatus) -> str:
    counts = status.counts()
    return ", ".join(f"{n} {name}" for name, n in counts.items() if n) or "no units"


def _verdict_text(status: RunStatus) -> str:
    if status.verdicts_allowed:
        return "verdicts may be given"
    if status.exploratory:
        return f"exploratory ({len(status.seeds)} seed{'s' * (len(status.seeds) != 1)}, fewer than {MIN_VERDICT_SEEDS})"
    return "no verdict until every unit is fresh"


def status_lines(statuses: list[RunStatus]) -> list[str]:
    """The summary ``--status`` prints (and ``make paper``): per run, its counts, then every group of units that
    is not fresh with its reason."""
    total = {name: sum(st.counts()[name] for st in statuses) for name in STATUSES}
    units = sum(total.values())
    out = [f"paper results against {_head_label()}: {len(statuses)} runs, {units} units: "
           + ", ".join(f"{n} {name}" for name, n in total.items() if n)]
    for st in statuses:
        fresh = st.counts()[FRESH]
        commits = ", ".join(c[:10] for c in st.commits) or "-"
        out.append(f"  {st.plan.label:<48} {fresh:>4}/{len(st.units):<4} fresh   {_verdict_text(st)}; "
                   f"measured at {commits}")
        for name, reason, ids in _groups(st):
            shown = ", ".join(ids[:EXAMPLES_SHOWN]) + (", ..." if len(ids) > EXAMPLES_SHOWN else "")
            out.append(f"      {len(ids):>4} {name:<7} {reason}  [{shown}]")
    return out


def readme_text(statuses: list[RunStatus]) -> str:
    """``paper/results/README.md``: the ledger's rule and the status of every unit, from the same data as
    ``--status``."""
    lines = [
        "# paper/results: the measurements the paper reads",
        "",
        "Written by `python paper/collect_results.py --status` (do not edit): the rule first, then the state of every",
        "unit the paper uses, against " + _head_label() + ".",
        "",
        "## The rule",
        "",
        "- A **unit** is one point x seed of one experiment on one backend and mode. Each is kept in",
        "  `<experiment>/<backend>-<mode>/units/` as soon as it ends, with its commit, whether the tree was dirty,",
        "  its start and end, how busy the machine was and the key of the code it measured; `results.json` is",
        "  assembled from the units once every planned unit is there (`experiments/ledger.py`).",
        "- **Stale** is computed, never set: a unit is stale when the key of the code it measured differs from the",
        "  key of the same code at HEAD. That code is found from the imports, not listed: the experiment",
        "  definition's `points` and `measure` and what they name, every project module those import (and so on),",
        "  the backend's modules, the runner's measurement (`experiments/measure.py`), and the data files of the",
        "  packages reached (cost profiles; the Java sources of native runs). Python is hashed without comments,",
        "  docstrings or layout (`experiments/staleness.py`). A new experiment version or a changed point is stale",
        "  too.",
        f"- **Noisy**: other processes used more than {NOISY_SHARE:.0%} of the machine's CPU while a wall-clock unit",
        "  (engine, native Spark) ran, from `/proc/stat` minus this process tree (`experiments/machine_load.py`). A",
        "  noisy unit is kept, gives no verdict, and is measured again. Simulator units run in simulated time and",
        "  are never noisy.",
        "- **Dirty**: measured from a tree with uncommitted changes. **Failed**: its measurement raised.",
        f"- **Adaptive stopping**: a timed point runs until the 95% bootstrap interval of its p50 batch duration is",
        f"  within +-{HALF_WIDTH:.0%}, or its budget ends; its record says which (`experiments/stopping.py`).",
        f"- No verdict rests on fewer than {MIN_VERDICT_SEEDS} seeds: a run with fewer is exploratory.",
        "- `make paper-results BUDGET=90` measures, for 90 minutes at most, the units that are not fresh (native",
        "  Spark's first); it resumes where the last stretch stopped.",
        "",
        "## Status",
        "",
        "| run | units | fresh | noisy | dirty | failed | stale | missing | seeds | measured at | verdicts |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for st in statuses:
        c = st.counts()
        commits = " ".join(f"`{x[:10]}`" for x in st.commits) or "-"
        lines.append(f"| {st.plan.label} | {len(st.units)} | " + " | ".join(str(c[n]) for n in STATUSES)
                     + f" | {len(st.seeds)} | {commits} | {_verdict_text(st)} |")
    lines += ["", "## What is not fresh, and why", ""]
    for st in statuses:
        groups = _groups(st)
        if not groups:
            continue
        lines.append(f"- **{st.plan.label}**")
        for name, reason, ids in groups:
            shown = ", ".join(f"`{i}`" for i in ids[:EXAMPLES_SHOWN]) + (", ..." if len(ids) > EXAMPLES_SHOWN else "")
            lines.append(f"  - {len(ids)} {name}: {reason} ({shown})")
    return "\n".join(lines) + "\n"


def print_status(runs: list[Run], quick: bool, seeds: int | None, readme: bool) -> int:
    """``--status``: the summary, ``paper/results/README.md`` (unless not ``readme``), 1 unless all is fresh."""
    statuses = run_statuses(runs, quick, seeds)
    for line in status_lines(statuses):
        _say(line)
    if readme:
        from experiments.output_paths import write_text
        write_text(RESULTS / "README.md", readme_text(statuses), "the status of the paper's results")
        _say(f"written: {(RESULTS / 'README.md').relative_to(ROOT)}")
    return 0 if all(st.complete for st in statuses) else 1


# ------------------------------------------------------------------ collecting


def collect(runs: list[Run], quick: bool, seeds: int | None, budget_minutes: float | None, dry_run: bool) -> int:
    """Measure every unit of ``runs`` that is not fresh, run after run, within the budget. 0 when nothing failed to run (a stop at the budget is not a failure: it says what remains)."""
    started = time.perf_counter()
    deadline = None if budget_minutes is None else started + budget_minutes * 60.0

    def left() -> float | None:
        return None if deadline is None else max(0.0, (deadline - time.perf_counter()) / 60.0)

    statuses = run_statuses(runs, quick, seeds)
    todo = [(run, st) for run, st in zip(runs, statuses) if any(u.status in RERUN for u in st.units.values())]
    mode = "quick" if quick else "full (the paper's settings)"
    _say(f"paper results, {mode} mode: {len(runs)} runs, {sum(len(st.units) for st in statuses)} units; "
         f"{len(todo)} runs have units to measure"
         + (f"; budget {budget_minutes:g} min" if budget_minutes is not None else "") + ".")
    log = []
    for i, (run, st) in enumerate(todo, 1):
        remaining = left()
        if remaining is not None and remaining <= 0:
            _say(f"the budget has ended; not started: {', '.join(s.plan.label for _r, s in todo[i - 1:])}")
            break
        wanted = sum(u.status in RERUN for u in st.units.values())
        estimate = wanted * (run.quick_minutes if quick else run.full_minutes) / max(1, len(st.units))
        _say(f"[{i}/{len(todo)}] {st.plan.label}: {wanted} of {len(st.units)} units to measure (~{estimate:.0f} min"
             f" by the definition's estimate); {(time.perf_counter() - started) / 60:.1f} min elapsed"
             + (f", {remaining:.1f} min of the budget left" if remaining is not None else ""))
        outcome = run_experiment(run, quick, seeds, dry_run, remaining)
        _say(f"   {outcome['status']} in {outcome['seconds']:.0f} s")
        log.append({"run": st.plan.label, **outcome})
    _say(f"done in {(time.perf_counter() - started) / 60:.1f} min:")
    for entry in log:
        _say(f"   {entry['run']:<48} {entry['status']:<40} {entry['seconds']:>7.0f} s")
    if not dry_run:
        after = [st for st in run_statuses(runs, quick, seeds) if not st.complete]
        left_units = sum(sum(u.status != FRESH for u in st.units.values()) for st in after)
        _say(f"{left_units} units are not fresh yet" + (": run the same command again to measure them"
                                                         if left_units else ""))
        for st in after:
            _say(f"   {st.plan.label}: {_counts_text(st)}")
        # the committed paper/generated/ files must follow the results they read (tests/slow/test_paper.py
        # fails a commit that has the one without the other), so they are rebuilt here, not left to a reminder
        from paper import build
        files, copies, drawn = build.generate()
        build.write(files, copies, drawn)
        _say("paper/generated/ and paper/figures/ rebuilt from paper/results/: commit them with the results; "
             "`make paper` also compiles the PDF")
    bad = [e for e in log if not (e["status"].startswith(("ok", "checks", "stopped")) or e["status"] == "dry-run")]
    return 1 if bad else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--status", action="store_true",
                        help="measure nothing: print every unit's status, write paper/results/README.md, exit 1 "
                             "unless every unit is fresh")
    parser.add_argument("--no-readme", action="store_true", help="with --status: print only (make paper)")
    parser.add_argument("--budget", type=float, default=None, metavar="MINUTES",
                        help="spend at most this long: start no unit that is not expected to end within it")
    parser.add_argument("--quick", action="store_true", help="the experiments' quick modes (minutes, not hours)")
    parser.add_argument("--backends", default=",".join(BACKEND_ORDER),
                        help="comma-separated backends to run (default: every backend the paper compares)")
    parser.add_argument("--only", action="append", default=None, metavar="NAME",
                        help="only this registered experiment (repeatable), e.g. offset-management, explorer, bug-zoo")
    parser.add_argument("--seeds", type=int, default=None, help="seeds per point (default: the experiment's)")
    parser.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    parser.add_argument("--redraw", action="store_true",
                        help="run nothing: draw every stored run's figures again from its results.json")
    args = parser.parse_args(argv)
    if args.redraw:
        return redraw_all(args.only)
    if args.budget is not None and not args.budget > 0:
        parser.error(f"--budget: a positive number of minutes, not {args.budget:g}")
    backends = {b.strip() for b in args.backends.split(",") if b.strip()}
    from experiments.backends import BACKEND_NAMES
    known = set(BACKEND_NAMES)
    if backends - known:
        parser.error(f"--backends: unknown {', '.join(sorted(backends - known))}; known: {', '.join(sorted(known))}")
    unknown_names = sorted(set(args.only or ()) - {r.experiment for r in RUNS})
    if unknown_names:
        parser.error(f"--only: no registered experiment {', '.join(unknown_names)}; registered: "
                     f"{', '.join(sorted({r.experiment for r in RUNS}))}")
    runs = [r for r in RUNS if r.backend in backends and (not args.only or r.experiment in args.only)]
    if args.status:
        return print_status(runs, args.quick, args.seeds, readme=not args.no_readme)
    return collect(runs, args.quick, args.seeds, args.budget, args.dry_run)


if __name__ == "__main__":
    sys.exit(main())
