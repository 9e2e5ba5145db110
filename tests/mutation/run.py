"""Mutation testing of the judge (``reference/``, and small ``sim/`` modules) with cosmic-ray: ``make mutation``.

Issue 14, "Judge the judge": how many small mistakes planted in the spec's own
code do the non-Spark tests notice? For each module in ``MODULES`` this

1. copies the project (without ``.git``, ``.venv`` and results) to a scratch
   directory, so the working copy is never mutated;
2. writes a cosmic-ray TOML config (``.mutation/<module>.toml``): the module, a
   focused fast test subset (``MODULES`` below is the documented mapping), a
   per-mutant timeout from a timed baseline run, the local distributor;
3. ``cosmic-ray init`` into a sqlite session (``.mutation/<module>.sqlite``),
   ``cr-filter-operators`` keeps the operators of ``KEPT_OPERATORS`` (one
   natural mistake per site, in the manner of mutmut, rather than every binary
   operator swapped for every other), ``cosmic-ray exec``.

It then reads every session present, subtracts the mutants listed in
``tests/mutation/equivalent.json`` (each with the reason it cannot change any
observable behaviour), prints the score and every survivor (file:line,
operator, diff) and writes ``paper/results/mutation.json`` in the schema
``paper/build.py`` reads (``section_mutation_and_zoo``).

    python tests/mutation/run.py                      # every module in MODULES
    python tests/mutation/run.py --modules oracles,logs
    python tests/mutation/run.py --survivors          # re-run the last sessions' survivors (new tests)
    python tests/mutation/run.py --report-only        # re-read the sessions, no mutants run

A mutant is killed when its test subset fails or times out; a survivor is a
mutant whose subset passes. Skipped mutants are not counted: those of other
operators, and those in annotations and assertion messages, which are not
run as code (``not_code``).
"""

from __future__ import annotations

import argparse
import ast
import datetime
import functools
import json
import re
import shlex
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from cosmic_ray.work_db import WorkDB, use_db
from cosmic_ray.work_item import WorkerOutcome, WorkResult

ROOT = Path(__file__).resolve().parents[2]
WORK = ROOT / ".mutation"
EQUIVALENT = Path(__file__).resolve().parent / "equivalent.json"
RESULT = ROOT / "paper" / "results" / "mutation.json"
PYTEST_ARGS = "-x -q -p no:cacheprovider -m 'not spark' -o addopts='' --benchmark-skip"

INCARNATION_TESTS = ["tests/quick/test_judge_engine.py", "tests/quick/test_purge_rounds.py",
                     "tests/quick/test_judge_each_oracle.py", "tests/quick/test_reference_spark_suites.py",
                     "tests/quick/test_judge_executor_loss.py", "tests/quick/test_reference_open_batches.py",
                     "tests/quick/test_reference_any_order.py", "tests/quick/test_reference_redelivering.py",
                     "tests/slow/test_reference_redelivering_explored.py",
                     "tests/quick/test_reference_rebalancing.py", "tests/slow/test_reference_rebalancing_explored.py",
                     "tests/quick/test_reference_parallel_commit.py",
                     "tests/slow/test_reference_parallel_commit_explored.py"]

# Module under test -> the tests that judge it (fast, non-Spark). The order is the order they run in.
MODULES: dict[str, list[str]] = {
    "oracles": ["tests/quick/test_judge_each_oracle.py", "tests/quick/test_judge_oracle_details.py",
                "tests/quick/test_judge_outcome_ties.py", "tests/quick/test_reference_check_cli.py",
                "tests/quick/test_reference_rebalancing.py", "tests/slow/test_reference_rebalancing_explored.py",
                "tests/quick/test_judge_recoveries.py", "tests/quick/test_judge_checkpoint_read_back.py",
                "tests/quick/test_judge_both_ways.py", "tests/quick/test_judge_bounds.py"],
    "checkpoint_rules": ["tests/quick/test_judge_checkpoint_rules.py", "tests/quick/test_judge_each_oracle.py",
                         "tests/quick/test_judge_outcome_ties.py", "tests/quick/test_judge_both_ways.py",
                         "tests/quick/test_judge_bounds.py"],
    # the numbers the judge enforces, read off the step graph, and whether the explorer reaches them (issue 30)
    "bounds": ["tests/quick/test_judge_bounds.py", "tests/quick/test_judge_both_ways.py",
               "tests/quick/test_judge_oracle_details.py", "tests/quick/test_judge_each_oracle.py",
               "tests/quick/test_judge_checkpoint_rules.py"],
    "tightness": ["tests/slow/test_judge_tightness.py"],
    "logs": ["tests/quick/test_judge_logs.py", "tests/quick/test_judge_purge_one_threshold.py",
             "tests/quick/test_purge_rounds.py", "tests/quick/test_reference_spark_suites.py"],
    # what a checkpoint, an outcome and the command line's inputs are read with (issue 32)
    "storage": ["tests/quick/test_judge_local_storage.py", "tests/quick/test_judge_checkpoint_rules.py",
                "tests/quick/test_judge_state_store.py"],
    "layout": ["tests/quick/test_judge_layout_and_faults.py", "tests/quick/test_judge_checkpoint_rules.py"],
    "sink_files": ["tests/quick/test_judge_layout_and_faults.py", "tests/quick/test_judge_checkpoint_rules.py",
                   "tests/quick/test_judge_checkpoint_read_back.py"],
    "json_input": ["tests/quick/test_judge_bounded_input.py"],
    "size": ["tests/quick/test_judge_bounded_input.py", "tests/quick/test_judge_layout_and_faults.py",
             "tests/quick/test_judge_local_storage.py"],
    "fault_reach": ["tests/quick/test_judge_layout_and_faults.py"],
    "fault_effects": ["tests/quick/test_judge_recoveries.py"],
    "state_store": ["tests/quick/test_judge_state_store.py", "tests/quick/test_lineage_memo.py",
                    "tests/quick/test_reference_spark_suites.py", "tests/quick/test_judge_outcome_ties.py"],
    "lineage_memo": ["tests/quick/test_lineage_memo.py", "tests/quick/test_judge_state_store.py"],
    "changelog": ["tests/quick/test_judge_changelog.py", "tests/quick/test_judge_state_store.py",
                  "tests/quick/test_judge_outcome_ties.py", "tests/quick/test_reference_spark_suites.py"],
    "retained": ["tests/quick/test_judge_retained.py", "tests/quick/test_judge_state_store.py",
                 "tests/quick/test_judge_outcome_ties.py", "tests/quick/test_reference_spark_suites.py"],
    "recovery": ["tests/quick/test_judge_recovery.py", "tests/quick/test_reference_spark_suites.py",
                 "tests/quick/test_judge_executor_loss.py", "tests/quick/test_reference_open_batches.py"],
    "operators": ["tests/quick/test_judge_operators.py", "tests/quick/test_operator_boundaries.py",
                  "tests/quick/test_reference_sources.py"],
    "explorer": ["tests/slow/test_judge_explorer.py", "tests/slow/test_judge_tightness.py",
                 ("tests/quick/test_cli_hostile.py::"
                  "test_explore_interrupted_stops_every_worker_and_says_where_it_got_to"),
                 "tests/quick/test_reference_redelivering.py", "tests/slow/test_reference_redelivering_explored.py"],
    # the incarnation's parts (once reference/engine.py) share one subset: every one runs in every scenario
    **{part: INCARNATION_TESTS for part in ("incarnation", "incarnation_state", "clock", "task_effects",
                                            "driver_steps", "task_retry")},
    "seams": ["tests/quick/test_seams.py"],
    # the execution modes (reference/protocol/modes/): each mode's rules, graph, restart and replay bound
    "micro_batch": ["tests/quick/test_judge_recovery.py", "tests/quick/test_judge_logs.py",
                    "tests/quick/test_judge_engine.py", "tests/quick/test_judge_bounds.py",
                    "tests/quick/test_reference_check_cli.py"],
    "real_time": ["tests/quick/test_real_time.py", "tests/slow/test_real_time_explored.py"],
    "bounded_replay": ["tests/quick/test_real_time.py", "tests/slow/test_real_time_explored.py"],
    # the simulator (a key with a folder names its module path): small modules with clear semantics
    "placement": ["tests/quick/test_placement.py", "tests/quick/test_reference_rebalancing.py",
                  "tests/slow/test_reference_rebalancing_explored.py"],
    "rebalancing": ["tests/quick/test_reference_rebalancing.py", "tests/slow/test_reference_rebalancing_explored.py",
                    "tests/quick/test_placement.py"],
    "redelivery": ["tests/quick/test_reference_redelivering.py", "tests/slow/test_reference_redelivering_explored.py"],
    "trigger": ["tests/quick/test_trigger.py"],
    "sim/latency": ["tests/quick/test_sim_latency.py"],
    "sim/faults": ["tests/quick/test_sim_faults.py"],
}


def module_path(module: str) -> str:
    """``oracles`` -> ``reference/judge/oracles.py`` (the layer of ``reference/`` that holds it); ``sim/latency`` ->
    ``sim/latency.py``."""
    if "/" in module:
        return f"{module}.py"
    found = sorted(path.relative_to(ROOT).as_posix() for path in ROOT.glob(f"reference/**/{module}.py"))
    if len(found) != 1:
        raise SystemExit(f"no single module {module!r} in reference/: {found or 'none'}")
    return found[0]


def session_path(module: str) -> Path:
    return WORK / f"{module.replace('/', '.')}.sqlite"

# One natural mistake per site: a boundary moved by one, a condition negated or dropped, an operator
# swapped for its inverse, a constant off by one, a loop never entered, a handler that catches nothing.
KEPT_OPERATORS = [
    "core/ReplaceComparisonOperator_(Eq_NotEq|NotEq_Eq|Lt_LtE|LtE_Lt|Gt_GtE|GtE_Gt|Is_IsNot|IsNot_Is)",
    "core/ReplaceBinaryOperator_(Add_Sub|Sub_Add|Mul_Div|Div_Mul|FloorDiv_Div|Mod_FloorDiv|BitOr_BitAnd|BitAnd_BitOr)",
    "core/ReplaceUnaryOperator_(USub_UAdd|Delete_Not)",
    "core/(AddNot|ReplaceTrueWithFalse|ReplaceFalseWithTrue|ReplaceAndWithOr|ReplaceOrWithAnd)",
    "core/(ReplaceBreakWithContinue|ReplaceContinueWithBreak|NumberReplacer|ZeroIterationForLoop|ExceptionReplacer)",
]


@dataclass(frozen=True)
class Mutant:
    module: str
    file: str
    line: int
    operator: str
    occurrence: int
    diff: str
    outcome: str  # killed, survived

    @property
    def before_after(self) -> tuple[str, str]:
        """The source line the mutation removed and the one it added (stripped), its identity across edits."""
        removed = [ln[1:].strip() for ln in self.diff.splitlines() if ln.startswith("-") and not ln.startswith("---")]
        added = [ln[1:].strip() for ln in self.diff.splitlines() if ln.startswith("+") and not ln.startswith("+++")]
        return " / ".join(removed), " / ".join(added)


def copy_project(dest: Path) -> None:
    top = {".git", ".venv", ".mutation", "results", "paper", "out", ".hypothesis", ".pytest_cache"}

    def ignore(directory: str, names: list[str]) -> set[str]:
        here = {n for n in names if n == "__pycache__" or n.endswith(".egg-info")}
        return here | (top & set(names) if Path(directory) == ROOT else set())
    shutil.copytree(ROOT, dest, ignore=ignore)


def pytest_command(tests: list[str]) -> str:
    return f"{shlex.quote(sys.executable)} -m pytest {PYTEST_ARGS} " + " ".join(tests)


def baseline_seconds(scratch: Path, tests: list[str]) -> float:
    """The unmutated subset must pass; its time sets the per-mutant timeout."""
    start = time.monotonic()
    done = subprocess.run(shlex.split(pytest_command(tests)), cwd=scratch, capture_output=True, text=True)
    took = time.monotonic() - start
    if done.returncode != 0:
        sys.exit(f"the unmutated tests fail ({' '.join(tests)}); fix them first:\n{done.stdout[-3000:]}")
    return took


def write_config(module: str, tests: list[str], timeout_s: float) -> Path:
    keep = "|".join(f"(?:{k})" for k in KEPT_OPERATORS)
    config = WORK / f"{module.replace('/', '.')}.toml"
    config.write_text(
        "[cosmic-ray]\n"
        f"module-path = \"{module_path(module)}\"\n"
        f"timeout = {timeout_s:.0f}\n"
        "excluded-modules = []\n"
        f"test-command = {json.dumps(pytest_command(tests))}\n\n"
        "[cosmic-ray.distributor]\n"
        "name = \"local\"\n\n"
        "[cosmic-ray.filters.operators-filter]\n"
        f"exclude-operators = [{json.dumps(f'(?!(?:{keep})$)')}]\n")
    return config


def _spans(tree: ast.AST) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """Source spans that are not run as code: annotations (every module of reference/ has ``from __future__
    import annotations``, so they are never evaluated) and assertion messages (built only when an internal
    invariant already broke)."""
    nodes: list[ast.AST | None] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.arg):
            nodes.append(node.annotation)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            nodes.append(node.returns)
        elif isinstance(node, ast.AnnAssign):
            nodes.append(node.annotation)
        elif isinstance(node, ast.Assert):
            nodes.append(node.msg)
    return [((n.lineno, n.col_offset), (n.end_lineno, n.end_col_offset)) for n in nodes
            if n is not None and n.end_lineno is not None and n.end_col_offset is not None]


@functools.cache
def not_code(file: str) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    tree = ast.parse((ROOT / file).read_text())
    assert any(isinstance(n, ast.ImportFrom) and n.module == "__future__" for n in tree.body), \
        f"{file} evaluates its annotations; mutants in them are code"
    return _spans(tree)


def in_code(file: str, start: tuple[int, int]) -> bool:
    return not any(lo <= tuple(start) < hi for lo, hi in not_code(file))


def skip_not_code(session: Path) -> int:
    """Mark mutants in annotations and assertion messages skipped before they run."""
    skipped = []
    with use_db(str(session), WorkDB.Mode.open) as db:
        for item in db.pending_work_items:
            m = item.mutations[0]
            if not in_code(str(m.module_path), (m.start_pos[0], m.start_pos[1])):
                skipped.append(item.job_id)
        for job_id in skipped:
            db.set_result(job_id, WorkResult(output="not code", worker_outcome=WorkerOutcome.SKIPPED))
    return len(skipped)


def forget_survivors(session: Path) -> int:
    """Mark the survivors of a session pending again, so that ``exec`` re-runs them against today's tests
    (those listed as equivalent stay as they are)."""
    equivalent = load_equivalent()
    with sqlite3.connect(session) as db:
        rows = db.execute("SELECT r.job_id, s.module_path, s.operator_name, s.start_pos_row, r.diff "
                          "FROM work_results r JOIN mutation_specs s ON r.job_id = s.job_id "
                          "WHERE r.test_outcome = 'SURVIVED'").fetchall()
        again = [job for job, file, operator, line, diff in rows
                 if not any(is_listed(Mutant("", file, line, operator, 0, diff or "", "survived"), e)
                            for e in equivalent)]
        db.executemany("DELETE FROM work_results WHERE job_id = ?", [(job,) for job in again])
    return len(again)


def run_module(module: str, scratch: Path, survivors_only: bool) -> None:
    tests = [t for t in MODULES[module] if (scratch / t.split("::")[0]).exists()]
    took = baseline_seconds(scratch, tests)
    config = write_config(module, tests, timeout_s=max(30.0, 3 * took + 10))
    session = session_path(module)
    bindir = Path(sys.executable).parent
    print(f"== {module}: baseline {took:.1f} s over {', '.join(tests)}", flush=True)
    if survivors_only and session.exists():
        print(f"== {module}: re-running {forget_survivors(session)} survivors", flush=True)
    else:
        session.unlink(missing_ok=True)
        subprocess.run([bindir / "cosmic-ray", "init", config, session], cwd=scratch, check=True)
        subprocess.run([bindir / "cr-filter-operators", session, config], cwd=scratch, check=True)
        print(f"== {module}: {skip_not_code(session)} mutants in annotations or assertion messages skipped")
    start = time.monotonic()
    subprocess.run([bindir / "cosmic-ray", "exec", config, session], cwd=scratch, check=True)
    print(f"== {module}: mutants ran in {time.monotonic() - start:.0f} s", flush=True)


def read_session(module: str) -> tuple[list[Mutant], int]:
    """The mutants of a module's session that ran, and how many of its mutants have not run yet."""
    bindir = Path(sys.executable).parent
    dump = subprocess.run([bindir / "cosmic-ray", "dump", session_path(module)], capture_output=True,
                          text=True, check=True).stdout
    found, pending = [], 0
    for line in dump.splitlines():
        item, result = json.loads(line)
        mutation = item["mutations"][0]
        if result is not None and result["worker_outcome"] == "skipped":
            continue
        if not in_code(mutation["module_path"], tuple(mutation["start_pos"])):
            continue
        if result is None:
            pending += 1
            continue
        outcome = "survived" if result["test_outcome"] == "survived" else "killed"
        found.append(Mutant(module, mutation["module_path"], mutation["start_pos"][0], mutation["operator_name"],
                            mutation["occurrence"], result.get("diff") or "", outcome))
    return found, pending


def load_equivalent() -> list[dict[str, str]]:
    return json.loads(EQUIVALENT.read_text()) if EQUIVALENT.exists() else []


def is_listed(m: Mutant, entry: dict[str, str]) -> bool:
    before, after = m.before_after
    return (entry["file"] == m.file and entry["operator"] == m.operator and entry["before"] == before
            and entry["after"] == after)


def report(modules: list[str], command: str) -> dict:
    equivalent_list = load_equivalent()
    sessions = {module: read_session(module) for module in modules}
    mutants = [m for module in modules for m in sessions[module][0]]
    survivors = [m for m in mutants if m.outcome == "survived"]
    equivalent = [(m, e) for m in survivors for e in equivalent_list if is_listed(m, e)]
    eq_ids = {id(m) for m, _ in equivalent}
    live = [m for m in survivors if id(m) not in eq_ids]
    killed = sum(1 for m in mutants if m.outcome == "killed")
    score = 100.0 * killed / (killed + len(live)) if killed + len(live) else 100.0
    for m in live:
        print(f"SURVIVED {m.file}:{m.line} {m.operator} (occurrence {m.occurrence})\n{m.diff}")
    per_module = {}
    for module in modules:
        mine = [m for m in mutants if m.module == module]
        k = sum(1 for m in mine if m.outcome == "killed")
        s = sum(1 for m in live if m.module == module)
        e = sum(1 for m, _ in equivalent if m.module == module)
        pending = sessions[module][1]
        per_module[module_path(module)] = {"total": len(mine), "killed": k, "survived": s, "equivalent": e,
                                                "not_run": pending, "tests": MODULES[module],
                                                "date": datetime.date.today().isoformat()}
        print(f"{module:18s} {len(mine):5d} mutants  {k:5d} killed  {s:4d} survived  {e:4d} equivalent"
              + (f"  ({pending} not run)" if pending else ""))
    print(f"score {score:.2f}% ({killed} killed of {killed + len(live)} non-equivalent; "
          f"{len(equivalent)} equivalent)")
    import cosmic_ray  # noqa: PLC0415 (only to name the version)
    version = getattr(cosmic_ray, "__version__", None) or subprocess.run(
        [Path(sys.executable).parent / "cosmic-ray", "--version"], capture_output=True, text=True).stdout.split()[-1]
    return {
        "tool": f"cosmic-ray {version}",
        "date": datetime.date.today().isoformat(),
        "command": command,
        "scope": [module_path(m) for m in modules],
        "operators": KEPT_OPERATORS,
        "total": len(mutants),
        "killed": killed,
        "survived": len(live),
        "equivalent": [{"mutant": f"{m.file}:{m.line} {m.operator}: {m.before_after[0]} -> {m.before_after[1]}",
                        "reason": e["reason"]} for m, e in equivalent],
        "score_percent": round(score, 2),
        "not_run": sum(pending for _found, pending in sessions.values()),
        "per_module": per_module,
        "survivors": [{"file": m.file, "line": m.line, "operator": m.operator, "diff": m.diff} for m in live],
    }


def carry_over(doc: dict, previous_file: Path, modules: list[str]) -> dict:
    """Keep, from the last result file, the modules that have no session here (sessions live in ``.mutation/``,
    which is not committed): a run of some modules updates those and leaves the others' last measurement,
    each with the date it was taken. The score is recomputed over everything kept."""
    if not modules or not previous_file.exists():
        return doc
    previous = json.loads(previous_file.read_text())
    kept = {m: previous["per_module"][m] for m in modules if m in previous.get("per_module", {})}
    if not kept:
        return doc
    for module, entry in kept.items():
        entry.setdefault("date", previous.get("date"))
        doc["per_module"][module] = entry
        doc["scope"].append(module)
        print(f"{module:18s} carried over from {previous_file.name} ({entry['date']}): "
              f"{entry['killed']} killed, {entry['survived']} survived, {entry['equivalent']} equivalent"
              + (f", {entry['not_run']} not run" if entry.get("not_run") else ""))
    doc["total"] += sum(e["total"] for e in kept.values())
    doc["killed"] += sum(e["killed"] for e in kept.values())
    doc["survived"] += sum(e["survived"] for e in kept.values())
    doc["not_run"] += sum(e.get("not_run", 0) for e in kept.values())
    doc["equivalent"] += [e for e in previous.get("equivalent", []) if e["mutant"].split(":")[0] in kept]
    doc["survivors"] += [s for s in previous.get("survivors", []) if s["file"] in kept]
    live = doc["killed"] + doc["survived"]
    doc["score_percent"] = round(100.0 * doc["killed"] / live, 2) if live else 100.0
    print(f"score over every module {doc['score_percent']:.2f}% ({doc['killed']} killed of {live} non-equivalent)")
    return doc


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modules", default=",".join(MODULES),
                        help="comma-separated modules of reference/ (or sim/NAME)")
    parser.add_argument("--report-only", action="store_true", help="read the existing sessions, run nothing")
    parser.add_argument("--survivors", action="store_true",
                        help="re-run only the last sessions' survivors (after adding tests)")
    parser.add_argument("--out", type=Path, default=RESULT)
    args = parser.parse_args(argv)
    modules = [m.strip() for m in args.modules.split(",") if m.strip()]
    unknown = [m for m in modules if m not in MODULES]
    if unknown:
        parser.error(f"unknown module(s) {', '.join(unknown)}; known: {', '.join(MODULES)}")
    WORK.mkdir(exist_ok=True)
    if not args.report_only:
        with tempfile.TemporaryDirectory(prefix="mutation-") as tmp:
            scratch = Path(tmp) / "project"
            copy_project(scratch)
            for module in modules:
                run_module(module, scratch, args.survivors)
    measured = [m for m in MODULES if session_path(m).exists()]
    doc = report(measured, "make mutation" + (f" MODULES={args.modules}" if args.modules != ",".join(MODULES)
                                                else ""))
    doc = carry_over(doc, args.out, [module_path(m) for m in MODULES if m not in measured])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"wrote {args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
