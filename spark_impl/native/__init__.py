"""The spark-native backend: a scenario's query on Spark's own Structured Streaming.

``backend.NativeBackend`` is the backend (``reference.protocol.backend.Backend``);
``run_native(scenario)`` runs the scenario's query with Spark's own operators,
state store and restart logic, and returns the typed outcome of spec section 4
(backend ``"spark-native"``), so the reference oracles
(``reference.judge.oracles.check_outcome``) judge Spark exactly as they judge the
reference, the simulator and the PySpark engine.

Modules: ``query_run.py`` (the incarnations, the faults, foreachBatch),
``plan.py`` (input files and the query), ``sink.py`` (the sink files),
``stat_sink.py`` (realtime stateless runs: Spark's foreach sink, per-record
latency), ``checkpoint_fs.py`` (the checkpoint on a filesystem with a storage
profile's latency; the Java sources in ``java/``), ``spark_checkpoint.py``
(reading Spark's logs), ``state.py`` (reading Spark's state),
``native_outcome.py`` (the outcome), ``session_confs.py`` (the scenario as
Spark confs), ``support.py`` (what is refused, and where a fault fires) and
``fault_plan.py`` (a protocol step as Spark's file operation, and the plan the
checkpoint filesystem fires faults by).
Imports ``reference``, ``spark_impl.session``, pyspark, pandas and pyarrow;
never ``sim`` or ``experiments``.

How a scenario becomes a Spark query
------------------------------------
- Input: one JSON-lines file per planned batch and input side, read by Spark's
  file source (``plan.py``). Untimed runs read one file per trigger
  (``maxFilesPerTrigger = 1``), so Spark's batch b has exactly the reference's
  records of batch b; realtime runs read every file that has arrived, as Spark
  does by default, so a batch may span several planned batches. The boundaries
  in the outcome are read back from Spark's own ``offsets/<b>`` and file-source
  log, not assumed.
- Operators: see ``plan.py`` for the table (groupBy/agg, window + withWatermark,
  dropDuplicates, dropDuplicatesWithinWatermark, stream-stream join,
  applyInPandasWithState).
  ``chain`` is refused (``support.UNSUPPORTED_OPERATORS`` says why).
- Configuration: the session's RocksDB provider with changelog checkpointing
  (``provider = changelog``; ``snapshot`` turns changelog checkpointing off,
  ``delta`` selects the HDFS-backed provider), ``minDeltasForSnapshot``,
  ``maintenanceInterval``, ``minBatchesToRetain``, ``asyncLogPurge.enabled`` and
  ``shuffle.partitions = state_partitions`` from the scenario, set for the
  run only and restored after (``session_confs.engine_confs``). No-data batches are
  off: the reference has none, and one would shift every later batch id.
- Sink: foreachBatch. Exactly-once: batch b's rows go to a temporary file that
  is renamed to ``sink/<b>.json``, so a re-run batch replaces its output and
  never duplicates it. At-least-once: every delivery is its own visible file.
  A realtime run of a stateless query delivers through the stat sink instead
  (``stat_sink.py``: Spark's foreach sink in the JVM, which asynchronous
  progress tracking accepts), and a record's latency ends when it processed it.
- Checkpoint storage: with ``storage_profile`` Spark writes its checkpoint
  through ``checkpoint_fs.py``'s filesystem, which sleeps the profile's
  latencies, drawn as the engine and the simulator draw them.
- Triggers: ``availableNow`` by default (untimed: all of the input is there, one
  file per batch, and the latency summary is empty). ``realtime=True`` feeds
  batch b's file when its input has arrived on the scenario's clock
  (``SourceData.input_ready_ms``, the rule of every timed backend), uses
  Spark's default trigger (a processing-time trigger of ``trigger_interval_ms``
  when that is positive), reads all available input at each trigger, and
  reports end-to-end latency per record (creation to its batch's first sink
  commit) in the outcome's ``timing``, whether Spark kept up with the input
  (``timing.throughput``, ``reference.protocol.timing``'s one rule), and batch
  durations as ``details["native"]["batch_duration_ms"]``.
- State: read back with Spark's state data source and re-encoded and
  re-bucketed into the reference's partitions (``state.py`` explains why the
  partition functions differ and why re-bucketing is sound).
- Progress: ``query.recentProgress`` (StreamingQueryProgress, as the outcome's
  progress events, ``getBatch`` among the durations); each entry's incarnation,
  watermark and rows dropped by the watermark are in ``details["native"]["progress"]``.

Faults
------
Supported (``support.SUPPORTED_FAULTS``):

- ``driver_crash``, ``storage_write_error``, ``storage_latency``: fired inside
  Spark's own checkpoint code (``fault_plan.py``). The step is a file operation
  of Spark's: the create or the rename of ``offsets/<b>``, ``commits/<b>``, the
  state file of version b+1 of a partition (``<v>.changelog``, ``.zip``,
  ``.delta``), its snapshot, or the sink's file; the run's checkpoint is on the
  adapter's filesystem (``checkpoint_fs.py``), which reads the fault plan from
  the Hadoop configuration and fires there. A ``driver_crash`` halts the
  driver's JVM (``Runtime.halt``): no shutdown hook, no stream closed or
  cancelled, so the disk holds what a killed driver leaves (a temporary file
  never renamed included); this process sees its JVM die (exit status 86),
  starts a new one on the same master and restarts the query there, as a
  restarted driver. A ``storage_write_error`` throws an IOException at the
  operation (as S3A on a failed PUT): a driver write fails the query, which the
  adapter restarts in the same JVM; a task's write fails that task attempt,
  which Spark retries. A ``storage_latency`` sleeps ``ms`` at the operation.
  Each fault fires once across JVMs (a mark file); the outcome's
  ``details["native"]["faults_fired"]`` says where (the operation, the path,
  the incarnation, the thread and the task), and ``jvm_deaths`` lists what each
  crash left on disk.
- ``task_failure``: a filter in the stateful operator's own tasks (the input
  is hash-partitioned on the operator's keys, the distribution the operator
  needs, so no further shuffle separates them) raises once, with Spark SQL's
  ``raise_error``, for batch ``at.batch`` in Spark's state partition
  ``at.partition`` (any partition when absent); a mark made through
  ``reflect`` (a file, with the checkpoint filesystem's jar; else a JVM system
  property, which needs a local master) records it fired, so Spark's retry of
  the task passes (``plan.task_fault_filter``). The task fails after it loaded
  state version b, while it applies its input, before it commits; the step
  inside the task cannot be chosen. Spark's partition p is not the reference's
  partition p (see ``state.py``). If that partition has no rows in the batch
  the fault cannot fire, and the outcome lists it as not fired.
- ``corrupt_file`` / ``delete_file``: between batches, with ``path`` relative to
  Spark's checkpoint (e.g. ``commits/2``, ``state/0/1/3.changelog``); the query
  stops at the boundary, the file is damaged as on every backend
  (``reference.protocol.faults.damage``: deleted, or truncated to half; a deleted file's
  ``.crc`` goes with it), and the query restarts.

Not supported, refused with ``NativeUnsupported`` (a
``reference.protocol.backend.ScenarioRefused``) naming the field:
``executor_loss`` on a local master, ``zombie_write``, ``clock_skew`` (reasons
in ``support.UNSUPPORTED_FAULTS``, naming the Spark classes that rule them
out), faults at ``at.time_ms``, asynchronous progress tracking except in a
realtime run of a stateless query (Spark's own rule), asynchronous state
checkpointing and pipelining (not in open-source Spark), and
``stateful_function`` when pandas or pyarrow is missing.

Spark's semantics and the reference's
-------------------------------------
The reference follows Spark 3.4+'s watermarks (``reference/language/operators.py``):
late rows are filtered with the watermark in force for the batch before
(``IncrementalExecution``: ``eventTimeWatermarkForLateEvents``), a row is late
when ``event_time <= watermark`` (``WatermarkSupport``), a window is late when
its end is, state is evicted with the current batch's watermark, and a
session's event-time timeout fires strictly after its timestamp, which is
never set before the current watermark. ``tests/spark/test_spark_native.py`` runs
the hand-derived boundary queries of ``tests/quick/test_operator_boundaries.py``
here and requires Spark's rows and watermarks to be the ones derived by hand.
The session's timeout timestamp is read back from Spark's state
(``value.timeoutTimestamp``) as the reference state's fourth element.

Restarts: a restart resumes the watermark from ``commits/<b>``
(``nextBatchWatermarkMs``) or, when re-running a batch, from ``offsets/<b>``,
as the reference does; neither keeps each input's maximum event time, so after
a restart a join's watermark moves again only once both sides have new data
(``reference/protocol/recovery.py``).

Outcomes are timed, so two runs are not byte-identical (durations, timestamps,
RocksDB file names): the ``determinism`` check does not apply to this backend.
Checkpoint files are Spark's (RocksDB SST/zip/changelog files), not the
reference layout, so the ``reconstruction`` and ``lineage`` oracles, which read
the reference's file formats, say n/a: ``run_native`` returns no Storage.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile

from reference.protocol.backend import RunResult
from reference.protocol.outcome import Outcome
from reference.language.scenario import Scenario

from ..session import backend_session, master_of
from .fault_plan import saved_costs
from .native_outcome import native_outcome
from .query_run import NativeRun, _has_jar
from .session_confs import engine_confs
from .support import (
    BACKEND,
    FS_FAULTS,
    LOCAL_EXECUTOR_LOSS,
    SUPPORTED_FAULTS,
    SUPPORTED_OPERATORS,
    UNSUPPORTED_FAULTS,
    NativeUnsupported,
    check_supported,
    needs_file_order,
    uses_stat_sink,
)

__all__ = ["BACKEND", "NativeUnsupported", "SUPPORTED_FAULTS", "SUPPORTED_OPERATORS", "UNSUPPORTED_FAULTS",
           "run_native"]


def run_native(scenario: Scenario, *, workdir: str | None = None, master: str | None = None,
               realtime: bool = False, storage_profile: str | None = None) -> RunResult:
    """Run ``scenario`` on Spark's own Structured Streaming; the result has no checkpoint storage.

    ``workdir`` keeps the input files, Spark's checkpoint (``<workdir>/checkpoint``)
    and the sink (``<workdir>/sink``); without it a temporary directory is used
    and removed afterwards. It must not hold an earlier run's checkpoint.
    ``master`` is passed to ``spark_impl.session.session``. ``storage_profile`` (a
    ``reference.protocol.storage_profiles`` name) puts Spark's checkpoint on the filesystem
    that sleeps the profile's latencies, seeded by the scenario's seed
    (``checkpoint_fs.py``); what its operations cost is in the outcome's
    ``details["native"]["storage"]``. Raises
    ``NativeUnsupported`` (a ``ScenarioRefused`` naming the field) for anything
    the adapter cannot run, before Spark starts; ``BackendUnavailable`` when
    Spark cannot start; a failure of Spark itself is reported in the outcome's
    ``error``.
    """
    # imported here: ``python -m spark_impl.native.checkpoint_fs`` (the build) runs it as a script
    from .checkpoint_fs import LatencyCheckpoint, require_stat_sink, storage_profile_of
    check_supported(scenario, realtime=realtime)
    storage_profile_of(storage_profile)   # StorageProfileError naming an unknown profile, before Spark starts
    if workdir is not None and os.path.exists(os.path.join(workdir, "checkpoint")):
        raise ValueError(f"{workdir}: already holds a checkpoint; the spark-native backend needs a fresh workdir "
                         "(Spark would resume the old query)")
    for i, fault in enumerate(scenario.faults):
        if fault.kind == "executor_loss" and master_of(master).startswith("local"):
            raise NativeUnsupported(f"faults[{i}].kind", f"fault 'executor_loss' is not supported by the "
                                                         f"spark-native backend here: {LOCAL_EXECUTOR_LOSS}")
    spark = backend_session(BACKEND, master)
    if any(f.kind == "task_failure" for f in scenario.faults) and not spark.sparkContext.master.startswith("local") \
            and not _has_jar(spark):
        raise NativeUnsupported("faults", "task_failure on a cluster needs the checkpoint filesystem's jar (its "
                                          "fault marks, shared by every JVM on this host); without it the fault's "
                                          "fired-once mark is a system property of one executor's JVM")
    by_path = any(f.kind in FS_FAULTS or f.kind == "executor_loss" for f in scenario.faults)
    fs = LatencyCheckpoint.start(spark, storage_profile, scenario.seed) if storage_profile or by_path else None
    if uses_stat_sink(scenario, realtime):
        require_stat_sink(spark)
    root = workdir or tempfile.mkdtemp(prefix="lightspeed-native-")
    try:
        checkpoint = os.path.join(root, "checkpoint")
        confs = {**engine_confs(scenario, one_split_per_file=needs_file_order(scenario, realtime)),
                 **(fs.confs(checkpoint) if fs else {})}
        run = NativeRun(scenario, spark, root, realtime, fs, confs)
        try:
            run.execute()
        finally:
            run.storage = fs.finish(run.spark, checkpoint, saved_costs(run.marks)) if fs else None
        outcome = native_outcome(run)
        if workdir is None:
            outcome = _without_checkpoint_path(outcome)
        return RunResult(outcome, None)
    finally:
        if workdir is None:
            shutil.rmtree(root, ignore_errors=True)


def _without_checkpoint_path(outcome: Outcome) -> Outcome:
    """A temporary checkpoint is removed after the run: the outcome names none."""
    native = {**outcome.details["native"], "checkpoint": None}
    return dataclasses.replace(outcome, details={**outcome.details, "native": native})
