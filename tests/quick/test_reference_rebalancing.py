"""State rebalancing in scenarios (issue 17, part 1): executor_join / executor_leave events on the reference.

The hand case: state partitions 0..3 start on executors a, b (round-robin: a b a b). ``c`` joins before
batch 2: the targets are a 2, b 1, c 1 (a and b both hold more than one; a is the lower id), b keeps its
home partition 1, and partition 3 (whose home over a, b, c is a, which is full) goes to the only room, c.
``a`` leaves before batch 4: b and c keep 1 and 3, partition 0 goes home to b, partition 2 (home b, now
full) to c. So the moves are: batch 2 p3 b->c; batch 4 p0 a->b and p2 a->c.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given, note
from hypothesis import strategies as st

from reference.language.catalogue import scenario_dict
from reference.protocol.graph import GraphShape
from reference.judge.oracles import check_outcome, failures
from reference.protocol.outcome import Outcome, OutcomeError, StateMove
from reference.protocol.rebalancing import PlacementTimeline
from reference.protocol.run import run_scenario
from reference.language.scenario import Scenario, ScenarioError
from reference.protocol.state_store import StateStore
from reference.language.steps import NodeId

JOIN_C_LEAVE_A = [{"kind": "executor_join", "executor": "c", "before_batch": 2},
                  {"kind": "executor_leave", "executor": "a", "before_batch": 4}]
HAND_MOVES = [(2, 3, "b", "c"), (4, 0, "a", "b"), (4, 2, "a", "c")]


def counts(mode: str = "sync", *, executors: list[str] | None = None, events: list[dict] | None = None,
           batches: int = 6, state_partitions: int = 4, faults: list[dict] | None = None) -> dict[str, Any]:
    d = scenario_dict("aggregate", mode, batches=batches, faults=faults)
    d["query"]["state_partitions"] = state_partitions
    d["executors"] = executors if executors is not None else ["a", "b"]
    d["events"] = JOIN_C_LEAVE_A if events is None else events
    return d


def moves_of(outcome: Outcome) -> list[tuple[int, int, str, str]]:
    return [(m.batch, m.partition, m.source, m.target) for m in outcome.moves]


# ------------------------------------------------------------- hand-derived moves


@pytest.mark.parametrize("mode", ["sync", "async_state", "pipelining", "delta_provider", "snapshot_provider"])
def test_a_join_then_a_leave_moves_the_hand_derived_partitions_and_every_oracle_holds(mode):
    scenario = Scenario.from_dict(counts(mode))
    finished = run_scenario(scenario)
    outcome = finished.outcome()
    assert outcome.error is None
    assert moves_of(outcome) == HAND_MOVES
    assert failures(check_outcome(scenario, outcome, finished.storage)) == []


class CountingStore(StateStore):
    """Records every load from the checkpoint: (store, partition, version)."""

    loads: list[tuple[str, int, int]] = []

    def load(self, version: int, uid: str | None = None) -> None:
        CountingStore.loads.append((self.op, self.partition, version))
        super().load(version, uid)


@pytest.mark.parametrize("mode", ["sync", "async_state"])
def test_a_moved_partition_loads_its_state_from_the_checkpoint_and_no_other_does(mode):
    """Without faults, a store is read from the checkpoint only when its partition moves: version b for a
    move at batch b (the state after batches 0..b-1)."""
    from reference.protocol.incarnation import Incarnation

    class Counting(Incarnation):
        store_class = CountingStore

    CountingStore.loads = []
    run_scenario(Scenario.from_dict(counts(mode)), incarnation_class=Counting)
    assert sorted(CountingStore.loads) == [("0", 0, 4), ("0", 2, 4), ("0", 3, 2)]


def test_without_events_nothing_moves_and_no_store_loads():
    from reference.protocol.incarnation import Incarnation

    class Counting(Incarnation):
        store_class = CountingStore

    CountingStore.loads = []
    outcome = run_scenario(Scenario.from_dict(counts(events=[])), incarnation_class=Counting).outcome()
    assert outcome.moves == () and CountingStore.loads == []


def test_under_async_state_checkpointing_a_moved_partition_waits_for_its_previous_commit():
    """state_load of b normally waits only for task_apply of b - 1; a moved partition's waits for b - 1's
    state commit too, since the new executor reads version b from the checkpoint."""
    shape = GraphShape.of(Scenario.from_dict(counts("async_state")))
    assert shape.moved == {(2, 3), (4, 0), (4, 2)}
    deps = {node.id: node.deps for node in shape.batch_nodes(2)}
    assert NodeId.of("state_commit", 1, 3) in deps[NodeId.of("state_load", 2, 3)]
    assert NodeId.of("state_commit", 1, 1) not in deps[NodeId.of("state_load", 2, 1)]


def test_a_crash_after_the_move_replans_the_batch_and_records_each_move_once():
    faults = [{"at": {"step": "sink_write", "batch": 2, "partition": 3, "when": "after"}, "kind": "driver_crash"}]
    scenario = Scenario.from_dict(counts(faults=faults))
    finished = run_scenario(scenario)
    outcome = finished.outcome()
    assert [r.resumed_at for r in outcome.recoveries] == [2]
    assert moves_of(outcome) == HAND_MOVES
    assert failures(check_outcome(scenario, outcome, finished.storage)) == []


def test_an_executor_loss_on_the_new_executor_retries_the_moved_task():
    faults = [{"at": {"step": "state_load", "batch": 2, "partition": 3, "when": "after"}, "kind": "executor_loss"}]
    scenario = Scenario.from_dict(counts(faults=faults))
    finished = run_scenario(scenario)
    outcome = finished.outcome()
    assert outcome.recoveries == () and outcome.faults_not_fired == ()
    assert failures(check_outcome(scenario, outcome, finished.storage)) == []


# ---------------------------------------------------------------------- explorer


# ---------------------------------------------------------------- the property


@st.composite
def membership(draw: st.DrawFn) -> tuple[list[str], list[dict[str, Any]]]:
    """Initial executors and a valid sequence of joins and leaves before batches 1..5."""
    pool = ["a", "b", "c", "d", "e"]
    present = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=3, unique=True))
    executors, events = list(present), []
    for batch in sorted(draw(st.lists(st.integers(1, 5), max_size=4))):
        joinable = [e for e in pool if e not in present]
        leave = len(present) > 1 and (not joinable or draw(st.booleans()))
        executor = draw(st.sampled_from(present if leave else joinable))
        events.append({"kind": "executor_leave" if leave else "executor_join", "executor": executor,
                       "before_batch": batch})
        present = [e for e in present if e != executor] if leave else present + [executor]
    return executors, events


@given(membership(), st.sampled_from(["sync", "async_state", "pipelining", "delta_provider"]),
       st.integers(1, 5))
def test_random_joins_and_leaves_keep_every_oracle_passing(members, mode, partitions):
    executors, events = members
    note(f"executors {executors}, events {events}, mode {mode}, {partitions} state partitions")
    scenario = Scenario.from_dict(counts(mode, executors=executors, events=events, state_partitions=partitions))
    finished = run_scenario(scenario)
    outcome = finished.outcome()
    assert outcome.error is None
    assert failures(check_outcome(scenario, outcome, finished.storage)) == []
    for move in outcome.moves:   # a move names an executor present before and one present after the event
        assert move.source != move.target


# ------------------------------------------------------------------ the oracle


def test_the_rebalancing_oracle_convicts_a_missing_move_and_a_wrong_target():
    scenario = Scenario.from_dict(counts())
    outcome = run_scenario(scenario).outcome()
    missing = dataclasses.replace(outcome, moves=outcome.moves[:2])
    bad = {v.check: v for v in failures(check_outcome(scenario, missing))}
    assert list(bad) == ["rebalancing"]
    assert (bad["rebalancing"].batch, bad["rebalancing"].partition) == (4, 2)
    assert bad["rebalancing"].actual is None
    wrong = dataclasses.replace(outcome, moves=(StateMove(2, 3, "b", "a"),) + outcome.moves[1:])
    bad = {v.check: v for v in failures(check_outcome(scenario, wrong))}
    assert list(bad) == ["rebalancing"]
    assert bad["rebalancing"].expected == {"batch": 2, "partition": 3, "from": "b", "to": "c"}
    assert bad["rebalancing"].actual == {"batch": 2, "partition": 3, "from": "b", "to": "a"}


def test_an_outcome_with_moves_round_trips_and_a_malformed_move_is_named():
    outcome = run_scenario(Scenario.from_dict(counts())).outcome()
    again = Outcome.from_json(outcome.to_json())
    assert again.moves == outcome.moves and again.to_json() == outcome.to_json()
    raw = outcome.to_dict()
    raw["moves"][1] = {"batch": 4, "partition": 0, "from": "a", "to": 7}
    with pytest.raises(OutcomeError, match=r"^moves\[1\]\.to: expected an executor id"):
        Outcome.from_dict(raw)


# ------------------------------------------------------------------- refusals


def refused(d: dict[str, Any]) -> ScenarioError:
    with pytest.raises(ScenarioError) as info:
        Scenario.from_dict(d)
    return info.value


@pytest.mark.parametrize("events,field,text", [
    ([{"kind": "executor_join", "executor": "b", "before_batch": 2}], "events[0].executor", "already present"),
    ([{"kind": "executor_leave", "executor": "z", "before_batch": 2}], "events[0].executor", "not present"),
    ([{"kind": "executor_leave", "executor": "a", "before_batch": 1},
      {"kind": "executor_leave", "executor": "b", "before_batch": 2}], "events[1].executor", "the last executor"),
    ([{"kind": "executor_join", "executor": "c", "before_batch": 2},
      {"kind": "executor_join", "executor": "c", "before_batch": 3}], "events[1].executor", "already present"),
    ([{"kind": "executor_crash", "executor": "c", "before_batch": 2}], "events[0].kind", "executor_join"),
    ([{"kind": "executor_join", "executor": "c", "before_batch": 6}], "events[0].before_batch", "never runs"),
    ([{"kind": "executor_join", "executor": "c", "before_batch": 0}], "events[0].before_batch", ">= 1"),
    ([{"kind": "executor_join", "executor": "c", "before_batch": 3},
      {"kind": "executor_join", "executor": "d", "before_batch": 2}], "events[1].before_batch", "batch order"),
    ([{"kind": "executor_join", "executor": "", "before_batch": 2}], "events[0].executor", "non-empty"),
    ([{"kind": "executor_join", "executor": "c", "before_batch": 2, "at": 1}], "events[0].at", "unknown field"),
    ({"kind": "executor_join"}, "events", "expected a list"),
])
def test_an_event_that_cannot_happen_is_refused_naming_the_field(events, field, text):
    error = refused(counts(events=events))
    assert error.field == field and text in str(error)


@pytest.mark.parametrize("executors,field", [([], "executors"), (["a", "a"], "executors[1]"),
                                             (["a", 3], "executors[1]"), ("ab", "executors")])
def test_bad_initial_executors_are_refused_naming_the_field(executors, field):
    assert refused(counts(executors=executors, events=[])).field == field


def test_executors_and_events_round_trip_and_the_default_is_left_out():
    d = counts()
    scenario = Scenario.from_dict(d)
    assert scenario.to_dict()["executors"] == ["a", "b"] and scenario.to_dict()["events"] == JOIN_C_LEAVE_A
    assert Scenario.from_dict(scenario.to_dict()) == scenario
    plain = scenario_dict("aggregate")
    assert "executors" not in Scenario.from_dict(plain).to_dict()
    assert Scenario.from_dict(plain).executors == ("0", "1")
    assert scenario.query_digest() == Scenario.from_dict(counts(events=[])).query_digest()   # not the query


def test_the_default_executors_keep_the_engines_partition_rule():
    """Without events the placement is partition p on executor p % 2, the reference model's rule."""
    from reference.protocol.rebalancing import PlacementTimeline
    timeline = PlacementTimeline(Scenario.from_dict(scenario_dict("aggregate")))
    assert [timeline.executor_at(7, p) for p in range(2)] == ["0", "1"]


def test_moves_at_a_batch_are_against_the_placement_of_the_batch_before_it():
    """Events before batches 2 and 3 in a row: c joins (partition 3 moves b -> c), then d joins: a holds 0 (at
    home) and 2 (home c, which is full), so 2 moves a -> d, the only executor with room. Batch 3's moves are
    against batch 2's placement, so partition 3's earlier move is not repeated."""
    events = [{"kind": "executor_join", "executor": "c", "before_batch": 2},
              {"kind": "executor_join", "executor": "d", "before_batch": 3}]
    timeline = PlacementTimeline(Scenario.from_dict(counts(events=events)))
    assert [(m.batch, m.partition, m.source, m.target) for m in timeline.moves()] == \
        [(2, 3, "b", "c"), (3, 2, "a", "d")]


@pytest.mark.parametrize("executors, events, named", [
    (None, [], False),                    # the default executors, no events: a backend keeps its own placement
    (["0", "1"], [], False),              # the default, spelled out
    (["a", "b"], [], True),               # executors of its own
    (["0", "1"], [{"kind": "executor_join", "executor": "2", "before_batch": 2}], True),   # events
])
def test_a_scenario_names_its_executors_when_it_lists_others_or_has_events(executors, events, named):
    d = counts(events=events)
    if executors is None:
        del d["executors"]
    else:
        d["executors"] = executors
    assert PlacementTimeline(Scenario.from_dict(d)).named is named


def test_the_rebalancing_oracle_convicts_an_extra_move_and_names_it():
    scenario = Scenario.from_dict(counts())
    outcome = run_scenario(scenario).outcome()
    extra = dataclasses.replace(outcome, moves=outcome.moves + (StateMove(5, 1, "b", "c"),))
    bad = {v.check: v for v in failures(check_outcome(scenario, extra))}
    assert list(bad) == ["rebalancing"]
    verdict = bad["rebalancing"]
    assert "move 3 differs" in verdict.message and "(3 expected, 4 recorded)" in verdict.message
    assert (verdict.batch, verdict.partition, verdict.expected) == (5, 1, None)
    assert verdict.actual == {"batch": 5, "partition": 1, "from": "b", "to": "c"}


def test_an_outcome_that_ran_no_batch_owes_no_move():
    """c joins before batch 1; a query that stopped before its first batch recorded no batch and no move, and
    the rebalancing check asks for none (the moves of batches it never planned are not owed)."""
    events = [{"kind": "executor_join", "executor": "c", "before_batch": 1}]
    scenario = Scenario.from_dict(counts(events=events))
    outcome = run_scenario(scenario).outcome()
    assert outcome.moves   # a full run moves partitions at batch 1
    stopped = dataclasses.replace(outcome, batches=(), moves=())
    verdicts = {v.check: v for v in check_outcome(scenario, stopped)}
    assert verdicts["rebalancing"].status == "pass", verdicts["rebalancing"].describe()
