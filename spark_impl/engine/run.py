"""One run of a scenario on the engine: incarnations restarted by the reference's supervisor, and the outcome.

``SparkRun`` drives incarnation after incarnation through
``reference.protocol.supervisor.Supervisor`` (the one restart loop), each executed by
the ``StepScheduler`` on Spark. ``run_spark`` runs a scenario in this process
(a driver crash drops the incarnation and the next restarts from the
checkpoint directory alone, in the same SparkSession); ``engine_outcome``
builds the typed outcome with the engine's timing and its diagnostics under
``details["spark"]``.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Iterable, Mapping

from reference.protocol.backend import RunResult, ScenarioRefused
from reference.protocol.observer import Observer, build_outcome
from reference.protocol.outcome import Outcome, Timing
from reference.protocol.rebalancing import PlacementTimeline
from reference.protocol.recovery import RestartPlan
from reference.language.scenario import Scenario
from reference.protocol.sources import SourceData
from reference.protocol.storage import LocalStorage
from reference.protocol.supervisor import Supervisor
from reference.protocol.timing import summarize_latency

from ..scratch import scratch_dir
from ..session import backend_session, task_slots
from ..snapshot_reader import checkpoint_storage
from .checkpoint_lock import acquire_checkpoint
from .context import EngineContext
from .driver_faults import ClaimingFaultBook
from .incarnation import SparkIncarnation, cuts_by_trigger
from ..latency import SinkDelivery, record_latencies_ms, record_throughput
from .scheduler import StepScheduler
from .storage_latency import StorageLatency, storage_details, with_latency

BACKEND = "spark"
WORKDIR_PREFIX = "lightspeed-spark-"   # a run's temporary folder without a workdir, removed at exit (scratch.py)


class SparkRun:
    """The reference's restart loop with incarnations executed on Spark."""

    def __init__(self, scenario: Scenario, engine: EngineContext, storage: LocalStorage, *, first_life: int = 0,
                 observer: Observer | None = None):
        self.scenario, self.engine, self.storage = scenario, engine, storage
        self.data = SourceData.of(scenario)
        self.observer = observer if observer is not None else Observer()
        self.faults = ClaimingFaultBook(scenario.faults, engine.coord)
        self.life = first_life   # the incarnation running now
        self.supervisor = Supervisor(storage, scenario.engine.progress_mode, len(self.data.partitions),
                                     self.observer, first_life=first_life)

    def finish(self) -> str | None:
        """Run until the input is consumed or the run stops loudly; returns the run's error, if any."""
        for number, restart in self.supervisor.lives():
            self.life = number
            self.supervisor.ended(number, self._incarnation(number, restart))
        return self.supervisor.error

    def _incarnation(self, number: int, restart: RestartPlan) -> Exception | None:
        try:
            inc = SparkIncarnation(self.scenario, self.data, self.storage, restart, number, self.observer,
                                   engine=self.engine, open_ended=cuts_by_trigger(self.scenario, self.engine))
            StepScheduler(inc, self.faults).run()
        except Exception as exc:  # noqa: BLE001 - the supervisor decides: restart, stop loudly, or re-raise
            return exc
        return None


def run_spark(scenario: Scenario, *, master: str | None = None, workdir: str | os.PathLike[str] | None = None,
              pace: bool = True, listeners: Iterable[Any] = (), straggler: tuple[float, float, int] | None = None,
              group: int = 1, storage_latency: StorageLatency | None = None) -> RunResult:
    """Run ``scenario`` on Spark in this process. Never raises for a fault the scenario plants.

    ``workdir`` holds ``checkpoint/`` (the layout of spec section 3), ``coord/`` and
    ``local/``; by default a fresh temporary directory, removed when the process ends (``scratch.py``: the
    caller reads the checkpoint after the run, and executors keep stores open in it). An existing
    checkpoint there is resumed, and refused if it belongs to another query.
    ``pace`` plans a batch only once its input has arrived on the wall clock
    (the rate a source really produces); a paced run cuts explicit and rate
    sources by Spark's trigger (``engine.batch_cuts``, ``incarnation.cuts_by_trigger``),
    an unpaced one at the fixed cuts; ``straggler`` = (probability, extra
    ms, seed) makes a seeded choice of tasks slow, for pipelining experiments.
    ``group`` > 1 runs that many consecutive batches per Spark job (group
    scheduling, ``group_scheduling.py``); it needs a task slot per state partition. ``storage_latency``
    makes every checkpoint operation sleep a named profile's latency (``storage_latency.py``).
    """
    if group < 1:
        raise ValueError(f"group size {group}: expected 1 (a job per batch) or more")
    spark = backend_session(BACKEND, master)
    _check_group_slots(scenario, spark, group)
    # start the executors' Python workers first, so latency measures the protocol, not Spark's warm-up
    spark.sparkContext.parallelize(range(2), 2).count()
    base = Path(workdir) if workdir is not None else scratch_dir(WORKDIR_PREFIX)
    lock = acquire_checkpoint(base / "checkpoint", scenario)
    try:
        engine = EngineContext(spark, str(base / "checkpoint"), str(base / "coord"), str(base / "local"),
                               pace=pace, listeners=list(listeners), straggler=straggler, group=group,
                               storage_latency=storage_latency)
        return _run_on(scenario, engine)
    finally:
        # ``local/`` is not removed here: executors' Python workers still hold the stores open, and
        # RocksDB takes a second to close a database whose directory is gone. Each worker drops
        # the stores (and their local directories) of ended incarnations with its next task.
        lock.unlink(missing_ok=True)


def _run_on(scenario: Scenario, engine: EngineContext) -> RunResult:
    storage = checkpoint_storage(engine.root)
    engine.driver_storage = with_latency(storage, engine.storage_latency, "driver")  # the outcome reads it bare
    started = time.time()
    run = SparkRun(scenario, engine, engine.driver_storage)
    error = run.finish()
    details = run_details(scenario, engine, time.time() - started)
    return RunResult(engine_outcome(scenario, storage, run.observer, error, engine.t0, engine.deliveries, details),
                     storage)


def _check_group_slots(scenario: Scenario, spark: Any, group: int) -> None:
    slots = task_slots(spark)
    if group > 1 and slots < scenario.state_partitions:
        raise ScenarioRefused(BACKEND, "query.state_partitions",
                              f"group scheduling needs a task slot per state partition: the scenario has "
                              f"{scenario.state_partitions} state partitions, {spark.sparkContext.master} offers "
                              f"{slots} slots (a group job's tasks hold their slots until the group ends)")


def engine_outcome(scenario: Scenario, storage: LocalStorage, observer: Observer, error: str | None, t0: float,
                   deliveries: list[SinkDelivery], details: Mapping[str, Any]) -> Outcome:
    """The typed outcome: the observer's history and the checkpoint, latency to first visibility,
    and the engine's diagnostics under ``details["spark"]``."""
    data = SourceData.of(scenario)
    latencies = record_latencies_ms(data, deliveries, t0)
    timing = Timing(summarize_latency(latencies), details.get("wall_s"), record_throughput(data, deliveries, t0))
    sink_deliveries = [[d.batch, list(d.start), list(d.end), round((d.seen_s - t0) * 1000.0, 3)]
                       for d in deliveries]
    return build_outcome(scenario, storage, observer, error, backend=BACKEND, timing=timing,
                         details={"spark": {**details, "sink_deliveries": sink_deliveries}})


def run_details(scenario: Scenario, engine: EngineContext, wall_s: float) -> dict[str, Any]:
    """What only the engine reports: where it ran, its tasks and jobs, its stragglers and executors."""
    tasks = engine.task_log
    engine.placement.learn()
    first_move: dict[int, int] = {}
    for move in PlacementTimeline(scenario).moves():
        first_move.setdefault(move.partition, move.batch)
    return {
        "master": engine.spark.sparkContext.master, "slots": task_slots(engine.spark), "wall_s": round(wall_s, 3),
        "tasks": len(tasks),
        "cache_hits": sum(t["cache_hits"] for t in tasks),
        "pipelining": scenario.engine.pipelining, "group": engine.group, "jobs": engine.jobs,
        "checkpoint": engine.root,
        "storage": storage_details(engine.storage_latency, engine.driver_storage, tasks),
        # synthetic stragglers (``straggler=``): how many tasks drew one, and the task_apply time they took
        "stragglers": {"tasks": sum(1 for t in tasks if t["straggler_ms"]),
                       "task_apply_ms": round(sum(t["timings_ms"].get("task_apply", 0.0)
                                                  for t in tasks if t["straggler_ms"]), 1)},
        # the tasks of partitions the placement moved (``outcome.moves``), from the first move on:
        # [batch, partition, cache hits], the hits 0 when the task loaded its state from the checkpoint
        "moved_partition_tasks": sorted([t["batch"], t["partition"], t["cache_hits"]] for t in tasks
                                        if t["batch"] >= first_move.get(t["partition"], 1 << 62)),
        # where a task's time went: the mean over tasks of each step's wall time in ms (``state_commit`` is a
        # partition's commit, every store in turn or at once; commitTimeMs is each store's own time, so it does
        # not show stores committed in parallel); the rest of addBatch is Spark's job
        "task_step_ms_mean": {step: _mean_ms([t["timings_ms"][step] for t in tasks if step in t["timings_ms"]])
                              for step in sorted({s for t in tasks for s in t["timings_ms"]})},
        # every task attempt that returned: [batch, partition, started, finished], ms since the run's time 0
        "task_spans": sorted([t["batch"], t["partition"], round((t["started"] - engine.t0) * 1000.0, 3),
                              round((t["finished"] - engine.t0) * 1000.0, 3)] for t in tasks),
        # partition -> the executors its tasks ran on, one entry per move (a lost executor moves it)
        "executors": {str(p): list(ex) for p, ex in sorted(engine.placement.executors.items())},
        # the scenario's executor name -> the Spark executors it was bound to, in order (``locality.py``)
        "bound_executors": {name: list(ids) for name, ids in sorted(engine.placement.bound.items())},
    }


def _mean_ms(values: list[float]) -> float | None:
    return round(sum(values) / len(values), 3) if values else None
