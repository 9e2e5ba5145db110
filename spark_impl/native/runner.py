"""Run a scenario's query on Spark's own Structured Streaming, incarnation by incarnation.

An incarnation is one run of the streaming query on the scenario's checkpoint
(``<workdir>/checkpoint``). It ends when its input is consumed, when the adapter
stops it at a batch boundary (a fault between batches), or when an injected
driver crash fails it inside a batch. The next incarnation is a new run of the
same query on the same checkpoint, so Spark's own restart path decides what it
re-runs. Everything the outcome needs is observed from the driver (foreachBatch,
the query's progress) or read back from the checkpoint.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
import uuid
from typing import Any, Iterator

from reference.outcome import canonical_rows, digest_rows
from reference.scenario import Scenario

from .plan import InputFiles, build_query, fault_property, output_mode, parse_batch_file, sink_row
from .state import read_states
from .support import FaultPoint, describe_failure

BACKEND = "spark-native"
MAX_RESTARTS = 20
ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
HDFS = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
PROGRESS_DURATIONS = ("latestOffset", "walCommit", "queryPlanning", "getBatch", "addBatch", "commitOffsets",
                      "triggerExecution")
OPERATOR_METRICS = ("operatorName", "numRowsTotal", "numRowsUpdated", "numRowsRemoved", "numRowsDroppedByWatermark",
                    "commitTimeMs", "memoryUsedBytes")
PERCENTILES = (50, 90, 99)


class InjectedCrash(RuntimeError):
    """Raised inside foreachBatch to stop the query the way a driver crash would."""


def engine_confs(scenario: Scenario) -> dict[str, str]:
    """The session confs that configure one scenario's query (captured in its offset log at start)."""
    e = scenario.engine
    return {
        "spark.sql.shuffle.partitions": str(scenario.state_partitions),
        "spark.sql.streaming.stateStore.providerClass": HDFS if e.provider == "delta" else ROCKSDB,
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled":
            "true" if e.provider == "changelog" else "false",
        "spark.sql.streaming.stateStore.minDeltasForSnapshot": str(e.min_deltas_for_snapshot),
        "spark.sql.streaming.stateStore.maintenanceInterval": f"{e.maintenance_interval_ms}ms",
        "spark.sql.streaming.minBatchesToRetain": str(e.min_batches_to_retain),
        "spark.sql.streaming.asyncLogPurge.enabled": "true" if e.log_purge_mode == "async" else "false",
        # the reference has no batches without input: a no-data batch would shift every batch id after it
        "spark.sql.streaming.noDataMicroBatches.enabled": "false",
        "spark.sql.streaming.numRecentProgressUpdates": "100000",
        # one split per input file, so a batch's rows reach each state partition in file order
        "spark.sql.files.maxPartitionBytes": str(1 << 30),
        "spark.sql.files.openCostInBytes": str(1 << 30),
    }


@contextlib.contextmanager
def session_confs(spark: Any, confs: dict[str, str]) -> Iterator[None]:
    """Set confs for the duration of a run, then put back what was there (the session is shared)."""
    old = {key: spark.conf.get(key, None) for key in confs}
    for key, value in confs.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in old.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


def _numbered(directory: str) -> list[int]:
    if not os.path.isdir(directory):
        return []
    return sorted(int(name) for name in os.listdir(directory) if name.isdigit())


def percentiles(values: list[float]) -> dict[str, float | int]:
    """``{"count", "p50", "p90", "p99", "max"}`` (nearest rank; all 0 when empty)."""
    ordered = sorted(values)
    out: dict[str, float | int] = {"count": len(ordered)}
    for q in PERCENTILES:
        out[f"p{q}"] = round(ordered[max(0, -(-q * len(ordered) // 100) - 1)], 3) if ordered else 0.0
    out["max"] = round(ordered[-1], 3) if ordered else 0.0
    return out


class NativeRun:
    """One scenario on Spark: the incarnations, the faults, and what the driver observed."""

    def __init__(self, scenario: Scenario, spark: Any, root: str, points: list[FaultPoint], realtime: bool):
        self.sc, self.spark, self.root, self.realtime = scenario, spark, root, realtime
        self.checkpoint = os.path.join(root, "checkpoint")
        self.sink_dir = os.path.join(root, "sink")
        os.makedirs(self.sink_dir, exist_ok=True)
        self.run_id = uuid.uuid4().hex[:12]
        self.files = InputFiles(scenario, root, base_mtime=time.time() - 86400.0)
        self.pending = list(points)
        self.fired: list[dict[str, Any]] = []
        self.attempts: dict[int, int] = {}
        self.deliveries: dict[int, list[dict[str, Any]]] = {}
        self.batch_info: dict[int, dict[str, Any]] = {}
        self.progress: list[dict[str, Any]] = []
        self.recoveries: list[dict[str, Any]] = []
        self.notes: list[str] = []
        self.error: str | None = None
        self.crash: FaultPoint | None = None
        self.t0 = time.time()
        self.feeder: threading.Thread | None = None
        self.timing: dict[str, float] = {}
        self.final_batch: int | None = None  # the batch that reads the last input file of every side
        self.stopping = threading.Event()

    # ------------------------------------------------------------ checkpoint
    def latest_commit(self) -> int:
        return max(_numbered(os.path.join(self.checkpoint, "commits")), default=-1)

    def latest_offset(self) -> int:
        return max(_numbered(os.path.join(self.checkpoint, "offsets")), default=-1)

    def resume_point(self) -> tuple[int, list[int]]:
        """Where Spark's restart begins: re-run the latest logged batch if it has no commit."""
        logged, committed = self.latest_offset(), self.latest_commit()
        if logged > committed:
            return logged, [logged]
        return committed + 1, []

    def source_file(self, source: int, log_offset: int) -> str | None:
        """The input file the file source logged at ``log_offset`` (plain or compacted log entries)."""
        directory = os.path.join(self.checkpoint, "sources", str(source))
        plain = os.path.join(directory, str(log_offset))
        candidates = [plain] if os.path.exists(plain) else sorted(
            os.path.join(directory, n) for n in os.listdir(directory) if n.endswith(".compact"))
        for path in candidates:
            with open(path) as fh:
                for line in fh.read().splitlines()[1:]:
                    entry = json.loads(line)
                    if entry.get("batchId") == log_offset:
                        return str(entry["path"])
        return None

    def observe_batch(self, b: int) -> None:
        """Read ``offsets/b`` as Spark wrote it: which input file of each side, and the watermark."""
        with open(os.path.join(self.checkpoint, "offsets", str(b))) as fh:
            lines = fh.read().splitlines()
        metadata = json.loads(lines[1])
        files: dict[str, int] = {}
        for source, line in enumerate(lines[2:]):
            try:
                offset = json.loads(line)
            except json.JSONDecodeError:
                continue  # "-": the source has no offset yet
            path = self.source_file(source, int(offset["logOffset"]))
            parsed = parse_batch_file(path) if path else None
            if parsed is None:
                raise RuntimeError(f"offsets/{b}: source {source} log offset {offset} names no input file")
            files[parsed[0]] = parsed[1]
        info = {"files": files, "watermark_ms": int(metadata.get("batchWatermarkMs", 0))}
        last = self.files.batches - 1
        if len(files) == len(self.files.sides) and all(planned == last for planned in files.values()):
            self.final_batch = b
        previous = self.batch_info.get(b)
        if previous is not None and previous != info:
            self.notes.append(f"batch {b} re-ran with other input or watermark: {previous} then {info}")
        self.batch_info[b] = info

    # ---------------------------------------------------------------- faults
    def take(self, point: str, b: int, life: int, *, first_only: bool = False) -> list[FaultPoint]:
        hits = [fp for fp in self.pending if fp.point == point and fp.batch == b
                and (fp.restart is None or fp.restart == life)]
        for fp in hits[:1] if first_only else hits:
            self.pending.remove(fp)
            self.fired.append({"fault": fp.index, "kind": fp.fault.kind, "point": point, "batch": b,
                               "incarnation": life})
        return hits[:1] if first_only else hits

    def maybe_crash(self, point: str, b: int, life: int) -> None:
        hits = self.take(point, b, life, first_only=True)  # one crash at a time, as in the reference
        if hits:
            self.crash = hits[0]
            at = hits[0].fault.at
            raise InjectedCrash(f"injected driver_crash (faults[{hits[0].index}]) {at.when} {at.step} of batch {b}")

    def boundary_stop(self, life: int, resumed: int) -> int | None:
        stops = [fp.batch for fp in self.pending if fp.point == "before_batch" and fp.batch >= resumed
                 and fp.batch <= self.files.batches and (fp.restart is None or fp.restart == life)]
        return min(stops, default=None)

    def fire_boundary(self, stop: int, life: int) -> None:
        for fp in self.take("before_batch", stop, life):
            if fp.fault.kind == "driver_crash":
                continue  # the query already stopped at the boundary; the next incarnation restarts it
            self.damage(fp)

    def damage(self, fp: FaultPoint) -> None:
        path = fp.fault.path or ""
        full = os.path.join(self.checkpoint, path)
        if not os.path.isfile(full):
            self.error = (f"faults[{fp.index}]: {fp.fault.kind} of {path!r}: no such file in Spark's checkpoint "
                          f"after batch {fp.batch - 1} (paths are relative to it, e.g. offsets/3, "
                          f"state/0/1/4.changelog)")
            return
        crc = os.path.join(os.path.dirname(full), f".{os.path.basename(full)}.crc")
        if fp.fault.kind == "delete_file":
            os.remove(full)
            if os.path.exists(crc):
                os.remove(crc)
        else:
            with open(full, "r+b") as fh:
                size = os.path.getsize(full)
                fh.seek(size // 2)
                fh.write(b"\xde\xad\xbe\xef" * 4)
                fh.truncate(size // 2 + 16)

    # -------------------------------------------------------------- the sink
    def on_batch(self, life: int) -> Any:
        op, exactly_once = self.sc.operator, self.sc.sink_mode == "exactly_once"

        def deliver(df: Any, batch_id: int) -> None:
            b = int(batch_id)
            self.attempts[b] = self.attempts.get(b, 0) + 1
            self.observe_batch(b)
            self.maybe_crash("pre_state", b, life)
            rows = canonical_rows([sink_row(op, r) for r in df.collect()])  # the one action on the batch
            self.maybe_crash("post_state", b, life)
            payload = json.dumps(rows)
            if exactly_once:
                tmp = os.path.join(self.sink_dir, f".{b}.json.tmp")
                with open(tmp, "w") as fh:
                    fh.write(payload)
                self.maybe_crash("sink_written", b, life)
                os.replace(tmp, os.path.join(self.sink_dir, f"{b}.json"))  # the idempotent commit by batch id
                self.deliveries.setdefault(b, []).append({"digest": digest_rows(rows), "time": time.time()})
            else:
                # at-least-once: every attempt's output is visible as soon as it is written
                with open(os.path.join(self.sink_dir, f"{b}-{self.attempts[b]}.json"), "w") as fh:
                    fh.write(payload)
                self.deliveries.setdefault(b, []).append({"digest": digest_rows(rows), "time": time.time()})
                self.maybe_crash("sink_written", b, life)
            self.maybe_crash("post_sink", b, life)

        return deliver

    # ---------------------------------------------------------- incarnations
    def start(self, life: int) -> Any:
        task_faults = [fp for fp in self.pending if fp.point == "task" and (fp.restart is None or fp.restart == life)]
        df = build_query(self.spark, self.sc, self.root, task_faults, self.run_id)
        writer = (df.writeStream.outputMode(output_mode(self.sc.operator)).foreachBatch(self.on_batch(life))
                  .option("checkpointLocation", self.checkpoint))
        if self.realtime:
            writer = writer.trigger(processingTime=f"{self.sc.engine.trigger_interval_ms} milliseconds")
        else:
            writer = writer.trigger(availableNow=True)
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
                time.sleep(0.01)
            return query.exception()
        except Exception as exc:  # StreamingQueryException: the query failed
            return exc

    def consumed_all(self) -> bool:
        """Every side's last input file is in a committed batch."""
        return self.final_batch is not None and self.latest_commit() >= self.final_batch

    def collect_progress(self, query: Any, life: int) -> None:
        for p in query.recentProgress:
            raw = json.loads(p.json) if hasattr(p, "json") else dict(p)
            if "addBatch" not in raw.get("durationMs", {}):
                continue  # an idle trigger: no batch ran
            ops = [{k: so.get(k) for k in OPERATOR_METRICS if k in so} for so in raw.get("stateOperators", [])]
            self.progress.append({
                "batchId": raw["batchId"], "numInputRows": raw.get("numInputRows", 0),
                "inputRowsPerSecond": raw.get("inputRowsPerSecond", 0.0),
                "processedRowsPerSecond": raw.get("processedRowsPerSecond", 0.0),
                "durationMs": {k: raw.get("durationMs", {}).get(k, 0) for k in PROGRESS_DURATIONS},
                "stateOperators": ops, "watermark": raw.get("eventTime", {}).get("watermark"),
                "timestamp": raw.get("timestamp"), "incarnation": life})

    def feed(self) -> None:
        """Realtime: make batch b's file visible when its last record has arrived on the scenario's clock."""
        last = 0.0
        for b in range(self.files.batches):
            due = self.t0 + self.files.cut_ms(b) / 1000.0
            if self.stopping.wait(max(0.0, due - time.time())):
                return
            stamp = max(time.time(), last + 0.002)
            self.files.write_one(b, mtime=stamp)
            last = stamp

    def execute(self) -> None:
        started = time.time()
        try:
            self.incarnations()
        finally:
            self.stopping.set()
            if self.feeder is not None:
                self.feeder.join()
            self.timing["queries_s"] = round(time.time() - started, 3)

    def incarnations(self) -> None:
        total = self.files.batches
        if self.realtime:
            self.t0 = time.time()
            self.feeder = threading.Thread(target=self.feed, name="native-feeder", daemon=True)
            self.feeder.start()
        for life in range(MAX_RESTARTS + 1):
            resumed, rerun = self.resume_point()
            if life > 0:
                self.recoveries.append({"restart": life, "resumed_at": resumed, "rerun_batches": rerun})
            stop = self.boundary_stop(life, resumed)
            if not self.realtime:
                self.files.write(total if stop is None else stop)
            self.crash = None
            query = self.start(life)
            failure = self.wait(query)
            self.collect_progress(query, life)
            committed = self.latest_commit()
            if failure is not None:
                if self.crash is not None:
                    continue
                self.error = f"the Spark query failed in incarnation {life}: {describe_failure(failure)}"
                damaged = [f for f in self.fired if f["kind"] in ("corrupt_file", "delete_file")]
                if damaged:
                    self.error += "; after " + ", ".join(
                        f"faults[{f['fault']}] {f['kind']} {self.sc.faults[f['fault']].path}" for f in damaged)
                return
            if stop is not None and committed == stop - 1:
                self.fire_boundary(stop, life)
                if self.error:
                    return
                continue
            if self.consumed_all():
                return
            self.error = (f"incarnation {life} ended after batch {committed} of {total} without a fault: "
                          "Spark did not consume its input")
            return
        self.error = f"more than {MAX_RESTARTS} restarts"

    # ---------------------------------------------------------------- outcome
    def sink_entries(self) -> list[dict[str, Any]]:
        out = []
        for b in sorted(self.deliveries):
            if self.sc.sink_mode == "exactly_once":
                path = os.path.join(self.sink_dir, f"{b}.json")
                if not os.path.exists(path):
                    continue
                with open(path) as fh:
                    rows = json.load(fh)
            else:
                rows = []
                for name in sorted(os.listdir(self.sink_dir)):
                    if name.startswith(f"{b}-") and name.endswith(".json"):
                        with open(os.path.join(self.sink_dir, name)) as fh:
                            rows.extend(json.load(fh))
            out.append({"batch": b, "rows": canonical_rows(rows), "deliveries": len(self.deliveries[b]),
                        "delivery_digests": [d["digest"] for d in self.deliveries[b]]})
        return out

    def batches(self) -> list[dict[str, Any]]:
        out = []
        position = (0,) * len(self.files.data.partitions)
        for b in range(self.latest_commit() + 1):
            info = self.batch_info.get(b)
            if info is None:
                self.notes.append(f"batch {b} is committed but was never observed by foreachBatch")
                continue
            start = position
            for side, planned in sorted(info["files"].items()):
                position = self.files.end_offsets_of(side, planned, position)
            out.append({"id": b, "start_offsets": list(start), "end_offsets": list(position),
                        "watermark_ms": info["watermark_ms"], "attempts": self.attempts.get(b, 1)})
        return out

    def checkpoint_files(self) -> list[str]:
        out = []
        for base, prefix in ((self.checkpoint, ""), (self.sink_dir, "sink/")):
            for directory, _dirs, names in os.walk(base):
                for name in names:
                    if name.endswith(".crc") or name.endswith(".tmp"):
                        continue
                    out.append(prefix + os.path.relpath(os.path.join(directory, name), base))
        return sorted(out)

    def latency(self, batches: list[dict[str, Any]]) -> dict[str, float | int]:
        """End-to-end latency per record: its creation to its batch's first sink commit (ms)."""
        values = []
        for batch in batches:
            sent = self.deliveries.get(batch["id"])
            if not sent:
                continue
            visible_ms = (sent[0]["time"] - self.t0) * 1000.0
            for record in self.files.data.slice(batch["start_offsets"], batch["end_offsets"]):
                values.append(visible_ms - record.arrival_ms)
        return percentiles(values)

    def outcome(self) -> dict[str, Any]:
        started = time.time()
        batches = self.batches()
        committed = self.latest_commit()
        state: dict[str, Any] = {}
        state_errors: list[str] = []
        if self.sc.operator.stateful and committed >= 0:
            latest = committed + 1
            versions = list(range(max(1, latest - self.sc.engine.min_batches_to_retain + 1), latest + 1))
            state, state_errors = read_states(self.spark, self.checkpoint, self.sc, versions)
        self.timing["state_read_s"] = round(time.time() - started, 3)
        not_fired = [{"fault": fp.index, "kind": fp.fault.kind, "point": fp.point, "batch": fp.batch}
                     for fp in self.pending if fp.point != "task"]
        task_fired = []
        system = self.spark._jvm.java.lang.System
        for fp in [fp for fp in self.pending if fp.point == "task"]:
            mark = system.getProperty(fault_property(self.run_id, fp.index))
            system.clearProperty(fault_property(self.run_id, fp.index))
            if mark is not None:  # "batch <b> partition <p> key <k>": the task that failed
                words = str(mark).split()
                task_fired.append({"fault": fp.index, "kind": "task_failure", "point": "task",
                                   "batch": int(words[1]), "partition": int(words[3])})
            else:
                not_fired.append({"fault": fp.index, "kind": fp.fault.kind, "point": "task", "batch": fp.batch})
        durations = [float(p["durationMs"]["triggerExecution"]) for p in self.progress]
        out: dict[str, Any] = {
            "scenario": self.sc.name, "backend": BACKEND, "seed": self.sc.seed,
            "batches": batches, "state": state, "sink": self.sink_entries(),
            "recoveries": self.recoveries, "progress": self.progress,
            "checkpoint_files": self.checkpoint_files(), "error": self.error, "state_errors": state_errors,
            "native": {"spark_version": self.spark.version, "checkpoint": self.checkpoint,
                       "realtime": self.realtime, "faults_fired": self.fired + task_fired,
                       "faults_not_fired": not_fired, "notes": self.notes,
                       "batch_duration_ms": percentiles(durations), "timing_s": self.timing},
        }
        if self.realtime:
            out["latency_ms"] = self.latency(batches)
        return out

