"""Read Spark's committed state back with the state data source, in the reference's encoding.

``spark.read.format("statestore")`` with ``path`` (the checkpoint), ``batchId``
(state version ``batchId + 1``), ``operatorId`` (0: the query has one stateful
operator) and, for a join, ``joinSide`` (left / right: the data source joins the
side's two internal stores back into ``(key, row)`` pairs) gives every key and
value of one version. This module turns them into the pairs
``reference/language/operators.py`` keeps:

====================== ============================== ===================================
operator               Spark state (key -> value)      reference state (key -> value)
====================== ============================== ===================================
aggregate              key -> count | sum              key -> count | sum
window_aggregate       (key, window) -> count | sum    "key|window_start_ms" -> count | sum
dedup_within_watermark key -> expiresAtMicros          key -> event_time_ms + delay
dedup                  key -> a null (``__dummy__``)   key -> True
dedup, watermarked     (key, ts) -> a null             "key|event_time_ms" -> True
join (per side)        key -> each buffered row         key -> sorted [[event_time_ms, value]]
stateful_function      key -> ((total, cnt, last),        key -> [total, count, last_event_ms,
                       timeoutTimestamp)                      timeout_at_ms]
====================== ============================== ===================================

Partitions: Spark routes a key to state partition ``Murmur3(key) mod n``; the
reference routes with ``crc32(key) mod n`` (``reference.protocol.sources.partition_of``).
The two assign different keys to a partition, but both are functions of the key
alone, so the state of one version is the same set of pairs either way; only the
grouping into partitions differs. The adapter therefore re-buckets every pair
read from Spark by the reference's partition function of the record key it was
routed by (for a window, the key without its window start) before it fills the
outcome, and the state_equivalence oracle compares partition by partition as for
any other backend. The Spark partition a pair came from is dropped; a fault's
``at.partition`` names Spark's own partition (see ``spark_impl.native``).
"""

from __future__ import annotations

from typing import Any, Sequence

from reference.language.operators import DEDUP_SEEN
from reference.protocol.query import pipeline_store_ids
from reference.language.scenario import Scenario
from reference.protocol.sources import partition_of

from .support import describe_failure


def _stores(scenario: Scenario) -> list[tuple[str, str | None]]:
    """(store id of the outcome, joinSide option or None) for every store of the query."""
    out = []
    for sid in pipeline_store_ids(scenario.operator.flatten()):
        side = sid.split(".", 1)[1] if "." in sid else None
        out.append((sid, side))
    return out


def _frame(spark: Any, checkpoint: str, scenario: Scenario, sid: str, version: int, side: str | None) -> Any:
    """One store at one version as rows (sid, version, route, skey, a, b, c): the routing key, the
    reference's state key, and up to three numbers of the reference's value."""
    from pyspark.sql import functions as F
    reader = (spark.read.format("statestore").option("path", checkpoint).option("batchId", version - 1)
              .option("operatorId", 0))
    if side is not None:
        reader = reader.option("joinSide", side)
    df = reader.load()
    kind = scenario.operator.kind
    key = F.col("key").getField(df.schema["key"].dataType.fieldNames()[0])
    value_fields = df.schema["value"].dataType.fieldNames()
    first = F.col("value").getField(value_fields[0])
    none = F.lit(None).cast("long")
    if kind == "aggregate":
        numbers = [first, none, none, none]
        skey = key
    elif kind == "window_aggregate":
        skey = F.concat(key, F.lit("|"), F.unix_millis(F.col("key.window.start")).cast("string"))
        numbers = [first, none, none, none]
    elif kind == "dedup_within_watermark":
        skey, numbers = key, [F.floor(F.col("value.expiresAtMicros") / 1000), none, none, none]
    elif kind == "dedup":   # Spark's value is a dummy null, read as the reference's marker (``_value``)
        watermarked = scenario.operator.watermark_delay_ms is not None
        skey = F.concat(key, F.lit("|"), F.unix_millis(F.col("key.ts")).cast("string")) if watermarked else key
        numbers = [none, none, none, none]
    elif kind == "join":
        t, v = ("lt", "lv") if side == "left" else ("rt", "rv")
        skey, numbers = key, [F.unix_millis(F.col("value").getField(t)), F.col("value").getField(v), none, none]
    elif kind == "stateful_function":
        # the group state and, beside it, the event-time timeout Spark set (the reference keeps it as the
        # session's fourth element)
        group = F.col("value.groupState") if "groupState" in value_fields else F.col("value")
        timeout = F.col("value.timeoutTimestamp") if "timeoutTimestamp" in value_fields else none
        skey, numbers = key, [group.getField("total"), group.getField("cnt"), group.getField("last"), timeout]
    else:
        raise ValueError(f"operator {kind!r} keeps no state the adapter can read")
    return df.select(F.lit(sid).alias("sid"), F.lit(version).alias("version"), key.alias("route"),
                     skey.alias("skey"), *[n.cast("long").alias(c) for n, c in zip(numbers, "abcd")])


def _value(kind: str, row: Any) -> Any:
    if kind == "dedup":
        return DEDUP_SEEN
    if kind in ("aggregate", "window_aggregate", "dedup_within_watermark"):
        return int(row["a"])
    if kind == "join":
        return [int(row["a"]), int(row["b"])]
    return [int(row["a"]), int(row["b"]), int(row["c"]), int(row["d"])]


def read_states(spark: Any, checkpoint: str, scenario: Scenario,
                versions: Sequence[int]) -> tuple[dict[str, dict[str, dict[str, list[list[Any]]]]], list[str]]:
    """Every store's pairs at each of ``versions``, re-bucketed by the reference's partition function.

    All stores and versions are read in one Spark job (a union of one state
    data source scan each); if that fails, each is read alone, so the error
    names the version that would not load.
    """
    from functools import reduce
    parts, kind = scenario.state_partitions, scenario.operator.kind
    wanted = [(sid, side, v) for sid, side in _stores(scenario) for v in versions]
    errors: list[str] = []
    try:
        frames = [_frame(spark, checkpoint, scenario, sid, v, side) for sid, side, v in wanted]
        rows = reduce(lambda x, y: x.unionAll(y), frames).collect() if frames else []
        loaded = {(sid, v) for sid, _side, v in wanted}
    except Exception:  # find the version that would not load
        rows, loaded = [], set()
        for sid, side, v in wanted:
            try:
                rows.extend(_frame(spark, checkpoint, scenario, sid, v, side).collect())
                loaded.add((sid, v))
            except Exception as exc:
                errors.append(f"store {sid} version {v} (batchId {v - 1}) would not load: {describe_failure(exc)}")
    buckets: dict[tuple[str, int], list[dict[str, Any]]] = {
        key: [{} for _ in range(parts)] for key in loaded}
    for row in rows:
        bucket = buckets[(row["sid"], int(row["version"]))][partition_of(row["route"], parts)]
        value = _value(kind, row)
        if kind == "join":
            bucket.setdefault(row["skey"], []).append(value)
        elif row["skey"] in bucket:
            errors.append(f"store {row['sid']} version {row['version']}: key {row['skey']!r} appears twice")
        else:
            bucket[row["skey"]] = value
    state: dict[str, dict[str, dict[str, list[list[Any]]]]] = {
        sid: {str(p): {} for p in range(parts)} for sid, _side in _stores(scenario)}
    for (sid, v), per_partition in sorted(buckets.items()):
        for p, bucket in enumerate(per_partition):
            if kind == "join":
                bucket = {k: sorted(pairs) for k, pairs in bucket.items()}
            state[sid][str(p)][str(v)] = [[k, bucket[k]] for k in sorted(bucket)]
    return state, errors
