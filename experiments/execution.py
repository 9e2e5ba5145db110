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
  not lose a sweep;
- the caller is told of each point as it ends (``on_record``: the ledger writes
  its unit then), with how busy the machine was while it ran
  (``experiments.machine_load``); a ``Budget`` stops starting points once the
  next is not expected to end in time.
"""

from __future__ import annotations

import concurrent.futures
import datetime as _dt
import functools
import os
import platform
import threading
import time
import traceback
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from experiments.backends import on_spark
from experiments.experiment import EXECUTORS, ExperimentError, Point, RunContext, json_ready
from experiments.machine_load import Load, LoadMeter, Mark, judged_by_wall
from experiments.measure import measure_point
from experiments.progress import PointsBar
from experiments.registry import get_experiment
from reference.protocol.backend import BackendUnavailable

Record = dict[str, Any]
# told of every point that ran, as it ends: its record, when it started (ISO 8601, UTC), and the machine's load
OnRecord = Callable[[Record, str, "Load | None"], object]


def run_point(raw: dict[str, Any]) -> Record:
    """Run one point (given as a dict, so it travels to any worker) and return its record."""
    point = Point.from_dict(raw)
    started = time.perf_counter()
    record: Record = {"id": point.id, "point": point.to_dict(), "metrics": None, "error": None}
    try:
        metrics, stopping = measure_point(get_experiment(point.experiment), point)
        record["metrics"] = json_ready(metrics)
        if stopping is not None:
            record["stopping"] = json_ready(stopping)
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


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


@dataclass
class Budget:
    """When to stop starting points: none is started unless it is expected to end by ``deadline`` (epoch
    seconds; None: no budget). A point is expected to take the mean wall time of the points of this run that
    ended so far, else ``expected_s`` (the ledger's or the definition's estimate). A point that started always
    runs to its end: a point cannot be stopped half-way without losing it (a Spark job cannot be cancelled from
    Python), so the run ends at most one point's overrun after the deadline."""

    deadline: float | None = None
    expected_s: float = 0.0
    _walls: tuple[float, ...] = ()

    def ended(self, record: Record) -> None:
        self._walls += (float(record.get("wall_s") or 0.0),)

    def allows(self) -> bool:
        if self.deadline is None:
            return True
        expected = sum(self._walls) / len(self._walls) if self._walls else self.expected_s
        return time.time() + expected <= self.deadline


@dataclass
class _Tracker:
    """The progress bar, the budget and the load of every point, and the caller told as each point ends."""

    bar: PointsBar
    budget: Budget
    meter: LoadMeter | None
    on_record: OnRecord | None

    def begin(self) -> tuple[str, Mark | None]:
        return _now(), self.meter.mark() if self.meter is not None else None

    def end(self, record: Record, begun: tuple[str, Mark | None]) -> None:
        load = None
        if self.meter is not None:
            load = self.meter.between(begun[1], self.meter.mark(), judged_by_wall(record["point"]["backend"]))
        self.budget.ended(record)
        self.bar.update(record)
        if self.on_record is not None and not record.get("skipped") and not record.get("timed_out") \
                and not record.get("unavailable"):
            self.on_record(record, begun[0], load)


def execute(points: Sequence[Point], ctx: RunContext, label: str = "", on_record: OnRecord | None = None,
            budget: Budget | None = None) -> list[Record]:
    """Run the points and return their records in the points' order; ``on_record`` is told of each point that
    ran (not of one skipped, timed out or whose backend is missing) as it ends, with the machine's load while it
    ran. With a ``budget``, points it does not allow are not started and have no record."""
    if ctx.executor not in EXECUTORS:
        raise ExperimentError(f"unknown executor {ctx.executor!r}; expected one of {', '.join(EXECUTORS)}")
    meter = LoadMeter() if on_record is not None else None
    tracker = _Tracker(PointsBar(len(points), label or "points", ctx.quiet), budget or Budget(), meter, on_record)
    spark_jobs = [i for i, p in enumerate(points) if on_spark(p.backend)]
    others = [i for i, p in enumerate(points) if not on_spark(p.backend)]
    records: list[Record | None] = [None] * len(points)
    try:
        if meter is not None:
            meter.start()
        for indices, executor in ((others, ctx.executor), (spark_jobs, "inline")):
            if not indices:
                continue
            raws = [points[i].to_dict() for i in indices]
            if executor == "inline" and ctx.backend_master:
                for raw, i in zip(raws, indices):   # an explicit --master is where a Spark backend runs, too
                    if on_spark(points[i].backend):
                        raw["extra"] = dict(raw["extra"], master=ctx.backend_master)
            for i, record in zip(indices, _execute(raws, executor, ctx, tracker)):
                records[i] = record
    finally:
        tracker.bar.close()
        if meter is not None:
            meter.stop()
    return [r for r in records if r is not None]


def _execute(raws: list[dict[str, Any]], executor: str, ctx: RunContext, tracker: _Tracker) -> list[Record | None]:
    """One record per raw point, in order (None for a point the budget did not start)."""
    if executor == "inline" or len(raws) <= 1:
        return _execute_inline(raws, ctx, tracker)
    if executor == "processes":
        workers = max(1, min(ctx.workers or os.cpu_count() or 1, len(raws)))
        with concurrent.futures.ProcessPoolExecutor(workers) as pool:
            return _execute_pool(raws, workers, lambda raw: pool.submit(run_point, raw), tracker)
    return _execute_spark(raws, ctx.master, ctx.workers, ctx.quiet, tracker)


def _execute_inline(raws: list[dict[str, Any]], ctx: RunContext, tracker: _Tracker) -> list[Record | None]:
    out: list[Record | None] = []
    missing: dict[str, str] = {}
    for raw in raws:
        if not tracker.budget.allows():
            out.append(None)
            continue
        backend = raw["backend"]
        begun = tracker.begin()
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
        tracker.end(record, begun)
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


def _execute_pool(raws: list[dict[str, Any]], slots: int,
                  submit: Callable[[dict[str, Any]], "concurrent.futures.Future[Record]"],
                  tracker: _Tracker) -> list[Record | None]:
    """Keep ``slots`` points running at once, starting the next as one ends while the budget allows it."""
    results: list[Record | None] = [None] * len(raws)
    waiting = list(range(len(raws)))
    running: dict["concurrent.futures.Future[Record]", tuple[int, tuple[str, Mark | None]]] = {}
    try:
        while waiting or running:
            while waiting and len(running) < slots and tracker.budget.allows():
                i = waiting.pop(0)
                begun = tracker.begin()
                running[submit(raws[i])] = (i, begun)
            if not running:
                break       # the budget allows no more
            done, _ = concurrent.futures.wait(running, return_when=concurrent.futures.FIRST_COMPLETED)
            for future in done:
                i, begun = running.pop(future)
                record = future.result()
                results[i] = record
                tracker.end(record, begun)
    except BaseException:
        # interrupted (Ctrl-C): a point that has ended by now is still kept; the others are given up
        for future, (i, begun) in running.items():
            if future.done() and not future.cancelled() and future.exception() is None:
                tracker.end(future.result(), begun)
            else:
                future.cancel()
        raise
    return results


def _execute_spark(raws: list[dict[str, Any]], master: str, workers: int | None, quiet: bool,
                   tracker: _Tracker) -> list[Record | None]:
    """Each point is one Spark task; one job per point so the progress bar moves as points finish."""
    try:
        from spark_impl.session import SparkUnavailable, session, task_slots
    except ImportError as exc:
        raise BackendUnavailable("spark", f"running points on Spark needs spark_impl: {exc} "
                                          "(use --no-spark to run them in local processes)") from None
    if not quiet:
        tracker.bar.bar.write(f"starting Spark on {master} to run the points (--no-spark runs them in local processes)")
    try:
        spark = session(master)
        sc = spark.sparkContext
    except SparkUnavailable as exc:
        raise BackendUnavailable("spark", f"cannot run points on Spark ({master}): {exc}; use --no-spark to run "
                                          "them in local processes") from None
    if not master.startswith("local"):
        sc.addPyFile(str(_package_zip()))   # the workers of a real cluster need this project's code
    slots = max(1, min(workers or task_slots(spark), len(raws)))

    def one(raw: dict[str, Any]) -> Record:
        sc.setJobDescription(f"experiment point {raw.get('config')} seed {raw.get('seed')}")
        record: Record = sc.parallelize([raw], 1).map(run_point).collect()[0]
        return record

    with concurrent.futures.ThreadPoolExecutor(slots) as pool:
        return _execute_pool(raws, slots, lambda raw: pool.submit(one, raw), tracker)


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
