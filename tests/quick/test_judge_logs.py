"""The offset log, commit log and metadata file byte by byte (reference/protocol/logs.py, spec sections 2 and 3).

Found by mutation testing the judge: nothing pinned the canonical form of a
log entry, the errors that name a malformed entry, or what the metadata file
records. Expected bytes and messages are written out by hand.
"""

from __future__ import annotations

import dataclasses

import pytest

from reference.protocol.logs import (CommitEntry, OffsetEntry, check_metadata, decode_entry, encode_entry, purge_logs,
                            read_metadata, write_metadata)
from reference.protocol.storage import CheckpointFormatError, DurableStorage


def test_an_entry_is_v1_then_compact_json_with_sorted_keys():
    assert encode_entry({"b": 1, "a": [2, 3]}) == b'v1\n{"a":[2,3],"b":1}'
    assert OffsetEntry(4, (1, 2), (3, 5)).encode() == b'v1\n{"batch":4,"end_offsets":[3,5],"start_offsets":[1,2]}'


def test_log_entries_are_frozen():
    offset, commit = OffsetEntry(0, (0,), (1,)), CommitEntry(0, 0, [], {})
    with pytest.raises(dataclasses.FrozenInstanceError):
        offset.batch = 1   # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        commit.watermark_ms = 1   # type: ignore[misc]


@pytest.mark.parametrize("data, says", [
    (b'v2\n{"batch":0}', 'log entry version "v2", expected \'v1\''),
    (b'x' * 5000 + b'\n{}', 'log entry version "' + 'x' * 40 + '" (and 4,960 more characters)'),
    (b'v1\n{"batch":', "truncated or corrupt log entry"),
    (b'v1\n[1, 2]', "log entry is not a JSON object"),
])
def test_a_malformed_entry_is_a_format_error_naming_the_file(data, says):
    with pytest.raises(CheckpointFormatError) as caught:
        decode_entry(data, "offsets/7")
    assert str(caught.value).startswith("offsets/7: ") and says in str(caught.value)


@pytest.mark.parametrize("entry, body, says", [
    (OffsetEntry, b'v1\n{"batch":3,"start_offsets":[0]}', "offset entry lacks 'end_offsets'"),
    (OffsetEntry, b'v1\n{"batch":3,"start_offsets":null,"end_offsets":[1]}', "start_offsets is not a list"),
    (OffsetEntry, b'v1\n{"batch":3,"start_offsets":[0],"end_offsets":[true]}', "end_offsets is not a list"),
    (OffsetEntry, b'v1\n{"batch":3,"start_offsets":[0],"end_offsets":[-1]}', "end_offsets is not a list"),
    (OffsetEntry, b'v1\n{"batch":3,"start_offsets":[2],"end_offsets":[1]}', "are not a range"),
    (OffsetEntry, b'v1\n{"batch":3,"start_offsets":[0, 0],"end_offsets":[1]}', "are not a range"),
    (OffsetEntry, b'v1\n{"batch":"three","start_offsets":[0],"end_offsets":[1]}', 'of batch "three", not'),
    (OffsetEntry, b'v1\n{"batch":2,"start_offsets":[0],"end_offsets":[1]}', "of batch 2, not of batch 3"),
    (OffsetEntry, b'v1\n{"batch":true,"start_offsets":[0],"end_offsets":[1]}', "of batch true, not"),
    (CommitEntry, b'v1\n{"batch":3,"next_trackers":[],"state_lineage":{}}', "commit entry lacks 'watermark_ms'"),
    (CommitEntry, b'v1\n{"batch":3,"watermark_ms":0,"next_trackers":5,"state_lineage":{}}', "commit entry is not"),
    (CommitEntry, b'v1\n{"batch":3,"watermark_ms":"late","next_trackers":[],"state_lineage":{}}', "is not"),
    (CommitEntry, b'v1\n{"batch":3,"watermark_ms":false,"next_trackers":[],"state_lineage":{}}', "is not"),
    (CommitEntry, b'v1\n{"batch":3,"watermark_ms":0,"next_trackers":[],"state_lineage":[]}', "is not"),
    (CommitEntry, b'v1\n{"batch":3,"watermark_ms":0,"next_trackers":[],"state_lineage":{"0":[]}}', "is not"),
    (CommitEntry, b'v1\n{"batch":3,"watermark_ms":0,"next_trackers":[],"state_lineage":{"0":{"0":1}}}', "is not"),
    (CommitEntry, b'v1\n{"batch":4,"watermark_ms":0,"next_trackers":[],"state_lineage":{}}', "of batch 4, not"),
])
def test_an_entry_without_its_fields_or_of_another_batch_is_a_format_error_naming_it(entry, body, says):
    folder = "offsets" if entry is OffsetEntry else "commits"
    storage = DurableStorage()
    storage.write(f"{folder}/3", body)
    with pytest.raises(CheckpointFormatError) as caught:
        entry.read(storage, 3)
    assert str(caught.value).startswith(f"{folder}/3: ") and says in str(caught.value), str(caught.value)


def test_a_well_formed_entry_reads_back():
    storage = DurableStorage()
    storage.write("offsets/3", OffsetEntry(3, (1, 2), (1, 5)).encode())
    storage.write("commits/3", CommitEntry(3, 7, [{}], {"0": {"0": "u"}}).encode())
    assert OffsetEntry.read(storage, 3) == OffsetEntry(3, (1, 2), (1, 5))
    assert CommitEntry.read(storage, 3) == CommitEntry(3, 7, [{}], {"0": {"0": "u"}})


def test_metadata_records_the_name_and_snapshot_format_only_when_given():
    bare, full = DurableStorage(), DurableStorage()
    write_metadata(bare, "q1", "d1")
    write_metadata(full, "q2", "d2", name="count", snapshot_format="rocksdb-sst")
    assert read_metadata(bare) == {"id": "q1", "scenario_digest": "d1"}
    assert read_metadata(full) == {"id": "q2", "scenario_digest": "d2", "scenario": "count",
                                   "snapshot_format": "rocksdb-sst"}
    assert read_metadata(DurableStorage()) is None


def test_a_checkpoint_of_another_query_is_refused_naming_both_scenarios():
    storage = DurableStorage()
    write_metadata(storage, "q1", "theirs", name="other")
    assert check_metadata(storage, "theirs") == "q1"
    assert check_metadata(DurableStorage(), "mine") is None
    with pytest.raises(CheckpointFormatError) as named:
        check_metadata(storage, "mine", name="count")
    assert str(named.value) == ("metadata: checkpoint belongs to a different query (scenario 'other', digest "
                                "'theirs'); this is scenario 'count', digest 'mine'")
    with pytest.raises(CheckpointFormatError) as unnamed:
        check_metadata(storage, "mine")
    assert str(unnamed.value).endswith("; this is digest 'mine'")


def test_async_purge_keeps_the_newest_entries_and_everything_while_there_are_fewer():
    """Async progress logs have gaps: keep the newest min_batches_to_retain offset entries (and the commit
    entries from the oldest of them on), and everything while there are no more than that."""
    storage = DurableStorage()
    for b in (0, 2, 5, 7):
        storage.write(f"offsets/{b}", OffsetEntry(b, (b,), (b + 1,)).encode())
        storage.write(f"commits/{b}", CommitEntry(b, 0, [], {}).encode())
    assert purge_logs(storage, 4, "async") == []
    assert purge_logs(storage, 5, "async") == []
    assert purge_logs(storage, 3, "async") == ["offsets/0", "commits/0"]
    assert sorted(storage.list("offsets/")) == ["offsets/2", "offsets/5", "offsets/7"]


def test_an_entry_of_another_batch_quotes_at_most_twenty_characters_of_it():
    storage = DurableStorage()
    storage.write("offsets/3", b'v1\n{"batch":"' + b"x" * 30 + b'","start_offsets":[0],"end_offsets":[1]}')
    with pytest.raises(CheckpointFormatError) as caught:
        OffsetEntry.read(storage, 3)
    assert str(caught.value) == 'offsets/3: the entry is of batch "' + "x" * 19 + ', not of batch 3 as its name says'
