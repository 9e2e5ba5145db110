"""The explorer finds nothing wrong in the correct model, and catches planted mistakes.

Each planted mistake is a copy of one piece of the model with one real-world
bug put back in (a subclass overriding one method); the explorer must report a
violation for each.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from explorer_pins import assert_pinned
from soak import soak_or_short

from reference.protocol import layout
from reference.protocol.incarnation import Incarnation
from reference.protocol.graph import Node
from reference.judge.explorer import Model, explore
from reference.protocol.logs import OffsetEntry
from reference.judge.oracles import check_outcome, failures
from reference.protocol.run import Schedule, run_scenario
from reference.protocol.state_store import StateStore, store_files
from reference.language.steps import NodeId
from reference.language.catalogue import make, supported_pairs


# make test: every operator and every mode at least once (the bench's four pairs among them); make soak: all pairs
SHORT_PAIRS = [("map", "async_progress"), ("aggregate", "sync"), ("aggregate", "async_state"),
               ("window_aggregate", "pipelining"), ("join", "sync"), ("join", "parallel_store_commit"),
               ("dedup_within_watermark", "async_purge"), ("stateful_function", "snapshot_provider"),
               ("chain", "delta_provider"), ("dedup", "sync")]


@pytest.mark.slow
@pytest.mark.soak
@pytest.mark.parametrize("operator,mode", soak_or_short(supported_pairs(), SHORT_PAIRS))
def test_explorer_finds_nothing_wrong_in_the_correct_model(operator, mode):
    report = explore(make(operator, mode, batches=4, partitions=2))
    assert not report.truncated
    assert report.distinct_checkpoints > 0
    assert report.violations == [], "\n".join(v.describe() for v in report.violations[:3])
    assert_pinned(f"{operator}-{mode}", report)


# ----------------------------------------------------------- planted mistakes


class ForgetsDeletes(StateStore):
    """SPARK-55510: a delete changes the live state but never reaches the changelog."""

    def delete(self, key: str) -> None:
        self.data.pop(key, None)


class RerunsWithNewOffsets(Incarnation):
    """Sync progress, but a restarted batch takes whatever data is there now and rewrites its offset entry."""

    def _setup(self, restart):
        fixed = {b: (s, tuple(max(x, y) for x, y in zip(self.data.planned_end_offsets(b + 1), e)))
                 for b, (s, e) in restart.fixed_offsets.items()}
        super()._setup(replace(restart, fixed_offsets=fixed))

    def step_offset_log_write(self, b: int) -> None:
        plan = self.plans[b]
        self.storage.write(layout.offset_path(b), OffsetEntry(b, plan.start, plan.end).encode(), overwrite=True)
        self.persisted_offsets.add(b)


class CommitsBeforeStateIsDurable(Incarnation):
    """Async state checkpointing, but commits/b does not wait for b's state commit."""

    def build_graph(self) -> dict[NodeId, Node]:
        return {node_id: Node(node_id, tuple(d for d in node.deps if d.step != "state_commit"), node.background)
                if node_id.step == "commit_log_write" else node for node_id, node in super().build_graph().items()}

    def step_commit_log_write(self, b: int) -> None:
        for (batch, p), task in self.tasks.items():
            if batch == b:
                for sid, sealed in task.sealed.items():
                    self.lineage[(sid, p, b + 1)] = sealed.uid
        super().step_commit_log_write(b)


class PurgeIgnoresRetention(Incarnation):
    """Purge keeps only the newest log entry and the newest state version."""

    def step_purge(self, b: int) -> None:
        for folder in (layout.OFFSETS, layout.COMMITS):
            entries = sorted(int(p.split("/")[1]) for p in self.storage.list(folder + "/"))
            for batch in entries[:-1]:
                self.storage.delete(f"{folder}/{batch}")
        for (sid, p), store in self.stores.items():
            for (version, _uid, _kind), path in store_files(self.storage, sid, p).items():
                if version < store.version:
                    self.storage.delete(path)


class LoadsNewerSnapshot(StateStore):
    """A load starts from the newest snapshot on disk even when it is newer than the version asked for."""

    def load(self, version: int, uid: str | None = None) -> None:
        snapshots = sorted((v, u) for (v, u, k) in store_files(self.storage, self.op, self.partition)
                           if k == "snapshot")
        if snapshots and snapshots[-1][0] > version:
            super().load(*snapshots[-1])
            self.version = version
            return
        super().load(version, uid)


def with_store(store_class: type[StateStore]) -> type[Incarnation]:
    return type(f"IncarnationWith{store_class.__name__}", (Incarnation,), {"store_class": store_class})


PLANTED = {
    "changelog_forgets_deletes": (Model(with_store(ForgetsDeletes)),
                                  make("dedup_within_watermark", batches=4)),
    "rerun_with_new_offsets": (Model(RerunsWithNewOffsets), make("aggregate", batches=3)),
    "commit_before_state_durable": (Model(CommitsBeforeStateIsDurable),
                                    make("aggregate", "async_state", batches=3)),
    "purge_ignores_retention": (Model(PurgeIgnoresRetention), make("aggregate", batches=4, retain=3)),
    "load_uses_newer_snapshot": (Model(with_store(LoadsNewerSnapshot)),
                                 make("aggregate", batches=3, state_store={"provider": "changelog",
                                                                           "min_deltas_for_snapshot": 1,
                                                                           "maintenance_interval_ms": 100})),
}


@pytest.mark.parametrize("mistake", sorted(PLANTED))
def test_explorer_catches_planted_mistake(mistake):
    model, scenario = PLANTED[mistake]
    clean = explore(scenario)
    assert clean.violations == [], "the scenario must be clean on the correct model"
    report = explore(scenario, model=model)
    assert report.violations, f"planted mistake {mistake} went unnoticed in {report.summary()}"
    assert_pinned(f"planted-{mistake}", report)


def test_depth_two_adds_a_second_crash_during_recovery_and_finds_nothing_wrong():
    scenario = make("aggregate", batches=3)
    once, twice = explore(scenario), explore(scenario, depth=2)
    assert twice.schedules > once.schedules
    assert twice.violations == []
    assert_pinned("aggregate-sync-b3-depth2", twice)


@pytest.mark.slow
@pytest.mark.soak
@pytest.mark.parametrize("operator", soak_or_short(["aggregate", "window_aggregate"], ["window_aggregate"]))
def test_a_deeper_pipeline_is_sound_and_its_replay_bound_is_reached(operator):
    """pipeline_depth = 3: every cut recovers correctly, and some cut leaves three batches planned and
    uncommitted, so a restart re-runs three (the oracle's bound is tight, not loose)."""
    scenario = make(operator, "pipelining", batches=4, pipeline_depth=3)
    report = explore(scenario)
    assert not report.truncated
    assert report.violations == [], "\n".join(v.describe() for v in report.violations[:3])
    assert_pinned(f"{operator}-pipelining-depth3", report)
    plans = [step for b in range(3) for step in (NodeId.of("plan", b),
                                                  NodeId.of("offset_log_write", b))]
    result = run_scenario(scenario, schedule=Schedule(plans, crash_after_prefix=True))
    reruns = [list(r.rerun_batches) for r in result.outcome().recoveries]
    assert reruns == [[0, 1, 2]]
    assert failures(check_outcome(scenario, result.outcome(), result.storage, external_crashes=1)) == []
