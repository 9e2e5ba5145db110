"""One scenario's query on Spark's own Structured Streaming, run incarnation by incarnation.

An incarnation is one run of the streaming query on the scenario's checkpoint
(``<workdir>/checkpoint``). It ends when its input is consumed, when the adapter
stops it at a batch boundary (a fault between batches), or when an injected
driver crash fails it inside a batch. The next incarnation is a new run of the
same query on the same checkpoint (a new run id, so Spark loads every state
store from the checkpoint files), so Spark's own restart path decides what it
re-runs; the incarnations are driven by ``reference.protocol.supervisor.Supervisor``,
whose restart plan reads Spark's checkpoint (``spark_checkpoint.py``).
Everything the outcome needs is observed from the driver (foreachBatch, the
query's progress) or read back from the checkpoint.
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from datetime import datetime
from typing import Any, Callable

from reference.protocol.failures import DriverCrash
from reference.protocol.faults import DAMAGE_KINDS, FaultBook, damage
from reference.protocol.modes import mode_of
from reference.protocol.observer import Observer
from reference.protocol.outcome import ProgressEvent, StateOperatorProgress, canonical_rows
from reference.protocol.recovery import RestartPlan, RestartRule
from reference.language.scenario import Fault, Scenario
from reference.protocol.storage import LocalStorage, Storage
from reference.protocol.supervisor import Supervisor

from .plan import InputFiles, build_query, output_mode, sink_row, stream_settings
from .sink import FileSink
from .spark_checkpoint import BatchInfo, SparkCheckpoint
from .stat_sink import rows_recorded, start_with_stat_sink
from .support import FaultSite, describe_failure, fault_site, uses_stat_sink

PROGRESS_DURATIONS = ("latestOffset", "walCommit", "queryPlanning", "getBatch", "addBatch", "commitOffsets",
                      "triggerExecution")
STAT_COLUMNS = ("sp", "off")   # a record's identity in the adapter's input: source partition and offset
WAIT_POLL_S = 0.01
FEED_STEP_S = 0.002
READY_TIMEOUT_S = 120.0   # realtime: how long the started query may take to be waiting for data


class InjectedCrash(RuntimeError):
    """Raised inside foreachBatch to stop the query the way a driver crash would."""


class NativeRun:
    """One scenario on Spark: the incarnations, the faults, and what the driver observed."""

    def __init__(self, scenario: Scenario, spark: Any, root: str, realtime: bool, location: str | None = None):
        """``location``: where Spark is told its checkpoint is (a ``checkpoint_fs`` URI that reaches
        ``<root>/checkpoint`` with a storage profile's latency); by default that local directory itself."""
        self.sc, self.spark, self.root, self.realtime = scenario, spark, root, realtime
        self.run_id = uuid.uuid4().hex[:12]
        self.files = InputFiles(scenario, root, base_mtime=time.time() - 86400.0)
        self.checkpoint = SparkCheckpoint(os.path.join(root, "checkpoint"), self.files)
        self.location = location or self.checkpoint.path
        self.sink = FileSink(os.path.join(root, "sink"), scenario.sink_mode == "exactly_once")
        self.stat_sink = uses_stat_sink(scenario, realtime)
        self.stat_dir = os.path.join(root, "stat")
        os.makedirs(self.stat_dir, exist_ok=True)
        self.total_records = sum(self.files.data.totals)
        self.storage: dict[str, Any] | None = None   # what the checkpoint's storage cost (a storage profile)
        self.faults = FaultBook(scenario.faults)
        self.sites = {i: fault_site(f, f"faults[{i}]", realtime=realtime) for i, f in enumerate(scenario.faults)}
        self.fired: list[dict[str, Any]] = []
        self.attempts: dict[int, int] = {}
        self.batch_info: dict[int, BatchInfo] = {}
        self.progress: list[ProgressEvent] = []
        self.progress_extras: list[dict[str, Any]] = []   # what Spark reports beyond a ProgressEvent
        self.notes: list[str] = []
        self.crash: str | None = None   # why this incarnation's query was made to fail (an injected crash)
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

    def take(self, point: str, b: int, life: int, *, first_only: bool = False) -> list[Fault]:
        hits = [f for f in self.pending(point, life) if self._site(f)[1] == b]
        hits = hits[:1] if first_only else hits
        for fault in hits:
            self.faults.pending.remove(fault)
            self.fired.append({"fault": self.faults.index_of(fault), "kind": fault.kind, "point": point,
                               "batch": b, "incarnation": life})
        return hits

    def maybe_crash(self, point: str, b: int, life: int) -> None:
        hits = self.take(point, b, life, first_only=True)  # one crash at a time, as in the reference
        if hits:
            at = hits[0].at
            self.crash = f"injected driver_crash (faults[{self.faults.index_of(hits[0])}]) {at.when} {at.step} " \
                         f"of batch {b}"
            raise InjectedCrash(self.crash)

    def boundary_stop(self, life: int, resumed: int) -> int | None:
        """The first batch before which this incarnation must stop for a fault between batches."""
        stops = [self._site(f)[1] for f in self.pending("before_batch", life)]
        return min((b for b in stops if resumed <= b <= self.files.batches), default=None)

    def fire_boundary(self, stop: int, life: int) -> str | None:
        """Fire the faults between batch ``stop - 1`` and ``stop``; an error when a file to damage is missing."""
        for fault in self.take("before_batch", stop, life):
            if fault.kind in DAMAGE_KINDS:  # a driver crash here is the stop itself
                error = self.damage(fault, stop)
                if error:
                    return error
        return None

    def damage(self, fault: Fault, stop: int) -> str | None:
        """``reference.protocol.faults.damage`` on Spark's checkpoint; a deleted file's checksum (``.<name>.crc``,
        which Hadoop's local file system keeps beside it) goes with it."""
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

        def deliver(df: Any, batch_id: int) -> None:
            b = int(batch_id)
            self.attempts[b] = self.attempts.get(b, 0) + 1
            self.observe_batch(b)
            self.maybe_crash("pre_state", b, life)
            rows = canonical_rows([sink_row(op, r) for r in df.collect()])  # the one action on the batch
            self.maybe_crash("post_state", b, life)
            self.sink.deliver(b, rows, self.attempts[b], lambda: self.maybe_crash("sink_written", b, life))
            self.maybe_crash("post_sink", b, life)

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
    def execute(self) -> None:
        started = time.time()
        try:
            for life, restart in self.supervisor.lives():
                self.supervisor.ended(life, self.incarnation(life, restart))
        finally:
            self.stopping.set()
            if self.feeder is not None:
                self.feeder.join()
            self.timing["queries_s"] = round(time.time() - started, 3)

    def incarnation(self, life: int, restart: RestartPlan) -> Exception | None:
        """Run the query once; a restartable stop, or None (consumed, or stopped loudly on the supervisor)."""
        stop = self.boundary_stop(life, restart.first_batch)
        if not self.realtime:
            self.files.write(self.files.batches if stop is None else stop)
        self.crash = None
        self.timing[f"incarnation_{life}_started_s"] = time.time()   # a restart's time runs from here
        query = self.start(life)
        if self.realtime and self.feeder is None:
            self.start_feeding(query)
        failure = self.wait(query)
        self.collect_progress(query, life)
        if failure is not None:
            if self.crash is not None:
                return DriverCrash(self.crash)
            self.supervisor.stop(self.failure_message(failure, life))
            return None
        if stop is not None and self.checkpoint.latest_commit() == stop - 1:
            error = self.fire_boundary(stop, life)
            if error:
                self.supervisor.stop(error)
                return None
            return DriverCrash(f"the query stopped before batch {stop} for a fault between batches")
        if not self.consumed_all():
            done = (f"with {rows_recorded(self.stat_dir)} of {self.total_records} records processed"
                    if self.stat_sink else f"after batch {self.checkpoint.latest_commit()} of {self.files.batches}")
            self.supervisor.stop(f"incarnation {life} ended {done} without a fault: Spark did not consume its input")
        return None

    def failure_message(self, failure: BaseException, life: int) -> str:
        error = f"the Spark query failed in incarnation {life}: {describe_failure(failure)}"
        damaged = [f for f in self.fired if f["kind"] in DAMAGE_KINDS]
        if damaged:
            error += "; after " + ", ".join(
                f"faults[{f['fault']}] {f['kind']} {self.sc.faults[f['fault']].path}" for f in damaged)
        return error

    def start(self, life: int) -> Any:
        task_faults = [(self.faults.index_of(f), f) for f in self.pending("task", life)]
        settings = stream_settings(self.sc, self.realtime)
        df = build_query(self.spark, self.sc, self.root, task_faults, self.run_id, settings.source_options)
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
        for p in query.recentProgress:
            raw = json.loads(p.json) if hasattr(p, "json") else dict(p)
            if "addBatch" not in raw.get("durationMs", {}):
                continue  # an idle trigger: no batch ran
            self.progress.append(progress_event(raw))
            self.progress_extras.append({
                "batchId": raw["batchId"], "incarnation": life, "watermark": raw.get("eventTime", {}).get("watermark"),
                "numRowsDroppedByWatermark": [so.get("numRowsDroppedByWatermark", 0)
                                              for so in raw.get("stateOperators", [])],
                # the state store's own metrics (RocksDB: bytes and files copied to the checkpoint, the commit's
                # flush, checkpoint and file sync times), per stateful operator
                "customMetrics": [so.get("customMetrics", {}) for so in raw.get("stateOperators", [])]})


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
