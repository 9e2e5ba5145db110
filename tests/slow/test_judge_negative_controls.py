"""Negative controls, as model-checking suites keep them: per engine mode, planted protocol bugs the explorer
must find within its default budget (``explorer.MAX_CUTS`` crash cuts, every single-fault placement).

Each bug is one step of the protocol done wrong, planted as model-checking
suites plant them: a subclass of ``reference.protocol.incarnation.Incarnation`` (or a
restart planner) overriding one step:

- ``commit_log_before_state_commit``: ``commits/b`` (and the sink) no longer
  wait for b's state commit, so a crash between them leaves a commit entry
  naming a version that is not durable;
- ``purge_past_latest_commit``: purge deletes every log entry below the latest
  offset entry, the latest commit entry among them while a batch is in flight;
- ``restart_skips_latest_offset_entry``: a restart resumes after the latest
  offset entry as though its batch had committed, instead of re-running it.

``NEEDED`` pins, per mode and bug, how many schedules the exploration ran
before its first violation (``Violation.order``, the position in the
exploration's order): the budget each control needed. A change that makes the
explorer find one later, or not at all, fails here.
"""

from __future__ import annotations

from dataclasses import replace
from unittest import mock

import pytest
from soak import soak_or_short

from reference.protocol import driver_steps, layout
from reference.language.catalogue import MODES, make
from reference.judge.explorer import Model, explore
from reference.protocol.graph import Node
from reference.protocol.incarnation import Incarnation
from reference.judge.bounds import bounds_of
from reference.protocol.logs import PurgeRound, purge_round, run_purge_round, threshold_of
from reference.protocol.recovery import RestartPlan, plan_restart
from reference.language.scenario import Scenario
from reference.language.steps import NodeId
from reference.protocol.storage import Storage

STATE_STEPS = ("changelog_write", "state_commit")


class CommitLogBeforeStateCommit(Incarnation):
    """``commits/b`` and b's sink wait for b's tasks to apply, not for b's state to be durable."""

    def build_graph(self) -> dict[NodeId, Node]:
        out = {}
        for node_id, node in super().build_graph().items():
            if node_id.step in ("commit_log_write", "sink_write"):
                deps = tuple(d for d in node.deps if d.step not in STATE_STEPS)
                if node_id.step == "sink_write":
                    deps = tuple(dict.fromkeys(deps + (NodeId.of("task_apply", node_id.batch, node_id.partition),)))
                node = Node(node_id, deps, node.background)
            out[node_id] = node
        return out

    def step_commit_log_write(self, b: int) -> None:
        for (batch, p), task in self.tasks.items():
            if batch == b:
                for sid, sealed in task.sealed.items():
                    self.lineage[(sid, p, b + 1)] = sealed.uid   # named before it is durable
        super().step_commit_log_write(b)


class PurgesPastTheLatestCommit(Incarnation):
    """Purge's threshold is the latest offset entry less ``min_batches_to_retain``, not capped at the latest
    commit entry (``logs.threshold_of`` caps it): with more batches in flight than retained, a purge deletes
    the latest commit entry, which recovery needs."""

    def next_purge_round(self) -> PurgeRound | None:
        known = self.known_logs()
        offsets, commits = known[layout.OFFSETS], known[layout.COMMITS]
        if not offsets or not commits:
            return None
        uncapped = threshold_of(offsets, offsets[-1:], self.cfg.min_batches_to_retain, self.cfg.progress_mode)
        return purge_round(uncapped, self.last_purged_batch)

    def purge_log_entries(self, rnd: PurgeRound | None) -> list[str]:
        def uncapped(storage: Storage, rnd: PurgeRound, latest_commit: int) -> list[str]:
            return run_purge_round(storage, rnd, latest_commit=rnd.threshold)
        with mock.patch.object(driver_steps, "run_purge_round", uncapped):   # its check of the cap, lifted
            return super().purge_log_entries(rnd)


def restart_skipping_latest_offset_entry(storage: Storage, progress_mode: str, source_partitions: int) -> RestartPlan:
    """Resume after the latest offset entry as though its batch had committed."""
    plan = plan_restart(storage, progress_mode, source_partitions)
    if not plan.fixed_offsets:
        return plan
    latest = max(plan.fixed_offsets)
    return replace(plan, first_batch=latest + 1, start_offsets=plan.fixed_offsets[latest][1], fixed_offsets={},
                   kept_through=latest)


BUGS: dict[str, Model] = {
    "commit_log_before_state_commit": Model(CommitLogBeforeStateCommit),
    "purge_past_latest_commit": Model(PurgesPastTheLatestCommit),
    "restart_skips_latest_offset_entry": Model(plan_restart_fn=restart_skipping_latest_offset_entry),
}


def scenario_for(mode: str, bug: str) -> Scenario:
    """The smallest catalogue scenario where the mode does something: a running count, a join's two stores
    for parallel store commit, the stateless map for async progress (Spark allows it only there). For the
    purge bug, ``min_batches_to_retain`` 1: the cap binds only when more batches are in flight than retained."""
    operator = {"async_progress": "map", "parallel_store_commit": "join"}.get(mode, "aggregate")
    if bug != "purge_past_latest_commit":
        return make(operator, mode, batches=3)
    # a restart without its commit entry re-runs from the oldest offset entry and finds the state files by
    # version, so only what the entry alone holds goes wrong: the watermark (a windowed aggregate), or, under
    # async progress, the start of the folded re-run (4 batches: one past the first persisted entry's cycle)
    operator = "map" if mode == "async_progress" else "window_aggregate"
    purge_mode = "async" if mode == "async_purge" else "inline"
    return make(operator, mode, batches=4 if mode == "async_progress" else 3,
                log_purge={"mode": purge_mode, "min_batches_to_retain": 1})


def applies(bug: str, mode: str) -> bool:
    """A state-commit bug needs state (the stateless query of async progress has none); the uncapped purge
    threshold passes the latest commit entry only where more batches can be planned and not committed than
    are retained (the step graph's bound, ``bounds.py``)."""
    if bug == "commit_log_before_state_commit":
        return mode != "async_progress"
    if bug == "purge_past_latest_commit":
        scenario = scenario_for(mode, bug)
        limits = bounds_of(scenario)
        return limits.planned_in_flight > scenario.engine.min_batches_to_retain
    return True


# position of the first violation in the exploration's order (schedules it needed), per (mode, bug). Under
# async progress the purge bug is convicted by replay_bound alone: the restart re-runs batches 0..3, four,
# where the graph allows three (the bound was four before it was read off the graph, and passed it).
NEEDED: dict[tuple[str, str], int] = {
    ("sync", "commit_log_before_state_commit"): 9,
    ("sync", "restart_skips_latest_offset_entry"): 1,
    ("async_purge", "commit_log_before_state_commit"): 8,
    ("async_purge", "restart_skips_latest_offset_entry"): 1,
    ("async_state", "commit_log_before_state_commit"): 15,
    ("async_state", "purge_past_latest_commit"): 118,
    ("async_state", "restart_skips_latest_offset_entry"): 1,
    ("pipelining", "commit_log_before_state_commit"): 34,
    ("pipelining", "purge_past_latest_commit"): 178,
    ("pipelining", "restart_skips_latest_offset_entry"): 1,
    ("delta_provider", "commit_log_before_state_commit"): 9,
    ("delta_provider", "restart_skips_latest_offset_entry"): 1,
    ("snapshot_provider", "commit_log_before_state_commit"): 9,
    ("snapshot_provider", "restart_skips_latest_offset_entry"): 1,
    ("async_progress", "purge_past_latest_commit"): 74,
    ("async_progress", "restart_skips_latest_offset_entry"): 11,
    ("parallel_store_commit", "commit_log_before_state_commit"): 13,
    ("parallel_store_commit", "restart_skips_latest_offset_entry"): 1,
}

CASES = [(mode, bug) for mode in MODES for bug in BUGS if applies(bug, mode)]
SHORT = [("sync", "commit_log_before_state_commit"), ("async_state", "purge_past_latest_commit"),
         ("async_progress", "restart_skips_latest_offset_entry")]


@pytest.mark.slow
@pytest.mark.soak
@pytest.mark.parametrize("mode, bug", soak_or_short(CASES, SHORT))
def test_the_explorer_finds_each_planted_protocol_bug_in_each_mode(mode, bug):
    scenario = scenario_for(mode, bug)
    report = explore(scenario, model=BUGS[bug])
    assert not report.truncated, "the default budget must hold the whole exploration"
    assert report.violations, f"{bug} went unnoticed under {mode}: {report.summary()}"
    first = report.violations[0]
    assert first.order == NEEDED[(mode, bug)], f"found after {first.order} schedules: {first.schedule}"


def test_every_mode_has_a_control_for_each_bug_that_applies():
    assert {mode for mode, _ in CASES} == set(MODES)
    assert {bug for _, bug in CASES} == set(BUGS)
    assert not applies("commit_log_before_state_commit", "async_progress")
    # by hand: one batch in flight under sync progress, so an uncapped threshold (latest offset entry - 1) is the
    # latest commit entry itself; two under async state checkpointing, pipelining and async progress
    assert [m for m in MODES if applies("purge_past_latest_commit", m)] == ["async_state", "pipelining",
                                                                           "async_progress"]


def test_the_correct_model_is_clean_on_the_control_scenarios():
    """The controls' scenarios pass on the correct model, so a violation is the bug's (the smallest, fast)."""
    for mode, bug in (("sync", "restart_skips_latest_offset_entry"), ("async_progress", "purge_past_latest_commit")):
        assert explore(scenario_for(mode, bug)).violations == []
