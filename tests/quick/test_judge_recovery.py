"""Where a restarted query resumes, from hand-written logs (reference/protocol/recovery.py, spec section 2).

Found by mutation testing the judge: the restart plan was pinned only through
whole runs. Here each log layout is written by hand and the plan spelled out:
the first batch, its start offsets, the batches re-run with their logged
offsets, the restored trackers and lineage, and the version state resumes at.
"""

from __future__ import annotations

import dataclasses

import pytest

from reference.protocol import layout
from reference.protocol.logs import CommitEntry, OffsetEntry
from reference.protocol.recovery import RestartPlan, plan_restart
from reference.protocol.storage import CheckpointFormatError, DurableStorage

LINEAGE = {"0": {"0": "r0b1p0a0", "1": "r0b1p1a0"}}
TRACKERS = [{"watermark_ms": 40, "max_event_ms": {"left": 55, "right": 70}}]


def logs(offsets: dict[int, tuple[tuple[int, ...], tuple[int, ...]]], commits: list[int]) -> DurableStorage:
    storage = DurableStorage()
    for batch, (start, end) in offsets.items():
        storage.write(layout.offset_path(batch), OffsetEntry(batch, start, end).encode())
    for batch in commits:
        storage.write(layout.commit_path(batch), CommitEntry(batch, 40, TRACKERS, LINEAGE).encode())
    return storage


# batch b reads offsets [3b, 3b + 3) of each of two source partitions
STEADY = {b: ((3 * b, 3 * b), (3 * b + 3, 3 * b + 3)) for b in range(5)}
RESTORED = [{"watermark_ms": 40, "max_event_ms": {}}]   # the watermark survives; per-input maxima do not


def test_an_empty_checkpoint_starts_from_the_beginning():
    assert plan_restart(DurableStorage(), "sync", 2) == RestartPlan(0, (0, 0), {}, None)


def test_commits_without_any_offset_entry_are_refused():
    with pytest.raises(CheckpointFormatError, match=r"^commits/3: commit entry without any offset entry$"):
        plan_restart(logs({}, [2, 3]), "sync", 2)


def test_a_commit_newer_than_the_latest_offset_entry_is_refused():
    storage = logs({0: STEADY[0], 1: STEADY[1]}, [0])
    storage.write(layout.commit_path(2), CommitEntry(2, 0, [], {}).encode())
    with pytest.raises(CheckpointFormatError, match=r"^commits/2: commit entry newer than the latest offset entry 1$"):
        plan_restart(storage, "sync", 2)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_everything_committed_runs_the_next_batch(mode):
    plan = plan_restart(logs({b: STEADY[b] for b in range(3)}, [0, 1, 2]), mode, 2)
    assert plan == RestartPlan(3, (9, 9), {}, RESTORED, LINEAGE, 3, 2)


def test_sync_re_runs_every_planned_uncommitted_batch_with_its_logged_offsets():
    plan = plan_restart(logs({b: STEADY[b] for b in range(4)}, [0, 1]), "sync", 2)
    assert plan == RestartPlan(2, (6, 6), {2: ((6, 6), (9, 9)), 3: ((9, 9), (12, 12))}, RESTORED, LINEAGE, 2, 1)


def test_sync_with_nothing_committed_re_runs_from_the_oldest_offset_entry():
    plan = plan_restart(logs({0: STEADY[0], 1: STEADY[1]}, []), "sync", 2)
    assert plan == RestartPlan(0, (0, 0), {0: ((0, 0), (3, 3)), 1: ((3, 3), (6, 6))}, None, {}, 0, -1)


def test_sync_refuses_a_hole_in_the_offsets_it_must_re_run():
    with pytest.raises(CheckpointFormatError, match=r"^offsets/2: missing; cannot re-run batch 2$"):
        plan_restart(logs({0: STEADY[0], 1: STEADY[1], 3: STEADY[3]}, [0]), "sync", 2)


def test_async_folds_the_unlogged_batches_into_the_latest_one():
    """Offsets persisted for 0, 2 and 4, commits for 0 and 2: batch 4 re-runs from where 2 ended, taking
    batch 3's input with it."""
    plan = plan_restart(logs({0: STEADY[0], 2: STEADY[2], 4: STEADY[4]}, [0, 2]), "async", 2)
    assert plan == RestartPlan(4, (9, 9), {4: ((9, 9), (15, 15))}, RESTORED, LINEAGE, 3, 2)


def test_async_with_one_uncommitted_entry_starts_from_zero():
    plan = plan_restart(logs({3: STEADY[3]}, []), "async", 2)
    assert plan == RestartPlan(3, (0, 0), {3: ((0, 0), (12, 12))}, None, {}, 0, -1)


def test_restoring_trackers_does_not_touch_the_commit_entry():
    storage = logs({0: STEADY[0]}, [0])
    plan_restart(storage, "sync", 2)
    assert CommitEntry.read(storage, 0).next_trackers == TRACKERS


def test_a_fresh_plan_keeps_nothing_and_resumes_at_version_zero_and_plans_are_frozen():
    plan = plan_restart(DurableStorage(), "sync", 3)
    assert (plan.first_batch, plan.start_offsets, plan.lineage, plan.lineage_version, plan.kept_through) == \
        (0, (0, 0, 0), {}, 0, -1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.first_batch = 1   # type: ignore[misc]


def test_errors_and_async_folds_name_the_newest_entry_of_several():
    with pytest.raises(CheckpointFormatError, match=r"^commits/3: commit entry without any offset entry$"):
        plan_restart(logs({}, [1, 2, 3]), "sync", 2)
    plan = plan_restart(logs({0: STEADY[0], 1: STEADY[1], 2: STEADY[2], 4: STEADY[4]}, [0, 2]), "async", 2)
    assert plan == RestartPlan(4, (9, 9), {4: ((9, 9), (15, 15))}, RESTORED, LINEAGE, 3, 2)
