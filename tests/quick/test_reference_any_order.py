"""Any topological order of the step graph is a legal execution, so it must give the same result.

``reference/protocol/graph.py`` promises that every order the graph allows is one a
backend may take: the simulator and the Spark engine run steps concurrently and
finish them in whatever order their threads do. The reference's own scheduler
and the explorer's crash runs take one order (creation order, or the explorer's
lazy variant), so an effect that depends on the order (a memo written under the
wrong batch, state read before the step that produces it) would pass every
canonical run and still break a backend. These tests run the same scenarios in
other orders:

- with no fault, the outcome is the canonical run's, field for field
  (``reference.judge.compare.first_difference``: boundaries, watermarks, state, sink),
  and every check holds on the checkpoint it leaves;
- with a driver crash after any prefix of such an order, the restarted run
  passes every check (the oracles compare it with the failure-free run).

The orders are drawn by a seeded ``random.Random`` (deterministic cases) or by
Hypothesis, so a failing case names the seed or shrinks to a short order.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reference.language.catalogue import scenario_dict, supported_pairs
from reference.judge.compare import first_difference
from reference.judge.explorer import Model, first_graph
from reference.judge.oracles import check_outcome, failures
from reference.protocol.run import Schedule, run_scenario
from reference.language.scenario import Scenario
from reference.language.steps import NodeId

# Every operator under every mode Spark allows, and a pipeline three batches deep (batch b + 2 may run its
# tasks before batch b commits).
CASES: list[tuple[str, str, int | None]] = [(op, mode, None) for op, mode in supported_pairs()] + \
    [(op, "pipelining", 3) for op, mode in supported_pairs() if mode == "pipelining"]


def scenario_of(operator: str, mode: str, depth: int | None, batches: int = 4) -> Scenario:
    d: dict[str, Any] = scenario_dict(operator, mode, batches=batches)
    if depth is not None:
        d["engine"]["pipeline_depth"] = depth
        d["name"] += f"-depth{depth}"
    return Scenario.from_dict(d)


def random_order(scenario: Scenario, rng: random.Random) -> list[NodeId]:
    """A topological order of the first incarnation's graph: at each step one of the ready nodes, at random."""
    inc = first_graph(scenario, Model())
    done: set[NodeId] = set()
    pending, order = list(inc.nodes), []
    while pending:
        ready = [n for n in pending if all(d in done for d in inc.nodes[n].deps)]
        node = rng.choice(ready)
        pending.remove(node)
        done.add(node)
        order.append(node)
    return order


def judged_failures(scenario: Scenario, schedule: Schedule) -> tuple[Any, list[str]]:
    finished = run_scenario(scenario, schedule=schedule)
    outcome = finished.outcome()
    crashes = int(schedule.crash_after_prefix)   # the schedule's crash is not one of the scenario's faults
    return outcome, [v.describe() for v in failures(check_outcome(scenario, outcome, finished.storage,
                                                                  external_crashes=crashes))]


def case_id(case: tuple[str, str, int | None]) -> str:
    op, mode, depth = case
    return f"{op}-{mode}" + (f"-depth{depth}" if depth else "")


def test_the_cases_cover_every_allowed_pair_and_a_deeper_pipeline():
    assert len(CASES) > len(supported_pairs()) and ("window_aggregate", "pipelining", 3) in CASES


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_a_failure_free_run_in_any_order_gives_the_canonical_outcome(case):
    scenario = scenario_of(*case)
    canonical = run_scenario(scenario).outcome()
    assert canonical.error is None and canonical.batches
    for seed in range(4):
        order = random_order(scenario, random.Random(seed))
        outcome, failed = judged_failures(scenario, Schedule(prefix=order))
        assert outcome.error is None, f"order seed {seed}: {outcome.error}"
        assert first_difference(canonical, outcome, scenario.sink_mode) is None, \
            f"order seed {seed}: {first_difference(canonical, outcome, scenario.sink_mode)}"
        assert failed == [], f"order seed {seed}: {failed}"


def test_the_orders_drawn_differ_from_creation_order():
    """Otherwise the test above would only repeat the canonical run."""
    scenario = scenario_of("window_aggregate", "pipelining", 3)
    canonical = list(first_graph(scenario, Model()).nodes)
    assert all(random_order(scenario, random.Random(seed)) != canonical for seed in range(4))


@given(case=st.sampled_from(CASES), rng=st.randoms(use_true_random=False), cut=st.floats(0.0, 1.0),
       batches=st.integers(2, 4))
def test_a_driver_crash_after_any_prefix_of_any_order_recovers_to_the_failure_free_result(case, rng, cut, batches):
    """The crash lands after ``cut`` of the order's steps; the supervisor restarts the query from what the
    prefix left, and every check compares the end result with the failure-free run."""
    scenario = scenario_of(*case, batches=batches)
    order = random_order(scenario, rng)
    prefix = order[:int(cut * len(order))]
    outcome, failed = judged_failures(scenario, Schedule(prefix=prefix, crash_after_prefix=True))
    assert failed == [], f"crash after {len(prefix)} of {len(order)} steps: {failed}"
    assert outcome.error is None
