"""The outcome of spec section 4, as one frozen, typed value that every backend returns.

Everything in an outcome is either observed across incarnations (the batch
history, recoveries, deliveries, progress) or read back from the checkpoint
(retained state versions, sink contents, the file list). ``Outcome.to_json``
gives canonical bytes, so the ``determinism`` oracle can compare two runs byte
for byte, and ``Outcome.from_dict`` reads a file back, naming the offending
field of a malformed one.

Beyond the contract the project started from (docs/spec.md section 4): ``seed``; per batch ``start_offsets``; per sink
entry ``delivery_digests`` (one per exactly-once commit, for idempotence);
``error`` (a loud failure) and ``state_errors`` (versions that would not load);
``timing`` (timed backends: the latency summary of ``timing.py`` and the run's
wall time); ``faults_not_fired`` (faults no step matched: the run did not test
what the scenario asked for); ``moves`` (state partitions the placement moved
to another executor at an executor join or leave, ``rebalancing.py``); ``details`` (what one backend alone reports: its profile, its
cluster, its task counts; no oracle reads it).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from ..language.json_input import JsonInputError, loads
from .timing import LatencySummary, Throughput, TimingError

StateMap = dict[str, dict[str, dict[str, list[list[Any]]]]]   # store -> partition -> version -> pairs
OUTCOME_FIELDS = ("scenario", "backend", "seed", "batches", "state", "sink", "recoveries", "progress",
                  "checkpoint_files", "error", "state_errors", "timing", "details", "faults_not_fired", "moves")
# ``StreamingQueryProgress.durationMs``: Spark's keys, and ``purge``, which is ours: the part of walCommit an
# inline log purge took (Spark times the purge inside walCommit; an async purge is only submitted there).
DURATION_KEYS = ("latestOffset", "walCommit", "queryPlanning", "addBatch", "commitOffsets", "triggerExecution",
                 "purge")


class OutcomeError(ValueError):
    """An outcome does not have the shape of spec section 4. ``field`` names where."""

    def __init__(self, field_path: str, message: str):
        super().__init__(f"{field_path}: {message}")
        self.field = field_path


# ------------------------------------------------------------------ parts


@dataclass(frozen=True)
class BatchRecord:
    """A committed batch: its boundaries, the watermark it ran with, and how often it was planned."""

    id: int
    end_offsets: tuple[int, ...]
    start_offsets: tuple[int, ...] | None = None
    watermark_ms: int | None = None
    attempts: int = 1
    task_retries: int = 0     # failed task attempts Spark retried in this batch's last planning

    def to_dict(self) -> dict[str, Any]:
        return _drop_none({"id": self.id, "start_offsets": _list_or_none(self.start_offsets),
                           "end_offsets": list(self.end_offsets), "watermark_ms": self.watermark_ms,
                           "attempts": self.attempts, "task_retries": self.task_retries or None})


@dataclass(frozen=True)
class SinkEntry:
    """What the sink shows for one batch: its rows, how many times it was delivered, and each delivery's digest."""

    batch: int
    rows: tuple[Any, ...]
    deliveries: int = 1
    delivery_digests: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"batch": self.batch, "rows": list(self.rows), "deliveries": self.deliveries,
                "delivery_digests": list(self.delivery_digests)}


@dataclass(frozen=True)
class Recovery:
    """One restart: the incarnation it started, the batch it resumed at, and the batches it re-ran."""

    restart: int
    resumed_at: int
    rerun_batches: tuple[int, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"restart": self.restart, "resumed_at": self.resumed_at, "rerun_batches": list(self.rerun_batches)}


@dataclass(frozen=True)
class StateMove:
    """State partition ``partition`` runs on executor ``target`` from batch ``batch`` on, no longer on
    ``source``: its task loads its state from the checkpoint there (an executor join or leave)."""

    batch: int
    partition: int
    source: str
    target: str

    def to_dict(self) -> dict[str, Any]:
        return {"batch": self.batch, "partition": self.partition, "from": self.source, "to": self.target}


@dataclass(frozen=True)
class StateOperatorProgress:
    """``StreamingQueryProgress.stateOperators[i]`` (Spark's names in JSON)."""

    operator_name: str
    num_rows_total: int = 0
    num_rows_updated: int = 0
    num_rows_removed: int = 0
    commit_time_ms: float = 0.0
    memory_used_bytes: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"operatorName": self.operator_name, "numRowsTotal": self.num_rows_total,
                "numRowsUpdated": self.num_rows_updated, "numRowsRemoved": self.num_rows_removed,
                "commitTimeMs": self.commit_time_ms, "memoryUsedBytes": self.memory_used_bytes}


@dataclass(frozen=True)
class ProgressEvent:
    """One ``StreamingQueryProgress``: durations in ms by Spark's keys (``DURATION_KEYS`` and more)."""

    batch_id: int
    num_input_rows: int = 0
    input_rows_per_second: float = 0.0
    processed_rows_per_second: float = 0.0
    duration_ms: Mapping[str, float] = field(default_factory=dict)
    state_operators: tuple[StateOperatorProgress, ...] = ()
    timestamp_ms: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return _drop_none({"batchId": self.batch_id, "numInputRows": self.num_input_rows,
                           "inputRowsPerSecond": self.input_rows_per_second,
                           "processedRowsPerSecond": self.processed_rows_per_second,
                           "durationMs": dict(self.duration_ms),
                           "stateOperators": [op.to_dict() for op in self.state_operators],
                           "timestamp_ms": self.timestamp_ms})


@dataclass(frozen=True)
class Timing:
    """What a timed backend measured: end-to-end latency per record, and the run's wall time."""

    latency_ms: LatencySummary = LatencySummary()
    wall_s: float | None = None
    throughput: Throughput | None = None   # whether the run kept up with its input (``timing.Throughput``)

    def to_dict(self) -> dict[str, Any]:
        return _drop_none({"latency_ms": self.latency_ms.to_dict(), "wall_s": self.wall_s,
                           "throughput": self.throughput.to_dict() if self.throughput else None})


# ---------------------------------------------------------------- outcome


@dataclass(frozen=True)
class Outcome:
    """An outcome (spec section 4) as a value."""

    scenario: str
    backend: str
    batches: tuple[BatchRecord, ...]
    state: StateMap
    sink: tuple[SinkEntry, ...]
    recoveries: tuple[Recovery, ...] = ()
    progress: tuple[ProgressEvent, ...] = ()
    checkpoint_files: tuple[str, ...] = ()
    seed: int | None = None
    error: str | None = None
    state_errors: tuple[str, ...] = ()
    timing: Timing | None = None
    details: Mapping[str, Any] = field(default_factory=dict)
    faults_not_fired: tuple[int, ...] = ()   # the scenario's faults (by index) that never matched a step
    moves: tuple[StateMove, ...] = ()         # by batch, then partition

    def __post_init__(self) -> None:
        ids = [b.id for b in self.batches]
        assert ids == sorted(set(ids)), "an outcome's batches are distinct and in batch order"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "scenario": self.scenario, "backend": self.backend, "seed": self.seed,
            "batches": [b.to_dict() for b in self.batches], "state": self.state,
            "sink": [e.to_dict() for e in self.sink], "recoveries": [r.to_dict() for r in self.recoveries],
            "progress": [p.to_dict() for p in self.progress], "checkpoint_files": list(self.checkpoint_files),
            "error": self.error, "state_errors": list(self.state_errors)}
        if self.timing is not None:
            out["timing"] = self.timing.to_dict()
        if self.details:
            out["details"] = dict(self.details)
        if self.faults_not_fired:
            out["faults_not_fired"] = list(self.faults_not_fired)
        if self.moves:
            out["moves"] = [m.to_dict() for m in self.moves]
        return out

    def to_json(self) -> str:
        """Canonical text: the same outcome always gives the same bytes."""
        return json.dumps(self.to_dict(), sort_keys=True, indent=1) + "\n"

    def sink_by_batch(self) -> dict[int, SinkEntry]:
        return {entry.batch: entry for entry in self.sink}

    def latency(self) -> LatencySummary:
        """The latency summary, empty for an untimed backend."""
        return self.timing.latency_ms if self.timing is not None else LatencySummary()

    @staticmethod
    def from_dict(raw: Any) -> "Outcome":
        """Read an outcome, refusing a malformed one with an error naming the field."""
        if not isinstance(raw, dict):
            raise OutcomeError("<outcome>", "expected a JSON object")
        for name in ("scenario", "backend", "batches", "state", "sink"):
            if name not in raw:
                raise OutcomeError(name, "required field is missing")
        unknown = sorted(set(raw) - set(OUTCOME_FIELDS))
        if unknown:
            raise OutcomeError(unknown[0], "unknown field (check the spelling against docs/spec.md section 4)")
        batches = tuple(_batch(b, f"batches[{i}]") for i, b in enumerate(_list(raw, "batches")))
        ids = [b.id for b in batches]
        if len(set(ids)) != len(ids):
            dup = next(i for i in ids if ids.count(i) > 1)
            raise OutcomeError("batches", f"batch {dup} is listed more than once")
        sink = tuple(_sink(e, f"sink[{i}]") for i, e in enumerate(_list(raw, "sink")))
        listed = [e.batch for e in sink]
        if len(set(listed)) != len(listed):
            dup = next(b for b in listed if listed.count(b) > 1)
            raise OutcomeError("sink", f"batch {dup} has more than one sink entry; an outcome lists each batch "
                                       "once, with its delivery count")
        return Outcome(
            _str(raw, "scenario"), _str(raw, "backend"), tuple(sorted(batches, key=lambda b: b.id)),
            _state(raw["state"]), tuple(sorted(sink, key=lambda e: e.batch)),
            tuple(_recovery(r, f"recoveries[{i}]") for i, r in enumerate(_list(raw, "recoveries", []))),
            tuple(_progress(p, f"progress[{i}]") for i, p in enumerate(_list(raw, "progress", []))),
            tuple(_strings(raw, "checkpoint_files")), _optional_int(raw, "seed"),
            _optional_str(raw, "error"), tuple(_strings(raw, "state_errors")), _timing(raw.get("timing")),
            _details(raw.get("details", {})),
            tuple(_int(i, f"faults_not_fired[{n}]") for n, i in enumerate(_list(raw, "faults_not_fired", []))),
            tuple(_move(m, f"moves[{i}]") for i, m in enumerate(_list(raw, "moves", []))))

    @staticmethod
    def from_json(text: str, source: str = "<outcome>") -> "Outcome":
        try:
            raw = loads(text)
        except JsonInputError as exc:   # malformed, a repeated key, NaN or Infinity, nested too deep
            raise OutcomeError(source, str(exc)) from None
        return Outcome.from_dict(raw)


# ---------------------------------------------------------------- readers


def _drop_none(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


def _list_or_none(values: Sequence[int] | None) -> list[int] | None:
    return None if values is None else list(values)


def _list(raw: dict[str, Any], name: str, default: Any = ...) -> list[Any]:
    if name not in raw and default is not ...:
        return default
    value = raw[name]
    if not isinstance(value, list):
        raise OutcomeError(name, f"expected a list, got {type(value).__name__}")
    return value


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _int(value: Any, path: str, minimum: int = 0) -> int:
    if not _is_int(value) or value < minimum:
        raise OutcomeError(path, f"expected an integer >= {minimum}, got {value!r}")
    return value


def _str(raw: dict[str, Any], name: str) -> str:
    value = raw[name]
    if not isinstance(value, str):
        raise OutcomeError(name, f"expected a string, got {value!r}")
    return value


def _optional_str(raw: dict[str, Any], name: str) -> str | None:
    value = raw.get(name)
    if value is not None and not isinstance(value, str):
        raise OutcomeError(name, f"expected a string or null, got {value!r}")
    return value


def _optional_int(raw: dict[str, Any], name: str) -> int | None:
    value = raw.get(name)
    return None if value is None else _int(value, name)


def _strings(raw: dict[str, Any], name: str) -> list[str]:
    values = _list(raw, name, [])
    for i, value in enumerate(values):
        if not isinstance(value, str):
            raise OutcomeError(f"{name}[{i}]", f"expected a string, got {value!r}")
    return values


def _ints(value: Any, path: str) -> tuple[int, ...]:
    if not isinstance(value, list) or any(not _is_int(x) or x < 0 for x in value):
        raise OutcomeError(path, f"expected a list of offsets (integers >= 0), got {value!r}")
    return tuple(value)


def _object(raw: Any, path: str, shape: str) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise OutcomeError(path, f"expected {shape}, got {raw!r}")
    return raw


def _batch(raw: Any, path: str) -> BatchRecord:
    raw = _object(raw, path, "{\"id\": int, \"end_offsets\": [...], ...}")
    if "id" not in raw or "end_offsets" not in raw:
        raise OutcomeError(path, "expected {\"id\": int, \"end_offsets\": [...], ...}")
    start = _ints(raw["start_offsets"], f"{path}.start_offsets") if raw.get("start_offsets") is not None else None
    end = _ints(raw["end_offsets"], f"{path}.end_offsets")
    if start is not None and (len(start) != len(end) or any(s > e for s, e in zip(start, end))):
        raise OutcomeError(f"{path}.start_offsets", f"expected one offset per source partition, each <= its end "
                                                    f"offset; got {list(start)} against {list(end)}")
    watermark = raw.get("watermark_ms")
    if watermark is not None and not _is_int(watermark):
        raise OutcomeError(f"{path}.watermark_ms", f"expected an integer or null, got {watermark!r}")
    return BatchRecord(_int(raw["id"], f"{path}.id"), end, start, watermark,
                       _int(raw.get("attempts", 1), f"{path}.attempts", 1),
                       _int(raw.get("task_retries", 0), f"{path}.task_retries"))


def _sink(raw: Any, path: str) -> SinkEntry:
    raw = _object(raw, path, "{\"batch\": int, \"rows\": [...], \"deliveries\": int}")
    if not isinstance(raw.get("rows"), list):
        raise OutcomeError(f"{path}.rows", f"expected a list of rows, got {raw.get('rows')!r}")
    digests = raw.get("delivery_digests", [])
    if not isinstance(digests, list) or any(not isinstance(d, str) for d in digests):
        raise OutcomeError(f"{path}.delivery_digests", f"expected a list of digests, got {digests!r}")
    return SinkEntry(_int(raw.get("batch"), f"{path}.batch"), tuple(raw["rows"]),
                     _int(raw.get("deliveries", 1), f"{path}.deliveries", 1), tuple(digests))


def _recovery(raw: Any, path: str) -> Recovery:
    raw = _object(raw, path, "{\"restart\": int, \"resumed_at\": int, \"rerun_batches\": [...]}")
    rerun = raw.get("rerun_batches", [])
    if not isinstance(rerun, list) or any(not _is_int(b) or b < 0 for b in rerun):
        raise OutcomeError(f"{path}.rerun_batches", f"expected a list of batch ids, got {rerun!r}")
    return Recovery(_int(raw.get("restart"), f"{path}.restart", 1), _int(raw.get("resumed_at", 0),
                                                                          f"{path}.resumed_at"), tuple(rerun))


def _move(raw: Any, path: str) -> StateMove:
    raw = _object(raw, path, "{\"batch\": int, \"partition\": int, \"from\": executor, \"to\": executor}")
    for name in ("from", "to"):
        if not isinstance(raw.get(name), str) or not raw[name]:
            raise OutcomeError(f"{path}.{name}", f"expected an executor id string, got {raw.get(name)!r}")
    unknown = sorted(set(raw) - {"batch", "partition", "from", "to"})
    if unknown:
        raise OutcomeError(f"{path}.{unknown[0]}", "unknown field of a move (batch, partition, from, to)")
    return StateMove(_int(raw.get("batch"), f"{path}.batch"), _int(raw.get("partition"), f"{path}.partition"),
                     raw["from"], raw["to"])


def _number(raw: dict[str, Any], name: str, path: str, default: float = 0.0) -> float:
    value = raw.get(name, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise OutcomeError(f"{path}.{name}", f"expected a number, got {value!r}")
    return value


def _progress(raw: Any, path: str) -> ProgressEvent:
    raw = _object(raw, path, "a StreamingQueryProgress object")
    durations = _object(raw.get("durationMs", {}), f"{path}.durationMs", "an object of durations in ms")
    for key, value in durations.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise OutcomeError(f"{path}.durationMs.{key}", f"expected a number of ms, got {value!r}")
    operators = raw.get("stateOperators", [])
    if not isinstance(operators, list):
        raise OutcomeError(f"{path}.stateOperators", f"expected a list, got {operators!r}")
    ops = []
    for i, op in enumerate(operators):
        where = f"{path}.stateOperators[{i}]"
        op = _object(op, where, "a state operator's progress")
        ops.append(StateOperatorProgress(str(op.get("operatorName", "")), int(_number(op, "numRowsTotal", where)),
                                         int(_number(op, "numRowsUpdated", where)),
                                         int(_number(op, "numRowsRemoved", where)),
                                         _number(op, "commitTimeMs", where),
                                         int(_number(op, "memoryUsedBytes", where))))
    timestamp = raw.get("timestamp_ms")
    return ProgressEvent(_int(raw.get("batchId"), f"{path}.batchId"), int(_number(raw, "numInputRows", path)),
                         _number(raw, "inputRowsPerSecond", path), _number(raw, "processedRowsPerSecond", path),
                         dict(durations), tuple(ops), None if timestamp is None else _number(raw, "timestamp_ms",
                                                                                             path))


def _timing(raw: Any) -> Timing | None:
    if raw is None:
        return None
    raw = _object(raw, "timing", "{\"latency_ms\": {...}, \"wall_s\": s}")
    try:
        latency = LatencySummary.from_dict(raw.get("latency_ms", {"count": 0}))
    except TimingError as exc:
        raise OutcomeError(exc.field, str(exc).split(": ", 1)[1]) from None
    wall = raw.get("wall_s")
    if wall is not None and (isinstance(wall, bool) or not isinstance(wall, (int, float))):
        raise OutcomeError("timing.wall_s", f"expected a number of seconds, got {wall!r}")
    try:
        throughput = Throughput.from_dict(raw["throughput"]) if raw.get("throughput") is not None else None
    except TimingError as exc:
        raise OutcomeError(exc.field, str(exc).split(": ", 1)[1]) from None
    return Timing(latency, wall, throughput)


def _details(raw: Any) -> dict[str, Any]:
    return dict(_object(raw, "details", "an object"))


def _state(raw: Any) -> StateMap:
    shape = "operator -> partition -> version -> [[key, value], ...]"
    raw = _object(raw, "state", shape)
    for sid, parts in raw.items():
        parts = _object(parts, f"state.{sid}", "partition -> version -> pairs")
        for p, versions in parts.items():
            if not str(p).isdigit():
                raise OutcomeError(f"state.{sid}.{p}", "expected a partition number")
            versions = _object(versions, f"state.{sid}.{p}", "version -> pairs")
            for v, pairs in versions.items():
                if not str(v).isdigit() or not isinstance(pairs, list) or \
                        any(not (isinstance(x, list) and len(x) == 2 and isinstance(x[0], str)) for x in pairs):
                    raise OutcomeError(f"state.{sid}.{p}.{v}", "expected a version number -> [[key, value], ...]")
    return raw


# ------------------------------------------------------------------- rows


def canonical_rows(rows: Sequence[Any]) -> list[Any]:
    """Sink rows in the one order every backend reports them in."""
    return sorted(rows, key=repr)


def digest_rows(rows: Sequence[Any]) -> str:
    return hashlib.sha256(json.dumps(canonical_rows(rows)).encode()).hexdigest()[:16]
