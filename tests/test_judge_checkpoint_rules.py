"""Each rule of reference/checkpoint_rules.py, broken by hand on a correct checkpoint, with its message.

Found by mutation testing the judge. The checkpoint is a running count over
5 batches, retaining 3: commit entries 1..4 remain, state versions are written
by attempt ``r0b<batch>p<partition>a0`` (SPEC additions: a file's uid is the
writing attempt's lineage id).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from reference import layout
from reference.catalogue import make
from reference.checkpoint_rules import violations
from reference.logs import CommitEntry, encode_entry
from reference.run import run_scenario


@pytest.fixture(scope="module")
def count() -> tuple[Any, Any]:
    scenario = make("aggregate", batches=5, retain=3)
    return scenario, run_scenario(scenario).storage


def edit_commit(storage: Any, batch: int, **changes: Any) -> None:
    entry = CommitEntry.read(storage, batch)
    body = {"batch": entry.batch, "watermark_ms": entry.watermark_ms, "next_trackers": entry.next_trackers,
            "state_lineage": json.loads(json.dumps(entry.state_lineage))}
    body.update(changes)
    storage.write(layout.commit_path(batch), encode_entry(body), overwrite=True)


def test_a_correct_checkpoint_breaks_no_rule(count):
    scenario, storage = count
    assert violations(storage, scenario) == []
    assert sorted(storage.list("commits/")) == ["commits/1", "commits/2", "commits/3", "commits/4"]


def test_commit_order_names_the_missing_entry_under_sync_progress_only(count):
    scenario, storage = count
    gap = storage.copy()
    gap.delete("commits/2")
    assert violations(gap, scenario)[0] == (
        "commit_order", "commits/2 is missing while commits/4 exists: commit entries were written out of batch order")
    async_progress = make("aggregate", "async_progress", batches=5, retain=3)
    assert "commit_order" not in [rule for rule, _ in violations(gap, async_progress)]


def test_commit_has_offsets_names_the_orphan(count):
    scenario, storage = count
    orphan = storage.copy()
    orphan.delete("offsets/3")
    assert violations(orphan, scenario) == [("commit_has_offsets", "commits/3 exists without offsets/3")]


def test_an_unreadable_commit_entry_is_a_violation_naming_it(count):
    scenario, storage = count
    broken = storage.copy()
    broken.write("commits/2", b"v1\n{\"batch\":", overwrite=True)
    found = violations(broken, scenario)
    assert len(found) == 1 and found[0][0] == "log_entries" and found[0][1].startswith("commits/2: ")


def test_watermark_monotone_names_the_entry_that_went_back(count):
    scenario, storage = count
    back = storage.copy()
    edit_commit(back, 2, watermark_ms=50)    # commits/3 and commits/4 hold 0
    assert violations(back, scenario) == [("watermark_monotone", "commits/3 holds watermark 0 after 50 in commits/2")]


def naming(storage: Any, batch: int, uid: str) -> Any:
    """A copy whose commits/<batch> names ``uid`` for partition 1 of store 0."""
    edited = storage.copy()
    lineage = CommitEntry.read(edited, batch).state_lineage
    lineage["0"]["1"] = uid
    edit_commit(edited, batch, state_lineage=lineage)
    return edited


def test_lineage_reachable_names_a_recent_entry_whose_attempt_is_not_on_the_chain(count):
    scenario, storage = count
    assert violations(naming(storage, 3, "r5b3p1a2"), scenario) == [
        ("lineage_reachable", "state/0/1: version 4 (commits/3 names 'r5b3p1a2') has lineage id 'r0b3p1a0'")]


def test_lineage_reachable_names_a_recent_version_with_no_file_on_the_chain(count):
    scenario, storage = count
    gone = storage.copy()
    gone.delete("state/0/1/3_r0b2p1a0.changelog")
    assert violations(gone, scenario) == [
        ("lineage_reachable", "state/0/1: version 3 (commits/2 names 'r0b2p1a0') has no file on the chain")]


def test_lineage_reachable_looks_only_at_the_last_retained_entries(count):
    """commits/1 is older than the newest 3 entries: what it names is lineage's business, not this rule's."""
    scenario, storage = count
    assert violations(naming(storage, 1, "r5b1p1a2"), scenario) == []


def test_each_rule_names_its_first_offence_once(count):
    scenario, storage = count
    gaps = storage.copy()
    gaps.delete("commits/2")
    gaps.delete("commits/3")
    assert violations(gaps, scenario)[0][1].startswith("commits/2 is missing while commits/4 exists")
    orphans = storage.copy()
    orphans.delete("offsets/2")
    orphans.delete("offsets/3")
    assert violations(orphans, scenario) == [("commit_has_offsets", "commits/2 exists without offsets/2")]
    falling = storage.copy()
    edit_commit(falling, 1, watermark_ms=60)
    edit_commit(falling, 2, watermark_ms=50)    # and commits/3 holds 0: two steps back, one violation
    assert violations(falling, scenario) == [("watermark_monotone", "commits/2 holds watermark 50 after 60 in "
                                                                    "commits/1")]
