"""The simulator's batch templates give exactly the reference's step graph (sim/graph.py).

The reference builds the whole graph of an incarnation at once
(``reference.protocol.graph.build_graph``); the simulator turns one batch's nodes per
shape (``GraphShape.batch_nodes``) into a template and instantiates every
batch from it. For every mode combination, and for an incarnation that starts
after a restart, both must have the same nodes, the same background flags and
the same dependency edges.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from reference.language.catalogue import OPERATORS, spark_allows
from reference.protocol.incarnation import Incarnation
from reference.protocol.observer import Observer
from reference.protocol.recovery import RestartPlan, fresh_plan
from reference.language.scenario import Scenario
from reference.protocol.sources import SourceData
from reference.language.steps import STEP_NAMES, TASK_STEPS, NodeId
from reference.protocol.storage import DurableStorage
from sim.cost_model import shipped_profile
from sim.data_mode import DataIncarnation
from sim.graph import GATE, TASK_OWNED, Graph
from sim.simulation import Simulation

GRAPH_OPERATORS = ("map", "aggregate", "window_aggregate", "join")   # stateless, stateful, watermarked, two stores


def scenario(op: str, **engine: Any) -> Scenario:
    src = {"kind": "generated", "partitions": 2, "keys": 5, "records_per_partition_per_batch": 3, "batches": 7,
           "event_time": {"start_ms": 0, "step_ms": 5}}
    raw: dict[str, Any] = {"name": f"graph-{op}", "seed": 4,
                           "query": {"operator": OPERATORS[op], "state_partitions": 3},
                           "sink": {"mode": "at_least_once" if op == "map" else "exactly_once"},
                           "engine": {"state_store": {"maintenance_interval_ms": 300}, **engine}}
    if op == "join":
        raw["sources"] = {"left": src, "right": dict(src)}
    else:
        raw["source"] = src
    return Scenario.from_dict(raw)


def reference_graph(sc: Scenario, restart: RestartPlan) -> dict[NodeId, tuple[bool, set[NodeId]]]:
    inc = Incarnation(sc, SourceData.of(sc), DurableStorage(), restart, restart.first_batch and 1, Observer())
    return {nid: (node.background, set(node.deps)) for nid, node in inc.nodes.items()}


def simulator_graph(sc: Scenario, restart: RestartPlan) -> dict[NodeId, tuple[bool, set[NodeId]]]:
    """Every node (and every task's gate, keyed by its first step) with its background flag and deps."""
    sim = Simulation(sc, shipped_profile(), "data", trace_enabled=False)
    inc = sim.new_incarnation(restart, restart.first_batch and 1)
    graph = Graph(inc.shape, inc.nodes)
    for b in sorted(inc.plans):
        graph.add_batch(b, lambda _node: None)
    out = {}
    for b, batch in graph.batches.items():
        for node in batch.nodes + [n for n in batch.by_slot if n is not None and n.kind == GATE]:
            deps = {d.node_id for d in (graph.node(b + delta, slot) for delta, slot in node.template.deps)
                    if d is not None}
            key = ("gate", graph.task_steps(node)[0].node_id) if node.kind == GATE else node.node_id
            out[key] = (node.background, deps)
    return out


def with_gates(graph: dict[Any, tuple[bool, set[NodeId]]]) -> dict[Any, tuple[bool, set[NodeId]]]:
    """Add what a task's gate must wait for: the deps of its first step and of task_apply, minus its own steps.

    Also checks that a task's later foreground steps wait for nothing but its own earlier steps,
    which is what lets a task run them back to back in one slot.
    """
    out = dict(graph)
    tasks: dict[tuple[int, int], list[NodeId]] = {}
    for nid, (background, _deps) in graph.items():
        if nid.step in TASK_STEPS and not background:
            tasks.setdefault((nid.batch, nid.partition), []).append(nid)
    for steps in tasks.values():
        steps.sort(key=lambda n: TASK_STEPS.index(n.step))
        apply = next(n for n in steps if n.step == "task_apply")
        gate = (graph[steps[0]][1] | graph[apply][1]) - set(steps)
        out[("gate", steps[0])] = (False, gate)
        for i, nid in enumerate(steps):
            if nid not in (steps[0], apply):
                assert graph[nid][1] <= set(steps[:i]), f"{nid} waits for another task"
    return out


def supported(op: str, progress: str, state_checkpoint: str) -> bool:
    """Spark's rule for async progress (the catalogue's); async state checkpointing needs state."""
    return (progress == "sync" or spark_allows(op, "async_progress")) and (state_checkpoint == "sync" or op != "map")


CASES = [(op, dict(zip(("progress", "state_checkpoint", "pipelining", "log_purge"), combo)))
         for op in GRAPH_OPERATORS
         for combo in itertools.product(("sync", "async"), ("sync", "async"), (False, True), ("inline", "async"))
         if supported(op, combo[0], combo[1])]


@pytest.mark.parametrize("op,modes", CASES, ids=[f"{op}-" + "-".join(str(v) for v in m.values()) for op, m in CASES])
def test_templates_rebuild_the_reference_graph(op: str, modes: dict[str, Any]) -> None:
    stateless = op == "map"
    engine = {"progress": {"mode": modes["progress"], "checkpoint_interval_ms": 0},
              "state_checkpoint": modes["state_checkpoint"], "pipelining": modes["pipelining"],
              "log_purge": {"mode": modes["log_purge"]}}
    sc = scenario(op, **engine)
    sources = len(SourceData.of(sc).partitions)
    fresh = fresh_plan(sources)
    expected = reference_graph(sc, fresh)
    assert simulator_graph(sc, fresh) == with_gates(expected)
    if not stateless:
        assert any(nid.step == "snapshot_upload" for nid in expected), "the scenario must exercise maintenance"
    data = SourceData.of(sc)
    later = RestartPlan(3, tuple(data.planned_end_offsets(2)), {}, None)
    assert simulator_graph(sc, later) == with_gates(reference_graph(sc, later))


def test_gates_hold_the_foreground_steps_of_each_task() -> None:
    sc = scenario("aggregate", state_checkpoint="async")
    sim = Simulation(sc, shipped_profile(), "data", trace_enabled=False)
    inc = sim.new_incarnation(fresh_plan(2), 0)
    graph = Graph(inc.shape, inc.nodes)
    batch = graph.add_batch(0, lambda _node: None)
    gates = [n for n in batch.by_slot if n is not None and n.kind == GATE]
    assert len(gates) == sc.state_partitions
    for gate in gates:
        steps = graph.task_steps(gate)
        assert [s.step for s in steps] == ["state_load", "task_apply", "sink_write"]
        assert all(s.kind == TASK_OWNED and s.partition == gate.partition for s in steps)
    background = {n.step for n in batch.nodes if n.partition >= 0 and n.background}
    assert background == {"changelog_write", "state_commit"}


class RecordingIncarnation(DataIncarnation):
    """A simulated incarnation whose step functions only record how they were called."""

    calls: list[tuple[str, tuple[int, ...]]] = []


def _recorder(step: str) -> Any:
    def record(self: RecordingIncarnation, *args: int) -> None:
        self.calls.append((step, args))
    return record


for _step in STEP_NAMES:
    setattr(RecordingIncarnation, f"step_{_step}", _recorder(_step))


def test_the_simulator_runs_a_node_as_the_reference_does() -> None:
    """``TimedIncarnation.run_node`` (the simulator's fast dispatch) calls what ``Incarnation.run_step`` calls."""
    sc = scenario("join", pipelining=True)
    sim = Simulation(sc, shipped_profile(), "data", trace_enabled=False)
    inc = RecordingIncarnation(sc, sim.data, DurableStorage(), fresh_plan(4), 0, Observer(), clock=sim.env,
                               profile=sim.profile, storage_service=sim.service, rng=sim.rng,
                               latency_book=sim.latency_book, mode_costs=sim.mode_costs)
    graph = Graph(inc.shape, inc.nodes)
    for b in sorted(inc.plans):
        graph.add_batch(b, lambda _node: None)
    nodes = [node for batch in graph.batches.values() for node in batch.nodes]
    assert {n.step for n in nodes} == set(STEP_NAMES)
    for node in nodes:
        RecordingIncarnation.calls = []
        inc.run_node(node)
        simulated = inc.calls
        RecordingIncarnation.calls = []
        inc.run_step(node.node_id)
        args = (node.batch,) if node.partition < 0 else (node.batch, node.partition)
        assert simulated == inc.calls == [(node.step, args)], node
