"""Which versions a checkpoint retains, walked through the committed lineage (reference/protocol/retained.py).

Found by mutation testing the judge. The checkpoint is a running count over 5
batches retaining 3, with a snapshot every second version: partition 1 keeps
``2_r0b1p1a0`` (changelog and snapshot), ``3_r0b2p1a0``, ``4_r0b3p1a0`` (both)
and ``5_r0b4p1a0`` (docs/spec.md: version v is written by batch v-1, the uid
names the writing attempt); each test breaks it by hand.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from reference.language.catalogue import make
from reference.protocol.changelog import StateFileHeader, encode_state_file
from reference.protocol.logs import CommitEntry, encode_entry
from reference.protocol.retained import (ChainLink, committed_chain, latest_lineage, parent_uid, retained_range,
                                retained_states, unreadable)
from reference.protocol.run import run_scenario
from reference.protocol.storage import DurableStorage

D = "state/0/1"


def path(v: int, kind: str) -> str:
    return f"{D}/{v}_r0b{v - 1}p1a0.{kind}"


def link(v: int, snapshot: bool, delta: bool = True) -> ChainLink:
    return ChainLink(v, f"r0b{v - 1}p1a0", path(v, "snapshot") if snapshot else None,
                     path(v, "changelog") if delta else None)


@pytest.fixture(scope="module")
def count() -> Any:
    return run_scenario(make("aggregate", batches=5, retain=3)).storage


def errors_after(storage: Any, retain: int = 3) -> list[str]:
    return retained_states(storage, ["0"], 2, retain)[1]


def test_the_chain_walks_down_from_the_latest_commit_to_the_lowest_file(count):
    assert latest_lineage(count) == (5, {"0": {"0": "r0b4p0a0", "1": "r0b4p1a0"}})
    assert latest_lineage(DurableStorage()) is None
    chain = committed_chain(count, "0", 1, 5, "r0b4p1a0")
    assert chain == [link(5, False), link(4, True), link(3, False), link(2, True)]
    assert retained_range(chain) == [2, 3, 4, 5]
    states, errors = retained_states(count, ["0"], 2, 3)
    assert errors == [] and sorted(states["0"]["1"], key=int) == ["2", "3", "4", "5"]


def test_the_retained_range_starts_at_the_lowest_snapshot_or_at_version_one():
    assert retained_range([]) == []
    assert retained_range([link(3, False), link(2, False), link(1, False)]) == [1, 2, 3]
    assert retained_range([link(3, False), link(2, True), link(1, True, delta=False)]) == [1, 2, 3]
    assert retained_range([link(4, False), link(3, True), link(2, False)]) == [3, 4]
    assert retained_range([link(4, False), link(3, False)]) == []


def test_a_parent_is_read_from_whichever_file_reads(count):
    storage = count.copy()
    assert parent_uid(storage, link(4, True)) == "r0b2p1a0"
    storage.write(path(4, "changelog"), b"junk", overwrite=True)
    assert parent_uid(storage, link(4, True)) == "r0b2p1a0" and unreadable(storage, link(4, True)) is None
    storage.write(path(4, "snapshot"), b"junk", overwrite=True)
    assert parent_uid(storage, link(4, True)) is None
    why = unreadable(storage, link(4, True))
    assert why is not None and path(4, "changelog") in why and "; " + path(4, "snapshot") in why
    assert unreadable(storage, ChainLink(9, "x", None, None)) is None


def test_a_retained_version_without_a_snapshot_below_it_is_named(count):
    storage = count.copy()
    storage.delete(path(2, "snapshot"))
    assert errors_after(storage) == [f"{D}: version 3 is one of the last 3 committed versions, but no snapshot "
                                     "at or below it is left to load it from"]
    assert errors_after(storage, retain=2) == []


def test_a_retained_version_whose_file_is_gone_is_named_with_the_file_expected(count):
    storage = count.copy()
    storage.delete(path(3, "changelog"))
    assert errors_after(storage) == [f"{D}: version 3 is one of the last 3 committed versions, but its file is "
                                     "missing (expected 3_r0b2p1a0.snapshot, .changelog or .delta)"]


def test_a_retained_version_below_an_unreadable_link_is_named_with_why(count):
    storage = count.copy()
    storage.write(path(3, "changelog"), b"junk", overwrite=True)
    errors = errors_after(storage)
    assert len(errors) == 1 and errors[0].startswith(
        f"{D}: version 3 is one of the last 3 committed versions, but the lineage down to it is unreadable at "
        f"version 3: {path(3, 'changelog')}")


def test_a_commit_entry_without_the_partitions_lineage_is_an_error(count):
    storage = count.copy()
    entry = CommitEntry.read(storage, 4)
    storage.write("commits/4", encode_entry({"batch": 4, "watermark_ms": entry.watermark_ms,
                                             "next_trackers": entry.next_trackers,
                                             "state_lineage": {"0": {"0": "r0b4p0a0"}}}), overwrite=True)
    states, errors = retained_states(storage, ["0"], 2)
    assert errors == [f"{D}: latest commit entry names no lineage uid"] and states["0"]["1"] == {}
    assert sorted(states["0"]["0"], key=int) == ["2", "3", "4", "5"]


def test_retaining_more_than_the_chain_holds_names_version_one_by_its_parents_uid(count):
    assert errors_after(count, retain=5) == [f"state/0/{p}: version 1 is one of the last 5 committed versions, but its "
                                             f"file is missing (expected 1_r0b0p{p}a0.snapshot, .changelog or .delta)"
                                             for p in (0, 1)]


def test_a_store_with_no_file_left_names_every_retained_version(count):
    storage = count.copy()
    for p in storage.list(D + "/"):
        storage.delete(p)
    assert errors_after(storage) == [f"{D}: version {v} is one of the last 3 committed versions, but its file is "
                                     "missing (expected a snapshot or changelog)" for v in (3, 4, 5)]


def test_a_snapshot_only_link_is_unreadable_when_its_snapshot_is(count):
    storage = count.copy()
    storage.write(path(4, "snapshot"), b"junk", overwrite=True)
    why = unreadable(storage, link(4, True, delta=False))
    assert why is not None and why.startswith(path(4, "snapshot"))


def test_a_version_that_fails_to_load_is_an_error_and_the_others_still_load(count):
    """Changelog 3 is whole and names its parent, but its header says version 7: loading 3 fails; 4 and 5 load
    from the snapshot of 4, and 2 from its own."""
    storage = count.copy()
    storage.write(path(3, "changelog"), encode_state_file(StateFileHeader("changelog", 7, "r0b2p1a0", "r0b1p1a0"),
                                                          ()), overwrite=True)
    states, errors = retained_states(storage, ["0"], 2)
    assert len(errors) == 1 and "header says version 7, expected 3" in errors[0]
    assert sorted(states["0"]["1"], key=int) == ["2", "4", "5"]


def test_retaining_more_versions_than_were_committed_starts_at_version_one(count):
    assert errors_after(count, retain=6) == [f"state/0/{p}: version 1 is one of the last 6 committed versions, but its "
                                             f"file is missing (expected 1_r0b0p{p}a0.snapshot, .changelog or .delta)"
                                             for p in (0, 1)]
    with pytest.raises(dataclasses.FrozenInstanceError):
        link(2, True).version = 3   # type: ignore[misc]


def test_a_chain_of_one_link_names_the_version_below_it_by_its_parent(count):
    storage = count.copy()
    storage.delete(path(4, "changelog"))
    storage.delete(path(4, "snapshot"))
    assert errors_after(storage) == [
        f"{D}: version 3 is one of the last 3 committed versions, but its file is missing (expected a snapshot or "
        "changelog)",
        f"{D}: version 4 is one of the last 3 committed versions, but its file is missing (expected "
        "4_r0b3p1a0.snapshot, .changelog or .delta)",
        f"{D}: version 5 is one of the last 3 committed versions, but no snapshot at or below it is left to load it "
        "from"]
