"""The PySpark engine (``--backend spark``) judged by the reference oracles and compared with the simulator.

The matrix runs every operator under every engine mode Spark allows for it,
each with a fault kind (rotating through every kind, at task and driver
steps), on the one local SparkSession of the test session. For each case the
engine's outcome must pass every oracle, reading its own checkpoint, and must
agree with the reference and the simulator on batches, state and sink.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reference.protocol.backend import RunOptions, RunResult, ScenarioRefused
from reference.language.catalogue import MODES, OPERATORS, scenario_dict, supported_pairs
from reference.judge.compare import first_difference
from reference.judge.oracles import check_outcome, failures
from reference.protocol.outcome import Outcome
from reference.protocol.run import run_scenario
from reference.language.scenario import Scenario
from reference.protocol.sources import SourceData
from reference.protocol.storage import Storage
from reference.protocol.timing import first_visible_ms, summarize_latency
from streamtest import reachable

pytestmark = pytest.mark.spark

# One fault per kind, each at a step where it means something; the matrix rotates through them.
FAULTS: list[tuple[str, list[dict[str, Any]]]] = [
    ("none", []),
    ("driver_crash@offsets", [{"kind": "driver_crash",
                               "at": {"step": "offset_log_write", "batch": 2, "when": "after"}}]),
    ("task_failure@state_commit", [{"kind": "task_failure",
                                    "at": {"step": "state_commit", "batch": 1, "when": "after", "partition": 0}}]),
    ("executor_loss@task_apply", [{"kind": "executor_loss", "at": {"step": "task_apply", "batch": 2, "when": "before",
                                                                    "partition": 1}}]),
    ("storage_write_error@sink", [{"kind": "storage_write_error",
                                   "at": {"step": "sink_write", "batch": 1, "when": "before", "partition": 1}}]),
    ("driver_crash@task_apply", [{"kind": "driver_crash", "at": {"step": "task_apply", "batch": 2, "when": "after",
                                                                  "partition": 0}}]),
    ("zombie_write@sink", [{"kind": "zombie_write", "at": {"step": "sink_write", "batch": 1, "when": "before",
                                                            "partition": 0}}]),
    ("storage_write_error@commits", [{"kind": "storage_write_error",
                                      "at": {"step": "commit_log_write", "batch": 2, "when": "before"}}]),
    ("storage_latency@changelog", [{"kind": "storage_latency", "ms": 150,
                                    "at": {"step": "changelog_write", "batch": 1, "when": "before"}}]),
    ("zombie_write@changelog", [{"kind": "zombie_write", "at": {"step": "changelog_write", "batch": 2,
                                                                 "when": "before", "partition": 1}}]),
    ("driver_crash@commits", [{"kind": "driver_crash", "at": {"step": "commit_log_write", "batch": 1,
                                                               "when": "before"}}]),
]


def _matrix() -> list[tuple[str, str, str]]:
    cases = []
    for i, (op, mode) in enumerate(supported_pairs()):
        cases.append((op, mode, FAULTS[i % len(FAULTS)][0]))
    return cases


def _scenario(op: str, mode: str, fault: str, batches: int = 4) -> Scenario:
    faults = dict(FAULTS)[fault]
    d = scenario_dict(op, mode, faults=json.loads(json.dumps(faults)), batches=batches)
    d["name"] = f"{op}-{mode}-{fault}"
    d["faults"] = reachable(d)   # a stateful step's fault, on a stateless query, moved to a step it runs
    return Scenario.from_dict(d)


def _run(scenario: Scenario, workdir: Any, **options: Any) -> RunResult:
    """The engine through the backend interface, unpaced unless asked (the tests judge, they do not time)."""
    from spark_impl.engine.backend import SparkEngineBackend
    return SparkEngineBackend().run(scenario, RunOptions(workdir=str(workdir), **{"pace": False, **options}))


def _judge(scenario: Scenario, outcome: Outcome, storage: Storage | None) -> None:
    assert outcome.error is None, outcome.error
    bad = failures(check_outcome(scenario, outcome, storage))
    assert not bad, "\n".join(v.describe() for v in bad)


def _agree(scenario: Scenario, outcome: Outcome) -> None:
    """Agree with the reference, and with the simulator wherever the protocol fixes the outcome.

    Under async progress an offset entry is persisted once ``checkpoint_interval_ms`` has passed on
    the backend's clock. The engine (like the reference) reads the batch's logical time; the
    simulator reads its simulated clock, which includes processing time. After a restart the
    unpersisted batches are folded, so there the simulator's batch boundaries may legitimately differ.
    """
    difference = first_difference(run_scenario(scenario).outcome(), outcome, scenario.sink_mode)
    assert difference is None, f"reference and spark differ at {difference}"
    if scenario.engine.progress_mode == "async" and outcome.recoveries:
        return
    from sim.backend import SimBackend
    difference = first_difference(SimBackend().run(scenario).outcome, outcome, scenario.sink_mode)
    assert difference is None, f"sim and spark differ at {difference}"


@pytest.mark.slow
@pytest.mark.parametrize("op,mode,fault", _matrix(), ids=lambda x: str(x))
def test_engine_matrix_passes_oracles_and_agrees_with_reference_and_sim(spark, tmp_path, op, mode, fault):
    scenario = _scenario(op, mode, fault)
    result = _run(scenario, tmp_path)
    _judge(scenario, result.outcome, result.checkpoint)
    if fault.startswith("driver_crash"):
        assert result.outcome.recoveries, "a driver crash must show up as a recovery"
    _agree(scenario, result.outcome)


def _group_matrix() -> list[tuple[str, str, str]]:
    """Every mode under group scheduling, with operators and faults rotating differently from the matrix."""
    pairs = supported_pairs()
    cases = []
    for mode in MODES:
        ops = [op for op, m in pairs if m == mode]
        for j in range(2):
            cases.append((ops[(len(cases) + j) % len(ops)], mode, FAULTS[(3 * len(cases) + 1) % len(FAULTS)][0]))
    return cases


@pytest.mark.slow
@pytest.mark.parametrize("op,mode,fault", _group_matrix(), ids=lambda x: str(x))
def test_group_scheduled_engine_passes_oracles_and_agrees(spark, tmp_path, op, mode, fault):
    """Group scheduling (three batches per Spark job) changes execution only: same oracles, same outcome."""
    scenario = _scenario(op, mode, fault, batches=6)
    result = _run(scenario, tmp_path, group=3)
    _judge(scenario, result.outcome, result.checkpoint)
    if fault == "none":
        assert result.outcome.details["spark"]["jobs"] == 2, "six batches in groups of three are two Spark jobs"
    _agree(scenario, result.outcome)


@pytest.mark.slow
@pytest.mark.parametrize("op,group,fault", [("aggregate", 1, "driver_crash@offsets"),
                                            ("stateful_function", 3, "task_failure@state_commit"),
                                            ("join", 3, "driver_crash@task_apply")], ids=str)
def test_a_deeper_pipeline_passes_oracles_and_agrees(spark, tmp_path, op, group, fault):
    """pipeline_depth 4: up to four batches in flight, with a job per batch and with group scheduling."""
    d = scenario_dict(op, "pipelining", faults=json.loads(json.dumps(dict(FAULTS)[fault])), batches=6,
                      pipeline_depth=4)
    d["name"] = f"{op}-depth4-{fault}"
    scenario = Scenario.from_dict(d)
    result = _run(scenario, tmp_path, group=group)
    _judge(scenario, result.outcome, result.checkpoint)
    _agree(scenario, result.outcome)


def test_group_matrix_covers_every_mode_and_engine_fault_kind():
    cases = _group_matrix()
    assert {m for _o, m, _f in cases} == set(MODES)
    kinds = {f["kind"] for _o, _m, name in cases for f in dict(FAULTS)[name]}
    assert {"driver_crash", "task_failure", "executor_loss", "zombie_write"} <= kinds


def test_group_scheduling_needs_a_slot_per_partition(spark, tmp_path):
    from spark_impl.session import task_slots
    d = scenario_dict("aggregate", "sync", batches=3)
    d["query"]["state_partitions"] = task_slots(spark) + 1
    with pytest.raises(ScenarioRefused, match=r"state partitions.*slots") as refused:
        _run(Scenario.from_dict(d), tmp_path, group=2)
    assert refused.value.field == "query.state_partitions"


def test_matrix_covers_every_operator_mode_and_fault_kind():
    from reference.language.steps import FAULT_KINDS
    cases = _matrix()
    assert len(cases) >= 40
    assert {op for op, _m, _f in cases} == set(OPERATORS)
    assert {m for _o, m, _f in cases} == set(MODES)
    kinds = {f["kind"] for _o, _m, name in cases for f in dict(FAULTS)[name]}
    engine_kinds = {"driver_crash", "task_failure", "executor_loss", "storage_write_error", "storage_latency",
                    "zombie_write"}
    assert engine_kinds <= kinds <= set(FAULT_KINDS)


# ``spark`` only hands the test the live session: there is nothing in it to reset between generated inputs
@settings(max_examples=6, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pair=st.sampled_from(supported_pairs()), fault=st.sampled_from([name for name, _f in FAULTS]),
       batches=st.integers(3, 5))
def test_generated_scenarios_pass_the_oracles(spark, tmp_path_factory, pair, fault, batches):
    scenario = _scenario(*pair, fault, batches=batches)
    result = _run(scenario, tmp_path_factory.mktemp("gen"))
    _judge(scenario, result.outcome, result.checkpoint)


def test_a_redelivering_source_survives_a_crash_between_fetch_and_offset_log_and_agrees(spark, tmp_path):
    """The driver runs the reference's fetch layer in ``plan``; a crash before the offset log write leaves an orphan
    fetch state; the executors read their records through the ledger. Every oracle holds, and the outcome is the
    reference's and the simulator's."""
    crash = [{"kind": "driver_crash", "at": {"step": "offset_log_write", "batch": 2, "when": "before"}}]
    scenario = Scenario.from_dict(scenario_dict("aggregate", "pipelining", faults=crash, source_kind="redelivering"))
    result = _run(scenario, tmp_path)
    _judge(scenario, result.outcome, result.checkpoint)
    assert result.outcome.recoveries, "a driver crash must show up as a recovery"
    assert result.checkpoint is not None and result.checkpoint.exists("sources/0/2")
    _agree(scenario, result.outcome)


def test_state_stays_on_executors_between_batches(spark, tmp_path):
    """Executors keep their stores open between batches.

    Under group scheduling one task runs a partition's batches of a group in
    one Python worker, so every batch but the first of each group must find
    its store cached. With a job per batch, which of the executor's Python
    workers gets a task is Spark's choice (it keeps a pool of idle workers),
    so a hit is possible but not guaranteed; a hit must never exceed the
    tasks that could have one.
    """
    scenario = _scenario("aggregate", "sync", "none", batches=6)
    grouped = _run(scenario, tmp_path / "grouped", group=3).outcome.details["spark"]
    within_groups = scenario.state_partitions * 2 * (3 - 1)  # two groups of three batches
    assert grouped["cache_hits"] >= within_groups
    single = _run(scenario, tmp_path / "single").outcome.details["spark"]
    assert single["cache_hits"] <= single["tasks"] - scenario.state_partitions


def test_progress_events_reach_listeners_and_latency_is_per_record(spark, tmp_path):
    from spark_impl.engine import CollectingListener, run_spark
    listener = CollectingListener()
    scenario = _scenario("aggregate", "async_purge", "none")
    outcome = run_spark(scenario, workdir=tmp_path, listeners=[listener]).outcome
    assert [e.batch_id for e in listener.events] == [b.id for b in outcome.batches]
    assert list(outcome.progress) == listener.events
    first = listener.events[0]
    assert first.num_input_rows > 0 and first.state_operators
    assert first.duration_ms["triggerExecution"] > 0
    total_input = sum(e.num_input_rows for e in listener.events)
    latency = outcome.latency()
    assert latency.count == total_input
    assert latency.p50 is not None and latency.p99 is not None and latency.max is not None
    assert 0 < latency.p50 <= latency.p99 <= latency.max
    assert Outcome.from_json(outcome.to_json()) == outcome   # the typed outcome round-trips


def test_latency_ends_at_first_visibility_when_a_crash_redelivers_a_batch(spark, tmp_path):
    """A driver crash after batch 1's sink commit, before ``commits/1``: the restart re-runs batch 1 and
    delivers it again. Its records' latency ends at the first delivery, when their output was readable."""
    crash = [{"kind": "driver_crash", "at": {"step": "commit_log_write", "batch": 1, "when": "before"}}]
    scenario = Scenario.from_dict(scenario_dict("aggregate", "sync", faults=crash, batches=4))
    outcome = _run(scenario, tmp_path, pace=True).outcome
    assert outcome.error is None and outcome.recoveries
    assert outcome.sink_by_batch()[1].deliveries == 2
    deliveries = outcome.details["spark"]["sink_deliveries"]   # [batch, start, end, seen ms since time 0]
    assert [d[0] for d in deliveries].count(1) == 2
    data = SourceData.of(scenario)

    def latencies(chosen: list[list[Any]]) -> list[float]:
        seen = first_visible_ms(((r.source_partition, r.offset), ms) for _b, start, end, ms in chosen
                                for r in data.slice(start, end))
        return sorted(ms - data.partitions[sp][off].arrival_ms for (sp, off), ms in seen.items())

    first_of_batch_1 = next(i for i, d in enumerate(deliveries) if d[0] == 1)
    redelivery_only = deliveries[:first_of_batch_1] + deliveries[first_of_batch_1 + 1:]
    assert summarize_latency(latencies(deliveries)) == outcome.latency()
    assert outcome.latency().count == sum(data.totals), "every record counts once, re-delivered or not"
    assert latencies(redelivery_only) != latencies(deliveries), "the re-delivery came later than the first"


def test_a_record_delivered_twice_keeps_the_latency_of_its_first_delivery():
    from spark_impl.latency import SinkDelivery, record_latencies_ms
    data = SourceData.of(Scenario.from_dict(scenario_dict("aggregate", "sync", batches=2)))
    batch_0 = ((0, 0), tuple(data.planned_end_offsets(0)))
    t0 = 100.0
    once = record_latencies_ms(data, [SinkDelivery(0, *batch_0, t0 + 1.0)], t0)
    twice = record_latencies_ms(data, [SinkDelivery(0, *batch_0, t0 + 5.0), SinkDelivery(0, *batch_0, t0 + 1.0)], t0)
    assert sorted(once) == sorted(twice) and len(once) == sum(batch_0[1])
    assert max(once) <= 1000.0


def test_a_checkpoint_of_another_scenario_is_refused_by_name(spark, tmp_path):
    first = _scenario("aggregate", "sync", "none", batches=3)
    _run(first, tmp_path)
    other = Scenario.from_dict({**scenario_dict("dedup_within_watermark", "sync", batches=3), "name": "other-query"})
    outcome = _run(other, tmp_path).outcome
    assert outcome.error is not None
    assert "different query" in outcome.error and repr(first.name) in outcome.error


def test_a_second_query_on_a_live_checkpoint_fails_clearly(tmp_path):
    from spark_impl.engine import QueryInUse, acquire_checkpoint
    scenario = _scenario("aggregate", "sync", "none")
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        root = tmp_path / "checkpoint"
        root.mkdir()
        (tmp_path / "checkpoint.lightspeed-lock").write_text(json.dumps({"pid": holder.pid, "scenario": "first"}))
        with pytest.raises(QueryInUse, match="in use by query 'first'"):
            acquire_checkpoint(root, scenario)
    finally:
        holder.kill()
        holder.wait()
    # once the holder is dead its lock is stale and the checkpoint can be taken over
    lock = acquire_checkpoint(tmp_path / "checkpoint", scenario)
    assert lock.exists()


CHECK_IN_A_FRESH_PROCESS = """
import sys
from experiments.backends import snapshot_readers_for
from reference.judge.oracles import check_outcome, failures
from reference.protocol.outcome import Outcome
from reference.language.scenario import load_scenario
from reference.protocol.storage import LocalStorage
outcome_path, scenario_path, checkpoint = sys.argv[1:]
found = LocalStorage(checkpoint)
storage = LocalStorage(checkpoint, snapshot_readers=snapshot_readers_for(found))
with open(outcome_path) as fh:
    outcome = Outcome.from_json(fh.read())
bad = failures(check_outcome(load_scenario(scenario_path), outcome, storage))
print("\\n".join(v.describe() for v in bad))
sys.exit(1 if bad else 0)
"""


@pytest.mark.slow
def test_driver_crash_kills_the_driver_process_and_a_new_one_recovers(tmp_path):
    """The driver is SIGKILLed at the step; a new driver process (a second Spark) recovers from the checkpoint.
    The outcome passes every oracle on its checkpoint in a fresh process, which finds the RocksDB snapshot
    reader from the checkpoint's metadata."""
    from reference.language.scenario import load_scenario
    scenario_path = Path(__file__).parents[2] / "experiments" / "scenarios" / "running-count-crash-after-wal.json"
    result = _run(load_scenario(str(scenario_path)), tmp_path / "work", crash="process", pace=True)
    outcome = result.outcome
    assert outcome.error is None, outcome.error
    ended = [p["ended"] for p in outcome.details["spark"]["driver_processes"]]
    assert ended == ["killed (SIGKILL)", "finished"], ended
    out = tmp_path / "outcome.json"
    out.write_text(outcome.to_json())
    check = subprocess.run([sys.executable, "-c", CHECK_IN_A_FRESH_PROCESS, str(out), str(scenario_path),
                            str(tmp_path / "work" / "checkpoint")], capture_output=True, text=True, timeout=300)
    assert check.returncode == 0, check.stdout + check.stderr[-3000:]
    assert outcome.recoveries and outcome.recoveries[0].rerun_batches == (3,)


def test_a_damaged_snapshot_stops_the_query_naming_it_instead_of_restarting(spark, tmp_path):
    """A task that finds a corrupt state file, and nothing to fall back on (the changelog of the same
    version is corrupt too, SPARK-21696's fallback needs it), stops the query with that error, as the
    reference does; retrying or restarting cannot make the file readable."""
    target = "state/0/0/2_r0b1p0a0.snapshot"
    d = scenario_dict("aggregate", "async_purge", batches=4, retain=2, faults=[
        {"at": {"batch": 3, "step": "plan", "when": "before"}, "kind": "corrupt_file", "path": target},
        {"at": {"batch": 3, "step": "plan", "when": "before"}, "kind": "corrupt_file",
         "path": "state/0/0/2_r0b1p0a0.changelog"},
        {"at": {"batch": 3, "step": "plan", "when": "after"}, "kind": "driver_crash"}])
    scenario = Scenario.from_dict(d)
    outcome = _run(scenario, tmp_path).outcome
    reference = run_scenario(scenario).outcome()
    assert reference.error and target in reference.error
    assert outcome.error and target in outcome.error, outcome.error
    assert len(outcome.recoveries) == len(reference.recoveries)


# ------------------------------------------------------------------ async state checkpointing


def test_async_state_runs_the_next_batch_while_the_previous_commit_is_still_pending(spark, tmp_path):
    """Batch 2's background commit of partition 0 is slowed by 3 s. The graph lets batch 3's tasks run
    meanwhile (only batch 3's own commit waits for batch 2's), so batch 3's task of partition 1 starts and
    ends well before batch 2's state is durable. The engine used to submit batch 3's job only once the driver
    had seen every commit of batch 2: batch 3 came 3 s later and the feature overlapped nothing.

    (Batch 3's task of partition 0 may wait as well: when Spark hands it to the other Python worker, which
    does not hold the store, it loads version 3 from the checkpoint, which exists once the slow commit ends.)"""
    slow = [{"kind": "storage_latency", "ms": 3000,
             "at": {"step": "changelog_write", "batch": 2, "partition": 0, "when": "before"}}]
    scenario = Scenario.from_dict(scenario_dict("aggregate", "async_state", faults=slow, batches=5))
    result = _run(scenario, tmp_path)
    _judge(scenario, result.outcome, result.checkpoint)
    _agree(scenario, result.outcome)
    spans = {(b, p): (start, end) for b, p, start, end in result.outcome.details["spark"]["task_spans"]}
    durable_2_0 = spans[(2, 0)][1] + 3000.0   # the task returned, then its commit slept 3 s
    assert spans[(3, 1)][1] < durable_2_0 - 1000.0, f"batch 3 partition 1 ended at {spans[(3, 1)][1]:.0f} ms, " \
        f"batch 2 partition 0 was durable after {durable_2_0:.0f} ms"
    # at most one batch pending: batch 4 may not load its state before batch 2 is durable
    assert min(spans[(4, p)][1] for p in (0, 1)) > durable_2_0, spans


def test_async_state_writes_a_partitions_versions_in_order_while_batches_overlap(spark, tmp_path):
    """Every other background commit of partition 0 is slowed by 400 ms, so the next batch's task runs while
    it is pending and has a fast commit of its own. The graph still orders the commits (``changelog_write``
    of b after ``state_commit`` of b-1): each version's changelog is written after the one before it. When
    the next task lands in the Python worker holding the store it commits from memory, and only the
    engine's own wait keeps the order; over five slowed batches that happens with probability 31/32."""
    slow = [{"kind": "storage_latency", "ms": 400,
             "at": {"step": "changelog_write", "batch": b, "partition": 0, "when": "before"}} for b in (1, 3, 5, 7, 9)]
    scenario = Scenario.from_dict(scenario_dict("aggregate", "async_state", faults=slow, batches=11, retain=20))
    result = _run(scenario, tmp_path)
    _judge(scenario, result.outcome, result.checkpoint)
    root = Path(result.checkpoint.root)
    written = sorted((int(f.name.split("_")[0]), f.stat().st_mtime_ns) for f in root.glob("state/*/0/*.changelog"))
    versions = [v for v, _t in written]   # cleanup may have removed the oldest ones
    assert len(versions) >= 8 and versions == list(range(versions[0], 12)), written
    times = [t for _v, t in written]
    assert times == sorted(times), f"partition 0's changelogs by version, written at {times}"


# ------------------------------------------------------------------ state rebalancing


@pytest.mark.parametrize("mode", ["sync", "async_state"])
def test_moved_partitions_load_from_the_checkpoint_and_pass_every_oracle(spark, tmp_path, mode):
    """Local mode has one executor, so a move is the placement's: the outcome records the hand-derived moves
    of ``test_reference_rebalancing.py``, each moved partition's task loads its state from the checkpoint
    (no cache hit), a partition that stays finds its stores open, and every oracle holds."""
    from test_reference_rebalancing import HAND_MOVES, counts, moves_of
    scenario = Scenario.from_dict(counts(mode))
    result = _run(scenario, tmp_path)
    _judge(scenario, result.outcome, result.checkpoint)
    assert moves_of(result.outcome) == HAND_MOVES
    tasks = result.outcome.details["spark"]["moved_partition_tasks"]   # p3 from batch 2 on, p0 and p2 from 4
    assert [(b, p) for b, p, _hits in tasks] == [(2, 3), (3, 3), (4, 0), (4, 2), (4, 3), (5, 0), (5, 2), (5, 3)]
    moved_at = {(b, p) for b, p, _f, _t in HAND_MOVES}
    assert [hits for b, p, hits in tasks if (b, p) in moved_at] == [0, 0, 0], tasks
    assert result.outcome.details["spark"]["cache_hits"] > 0   # the others found their stores open
    _agree(scenario, result.outcome)


def test_settings_asked_of_a_running_spark_jvm_are_refused_not_dropped(spark):
    """A setting reaches Spark only when its JVM starts; asking a process whose JVM runs for another one is an
    error naming the setting (the explorer's JVM options were silently ignored so)."""
    from spark_impl.session import SparkUnavailable, session
    with pytest.raises(SparkUnavailable, match="spark.driver.extraJavaOptions=-Dlightspeed.test=1"):
        session(None, {"spark.driver.extraJavaOptions": "-Dlightspeed.test=1"})
    assert session() is spark            # the running session is untouched
