"""The stat sink: each record's end-to-end latency on Spark's own Structured Streaming, as the post measured it.

The offset-management post measured a record from its creation to the moment
a "stat sink" processed it. Spark accepts asynchronous progress tracking only
with some sinks (noop, console, memory, Kafka, foreach:
``AsyncProgressTrackingMicroBatchExecution.validateAndGetTrigger`` matches on
the sink's name), not with foreachBatch, which the adapter's other runs use.
This sink is a foreach writer: each task (``open(partition, epoch)``) notes the
wall time at which it processes each row, keyed by the row's identity columns
(the adapter's input: source partition and offset; Spark's rate source: its
value), and at ``close`` writes them to
``<dir>/e<epoch>-p<partition>-n<rows>-<attempt>.tsv`` on local disk, the
sink's own record, outside the checkpoint (it pays no storage latency, as the
published benchmark's stat sink writes nothing). A failed task writes nothing:
its retry processes the rows again. The driver reads the files after the run
(``read_stat_sink``); a record's latency ends at its first processing.
"""

from __future__ import annotations

import os
import re
import time
import uuid
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

_FILE = re.compile(r"^e(\d+)-p(\d+)-n(\d+)-[0-9a-f]+\.tsv$")


class StatSinkWriter:
    """A foreach writer (open / process / close) that records when each row was processed."""

    def __init__(self, directory: str, columns: Sequence[str]):
        self.directory, self.columns = directory, tuple(columns)
        self.epoch, self.partition = -1, -1
        self.seen: list[tuple[Any, ...]] = []

    def open(self, partition_id: int, epoch_id: int) -> bool:
        self.epoch, self.partition, self.seen = int(epoch_id), int(partition_id), []
        return True

    def process(self, row: Any) -> None:
        self.seen.append((*(row[c] for c in self.columns), time.time()))

    def close(self, error: BaseException | None) -> None:
        if error is not None:
            return
        name = f"e{self.epoch}-p{self.partition}-n{len(self.seen)}-{uuid.uuid4().hex[:12]}.tsv"
        partial = os.path.join(self.directory, f".{name}.tmp")
        with open(partial, "w") as fh:
            fh.writelines("\t".join(map(str, values)) + "\n" for values in self.seen)
        os.replace(partial, os.path.join(self.directory, name))


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
