"""Scenario types: the JSON of SPEC section 1, as frozen dataclasses.

``Scenario.from_dict`` validates everything and raises ``ScenarioError`` naming
the offending field (as a dotted path, e.g. ``engine.progress.mode``) and what
was expected. ``to_dict`` gives back canonical JSON, so a scenario survives a
round trip byte for byte.

Additions to the SPEC (documented in docs/spec-additions.md):
- operator ``map``: a stateless pass-through, so asynchronous progress tracking
  can be used the way Spark allows it (stateless queries only);
- state store provider ``snapshot``: RocksDB with changelog checkpointing off
  (a full snapshot on every commit);
- ``explore_unsupported``: run a mode combination Spark forbids, to observe why;
- ``faults[].at.restart``: fire only in that incarnation (a fault during recovery).
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
from dataclasses import dataclass, fields
from typing import Any

from .steps import FAULT_KINDS, MAINTENANCE_STEPS, STEP_NAMES, TASK_STEPS

OPERATOR_KINDS = ("map", "aggregate", "window_aggregate", "dedup_within_watermark", "join",
                  "stateful_function", "chain")
STATEFUL_KINDS = tuple(k for k in OPERATOR_KINDS if k not in ("map", "chain"))
AGGS = ("count", "sum")
FUNCTIONS = ("session_sum",)
SOURCE_KINDS = ("generated", "explicit", "rate", "redelivering")
PROVIDERS = ("changelog", "delta", "snapshot")
DEFAULT_BATCH_MS = 1000
MAX_REDELIVERING_MESSAGES = 100_000   # a redelivering source's fetch state lists every id, once per batch
MAX_TIME_MS = 10**12   # event and arrival times are ms from the scenario's start; beyond ~31 years is a mistake


class ScenarioError(ValueError):
    """A scenario is malformed or asks for something unsupported. ``field`` names where."""

    def __init__(self, field_path: str, message: str):
        super().__init__(f"{field_path}: {message}")
        self.field = field_path


# ---------------------------------------------------------------- readers


class _Obj:
    """Typed access to one JSON object, naming the path of every field it reads."""

    def __init__(self, raw: Any, path: str):
        if not isinstance(raw, dict):
            raise ScenarioError(path or "<scenario>", f"expected an object, got {type(raw).__name__}")
        self.raw, self.path = raw, path
        self.used: set[str] = set()

    def at(self, name: str) -> str:
        return f"{self.path}.{name}" if self.path else name

    def get(self, name: str, default: Any = ...) -> Any:
        self.used.add(name)
        if name not in self.raw:
            if default is ...:
                raise ScenarioError(self.at(name), "required field is missing")
            return default
        return self.raw[name]

    def int(self, name: str, default: Any = ..., *, minimum: int | None = 0) -> int:
        value = self.get(name, default)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ScenarioError(self.at(name), f"expected an integer, got {value!r}")
        if minimum is not None and value < minimum:
            raise ScenarioError(self.at(name), f"expected an integer >= {minimum}, got {value}")
        return value

    def num(self, name: str, default: Any = ..., *, minimum: float = 0) -> float:
        value = self.get(name, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ScenarioError(self.at(name), f"expected a number, got {value!r}")
        if not math.isfinite(value):
            raise ScenarioError(self.at(name), f"expected a finite number, got {value!r}")
        if value < minimum:
            raise ScenarioError(self.at(name), f"expected a number >= {minimum}, got {value}")
        return value

    def choice(self, name: str, options: tuple[str, ...], default: Any = ...) -> str:
        value = self.get(name, default)
        if value not in options:
            raise ScenarioError(self.at(name), f"expected one of {', '.join(options)}; got {value!r}")
        return value

    def bool(self, name: str, default: Any = ...) -> bool:
        value = self.get(name, default)
        if not isinstance(value, bool):
            raise ScenarioError(self.at(name), f"expected true or false, got {value!r}")
        return value

    def obj(self, name: str, default: Any = ...) -> "_Obj":
        return _Obj(self.get(name, default), self.at(name))

    def done(self) -> None:
        extra = sorted(set(self.raw) - self.used)
        if extra:
            raise ScenarioError(self.at(extra[0]), "unknown field (check the spelling against SPEC.md)")


def _drop_none(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


# ---------------------------------------------------------------- sources


@dataclass(frozen=True)
class EventTime:
    start_ms: int = 0
    step_ms: int = 10
    max_disorder_ms: int = 0


@dataclass(frozen=True)
class Source:
    kind: str
    partitions: int
    keys: int = 10
    records_per_partition_per_batch: int = 0
    batches: int = 0
    event_time: EventTime = EventTime()
    records: tuple[tuple[int, str, int, int, int], ...] = ()
    batch_ms: int = DEFAULT_BATCH_MS
    rows_per_second: float = 0
    duration_s: float = 0
    broker: "Broker | None" = None   # a redelivering source's broker (kind ``redelivering`` only)

    @staticmethod
    def parse(o: _Obj) -> "Source":
        kind = o.choice("kind", SOURCE_KINDS)
        if kind == "generated":
            et = o.obj("event_time", {})
            src = Source(kind, o.int("partitions", minimum=1), o.int("keys", minimum=1),
                         o.int("records_per_partition_per_batch", minimum=1), o.int("batches", minimum=1),
                         EventTime(et.int("start_ms", 0), et.int("step_ms", 10), et.int("max_disorder_ms", 0)))
            et.done()
        elif kind == "explicit":
            rows = o.get("records")
            if not isinstance(rows, list) or not rows:
                raise ScenarioError(o.at("records"), "expected a non-empty list of "
                                    "[partition, key, value, event_time_ms, arrival_ms]")
            parsed = tuple(_explicit_record(r, f"{o.at('records')}[{i}]") for i, r in enumerate(rows))
            partitions = o.int("partitions", max(r[0] for r in parsed) + 1, minimum=1)
            for i, r in enumerate(parsed):
                if r[0] >= partitions:
                    raise ScenarioError(f"{o.at('records')}[{i}]", f"partition {r[0]} >= partitions {partitions}")
            src = Source(kind, partitions, records=parsed, batch_ms=o.int("batch_ms", DEFAULT_BATCH_MS, minimum=1))
        elif kind == "redelivering":
            src = Source(kind, 1, o.int("keys", 10, minimum=1), batch_ms=o.int("batch_ms", DEFAULT_BATCH_MS, minimum=1),
                         broker=Broker.parse(o))
        else:
            src = Source(kind, o.int("partitions", minimum=1), o.int("keys", 100, minimum=1),
                         rows_per_second=o.num("rows_per_second", minimum=1e-9),
                         duration_s=o.num("duration_s", minimum=1e-9),
                         batch_ms=o.int("batch_ms", DEFAULT_BATCH_MS, minimum=1))
        o.done()
        return src

    def to_dict(self) -> dict[str, Any]:
        if self.kind == "generated":
            et = self.event_time
            return {"kind": self.kind, "partitions": self.partitions, "keys": self.keys,
                    "records_per_partition_per_batch": self.records_per_partition_per_batch,
                    "batches": self.batches,
                    "event_time": {"start_ms": et.start_ms, "step_ms": et.step_ms,
                                   "max_disorder_ms": et.max_disorder_ms}}
        if self.kind == "explicit":
            return {"kind": self.kind, "partitions": self.partitions, "batch_ms": self.batch_ms,
                    "records": [list(r) for r in self.records]}
        if self.broker is not None:
            return {"kind": self.kind, "keys": self.keys, "batch_ms": self.batch_ms, **self.broker.to_dict()}
        return {"kind": self.kind, "partitions": self.partitions, "keys": self.keys,
                "rows_per_second": self.rows_per_second, "duration_s": self.duration_s,
                "batch_ms": self.batch_ms}


@dataclass(frozen=True)
class Broker:
    """A redelivering source's broker (Pub/Sub-like, seeded by the scenario's seed; ``redelivery.py``).

    ``messages`` are published one every ``interval_ms``; each is first delivered up to ``reorder_ms`` late
    (so out of order); with probability ``redelivery_rate`` it is delivered again ``redeliver_after_ms``
    after its first delivery (after its batch was committed and ACKed, with the defaults); with probability
    ``ack_coverage`` that redelivery goes to the other subscriber, whose ACK covers it.
    """

    messages: int
    interval_ms: int = 10
    reorder_ms: int = 0
    redelivery_rate: float = 0.0
    redeliver_after_ms: int = 2000
    ack_coverage: float = 0.0

    @staticmethod
    def parse(o: _Obj) -> "Broker":
        messages = o.int("messages", minimum=1)
        if messages > MAX_REDELIVERING_MESSAGES:
            raise ScenarioError(o.at("messages"), f"at most {MAX_REDELIVERING_MESSAGES} messages: the fetch state "
                                f"holds every message id and is written once per batch; got {messages}")
        broker = Broker(messages, o.int("interval_ms", 10, minimum=1),
                        o.int("reorder_ms", 0), _probability(o, "redelivery_rate", "a redelivery rate"),
                        o.int("redeliver_after_ms", 2000, minimum=1),
                        _probability(o, "ack_coverage", "an ACK coverage"))
        for name in ("interval_ms", "reorder_ms", "redeliver_after_ms"):
            if getattr(broker, name) * max(broker.messages, 1) > MAX_TIME_MS:
                raise ScenarioError(o.at(name), f"{name} x messages is beyond {MAX_TIME_MS} ms (about 31 years)")
        return broker

    def to_dict(self) -> dict[str, Any]:
        return {"messages": self.messages, "interval_ms": self.interval_ms, "reorder_ms": self.reorder_ms,
                "redelivery_rate": self.redelivery_rate, "redeliver_after_ms": self.redeliver_after_ms,
                "ack_coverage": self.ack_coverage}


def _probability(o: _Obj, name: str, what: str) -> float:
    value = o.num(name, 0.0, minimum=-math.inf)
    if not 0 <= value <= 1:
        raise ScenarioError(o.at(name), f"{what} outside [0, 1]: {value!r}")
    return float(value)


def _explicit_record(raw: Any, path: str) -> tuple[int, str, int, int, int]:
    if not (isinstance(raw, list) and len(raw) == 5):
        raise ScenarioError(path, "expected [partition, key, value, event_time_ms, arrival_ms]")
    p, k, v, t, a = raw
    if not (_plain_int(p) and p >= 0 and isinstance(k, str) and _plain_int(v)
            and _plain_int(t) and _plain_int(a) and a >= 0):
        raise ScenarioError(path, "expected [int partition >= 0, str key, int value, int event_time_ms, "
                                  f"int arrival_ms >= 0]; got {raw!r}")
    check_key(k, f"{path}[1]")
    for value, what in ((t, "event_time_ms"), (a, "arrival_ms")):
        if abs(value) > MAX_TIME_MS:
            raise ScenarioError(path, f"{what} {value} is beyond {MAX_TIME_MS} ms (about 31 years): "
                                      "times are milliseconds from the scenario's start")
    return (p, k, v, t, a)


def _plain_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_key(key: str, path: str) -> None:
    """Keys are routed by the CRC-32 of their UTF-8 bytes, so they must be valid Unicode text."""
    try:
        key.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ScenarioError(path, f"key {key!r} is not valid Unicode text ({exc.reason} at {exc.start})") from None


# -------------------------------------------------------------- operators


@dataclass(frozen=True)
class OperatorSpec:
    kind: str
    agg: str | None = None
    window_ms: int | None = None
    watermark_delay_ms: int | None = None
    time_bound_ms: int | None = None
    function: str | None = None
    timeout_ms: int | None = None
    operators: tuple["OperatorSpec", ...] = ()

    @property
    def stateful(self) -> bool:
        if self.kind == "chain":
            return any(op.stateful for op in self.operators)
        return self.kind in STATEFUL_KINDS

    def flatten(self) -> tuple["OperatorSpec", ...]:
        """The operators in pipeline order (a chain is its members)."""
        return self.operators if self.kind == "chain" else (self,)

    @staticmethod
    def parse(o: _Obj, *, in_chain: bool = False) -> "OperatorSpec":
        kind = o.choice("kind", OPERATOR_KINDS)
        if kind == "map":
            spec = OperatorSpec(kind)
        elif kind == "aggregate":
            spec = OperatorSpec(kind, agg=o.choice("agg", AGGS, "count"))
        elif kind == "window_aggregate":
            spec = OperatorSpec(kind, agg=o.choice("agg", AGGS, "count"), window_ms=o.int("window_ms", minimum=1),
                                watermark_delay_ms=o.int("watermark_delay_ms"))
        elif kind == "dedup_within_watermark":
            spec = OperatorSpec(kind, watermark_delay_ms=o.int("watermark_delay_ms"))
        elif kind == "join":
            if in_chain:
                raise ScenarioError(o.at("kind"), "a join takes two sources, so it cannot sit inside a chain")
            spec = OperatorSpec(kind, time_bound_ms=o.int("time_bound_ms"),
                                watermark_delay_ms=o.int("watermark_delay_ms"))
        elif kind == "stateful_function":
            spec = OperatorSpec(kind, function=o.choice("function", FUNCTIONS, "session_sum"),
                                timeout_ms=o.int("timeout_ms", minimum=1),
                                watermark_delay_ms=o.int("watermark_delay_ms"))
        else:
            if in_chain:
                raise ScenarioError(o.at("kind"), "chains do not nest")
            members = o.get("operators")
            if not isinstance(members, list) or len(members) < 2:
                raise ScenarioError(o.at("operators"), "a chain needs a list of at least two operators")
            spec = OperatorSpec(kind, operators=tuple(
                OperatorSpec.parse(_Obj(m, f"{o.at('operators')}[{i}]"), in_chain=True)
                for i, m in enumerate(members)))
        o.done()
        return spec

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "operators"}
        if self.kind == "chain":
            out["operators"] = [op.to_dict() for op in self.operators]
        return _drop_none(out)


# ----------------------------------------------------------------- engine


@dataclass(frozen=True)
class EngineConfig:
    progress_mode: str = "sync"
    checkpoint_interval_ms: int = 1000
    log_purge_mode: str = "async"   # Spark's default since 3.4 (spark.sql.streaming.asyncLogPurge.enabled)
    min_batches_to_retain: int = 100
    provider: str = "changelog"
    min_deltas_for_snapshot: int = 10
    maintenance_interval_ms: int = 60000
    state_checkpoint: str = "sync"
    pipelining: bool = False
    trigger_interval_ms: int = 0
    # How many batches may be planned and not yet committed under pipelining: batch b is planned only
    # once batch b - pipeline_depth has committed. An extension of SPEC section 2, which leaves the
    # depth open; 2 (the default) is the protocol the SPEC's examples assume.
    pipeline_depth: int = 2
    # Where timed backends cut explicit and rate sources (SPEC section 1, triggers): "trigger" plans each
    # batch by Spark's trigger on the backend's own clock, with everything that has arrived by then;
    # "fixed" cuts every batch_ms of arrival time on every backend, for deterministic differential tests.
    # Generated sources always have fixed-size batches; the untimed reference always cuts on its clock.
    batch_cuts: str = "trigger"
    # Commit a partition's state stores (a join's two sides) concurrently, as Lightspeed does, instead of
    # one after the other within the task, as Spark OSS does. Nothing to do for a one-store query.
    parallel_store_commit: bool = False

    @staticmethod
    def parse(o: _Obj) -> "EngineConfig":
        progress, purge, store = o.obj("progress", {}), o.obj("log_purge", {}), o.obj("state_store", {})
        cfg = EngineConfig(
            progress.choice("mode", ("sync", "async"), "sync"), progress.int("checkpoint_interval_ms", 1000),
            purge.choice("mode", ("inline", "async"), "async"), purge.int("min_batches_to_retain", 100, minimum=1),
            store.choice("provider", PROVIDERS, "changelog"), store.int("min_deltas_for_snapshot", 10, minimum=1),
            store.int("maintenance_interval_ms", 60000, minimum=1),
            o.choice("state_checkpoint", ("sync", "async"), "sync"), o.bool("pipelining", False),
            o.int("trigger_interval_ms", 0), o.int("pipeline_depth", 2, minimum=2),
            o.choice("batch_cuts", ("trigger", "fixed"), "trigger"), o.bool("parallel_store_commit", False))
        for part in (progress, purge, store, o):
            part.done()
        if cfg.pipeline_depth != 2 and not cfg.pipelining:
            raise ScenarioError(o.at("pipeline_depth"), "a pipeline depth needs \"pipelining\": true")
        return cfg

    def to_dict(self) -> dict[str, Any]:
        return {"progress": {"mode": self.progress_mode, "checkpoint_interval_ms": self.checkpoint_interval_ms},
                "log_purge": {"mode": self.log_purge_mode, "min_batches_to_retain": self.min_batches_to_retain},
                "state_store": {"provider": self.provider, "min_deltas_for_snapshot": self.min_deltas_for_snapshot,
                                "maintenance_interval_ms": self.maintenance_interval_ms},
                "state_checkpoint": self.state_checkpoint, "pipelining": self.pipelining,
                "trigger_interval_ms": self.trigger_interval_ms,
                **({"pipeline_depth": self.pipeline_depth} if self.pipeline_depth != 2 else {}),
                **({"batch_cuts": self.batch_cuts} if self.batch_cuts != "trigger" else {}),
                **({"parallel_store_commit": True} if self.parallel_store_commit else {})}


# ----------------------------------------------------------------- faults


@dataclass(frozen=True)
class FaultAt:
    step: str | None = None
    batch: int | None = None
    partition: int | None = None
    when: str = "before"
    time_ms: int | None = None
    restart: int | None = None  # fire only in this incarnation (0 = before any restart)

    def to_dict(self) -> dict[str, Any]:
        return _drop_none({"step": self.step, "batch": self.batch, "partition": self.partition,
                           "when": self.when if self.step else None, "time_ms": self.time_ms,
                           "restart": self.restart})


@dataclass(frozen=True)
class Fault:
    at: FaultAt
    kind: str
    ms: int | None = None
    path: str | None = None

    @staticmethod
    def parse(o: _Obj) -> "Fault":
        at = o.obj("at")
        step = at.get("step", None)
        if step is not None and step not in STEP_NAMES:
            raise ScenarioError(at.at("step"), f"expected one of {', '.join(STEP_NAMES)}; got {step!r}")
        fa = FaultAt(step, at.int("batch", None) if "batch" in at.raw else None,
                     at.int("partition", None) if "partition" in at.raw else None,
                     at.choice("when", ("before", "after"), "before"),
                     at.int("time_ms", None) if "time_ms" in at.raw else None,
                     at.int("restart", None) if "restart" in at.raw else None)
        at.done()
        if fa.step is None and fa.time_ms is None:
            raise ScenarioError(at.path, "a fault needs at.step (with at.batch) or at.time_ms")
        if fa.step is not None and fa.batch is None:
            raise ScenarioError(at.at("batch"), "a fault at a step needs the batch it happens in")
        kind = o.choice("kind", FAULT_KINDS)
        fault = Fault(fa, kind, o.int("ms", None) if "ms" in o.raw else None, o.get("path", None))
        if kind in ("corrupt_file", "delete_file") and not isinstance(fault.path, str):
            raise ScenarioError(o.at("path"), f"a {kind} fault needs the checkpoint-relative path of the file")
        if kind in ("storage_latency", "clock_skew") and fault.ms is None:
            raise ScenarioError(o.at("ms"), f"a {kind} fault needs ms")
        if kind in ("task_failure", "executor_loss", "zombie_write") and fa.step is not None \
                and fa.step not in TASK_STEPS:
            raise ScenarioError(at.at("step"), f"a {kind} happens inside a task; expected one of "
                                               f"{', '.join(TASK_STEPS)}")
        o.done()
        return fault

    @staticmethod
    def from_dict(raw: Any, path: str = "fault") -> "Fault":
        return Fault.parse(_Obj(raw, path))

    def to_dict(self) -> dict[str, Any]:
        return _drop_none({"at": self.at.to_dict(), "kind": self.kind, "ms": self.ms, "path": self.path})


# ------------------------------------------------------- executor events

EVENT_KINDS = ("executor_join", "executor_leave")
DEFAULT_EXECUTORS = ("0", "1")   # the reference engine's two executors: state partition p on executor p % 2


@dataclass(frozen=True)
class ExecutorEvent:
    """An executor joins or leaves the cluster before batch ``before_batch`` is planned (state rebalancing).

    Not a fault: nothing fails. At the batch's planning the state placement is recomputed
    (``placement.py``) and each moved partition's next task loads its state from the checkpoint.
    """

    kind: str
    executor: str
    before_batch: int

    @staticmethod
    def parse(o: _Obj) -> "ExecutorEvent":
        kind = o.choice("kind", EVENT_KINDS)
        executor = o.get("executor")
        if not isinstance(executor, str) or not executor:
            raise ScenarioError(o.at("executor"), f"expected a non-empty executor id string, got {executor!r}")
        event = ExecutorEvent(kind, executor, o.int("before_batch", minimum=1))
        o.done()
        return event

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "executor": self.executor, "before_batch": self.before_batch}


def _parse_executors(o: _Obj) -> tuple[str, ...]:
    raw = o.get("executors", list(DEFAULT_EXECUTORS))
    if not isinstance(raw, list) or not raw:
        raise ScenarioError("executors", "expected a non-empty list of executor id strings")
    for i, e in enumerate(raw):
        if not isinstance(e, str) or not e:
            raise ScenarioError(f"executors[{i}]", f"expected a non-empty executor id string, got {e!r}")
        if e in raw[:i]:
            raise ScenarioError(f"executors[{i}]", f"executor {e!r} is listed twice")
    return tuple(raw)


def _parse_events(o: _Obj) -> tuple[ExecutorEvent, ...]:
    raw = o.get("events", [])
    if not isinstance(raw, list):
        raise ScenarioError("events", "expected a list of executor_join / executor_leave events")
    return tuple(ExecutorEvent.parse(_Obj(e, f"events[{i}]")) for i, e in enumerate(raw))


# --------------------------------------------------------------- scenario


@dataclass(frozen=True)
class Scenario:
    name: str
    seed: int
    sources: dict[str, Source]  # {"main": ...} or {"left": ..., "right": ...}
    operator: OperatorSpec
    state_partitions: int
    sink_mode: str
    engine: EngineConfig
    faults: tuple[Fault, ...] = ()
    explore_unsupported: bool = False
    executors: tuple[str, ...] = DEFAULT_EXECUTORS   # the executors present at the start
    events: tuple[ExecutorEvent, ...] = ()           # executors joining and leaving, in batch order

    @staticmethod
    def from_dict(raw: Any) -> "Scenario":
        o = _Obj(raw, "")
        name = o.get("name")
        if not isinstance(name, str) or not name:
            raise ScenarioError("name", "expected a non-empty string")
        seed = o.int("seed", minimum=0)
        query = o.obj("query")
        operator = OperatorSpec.parse(query.obj("operator"))
        state_partitions = query.int("state_partitions", 4, minimum=1)
        query.done()
        sources = _parse_sources(o, operator)
        sink = o.obj("sink", {})
        sink_mode = sink.choice("mode", ("exactly_once", "at_least_once"), "exactly_once")
        sink.done()
        engine = EngineConfig.parse(o.obj("engine", {}))
        raw_faults = o.get("faults", [])
        if not isinstance(raw_faults, list):
            raise ScenarioError("faults", "expected a list")
        faults = tuple(Fault.parse(_Obj(f, f"faults[{i}]")) for i, f in enumerate(raw_faults))
        explore = o.bool("explore_unsupported", False)
        executors, events = _parse_executors(o), _parse_events(o)
        o.done()
        scenario = Scenario(name, seed, sources, operator, state_partitions, sink_mode, engine, faults, explore,
                            executors, events)
        scenario.check_supported()
        scenario.check_faults()
        scenario.check_events()
        return scenario

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "seed": self.seed}
        if set(self.sources) == {"main"}:
            out["source"] = self.sources["main"].to_dict()
        else:
            out["sources"] = {side: src.to_dict() for side, src in sorted(self.sources.items())}
        out["query"] = {"operator": self.operator.to_dict(), "state_partitions": self.state_partitions}
        out["sink"] = {"mode": self.sink_mode}
        out["engine"] = self.engine.to_dict()
        out["faults"] = [f.to_dict() for f in self.faults]
        if self.explore_unsupported:
            out["explore_unsupported"] = True
        if self.executors != DEFAULT_EXECUTORS or self.events:
            out["executors"] = list(self.executors)
        if self.events:
            out["events"] = [e.to_dict() for e in self.events]
        return out

    def to_json(self) -> str:
        return self._json

    @functools.cached_property
    def _json(self) -> str:
        # a scenario is a value (frozen; its sources never change after parsing), so its JSON is computed
        # once: the judge keys its failure-free runs by it, and the explorer judges thousands of outcomes
        return json.dumps(self.to_dict(), indent=2, sort_keys=False) + "\n"

    @functools.cached_property
    def sources_key(self) -> str:
        """What makes two scenarios' input the same records: the seed and the sources (``SourceData.of``)."""
        return json.dumps([self.seed, {k: v.to_dict() for k, v in self.sources.items()}], sort_keys=True)

    def with_changes(self, **changes: Any) -> "Scenario":
        from dataclasses import replace
        return replace(self, **changes)

    def query_digest(self) -> str:
        """What makes two runs the same query: the input (sources and seed), operator, partitions, sink.

        Not the modes or the faults: a checkpoint may be resumed under other modes, as Spark allows.
        """
        return self._query_digest

    @functools.cached_property
    def _query_digest(self) -> str:
        d = self.to_dict()
        core = {k: d[k] for k in ("seed", "source", "sources", "query", "sink") if k in d}
        return hashlib.sha256(json.dumps(core, sort_keys=True).encode()).hexdigest()[:16]

    # ------------------------------------------------------------ rules
    def unsupported_reasons(self) -> list[tuple[str, str]]:
        """Mode combinations Spark refuses, each with the field and the reason."""
        reasons = []
        e = self.engine
        if e.progress_mode == "async" and self.operator.stateful:
            reasons.append(("engine.progress.mode",
                            "asynchronous progress tracking is refused for stateful queries: after a restart "
                            "the unpersisted batches are folded into one with new boundaries, but state "
                            "versions of the old boundaries survive, so state would be counted twice "
                            "(Spark: AsyncProgressTrackingMicroBatchExecution refuses stateful operators)"))
        if e.progress_mode == "async" and self.sink_mode == "exactly_once":
            reasons.append(("sink.mode",
                            "asynchronous progress tracking gives at-least-once output: re-run batches get "
                            "new ids and boundaries, so an exactly-once commit by batch id cannot dedupe them; "
                            "use sink.mode = at_least_once"))
        if e.state_checkpoint == "async" and e.provider != "changelog":
            reasons.append(("engine.state_checkpoint",
                            "asynchronous state checkpointing needs the RocksDB provider with changelog "
                            "checkpointing (state_store.provider = changelog)"))
        return reasons

    def check_supported(self) -> None:
        reasons = self.unsupported_reasons()
        if reasons and not self.explore_unsupported:
            path, why = reasons[0]
            raise ScenarioError(path, f"unsupported combination: {why}. "
                                      "Set \"explore_unsupported\": true to run it anyway.")

    def check_faults(self) -> None:
        """Refuse a fault that could never fire, or would fire where it means nothing (SPEC section 2)."""
        seen: dict[str, int] = {}
        restarting = sum(may_end_incarnation(f) for f in self.faults)
        for i, fault in enumerate(self.faults):
            where = f"faults[{i}]"
            at = fault.at
            text = json.dumps(fault.to_dict(), sort_keys=True)
            if text in seen:
                raise ScenarioError(where, f"repeats faults[{seen[text]}]; each fault fires once, so give it once")
            seen[text] = i
            if at.partition is not None:
                if at.partition >= self.state_partitions:
                    raise ScenarioError(f"{where}.at.partition",
                                        f"partition {at.partition} >= state_partitions {self.state_partitions}")
                if at.step is not None and at.step not in TASK_STEPS + MAINTENANCE_STEPS:
                    raise ScenarioError(f"{where}.at.partition", f"{at.step} is a driver step: it runs once per "
                                                                 "batch, on no partition")
            last = self.deterministic_batches()
            if at.batch is not None and last is not None and at.batch >= last:
                raise ScenarioError(f"{where}.at.batch", f"batch {at.batch} never runs: the input has {last} "
                                                         f"batches (0..{last - 1})")
            others = restarting - may_end_incarnation(fault)
            if at.restart is not None and at.restart > others:
                raise ScenarioError(f"{where}.at.restart",
                                    f"restart {at.restart} never comes: the other faults can end at most {others} "
                                    "incarnation(s) (a driver_crash or a storage_write_error ends one; so can a "
                                    "fault at an async state commit or an executor_loss)")
            if fault.kind in ("corrupt_file", "delete_file"):
                _check_checkpoint_path(fault.path or "", f"{where}.path")

    def check_events(self) -> None:
        """Refuse an executor event that cannot happen: out of batch order or range, a join of an executor
        already present, a leave of one that is absent or of the last one."""
        present = list(self.executors)
        last = self.deterministic_batches()
        for i, event in enumerate(self.events):
            where = f"events[{i}]"
            if i and event.before_batch < self.events[i - 1].before_batch:
                raise ScenarioError(f"{where}.before_batch", f"batch {event.before_batch} comes before "
                                    f"events[{i - 1}]'s batch {self.events[i - 1].before_batch}: list events in "
                                    "batch order")
            if last is not None and event.before_batch >= last:
                raise ScenarioError(f"{where}.before_batch", f"batch {event.before_batch} never runs: the input "
                                                             f"has {last} batches (0..{last - 1})")
            if event.kind == "executor_join" and event.executor in present:
                raise ScenarioError(f"{where}.executor", f"executor {event.executor!r} cannot join before batch "
                                    f"{event.before_batch}: it is already present (executors then: {present})")
            if event.kind == "executor_leave" and event.executor not in present:
                raise ScenarioError(f"{where}.executor", f"executor {event.executor!r} cannot leave before batch "
                                    f"{event.before_batch}: it is not present (executors then: {present})")
            if event.kind == "executor_leave" and len(present) == 1:
                raise ScenarioError(f"{where}.executor", f"executor {event.executor!r} cannot leave before batch "
                                    f"{event.before_batch}: it is the last executor, and the state partitions "
                                    "need one")
            if event.kind == "executor_join":
                present.append(event.executor)
            else:
                present.remove(event.executor)

    def deterministic_batches(self) -> int | None:
        """How many batches every backend runs, when the source fixes it (generated sources); else None."""
        counts = {src.batches for src in self.sources.values() if src.kind == "generated"}
        return max(counts) if counts and len(counts) == len(self.sources) else None

    @property
    def store_ids(self) -> tuple[str, ...]:
        """Every state store of the query, as the ``<op>`` of the checkpoint layout."""
        out = []
        for index, op in enumerate(self.operator.flatten()):
            if op.kind == "join":
                out += [f"{index}.left", f"{index}.right"]
            elif op.stateful:
                out.append(str(index))
        return tuple(out)


def _parse_sources(o: _Obj, operator: OperatorSpec) -> dict[str, Source]:
    if operator.kind == "join":
        if "source" in o.raw:
            raise ScenarioError("source", "a join reads two sources: give \"sources\": {\"left\": ..., \"right\": ...}")
        both = o.obj("sources")
        out = {side: Source.parse(both.obj(side)) for side in ("left", "right")}
        both.done()
        if out["left"].kind != out["right"].kind:
            raise ScenarioError("sources.right.kind", "both sides of a join must be the same source kind")
        return out
    if "sources" in o.raw:
        raise ScenarioError("sources", "only a join reads two sources; give \"source\"")
    return {"main": Source.parse(o.obj("source"))}


def may_end_incarnation(fault: Fault) -> bool:
    """Whether a fault can end an incarnation, so that a later one exists."""
    if fault.kind in ("driver_crash", "storage_write_error", "executor_loss"):
        return True
    return fault.kind in ("task_failure", "zombie_write") and fault.at.step in ("changelog_write", "state_commit")


def _check_checkpoint_path(path: str, field_path: str) -> None:
    parts = path.split("/")
    if not path or path.startswith("/") or "\\" in path or any(p in ("", ".", "..") for p in parts):
        raise ScenarioError(field_path, f"{path!r} must be a path relative to the checkpoint that stays inside it, "
                                        "e.g. \"commits/2\" or \"state/0/1/3_r0b2p1a0.changelog\"")


def load_scenario(path: str) -> Scenario:
    """Read and validate a scenario file; errors name the file and the field."""
    try:
        with open(path, encoding="utf-8") as fh:
            raw = json.load(fh)
    except FileNotFoundError:
        raise ScenarioError("<file>", f"{path}: no such scenario file") from None
    except IsADirectoryError:
        raise ScenarioError("<file>", f"{path}: is a directory, expected a scenario JSON file") from None
    except UnicodeDecodeError as exc:
        raise ScenarioError("<file>", f"{path}: not UTF-8 text (byte {exc.start}): expected a scenario JSON "
                                      "file") from None
    except OSError as exc:
        raise ScenarioError("<file>", f"{path}: cannot be read: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise ScenarioError("<file>", f"{path}: not valid JSON: {exc}") from None
    try:
        return Scenario.from_dict(raw)
    except ScenarioError as exc:
        error = ScenarioError(exc.field, str(exc).split(": ", 1)[1])
        error.args = (f"{path}: {exc}",)
        raise error from None
