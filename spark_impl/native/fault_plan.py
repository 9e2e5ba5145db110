"""Faults fired inside Spark's own checkpoint code: a protocol step of spec section 2 as the file operation of
Spark's that makes it durable, and the fault plan the checkpoint filesystem reads (``java/.../FaultPlan.java``).

The path is the step and the batch. Spark writes its checkpoint through
``CheckpointFileManager.createAtomic``: a temporary file ``.<name>.<uuid>.tmp``
beside ``<name>``, closed, then renamed. So a step is a (operation, when,
path) of Spark's, the ``FsTrigger``:

===============================================  ==========================================================
step (before / after) of batch b, partition p    Spark's operation
===============================================  ==========================================================
plan                                             before the create of ``offsets/b``
offset_log_write before                          before the rename of ``offsets/b`` (its temporary file is
                                                 written: the last instant before the entry is durable)
offset_log_write after, purge before             after the rename of ``offsets/b``
purge after, state_load, task_apply before        before the create of the state file of version b+1 of
                                                 partition p (a stateless query: of the sink's file of b);
                                                 the store creates it when it loads version b for update
task_apply after, changelog_write before         after the create of that state file: its stream is closed
                                                 with every change written, and not renamed yet
changelog_write after, state_commit              after the rename of that state file: the version is durable
                                                 (the rename is the store's commit)
snapshot_upload                                  before the create / after the rename of the snapshot of
                                                 version b+1 of partition p (``<v>.zip``, ``<v>.snapshot``)
sink_write                                       before / after the create of the sink's file of batch b
sink_commit                                      before / after its rename (at-least-once: after the create;
                                                 every attempt's file is visible as written)
commit_log_write before                          before the rename of ``commits/b`` (its temporary file
                                                 is written)
commit_log_write after, source_commit            after the rename of ``commits/b``
===============================================  ==========================================================

The state file of a version is the store's per-batch file: ``<v>.changelog``
(RocksDB with changelog checkpointing), ``<v>.zip`` (RocksDB without it: the
commit uploads a snapshot) or ``<v>.delta`` (the HDFS-backed store), under
``state/<operator>/<p>/`` (a join: one folder per store below it). Spark's
partition p is not the reference's (``state.py``); without ``at.partition``
the first partition to reach the operation fires. The adapter's sink writes
through the same filesystem (``sink.py``), with the same temporary-and-rename
naming, so its part file and its commit are operations too. A step no
operation bounds (a snapshot of a stateless query) never fires, and the
outcome lists the fault as not fired.

Kinds (what the Java side does, ``FaultPlan.java``): ``driver_crash`` halts the
driver's JVM (``Runtime.halt``: no shutdown hook, no stream closed or
cancelled, so the disk holds what a killed process leaves, temporary files
included); ``storage_write_error`` throws an IOException, as S3A does on a
failed PUT; ``storage_latency`` sleeps ``ms`` on that one operation;
``executor_loss`` halts the JVM of the executor whose task reached a state file
(``_executor_trigger``; never the driver's JVM: a local master is refused). Each
fault fires once across the run's JVMs: the Java side marks it by creating
``<marks>/fault-<i>`` exclusively, and writes there where it fired.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from typing import Any, Iterable

from reference.language.scenario import Fault, Scenario

CONF_PREFIX = "lightspeed.latencyfs."
HALT_STATUS = 86              # FaultMarks.HALT_STATUS: a JVM halted by a fault exits with it
MARK_PREFIX = "fault-"        # FaultMarks: the mark of fault i is <marks>/fault-<i>
COSTS_PREFIX = "costs-"       # LatencyFileSystem.saveReports: what a halted JVM's operations cost

# the store's per-batch state file and its snapshot, by the scenario's provider (session_confs.engine_confs)
STATE_FILE = {"changelog": "changelog", "snapshot": "zip", "delta": "delta"}
SNAPSHOT_FILE = {"changelog": "zip", "snapshot": "zip", "delta": "snapshot"}


@dataclass(frozen=True)
class FsTrigger:
    """Where a fault fires in Spark: ``when`` (before / after) the ``op`` (create / rename) of a file whose path
    relative to the run's root matches ``target`` (a regular expression, e.g. ``checkpoint/offsets/3``)."""

    op: str
    when: str
    target: str

    def describe(self) -> str:
        return f"{self.when} the {self.op} of {self.target}"


def _state_file(scenario: Scenario, version: int, partition: int | None, snapshot: bool = False) -> str:
    ext = (SNAPSHOT_FILE if snapshot else STATE_FILE)[scenario.engine.provider]
    part = r"\d+" if partition is None else str(partition)
    return rf"checkpoint/state/\d+/{part}/(?:[^/]+/)?{version}\.{ext}"


def _sink_file(scenario: Scenario, batch: int) -> str:
    return rf"sink/{batch}\.json" if scenario.sink_mode == "exactly_once" else rf"sink/{batch}-\d+\.json"


def fs_trigger(fault: Fault, scenario: Scenario) -> FsTrigger | None:
    """The operation of Spark's at which ``fault`` (at a step and batch) fires (the module's table); None
    when no operation bounds its step (a snapshot of a stateless query)."""
    at = fault.at
    assert at.step is not None and at.batch is not None, "a fault fired by path is at a step and batch"
    step, when, b, p = at.step, at.when, at.batch, at.partition
    stateful = scenario.operator.stateful
    if fault.kind == "executor_loss":
        assert stateful, "a stateless query's executor loss is no file operation (plan.executor_loss_filter)"
        return _executor_trigger(scenario, step, when, b, p)
    offsets, commits = rf"checkpoint/offsets/{b}", rf"checkpoint/commits/{b}"
    sink = _sink_file(scenario, b)
    exactly_once = scenario.sink_mode == "exactly_once"
    state_before = FsTrigger("create", "before", _state_file(scenario, b + 1, p)) if stateful \
        else FsTrigger("create", "before", sink)
    if step == "plan":
        return FsTrigger("create", "before", offsets)
    if (step, when) == ("offset_log_write", "before"):
        return FsTrigger("rename", "before", offsets)
    if step == "offset_log_write" or (step, when) == ("purge", "before"):
        return FsTrigger("rename", "after", offsets)
    if step in ("purge", "state_load") or (step, when) == ("task_apply", "before"):
        return state_before
    if step == "task_apply" or (step, when) == ("changelog_write", "before"):
        return FsTrigger("create", "after", _state_file(scenario, b + 1, p)) if stateful else state_before
    if step in ("changelog_write", "state_commit"):
        return FsTrigger("rename", "after", _state_file(scenario, b + 1, p)) if stateful else state_before
    if step == "snapshot_upload":
        if not stateful:
            return None
        return FsTrigger("create" if when == "before" else "rename", when, _state_file(scenario, b + 1, p, True))
    if step == "sink_write":
        return FsTrigger("create", when, sink)
    if step == "sink_commit":
        return FsTrigger("rename", when, sink) if exactly_once else FsTrigger("create", "after", sink)
    if (step, when) == ("commit_log_write", "before"):
        return FsTrigger("rename", "before", commits)
    if step in ("commit_log_write", "source_commit"):
        return FsTrigger("rename", "after", commits)
    raise ValueError(f"step {step!r} has no operation in Spark's checkpoint")


def _executor_trigger(scenario: Scenario, step: str, when: str, b: int, p: int | None) -> FsTrigger:
    """Where an executor is lost in a stateful query's task of batch b, partition p: at its state file of
    version b+1, whose create, close and rename run in the executor (its output rows go to the sink once the
    version is committed, so a loss at the sink write comes after the rename)."""
    state = _state_file(scenario, b + 1, p)
    if step == "state_load" or (step, when) == ("task_apply", "before"):
        return FsTrigger("create", "before", state)
    if step == "task_apply" or (step, when) == ("changelog_write", "before"):
        return FsTrigger("create", "after", state)
    return FsTrigger("rename", "after", state)


def _anchored(root: str, target: str) -> str:
    """``target`` under ``root`` as the Java regular expression the plan matches a local absolute path with."""
    base = os.path.abspath(root)
    assert r"\E" not in base, f"{base}: a root holding \\E cannot be quoted in a Java regular expression"
    return rf"\Q{base}/\E{target}"


def plan_confs(faults: Iterable[tuple[int, Fault, FsTrigger]], root: str, marks: str) -> dict[str, str]:
    """The Spark SQL confs (copied into the Hadoop configuration) that arm ``faults`` (index, fault, trigger)
    for one query run: the rules of ``FaultPlan.java``, and where the fired ones are marked."""
    confs = {f"{CONF_PREFIX}marks": os.path.abspath(marks)}
    indexes = []
    for index, fault, trigger in faults:
        indexes.append(str(index))
        ms = fault.ms if fault.kind == "storage_latency" and fault.ms is not None else 0
        confs[f"{CONF_PREFIX}fault.{index}"] = "|".join(
            (fault.kind, trigger.op, trigger.when, str(ms), _anchored(root, trigger.target)))
    confs[f"{CONF_PREFIX}faults"] = ",".join(indexes)
    return confs


def matches(trigger: FsTrigger, root: str, local_path: str) -> bool:
    """Whether a local path is the trigger's target (Python's reading of the Java rule, for tests)."""
    rel = os.path.relpath(local_path, os.path.abspath(root))
    return re.fullmatch(trigger.target, rel) is not None


def read_marks(marks: str) -> dict[str, dict[str, Any]]:
    """Every mark in the directory by name (``fault-<i>`` for a fault fired by path, the task faults' names),
    each what the JVM that fired it wrote: the operation, the path, the JVM, the thread and the task."""
    out: dict[str, dict[str, Any]] = {}
    if not os.path.isdir(marks):
        return out
    for name in sorted(os.listdir(marks)):
        if name.startswith(COSTS_PREFIX):
            continue
        path = os.path.join(marks, name)
        with open(path) as fh:
            text = fh.read().strip()
        try:
            out[name] = json.loads(text) if text else {}
        except ValueError:
            raise ValueError(f"{path}: a fault mark that is not JSON ({text[:80]!r}); the JVM that fired it died "
                             "while writing it, or something else wrote there") from None
    return out


def saved_costs(marks: str) -> list[dict[str, Any]]:
    """What the operations of each JVM a fault halted cost (``LatencyFileSystem.saveReports``)."""
    if not os.path.isdir(marks):
        return []
    out = []
    for name in sorted(os.listdir(marks)):
        if name.startswith(COSTS_PREFIX):
            with open(os.path.join(marks, name)) as fh:
                out.append(json.load(fh))
    return out
