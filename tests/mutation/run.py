"""Mutation testing of the judge and the simulator (every module of ``reference/`` and ``sim/``), incrementally.

Issue 14, "Judge the judge": how many small mistakes planted in the spec's own
code do the non-Spark tests notice? Issue 39: a score that keeps up with the
code, so that ``make mutation`` re-runs only what changed.

For each module of ``reference/`` and ``sim/`` this

1. chooses the tests that judge it: the documented subset of ``MODULES`` (fast,
   focused), else every test file that imports the module directly, those named
   after it first, at most ``AUTO_TESTS`` of them (``tests_for``); a module no
   test imports is reported as uncovered;
2. computes the module's **key**: a hash of the module's text, of the text of
   those test files and of ``tests/conftest.py``, of the mutation operators and
   of the tool's version (``module_key``). A module whose key equals the one its
   entry in ``paper/results/mutation.json`` records, with every mutant run, is
   up to date and carried over as it is; every other module is run;
3. runs cosmic-ray on it in a copy of the project (so the working copy is never
   mutated): a config in ``.mutation/<module>.toml``, a per-mutant timeout from
   a timed baseline run, the operators of ``KEPT_OPERATORS`` (one natural
   mistake per site, in the manner of mutmut), a sqlite session in
   ``.mutation/<module>.sqlite`` with the key beside it (``.key``).

``--budget MINUTES`` spends at most that long: a module is started only while
time is left, and at the deadline the running module's cosmic-ray is stopped;
the mutants it finished stay in its session, and the next run continues that
session where it stopped (when the module's key is unchanged) instead of
starting it again. A module stopped half-way is recorded with its ``not_run``
count, so it is not up to date.

It then reads the sessions, subtracts the mutants listed in
``tests/mutation/equivalent.json`` (each with the reason it cannot change any
observable behaviour), prints the score and every survivor (file:line,
operator, diff) and writes ``paper/results/mutation.json`` in the schema
``paper/build.py`` reads, each module's entry with its key, its date and the
commit it was measured at; ``stale`` lists the modules whose entry does not
match their code any more, ``uncovered`` those no test imports.

    python tests/mutation/run.py                      # every module that changed
    python tests/mutation/run.py --budget 90          # at most 90 minutes of it
    python tests/mutation/run.py --modules oracles,sim/latency
    python tests/mutation/run.py --survivors          # re-run the last sessions' survivors (new tests)
    python tests/mutation/run.py --report-only        # re-read the sessions, no mutants run
    python tests/mutation/run.py --plan               # what is up to date and what would run, running nothing

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
import hashlib
import json
import os
import shlex
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path


ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
from experiments.staleness import import_names  # noqa: E402 - one reader of imports for the project

WORK = ROOT / ".mutation"
EQUIVALENT = Path(__file__).resolve().parent / "equivalent.json"
RESULT = ROOT / "paper" / "results" / "mutation.json"
PYTEST_ARGS = "-x -q -p no:cacheprovider -m 'not spark' -o addopts='' --benchmark-skip"
PACKAGES = ("reference", "sim")      # every module of these is in scope
TESTS = ROOT / "tests"
AUTO_TESTS = 4                       # a module without a documented subset is judged by at most this many files
IMPORT_HOPS = 2                      # ... found through at most this many modules between it and the test
STOP_GRACE_S = 30.0                  # at the budget, cosmic-ray gets this long to stop before it is killed

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
    **{part: INCARNATION_TESTS for part in ("incarnation", "incarnation_views", "records", "environment", "clock",
                                            "task_effects", "progress", "driver_steps", "task_retry")},
    "seams": ["tests/quick/test_seams.py"],
    # the execution modes (reference/protocol/modes/): each mode's rules, graph, restart and replay bound
    "micro_batch": ["tests/quick/test_judge_recovery.py", "tests/quick/test_judge_logs.py",
                    "tests/quick/test_judge_engine.py", "tests/quick/test_judge_bounds.py",
                    "tests/quick/test_reference_check_cli.py"],
    "real_time": ["tests/quick/test_real_time.py", "tests/slow/test_real_time_explored.py"],
    "real_time_async": ["tests/quick/test_real_time.py", "tests/slow/test_real_time_explored.py"],
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


def module_files() -> list[str]:
    """Every module in scope: each Python file of ``PACKAGES``, as a path from the repository root."""
    return sorted(p.relative_to(ROOT).as_posix() for package in PACKAGES for p in (ROOT / package).rglob("*.py")
                  if "__pycache__" not in p.parts)


def resolve(name: str, files: list[str] | None = None) -> str:
    """A module named as ``MODULES`` names them (``oracles``: in ``reference/``; ``sim/latency``: in ``sim/``), or
    by its path, -> its path (among ``files``, default ``module_files()``); ``ValueError`` when none or several
    match."""
    if name.endswith(".py"):
        if (ROOT / name).is_file():
            return name
        raise ValueError(f"no module {name}")
    package, stem = name.split("/", 1) if "/" in name else ("reference", name)
    found = [p for p in (files or module_files()) if p.startswith(package + "/") and Path(p).stem == stem]
    if len(found) != 1:
        raise ValueError(f"module {name!r} matches {found or 'nothing'} in {package}/")
    return found[0]


def session_path(module: str) -> Path:
    return WORK / f"{module[:-3].replace('/', '.')}.sqlite"


def key_path(module: str) -> Path:
    return session_path(module).with_suffix(".key")


def test_files() -> list[str]:
    """The test files a subset may take: not the benchmarks (skipped by default) nor the mutation runner."""
    return sorted(p.relative_to(ROOT).as_posix() for p in TESTS.rglob("test_*.py")
                  if not {"mutation", "bench"} & set(p.relative_to(TESTS).parts))


def _dotted(module: str) -> str:
    parts = module[:-3].split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _marked_spark(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Attribute) and n.attr == "spark" for n in ast.walk(node))


def runs_without_spark(tree: ast.Module) -> bool:
    """Whether a test file has a test the subset runs (``-m 'not spark'``): one not marked spark, in a file not
    marked spark as a whole."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark"
                                                for t in node.targets) and _marked_spark(node.value):
            return False
    return any(isinstance(node, ast.FunctionDef) and node.name.startswith("test_")
               and not any(_marked_spark(d) for d in node.decorator_list) for node in ast.walk(tree))


@functools.cache
def _imports_of_tests() -> dict[str, set[str]]:
    out = {}
    for test in test_files():
        tree = ast.parse((ROOT / test).read_text())
        if runs_without_spark(tree):   # importing a.b.c runs a/__init__.py and a/b/__init__.py too
            out[test] = {".".join(n.split(".")[:i]) for n in import_names(tree, test)
                         for i in range(1, n.count(".") + 2)}
    return out


@functools.cache
def _importers_in_scope() -> dict[str, set[str]]:
    """Module path -> the modules of ``PACKAGES`` that import it directly (dotted names)."""
    out: dict[str, set[str]] = {}
    dotted = {_dotted(m): m for m in module_files()}
    for module in module_files():
        for name in import_names(ast.parse((ROOT / module).read_text()), module):
            if name in dotted and dotted[name] != module:
                out.setdefault(dotted[name], set()).add(_dotted(module))
    return out


def tests_for(module: str) -> list[str]:
    """The tests that judge ``module``: its documented subset (``MODULES``), else the test files that import it
    (``import a.b``, ``from a.b import c``, ``from a import b``), or failing those the ones that import a module
    that imports it (up to ``IMPORT_HOPS`` steps away): those named after it first, then the quick tier's, then
    the shortest, at most ``AUTO_TESTS``; a test file whose every test needs Spark does not count. Empty when no test reaches it."""
    files = module_files()
    for name, tests in MODULES.items():
        if resolve(name, files) == module:
            return [t for t in tests if (ROOT / t.split("::")[0]).exists()]
    stem = Path(module).stem
    names = {_dotted(module)}
    by_path = {_dotted(m): m for m in files}
    for _hop in range(IMPORT_HOPS + 1):
        importers = [t for t, imported in _imports_of_tests().items() if names & imported]
        if importers:
            importers.sort(key=lambda t: (stem not in Path(t).stem, _tier(t), _lines(ROOT / t), t))
            return importers[:AUTO_TESTS]
        names = {up for name in names if name in by_path for up in _importers_in_scope().get(by_path[name], set())}
    return []


def _tier(test: str) -> int:
    """The cheaper tier first (``tests/quick/``, then the others): each mutant runs the subset."""
    return 0 if test.startswith("tests/quick/") else 1


@functools.cache
def _lines(path: Path) -> int:
    return len(path.read_text().splitlines())


def _text_hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@functools.cache
def tool_version() -> str:
    """cosmic-ray's version (a new version may make other mutants), or ``not installed``."""
    from importlib import metadata  # noqa: PLC0415
    try:
        return metadata.version("cosmic-ray")
    except metadata.PackageNotFoundError:
        return "not installed"


def module_key(module: str, tests: list[str]) -> str:
    """What a module's mutation result depends on: its text, its tests' and conftest's, the operators, the tool."""
    files = [module, *sorted({t.split("::")[0] for t in tests}), "tests/conftest.py"]
    parts = {"files": {f: _text_hash(ROOT / f) for f in files if (ROOT / f).exists()}, "tests": tests,
             "operators": KEPT_OPERATORS, "tool": tool_version(), "pytest": PYTEST_ARGS}
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def head_commit() -> dict[str, object] | None:
    from experiments.provenance import git_revision  # noqa: PLC0415
    return git_revision(exclude=("paper/results", ".mutation"))


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
    config = session_path(module).with_suffix(".toml")
    config.write_text(
        "[cosmic-ray]\n"
        f"module-path = \"{module}\"\n"
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
    from cosmic_ray.work_db import WorkDB, use_db  # noqa: PLC0415 - installed by make mutation only
    from cosmic_ray.work_item import WorkerOutcome, WorkResult  # noqa: PLC0415
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


def session_key(module: str) -> dict[str, object] | None:
    """The key (and commit, date) a module's session was started with; None without one."""
    try:
        return dict(json.loads(key_path(module).read_text()))
    except (OSError, ValueError):
        return None


def run_module(module: str, tests: list[str], key: str, scratch: Path, survivors_only: bool,
               deadline: float | None) -> bool:
    """Run a module's mutants, continuing its session when it was started with the same key; stopped at the
    deadline (its finished mutants kept). True when every mutant ran."""
    bindir = Path(sys.executable).parent
    session, config = session_path(module), session_path(module).with_suffix(".toml")
    started = session_key(module)
    if survivors_only and session.exists():
        print(f"== {module}: re-running {forget_survivors(session)} survivors", flush=True)
    elif started is not None and started.get("key") == key and session.exists() and config.exists():
        print(f"== {module}: continuing its session ({pending_count(session)} mutants left)", flush=True)
    else:
        took = baseline_seconds(scratch, tests)
        config = write_config(module, tests, timeout_s=max(30.0, 3 * took + 10))
        print(f"== {module}: baseline {took:.1f} s over {', '.join(tests)}", flush=True)
        session.unlink(missing_ok=True)
        subprocess.run([bindir / "cosmic-ray", "init", config, session], cwd=scratch, check=True,
                       stdout=subprocess.DEVNULL)
        subprocess.run([bindir / "cr-filter-operators", session, config], cwd=scratch, check=True)
        print(f"== {module}: {skip_not_code(session)} mutants in annotations or assertion messages skipped")
        git = head_commit() or {}
        key_path(module).write_text(json.dumps({"key": key, "commit": git.get("commit"), "dirty": git.get("dirty"),
                                                "date": datetime.date.today().isoformat()}) + "\n")
    start = time.monotonic()
    proc = subprocess.Popen([bindir / "cosmic-ray", "exec", config, session], cwd=scratch, start_new_session=True)
    try:
        proc.wait(timeout=None if deadline is None else max(1.0, deadline - time.time()))
    except subprocess.TimeoutExpired:
        stop(proc)
        print(f"== {module}: stopped at the budget after {time.monotonic() - start:.0f} s; "
              f"{pending_count(session)} mutants left for the next run", flush=True)
        return False
    if proc.returncode != 0:
        raise subprocess.CalledProcessError(proc.returncode, proc.args)
    print(f"== {module}: mutants ran in {time.monotonic() - start:.0f} s", flush=True)
    return pending_count(session) == 0


def stop(proc: "subprocess.Popen[bytes]") -> None:
    """Stop cosmic-ray and the tests it runs: an interrupt to its process group, then a kill after the grace."""
    os.killpg(proc.pid, signal.SIGINT)
    try:
        proc.wait(timeout=STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def pending_count(session: Path) -> int:
    with sqlite3.connect(session) as db:
        (count,) = db.execute("SELECT COUNT(*) FROM mutation_specs s LEFT JOIN work_results r "
                              "ON s.job_id = r.job_id WHERE r.job_id IS NULL").fetchone()
    return int(count)


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


def measured_entry(module: str, tests: list[str], key: str, equivalent_list: list[dict[str, str]]
                   ) -> tuple[dict, list[tuple[Mutant, dict[str, str]]], list[Mutant]]:
    """A module's entry from its session: counts, tests, key and the commit it was measured at; with its
    equivalent mutants and its survivors."""
    found, pending = read_session(module)
    survivors = [m for m in found if m.outcome == "survived"]
    equivalent = [(m, e) for m in survivors for e in equivalent_list if is_listed(m, e)]
    listed = {id(m) for m, _ in equivalent}
    live = [m for m in survivors if id(m) not in listed]
    started = session_key(module) or {}
    entry = {"total": len(found), "killed": sum(m.outcome == "killed" for m in found), "survived": len(live),
             "equivalent": len(equivalent), "not_run": pending, "tests": tests, "key": key,
             "commit": started.get("commit"), "dirty": started.get("dirty"), "date": started.get("date")}
    for m in live:
        print(f"SURVIVED {m.file}:{m.line} {m.operator} (occurrence {m.occurrence})\n{m.diff}")
    return entry, equivalent, live


def report(scope: list[str], tests: dict[str, list[str]], keys: dict[str, str], previous: dict,
           uncovered: list[str], command: str) -> dict:
    """``mutation.json``: every module of ``scope`` measured by a session of its current key, the others as the
    previous file had them (``stale`` when their key changed since), and the score over all of them."""
    equivalent_list = load_equivalent()
    per_module: dict[str, dict] = {}
    equivalent: list[dict[str, str]] = []
    survivors: list[dict[str, object]] = []
    old = previous.get("per_module", {})
    for module in sorted(set(scope) | set(old)):
        started = session_key(module) if module in keys else None
        if started is not None and started.get("key") == keys[module] and session_path(module).exists():
            entry, eq, live = measured_entry(module, tests[module], keys[module], equivalent_list)
            equivalent += [{"mutant": f"{m.file}:{m.line} {m.operator}: {m.before_after[0]} -> {m.before_after[1]}",
                            "reason": e["reason"]} for m, e in eq]
            survivors += [{"file": m.file, "line": m.line, "operator": m.operator, "diff": m.diff} for m in live]
        elif module in old and not (ROOT / module).exists():
            print(f"{module}: dropped (no such module any more; its code, if moved, is measured where it is now)")
            continue
        elif module in old:
            entry = dict(old[module])
            entry.setdefault("date", previous.get("date"))
            equivalent += [e for e in previous.get("equivalent", []) if e["mutant"].split(":")[0] == module]
            survivors += [x for x in previous.get("survivors", []) if x["file"] == module]
        else:
            continue
        per_module[module] = entry
    stale = sorted(m for m, e in per_module.items() if m in keys and e.get("key") != keys[m])
    partial = sorted(m for m, e in per_module.items() if e.get("not_run"))
    killed = sum(e["killed"] for e in per_module.values())
    live = sum(e["survived"] for e in per_module.values())
    score = round(100.0 * killed / (killed + live), 2) if killed + live else 100.0
    for module, e in per_module.items():
        mark = " STALE" if module in stale else (" (not all run)" if module in partial else "")
        print(f"{module:40s} {e['total']:5d} mutants  {e['killed']:5d} killed  {e['survived']:4d} survived  "
              f"{e['equivalent']:4d} equivalent  {str(e.get('commit') or '-')[:10]}{mark}")
    print(f"score {score:.2f}% ({killed} killed of {killed + live} non-equivalent; {len(equivalent)} equivalent) "
          f"over {len(per_module)} modules; {len(stale)} stale, {len(partial)} not all run, "
          f"{len(uncovered)} that no test imports")
    git = head_commit() or {}
    return {
        "tool": f"cosmic-ray {tool_version()}",
        "date": datetime.date.today().isoformat(),
        "command": command,
        "commit": git.get("commit"),
        "scope": sorted(per_module),
        "operators": KEPT_OPERATORS,
        "total": sum(e["total"] for e in per_module.values()),
        "killed": killed,
        "survived": live,
        "equivalent": equivalent,
        "score_percent": score,
        "not_run": sum(e.get("not_run", 0) for e in per_module.values()),
        "per_module": per_module,
        "survivors": survivors,
        "stale": stale,
        "uncovered": uncovered,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modules", default=None,
                        help="comma-separated modules (oracles, sim/latency, or a path); default every module of "
                             "reference/ and sim/")
    parser.add_argument("--budget", type=float, default=None, metavar="MINUTES",
                        help="stop after this long; the module running then continues in the next run")
    parser.add_argument("--report-only", action="store_true", help="read the existing sessions, run nothing")
    parser.add_argument("--plan", action="store_true", help="say what is up to date and what would run; run nothing")
    parser.add_argument("--survivors", action="store_true",
                        help="re-run only the last sessions' survivors (after adding tests)")
    parser.add_argument("--out", type=Path, default=RESULT)
    args = parser.parse_args(argv)
    if args.budget is not None and not args.budget > 0:
        parser.error(f"--budget: a positive number of minutes, not {args.budget:g}")
    try:
        scope = [resolve(m.strip()) for m in args.modules.split(",") if m.strip()] if args.modules else module_files()
    except ValueError as exc:
        parser.error(str(exc))
    deadline = None if args.budget is None else time.time() + args.budget * 60.0
    previous = json.loads(args.out.read_text()) if args.out.exists() else {}
    tests = {m: tests_for(m) for m in scope}
    uncovered = [m for m in scope if not tests[m]]
    keys = {m: module_key(m, tests[m]) for m in scope if tests[m]}
    old = previous.get("per_module", {})
    current = [m for m in keys if old.get(m, {}).get("key") == keys[m] and not old[m].get("not_run")]
    to_run = [m for m in keys if args.survivors or m not in current]
    print(f"{len(scope)} modules: {len(current)} up to date, {len(to_run)} to run, {len(uncovered)} that no test "
          "imports" + (f" ({', '.join(uncovered)})" if uncovered else ""), flush=True)
    for module in to_run:
        print(f"   to run: {module} ({', '.join(tests[module])})")
    if args.plan:
        return 0
    WORK.mkdir(exist_ok=True)
    if to_run and not args.report_only:
        with tempfile.TemporaryDirectory(prefix="mutation-") as tmp:
            scratch = Path(tmp) / "project"
            copy_project(scratch)
            for module in to_run:
                if deadline is not None and time.time() >= deadline:
                    print(f"the budget has ended: {len(to_run) - to_run.index(module)} modules left for the next run")
                    break
                run_module(module, tests[module], keys[module], scratch, args.survivors, deadline)
    command = "make mutation" + (f" MODULES={args.modules}" if args.modules else "") + \
        (f" BUDGET={args.budget:g}" if args.budget is not None else "")
    doc = report(scope, tests, keys, previous, uncovered, command)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"wrote {args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
