"""Findings about Spark: where Spark's own Structured Streaming departs from the spec under a fault, beside the
zoo of state-store bugs (``zoo.py``).

Each finding is a minimal scenario that shows it on ``spark-native``, the Spark
class responsible (read in Spark's source), what the spec expects, and a
signature: what the native outcome shows, checked by
``tests/spark/test_native_findings.py`` against a fresh run (so the test fails if
Spark, or the adapter, stops showing it) and by the fault matrix, which names
the finding a failing native cell shows (``fault_matrix.definition``). The
write-up is ``spark_impl/native/README.md``. Found on pyspark 4.3.0 (Spark
4.3.0), local master, RocksDB state store with changelog checkpointing.
"""

from __future__ import annotations

import copy
import os
import re
from dataclasses import dataclass
from typing import Any, Callable

from reference.protocol.outcome import Outcome

SPARK_VERSION = "4.3.0"


def _stateless(batches: int, faults: list[dict[str, Any]]) -> dict[str, Any]:
    return {"name": "native-finding", "seed": 5,
            "source": {"kind": "generated", "partitions": 2, "keys": 4, "records_per_partition_per_batch": 3,
                       "batches": batches, "event_time": {"start_ms": 1000, "step_ms": 10, "max_disorder_ms": 0}},
            "query": {"operator": {"kind": "map"}, "state_partitions": 2},
            "sink": {"mode": "exactly_once"},
            "engine": {"progress": {"mode": "sync", "checkpoint_interval_ms": 1000},
                       "log_purge": {"mode": "inline", "min_batches_to_retain": 3},
                       "state_store": {"provider": "changelog", "min_deltas_for_snapshot": 2,
                                       "maintenance_interval_ms": 100},
                       "state_checkpoint": "sync", "pipelining": False, "trigger_interval_ms": 0},
            "faults": faults}


def _stateful_changelog_only(batches: int, faults: list[dict[str, Any]]) -> dict[str, Any]:
    """A running count whose stores take no snapshot in ``batches`` batches: a load replays every changelog."""
    out = _stateless(batches, faults)
    out["query"]["operator"] = {"kind": "aggregate", "agg": "count"}
    out["engine"]["state_store"]["min_deltas_for_snapshot"] = 10
    return out


def _damage(kind: str, path: str, before_batch: int) -> list[dict[str, Any]]:
    """Damage ``path`` before ``before_batch`` is planned, then crash: every backend restarts from the damaged
    checkpoint (native Spark's restart, which reads the damaged entry, stops before the crash's point)."""
    return [{"at": {"step": "plan", "batch": before_batch, "when": "before"}, "kind": kind, "path": path},
            {"at": {"step": "plan", "batch": before_batch, "when": "after"}, "kind": "driver_crash"}]


@dataclass(frozen=True)
class NativeFinding:
    key: str
    title: str
    scenario: dict[str, Any]
    spark_class: str
    spec_expects: str
    spark_does: str
    shows: Callable[[Outcome, str], bool]    # (outcome, run's workdir) -> whether the run shows the finding
    matrix: tuple[tuple[str, str], ...] = ()  # fault-matrix cells (column, fault) where it shows
    signature: str = ""                       # a regular expression the failing cell's detail matches
    reference_recovers: bool = True           # the reference runs the same scenario and recovers (paths of
                                              # Spark's own layout, such as a changelog's, it does not have)

    def named(self, detail: str) -> bool:
        return bool(self.signature) and re.search(self.signature, detail) is not None

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "title": self.title, "spark_version": SPARK_VERSION,
                "spark_class": self.spark_class, "spec_expects": self.spec_expects, "spark_does": self.spark_does,
                "scenario": copy.deepcopy(self.scenario)}


def _unnamed_parse_error(outcome: Outcome, _workdir: str) -> bool:
    error = outcome.error or ""
    return "Unexpected end-of-input" in error and "offsets/0" not in error and "batch 0" not in error


def _previous_entry_needed(outcome: Outcome, _workdir: str) -> bool:
    return "batch 0 doesn't exist" in (outcome.error or "")


def _unnamed_changelog(outcome: Outcome, _workdir: str) -> bool:
    error = outcome.error or ""
    return "EOFException: Stream ended prematurely" in error and "2.changelog" not in error \
        and "version 2" not in error


def _temporary_left(outcome: Outcome, workdir: str) -> bool:
    offsets = os.path.join(workdir, "checkpoint", "offsets")
    return not outcome.error and any(n.startswith(".1.") and n.endswith(".tmp") for n in os.listdir(offsets))


FINDINGS = (
    NativeFinding(
        "unnamed-corrupt-offset-entry",
        "a damaged offset log entry stops the restart with a JSON parse error that names neither the file nor "
        "the batch",
        _stateless(3, _damage("corrupt_file", "offsets/0", 2)),
        "org.apache.spark.sql.execution.streaming.OffsetSeqLog.deserialize (HDFSMetadataLog.get hands it the "
        "stream without the path), read by MicroBatchExecution.populateStartOffsets",
        "spec section 3: a checkpoint file that cannot be read stops the run with an error that names the file "
        "(the reference, whose restart after commits/1 reads only offsets/1, finishes, and its checkpoint oracle "
        "names offsets/0 as damaged)",
        "the restart reads offsets/0 (see the next finding) and fails with Jackson's 'Unexpected end-of-input in "
        "field name' under STREAM_FAILED; no part of the error names offsets/0 or batch 0",
        _unnamed_parse_error, (("map", "corrupt_file"),), r"Unexpected end-of-input"),
    NativeFinding(
        "restart-reads-the-previous-offset-entry",
        "a restart needs the offset entry before the latest one, which the spec's recovery does not read",
        _stateless(3, _damage("delete_file", "offsets/0", 2)),
        "org.apache.spark.sql.execution.streaming.MicroBatchExecution.populateStartOffsets (it reads "
        "offsetLog.get(latestBatchId - 1) to set the committed offsets, even when the latest batch committed)",
        "spec section 2: a restart reads the latest offset entry and the latest commit entry; after commits/1 "
        "it starts batch 2 from offsets/1 alone (the reference finishes; its checkpoint oracle reports the "
        "missing offsets/0)",
        "the restart stops with 'batch 0 doesn't exist': loud and safe, but a checkpoint the spec recovers from "
        "is one Spark does not (minBatchesToRetain keeps the entry unless it is damaged)",
        _previous_entry_needed, (("map", "delete_file"),), r"batch \d+ doesn't exist"),
    NativeFinding(
        "failed-rename-leaves-its-temporary-file",
        "a log write whose rename fails leaves its temporary file in the checkpoint for good",
        _stateless(3, [{"at": {"step": "offset_log_write", "batch": 1, "when": "before"},
                        "kind": "storage_write_error"}]),
        "org.apache.spark.sql.execution.streaming.CheckpointFileManager.RenameBasedFSDataOutputStream (close() "
        "marks the stream terminated in a finally block, so the cancel() that HDFSMetadataLog.write calls on "
        "the failure returns without deleting the temporary file)",
        "spec section 3: the checkpoint holds the protocol's files; an atomic write that fails leaves nothing "
        "(the reference's storage writes each file whole or not at all)",
        "offsets/.1.<uuid>.tmp stays after the query restarted and finished; every failed rename of a log entry "
        "leaves one more (it is ignored on restart, so the protocol is unharmed: a leak, not a loss)",
        _temporary_left),
    NativeFinding(
        "unnamed-truncated-changelog",
        "a truncated RocksDB changelog stops the query with an end-of-stream error that names neither the file "
        "nor the store and version",
        _stateful_changelog_only(4, [{"at": {"step": "source_commit", "batch": 1}, "kind": "corrupt_file",
                                      "path": "state/0/0/2.changelog"}]),
        "org.apache.spark.sql.execution.streaming.state.StateStoreChangelogReaderV1 (its read hits the end of the "
        "truncated stream) under RocksDBStateStoreProvider's load, which reports "
        "CANNOT_LOAD_STATE_STORE.UNCATEGORIZED without the file",
        "spec section 3: a checkpoint file that cannot be read stops the run with an error that names the file, "
        "by path or by store and version",
        "the restart's load of version 2 of partition 0 replays 1.changelog and 2.changelog (no snapshot yet) "
        "and fails with [CANNOT_LOAD_STATE_STORE.UNCATEGORIZED] caused by java.io.EOFException 'Stream ended "
        "prematurely': loud, but the operator must find the file itself",
        _unnamed_changelog, reference_recovers=False),
)


def finding_of(column: str, fault: str, detail: str) -> NativeFinding | None:
    """The finding a failing native fault-matrix cell shows, if its detail carries the finding's signature."""
    return next((f for f in FINDINGS if (column, fault) in f.matrix and f.named(detail)), None)
