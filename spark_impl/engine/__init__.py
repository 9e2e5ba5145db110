"""The protocol of SPEC section 2 on a real Spark cluster through PySpark (``--backend spark``).

``run_spark(scenario)`` runs a scenario to the end of its input through every
fault and restart and returns (outcome, checkpoint storage). The driver loop
is Python (``driver.py``), tasks are Spark jobs on executors (``task.py``),
state lives in the RocksDB store of ``spark_impl.state_store`` on the
executors, and the checkpoint directory is a path every worker can reach.

A driver crash has two forms:

- ``crash="process"``: the driver process is killed with SIGKILL at the step,
  and a new driver process restarts the query from the checkpoint directory
  (``supervisor.py``; what an outside observer saw is kept in a journal).
- ``crash="in-process"`` (the default, and what the test matrix uses, since
  each new driver process pays Spark's start-up again): the incarnation's
  driver state, executor caches and jobs are dropped and the next
  incarnation restarts from the checkpoint directory alone, in the same
  process and SparkSession.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from reference.engine import Incarnation
from reference.outcome import build_outcome
from reference.runner import Run, RunResult
from reference.scenario import Scenario
from reference.storage import LocalStorage

from .driver import ClaimingFaultBook, EngineContext, GraphRunner, SparkIncarnation
from .progress import StreamingListener, latency_summary

__all__ = ["EngineContext", "QueryInUse", "SparkRun", "StreamingListener", "run_spark"]

LOCK_NAME = ".lightspeed-lock"


class QueryInUse(RuntimeError):
    """Another live query holds the checkpoint directory."""


class SparkRun(Run):
    """The reference's run loop (incarnations, restarts, recovery) with incarnations executed on Spark."""

    def __init__(self, scenario: Scenario, engine: EngineContext, storage: LocalStorage, first_life: int = 0):
        self.engine = engine
        self.first_life = first_life
        super().__init__(scenario, incarnation_class=SparkIncarnation, storage=storage)  # type: ignore[arg-type]
        self.faults = ClaimingFaultBook(scenario.faults, engine.coord)
        self.executed = [[] for _ in range(first_life)]  # earlier lives ran in processes that are gone

    def new_incarnation(self, number: int) -> Incarnation:
        return SparkIncarnation(self.scenario, self.data, self.storage, self.restart, number, self.observer,
                                engine=self.engine)

    def new_executor(self, inc: Incarnation, number: int) -> Any:
        return GraphRunner(inc, self.faults)  # type: ignore[arg-type]


def acquire_checkpoint(root: Path, scenario: Scenario) -> Path:
    """Refuse a checkpoint directory that another live query holds (two queries on one checkpoint)."""
    root.mkdir(parents=True, exist_ok=True)
    lock = root.parent / f"{root.name}{LOCK_NAME}"
    try:
        fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        try:
            holder = json.loads(lock.read_text())
        except (OSError, ValueError):
            holder = {}
        pid = holder.get("pid")
        if isinstance(pid, int) and _alive(pid):
            raise QueryInUse(f"{root}: checkpoint directory is in use by query {holder.get('scenario')!r} "
                             f"(driver pid {pid}); two queries cannot share one checkpoint") from None
        lock.unlink(missing_ok=True)  # a stale lock of a dead driver
        fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    with os.fdopen(fd, "w") as handle:
        json.dump({"pid": os.getpid(), "scenario": scenario.name}, handle)
    return lock


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def run_spark(scenario: Scenario, *, master: str | None = None, workdir: str | os.PathLike[str] | None = None,
              pace: bool = True, listeners: list[Any] | None = None, spark: Any = None,
              straggler: tuple[float, float, int] | None = None,
              group: int = 1) -> tuple[dict[str, Any], LocalStorage]:
    """Run ``scenario`` on Spark; returns (outcome, checkpoint storage). Never raises for a fault.

    ``workdir`` holds ``checkpoint/`` (the SPEC layout), ``coord/`` and
    ``local/``; by default a fresh temporary directory. An existing
    checkpoint there is resumed, and refused if it belongs to another query.
    ``pace`` plans a batch only once its input has arrived on the wall clock
    (the rate a source really produces); ``straggler`` = (probability, extra
    ms, seed) makes a seeded choice of tasks slow, for pipelining experiments.
    ``group`` > 1 runs that many consecutive batches per Spark job (group
    scheduling, see ``driver.py``); it needs a task slot per state partition.
    """
    if group < 1:
        raise ValueError(f"group size {group}: expected 1 (a job per batch) or more")
    if spark is None:
        from spark_impl.session import session
        spark = session(master)
    from spark_impl.session import task_slots
    slots = task_slots(spark)
    if group > 1 and slots < scenario.state_partitions:
        raise ValueError(f"group scheduling needs a task slot per state partition: the scenario has "
                         f"{scenario.state_partitions} state partitions, {spark.sparkContext.master} "
                         f"offers {slots} slots (a group job's tasks hold their slots until the group ends)")
    from spark_impl.snapshot_reader import install
    install()
    # start the executors' Python workers first, so latency measures the protocol, not Spark's warm-up
    spark.sparkContext.parallelize(range(2), 2).count()
    base = Path(workdir) if workdir is not None else Path(tempfile.mkdtemp(prefix="lightspeed-spark-"))
    root = base / "checkpoint"
    lock = acquire_checkpoint(root, scenario)
    try:
        engine = EngineContext(spark, str(root), str(base / "coord"), str(base / "local"), pace=pace,
                               listeners=list(listeners or []), straggler=straggler, group=group)
        storage = LocalStorage(root)
        started = time.time()
        run = SparkRun(scenario, engine, storage)
        result = run.finish()
        outcome = spark_outcome(result, engine, time.time() - started)
        return outcome, storage
    finally:
        # ``local/`` is not removed here: executors' Python workers still hold the stores open, and
        # RocksDB takes a second to close a database whose directory is gone. Each worker drops
        # the stores (and their local directories) of ended incarnations with its next task.
        lock.unlink(missing_ok=True)


def spark_outcome(result: RunResult, engine: EngineContext, wall_s: float) -> dict[str, Any]:
    outcome = build_outcome(result, backend="spark")
    data = result.scenario
    from reference.sources import SourceData
    source = SourceData.of(data)
    latencies = []
    for (sp, offset), seen in engine.visible.items():
        latencies.append((seen - engine.t0) * 1000.0 - source.partitions[sp][offset].arrival_ms)
    outcome["latency_ms"] = latency_summary(latencies)
    tasks = engine.task_log
    outcome["spark"] = {
        "master": engine.spark.sparkContext.master, "wall_s": round(wall_s, 3), "tasks": len(tasks),
        "cache_hits": sum(t["cache_hits"] for t in tasks),
        "pipelining": data.engine.pipelining, "group": engine.group, "jobs": engine.jobs,
        "checkpoint": engine.root,
        # synthetic stragglers (``straggler=``): how many tasks drew one, and the task_apply time they took
        "stragglers": {"tasks": sum(1 for t in tasks if t["straggler_ms"]),
                       "task_apply_ms": round(sum(t["timings_ms"].get("task_apply", 0.0)
                                                  for t in tasks if t["straggler_ms"]), 1)},
    }
    engine.placement.learn()
    # partition -> the executors its tasks ran on, one entry per move (a lost executor moves it)
    outcome["spark"]["executors"] = {str(p): list(ex) for p, ex in sorted(engine.placement.executors.items())}
    return outcome
