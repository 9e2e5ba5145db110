"""The stat sink: each record's end-to-end latency on Spark's own Structured Streaming, as the post measured it.

The offset-management post measured a record from its creation to the moment
a "stat sink" processed it. Spark accepts asynchronous progress tracking only
with some sinks (noop, console, memory, Kafka, foreach:
``AsyncProgressTrackingMicroBatchExecution.validateAndGetTrigger`` matches on
the sink's name), not with foreachBatch, which the adapter's other runs use.
This sink is a foreach writer in the executor's JVM (``java/lightspeed/stat/
StatSink.java``, built into the checkpoint filesystem's jar), so no Python
worker joins a batch, as none did in the published benchmark: each task
(``open(partition, epoch)``) notes the wall time at which it processes each
row, keyed by the row's identity columns (the adapter's input: source
partition and offset; Spark's rate source: its value), and at ``close`` writes
them to ``<dir>/e<epoch>-p<partition>-n<rows>-<id>.tsv`` on local disk, the
sink's own record, outside the checkpoint (it pays no storage latency, as the
published benchmark's stat sink writes nothing). A failed task writes nothing:
its retry processes the rows again. The driver reads the files after the run
(``read_stat_sink``); a record's latency ends at its first processing.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

_FILE = re.compile(r"^e(\d+)-p(\d+)-n(\d+)-[0-9a-f]+\.tsv$")


def start_with_stat_sink(df: Any, directory: str, columns: Sequence[str], *, output_mode: str,
                         options: dict[str, str], trigger: dict[str, Any] | None) -> Any:
    """Start ``df``'s streaming query into the stat sink (``StatSink.java``, built with the checkpoint
    filesystem and loaded by the session): the query is assembled on the JVM, since PySpark's ``foreach``
    takes Python writers only. ``trigger``: None (Spark's default) or ``{"processingTime": "N milliseconds"}``."""
    from pyspark.sql.streaming.query import StreamingQuery
    spark = df.sparkSession
    jvm = spark._jvm
    names = spark.sparkContext._gateway.new_array(jvm.java.lang.String, len(columns))
    for i, column in enumerate(columns):
        names[i] = column
    writer = df._jdf.writeStream().outputMode(output_mode).foreach(jvm.lightspeed.stat.StatSink(directory, names))
    for key, value in options.items():
        writer = writer.option(key, value)
    if trigger is not None:
        if set(trigger) != {"processingTime"}:
            raise ValueError(f"the stat sink runs under Spark's default or a processing-time trigger, not {trigger}")
        interval_ms = int(str(trigger["processingTime"]).split()[0])
        writer = writer.trigger(jvm.org.apache.spark.sql.streaming.Trigger.ProcessingTime(interval_ms))
    return StreamingQuery(writer.start())


@dataclass(frozen=True)
class Processed:
    """One row as the sink processed it: the batch (epoch), the row's identity and the wall time, s."""

    epoch: int
    ids: tuple[int, ...]
    seen_s: float


def rows_recorded(directory: str) -> int:
    """How many rows the sink has recorded so far (from the file names; cheap enough to poll)."""
    if not os.path.isdir(directory):
        return 0
    return sum(int(m.group(3)) for m in map(_FILE.match, os.listdir(directory)) if m)


def read_stat_sink(directory: str) -> list[Processed]:
    """Every row the sink recorded, in no particular order (a re-processed row appears once per processing)."""
    out: list[Processed] = []
    for name in sorted(os.listdir(directory)) if os.path.isdir(directory) else []:
        match = _FILE.match(name)
        if match is None:
            continue
        epoch = int(match.group(1))
        with open(os.path.join(directory, name)) as fh:
            for line in fh:
                *ids, seen = line.split("\t")
                out.append(Processed(epoch, tuple(int(i) for i in ids), float(seen)))
    return out


def first_processed(records: Iterable[Processed]) -> dict[tuple[int, ...], Processed]:
    """Each row identity's first processing."""
    first: dict[tuple[int, ...], Processed] = {}
    for r in records:
        found = first.get(r.ids)
        if found is None or r.seen_s < found.seen_s:
            first[r.ids] = r
    return first
