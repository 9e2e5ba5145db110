"""Regenerate the results files the paper reads (``make paper-results``).

Every number and figure in the paper comes from a file under
``paper/results/``; this script makes those files. It runs each experiment
of ``RUNS`` (the single table of what the paper reports: experiment, backend,
mode) through the project's own command line, and copies the run's
``results.json``, figures and artifacts into
``paper/results/<experiment>/<backend>-<mode>/``. It also runs the
exhaustive explorer on the example scenarios (``EXPLORER_RUNS``) and writes
``paper/results/explorer/<mode>/results.json``, and the bug zoo
(``lightspeed zoo``, seconds, no Spark), which writes ``paper/results/zoo.json``.

A run that fails its sanity checks is still copied (the paper reports what
was measured, checks included); a run whose backend is not available here
(exit status 3) or that crashed leaves the previous results in place and is
reported at the end.

The paper's settings are the experiments' full modes on every backend the
paper compares: hours on a small machine, most of it on Spark. ``--quick``
runs the quick modes instead (minutes, what CI-sized checks use), and
``--backends sim`` keeps to the simulator (and the reference model, which
the fault matrix and the explorer always include). Spark results added by
hand in the same layout are picked up by ``paper/build.py`` as they are.

Usage::

    python paper/collect_results.py [--quick] [--backends sim,spark,spark-native] [--only NAME ...]
                                    [--seeds N] [--dry-run]
    python paper/collect_results.py --redraw [--only NAME ...]

``--redraw`` runs nothing: it draws the figures of every stored run under
``paper/results/`` again from its ``results.json`` (after a change to how
the figures are drawn), leaving the numbers as they are.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "paper" / "results"
SCENARIOS = ROOT / "experiments" / "scenarios"


@dataclass(frozen=True)
class Run:
    """One experiment run the paper reports: ``lightspeed experiment NAME --backend BACKEND [--quick]``."""

    experiment: str
    backend: str
    # the rough wall-clock time of the full mode on a 2-core machine, for the warning printed up front
    full_minutes: float
    quick_minutes: float
    options: tuple[str, ...] = ()      # more options of ``lightspeed experiment`` (the paper's settings)

    def out_dir(self, quick: bool) -> Path:
        return RESULTS / self.experiment / f"{self.backend}-{'quick' if quick else 'full'}"


def registry_runs() -> tuple[Run, ...]:
    """The runs behind the paper: every backend of every registered experiment (``experiments.registry``), with
    its times and options as the experiment's definition states them (``Experiment.runs``)."""
    from experiments.registry import EXPERIMENTS, get_experiment
    return tuple(Run(name, backend, run.full_minutes, run.quick_minutes, run.options)
                 for name in EXPERIMENTS for backend, run in get_experiment(name).runs.items())


RUNS: tuple[Run, ...] = registry_runs()


@dataclass(frozen=True)
class ExplorerRun:
    """The explorer on one example scenario, optionally with the engine modes changed (section 3)."""

    label: str
    scenario: str                       # a file in experiments/scenarios
    engine: dict[str, Any]              # merged over the scenario's engine section
    operator: dict[str, Any] | None = None


_RUNNING_COUNT = "running-count-crash-after-wal.json"
EXPLORER_RUNS: tuple[ExplorerRun, ...] = (
    ExplorerRun("sync, async purge (example)", _RUNNING_COUNT, {}),
    ExplorerRun("sync, inline purge", _RUNNING_COUNT, {"log_purge": {"mode": "inline", "min_batches_to_retain": 3}}),
    ExplorerRun("async state checkpointing", _RUNNING_COUNT, {"state_checkpoint": "async"}),
    ExplorerRun("pipelining, depth 2", _RUNNING_COUNT, {"pipelining": True}),
    ExplorerRun("pipelining, depth 3", _RUNNING_COUNT, {"pipelining": True, "pipeline_depth": 3}),
    ExplorerRun("delta provider", _RUNNING_COUNT, {"state_store": {"provider": "delta", "min_deltas_for_snapshot": 2,
                                                                    "maintenance_interval_ms": 200}}),
    ExplorerRun("snapshot provider", _RUNNING_COUNT, {"state_store": {"provider": "snapshot",
                                                                       "min_deltas_for_snapshot": 2,
                                                                       "maintenance_interval_ms": 200}}),
    ExplorerRun("async progress, stateless (example)", "stateless-async-progress.json", {}),
    ExplorerRun("window, async state (example)", "window-async-state-crash.json", {}),
)


def _say(text: str) -> None:
    print(text, flush=True)


def run_experiment(run: Run, quick: bool, seeds: int | None, dry_run: bool) -> dict[str, Any]:
    """Run one experiment into a scratch directory, then copy its files into paper/results."""
    scratch = Path(tempfile.mkdtemp(prefix=f"paper-{run.experiment}-{run.backend}-"))
    cmd = [sys.executable, "-m", "experiments.cli", "experiment", run.experiment, "--backend", run.backend,
           "--no-spark", "--out", str(scratch)]
    cmd += list(run.options)
    if quick:
        cmd.append("--quick")
    if seeds is not None:
        cmd += ["--seeds", str(seeds)]
    ran = _lightspeed(cmd, dry_run)
    if ran is None:
        return {"status": "dry-run", "seconds": 0.0}
    returncode, seconds = ran
    status = {0: "ok", 1: "checks failed (copied)", 2: "bad input", 3: "backend not available"}.get(
        returncode, f"exit {returncode}")
    results = scratch / "results.json"
    if returncode in (0, 1) and results.exists():
        target = run.out_dir(quick)
        if target.exists():
            shutil.rmtree(target)
        target.mkdir(parents=True)
        for path in sorted(scratch.iterdir()):
            if path.is_file():
                shutil.copy2(path, target / path.name)
        _say(f"   -> {target.relative_to(ROOT)}")
    else:
        status += "; previous results kept"
    shutil.rmtree(scratch, ignore_errors=True)
    return {"status": status, "seconds": seconds}


def run_zoo(dry_run: bool) -> dict[str, Any]:
    """The bug zoo: every planted state-store bug and the check that catches it, into paper/results/zoo.json."""
    scratch = Path(tempfile.mkdtemp(prefix="paper-zoo-"))
    cmd = [sys.executable, "-m", "experiments.cli", "zoo", "--quiet", "--out", str(scratch / "zoo.json"),
           "--paper-out", str(RESULTS / "zoo.json")]
    ran = _lightspeed(cmd, dry_run)
    shutil.rmtree(scratch, ignore_errors=True)
    if ran is None:
        return {"status": "dry-run", "seconds": 0.0}
    returncode, seconds = ran
    status = {0: "ok", 1: "checks failed (copied)"}.get(returncode, f"exit {returncode}")
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


def run_explorer(quick: bool, dry_run: bool) -> dict[str, Any]:
    """The explorer on every ``EXPLORER_RUNS`` entry: crash cuts, schedules, distinct checkpoints, time."""
    sys.path.insert(0, str(ROOT))
    from reference.judge.explorer import explore, first_graph, writing_cuts, Model
    from reference.language.scenario import Scenario
    depth = 1 if quick else 2
    entries = []
    started = time.perf_counter()
    for item in EXPLORER_RUNS:
        raw = json.loads((SCENARIOS / item.scenario).read_text())
        raw["engine"] = _merge(raw.get("engine", {}), item.engine)
        if item.operator:
            raw["query"]["operator"] = item.operator
        raw["faults"] = []
        scenario = Scenario.from_dict(raw)
        _say(f"   explore {item.label} ({item.scenario}, depth {depth})")
        if dry_run:
            continue
        cuts = sum(1 for _ in writing_cuts(first_graph(scenario, Model())))
        report = explore(scenario, depth=depth)
        entries.append({
            "label": item.label, "scenario": item.scenario, "engine": raw["engine"],
            "operator": raw["query"]["operator"]["kind"], "depth": depth,
            "batches": raw["source"]["batches"], "partitions": raw["source"]["partitions"],
            "state_partitions": raw["query"]["state_partitions"],
            "crash_cuts": cuts, "schedules": report.schedules, "distinct_checkpoints": report.distinct_checkpoints,
            "violations": len(report.violations), "truncated": report.truncated,
            "seconds": round(report.seconds, 3),
            "schedules_per_s": round(report.schedules / report.seconds, 3) if report.seconds else None})
        _say(f"     {report.summary()}; {cuts} crash cuts")
    seconds = time.perf_counter() - started
    if dry_run:
        return {"status": "dry-run", "seconds": 0.0}
    sys.path.insert(0, str(ROOT))
    from experiments.experiment import RunContext
    from experiments.provenance import environment
    document = {"experiment": "explorer", "mode": "quick" if quick else "full", "depth": depth,
                "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "wall_s": round(seconds, 3),
                "environment": environment(RunContext(executor="inline")), "entries": entries}
    target = RESULTS / "explorer" / f"reference-{'quick' if quick else 'full'}"
    target.mkdir(parents=True, exist_ok=True)
    (target / "results.json").write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")
    _say(f"   -> {(target / 'results.json').relative_to(ROOT)}")
    return {"status": "ok" if not any(e["violations"] for e in entries) else "violations found", "seconds": seconds}


def _merge(base: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    out = json.loads(json.dumps(base))
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def redraw_all(only: list[str] | None) -> int:
    """Every stored run's figures drawn again from its results.json, in place; 1 if one could not be drawn."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="the experiments' quick modes (minutes, not hours)")
    parser.add_argument("--backends", default="sim,spark,spark-native",
                        help="comma-separated backends to run (default: every backend the paper compares)")
    parser.add_argument("--only", action="append", default=None, metavar="NAME",
                        help="only this experiment (repeatable; 'explorer' for the explorer, 'zoo' for the bug zoo)")
    parser.add_argument("--seeds", type=int, default=None, help="seeds per point (default: the experiment's)")
    parser.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    parser.add_argument("--redraw", action="store_true",
                        help="run nothing: draw every stored run's figures again from its results.json")
    args = parser.parse_args(argv)
    if args.redraw:
        return redraw_all(args.only)
    backends = {b.strip() for b in args.backends.split(",") if b.strip()}
    known = {r.backend for r in RUNS}
    if backends - known:
        parser.error(f"--backends: unknown {', '.join(sorted(backends - known))}; known: {', '.join(sorted(known))}")
    runs = [r for r in RUNS if r.backend in backends and (not args.only or r.experiment in args.only)]
    with_explorer = not args.only or "explorer" in args.only
    with_zoo = not args.only or "zoo" in args.only
    minutes = sum(r.quick_minutes if args.quick else r.full_minutes for r in runs) + (1 if args.quick else 10) * \
        with_explorer
    mode = "quick" if args.quick else "full (the paper's settings)"
    _say(f"paper results: {len(runs)} experiment runs{' and the explorer' if with_explorer else ''}, {mode} mode, "
         f"backends {', '.join(sorted(backends))}.")
    _say(f"This takes long: roughly {minutes:.0f} minutes on a 2-core machine"
         + ("" if args.quick else " (most of it on Spark)") + ". Results go to paper/results/.")
    log = []
    started = time.perf_counter()
    for i, run in enumerate(runs, 1):
        elapsed = time.perf_counter() - started
        _say(f"[{i}/{len(runs)}] {run.experiment} on {run.backend} ({elapsed / 60:.1f} min elapsed)")
        outcome = run_experiment(run, args.quick, args.seeds, args.dry_run)
        _say(f"   {outcome['status']} in {outcome['seconds']:.0f} s")
        log.append({"run": f"{run.experiment} {run.backend}", **outcome})
    if with_explorer:
        _say("[explorer] every crash cut and single fault of the example scenarios")
        outcome = run_explorer(args.quick, args.dry_run)
        _say(f"   {outcome['status']} in {outcome['seconds']:.0f} s")
        log.append({"run": "explorer", **outcome})
    if with_zoo:
        _say("[zoo] every planted state-store bug of spec section 6, and the check that catches it")
        outcome = run_zoo(args.dry_run)
        _say(f"   {outcome['status']} in {outcome['seconds']:.0f} s")
        log.append({"run": "zoo", **outcome})
    total = time.perf_counter() - started
    _say(f"done in {total / 60:.1f} min:")
    for entry in log:
        _say(f"   {entry['run']:<40} {entry['status']:<40} {entry['seconds']:>7.0f} s")
    _say("now run `make paper` to rebuild the paper from paper/results/")
    bad = [e for e in log if not (e["status"].startswith("ok") or e["status"].startswith("checks")
                                  or e["status"] == "dry-run")]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
