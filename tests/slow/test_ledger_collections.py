"""The ledger of measurement units (issue 39), end to end: a killed collection resumes, the staleness rule holds.

- A collection killed by a real signal between two units, and again in the middle of one, resumes where it
  stopped: no finished unit runs twice, none is lost, and results.json holds every unit once; a run whose
  budget has ended starts nothing and keeps the results it had.
- The staleness rule: a unit goes stale after a change to code its measurement reaches, and stays fresh after a
  change elsewhere (another backend's module, the definition's summary, a comment), in a git repository of
  this project's own code.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from experiments import exit_codes
from experiments.experiment import RunContext
from experiments.ledger import (FRESH, MISSING, STALE, UNITS, CodeKeys, Provenance, RunPlan, Unit, read_units,
                                run_status, write_unit)
from experiments.registry import get_experiment
from experiments.staleness import GitCommit, WorkTree

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("reference", "sim", "spark_impl", "experiments")
TINY_POINTS = 6

# A definition small enough that a unit takes milliseconds: six points, each "measuring" a number.
TINY_DEFINITION = '''
from experiments.experiment import BackendRun, Experiment, Point


class Tiny(Experiment):
    name = "tiny"
    version = "1"
    title = "six units that measure their own number"
    runs = {"sim": BackendRun(0.01, 0.01)}
    seeds_quick = seeds_full = 1

    def points(self, ctx):
        return [Point(self.name, "count", "c", {"i": i}, seed, ctx.backend, {"name": f"tiny-{i}"})
                for i in range(6) for seed in self.seed_list(ctx)]

    def measure(self, point):
        return {"value": point.params["i"] * 10 + point.seed}

    def summarize(self, records, ctx):
        return {"values": sorted(r["metrics"]["value"] for r in records)}


EXPERIMENT = Tiny()
'''

# The collection in a child process. Two hooks tell the parent where it is and then wait on stdin, so that the
# parent's signal lands exactly there: after a unit is written ("written"), or as a measurement starts ("start").
CHILD = '''
import sys
from pathlib import Path

root, out, log, pause_at, pause_after = sys.argv[1:6]
sys.path.insert(0, root)
from experiments import execution, ledger, registry
from experiments.experiment import RunContext
from experiments.sweep import run_experiment

registry.EXPERIMENTS["tiny"] = registry.Entry("tiny")
registry.DEFINITIONS["tiny"] = "experiments.tiny.definition"
measure_point, write_unit = execution.measure_point, ledger.write_unit
counts = {"start": 0, "written": 0}


def wait_here(kind):
    counts[kind] += 1
    if pause_at == kind and counts[kind] == int(pause_after):
        print(f"PAUSED {kind}", flush=True)
        sys.stdin.readline()     # the parent kills this process now


def measured(experiment, point):
    with open(log, "a") as f:
        f.write(f"start {point.id}\\n")
    wait_here("start")
    return measure_point(experiment, point)


def written(results_dir, unit, code):
    path = write_unit(results_dir, unit, code)
    with open(log, "a") as f:
        f.write(f"written {unit.point_id}\\n")
    wait_here("written")
    return path


execution.measure_point, ledger.write_unit = measured, written
result = run_experiment("tiny", RunContext(backend="sim", executor="inline", out_dir=Path(out), quiet=True,
                                           figures=False))
print(f"EXIT {result.exit_code}", flush=True)
'''


def _copy_project(dest: Path) -> Path:
    """This project's packages (as they are in the working tree) in ``dest``."""
    for package in PACKAGES:
        shutil.copytree(ROOT / package, dest / package, ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def _collect(project: Path, out: Path, log: Path, pause_at: str = "", pause_after: int = 0) -> str:
    """Run the child collection; with ``pause_at``, kill its process group with SIGKILL where it pauses."""
    script = project / "collect_child.py"
    proc = subprocess.Popen([sys.executable, str(script), str(project), str(out), str(log), pause_at,
                             str(pause_after)], cwd=project, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    assert proc.stdout is not None
    if not pause_at:
        stdout, stderr = proc.communicate(timeout=600)
        assert proc.returncode == 0, stderr
        return stdout
    line = proc.stdout.readline()
    assert line.startswith("PAUSED"), (line, proc.stderr.read() if proc.stderr else "")
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    return line


def test_a_killed_collection_resumes_and_no_unit_runs_twice_or_is_lost(tmp_path: Path) -> None:
    project = _copy_project(tmp_path / "project")
    (project / "experiments" / "tiny").mkdir()
    (project / "experiments" / "tiny" / "__init__.py").write_text("")
    (project / "experiments" / "tiny" / "definition.py").write_text(TINY_DEFINITION)
    (project / "collect_child.py").write_text(CHILD)
    out, log = tmp_path / "out", tmp_path / "log.txt"

    _collect(project, out, log, "written", 2)          # killed right after the second unit was written
    assert len(read_units(out)) == 2 and not (out / "results.json").exists()
    _collect(project, out, log, "start", 2)            # resumed; killed as its second measurement starts
    assert len(read_units(out)) == 3 and not (out / "results.json").exists()
    assert not [p for p in (out / UNITS).iterdir() if p.name.startswith(".")], "a half-written unit was left"
    stdout = _collect(project, out, log)               # resumed to the end
    assert f"EXIT {exit_codes.OK}" in stdout

    events = [line.split(" ", 1) for line in log.read_text().splitlines()]
    started = [unit for kind, unit in events if kind == "start"]
    written = [unit for kind, unit in events if kind == "written"]
    assert len(written) == len(set(written)) == TINY_POINTS, "every unit written once"
    # the only unit measured twice is the one killed half-way, which had not been written the first time
    twice = {u for u in started if started.count(u) > 1}
    assert len(twice) == 1
    killed = twice.pop()
    first, second = [i for i, (kind, unit) in enumerate(events) if kind == "start" and unit == killed]
    assert ["written", killed] not in events[:second]
    # every unit is in results.json once, with the number it measured
    document = json.loads((out / "results.json").read_text())
    assert sorted(r["id"] for r in document["points"]) == sorted(set(written))
    assert document["summary"]["values"] == sorted(i * 10 + 1 for i in range(TINY_POINTS))
    assert document["ledger"]["units"] == TINY_POINTS and document["ledger"]["reused"] == 3


def test_a_run_whose_budget_has_ended_starts_no_unit_and_keeps_the_old_results(tmp_path: Path) -> None:
    ctx = RunContext(backend="sim", quick=True, executor="inline", out_dir=tmp_path, quiet=True, figures=False,
                     deadline=time.time() - 1.0)
    (tmp_path / "results.json").write_text("{}")
    from experiments.sweep import run_experiment
    result = run_experiment("state-rebalancing", ctx)
    assert result.exit_code == exit_codes.INTERRUPTED and result.records == []
    assert len(result.remaining) == len(RunPlan("state-rebalancing", "sim", "quick").points())
    assert (tmp_path / "results.json").read_text() == "{}"
    assert read_units(tmp_path) == {}


# ------------------------------------------------------------------ the staleness rule


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.email=test@example.org", "-c", "user.name=test", *args], cwd=repo,
                   check=True, capture_output=True)


def _commit(repo: Path, message: str) -> None:
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", message)


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{path}: {old!r} not found"
    path.write_text(text.replace(old, new, 1))


def _append(path: Path, text: str) -> None:
    path.write_text(path.read_text() + text)


def _fresh_unit(plan: RunPlan, key: str, commit: str) -> Unit:
    point = plan.points()[0]
    record = {"id": point.id, "point": point.to_dict(), "metrics": {"latency_p50": 1.0}, "error": None,
              "wall_s": 0.1}
    unit = Unit(plan.experiment, get_experiment(plan.experiment).version, plan.backend, plan.mode, record,
                Provenance(commit, False, "2026-01-01T00:00:00+00:00", "2026-01-01T00:00:01+00:00", "test", key))
    return unit


def test_a_unit_goes_stale_after_a_change_to_code_it_imports_and_stays_fresh_after_one_elsewhere(
        tmp_path: Path) -> None:
    repo = _copy_project(tmp_path / "repo")
    _git(repo, "init", "-q")
    _commit(repo, "measured here")
    plan = RunPlan("offset-management", "sim", "full")
    key = CodeKeys(WorkTree(repo)).key(plan.experiment, [plan.backend])
    head = GitCommit("HEAD", root=repo)
    assert CodeKeys(head).key(plan.experiment, [plan.backend]) == key, "a clean tree and its commit agree"
    results = tmp_path / "results" / plan.experiment / plan.folder
    unit = _fresh_unit(plan, key.key, head.rev)
    write_unit(results, unit, key)

    def status_now() -> tuple[str, str]:
        units = run_status(results, plan, CodeKeys(GitCommit("HEAD", root=repo))).units
        mine = next(u for u in units.values() if u.point_id == unit.point_id)
        assert all(u.status == MISSING for u in units.values() if u.point_id != unit.point_id)
        return mine.status, mine.reason

    assert status_now() == (FRESH, "")
    # elsewhere: another backend's code, the definition's summary, a comment in code the unit runs
    _append(repo / "spark_impl/native/sink.py", "\nUNRELATED_TO_THE_SIMULATOR = 1\n")
    _edit(repo / "experiments/offset_management/definition.py", "    def summarize(self,",
          "    def summarize_not_measured(self) -> int:\n        return 1\n\n    def summarize(self,")
    _append(repo / "sim/latency.py", "\n# a comment changes no code\n")
    _commit(repo, "changes elsewhere")
    assert status_now() == (FRESH, "")
    # code the unit imports: the simulator's latency book
    _append(repo / "sim/latency.py", "\nNOW_PART_OF_THE_MEASUREMENT = 1\n")
    _commit(repo, "a change to the measured code")
    status, reason = status_now()
    assert status == STALE and "sim/latency.py" in reason, reason
