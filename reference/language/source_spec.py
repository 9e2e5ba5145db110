"""A scenario's sources (spec section 1, ``source.kind``): what data arrives, and when.

``generated`` (seeded, fixed-size batches), ``explicit`` (records listed with
their arrival times), ``rate`` (rows per second) and ``redelivering`` (a
Pub/Sub-like broker that delivers out of order and again, ``redelivery.py``).
Records are routed by the CRC-32 of their key, so keys must be valid text.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from .field_reader import FieldReader, ScenarioError

SOURCE_KINDS = ("generated", "explicit", "rate", "redelivering")
DEFAULT_BATCH_MS = 1000
MAX_REDELIVERING_MESSAGES = 100_000   # a redelivering source's fetch state lists every id, once per batch
MAX_TIME_MS = 10**12   # event and arrival times are ms from the scenario's start; beyond ~31 years is a mistake


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
    def parse(o: FieldReader) -> "Source":
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
    def parse(o: FieldReader) -> "Broker":
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


def _probability(o: FieldReader, name: str, what: str) -> float:
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


def source_records(src: Source) -> int:
    """Records a source holds (counted, never allocated)."""
    if src.kind == "generated":
        return src.partitions * src.records_per_partition_per_batch * src.batches
    if src.kind == "explicit":
        return len(src.records)
    if src.broker is not None:
        return src.broker.messages
    per_partition = int(src.rows_per_second * src.duration_s) // src.partitions
    return per_partition * src.partitions


def source_batches(src: Source) -> int:
    """Batches an untimed backend cuts (timed backends cut by their clock, usually no more)."""
    if src.kind == "generated":
        return src.batches
    if src.kind == "explicit":
        last_ms = max((r[4] for r in src.records), default=0)
        return last_ms // src.batch_ms + 1
    if src.broker is not None:   # the last first delivery: the last publish, at most reorder_ms late
        return ((src.broker.messages - 1) * src.broker.interval_ms + src.broker.reorder_ms) // src.batch_ms + 1
    return int(src.duration_s * 1000) // src.batch_ms + 1
