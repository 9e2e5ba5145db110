"""Experiments: named, versioned sweeps over a backend, with results JSON and figures.

An experiment (one module in ``experiments/defs``) says which points to run
(a scenario, a seed, a backend, a cost profile and what to measure), how to
summarise the measurements, which sanity checks the summary must pass, and
what figures to draw. This module runs it:

- the points run in parallel: on Spark (each point one task of a job, on
  ``local[*]`` unless ``--master`` names another cluster), in a local process
  pool (``--executor processes`` or ``--no-spark``) or one after another in
  this process (``--executor inline``). Points on a Spark backend always run
  one after another in this process: each of them is itself a Spark job and
  they would otherwise compete for the same cores and skew each other's
  timings;
- every point records its scenario, seed, profile and metrics, so re-running
  it with the same seed reproduces its numbers (``reproduce``);
- results go to ``<out>/results.json`` with the package versions and the
  environment, figures to ``<out>/*.png`` and ``*.pdf``.

The command line (``lightspeed experiment``, see ``add_experiment_parser``)::

    lightspeed experiment list
    lightspeed experiment NAME [--backend sim|spark|spark-native] [--quick] [--seeds N] [--out DIR]
                               [--master URL | --no-spark | --executor inline] [--workers N]
    lightspeed experiment NAME --reproduce RESULTS.json [--point ID]

Exit codes: 0 every check holds, 1 a sanity check failed or a point failed,
2 bad input, 3 the backend is not available here.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime as _dt
import difflib
import importlib
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

BACKENDS = ("sim", "spark", "spark-native")
SPARK_BACKENDS = ("spark", "spark-native")
EXECUTORS = ("spark", "processes", "inline")
DEFAULT_MASTER = "local[*]"
RESULTS_ROOT = Path("results") / "experiments"
PACKAGES = ("lightspeed-ref", "numpy", "simpy", "pyspark", "rocksdict", "matplotlib")

# experiment name -> module under experiments/defs (one module per experiment)
DEFINITIONS: dict[str, str] = {
    "offset-management": "experiments.defs.offset_management",
    "pipelining": "experiments.defs.pipelining",
    "async-state-checkpoint": "experiments.defs.async_state_checkpoint",
    "changelog-checkpointing": "experiments.defs.changelog_checkpointing",
    "checkpoint-interval": "experiments.defs.checkpoint_interval",
    "calibration": "experiments.defs.calibration",
    "fault-matrix": "experiments.defs.fault_matrix",
}

EXIT_OK, EXIT_CHECKS, EXIT_USAGE, EXIT_UNAVAILABLE = 0, 1, 2, 3


class ExperimentError(ValueError):
    """Bad input: an unknown experiment, backend, executor or option value."""


class BackendUnavailable(RuntimeError):
    """The backend an experiment needs cannot run here (no engine yet, no Java, ...)."""


# ------------------------------------------------------------------ types


@dataclass(frozen=True)
class Point:
    """One measurement of a sweep: everything needed to run it again, and nothing else.

    ``task`` names what the experiment measures for this point (its
    ``measure`` method dispatches on it); ``params`` are the sweep
    coordinates; ``profile`` is the full cost profile document for the sim
    backend (so a result file alone reproduces the point), None otherwise.
    """

    experiment: str
    task: str
    config: str
    params: dict[str, Any]
    seed: int
    backend: str
    scenario: dict[str, Any]
    profile: dict[str, Any] | None = None
    sim_mode: str = "data"
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def id(self) -> str:
        coords = ",".join(f"{k}={_short(v)}" for k, v in sorted(self.params.items()))
        return f"{self.task}/{self.config}" + (f"/{coords}" if coords else "") + f"/seed={self.seed}"

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["id"] = self.id
        return out

    @staticmethod
    def from_dict(raw: dict[str, Any]) -> "Point":
        known = {k: raw[k] for k in ("experiment", "task", "config", "params", "seed", "backend", "scenario",
                                     "profile", "sim_mode", "extra") if k in raw}
        return Point(**known)


def _short(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value)


@dataclass(frozen=True)
class Check:
    """A sanity check on a summary: a trend or bound the model implies. ``ok`` None means not applicable."""

    name: str
    ok: bool | None
    detail: str

    def describe(self) -> str:
        mark = {True: "PASS", False: "FAIL", None: "N/A "}[self.ok]
        return f"[{mark}] {self.name}: {self.detail}"


@dataclass
class RunContext:
    """How this run of an experiment was asked for."""

    backend: str = "sim"
    quick: bool = False
    seeds: int | None = None
    out_dir: Path | None = None
    executor: str = "spark"
    master: str = DEFAULT_MASTER
    workers: int | None = None
    figures: bool = True
    quiet: bool = False
    backend_master: str | None = None   # --master given explicitly: the Spark backends run there too
    point_timeout_s: float | None = None   # a point on a Spark backend taking longer fails (None: the experiment's)

    @property
    def mode(self) -> str:
        return "quick" if self.quick else "full"


class Experiment:
    """Base class of an experiment definition; one subclass instance per module (``EXPERIMENT``).

    A definition sets ``name``, ``version`` (bump it whenever its points or
    metrics change, so old result files are not mixed with new ones),
    ``title``, ``claim`` (the published claim under test, for the report),
    ``backends`` and the seed counts, and implements ``points``, ``measure``,
    ``summarize``, ``checks`` and ``figures``.
    """

    name = ""
    version = "1"
    title = ""
    claim = ""
    backends: tuple[str, ...] = ("sim",)
    default_backend = "sim"
    seeds_quick = 1
    seeds_full = 3
    base_seed = 1
    # True: when some points cannot run (a backend is missing), summarise the others and say what is missing
    partial_ok = False
    # a point on a Spark backend that takes longer than this is recorded as failed and the backend as stuck
    point_timeout_s = 900.0

    # -- what to run
    def points(self, ctx: RunContext) -> list[Point]:
        raise NotImplementedError

    def measure(self, point: Point) -> dict[str, Any]:
        """Run one point and return its metrics (numbers, lists, small dicts). Runs in a worker."""
        raise NotImplementedError

    # -- what it means
    def summarize(self, records: list[dict[str, Any]], ctx: RunContext) -> dict[str, Any]:
        raise NotImplementedError

    def checks(self, summary: dict[str, Any], ctx: RunContext) -> list[Check]:
        return []

    def report(self, summary: dict[str, Any], ctx: RunContext) -> list[str]:
        """Lines for the terminal: the headline numbers against the claim."""
        return []

    def figures(self, summary: dict[str, Any], ctx: RunContext, out_dir: Path) -> list[Path]:
        return []

    def write_artifacts(self, summary: dict[str, Any], ctx: RunContext, out_dir: Path) -> list[Path]:
        """Files besides results.json and the figures (e.g. a fitted profile); written whenever there is a summary."""
        return []

    # -- helpers for definitions
    def seed_list(self, ctx: RunContext) -> list[int]:
        count = ctx.seeds if ctx.seeds is not None else (self.seeds_quick if ctx.quick else self.seeds_full)
        return [self.base_seed + i for i in range(count)]

    def describe(self) -> str:
        return f"{self.name} (v{self.version}): {self.title}"


# --------------------------------------------------------------- registry


def experiment_names() -> list[str]:
    return list(DEFINITIONS)


def get_experiment(name: str) -> Experiment:
    """The definition named ``name``; an unknown name is an error listing the known ones."""
    if name not in DEFINITIONS:
        close = difflib.get_close_matches(name.replace("_", "-"), list(DEFINITIONS), n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise ExperimentError(f"unknown experiment {name!r}{hint}; known experiments: {', '.join(DEFINITIONS)}")
    module = importlib.import_module(DEFINITIONS[name])
    experiment = getattr(module, "EXPERIMENT", None)
    if not isinstance(experiment, Experiment) or experiment.name != name:
        raise ExperimentError(f"{DEFINITIONS[name]} does not define EXPERIMENT for {name!r}")
    return experiment


# ------------------------------------------------------- running backends


def sim_profile(name_or_doc: str | dict[str, Any], **changes: Any) -> dict[str, Any]:
    """A cost profile document (a shipped name, a path, or a dict) with ``changes`` applied.

    ``changes`` may name a storage parameter as ``storage__small_write_ms``.
    The document is validated by ``sim.load_profile``'s rules, so a typo is
    an error naming the parameter.
    """
    from sim.cost_model import PROFILE_DIR, profile_from_dict
    if isinstance(name_or_doc, dict):
        doc = json.loads(json.dumps(name_or_doc))
    else:
        path = name_or_doc if os.path.exists(name_or_doc) else os.path.join(PROFILE_DIR, f"{name_or_doc}.json")
        try:
            with open(path) as fh:
                doc = json.load(fh)
        except FileNotFoundError:
            raise ExperimentError(f"cost profile {name_or_doc!r}: no such shipped profile or file") from None
    if isinstance(doc.get("storage"), str):
        from sim.cost_model import STORAGE_PRESETS
        doc["storage"] = dict(STORAGE_PRESETS[doc["storage"]])
    for key, value in changes.items():
        if key.startswith("storage__"):
            doc["storage"][key[len("storage__"):]] = value
        else:
            doc[key] = value
    profile_from_dict(doc)  # refuses a bad parameter by name
    return doc


def simulate_point(point: Point, scenario: dict[str, Any] | None = None, *, trace: bool = False) -> Any:
    """Run a point's scenario (or ``scenario``) on the simulator; returns the ``sim.Simulation``."""
    from reference.scenario import Scenario
    from sim import simulate
    sc = Scenario.from_dict(scenario if scenario is not None else point.scenario)
    return simulate(sc, point.profile, mode=point.sim_mode, trace_enabled=trace)


def run_on_backend(backend: str, scenario: dict[str, Any], profile: dict[str, Any] | None = None,
                   sim_mode: str = "data", **spark_options: Any) -> tuple[dict[str, Any], Any]:
    """Run a scenario on a backend; returns (outcome, checkpoint storage or None).

    The sim goes through ``sim.simulate`` (so the checkpoint and volume mode
    are available); the reference and the Spark backends through
    ``experiments.cli.run_backend``. ``spark_options`` (``group``,
    ``straggler``) go to the Spark engine, and only there. A backend that
    cannot run here raises ``BackendUnavailable`` with the reason.
    """
    from reference.scenario import Scenario
    if spark_options and backend != "spark":
        raise ExperimentError(f"{', '.join(sorted(spark_options))}: options of the spark backend, not {backend}")
    sc = Scenario.from_dict(scenario)
    if backend == "sim":
        from sim import simulate
        sim = simulate(sc, profile, mode=sim_mode, trace_enabled=False)
        return sim.outcome(), (sim.service.files if sim_mode == "data" else None)
    if backend in SPARK_BACKENDS:
        require_backend(backend)
    from experiments.cli import run_backend
    try:
        return run_backend(backend, sc, None, master=_BACKEND_MASTER if backend in SPARK_BACKENDS else None,
                           **spark_options)
    except SystemExit as exc:  # the CLI's way of saying a backend is missing
        raise BackendUnavailable(f"backend {backend} is not available: {exc}") from None


_BACKEND_MASTER: str | None = None   # the master a Spark backend's run uses (set per point by run_point)


def spark_backend_slots() -> tuple[str, int]:
    """(master, task slots) of the session a point on the spark backend runs on (starting it if need be);
    ``BackendUnavailable`` when it cannot start, as from ``run_on_backend``."""
    require_backend("spark")
    from spark_impl.session import SparkUnavailable, session, task_slots
    try:
        spark = session(_BACKEND_MASTER)
    except SparkUnavailable as exc:
        raise BackendUnavailable(f"backend spark is not available: {exc}") from None
    return spark.sparkContext.master, task_slots(spark)


def require_backend(backend: str) -> None:
    """Fail with ``BackendUnavailable`` early when a Spark backend cannot run (no Java, no pyspark)."""
    if backend not in SPARK_BACKENDS:
        return
    try:
        from spark_impl.session import SparkUnavailable, check_java
    except ImportError as exc:
        raise BackendUnavailable(f"backend {backend} needs spark_impl: {exc}") from None
    try:
        check_java()
    except SparkUnavailable as exc:
        raise BackendUnavailable(f"backend {backend}: {exc}") from None


# ------------------------------------------------------- running a point


def run_point(raw: dict[str, Any]) -> dict[str, Any]:
    """Run one point (given as a dict, so it travels to any worker) and return its record.

    Never raises for a failing measurement: the record carries ``error``
    (and ``unavailable`` when the backend itself is missing), so one bad
    point does not lose a sweep.
    """
    global _BACKEND_MASTER
    point = Point.from_dict(raw)
    _BACKEND_MASTER = point.extra.get("master") if point.backend in SPARK_BACKENDS else None
    started = time.perf_counter()
    record: dict[str, Any] = {"id": point.id, "point": point.to_dict(), "metrics": None, "error": None}
    try:
        experiment = get_experiment(point.experiment)
        record["metrics"] = _plain(experiment.measure(point))
    except BackendUnavailable as exc:
        record["error"], record["unavailable"] = str(exc), True
    except Exception as exc:  # noqa: BLE001 - reported in the record and the run's exit code
        tail = traceback.format_exc(limit=-3).strip().splitlines()
        record["error"] = f"{type(exc).__name__}: {exc}"
        record["traceback"] = tail[-6:]
    record["wall_s"] = round(time.perf_counter() - started, 3)
    # which process measured it: on a cluster, a Python worker in its executor's work directory
    record["process"] = {"host": platform.node(), "pid": os.getpid(), "dir": os.getcwd()}
    return record


def _plain(value: Any) -> Any:
    """JSON-ready copy: numpy scalars to Python numbers, floats rounded to 6 places, tuples to lists."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return None
        return round(value, 6)
    return value


# ------------------------------------------------------------- progress


class Progress:
    """A one-line progress bar on stderr (redrawn in place on a terminal, every 10% otherwise)."""

    WIDTH = 28

    def __init__(self, total: int, label: str, quiet: bool = False):
        self.total, self.label, self.quiet = max(total, 1), label, quiet
        self.done = 0
        self.failed = 0
        self.started = time.perf_counter()
        self.tty = sys.stderr.isatty()
        self._last_decile = -1

    def update(self, record: dict[str, Any]) -> None:
        self.done += 1
        self.failed += bool(record.get("error"))
        if self.quiet:
            return
        elapsed = time.perf_counter() - self.started
        left = elapsed / self.done * (self.total - self.done)
        filled = int(self.WIDTH * self.done / self.total)
        bar = "#" * filled + "-" * (self.WIDTH - filled)
        failed = f", {self.failed} failed" if self.failed else ""
        line = (f"{self.label} [{bar}] {self.done}/{self.total} points{failed}, "
                f"{elapsed:.1f} s elapsed, ~{left:.0f} s left")
        if self.tty:
            sys.stderr.write("\r" + line + ("\n" if self.done == self.total else ""))
            sys.stderr.flush()
        else:
            decile = self.done * 10 // self.total
            if decile != self._last_decile:
                self._last_decile = decile
                print(line, file=sys.stderr)


# ------------------------------------------------------------ executing


def execute(points: Sequence[Point], ctx: RunContext, label: str = "") -> list[dict[str, Any]]:
    """Run every point and return their records in the points' order."""
    if ctx.executor not in EXECUTORS:
        raise ExperimentError(f"unknown executor {ctx.executor!r}; expected one of {', '.join(EXECUTORS)}")
    progress = Progress(len(points), label or "points", ctx.quiet)
    # a point on a Spark backend is itself a Spark job on the shared session: those run here, one at a time
    on_spark = [i for i, p in enumerate(points) if p.backend in SPARK_BACKENDS]
    others = [i for i, p in enumerate(points) if p.backend not in SPARK_BACKENDS]
    records: list[dict[str, Any] | None] = [None] * len(points)
    for indices, executor in ((others, ctx.executor), (on_spark, "inline")):
        if indices:
            raws = [points[i].to_dict() for i in indices]
            if executor == "inline" and ctx.backend_master:
                for raw in raws:   # an explicit --master is where a Spark backend runs, too
                    raw["extra"] = dict(raw["extra"], master=ctx.backend_master)
            done = _execute(raws, executor, ctx, progress)
            for i, record in zip(indices, done):
                records[i] = record
    return [r for r in records if r is not None]


def _execute(raws: list[dict[str, Any]], executor: str, ctx: RunContext, progress: Progress) -> list[dict[str, Any]]:
    if executor == "inline" or len(raws) <= 1:
        out = []
        missing: dict[str, str] = {}
        for raw in raws:
            if raw["backend"] in missing:   # the backend is missing or stuck: its other points would say the same
                reason = missing[raw["backend"]]
                record = {"id": raw["id"], "point": raw, "metrics": None, "error": reason, "wall_s": 0.0,
                          ("skipped" if reason.startswith("not run:") else "unavailable"): True}
            elif raw["backend"] in SPARK_BACKENDS and ctx.point_timeout_s:
                record = _run_point_with_timeout(raw, ctx.point_timeout_s)
                if record.get("timed_out"):
                    missing[raw["backend"]] = (f"not run: point {raw['id']} did not finish within "
                                               f"{ctx.point_timeout_s:.0f} s, so backend {raw['backend']} is "
                                               "taken to be stuck")
                elif record.get("unavailable"):
                    missing[raw["backend"]] = record["error"]
            else:
                record = run_point(raw)
                if record.get("unavailable"):
                    missing[raw["backend"]] = record["error"]
            progress.update(record)
            out.append(record)
        return out
    if executor == "processes":
        return _execute_processes(raws, ctx.workers, progress)
    return _execute_spark(raws, ctx.master, ctx.workers, progress)


def _run_point_with_timeout(raw: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    """Run a point in a daemon thread; a point that does not finish in time is recorded as failed.

    A Spark backend's run cannot be interrupted from Python, so the thread is
    left behind (it dies with the process); the caller stops sending points
    to that backend.
    """
    import threading
    box: list[dict[str, Any]] = []
    worker = threading.Thread(target=lambda: box.append(run_point(raw)), daemon=True,
                              name=f"point {raw.get('id')}")
    worker.start()
    worker.join(timeout_s)
    if box:
        return box[0]
    return {"id": raw["id"], "point": raw, "metrics": None, "timed_out": True, "wall_s": round(timeout_s, 3),
            "error": f"timed out: backend {raw['backend']} did not finish this point within {timeout_s:.0f} s"}


def _execute_processes(raws: list[dict[str, Any]], workers: int | None,
                       progress: Progress) -> list[dict[str, Any]]:
    workers = max(1, min(workers or os.cpu_count() or 1, len(raws)))
    results: list[dict[str, Any] | None] = [None] * len(raws)
    with concurrent.futures.ProcessPoolExecutor(workers) as pool:
        futures = {pool.submit(run_point, raw): i for i, raw in enumerate(raws)}
        for future in concurrent.futures.as_completed(futures):
            record = future.result()
            results[futures[future]] = record
            progress.update(record)
    return [r for r in results if r is not None]


def _execute_spark(raws: list[dict[str, Any]], master: str, workers: int | None,
                   progress: Progress) -> list[dict[str, Any]]:
    """Each point is one Spark task; one job per point so the progress bar moves as points finish."""
    try:
        from spark_impl.session import SparkUnavailable, session, task_slots
    except ImportError as exc:
        raise BackendUnavailable(f"running points on Spark needs spark_impl: {exc} "
                                 "(use --no-spark to run them in local processes)") from None
    if not progress.quiet:
        print(f"starting Spark on {master} to run the points (--no-spark runs them in local processes)",
              file=sys.stderr)
    try:
        spark = session(master)
        sc = spark.sparkContext
    except SparkUnavailable as exc:
        raise BackendUnavailable(f"cannot run points on Spark ({master}): {exc}; "
                                 "use --no-spark to run them in local processes") from None
    if not master.startswith("local"):
        sc.addPyFile(str(_package_zip()))   # the workers of a real cluster need this project's code
    slots = max(1, workers or task_slots(spark))
    results: list[dict[str, Any] | None] = [None] * len(raws)

    def one(i: int) -> tuple[int, dict[str, Any]]:
        sc.setJobDescription(f"experiment point {raws[i].get('config')} seed {raws[i].get('seed')}")
        return i, sc.parallelize([raws[i]], 1).map(run_point).collect()[0]

    with concurrent.futures.ThreadPoolExecutor(min(slots, len(raws))) as pool:
        for future in concurrent.futures.as_completed([pool.submit(one, i) for i in range(len(raws))]):
            i, record = future.result()
            results[i] = record
            progress.update(record)
    return [r for r in results if r is not None]


def _package_zip() -> Path:
    """A zip of the packages a point imports, for the workers of a cluster (they need numpy and simpy installed)."""
    import tempfile
    import zipfile
    root = Path(__file__).resolve().parent.parent
    path = Path(tempfile.mkdtemp(prefix="lightspeed-points-")) / "lightspeed_points.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for package in ("reference", "sim", "experiments"):
            for file in sorted((root / package).rglob("*")):
                if file.is_file() and "__pycache__" not in file.parts and file.suffix in (".py", ".json"):
                    zf.write(file, file.relative_to(root).as_posix())
    return path


# ------------------------------------------------------------- results


def environment(ctx: RunContext) -> dict[str, Any]:
    """Package versions, interpreter, machine and source revision of this run."""
    from importlib import metadata
    versions: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    java = None
    try:
        proc = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=20)
        java = (proc.stderr or proc.stdout).splitlines()[0] if (proc.stderr or proc.stdout) else None
    except (OSError, subprocess.SubprocessError):
        java = None
    return {"python": sys.version.split()[0], "implementation": platform.python_implementation(),
            "platform": platform.platform(), "machine": platform.machine(), "cpu_count": os.cpu_count(),
            "packages": versions, "java": java, "git": _git_revision(),
            "executor": ctx.executor, "master": ctx.master if ctx.executor == "spark" else None,
            "argv": sys.argv[1:]}


def _git_revision() -> dict[str, Any] | None:
    root = Path(__file__).resolve().parent.parent
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                                timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=root, capture_output=True, text=True,
                               timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": commit or None, "dirty": bool(dirty)} if commit else None


def default_out_dir(experiment: Experiment, ctx: RunContext) -> Path:
    return RESULTS_ROOT / experiment.name / f"{ctx.backend}-{ctx.mode}"


@dataclass
class ExperimentResult:
    experiment: Experiment
    ctx: RunContext
    records: list[dict[str, Any]]
    summary: dict[str, Any]
    checks: list[Check]
    out_dir: Path
    figures: list[Path]
    results_path: Path
    unavailable: str | None = None

    @property
    def failed_points(self) -> list[dict[str, Any]]:
        return [r for r in self.records if r.get("error")]

    @property
    def exit_code(self) -> int:
        if self.unavailable:
            return EXIT_UNAVAILABLE
        if self.failed_points or any(c.ok is False for c in self.checks):
            return EXIT_CHECKS
        return EXIT_OK


def run_experiment(name: str, ctx: RunContext) -> ExperimentResult:
    """Run an experiment end to end: points, summary, checks, results JSON, figures."""
    experiment = get_experiment(name)
    if ctx.backend not in BACKENDS:
        raise ExperimentError(f"unknown backend {ctx.backend!r}; expected one of {', '.join(BACKENDS)}")
    if ctx.backend not in experiment.backends:
        raise ExperimentError(f"experiment {name} runs on {', '.join(experiment.backends)}, "
                              f"not on {ctx.backend}" + _backend_hint(experiment))
    if ctx.seeds is not None and ctx.seeds < 1:
        raise ExperimentError(f"--seeds must be at least 1, got {ctx.seeds}")
    if ctx.executor not in EXECUTORS:
        raise ExperimentError(f"unknown executor {ctx.executor!r}; expected one of {', '.join(EXECUTORS)}")
    if ctx.point_timeout_s is None:
        ctx.point_timeout_s = experiment.point_timeout_s
    elif ctx.point_timeout_s <= 0:
        raise ExperimentError(f"--point-timeout must be positive, got {ctx.point_timeout_s}")
    out_dir = Path(ctx.out_dir) if ctx.out_dir else default_out_dir(experiment, ctx)
    started = time.perf_counter()
    started_at = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    unavailable = None
    try:
        require_backend(ctx.backend)
        points = experiment.points(ctx)
        ids = [p.id for p in points]
        if len(set(ids)) != len(ids):
            duplicate = next(i for i in ids if ids.count(i) > 1)
            raise ExperimentError(f"experiment {name} defines point {duplicate} more than once")
        records = execute(points, ctx, label=f"{name} ({ctx.backend}, {ctx.mode})")
    except BackendUnavailable as exc:
        unavailable, records = str(exc), []
    missing = [r for r in records if r.get("unavailable")]
    if missing and unavailable is None:
        unavailable = missing[0]["error"]
    summary: dict[str, Any] = {}
    checks: list[Check] = []
    artifacts: list[Path] = []
    out_dir.mkdir(parents=True, exist_ok=True)
    good = [r for r in records if not r.get("error")]
    if unavailable is None or (experiment.partial_ok and good):
        summary = _plain(experiment.summarize(good, ctx))
        checks = experiment.checks(summary, ctx)
        artifacts = experiment.write_artifacts(summary, ctx, out_dir)
    results_path = out_dir / "results.json"
    document = {
        "experiment": experiment.name, "version": experiment.version, "title": experiment.title,
        "claim": experiment.claim, "backend": ctx.backend, "mode": ctx.mode,
        "seeds": experiment.seed_list(ctx), "started_at": started_at,
        "wall_s": round(time.perf_counter() - started, 3), "environment": environment(ctx),
        "unavailable": unavailable, "summary": summary,
        "checks": [asdict(c) for c in checks], "artifacts": [p.name for p in artifacts], "points": records,
    }
    results_path.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")
    figures: list[Path] = []
    if ctx.figures and summary:
        figures = draw_figures(experiment, summary, ctx, out_dir)
    return ExperimentResult(experiment, ctx, records, summary, checks, out_dir, figures + artifacts, results_path,
                            unavailable)


def _backend_hint(experiment: Experiment) -> str:
    if experiment.backends == SPARK_BACKENDS or set(experiment.backends) <= set(SPARK_BACKENDS):
        return " (it measures the Spark engine; the simulator is what it calibrates)"
    return ""


def draw_figures(experiment: Experiment, summary: dict[str, Any], ctx: RunContext, out_dir: Path) -> list[Path]:
    try:
        import matplotlib
    except ImportError:
        print("note: matplotlib is not installed, figures skipped (pip install matplotlib)", file=sys.stderr)
        return []
    matplotlib.use("Agg", force=True)
    return experiment.figures(summary, ctx, out_dir)


def load_results(results_path: str | Path) -> dict[str, Any]:
    try:
        document = json.loads(Path(results_path).read_text())
    except FileNotFoundError:
        raise ExperimentError(f"{results_path}: no such results file") from None
    except json.JSONDecodeError as exc:
        raise ExperimentError(f"{results_path}: not valid JSON: {exc}") from None
    if not isinstance(document, dict) or "points" not in document or "experiment" not in document:
        raise ExperimentError(f"{results_path}: not an experiment results file (no experiment or points)")
    return document


def reproduce(results_path: str | Path, point_ids: Iterable[str] | None = None) -> list[dict[str, Any]]:
    """Re-run points of a results file; one entry per point with ``same`` (metrics identical) and both."""
    document = load_results(results_path)
    wanted = set(point_ids) if point_ids else None
    out = []
    for record in document.get("points", []):
        if wanted is not None and record["id"] not in wanted:
            continue
        if record.get("error"):
            continue
        again = run_point(record["point"])
        out.append({"id": record["id"], "same": again["metrics"] == record["metrics"],
                    "recorded": record["metrics"], "again": again["metrics"], "error": again.get("error")})
    if wanted is not None:
        unknown = wanted - {e["id"] for e in out}
        if unknown:
            raise ExperimentError(f"no such successful point in {results_path}: {', '.join(sorted(unknown))}")
    return out


# ---------------------------------------------------------- summaries


def group(records: Iterable[dict[str, Any]], *keys: str, task: str | None = None) -> dict[tuple, list[dict]]:
    """Records grouped by point fields (``config``) or params (``params.rate``), in first-seen order."""
    out: dict[tuple, list[dict]] = {}
    for record in records:
        point = record["point"]
        if task is not None and point["task"] != task:
            continue
        key = tuple(point["params"].get(k[len("params."):]) if k.startswith("params.") else point.get(k)
                    for k in keys)
        out.setdefault(key, []).append(record)
    return out


def over_seeds(records: Sequence[dict[str, Any]], metric: str | Callable[[dict[str, Any]], Any]) -> dict[str, Any]:
    """Median, min and max of one metric over a group's seeds (None values skipped)."""
    values = []
    for r in records:
        v = metric(r["metrics"]) if callable(metric) else r["metrics"].get(metric)
        if v is not None:
            values.append(float(v))
    if not values:
        return {"median": None, "min": None, "max": None, "n": 0}
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0..100) by linear interpolation; None for no values."""
    if not values:
        return None
    data = sorted(values)
    pos = (len(data) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(data) - 1)
    return data[lo] + (data[hi] - data[lo]) * (pos - lo)


def reduction(before: float | None, after: float | None) -> float | None:
    """Relative reduction from ``before`` to ``after`` (0.5 = halved); None when undefined."""
    if before is None or after is None or before <= 0:
        return None
    return 1.0 - after / before


def fmt_ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f} ms"


def fmt_pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:+.0f}%"


# -------------------------------------------------------------- figures

# One palette for every figure, close to the published bar charts (muted, high contrast).
PALETTE = ("#1b3139", "#ff3621", "#00a972", "#ffab00", "#2272b4", "#98102a", "#6b7f86")


def figure_style() -> dict[str, Any]:
    return {"font.size": 9, "axes.spines.top": False, "axes.spines.right": False, "axes.grid": True,
            "axes.grid.axis": "y", "grid.alpha": 0.3, "axes.titlesize": 10, "legend.frameon": False,
            "figure.dpi": 100, "savefig.dpi": 150, "pdf.fonttype": 42}


def save_figure(fig: Any, out_dir: Path, stem: str) -> list[Path]:
    """Write ``stem.png`` and ``stem.pdf`` without timestamps, so the same numbers give the same bytes."""
    import matplotlib.pyplot as plt
    paths = [out_dir / f"{stem}.png", out_dir / f"{stem}.pdf"]
    fig.savefig(paths[0], metadata={"Software": None}, bbox_inches="tight")
    fig.savefig(paths[1], metadata={"Creator": None, "Producer": None, "CreationDate": None},
                bbox_inches="tight")
    plt.close(fig)
    return paths


def grouped_bars(ax: Any, categories: Sequence[str], series: dict[str, Sequence[float | None]],
                 unit: str = "ms", value_format: str = "{:,.0f}", legend: bool = True) -> None:
    """Bars per category, one colour per series, each bar labelled with its value (the published style).

    The legend sits in one row above the bars, in headroom the y axis keeps for it.
    """
    n = max(len(series), 1)
    width = 0.8 / n
    top = 0.0
    for i, (label, values) in enumerate(series.items()):
        xs = [c + (i - (n - 1) / 2) * width for c in range(len(categories))]
        heights = [v if v is not None else 0.0 for v in values]
        top = max([top] + heights)
        bars = ax.bar(xs, heights, width * 0.92, label=label, color=PALETTE[i % len(PALETTE)])
        for bar, v in zip(bars, values):
            if v is not None:
                ax.annotate(value_format.format(v), (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                            ha="center", va="bottom", fontsize=7, xytext=(0, 1), textcoords="offset points")
    ax.set_xticks(range(len(categories)))
    ax.set_xticklabels(categories, rotation=0)
    if unit:
        ax.set_ylabel(unit)
    rows = 1 if n <= 4 else 2
    ax.set_ylim(0, (top or 1.0) * (1.22 + 0.1 * rows))
    if legend and len(series) > 1:
        ax.legend(loc="upper left", ncol=min(n, 4), fontsize=7, handlelength=1.2, columnspacing=1.0)


# ---------------------------------------------------------------- CLI


def add_experiment_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``lightspeed experiment`` on the CLI's subparsers; returns the subparser."""
    lines = [f"  {name:<24} {_title(name)}" for name in DEFINITIONS]
    p = subparsers.add_parser(
        "experiment", help="run a named experiment (sweep, results JSON, figures); 'list' shows them",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run a named, versioned experiment. Its points (scenario x seed) run in parallel as Spark\n"
                    "tasks (--master, default local[*]) or local processes (--no-spark); points on a Spark backend\n"
                    "run one after another, each being a Spark job itself. Results go to results.json with the\n"
                    "scenario and seed of every point, the package versions and the environment; figures to PNG\n"
                    "and PDF. Exit code: 0 every sanity check holds, 1 a check or a point failed, 2 bad input,\n"
                    "3 the backend is not available here (nothing is estimated in its place).",
        epilog="experiments:\n" + "\n".join(lines) + "\n\nexamples:\n"
               "  lightspeed experiment list\n"
               "  lightspeed experiment offset-management --quick --no-spark\n"
               "  lightspeed experiment pipelining --seeds 5 --master spark://host:7077\n"
               "  lightspeed experiment calibration --backend spark\n"
               "  lightspeed experiment offset-management --reproduce results/experiments/"
               "offset-management/sim-quick/results.json")
    p.add_argument("name", metavar="NAME", help="an experiment name, or 'list'")
    p.add_argument("--backend", choices=BACKENDS, default=None,
                   help="where the points run (default: the experiment's own; sim for most, spark for calibration)")
    p.add_argument("--quick", action="store_true", help="the small version (seconds; what CI runs)")
    p.add_argument("--seeds", type=int, default=None, help="seeds per point (default: 1 quick, 3 full)")
    p.add_argument("--out", default=None, help="output directory (default: results/experiments/NAME/BACKEND-MODE)")
    p.add_argument("--master", default=None,
                   help=f"Spark master the points run on (default {DEFAULT_MASTER}); the spark backends run "
                        "there too (default: their own, local[2])")
    p.add_argument("--executor", choices=EXECUTORS, default="spark",
                   help="run points as Spark tasks (default), in local processes, or one by one in this process")
    p.add_argument("--no-spark", action="store_true", help="same as --executor processes")
    p.add_argument("--workers", type=int, default=None, help="parallel points (default: Spark's or the cores)")
    p.add_argument("--no-figures", action="store_true", help="write results.json only")
    p.add_argument("--point-timeout", type=float, default=None, metavar="SECONDS",
                   help="a point on a spark backend that runs longer fails, and the backend's remaining points "
                        "are not run (default: the experiment's, 180 s to 900 s)")
    p.add_argument("--reproduce", metavar="RESULTS.json", default=None,
                   help="re-run the points of a results file and say whether every number is the same")
    p.add_argument("--point", action="append", default=None, metavar="ID",
                   help="with --reproduce: only this point (repeatable)")
    p.set_defaults(fn=cmd_experiment)
    return p


def _title(name: str) -> str:
    try:
        return get_experiment(name).title
    except Exception as exc:  # noqa: BLE001 - a broken definition must not break --help
        return f"(cannot load: {exc})"


def cmd_experiment(args: argparse.Namespace) -> int:
    try:
        return _cmd_experiment(args)
    except ExperimentError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE


def _cmd_experiment(args: argparse.Namespace) -> int:
    if args.name == "list":
        for name in DEFINITIONS:
            exp = get_experiment(name)
            print(f"{name:<24} v{exp.version}  backends: {', '.join(exp.backends):<25} {exp.title}")
            if exp.claim:
                print(f"{'':<28}claim: {exp.claim}")
        return EXIT_OK
    experiment = get_experiment(args.name)
    if args.reproduce:
        document = load_results(args.reproduce)
        if document["experiment"] != experiment.name:
            raise ExperimentError(f"{args.reproduce} holds results of {document['experiment']}, not {experiment.name}")
        if str(document.get("version")) != experiment.version:
            print(f"note: {args.reproduce} was made by version {document.get('version')} of {experiment.name}; "
                  f"this is version {experiment.version}, so its points may measure something else",
                  file=sys.stderr)
        entries = reproduce(args.reproduce, args.point)
        same = sum(e["same"] for e in entries)
        for e in entries:
            if not e["same"]:
                print(f"DIFFERS {e['id']}: recorded {json.dumps(e['recorded'])[:200]} "
                      f"again {json.dumps(e['again'])[:200]}" + (f" ({e['error']})" if e["error"] else ""))
        print(f"{same} of {len(entries)} points reproduce their numbers exactly")
        return EXIT_OK if same == len(entries) else EXIT_CHECKS
    if args.workers is not None and args.workers < 1:
        raise ExperimentError(f"--workers must be at least 1, got {args.workers}")
    ctx = RunContext(backend=args.backend or experiment.default_backend, quick=args.quick, seeds=args.seeds,
                     out_dir=Path(args.out) if args.out else None,
                     executor="processes" if args.no_spark else args.executor,
                     master=args.master or DEFAULT_MASTER, workers=args.workers, figures=not args.no_figures,
                     backend_master=args.master, point_timeout_s=args.point_timeout)
    result = run_experiment(args.name, ctx)
    print_result(result)
    return result.exit_code


def print_result(result: ExperimentResult) -> None:
    exp, ctx = result.experiment, result.ctx
    print(f"== {exp.describe()}  [{ctx.backend}, {ctx.mode}]")
    if exp.claim:
        print(f"   claim under test: {exp.claim}")
    if result.unavailable:
        print(f"   BACKEND NOT AVAILABLE: {result.unavailable}")
        if not result.summary:
            print("   nothing was measured; no numbers are reported.")
            print(f"   written: {result.results_path}")
            return
        print("   the points that could run are summarised below; the others are missing, not estimated.")
    for line in exp.report(result.summary, ctx):
        print("   " + line)
    skipped = [r for r in result.failed_points if r.get("skipped")]
    for record in result.failed_points:
        if not record.get("unavailable") and not record.get("skipped"):
            print(f"   POINT FAILED {record['id']}: {record['error']}")
    if skipped:
        print(f"   {len(skipped)} more points {skipped[0]['error']}")
    if result.checks:
        print("   sanity checks:")
        for check in result.checks:
            print("     " + check.describe())
    print(f"   written: {result.results_path}")
    for path in result.figures:
        if path.suffix == ".png":
            print(f"   figure:  {path} (and .pdf)")
        elif path.suffix != ".pdf":
            print(f"   written: {path}")
