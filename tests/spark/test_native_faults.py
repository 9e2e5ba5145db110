"""Faults fired inside Spark's own checkpoint code (``spark_impl/native/fault_plan.py``), one short native query.

One query of five batches carries one fault of each kind the checkpoint
filesystem fires, each at its own batch, so the test of each kind reads its
effect off the same run (a run costs a JVM restart: the crash's):

- ``storage_latency`` 800 ms before the rename of ``commits/1``: batch 1's ``commitOffsets`` holds it;
- ``storage_write_error`` at the close of ``state/0/0/2.changelog`` (before its changelog write of batch 1 is
  durable, Spark's partition 0): the task fails and Spark's retry commits the version, with no restart;
- ``driver_crash`` before the rename of ``commits/2``: the driver's JVM halts; what it left has ``offsets/2``
  and the temporary file of ``commits/2``, not ``commits/2``; a new JVM re-runs batch 2;
- ``storage_write_error`` before the rename of ``offsets/3``: the query fails, and its restart plans batch 3
  afresh (the entry was never renamed into place).

Every oracle must hold of the run. Its batches differ from the reference's from batch 3 on, as Spark's file
source plans them: the failed attempt had already logged planned batch 3's file in the source's own log
(``sources/0/3``, FileStreamSource.fetchMaxOffset), which the restart counts as seen, so the re-planned batch 3
reads it and the next file (``maxFilesPerTrigger`` is 1 per new log entry). Nothing of batch 3 was durable in
``offsets/``, so any boundary is allowed; the state and the sink end where the reference's do.

The effect of each fault on disk is read off the checkpoint the run leaves, and off copies of it taken when
each incarnation ended (a failed query, a halted JVM), before anything ran again.
"""

from __future__ import annotations

import json
import os
import shutil
from typing import Any

import pytest

from reference.language.catalogue import scenario_dict
from reference.judge.compare import first_difference
from reference.judge.oracles import check_outcome, failures
from reference.protocol.outcome import Outcome
from reference.protocol.run import run_scenario
from reference.language.scenario import Fault, Scenario
from spark_impl.native import NativeUnsupported, run_native
from spark_impl.native.fault_plan import MARK_PREFIX, FsTrigger, fs_trigger, matches, plan_confs, read_marks
from spark_impl.native.query_run import NativeRun
from spark_impl.native.support import check_supported

LATENCY_MS = 800
CLOCK_SLACK_MS = 10   # the kernel stamps files from a coarse clock, a tick behind the JVM's currentTimeMillis


def fault(kind: str, step: str, batch: int, when: str = "before", **extra: Any) -> dict[str, Any]:
    at = {"step": step, "batch": batch, "when": when}
    at.update({k: extra.pop(k) for k in ("partition",) if k in extra})
    return {"at": at, "kind": kind, **extra}


def scenario(faults: list[dict[str, Any]], operator: str = "aggregate", batches: int = 5,
             sink: str | None = None) -> Scenario:
    d = scenario_dict(operator, "sync", faults=faults, batches=batches, seed=5, sink=sink)
    d["name"] = "native-faults"
    d["source"] = {"kind": "generated", "partitions": 2, "keys": 4, "records_per_partition_per_batch": 3,
                   "batches": batches, "event_time": {"start_ms": 1000, "step_ms": 10, "max_disorder_ms": 0}}
    return Scenario.from_dict(d)


FAULTS = [fault("storage_latency", "commit_log_write", 1, ms=LATENCY_MS),
          fault("storage_write_error", "changelog_write", 1, partition=0),
          fault("driver_crash", "commit_log_write", 2),
          fault("storage_write_error", "offset_log_write", 3)]


@pytest.fixture(scope="module")
def faulted(tmp_path_factory: Any) -> tuple[Scenario, Outcome]:
    from spark_impl.session import session
    session()
    sc = scenario(FAULTS)
    copies = tmp_path_factory.mktemp("at-incarnation-end")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(NativeRun, "note_marks", copying_the_checkpoint(NativeRun.note_marks, str(copies)))
        outcome = run_native(sc, workdir=str(tmp_path_factory.mktemp("native-faults"))).outcome
    outcome.details["test_copies"] = str(copies)
    return sc, outcome


def copying_the_checkpoint(note_marks: Any, copies: str) -> Any:
    """``NativeRun.note_marks``, which the run calls once an incarnation's query has ended (failed, or its JVM
    halted) and before anything runs again, that first copies the checkpoint as it is then to
    ``<copies>/<incarnation>``: what the disk held right after a fault that ended the incarnation."""
    def note(run: NativeRun, life: int) -> list[str]:
        shutil.copytree(run.checkpoint.path, os.path.join(copies, str(life)))
        return note_marks(run, life)
    return note


def fired(outcome: Outcome, index: int) -> dict[str, Any]:
    return next(f for f in outcome.details["native"]["faults_fired"] if f["fault"] == index)


@pytest.mark.spark
def test_every_fault_fired_where_its_step_is_and_every_oracle_holds(faulted):
    sc, outcome = faulted
    bad = failures(check_outcome(sc, outcome))
    assert not bad, "\n".join(v.describe() for v in bad)
    assert outcome.error is None and outcome.faults_not_fired == ()
    where = {f["fault"]: (f["when"], f["op"], f["path"]) for f in outcome.details["native"]["faults_fired"]}
    assert where == {0: ("before", "rename", "commits/1"), 1: ("after", "create", "state/0/0/2.changelog"),
                     2: ("before", "rename", "commits/2"), 3: ("before", "rename", "offsets/3")}
    reference = run_scenario(sc).outcome()
    assert first_difference(reference, outcome, sc.sink_mode).startswith("batches[3].end_offsets")
    assert [b.end_offsets for b in outcome.batches] == [b.end_offsets for b in reference.batches[:3]] + \
        [reference.batches[4].end_offsets]
    assert newest_state(outcome) == newest_state(reference)
    assert sorted(r for e in outcome.sink for r in e.rows if e.batch < 3) == \
        sorted(r for e in reference.sink for r in e.rows if e.batch < 3)


def newest_state(outcome: Outcome) -> dict[str, Any]:
    return {sid: {p: versions[max(versions, key=int)] for p, versions in parts.items()}
            for sid, parts in outcome.state.items()}


@pytest.mark.spark
def test_driver_crash_before_the_rename_of_commits_2_leaves_its_temporary_file(faulted):
    """The JVM halts inside CheckpointFileManager's createAtomic: the temporary file of ``commits/2`` is
    written and never renamed, ``offsets/2`` is in place, and a new JVM re-runs batch 2."""
    _sc, outcome = faulted
    deaths = outcome.details["native"]["jvm_deaths"]
    assert [(d["incarnation"], d["exit_status"], d["fault"]) for d in deaths] == [(0, 86, 2)]
    left = deaths[0]["checkpoint"]
    assert "checkpoint/commits/.2.tmp" in left and "checkpoint/commits/2" not in left
    assert "checkpoint/offsets/2" in left and "checkpoint/commits/1" in left
    assert fired(outcome, 2)["incarnation"] == 0 and "stream execution thread" in fired(outcome, 2)["thread"]
    assert outcome.recoveries[0].to_dict() == {"restart": 1, "resumed_at": 2, "rerun_batches": [2]}
    assert {b.id: b.attempts for b in outcome.batches}[2] == 2


@pytest.mark.spark
def test_storage_write_error_at_an_offset_log_write_fails_the_query_and_the_restart_plans_afresh(faulted):
    """The rename of ``offsets/3`` fails (after its temporary file was written): the query fails, and the
    restart finds no ``offsets/3``, so it plans batch 3 again; Spark leaves the temporary file behind."""
    _sc, outcome = faulted
    assert outcome.recoveries[1].to_dict() == {"restart": 2, "resumed_at": 3, "rerun_batches": []}
    assert fired(outcome, 3)["incarnation"] == 1
    assert len(outcome.details["native"]["jvm_deaths"]) == 1   # a storage error is no crash: the same JVM
    import os
    offsets = os.path.join(outcome.details["native"]["checkpoint"], "offsets")
    assert any(name.startswith(".3.") and name.endswith(".tmp") for name in os.listdir(offsets))


@pytest.mark.spark
def test_storage_write_error_at_a_state_file_fails_one_task_attempt_and_spark_retries_it(faulted):
    _sc, outcome = faulted
    mark = fired(outcome, 1)
    assert (mark["partitionId"], mark["attemptNumber"]) == (0, 0) and "Executor task launch" in mark["thread"]
    assert {b.id: b.attempts for b in outcome.batches}[1] == 1   # no restart: the task's retry committed


@pytest.mark.spark
def test_storage_latency_on_one_commit_log_write_is_in_that_batch_s_commit_only(faulted):
    _sc, outcome = faulted
    commit = {p.batch_id: p.duration_ms["commitOffsets"] for p in outcome.progress}
    assert commit[1] >= LATENCY_MS
    assert all(ms < LATENCY_MS for b, ms in commit.items() if b != 1), commit


# ------------------------------------------------------------------ the effect of each fault on disk
# What is expected follows from Spark's CheckpointFileManager (FileSystemBasedCheckpointFileManager, which Spark
# falls back to on the project's filesystem): createAtomic writes ``.<name>.<uuid>[.TID<n>].tmp`` and
# RenameBasedFSDataOutputStream.close closes it, then renames it to ``<name>``; close marks the stream
# terminated in a finally block, so when the close or the rename throws, the cancel() that HDFSMetadataLog and
# StateStoreChangelogWriter call next does nothing and the temporary file stays, whole (its stream was closed).
# The project's filesystem fires "after the create" once the stream is closed, and "before the rename" before
# RawLocalFileSystem's rename (FaultPlan.java).


def log_entry(path: str, sources: int | None) -> list[Any]:
    """A whole entry of Spark's offset log (``sources`` source offsets) or commit log (None): ``v1``, then one
    JSON value a line (OffsetSeqLog, CommitLog); an AssertionError for anything else (a partial entry)."""
    with open(path) as fh:
        lines = fh.read().split("\n")
    assert lines[0] == "v1", (path, lines)
    values = [json.loads(line) for line in lines[1:]]
    assert len(values) == (1 if sources is None else 1 + sources), (path, lines)
    assert "batchWatermarkMs" in values[0] if sources is not None else "nextBatchWatermarkMs" in values[0]
    return values


def written_mark(outcome: Outcome, index: int) -> dict[str, Any]:
    """The mark the filesystem wrote where fault ``index`` fired (``<root>/faults/fault-<i>``): the operation,
    the local path, the time and the task, as the JVM recorded them before the fault acted."""
    root = os.path.dirname(outcome.details["native"]["checkpoint"])
    return read_marks(os.path.join(root, "faults"))[f"{MARK_PREFIX}{index}"]


def temporaries(directory: str, name: str) -> list[str]:
    """The temporary files CheckpointFileManager left for ``name`` in ``directory``."""
    return sorted(n for n in os.listdir(directory) if n.startswith(f".{name}.") and n.endswith(".tmp"))


@pytest.mark.spark
def test_storage_write_error_at_an_offset_log_write_leaves_no_entry_and_the_restart_writes_it_whole(faulted):
    """Right after the rename of ``offsets/3`` failed (the copy taken when its incarnation ended), ``offsets/3``
    is absent and its temporary file is a whole entry; batch 2's entries are in place. The restart writes
    ``offsets/3`` whole and keeps the failed attempt's temporary file as it was."""
    _sc, outcome = faulted
    assert fired(outcome, 3)["incarnation"] == 1
    at_fault = os.path.join(outcome.details["test_copies"], "1")
    offsets, commits = os.path.join(at_fault, "offsets"), os.path.join(at_fault, "commits")
    assert sorted(n for n in os.listdir(offsets) if not n.startswith(".")) == ["0", "1", "2"]
    assert sorted(n for n in os.listdir(commits) if not n.startswith(".")) == ["0", "1", "2"]
    left = temporaries(offsets, "3")
    assert len(left) == 1 and ".TID" not in left[0]   # the driver's write, not a task's
    log_entry(os.path.join(offsets, left[0]), sources=1)
    after = os.path.join(outcome.details["native"]["checkpoint"], "offsets")
    log_entry(os.path.join(after, "3"), sources=1)
    with open(os.path.join(after, left[0]), "rb") as kept, open(os.path.join(offsets, left[0]), "rb") as then:
        assert kept.read() == then.read()


@pytest.mark.spark
def test_storage_write_error_at_a_state_file_leaves_the_failed_attempt_s_file_unrenamed(faulted):
    """The close of task attempt 0's ``state/0/0/2.changelog`` failed: its temporary file (named by the task
    attempt's id) stays, written before the fault fired; ``2.changelog`` is the retry's, renamed after the
    fault, and holds what the failed attempt had written (the same input, the same changes)."""
    _sc, outcome = faulted
    mark = written_mark(outcome, 1)
    folder = os.path.join(outcome.details["native"]["checkpoint"], "state", "0", "0")
    left = temporaries(folder, "2.changelog")
    assert len(left) == 1 and left[0].endswith(f".TID{mark['taskAttemptId']}.tmp"), left
    kept, final = os.path.join(folder, left[0]), os.path.join(folder, "2.changelog")
    fired_ns = mark["time_ms"] * 1_000_000
    assert os.stat(kept).st_mtime_ns <= fired_ns + 1_000_000 and os.stat(final).st_mtime_ns >= fired_ns
    with open(kept, "rb") as a, open(final, "rb") as b:
        assert a.read() == b.read()


@pytest.mark.spark
def test_storage_latency_on_one_commit_log_write_delays_that_rename_only(faulted):
    """Every commit entry is whole; the rename of ``commits/1`` (its inode's change time, which a rename sets)
    came at least the latency after its temporary file was closed (its modification time) and after the mark
    the filesystem wrote when the fault fired; every other commit's rename followed its close sooner."""
    _sc, outcome = faulted
    mark = written_mark(outcome, 0)
    commits = os.path.join(outcome.details["native"]["checkpoint"], "commits")
    assert (mark["op"], mark["when"], mark["local"]) == ("rename", "before", os.path.join(commits, "1"))
    gap_ms = {}
    for name in sorted(n for n in os.listdir(commits) if not n.startswith(".")):
        log_entry(os.path.join(commits, name), sources=None)
        st = os.stat(os.path.join(commits, name))
        gap_ms[int(name)] = (st.st_ctime_ns - st.st_mtime_ns) / 1e6
    assert sorted(gap_ms) == [b.id for b in outcome.batches]   # one commit a batch (batch 3 took two files)
    renamed_ms = os.stat(os.path.join(commits, "1")).st_ctime_ns / 1e6
    assert gap_ms[1] >= LATENCY_MS - CLOCK_SLACK_MS, gap_ms
    assert renamed_ms >= mark["time_ms"] + LATENCY_MS - CLOCK_SLACK_MS, gap_ms
    assert all(ms < LATENCY_MS for b, ms in gap_ms.items() if b != 1), gap_ms


# ------------------------------------------------------------------ refusals and the step table (no JVM)


def test_zombie_write_is_refused_naming_the_spark_code_that_rules_it_out():
    sc = scenario([fault("zombie_write", "changelog_write", 1, partition=0)])
    with pytest.raises(NativeUnsupported) as refused:
        check_supported(sc)
    assert refused.value.field == "faults[0].kind"
    for name in ("StateStoreOps.mapPartitionsWithStateStore", "RocksDB.rollback", "StateStoreChangelogWriter",
                 "RenameBasedFSDataOutputStream", "ForeachBatchSink"):
        assert name in str(refused.value)


def trigger(step: str, when: str, batch: int = 2, partition: int | None = None, **kw: Any) -> FsTrigger | None:
    at: dict[str, Any] = {"step": step, "batch": batch, "when": when}
    if partition is not None:
        at["partition"] = partition
    return fs_trigger(Fault.from_dict({"at": at, "kind": "driver_crash"}), scenario([], **kw))


@pytest.mark.parametrize("step,when,op,op_when,path", [
    ("plan", "after", "create", "before", "checkpoint/offsets/2"),
    ("offset_log_write", "before", "rename", "before", "checkpoint/offsets/2"),
    ("offset_log_write", "after", "rename", "after", "checkpoint/offsets/2"),
    ("state_load", "before", "create", "before", "checkpoint/state/0/1/3.changelog"),
    ("changelog_write", "before", "create", "after", "checkpoint/state/0/1/3.changelog"),
    ("changelog_write", "after", "rename", "after", "checkpoint/state/0/1/3.changelog"),
    ("state_commit", "before", "rename", "after", "checkpoint/state/0/1/3.changelog"),
    ("snapshot_upload", "before", "create", "before", "checkpoint/state/0/1/3.zip"),
    ("sink_write", "after", "create", "after", "sink/2.json"),
    ("sink_commit", "before", "rename", "before", "sink/2.json"),
    ("commit_log_write", "before", "rename", "before", "checkpoint/commits/2"),
    ("commit_log_write", "after", "rename", "after", "checkpoint/commits/2"),
    ("source_commit", "before", "rename", "after", "checkpoint/commits/2"),
])
def test_each_step_is_the_operation_of_spark_s_that_makes_it_durable(step, when, op, op_when, path):
    found = trigger(step, when, partition=1)
    assert found is not None and (found.op, found.when) == (op, op_when)
    assert matches(found, "/r", f"/r/{path}")
    assert not matches(found, "/r", f"/r/{path}0") and not matches(found, "/r", f"/r/x/{path}")


def test_a_state_step_of_a_stateless_query_is_its_sink_file_and_a_snapshot_is_no_operation():
    assert trigger("changelog_write", "before", operator="map") == FsTrigger("create", "before", r"sink/2\.json")
    assert trigger("snapshot_upload", "after", operator="map") is None
    at_least_once = trigger("sink_commit", "after", sink="at_least_once")
    assert at_least_once is not None and matches(at_least_once, "/r", "/r/sink/2-3.json")


def test_the_plan_is_one_conf_per_fault_the_java_side_parses():
    sc = scenario(FAULTS)
    armed = [(i, f, fs_trigger(f, sc)) for i, f in enumerate(sc.faults)]
    confs = plan_confs([(i, f, t) for i, f, t in armed if t is not None], "/run", "/run/faults")
    assert confs["lightspeed.latencyfs.faults"] == "0,1,2,3"
    assert confs["lightspeed.latencyfs.marks"] == "/run/faults"
    assert confs["lightspeed.latencyfs.fault.0"] == (rf"storage_latency|rename|before|{LATENCY_MS}|"
                                                     r"\Q/run/\Echeckpoint/commits/1")
    assert confs["lightspeed.latencyfs.fault.2"].startswith("driver_crash|rename|before|0|")
