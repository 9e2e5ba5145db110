"""Running an experiment's points: in this process, in a pool of local processes, or as Spark tasks.

- points run in parallel: on Spark (each point one task of a job, on
  ``local[*]`` unless ``--master`` names another cluster), in a local process
  pool (``--executor processes`` or ``--no-spark``) or one after another in
  this process (``--executor inline``);
- points on a backend whose runs are Spark jobs always run one after another
  in this process: each of them is itself a Spark job and they would
  otherwise compete for the same cores and skew each other's timings. Such a
  point that takes longer than its timeout fails, and that backend's
  remaining points are not run;
- a point never raises: its record carries the metrics, or ``error`` (and
  ``unavailable`` when the backend itself is missing), so one bad point does
  not lose a sweep.
"""

from __future__ import annotations

import concurrent.futures
import functools
import os
import platform
import threading
import time
import traceback
import zipfile
from pathlib import Path
from typing import Any, Sequence

from experiments.backends import on_spark
from experiments.experiment import EXECUTORS, ExperimentError, Point, RunContext, json_ready
from experiments.progress import PointsBar
from experiments.registry import get_experiment
from reference.protocol.backend import BackendUnavailable

Record = dict[str, Any]


def run_point(raw: dict[str, Any]) -> Record:
    """Run one point (given as a dict, so it travels to any worker) and return its record."""
    point = Point.from_dict(raw)
    started = time.perf_counter()
    record: Record = {"id": point.id, "point": point.to_dict(), "metrics": None, "error": None}
    try:
        record["metrics"] = json_ready(get_experiment(point.experiment).measure(point))
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


def execute(points: Sequence[Point], ctx: RunContext, label: str = "") -> list[Record]:
    """Run every point and return their records in the points' order."""
    if ctx.executor not in EXECUTORS:
        raise ExperimentError(f"unknown executor {ctx.executor!r}; expected one of {', '.join(EXECUTORS)}")
    bar = PointsBar(len(points), label or "points", ctx.quiet)
    spark_jobs = [i for i, p in enumerate(points) if on_spark(p.backend)]
    others = [i for i, p in enumerate(points) if not on_spark(p.backend)]
    records: list[Record | None] = [None] * len(points)
    try:
        for indices, executor in ((others, ctx.executor), (spark_jobs, "inline")):
            if not indices:
                continue
            raws = [points[i].to_dict() for i in indices]
            if executor == "inline" and ctx.backend_master:
                for raw, i in zip(raws, indices):   # an explicit --master is where a Spark backend runs, too
                    if on_spark(points[i].backend):
                        raw["extra"] = dict(raw["extra"], master=ctx.backend_master)
            for i, record in zip(indices, _execute(raws, executor, ctx, bar)):
                records[i] = record
    finally:
        bar.close()
    return [r for r in records if r is not None]


def _execute(raws: list[dict[str, Any]], executor: str, ctx: RunContext, bar: PointsBar) -> list[Record]:
    if executor == "inline" or len(raws) <= 1:
        return _execute_inline(raws, ctx, bar)
    if executor == "processes":
        return _execute_processes(raws, ctx.workers, bar)
    return _execute_spark(raws, ctx.master, ctx.workers, ctx.quiet, bar)


def _execute_inline(raws: list[dict[str, Any]], ctx: RunContext, bar: PointsBar) -> list[Record]:
    out = []
    missing: dict[str, str] = {}
    for raw in raws:
        backend = raw["backend"]
        if backend in missing:   # the backend is missing or stuck: its other points would say the same
            reason = missing[backend]
            record = {"id": raw["id"], "point": raw, "metrics": None, "error": reason, "wall_s": 0.0,
                      ("skipped" if reason.startswith("not run:") else "unavailable"): True}
        elif on_spark(backend) and ctx.point_timeout_s:
            record = _run_point_with_timeout(raw, ctx.point_timeout_s)
            if record.get("timed_out"):
                missing[backend] = (f"not run: point {raw['id']} did not finish within {ctx.point_timeout_s:.0f} s, "
                                    f"so backend {backend} is taken to be stuck")
        else:
            record = run_point(raw)
        if record.get("unavailable") and backend not in missing:
            missing[backend] = record["error"]
        bar.update(record)
        out.append(record)
    return out


def _run_point_with_timeout(raw: dict[str, Any], timeout_s: float) -> Record:
    """Run a point in a daemon thread; a point that does not finish in time is recorded as failed.

    A Spark backend's run cannot be interrupted from Python, so the thread is
    left behind (it dies with the process); the caller stops sending points
    to that backend.
    """
    box: list[Record] = []
    worker = threading.Thread(target=lambda: box.append(run_point(raw)), daemon=True, name=f"point {raw.get('id')}")
    worker.start()
    worker.join(timeout_s)
    if box:
        return box[0]
    return {"id": raw["id"], "point": raw, "metrics": None, "timed_out": True, "wall_s": round(timeout_s, 3),
            "error": f"timed out: backend {raw['backend']} did not finish this point within {timeout_s:.0f} s"}


def _execute_processes(raws: list[dict[str, Any]], workers: int | None, bar: PointsBar) -> list[Record]:
    workers = max(1, min(workers or os.cpu_count() or 1, len(raws)))
    results: list[Record | None] = [None] * len(raws)
    with concurrent.futures.ProcessPoolExecutor(workers) as pool:
        futures = {pool.submit(run_point, raw): i for i, raw in enumerate(raws)}
        for future in concurrent.futures.as_completed(futures):
            record = future.result()
            results[futures[future]] = record
            bar.update(record)
    return [r for r in results if r is not None]


def _execute_spark(raws: list[dict[str, Any]], master: str, workers: int | None, quiet: bool,
                   bar: PointsBar) -> list[Record]:
    """Each point is one Spark task; one job per point so the progress bar moves as points finish."""
    try:
        from spark_impl.session import SparkUnavailable, session, task_slots
    except ImportError as exc:
        raise BackendUnavailable("spark", f"running points on Spark needs spark_impl: {exc} "
                                          "(use --no-spark to run them in local processes)") from None
    if not quiet:
        bar.bar.write(f"starting Spark on {master} to run the points (--no-spark runs them in local processes)")
    try:
        spark = session(master)
        sc = spark.sparkContext
    except SparkUnavailable as exc:
        raise BackendUnavailable("spark", f"cannot run points on Spark ({master}): {exc}; use --no-spark to run "
                                          "them in local processes") from None
    if not master.startswith("local"):
        sc.addPyFile(str(_package_zip()))   # the workers of a real cluster need this project's code
    slots = max(1, workers or task_slots(spark))
    results: list[Record | None] = [None] * len(raws)

    def one(i: int) -> tuple[int, Record]:
        sc.setJobDescription(f"experiment point {raws[i].get('config')} seed {raws[i].get('seed')}")
        return i, sc.parallelize([raws[i]], 1).map(run_point).collect()[0]

    with concurrent.futures.ThreadPoolExecutor(min(slots, len(raws))) as pool:
        for future in concurrent.futures.as_completed([pool.submit(one, i) for i in range(len(raws))]):
            i, record = future.result()
            results[i] = record
            bar.update(record)
    return [r for r in results if r is not None]


@functools.cache
def _package_zip() -> Path:
    """A zip of the packages a point imports, for the workers of a cluster (they need numpy and simpy installed).
    One per process: a SparkContext refuses a second file of the same name from another path."""
    root = Path(__file__).resolve().parent.parent
    from spark_impl.scratch import scratch_dir
    path = scratch_dir("lightspeed-points-") / "lightspeed_points.zip"   # removed when the process ends
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for package in ("reference", "sim", "experiments"):
            for file in sorted((root / package).rglob("*")):
                if file.is_file() and "__pycache__" not in file.parts and file.suffix in (".py", ".json"):
                    zf.write(file, file.relative_to(root).as_posix())
    return path
