"""Spark's real-time mode on the reference: the scenario's rules, the step graph, the restart rule, the judge.

Each test names the Spark 4.3 detail it pins: ``MicroBatchExecution`` (``markMicroBatchStart`` writes no
offset entry for a real-time trigger; ``markMicroBatchEnd`` merges the tasks' reports in
``populateBatchOffsetsForRTM``, then writes the offset log, then the commit log; ``initializeExecution``
purges an offset entry newer than the last commit entry), ``RealTimeModeAllowlist`` and ``SQLConf``'s
``spark.sql.streaming.realTimeMode.minBatchDuration``.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from reference.protocol import layout
from reference.judge.explorer import Model, writing_cuts, first_graph
from reference.protocol.graph import GraphShape, Node, RealTimeShape, shape_of
from reference.protocol.incarnation import Incarnation
from reference.protocol.logs import CommitEntry, OffsetEntry
from reference.judge.oracles import check_outcome, failures
from reference.protocol.real_time import purge_uncommitted_offsets, uncommitted_at_most
from reference.protocol.recovery import RestartPlan, plan_restart
from reference.protocol.run import run_scenario
from reference.language.scenario import Scenario, ScenarioError
from reference.language.steps import NodeId
from reference.protocol.storage import DurableStorage

SCENARIOS = Path(__file__).resolve().parents[2] / "experiments" / "scenarios"


def load(name: str) -> dict:
    return json.loads((SCENARIOS / f"{name}.json").read_text())


def scenario(name: str = "real-time-aggregate", **engine) -> Scenario:
    raw = load(name)
    raw["engine"] = {**raw["engine"], **engine}
    return Scenario.from_dict(raw)


# ------------------------------------------------------------------ the scenario


def test_a_real_time_engine_section_round_trips_and_defaults_to_five_minutes():
    sc = scenario()
    assert sc.engine.real_time and sc.engine.trigger_interval_ms == 5000
    assert Scenario.from_dict(json.loads(sc.to_json())) == sc
    raw = load("real-time-aggregate")
    del raw["engine"]["trigger_interval_ms"]
    assert Scenario.from_dict(raw).engine.trigger_interval_ms == 300_000   # RealTimeTrigger$.apply(): 5 minutes


@pytest.mark.parametrize("change, field, words", [
    ({"engine": {"real_time": True, "trigger_interval_ms": 1000}}, "engine.trigger_interval_ms",
     "minBatchDuration"),
    ({"engine": {"real_time": True, "trigger_interval_ms": 5000, "pipelining": True}}, "engine.pipelining",
     "markMicroBatchEnd"),
    ({"engine": {"real_time": True, "trigger_interval_ms": 5000, "state_checkpoint": "async"}},
     "engine.state_checkpoint", "CompletionIterator"),
    ({"engine": {"real_time": True, "trigger_interval_ms": 5000, "state_store": {"provider": "delta"}}},
     "engine.state_store.provider", "SQL_CONFIGURATION_NOT_SUPPORTED"),
    ({"engine": {"real_time": True, "trigger_interval_ms": 5000, "progress": {"mode": "async"}}},
     "engine.progress.mode", "useAsyncProgressTracking"),
    ({"sink": {"mode": "exactly_once"}}, "sink.mode", "allowedSinks"),
    ({"query": {"operator": {"kind": "dedup_within_watermark", "watermark_delay_ms": 10}, "state_partitions": 2}},
     "query.operator.kind", "StreamingDeduplicateWithinWatermarkExec"),
    ({"query": {"operator": {"kind": "stateful_function", "timeout_ms": 10, "watermark_delay_ms": 10}, "state_partitions": 2}},
     "query.operator.kind", "FlatMapGroupsWithStateExec"),
    ({"query": {"operator": {"kind": "chain", "operators": [{"kind": "map"}, {"kind": "aggregate"},
                                                            {"kind": "aggregate"}]}, "state_partitions": 2}},
     "query.operator", "Multiple streaming aggregations"),
    ({"source": {"kind": "generated", "partitions": 2, "keys": 3, "records_per_partition_per_batch": 2,
                 "batches": 2}}, "source.kind", "SupportsRealTimeMode"),
])
def test_real_time_mode_refuses_what_spark_refuses_naming_the_rule(change, field, words):
    raw = {**load("real-time-aggregate"), **change}
    with pytest.raises(ScenarioError) as caught:
        Scenario.from_dict(raw)
    assert caught.value.field == field and words in str(caught.value)


def test_real_time_mode_refuses_a_join_by_the_allowlist():
    side = {"kind": "rate", "partitions": 1, "keys": 2, "rows_per_second": 1, "duration_s": 5}
    raw = {**load("real-time-aggregate"), "sources": {"left": side, "right": side},
           "query": {"operator": {"kind": "join", "time_bound_ms": 10, "watermark_delay_ms": 10}}}
    del raw["source"]
    with pytest.raises(ScenarioError, match="StreamingSymmetricHashJoinExec"):
        Scenario.from_dict(raw)


@pytest.mark.parametrize("name", ["real-time-aggregate", "real-time-window", "real-time-stateless-crash"])
def test_the_example_real_time_scenarios_are_valid(name):
    assert Scenario.from_dict(load(name)).engine.real_time


# ------------------------------------------------------------------ the step graph


def ancestors_of(nodes: dict[NodeId, Node]) -> dict[NodeId, set[NodeId]]:
    out: dict[NodeId, set[NodeId]] = {}
    for node_id, node in nodes.items():
        out[node_id] = set(node.deps).union(*(out[d] for d in node.deps))
    return out


def test_shape_of_picks_the_real_time_shape_only_for_real_time_scenarios():
    assert type(shape_of(scenario())) is RealTimeShape
    micro = Scenario.from_dict({**load("real-time-aggregate"), "engine": {}, "sink": {"mode": "at_least_once"}})
    assert type(shape_of(micro)) is GraphShape


def test_offsets_are_logged_after_every_task_reported_then_the_commit_log():
    """markMicroBatchStart skips the offset log in real-time mode; markMicroBatchEnd writes it after the job."""
    inc = first_graph(scenario(), Model())
    up = ancestors_of(inc.nodes)
    n = NodeId.of
    for p in range(2):
        for step in ("task_apply", "sink_write", "state_commit"):
            assert n(step, 0, p) in up[n("offset_log_write", 0)]
            assert n("offset_log_write", 0) not in up[n(step, 0, p)]
    assert n("offset_log_write", 0) in up[n("commit_log_write", 0)]
    # records are delivered while the task runs: the sink does not wait for the state commit
    assert n("state_commit", 0, 0) not in up[n("sink_write", 0, 0)]


def test_the_boundary_gap_no_task_of_the_next_batch_runs_before_the_commit_log():
    inc = first_graph(scenario(), Model())
    up = ancestors_of(inc.nodes)
    for node_id in inc.nodes:
        if node_id.batch == 1 and node_id.partition >= 0:
            assert NodeId.of("commit_log_write", 0) in up[node_id], node_id


def test_the_replay_bound_is_read_from_the_graph_and_agrees_with_the_micro_batch_modes():
    """The bound the graph gives equals the micro-batch table of ``oracles.replay_bound`` in each mode, deep
    pipelines included (the graph is read over a horizon longer than the bound)."""
    assert uncommitted_at_most(shape_of(scenario())) == 1
    micro = {**load("real-time-aggregate"), "sink": {"mode": "at_least_once"}}
    for engine, expected in (({}, 1), ({"state_checkpoint": "async"}, 2), ({"pipelining": True}, 2),
                             ({"pipelining": True, "pipeline_depth": 3}, 3),
                             ({"pipelining": True, "pipeline_depth": 9}, 9),
                             ({"pipelining": True, "pipeline_depth": 40}, 40)):
        sc = Scenario.from_dict({**micro, "engine": engine})
        assert uncommitted_at_most(shape_of(sc)) == expected, engine


class NeverWaitsForACommit(RealTimeShape):
    """A shape whose batches plan without waiting for any commit: no replay bound."""

    def batch_nodes(self, b):
        return [replace(node, deps=tuple(d for d in node.deps if d.step != "source_commit"))
                if node.id.step == "plan" else node for node in super().batch_nodes(b)]


def test_a_shape_without_a_replay_bound_is_refused():
    shape = shape_of(scenario())
    unbounded = NeverWaitsForACommit(shape.cfg, shape.partitions, shape.stateful, shape.uses_watermark)
    with pytest.raises(ValueError, match="no replay bound"):
        uncommitted_at_most(unbounded)


def test_a_chain_with_one_aggregation_is_accepted():
    raw = {**load("real-time-aggregate"),
           "query": {"operator": {"kind": "chain", "operators": [{"kind": "map"}, {"kind": "aggregate"}]},
                     "state_partitions": 2}}
    assert Scenario.from_dict(raw).engine.real_time


# ------------------------------------------------------------------ the restart rule


def logged(offsets: dict[int, tuple[tuple[int, ...], tuple[int, ...]]], commits: list[int]) -> DurableStorage:
    storage = DurableStorage()
    for b, (start, end) in offsets.items():
        storage.write(layout.offset_path(b), OffsetEntry(b, start, end).encode())
    for b in commits:
        storage.write(layout.commit_path(b), CommitEntry(b, 0, [], {}).encode())
    return storage


def test_a_real_time_restart_replays_from_the_last_committed_offsets_and_purges_the_entry_after_it():
    storage = logged({0: ((0,), (2,)), 1: ((2,), (5,)), 2: ((5,), (9,))}, [0, 1])
    plan = plan_restart(storage, "real_time", 1)
    assert (plan.first_batch, plan.start_offsets, plan.fixed_offsets, plan.kept_through) == (2, (5,), {}, 1)
    assert plan_restart(storage, "sync", 1).fixed_offsets == {2: ((5,), (9,))}   # micro-batch re-runs it exactly
    assert purge_uncommitted_offsets(storage) == [2]
    assert not storage.exists("offsets/2") and storage.exists("offsets/1")


def test_a_real_time_restart_with_no_commit_starts_fresh():
    storage = logged({0: ((0,), (2,)), 1: ((2,), (4,))}, [])
    assert plan_restart(storage, "real_time", 1) == RestartPlan(0, (0,), {}, None)
    assert purge_uncommitted_offsets(storage) == [0, 1] and not storage.list("offsets")


def test_a_crash_between_the_offset_write_and_the_commit_write_replays_that_batch_with_duplicates():
    sc = Scenario.from_dict(load("real-time-stateless-crash"))
    run = run_scenario(sc)
    outcome = run.outcome()
    assert not failures(check_outcome(sc, outcome, run.storage))
    assert [r.rerun_batches for r in outcome.recoveries] == [(1,)]
    rows = {entry.batch: entry.rows for entry in outcome.sink}
    assert sorted(map(tuple, rows[1])) == [("c", 3), ("c", 3), ("d", 4), ("d", 4)]   # at-least-once
    assert list(map(list, rows[0])) == [["a", 1], ["b", 2]] and list(map(list, rows[2])) == [["e", 5]]


# ------------------------------------------------------------------ the explorer and planted bugs


def test_the_explorer_cuts_between_the_offset_write_and_the_commit_write():
    inc = first_graph(scenario(), Model())
    cuts = [set(cut) for cut in writing_cuts(inc)]
    offset, commit = NodeId.of("offset_log_write", 1), NodeId.of("commit_log_write", 1)
    assert any(offset in cut and commit not in cut for cut in cuts)


class LogsOffsetsBeforeTheTasksReport(Incarnation):
    """The offset entry is written when the batch plans and the tasks wait for it, as in micro-batch mode:
    the driver has no task report yet, so it logs the batch's start as its end, and the next batch reads the
    same records again."""

    def build_graph(self) -> dict[NodeId, Node]:
        out: dict[NodeId, Node] = {}
        for node_id, node in super().build_graph().items():
            if node_id.step == "offset_log_write":
                continue
            b, write = node_id.batch, NodeId.of("offset_log_write", node_id.batch)
            if node_id.partition >= 0 and node_id.step in ("state_load", "task_apply"):
                node = replace(node, deps=node.deps + (write,))
            out[node_id] = node
            if node_id.step == "plan":
                previous = NodeId.of("offset_log_write", b - 1)
                out[write] = Node(write, (node_id,) + ((previous,) if previous in out else ()))
        return out


def replays_after_the_last_commit(storage, mode, partitions):
    """A restart that takes the uncommitted offset entry as done: it resumes after it."""
    plan = plan_restart(storage, "sync", partitions)
    if not plan.fixed_offsets:
        return plan
    last = max(plan.fixed_offsets)
    return RestartPlan(last + 1, plan.fixed_offsets[last][1], {}, plan.trackers, plan.lineage,
                       plan.lineage_version, last)


def test_the_replay_bound_rejects_a_real_time_restart_that_replays_two_batches_or_starts_late():
    sc = Scenario.from_dict(load("real-time-stateless-crash"))
    run = run_scenario(sc)
    outcome = run.outcome()
    (recovery,) = outcome.recoveries
    two = replace(outcome, recoveries=(replace(recovery, rerun_batches=(1, 2)),))
    late = replace(outcome, recoveries=(replace(recovery, resumed_at=2),))
    for bad in (two, late):
        verdicts = {v.check: v for v in check_outcome(sc, bad, run.storage)}
        assert verdicts["replay_bound"].status == "fail"


def test_pinned_difference_the_aggregate_emits_one_row_per_key_per_batch():
    """Spark 4.3's ``StatefulStreamlineAggregateExec`` (real-time mode always uses the streamline aggregator)
    emits the running value after every input row ([k, 1] then [k, 2]); the reference's aggregate emits one
    updated row per key per batch, the last of those. The final value per key and batch is the same."""
    raw = load("real-time-stateless-crash")
    raw["query"]["operator"] = {"kind": "aggregate", "agg": "count"}
    raw["source"]["records"] = [[0, "a", 1, 100, 100], [0, "a", 1, 200, 200], [0, "a", 1, 300, 300]]
    raw["faults"] = []
    sc = Scenario.from_dict(raw)
    rows = [r for entry in run_scenario(sc).outcome().sink for r in entry.rows]
    assert rows == [["a", 3]]


# ------------------------------------------------------------------ the Spark backends refuse it, by name


def test_the_spark_backends_refuse_real_time_mode_naming_why():
    from reference.protocol.backend import ScenarioRefused
    from spark_impl.engine.backend import SparkEngineBackend
    from spark_impl.native.backend import NativeBackend

    for backend, words in ((NativeBackend(), "Kafka"), (SparkEngineBackend(), "long-running tasks")):
        with pytest.raises(ScenarioRefused) as caught:
            backend.run(scenario())
        assert caught.value.field == "engine.real_time" and words in str(caught.value)


# ------------------------------------------------------------------ beyond Spark: bounded replay


def test_the_bounded_replay_variant_needs_real_time_mode_and_divides_the_batch():
    sc = Scenario.from_dict(load("real-time-bounded-replay"))
    assert (sc.engine.real_time_step_ms, sc.engine.real_time_steps_per_batch) == (2500, 2)
    assert Scenario.from_dict(json.loads(sc.to_json())) == sc
    for engine, words in (({"real_time_progress_ms": 1000}, "needs \"real_time\": true"),
                          ({"real_time": True, "trigger_interval_ms": 5000, "real_time_progress_ms": 3000},
                           "does not divide"),
                          ({"real_time": True, "trigger_interval_ms": 5000, "real_time_progress_ms": 50},
                           "at most every 100 ms")):
        raw = {**load("real-time-bounded-replay"), "engine": engine}
        with pytest.raises(ScenarioError, match=words) as caught:
            Scenario.from_dict(raw)
        assert caught.value.field == "engine.real_time_progress_ms"


def test_bounded_replay_persists_progress_inside_a_batch_without_a_gap_and_replays_at_most_two_points():
    sc = Scenario.from_dict(load("real-time-bounded-replay"))
    inc = first_graph(sc, Model())
    up = ancestors_of(inc.nodes)
    n = NodeId.of
    # inside a batch (graph batch 1 of 2) the tasks go on: no wait for batch 0's logs
    assert n("commit_log_write", 0) not in up[n("task_apply", 1, 0)]
    assert n("state_commit", 0, 0) in up[n("task_apply", 1, 0)]
    assert inc.nodes[n("offset_log_write", 0)].background and inc.nodes[n("commit_log_write", 0)].background
    # where a real-time batch ends, the gap: graph batch 2 waits for batch 1's commit log
    assert n("commit_log_write", 1) in up[n("task_apply", 2, 0)]
    assert uncommitted_at_most(shape_of(sc)) == 2


def test_the_judges_bounds_and_the_real_time_reading_of_the_graph_agree():
    """Two readings of one count: ``bounds.bounds_of`` (what the judge enforces) and
    ``real_time.uncommitted_at_most`` (the real-time model's own reading of its graph) give the same batches in
    flight on every real-time example."""
    from reference.judge.bounds import bounds_of
    for name in ("real-time-aggregate", "real-time-window", "real-time-stateless-crash", "real-time-bounded-replay"):
        sc = Scenario.from_dict(load(name))
        assert bounds_of(sc).in_flight == uncommitted_at_most(shape_of(sc)), name
