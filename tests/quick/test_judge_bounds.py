"""Every number the judge enforces comes from the step graph (``reference/judge/bounds.py``), never from a table of modes.

The expected numbers here are derived by hand from the protocol (spec section 2
and ``reference/protocol/graph.py``'s edges), each with its derivation, not read from
the code under test.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from reference.judge import bounds as bounds_module
from reference.judge.bounds import Bounds, UnboundedGraph, bounds_of, most_not_waiting
from reference.language.catalogue import make
from reference.judge.checkpoint_rules import violations
from reference.protocol.graph import Node, shape_of
from reference.judge.oracles import Context, check_outcome, failures, recoveries
from reference.protocol.outcome import Outcome, Recovery
from reference.protocol.run import run_scenario
from reference.language.scenario import Scenario
from reference.language.steps import NodeId


def re_run(outcome: Outcome, *batches: int) -> Outcome:
    planned = tuple(dataclasses.replace(b, attempts=b.attempts + 1) if b.id in batches else b
                    for b in outcome.batches)
    return dataclasses.replace(outcome, batches=planned, recoveries=(
        Recovery(restart=1, resumed_at=batches[0], rerun_batches=tuple(batches)),))


def failed(scenario: Any, outcome: Outcome, crashes: int = 0) -> dict[str, Any]:
    return {v.check: v for v in failures(check_outcome(scenario, outcome, external_crashes=crashes))}


def test_a_stateless_query_under_async_state_checkpointing_re_runs_at_most_one_batch():
    """By hand: a stateless query has no state to checkpoint, so ``state_checkpoint: async`` leaves its graph
    the synchronous one (``GraphShape.async_state`` is false): ``plan`` of b+1 waits for ``source_commit`` of b,
    which waits for ``commit_log_write`` of b. So when ``offsets/b+1`` is written, ``commits/b`` is: one batch
    is in flight, and a restart re-runs one. (The bound used to be 2, from the mode alone.)"""
    scenario = make("map", "async_state", batches=5)
    assert not shape_of(scenario).async_state   # type: ignore[attr-defined]
    assert bounds_of(scenario).in_flight == 1
    outcome = run_scenario(scenario).outcome()
    assert failed(scenario, re_run(outcome, 2), crashes=1) == {}
    bad = failed(scenario, re_run(outcome, 2, 3), crashes=1)
    assert list(bad) == ["replay_bound"] and bad["replay_bound"].expected == 1


def test_pipelining_with_async_state_checkpointing_keeps_the_pipeline_depth_in_flight():
    """By hand: under pipelining ``plan`` of b waits for ``source_commit`` of b - depth, whatever the state
    checkpointing; ``commits/b`` waits for b's state commit. So at most ``pipeline_depth`` (2) batches are
    planned and not committed: the async state commit adds no batch on top (the bound used to be 3)."""
    scenario = make("aggregate", "pipelining", batches=5, state_checkpoint="async")
    assert bounds_of(scenario).in_flight == 2
    outcome = run_scenario(scenario).outcome()
    assert failed(scenario, re_run(outcome, 1, 2), crashes=1) == {}
    assert list(failed(scenario, re_run(outcome, 1, 2, 3), crashes=1)) == ["replay_bound"]


@pytest.mark.parametrize("operator, mode, extra, in_flight, pending", [
    # sync: plan b+1 after source_commit b (after commits/b): 1 in flight, state commits inline
    ("aggregate", "sync", {}, 1, 0),
    # async state: plan b+1 after sink_commit b and commits/b-1; state_load b+2 after state_commit b
    ("aggregate", "async_state", {}, 2, 1),
    ("join", "async_state", {}, 2, 1),
    # pipelining: plan b after source_commit b - depth
    ("aggregate", "pipelining", {}, 2, 0),
    ("aggregate", "pipelining", {"pipeline_depth": 3}, 3, 0),
    ("map", "pipelining", {"pipeline_depth": 4}, 4, 0),
    # the other features change no edge between plan and the commit log
    ("aggregate", "async_purge", {}, 1, 0),
    ("aggregate", "delta_provider", {}, 1, 0),
    ("join", "parallel_store_commit", {}, 1, 0),
])
def test_in_flight_and_pending_state_commits_by_hand(operator, mode, extra, in_flight, pending):
    b = bounds_of(make(operator, mode, **extra))
    assert (b.in_flight, b.pending_state_commits) == (in_flight, pending)


def test_async_progress_re_runs_the_batches_between_persisted_entries_and_those_in_flight():
    """By hand: ``checkpoint_interval_ms`` 200 on the 100 ms logical batch clock persists every 2nd entry: the
    latest persisted entry L is 2 batches after the previous one P. Under async progress ``plan`` of b waits
    for ``commit_log_write`` of b - 2, so with commits/L not written the newest batch planned is L + 1: a
    restart re-runs P+1..L+1, 3 batches (2 + 2 - 1). Under pipelining at depth 3, L + 2: 4."""
    assert bounds_of(make("map", "async_progress")).async_progress_rerun == 3
    assert bounds_of(make("map", "async_progress", pipelining=True, pipeline_depth=3)).async_progress_rerun == 4
    assert bounds_of(make("map", "async_progress", trigger_interval_ms=300)).async_progress_rerun == 2
    assert bounds_of(make("map")).async_progress_rerun is None


@pytest.mark.parametrize("mode, extra, ceiling", [
    # sync, retain 3: purge b-1 cut below b-1-3, offsets/b is written before purge b: 3 + 1 + 1 entries
    ("sync", {}, 5),
    # pipelining: offsets/b and offsets/b+1 may be written before purge b (plan b+1 waits for offsets/b only)
    ("pipelining", {}, 6),
    # retain 1 under depth 3: the commit log (3 behind) holds the threshold back, not the retention
    ("pipelining", {"pipeline_depth": 3, "retain": 1}, 3 + 3 + 1),
    ("async_purge", {}, None),
])
def test_the_log_entries_purge_keeps_by_hand(mode, extra, ceiling):
    b = bounds_of(make("aggregate", mode, **extra))
    retain = extra.get("retain", 2 if mode == "async_purge" else 3)
    assert b.offset_entries_kept == retain + 1 and b.versions_kept == retain
    assert b.offset_entries_ceiling == ceiling


@pytest.mark.parametrize("mode, extra, kept", [
    # purge at offsets/L cut below L - retain, and L - C <= in flight: retain + 1 - in_flight commit entries stay
    ("sync", {}, 3 + 1 - 1),
    ("async_state", {}, 3 + 1 - 2),
    # depth 3 at retain 1: 1 + 1 - 3 is below one, but purge never passes the latest commit entry: one stays
    ("pipelining", {"pipeline_depth": 3, "retain": 1}, 1),
])
def test_the_commit_entries_purge_keeps_by_hand(mode, extra, kept):
    assert bounds_of(make("aggregate", mode, **extra)).commit_entries_kept == kept


def test_a_step_the_graph_does_not_have_counts_nothing():
    assert most_not_waiting(shape_of(make("map")), "state_commit", "task_apply", 0) == 0


def test_one_state_partition_has_its_pending_commit_too():
    d = json.loads(json.dumps(make("aggregate", "async_state").to_dict()))
    d["query"]["state_partitions"] = 1
    assert bounds_of(Scenario.from_dict(d)).pending_state_commits == 1


def test_a_deep_pipeline_is_read_off_a_longer_graph():
    """Depth 8 keeps 8 batches in flight: more than half the first graph read (8 batches), so a longer one."""
    assert bounds_of(make("map", "pipelining", pipeline_depth=8)).in_flight == 8
    assert bounds_of(make("map", "pipelining", pipeline_depth=9)).planned_in_flight == 9


def test_bounds_are_values():
    b = bounds_of(make("aggregate"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        b.in_flight = 5   # type: ignore[misc]
    counts = bounds_module.graph_counts(shape_of(make("aggregate")))
    with pytest.raises(dataclasses.FrozenInstanceError):
        counts.in_flight = 5   # type: ignore[misc]
    assert b.to_dict()["in_flight"] == 1 and set(b.to_dict()) == {f.name for f in dataclasses.fields(Bounds)}


def test_the_async_purge_ceiling_is_unbounded_because_nothing_waits_for_a_purge_round():
    scenario = make("aggregate", "async_purge")
    assert (bounds_of(scenario).purge_lag, bounds_of(scenario).offset_entries_ceiling) == (None, None)


# ---------------------------------------------------------------- a new shape brings its own numbers


@dataclasses.dataclass(frozen=True)
class _Wrapped:
    """Another shape made from the micro-batch one: what it does not say itself, the inner shape says."""

    inner: Any

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class _Unhashable(_Wrapped):
    """The same, not hashable: its counts are read every time."""

    __hash__ = None   # type: ignore[assignment]


class _Detached(_Wrapped):
    """A shape whose batches wait for nothing of the batch before: the graph bounds nothing."""

    def batch_nodes(self, b: int) -> list[Node]:
        return [Node(n.id, tuple(d for d in n.deps if d.batch == b), n.background) for n in self.inner.batch_nodes(b)]


def test_a_graph_that_bounds_nothing_is_refused_by_name():
    """Every batch of a detached graph runs before any other's commit: read up to 64 batches, then refused."""
    shape = _Detached(shape_of(make("aggregate")))
    with pytest.raises(UnboundedGraph) as refused:
        most_not_waiting(shape, "commit_log_write", "offset_log_write")
    assert str(refused.value) == ("the step graph lets 64 batches run offset_log_write before commit_log_write of "
                                  "an earlier one in 64 batches: it bounds nothing")


def test_a_shape_that_is_not_hashable_is_still_read(monkeypatch):
    monkeypatch.setattr(bounds_module, "shape_of", lambda scenario: _Unhashable(shape_of(scenario)))
    assert bounds_of(make("aggregate", "async_state")).in_flight == 2


def test_a_shape_that_supplies_its_own_bounds_is_read_first(monkeypatch):
    own = Bounds(in_flight=7, pending_state_commits=0, planned_in_flight=7, async_progress_rerun=None,
                 copies_per_rerun=1, offset_entries_kept=4, commit_entries_kept=1, purge_lag=1,
                 offset_entries_ceiling=None, versions_kept=3)

    @dataclasses.dataclass(frozen=True)
    class OwnShape:
        inner: Any

        def judge_bounds(self, scenario: Any) -> Bounds:
            return own

    monkeypatch.setattr(bounds_module, "shape_of", lambda scenario: OwnShape(shape_of(scenario)))
    assert bounds_of(make("aggregate")) is own


def test_a_derived_shape_is_read_off_its_own_graph(monkeypatch):
    """A new shape (say another mode's) whose ``plan`` waits for the commit of the batch three back gets an
    in-flight bound of 3 from its graph alone, with no table to update."""

    class ThreeBack(_Wrapped):
        def batch_nodes(self, b: int) -> list[Node]:
            out = []
            for n in self.inner.batch_nodes(b):
                deps = n.deps
                if n.id.step == "plan":
                    deps = (NodeId.of("plan", b - 1), NodeId.of("source_commit", b - 3))
                out.append(Node(n.id, deps, n.background))
            return out

    monkeypatch.setattr(bounds_module, "shape_of", lambda scenario: ThreeBack(shape_of(scenario)))
    assert bounds_of(make("map", batches=7)).in_flight == 3


# ---------------------------------------------------------------- log_retention, both ways


@pytest.fixture(scope="module")
def count() -> tuple[Any, Any]:
    """5 batches, retain 3, inline purge: offsets/1..4 and commits/1..4 stay."""
    scenario = make("aggregate", batches=5, retain=3)
    return scenario, run_scenario(scenario).storage


def test_log_retention_convicts_a_purge_that_cut_below_the_floor(count):
    scenario, storage = count
    over = storage.copy()
    over.delete("offsets/1")
    over.delete("commits/1")
    assert violations(over, scenario) == [("log_retention", "offsets/1 is purged while offsets/4 exists: purge keeps "
                                                            "the newest 4 offset entries")]


def test_log_retention_convicts_an_inline_purge_that_kept_more_than_its_ceiling(count):
    scenario, storage = count
    longer = make("aggregate", batches=5, retain=10)
    kept = run_scenario(longer).storage
    under = storage.copy()
    for path in ("offsets/0", "commits/0"):
        under.write(path, kept.read(path))
    crashed = under.copy()
    crashed.write("offsets/5", b'v1\n{"batch":5,"start_offsets":[15,15],"end_offsets":[15,15]}')
    assert violations(under, scenario) == []   # 5 entries: a crash between offsets/b and purge b leaves so many
    assert violations(crashed, scenario) == [("log_retention", "6 offset entries (offsets/0 to offsets/5) are kept; "
                                                               "inline purge keeps at most 5")]
    assert violations(crashed, make("aggregate", "async_purge", batches=5, retain=3)) == []


def test_log_retention_counts_the_floor_from_the_first_batch():
    """4 batches, retain 3: offsets/0..3 are the newest 4, so offsets/0 must stay."""
    scenario = make("aggregate", batches=4, retain=3)
    storage = run_scenario(scenario).storage
    storage.delete("offsets/0")
    storage.delete("commits/0")
    assert violations(storage, scenario) == [("log_retention", "offsets/0 is purged while offsets/3 exists: purge "
                                                               "keeps the newest 4 offset entries")]


def test_a_row_beyond_its_copies_is_shown_ten_rows_at_most():
    d = json.loads(json.dumps(make("map", batches=3, sink="at_least_once").to_dict()))
    d["source"].update(records_per_partition_per_batch=8, keys=100)
    scenario = Scenario.from_dict(d)
    outcome = run_scenario(scenario).outcome()
    rows = next(e.rows for e in outcome.sink if e.batch == 1)
    assert len(set(map(repr, rows))) > 10
    thrice = dataclasses.replace(outcome, sink=tuple(dataclasses.replace(e, rows=e.rows * 3) if e.batch == 1 else e
                                                     for e in outcome.sink))
    bad = failed(scenario, re_run(thrice, 1), crashes=1)
    assert list(bad) == ["output_semantics"] and len(bad["output_semantics"].actual) == 10
    assert bad["output_semantics"].expected == 2


def test_a_context_made_directly_counts_no_crash_from_outside():
    scenario = make("aggregate", batches=3)
    outcome = run_scenario(scenario).outcome()
    restarted = dataclasses.replace(outcome, recoveries=(Recovery(1, 3, ()),))
    assert recoveries(Context(scenario, restarted)).status == "fail"
