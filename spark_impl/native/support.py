"""What the spark-native backend can run, and where each supported fault lands in Spark.

``check_supported`` refuses, with a ``NativeUnsupported`` (the backend
interface's ``ScenarioRefused``) naming the field, every part of a scenario
that open-source Spark has no counterpart for (or that the adapter cannot
inject from Python). ``fault_site`` places each supported fault at the point of
Spark's micro-batch where the adapter fires it.
"""

from __future__ import annotations

import importlib.util

from reference.protocol.backend import ScenarioRefused
from reference.language.scenario import Fault, Scenario
from reference.protocol.modes import checked, mode_of
from reference.protocol.modes.real_time import RealTime

BACKEND = "spark-native"

# Operators the adapter maps to Spark's own operators.
SUPPORTED_OPERATORS = ("map", "aggregate", "window_aggregate", "dedup_within_watermark", "dedup", "join",
                       "stateful_function")
SUPPORTED_FAULTS = ("driver_crash", "task_failure", "storage_write_error", "storage_latency", "corrupt_file",
                    "delete_file", "executor_loss")
# faults fired inside Spark's own checkpoint code, at a file operation (fault_plan.py)
FS_FAULTS = ("driver_crash", "storage_write_error", "storage_latency")

ZOMBIE_REFUSAL = (
    "Spark's own code cannot produce a late write of a failed attempt here: a task attempt that fails aborts its "
    "uncommitted state store (StateStoreOps.mapPartitionsWithStateStore registers a task completion listener "
    "that calls store.abort(); RocksDB.rollback aborts the StateStoreChangelogWriter, whose stream is "
    "CheckpointFileManager.RenameBasedFSDataOutputStream, and its cancel() deletes the temporary file), on a "
    "local master the attempt's thread has ended when its failure is reported (Executor.TaskRunner), and the "
    "adapter's sink runs once per batch attempt on the driver (ForeachBatchSink), with no task attempts; a late "
    "writer needs an executor that lost contact but kept running, which a local master does not have")
LOCAL_EXECUTOR_LOSS = ("on a local master the executor lives in the driver's JVM, so losing it is a driver "
                       "crash; use driver_crash, or run on a standalone cluster (--master spark://...), where an "
                       "executor is a JVM of its own")
UNSUPPORTED_FAULTS = {
    "zombie_write": ZOMBIE_REFUSAL,
    "clock_skew": "Spark reads the wall clock of its JVM (the query's trigger clock is SystemClock, "
                  "StreamingQueryManager.startQuery); the adapter has no hook to skew it",
}

UNSUPPORTED_OPERATORS = {
    "chain": "Spark runs several stateful operators in one query only in append mode (so no running aggregate "
             "in update mode) and derives a downstream operator's watermark by propagation from its input, not "
             "from that operator's own delay as the reference's chain does",
}

# (point, batch): where in Spark's micro-batch a fault fires, and in which batch. The points: "fs", at a file
# operation of Spark's checkpoint (fault_plan.py); "before_batch", while the query is stopped between batch b-1
# and b (damage to a file); "task", in the stateful operator's task (plan.py); "executor", in the output rows of
# a stateless query's task (an executor's loss)
FaultSite = tuple[str, int]


class NativeUnsupported(ScenarioRefused):
    """The scenario asks for something the spark-native backend cannot run; ``field`` names it."""

    def __init__(self, field: str, reason: str):
        super().__init__(BACKEND, field, reason)


def describe_failure(exc: BaseException) -> str:
    """A Spark failure in one line: its error class line and its innermost JVM cause."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    if not lines:
        return type(exc).__name__
    head = next((line for line in lines if line.startswith("[") or ": [" in line), lines[0])
    head = head.split("Reason:")[0].strip().lstrip(": ")[:300]
    causes = [line[len("Caused by:"):].strip() for line in lines if line.startswith("Caused by:")]
    return f"{head} (caused by {causes[-1][:300]})" if causes else head


def pandas_missing() -> str | None:
    """Why applyInPandasWithState cannot run here, or None when pandas and pyarrow are importable."""
    missing = [name for name in ("pandas", "pyarrow") if importlib.util.find_spec(name) is None]
    if missing:
        return (f"{' and '.join(missing)} not installed: Spark's applyInPandasWithState (the counterpart of "
                "stateful_function) exchanges data with Python through Arrow and pandas")
    return None


def uses_stat_sink(scenario: Scenario, realtime: bool) -> bool:
    """Whether a run delivers through the stat sink (``stat_sink.py``, Spark's foreach sink) instead of
    foreachBatch: a realtime run of a stateless query, the published benchmark's shape and the only kind of
    query Spark runs with asynchronous progress tracking."""
    return realtime and not scenario.operator.stateful


# operators whose state depends on the order of a batch's rows (dedup keeps the first duplicate; a session's
# function sees the rows in order): their rows must reach each state partition in (source partition, offset) order
ORDER_SENSITIVE = ("dedup_within_watermark", "dedup", "stateful_function")


def needs_file_order(scenario: Scenario, realtime: bool) -> bool:
    """Whether each input file must be its own task (``session_confs.engine_confs``): always in untimed runs,
    whose batch b must be the reference's batch b row for row; in a realtime run only for an order-sensitive
    operator. Otherwise Spark packs a batch's small files into a few tasks, as it does by default, so that a
    batch that reads many files (a backlog) does not become many tasks."""
    return not realtime or any(op.kind in ORDER_SENSITIVE for op in scenario.operator.flatten())


# Spark's real-time mode reads only SupportsRealTimeMode streams: in Spark 4.3 the Kafka source (the connector,
# spark-sql-kafka, SPARK-54027) and the in-jar test stream LowLatencyMemoryStream (not a public API).
REAL_TIME_REFUSAL = ("Spark runs real-time mode (trigger(realTime=...)) only on SupportsRealTimeMode sources: Kafka, "
                     "whose connector (spark-sql-kafka) is not installable here, and the test-only "
                     "LowLatencyMemoryStream, which this adapter does not drive; the reference and the simulator "
                     "run real-time scenarios")


def check_supported(scenario: Scenario, *, realtime: bool = False) -> None:
    """Refuse, naming the field, what the adapter cannot run. (``realtime`` is a wall-clock latency run;
    Spark's real-time mode, ``modes.RealTime``, is refused here.)"""
    if isinstance(mode_of(checked(scenario)), RealTime):
        raise NativeUnsupported("engine.real_time", REAL_TIME_REFUSAL)
    _check_operator(scenario)
    _check_modes(scenario, realtime)
    for side, src in sorted(scenario.sources.items()):
        if src.kind == "redelivering":
            field = "source.kind" if side == "main" else f"sources.{side}.kind"
            raise NativeUnsupported(field, "a redelivering source needs the project's fetch-and-dedup layer "
                                           "(reference/protocol/redelivery.py) in the driver's plan; open-source Spark has "
                                           "no Pub/Sub connector to run it through")
    for i, fault in enumerate(scenario.faults):
        fault_site(fault, f"faults[{i}]", realtime=realtime, stateful=scenario.operator.stateful)
        if uses_stat_sink(scenario, realtime):
            raise NativeUnsupported(f"faults[{i}]", "a realtime run of a stateless query delivers through Spark's "
                                                    "foreach sink (the stat sink), which has no point at which "
                                                    "the adapter can fire a fault; run it without realtime")
    if scenario.events:
        raise NativeUnsupported("events", "open-source Spark has no state rebalancing (its pull request, "
                                          "SPARK-35022, was closed), and on a local master every task runs on "
                                          "the driver's one executor: executor_join / executor_leave need the "
                                          "spark backend")


def _check_operator(scenario: Scenario) -> None:
    op = scenario.operator
    if op.kind in UNSUPPORTED_OPERATORS:
        raise NativeUnsupported("query.operator.kind",
                                f"operator {op.kind!r} is not supported by the spark-native backend: "
                                f"{UNSUPPORTED_OPERATORS[op.kind]}")
    if op.kind == "stateful_function":
        why = pandas_missing()
        if why:
            raise NativeUnsupported("query.operator.kind",
                                    f"operator 'stateful_function' needs pandas and pyarrow on the spark-native "
                                    f"backend: {why}")


def _check_modes(scenario: Scenario, realtime: bool) -> None:
    e = scenario.engine
    if e.progress_mode == "async" and not uses_stat_sink(scenario, realtime):
        raise NativeUnsupported("engine.progress.mode",
                                "asynchronous progress tracking runs on the spark-native backend only in a "
                                "realtime run of a stateless query: Spark accepts it only for stateless queries "
                                "(AsyncProgressTrackingMicroBatchExecution refuses a stateful operator) with a "
                                "processing-time trigger (not availableNow, which untimed runs use) and a sink "
                                "from a fixed list (noop, console, memory, Kafka, foreach; the adapter's "
                                "foreachBatch is not one)")
    if e.state_checkpoint == "async":
        raise NativeUnsupported("engine.state_checkpoint",
                                "asynchronous state checkpointing is not in open-source Spark, so the "
                                "spark-native backend cannot run it")
    if e.pipelining:
        raise NativeUnsupported("engine.pipelining",
                                "micro-batch pipelining is not in open-source Spark, so the spark-native "
                                "backend cannot run it")
    if e.parallel_store_commit and len(scenario.store_ids) > 1:
        raise NativeUnsupported("engine.parallel_store_commit",
                                "open-source Spark commits a partition's state stores one after the other in "
                                "its task (a join's state manager commits its stores in turn), so the "
                                "spark-native backend cannot commit them in parallel")


def fault_site(fault: Fault, where: str, *, realtime: bool = False, stateful: bool = True) -> FaultSite:
    """Where ``fault`` (``where`` names it, e.g. ``faults[2]``) fires in Spark's micro-batch: (point, batch)."""
    if fault.kind in UNSUPPORTED_FAULTS:
        raise NativeUnsupported(f"{where}.kind", f"fault {fault.kind!r} is not supported by the spark-native "
                                                 f"backend: {UNSUPPORTED_FAULTS[fault.kind]}")
    if fault.at.step is None or fault.at.batch is None:
        raise NativeUnsupported(f"{where}.at.time_ms",
                                f"fault {fault.kind!r} at a time is not supported by the spark-native backend: "
                                "it places faults at a step and batch (at.step, at.batch)")
    b = fault.at.batch
    if fault.kind == "task_failure":
        return "task", b
    if fault.kind in FS_FAULTS:
        return "fs", b
    if fault.kind == "executor_loss":
        # a stateful query's task writes its state files (fired by path); a stateless one's writes nothing, and
        # a hook in its output rows halts the executor running the batch (plan.executor_loss_filter)
        return ("fs" if stateful else "executor"), b
    # damage is done between two batches, while no query runs: before b's plan (or its offset entry), else
    # after b's commit
    if (fault.at.step, fault.at.when) not in (("plan", "before"), ("plan", "after"), ("offset_log_write", "before")):
        b += 1
    if realtime:
        raise NativeUnsupported(f"{where}.at.step",
                                f"fault {fault.kind!r} between batches is not supported in a realtime "
                                "(paced) spark-native run: it needs the run to stop at a batch boundary; "
                                "run without realtime")
    return "before_batch", b
