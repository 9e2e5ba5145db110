"""Log purge with Spark's storage operations (``reference.protocol.logs.PurgeRound``), hand-derived.

Spark's ``HDFSMetadataLog.purge(threshold)`` remembers the last round's threshold
(``lastPurgedBatchId``, in memory) and deletes the ids due since then by name when
there are at most three, listing the log directory only when more are due. The
threshold itself comes from memory too: ``MicroBatchExecution`` purges below the
current batch minus the retention, ``AsyncProgressTrackingMicroBatchExecution`` below
the oldest retained entry of its queue of durable entries. So a steady-state round
costs two deletes and no listing, which is what an object store's latency makes
visible; the reference now does exactly that, and the simulator charges it and the
engine pays it through the same code.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from reference.protocol import layout
from reference.protocol.incarnation import Incarnation
from reference.protocol.logs import PURGE_DELETE_WITHOUT_LIST, PurgeRound, purge_round, run_purge_round
from reference.protocol.run import run_scenario
from reference.language.scenario import Scenario
from reference.protocol.storage import DurableStorage


def test_a_round_is_due_from_the_last_threshold_and_lists_only_past_three() -> None:
    assert purge_round(None, -1) is None                  # nothing committed yet
    assert purge_round(0, -1) is None                     # threshold 0: nothing below it
    assert purge_round(4, 3) is None                      # the last round already purged below 4
    assert purge_round(2, 0) == PurgeRound(2, range(1, 2))
    assert PURGE_DELETE_WITHOUT_LIST == 3
    few, many, fresh = purge_round(4, 0), purge_round(5, 0), purge_round(5, -1)
    assert few is not None and few.due == range(1, 4) and not few.lists       # three ids: by name
    assert many is not None and many.due == range(1, 5) and many.lists        # four: the log is listed
    assert fresh is not None and fresh.due == range(0, 5)   # a new incarnation starts from nothing purged

class CountingStorage(DurableStorage):
    def __init__(self) -> None:
        super().__init__()
        self.listed: list[str] = []

    def list(self, prefix: str = "") -> list[str]:
        self.listed.append(prefix)
        return super().list(prefix)


def _storage_with(offsets: range, commits: range) -> CountingStorage:
    storage = CountingStorage()
    for b in offsets:
        storage.write(f"{layout.OFFSETS}/{b}", b"{}")
    for b in commits:
        storage.write(f"{layout.COMMITS}/{b}", b"{}")
    storage.listed.clear()
    return storage


def test_a_round_of_few_ids_deletes_them_by_name_without_listing() -> None:
    storage = _storage_with(range(0, 6), range(0, 5))
    deleted = run_purge_round(storage, PurgeRound(3, range(1, 3)), latest_commit=4)
    assert deleted == ["offsets/1", "offsets/2", "commits/1", "commits/2"]
    assert storage.listed == []
    # id 0 was not due (an earlier round's), so it stays, as in Spark
    assert sorted(storage.files) == ["commits/0", "commits/3", "commits/4", "offsets/0", "offsets/3", "offsets/4",
                                     "offsets/5"]


def test_a_round_of_many_ids_lists_and_deletes_everything_below_the_threshold() -> None:
    storage = _storage_with(range(2, 9), range(2, 8))
    deleted = run_purge_round(storage, PurgeRound(7, range(0, 7)), latest_commit=7)
    assert len(storage.listed) == 2                       # offsets/ and commits/, once each
    assert deleted == [f"offsets/{b}" for b in range(2, 7)] + [f"commits/{b}" for b in range(2, 7)]
    assert sorted(storage.files) == ["commits/7", "offsets/7", "offsets/8"]


class PurgeListings(Incarnation):
    """Records how many listings each purge step made."""

    per_round: list[int] = []

    def step_purge(self, b: int) -> None:
        storage = self.storage
        assert isinstance(storage, CountingStorage)
        before = len(storage.listed)
        super().step_purge(b)
        PurgeListings.per_round.append(len(storage.listed) - before)


def _eight_stateless_batches(engine: dict[str, Any]) -> Scenario:
    return Scenario.from_dict({
        "name": "purge-rounds", "seed": 2,
        "source": {"kind": "generated", "partitions": 1, "keys": 2, "records_per_partition_per_batch": 1,
                   "batches": 8, "event_time": {"start_ms": 0, "step_ms": 0}},
        "query": {"operator": {"kind": "map"}, "state_partitions": 1}, "sink": {"mode": "at_least_once"},
        "engine": engine})


def _logs(storage: DurableStorage) -> list[str]:
    return sorted(p for p in storage.files if p.startswith((layout.OFFSETS + "/", layout.COMMITS + "/")))


def test_a_steady_state_purge_lists_nothing_and_leaves_what_retention_keeps() -> None:
    # Sync progress, inline purge, retention 1, eight stateless batches. Round b's threshold is the
    # current batch minus one, capped at the latest commit (b - 1): rounds 0 and 1 have nothing to purge,
    # every later round deletes the one id below it by name. Only the first round lists the two logs, to
    # learn what an earlier life left (Spark's durable-entry queue starts from one listing too).
    scenario = _eight_stateless_batches({"progress": {"mode": "sync"},
                                         "log_purge": {"mode": "inline", "min_batches_to_retain": 1}})
    PurgeListings.per_round = []
    storage = CountingStorage()
    run_scenario(scenario, incarnation_class=PurgeListings, storage=storage)
    assert PurgeListings.per_round == [2, 0, 0, 0, 0, 0, 0, 0]
    assert _logs(storage) == ["commits/6", "commits/7", "offsets/6", "offsets/7"]


def test_under_async_progress_the_durable_entries_are_counted_and_two_stay() -> None:
    # Async progress, an entry persisted every 200 ms while batches are planned every 100 ms on the
    # reference's logical clock: offsets/ and commits/ hold batches 0, 2, 4 and 6. Retention 2 keeps the two
    # newest durable entries (AsyncProgressTrackingMicroBatchExecution.purge polls its queue down to
    # minBatchesToRetain): 4 and 6, each with its commit entry. Forgetting one more id than was deleted
    # would make a later round count 6 alone and delete 4.
    scenario = _eight_stateless_batches({"trigger_interval_ms": 100,
                                         "progress": {"mode": "async", "checkpoint_interval_ms": 200},
                                         "log_purge": {"mode": "inline", "min_batches_to_retain": 2}})
    storage = DurableStorage()
    run_scenario(scenario, storage=storage)
    assert _logs(storage) == ["commits/4", "commits/6", "offsets/4", "offsets/6"]


def test_a_round_is_a_value_that_nobody_can_change_after_it_was_decided() -> None:
    # a timed backend decides the round when purge starts and applies it when purge ends
    rnd = purge_round(4, 0)
    assert rnd is not None
    with pytest.raises(dataclasses.FrozenInstanceError):
        rnd.threshold = 9  # type: ignore[misc]


class PurgeRounds(Incarnation):
    """Records the round each purge step runs, and what the incarnation knows of its logs at its end."""

    rounds: list[tuple[int, PurgeRound | None]] = []
    known_at_end: dict[str, list[int]] = {}

    def purge_round_of(self, b: int) -> PurgeRound | None:
        rnd = super().purge_round_of(b)
        PurgeRounds.rounds.append((b, rnd))
        return rnd

    def step_commit_log_write(self, b: int) -> None:
        super().step_commit_log_write(b)
        PurgeRounds.known_at_end = self.known_logs()


def test_each_round_is_due_exactly_from_the_previous_threshold_and_the_incarnation_forgets_what_it_deleted() -> None:
    # The steady-state scenario above (sync progress, inline purge, retention 1): round b's threshold is b - 1.
    # A new incarnation has purged nothing (lastPurgedBatchId = -1), so round 2 is due from id 0; each later
    # round is due from the previous threshold: one id each, deleted by name.
    scenario = _eight_stateless_batches({"progress": {"mode": "sync"},
                                         "log_purge": {"mode": "inline", "min_batches_to_retain": 1}})
    PurgeRounds.rounds = []
    storage = DurableStorage()
    run_scenario(scenario, incarnation_class=PurgeRounds, storage=storage)
    assert PurgeRounds.rounds == [(0, None), (1, None)] + [(b, PurgeRound(b - 1, range(b - 2, b - 1)))
                                                           for b in range(2, 8)]
    # what it knows of its logs is what they hold: the ids it deleted are forgotten
    assert PurgeRounds.known_at_end == {layout.OFFSETS: [6, 7], layout.COMMITS: [6, 7]}
    assert _logs(storage) == ["commits/6", "commits/7", "offsets/6", "offsets/7"]


def test_a_restart_right_after_a_purge_finds_one_commit_entry_and_purges_against_it() -> None:
    # Three stateless batches, retention 1, the driver crashes right after batch 2's purge (threshold 1: offsets/0
    # and commits/0 deleted): the checkpoint holds offsets 1, 2 and commits 1 only. The restart re-runs batch 2;
    # its first round (threshold 1, due from id 0) is bounded by the one commit it knows, commits/1, and deletes
    # nothing more. At the end: offsets and commits 1 and 2.
    d = _eight_stateless_batches({"progress": {"mode": "sync"},
                                  "log_purge": {"mode": "inline", "min_batches_to_retain": 1}}).to_dict()
    d["source"]["batches"] = 3
    d["faults"] = [{"at": {"step": "purge", "batch": 2, "when": "after"}, "kind": "driver_crash"}]
    scenario = Scenario.from_dict(d)
    storage = DurableStorage()
    outcome = run_scenario(scenario, storage=storage).outcome()
    assert outcome.error is None
    assert [(r.resumed_at, r.rerun_batches) for r in outcome.recoveries] == [(2, (2,))]
    assert _logs(storage) == ["commits/1", "commits/2", "offsets/1", "offsets/2"]
