"""One scenario's query on Spark's own Structured Streaming, run incarnation by incarnation.

An incarnation is one run of the streaming query on the scenario's checkpoint
(``<workdir>/checkpoint``). It ends when its input is consumed, when the adapter
stops it at a batch boundary (to damage a checkpoint file between batches),
when a storage error fired inside Spark's checkpoint code fails it, or when a
driver crash halts the driver's JVM (``fault_plan.py``). The next incarnation
is a new run of the same query on the same checkpoint (a new run id, so Spark
loads every state store from the checkpoint files); after a crash it runs in a
new JVM, which this process starts as a restarted driver would be started, so
Spark's own restart path decides what it re-runs. The incarnations are driven
by ``reference.protocol.supervisor.Supervisor``, whose restart plan reads Spark's
checkpoint (``spark_checkpoint.py``). Everything the outcome needs is observed
from the driver (foreachBatch, the query's progress), read back from the
checkpoint, or from the marks a fault leaves where it fired.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import uuid
from datetime import datetime
from typing import Any, Callable

from reference.protocol.failures import DriverCrash, QueryFailure
from reference.protocol.faults import DAMAGE_KINDS, FaultBook, damage
from reference.protocol.modes import mode_of
from reference.protocol.observer import Observer
from reference.protocol.outcome import ProgressEvent, StateOperatorProgress, canonical_rows
from reference.protocol.recovery import RestartPlan, RestartRule
from reference.language.scenario import Fault, Scenario
from reference.protocol.storage import LocalStorage, Storage
from reference.protocol.supervisor import Supervisor

from ..session import forget_dead_jvm, jvm_exit_status
from .checkpoint_fs import FS_CLASS, LatencyCheckpoint, require_loaded
from .fault_plan import HALT_STATUS, MARK_PREFIX, FsTrigger, fs_trigger, plan_confs, read_marks
from .plan import InputFiles, TaskMarks, build_query, output_mode, sink_row, stream_settings
from .sink import FileSink, HadoopFiles
from .spark_checkpoint import BatchInfo, SparkCheckpoint, checkpoint_shape
from .stat_sink import rows_recorded, start_with_stat_sink
from .support import BACKEND, FaultSite, describe_failure, fault_site, uses_stat_sink

PROGRESS_DURATIONS = ("latestOffset", "walCommit", "queryPlanning", "getBatch", "addBatch", "commitOffsets",
                      "triggerExecution")
STAT_COLUMNS = ("sp", "off")   # a record's identity in the adapter's input: source partition and offset
WAIT_POLL_S = 0.01
FEED_STEP_S = 0.002
READY_TIMEOUT_S = 120.0   # realtime: how long the started query may take to be waiting for data
JVM_EXIT_WAIT_S = 60.0    # how long a JVM whose connection broke may take to exit before its death is a mystery


class DeadIncarnation(RuntimeError):
    """foreachBatch of an incarnation whose JVM has died was still running: it must not touch the sink."""


class _Py4jBrokenCalls(logging.Filter):
    """Drops the records py4j's modules log on the root logger (a call broken by a JVM a fault halted)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return f"{os.sep}py4j{os.sep}" not in record.pathname


class NativeRun:
    """One scenario on Spark: the incarnations, the faults, and what the driver observed."""

    def __init__(self, scenario: Scenario, spark: Any, root: str, realtime: bool,
                 fs: LatencyCheckpoint | None = None, confs: dict[str, str] | None = None):
        """``fs``: the run's checkpoint on the adapter's filesystem (a storage profile's latency, and the fault
        plan), or None for the local directory itself; ``confs``: the Spark confs of the run, set on the
        session of every incarnation (a crash's new JVM too) and restored at the end."""
        self.sc, self.spark, self.root, self.realtime = scenario, spark, root, realtime
        self.run_id = uuid.uuid4().hex[:12]
        self.files = InputFiles(scenario, root, base_mtime=time.time() - 86400.0)
        self.checkpoint = SparkCheckpoint(os.path.join(root, "checkpoint"), self.files)
        self.fs = fs
        self.location = fs.location(self.checkpoint.path) if fs else self.checkpoint.path
        self.marks = os.path.join(root, "faults")
        self.task_marks = TaskMarks(self.run_id, self.marks if _has_jar(spark) else None)
        self.sink = FileSink(os.path.join(root, "sink"), scenario.sink_mode == "exactly_once")
        self.stat_sink = uses_stat_sink(scenario, realtime)
        self.stat_dir = os.path.join(root, "stat")
        os.makedirs(self.stat_dir, exist_ok=True)
        self.total_records = sum(self.files.data.totals)
        self.storage: dict[str, Any] | None = None   # what the checkpoint's storage cost (a storage profile)
        self.faults = FaultBook(scenario.faults)
        self.sites = {i: fault_site(f, f"faults[{i}]", realtime=realtime, stateful=scenario.operator.stateful)
                      for i, f in enumerate(scenario.faults)}
        self.triggers: dict[int, FsTrigger | None] = {i: fs_trigger(f, scenario) for i, f in enumerate(scenario.faults)
                                                      if self.sites[i][0] == "fs"}
        assert not self.triggers or fs is not None, "faults fired by path need the checkpoint filesystem"
        self.may_halt = any(scenario.faults[i].kind == "driver_crash" for i in self.triggers)
        self.fired: list[dict[str, Any]] = []
        self.fired_in: dict[str, int] = {}   # a mark's name -> the incarnation it appeared in
        self.jvm_deaths: list[dict[str, Any]] = []
        self.attempts: dict[int, int] = {}     # foreachBatch calls per batch (the sink's delivery attempts)
        self.planned: list[tuple[int, int]] = []   # per incarnation, the batches it planned: (first, last)
        self.batch_info: dict[int, BatchInfo] = {}
        self.progress: list[ProgressEvent] = []
        self.progress_extras: list[dict[str, Any]] = []   # what Spark reports beyond a ProgressEvent
        self.progress_seen: set[tuple[int, int, str]] = set()
        self.notes: list[str] = []
        self.live = -1            # the incarnation whose JVM is alive
        self.query: Any = None
        self.confs = dict(confs or {})
        self.restore: dict[str, str | None] = {key: spark.conf.get(key, None) for key in self.confs}
        self.t0 = time.time()
        self.feeder: threading.Thread | None = None
        self.timing: dict[str, float] = {}
        self.final_batch: int | None = None  # the batch that reads the last input file of every side
        self.stopping = threading.Event()
        self.observer = Observer()
        self.supervisor = Supervisor(LocalStorage(self.checkpoint.path), mode_of(scenario),
                                     len(self.files.data.partitions), self.observer,
                                     plan_restart_fn=self._spark_restart_plan)

    def _spark_restart_plan(self, _storage: Storage, _mode: RestartRule, _partitions: int) -> RestartPlan:
        return self.checkpoint.restart_plan()

    @property
    def error(self) -> str | None:
        return self.supervisor.error

    # ---------------------------------------------------------------- faults
    def _site(self, fault: Fault) -> FaultSite:
        return self.sites[self.faults.index_of(fault)]

    def pending(self, point: str, life: int) -> list[Fault]:
        """The faults still to fire at ``point`` in this incarnation."""
        return [f for f in self.faults.pending if self._site(f)[0] == point
                and (f.at.restart is None or f.at.restart == life)]

    def take(self, point: str, b: int, life: int) -> list[Fault]:
        hits = [f for f in self.pending(point, life) if self._site(f)[1] == b]
        for fault in hits:
            self.faults.pending.remove(fault)
            self.fired.append({"fault": self.faults.index_of(fault), "kind": fault.kind, "point": point,
                               "batch": b, "incarnation": life})
        return hits

    def armed(self, life: int) -> list[tuple[int, Fault, FsTrigger]]:
        """The faults fired by path that this incarnation's fault plan arms: pending, for this incarnation, not
        marked fired, with an operation that bounds their step."""
        fired = self.marked()
        out = []
        for fault in self.pending("fs", life):
            index = self.faults.index_of(fault)
            trigger = self.triggers[index]
            if trigger is not None and f"{MARK_PREFIX}{index}" not in fired:
                out.append((index, fault, trigger))
        return out

    def marked(self) -> dict[str, dict[str, Any]]:
        return read_marks(self.marks)

    def note_marks(self, life: int) -> list[str]:
        """The marks that appeared during incarnation ``life`` (faults fired by path, task faults); a fault
        fired by path leaves the pending list."""
        new = [name for name in self.marked() if name not in self.fired_in]
        for name in new:
            self.fired_in[name] = life
            if name.startswith(MARK_PREFIX):
                fault = self.sc.faults[int(name[len(MARK_PREFIX):])]
                if fault in self.faults.pending:
                    self.faults.pending.remove(fault)
        return new

    def boundary_stop(self, life: int, resumed: int) -> int | None:
        """The first batch before which this incarnation must stop to damage a file between batches."""
        stops = [self._site(f)[1] for f in self.pending("before_batch", life)]
        return min((b for b in stops if resumed <= b <= self.files.batches), default=None)

    def fire_boundary(self, stop: int, life: int) -> str | None:
        """Damage the files of the faults between batch ``stop - 1`` and ``stop``; an error when one is missing."""
        for fault in self.take("before_batch", stop, life):
            error = self.damage(fault, stop)
            if error:
                return error
        return None

    def damage(self, fault: Fault, stop: int) -> str | None:
        """``reference.protocol.faults.damage`` on Spark's checkpoint; a deleted file's checksum (``.<name>.crc``,
        which Hadoop's local file system keeps beside it) goes with it."""
        assert fault.kind in DAMAGE_KINDS, f"only damage waits at a batch boundary, not {fault.kind}"
        path = fault.path or ""
        storage = LocalStorage(self.checkpoint.path)
        if not damage(storage, fault.kind, path):
            return (f"faults[{self.faults.index_of(fault)}]: {fault.kind} of {path!r}: no such file in Spark's "
                    f"checkpoint after batch {stop - 1} (paths are relative to it, e.g. offsets/3, "
                    f"state/0/1/4.changelog)")
        if fault.kind == "delete_file":
            folder, name = os.path.split(path)
            storage.delete(os.path.join(folder, f".{name}.crc") if folder else f".{name}.crc")
        return None

    # -------------------------------------------------------------- the sink
    def on_batch(self, life: int) -> Callable[[Any, int], None]:
        op = self.sc.operator
        spark = self.spark   # this incarnation's session: a later JVM must never write for it
        files = HadoopFiles(lambda: spark, self.fs.uri) if self.fs is not None else None

        def deliver(df: Any, batch_id: int) -> None:
            b = int(batch_id)
            self.attempts[b] = self.attempts.get(b, 0) + 1
            self.observe_batch(b)
            if self.may_halt:
                self.collect_progress(self.query, life)   # what a crash of this JVM would take with it
            rows = canonical_rows([sink_row(op, r) for r in df.collect()])  # the one action on the batch
            if self.live != life:
                raise DeadIncarnation(f"incarnation {life}'s JVM died while its batch {b} ran")
            self.sink.deliver(b, rows, self.attempts[b], files)

        return deliver

    def observe_batch(self, b: int) -> None:
        """Spark's ``offsets/b``: the batch's input and watermark; is it the batch that ends the input?"""
        info = self.checkpoint.read_batch(b)
        last = self.files.batches - 1
        if len(info.files) == len(self.files.sides) and all(planned == last for planned in info.files.values()):
            self.final_batch = b
        previous = self.batch_info.get(b)
        if previous is not None and previous != info:
            self.notes.append(f"batch {b} re-ran with other input or watermark: {previous} then {info}")
        self.batch_info[b] = info

    # ---------------------------------------------------------- incarnations
    def plannings(self, b: int) -> int:
        """How many incarnations planned batch ``b``: logged it in ``offsets/b``, or re-ran it from there (a
        crash right after the entry was written comes before foreachBatch sees the batch)."""
        return sum(1 for first, last in self.planned if first <= b <= last)

    def execute(self) -> None:
        started = time.time()
        # a halted JVM takes py4j's connections with it mid-call: py4j logs each broken call with its traceback
        # (on its "py4j.*" loggers, and with logging.exception on the root logger); the death itself is
        # reported once, by the incarnation that saw it
        root, py4j_log = logging.getLogger(), logging.getLogger("py4j")
        quiet, py4j_level = (_Py4jBrokenCalls() if self.may_halt else None), py4j_log.level
        if quiet is not None:
            py4j_log.setLevel(logging.CRITICAL)
            root.addFilter(quiet)
        try:
            for life, restart in self.supervisor.lives():
                self.supervisor.ended(life, self.incarnation(life, restart))
        finally:
            if quiet is not None:
                py4j_log.setLevel(py4j_level)
                root.removeFilter(quiet)
            self.stopping.set()
            if self.feeder is not None:
                self.feeder.join()
            self.timing["queries_s"] = round(time.time() - started, 3)
            self.restore_confs()

    def apply_confs(self, life: int) -> None:
        """The run's confs and this incarnation's fault plan on the session (a new JVM's too)."""
        confs = dict(self.confs)
        if self.fs is not None:
            confs.update(plan_confs(self.armed(life), self.root, self.marks))
            self.restore.update({key: None for key in confs if key not in self.restore})
        for key, value in confs.items():
            self.spark.conf.set(key, value)

    def restore_confs(self) -> None:
        """Put back the session's confs as the run found them (the session is shared), on a JVM still alive."""
        if jvm_exit_status() is not None:
            return
        for key, value in self.restore.items():
            if value is None:
                self.spark.conf.unset(key)
            else:
                self.spark.conf.set(key, value)

    def incarnation(self, life: int, restart: RestartPlan) -> Exception | None:
        """Run the query once; a restartable stop, or None (consumed, or stopped loudly on the supervisor)."""
        stop = self.boundary_stop(life, restart.first_batch)
        if not self.realtime:
            self.files.write(self.files.batches if stop is None else stop)
        self.apply_confs(life)
        self.live = life
        self.timing[f"incarnation_{life}_started_s"] = time.time()   # a restart's time runs from here
        self.query = query = self.start(life)
        if self.realtime and self.feeder is None:
            self.start_feeding(query)
        failure = self.wait(query)
        status = self.jvm_death(failure)
        new_marks = self.note_marks(life)
        self.planned.append((restart.first_batch, self.checkpoint.latest_offset()))
        if status is not None:
            return self.after_jvm_death(life, status, new_marks)
        self.collect_progress(query, life)
        if failure is not None:
            errors = [name for name in new_marks if self.marked()[name].get("kind") == "storage_write_error"]
            if errors:
                mark = self.marked()[errors[0]]
                return QueryFailure(f"faults[{mark['fault']}] storage_write_error {mark['when']} the {mark['op']} "
                                    f"of {self.relative(mark['path'])} failed the query: "
                                    f"{describe_failure(failure)}")
            self.supervisor.stop(self.failure_message(failure, life))
            return None
        if stop is not None and self.checkpoint.latest_commit() == stop - 1:
            error = self.fire_boundary(stop, life)
            if error:
                self.supervisor.stop(error)
                return None
            return DriverCrash(f"the query stopped before batch {stop} to damage a checkpoint file")
        if not self.consumed_all():
            done = (f"with {rows_recorded(self.stat_dir)} of {self.total_records} records processed"
                    if self.stat_sink else f"after batch {self.checkpoint.latest_commit()} of {self.files.batches}")
            self.supervisor.stop(f"incarnation {life} ended {done} without a fault: Spark did not consume its input")
        return None

    def jvm_death(self, failure: BaseException | None) -> int | None:
        """The exit status of the driver's JVM when ``failure`` is its death, else None. A failure the JVM
        reported (a Java exception: the query failed) is not a death; any other (py4j lost its connection, or
        could not open one: a refused connection) waits for the JVM to exit, which under load takes a while
        after its gateway's socket has closed."""
        if failure is None:
            return None
        from py4j.protocol import Py4JJavaError
        from pyspark.errors.exceptions.captured import CapturedException
        if isinstance(failure, (Py4JJavaError, CapturedException)):
            return jvm_exit_status()
        return jvm_exit_status(JVM_EXIT_WAIT_S)

    def after_jvm_death(self, life: int, status: int, new_marks: list[str]) -> Exception | None:
        """The driver's JVM died in incarnation ``life``: start a new one (a restarted driver), or stop loudly
        when no fault of the plan halted it."""
        from ..session import backend_session
        self.live = -1
        left = checkpoint_shape(self.root)   # what the crash left, before anything runs again
        forget_dead_jvm()
        self.spark = backend_session(BACKEND, None)   # the same master: the new driver (the outcome reads with it)
        halts = [self.marked()[name] for name in new_marks if name.startswith(MARK_PREFIX)
                 and self.marked()[name].get("kind") == "driver_crash"]
        self.jvm_deaths.append({"incarnation": life, "exit_status": status,
                                "fault": halts[0]["fault"] if halts else None,
                                "checkpoint": left})
        if status != HALT_STATUS or not halts:
            self.supervisor.stop(f"the driver's JVM died in incarnation {life} with exit status {status}, and no "
                                 f"fault of the plan halted it (a halted JVM exits with {HALT_STATUS})")
            return None
        require_loaded(self.spark, FS_CLASS)
        mark = halts[0]
        return DriverCrash(f"faults[{mark['fault']}] driver_crash {mark['when']} the {mark['op']} of "
                           f"{self.relative(mark['path'])}: the driver's JVM halted (exit status {status}) and a "
                           "new JVM restarts the query")

    def relative(self, local_path: str) -> str:
        """A path the fault plan names, relative to the run's checkpoint (the sink's: ``sink/...``)."""
        rel = os.path.relpath(local_path, self.checkpoint.path)
        return rel if not rel.startswith("..") else os.path.relpath(local_path, self.root)

    def failure_message(self, failure: BaseException, life: int) -> str:
        """Spark's error, as Spark worded it (whether it names a damaged file is Spark's to show: the damage
        done is in the notes)."""
        damaged = [f for f in self.fired if f["kind"] in DAMAGE_KINDS]
        if damaged:
            self.notes.append("the query failed after " + ", ".join(
                f"faults[{f['fault']}] {f['kind']} {self.sc.faults[f['fault']].path}" for f in damaged))
        return f"the Spark query failed in incarnation {life}: {describe_failure(failure)}"

    def start(self, life: int) -> Any:
        task_faults = [(self.faults.index_of(f), f) for f in self.pending("task", life)]
        losses = [(self.faults.index_of(f), f) for f in self.pending("executor", life)]
        settings = stream_settings(self.sc, self.realtime)
        df = build_query(self.spark, self.sc, self.root, task_faults, self.task_marks, settings.source_options,
                         losses)
        options = {"checkpointLocation": self.location, **settings.query_options}
        if self.stat_sink:
            return start_with_stat_sink(df, self.stat_dir, STAT_COLUMNS, output_mode=output_mode(self.sc.operator),
                                        options=options, trigger=settings.trigger)
        writer = df.writeStream.outputMode(output_mode(self.sc.operator)).foreachBatch(self.on_batch(life))
        writer = writer.options(**options)
        if settings.trigger is not None:
            writer = writer.trigger(**settings.trigger)
        return writer.start()

    def wait(self, query: Any) -> BaseException | None:
        try:
            if not self.realtime:
                query.awaitTermination()
                return None
            while query.isActive:
                if self.consumed_all():
                    query.stop()
                    break
                time.sleep(WAIT_POLL_S)
            exc: BaseException | None = query.exception()
            return exc
        except Exception as exc:  # StreamingQueryException: the query failed
            return exc

    def consumed_all(self) -> bool:
        """Every side's last input file is in a committed batch; with the stat sink (whose batches the driver
        does not see, and whose logs have gaps under asynchronous progress), every record was processed."""
        if self.stat_sink:
            return rows_recorded(self.stat_dir) >= self.total_records
        return self.final_batch is not None and self.checkpoint.latest_commit() >= self.final_batch

    def start_feeding(self, query: Any) -> None:
        """Realtime: the scenario's clock starts once Spark's query is up and waiting for data, so that the
        query's start-up (a second or more, ten under load) is not charged to the first records' latency:
        the engine's clock, too, starts after its Spark session and Python workers are up."""
        deadline = time.monotonic() + READY_TIMEOUT_S
        while query.isActive and time.monotonic() < deadline:
            status = query.status
            if not status.get("isTriggerActive") and str(status.get("message", "")).startswith("Waiting for data"):
                break
            time.sleep(WAIT_POLL_S)
        self.t0 = time.time()
        self.feeder = threading.Thread(target=self.feed, name="native-feeder", daemon=True)
        self.feeder.start()

    def feed(self) -> None:
        """Realtime: make batch b's file visible once its input has arrived on the scenario's clock."""
        last = 0.0
        for b in range(self.files.batches):
            due = self.t0 + self.files.ready_ms(b) / 1000.0
            if self.stopping.wait(max(0.0, due - time.time())):
                return
            stamp = max(time.time(), last + FEED_STEP_S)
            self.files.write_one(b, mtime=stamp)
            last = stamp

    # -------------------------------------------------------------- progress
    def collect_progress(self, query: Any, life: int) -> None:
        """The progress of the query's batches not collected yet (foreachBatch collects it too when the JVM
        may be halted: a crash takes the query's progress with it)."""
        if query is None:
            return
        for p in query.recentProgress:
            raw = json.loads(p.json) if hasattr(p, "json") else dict(p)
            if "addBatch" not in raw.get("durationMs", {}):
                continue  # an idle trigger: no batch ran
            key = (life, int(raw["batchId"]), str(raw.get("timestamp")))
            if key in self.progress_seen:
                continue
            self.progress_seen.add(key)
            self.progress.append(progress_event(raw))
            self.progress_extras.append({
                "batchId": raw["batchId"], "incarnation": life, "watermark": raw.get("eventTime", {}).get("watermark"),
                "numRowsDroppedByWatermark": [so.get("numRowsDroppedByWatermark", 0)
                                              for so in raw.get("stateOperators", [])],
                # the state store's own metrics (RocksDB: bytes and files copied to the checkpoint, the commit's
                # flush, checkpoint and file sync times), per stateful operator
                "customMetrics": [so.get("customMetrics", {}) for so in raw.get("stateOperators", [])]})


def _has_jar(spark: Any) -> bool:
    """Whether the session loaded the checkpoint filesystem's jar (its fault marks among it)."""
    try:
        require_loaded(spark, FS_CLASS)
    except Exception:  # noqa: BLE001 - CheckpointFsUnavailable, or a session without a JVM view in a test double
        return False
    return True


def progress_event(raw: dict[str, Any]) -> ProgressEvent:
    """Spark's ``StreamingQueryProgress`` JSON as the outcome's progress event."""
    durations = raw.get("durationMs", {})
    operators = tuple(StateOperatorProgress(str(so.get("operatorName", "")), int(so.get("numRowsTotal", 0)),
                                            int(so.get("numRowsUpdated", 0)), int(so.get("numRowsRemoved", 0)),
                                            float(so.get("commitTimeMs", 0)), int(so.get("memoryUsedBytes", 0)))
                      for so in raw.get("stateOperators", []))
    stamp = raw.get("timestamp")
    timestamp_ms = datetime.fromisoformat(stamp).timestamp() * 1000.0 if stamp else None
    return ProgressEvent(int(raw["batchId"]), int(raw.get("numInputRows", 0)),
                         float(raw.get("inputRowsPerSecond", 0.0)), float(raw.get("processedRowsPerSecond", 0.0)),
                         {k: durations.get(k, 0) for k in PROGRESS_DURATIONS}, operators, timestamp_ms)
