"""Parallel state commits of a join's two stores (issue 17, part 3) on the reference model.

Spark OSS commits a partition's stores one after the other inside its task
(``StreamingSymmetricHashJoinExec`` commits the left side's state manager,
then the right's); Lightspeed commits them in parallel. With
``engine.parallel_store_commit`` each store's ``changelog_write`` and
``state_commit`` are nodes of their own, so the explorer sees every
interleaving and every crash between the two; the partition's version is
committed (``commits/b`` may name it) only once both stores are.
"""

from __future__ import annotations

from itertools import combinations
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
import pytest

from reference.protocol import layout
from reference.language.catalogue import make, scenario_dict
from reference.judge.compare import first_difference
from reference.protocol.incarnation import Incarnation
from reference.judge.explorer import WRITING, Model, count_writing_cuts, explore, first_graph
from reference.protocol.graph import Node
from reference.judge.oracles import check_outcome, failures
from reference.protocol.run import Run, run_scenario
from reference.language.scenario import Scenario, ScenarioError
from reference.language.steps import NodeId


def _join(parallel: bool, **kw: Any) -> Scenario:
    return make("join", "sync", parallel_store_commit=parallel, **kw)


def _brute_force_cuts(inc: Incarnation) -> int:
    """Every non-empty set of writing steps that holds, with each step, every writing step it waits for:
    all 2^n subsets tried, nothing shared with the explorer's enumeration but the graph's edges."""
    ancestors: dict[NodeId, set[NodeId]] = {}
    for node in inc.nodes:   # creation order is a topological order
        ancestors[node] = set(inc.nodes[node].deps).union(*(ancestors[d] for d in inc.nodes[node].deps))
    writers = [n for n in inc.nodes if n.step in WRITING]
    count = 0
    for size in range(1, len(writers) + 1):
        for chosen in combinations(writers, size):
            inside = set(chosen)
            if all(a in inside for w in chosen for a in ancestors[w] if a.step in WRITING):
                count += 1
    return count


@pytest.mark.parametrize("parallel, expected", [(False, 12), (True, 28)])
def test_crash_cuts_of_a_one_batch_join_counted_by_hand_and_by_brute_force(parallel, expected):
    """One batch, two state partitions. The writers: offsets (O), purge (U) after O, per partition p the
    changelog (C_p) after U and the sink part (S_p) after C_p, the manifest (K) after S_0 and S_1, the
    commit entry (L) after K. Down-sets: {O}; then O and U with, per partition, nothing, C_p or C_p S_p
    (3 x 3 = 9), then K, then L: 1 + 9 + 2 = 12. In parallel each C_p is two changelogs, left and right,
    neither after the other, and S_p waits for both: per partition nothing, L, R, LR or LR S (5 x 5 = 25),
    so 1 + 25 + 2 = 28."""
    inc = first_graph(_join(parallel, batches=1), Model())
    assert _brute_force_cuts(inc) == expected
    assert count_writing_cuts(inc) == (expected, False)


def test_each_store_commits_on_its_own_nodes_and_the_partition_waits_for_both():
    inc = first_graph(_join(True, batches=1), Model())
    n = NodeId.of
    left, right = n("state_commit", 0, 0, "0.left"), n("state_commit", 0, 0, "0.right")
    assert inc.nodes[n("changelog_write", 0, 0, "0.left")].deps == (n("task_apply", 0, 0),)
    assert inc.nodes[n("changelog_write", 0, 0, "0.right")].deps == (n("task_apply", 0, 0),)
    assert set(inc.nodes[n("state_commit", 0, 0)].deps) == {left, right}
    assert n("changelog_write", 0, 0) not in inc.nodes
    sequential = first_graph(_join(False, batches=1), Model())
    assert not any(node.tag for node in sequential.nodes), "Spark OSS: one commit node per partition"


def test_a_one_store_query_has_nothing_to_commit_in_parallel():
    on = first_graph(make("aggregate", "sync", batches=2, parallel_store_commit=True), Model())
    off = first_graph(make("aggregate", "sync", batches=2), Model())
    assert list(on.nodes) == list(off.nodes)


def _crash_between_commits() -> Scenario:
    d = scenario_dict("join", "sync", batches=3, parallel_store_commit=True,
                      faults=[{"kind": "driver_crash", "at": {"step": "changelog_write", "batch": 1, "partition": 0,
                                                              "when": "after"}}])
    return Scenario.from_dict(d)


def test_a_crash_between_the_two_store_commits_is_recovered_exactly_once():
    """``after changelog_write b1 p0`` fires after the first store's write: the left side's version 2 is on
    storage, the right side's is not, and commits/1 is not written. The restart re-runs batch 1 under a
    new attempt; every oracle holds and the outcome is the sequential commit's."""
    scenario = _crash_between_commits()
    run = Run(scenario)
    run.life()
    files = run.storage.files
    assert layout.state_file("0.left", 0, 2, "r0b1p0a0", "changelog") in files
    assert layout.state_file("0.right", 0, 2, "r0b1p0a0", "changelog") not in files
    assert layout.commit_path(1) not in files
    finished = run.finish()
    outcome = finished.outcome()
    assert outcome.error is None and len(outcome.recoveries) == 1
    bad = failures(check_outcome(scenario, outcome, finished.storage))
    assert not bad, "\n".join(v.describe() for v in bad)
    commit = run_scenario(_join(False, batches=3)).outcome()
    assert first_difference(commit, outcome, scenario.sink_mode) is None


class OneStoreCommitsThePartition(Incarnation):
    """Planted: a partition's version counts as committed as soon as one of its stores has committed; the
    commit log may then name the other store's version before its file is written."""

    def build_graph(self) -> dict[NodeId, Node]:
        return {nid: Node(nid, node.deps[:1], node.background)
                if nid.step == "state_commit" and not nid.tag and self.shape.commit_stores else node
                for nid, node in super().build_graph().items()}

    def step_state_commit(self, b: int, p: int, store: str | None = None) -> None:
        super().step_state_commit(b, p, store)
        if store is not None:
            for sid in self.store_ids:
                self.lineage.setdefault((sid, p, b + 1), self.uid(b, p))


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 10_000), batch=st.integers(0, 2), partition=st.integers(0, 1),
       step=st.sampled_from(["changelog_write", "state_commit"]), when=st.sampled_from(["before", "after"]),
       kind=st.sampled_from(["driver_crash", "task_failure", "executor_loss"]),
       mode=st.sampled_from(["sync", "async_state", "pipelining"]))
def test_parallel_and_sequential_commits_give_the_same_outcome(seed, batch, partition, step, when, kind, mode):
    """Whatever fault lands at a commit step, committing the stores in parallel changes when things happen,
    never what the query computes: both pass every oracle and agree batch for batch."""
    fault = {"kind": kind, "at": {"step": step, "batch": batch, "partition": partition, "when": when}}
    outcomes = []
    for parallel in (False, True):
        scenario = Scenario.from_dict(scenario_dict("join", mode, seed=seed, batches=3, faults=[fault],
                                                    parallel_store_commit=parallel))
        finished = run_scenario(scenario)
        outcome = finished.outcome()
        bad = failures(check_outcome(scenario, outcome, finished.storage))
        assert not bad, "\n".join(v.describe() for v in bad)
        outcomes.append(outcome)
    assert first_difference(outcomes[0], outcomes[1], "exactly_once") is None


def test_a_parallel_store_commit_that_is_not_a_boolean_is_refused_by_name():
    d = scenario_dict("join", "sync", parallel_store_commit="yes")
    with pytest.raises(ScenarioError, match="engine.parallel_store_commit"):
        Scenario.from_dict(d)
    assert _join(True).engine.to_dict()["parallel_store_commit"] is True
    assert "parallel_store_commit" not in _join(False).engine.to_dict()
