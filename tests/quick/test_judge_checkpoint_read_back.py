"""The ``checkpoint`` check reads the logs and the sink back and holds them to the outcome (issue 32).

Each test edits a correct checkpoint by hand so that every checkpoint rule still holds (each file decodes and is
where the layout puts it) but the files are not the outcome's: an offset entry with other offsets, or past the
input, or after the last batch of a run that finished; a commit entry with another watermark; sink files with
other rows or another delivery count, a batch delivered that the outcome never delivered. Only ``checkpoint``
fails, naming the file.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from reference.language.catalogue import make
from reference.protocol.logs import CommitEntry, OffsetEntry, encode_entry
from reference.judge.oracles import check_outcome, failures
from reference.protocol.outcome import Outcome
from reference.protocol.run import run_scenario
from reference.protocol.storage import DurableStorage


@pytest.fixture(scope="module")
def count() -> tuple[Any, Outcome, DurableStorage]:
    """A running count over 5 batches (retain 3), exactly-once: offsets/1..4 and commits/1..4 remain."""
    scenario = make("aggregate", batches=5, retain=3)
    finished = run_scenario(scenario)
    return scenario, finished.outcome(), finished.storage


def only_checkpoint(scenario: Any, outcome: Outcome, storage: Any, says: str) -> Any:
    bad = {v.check: v for v in failures(check_outcome(scenario, outcome, storage))}
    assert list(bad) == ["checkpoint"], bad
    assert says in bad["checkpoint"].message, bad["checkpoint"].message
    return bad["checkpoint"]


def offsets(storage: DurableStorage, batch: int, start: tuple[int, ...], end: tuple[int, ...]) -> None:
    storage.write(f"offsets/{batch}", OffsetEntry(batch, start, end).encode(), overwrite=True)


def test_the_true_checkpoint_passes(count):
    scenario, outcome, storage = count
    assert failures(check_outcome(scenario, outcome, storage)) == []


def test_an_offset_entry_with_other_offsets_than_its_batch_ran(count):
    scenario, outcome, storage = count
    edited = storage.copy()
    entry = OffsetEntry.read(storage, 4)
    offsets(edited, 4, entry.start, tuple(e - 1 for e in entry.end))
    v = only_checkpoint(scenario, outcome, edited, "offsets/4 logs other offsets than the outcome's batch 4 ran")
    assert v.batch == 4 and v.expected == [list(entry.start), list(entry.end)]
    shifted = storage.copy()   # the start alone moved (and offsets/3 with it, so the log still meets itself)
    offsets(shifted, 3, OffsetEntry.read(storage, 3).start, tuple(s + 1 for s in entry.start))
    offsets(shifted, 4, tuple(s + 1 for s in entry.start), entry.end)
    v = only_checkpoint(scenario, outcome, shifted, "offsets/3 logs other offsets than the outcome's batch 3 ran")
    assert v.batch == 3


def test_under_async_progress_only_the_end_of_an_offset_entry_is_the_batchs():
    """A restart under async progress re-runs the latest entry from the previous persisted entry's end, keeping
    the entry: its start may be another than the batch that ran."""
    scenario = make("map", "async_progress", batches=6)
    finished = run_scenario(scenario)
    outcome, storage = finished.outcome(), finished.storage
    assert failures(check_outcome(scenario, outcome, storage)) == []
    latest = max(b for b in (4, 2, 0) if storage.exists(f"offsets/{b}"))
    entry = OffsetEntry.read(storage, latest)
    ran = dataclasses.replace(outcome, batches=tuple(dataclasses.replace(b, start_offsets=tuple(
        s - 1 for s in b.start_offsets or ())) if b.id == latest else b for b in outcome.batches))
    bad = {v.check for v in failures(check_outcome(scenario, ran, storage))}
    assert "checkpoint" not in bad
    other_end = storage.copy()
    offsets(other_end, latest, entry.start, tuple(e - 1 for e in entry.end))
    assert "checkpoint" in {v.check for v in failures(check_outcome(scenario, outcome, other_end))}


def test_an_offset_entry_past_the_input(count):
    scenario, outcome, storage = count
    edited = storage.copy()
    entry = OffsetEntry.read(storage, 4)
    offsets(edited, 4, entry.start, tuple(e + 100 for e in entry.end))
    v = only_checkpoint(scenario, outcome, edited, "offsets/4 ends past the input")
    assert v.expected == [15, 15] and v.actual == [e + 100 for e in entry.end]


def test_an_offset_entry_after_the_last_batch_of_a_run_that_finished(count):
    """One uncommitted entry is what a crash between the two log writes leaves (the rules allow it), but this
    run finished: nothing was in flight."""
    scenario, outcome, storage = count
    edited = storage.copy()
    end = OffsetEntry.read(storage, 4).end
    offsets(edited, 5, end, end)
    v = only_checkpoint(scenario, outcome, edited, "offsets/5 logs a batch after the outcome's last batch 4, of a "
                                                   "run that finished")
    assert v.batch == 5
    stopped = dataclasses.replace(outcome, error="stopped loudly")
    assert "checkpoint" not in {v.check for v in failures(check_outcome(scenario, stopped, edited))}


def test_a_commit_entry_with_another_watermark_than_the_failure_free_one(count):
    """Raised in the newest entry only, so the log's watermark still never goes back."""
    scenario, outcome, storage = count
    edited = storage.copy()
    entry = CommitEntry.read(storage, 4)
    edited.write("commits/4", encode_entry({"batch": 4, "watermark_ms": entry.watermark_ms + 5,
                                            "next_trackers": entry.next_trackers,
                                            "state_lineage": entry.state_lineage}), overwrite=True)
    v = only_checkpoint(scenario, outcome, edited, "commits/4 holds another watermark than the failure-free run")
    assert (v.batch, v.expected, v.actual) == (4, entry.watermark_ms, entry.watermark_ms + 5)


def test_sink_files_with_other_rows_than_the_outcomes_sink(count):
    scenario, outcome, storage = count
    edited = storage.copy()
    part = next(p for p in storage.list("sink/2/") if json.loads(storage.read(p)))
    rows = json.loads(storage.read(part))
    rows[0][1] += 1
    edited.write(part, json.dumps(rows).encode(), overwrite=True)
    v = only_checkpoint(scenario, outcome, edited, "sink/_manifest/2: the sink files hold other rows than the "
                                                   "outcome's sink")
    assert v.batch == 2


def test_a_manifest_counting_another_number_of_deliveries(count):
    scenario, outcome, storage = count
    edited = storage.copy()
    body = json.loads(storage.read("sink/_manifest/3"))
    edited.write("sink/_manifest/3", json.dumps(dict(body, delivery=2)).encode(), overwrite=True)
    v = only_checkpoint(scenario, outcome, edited, "sink/_manifest/3: the sink files count another number of "
                                                   "deliveries than the outcome's sink")
    assert (v.expected, v.actual) == (1, 2)


def test_a_batch_delivered_in_the_files_but_not_in_the_outcome_or_the_other_way(count):
    scenario, outcome, storage = count
    gone = storage.copy()
    gone.delete("sink/_manifest/1")
    listed = dataclasses.replace(outcome, checkpoint_files=tuple(f for f in outcome.checkpoint_files
                                                                 if f != "sink/_manifest/1"))
    v = only_checkpoint(scenario, listed, gone, "sink/_manifest/1: the sink files and the outcome disagree on "
                                                "whether batch 1 was delivered")
    assert v.actual is None and v.expected is not None
    extra = storage.copy()
    extra.write("sink/9/part-0-r0b9p0a0.json", b"[]")
    extra.write("sink/_manifest/9", json.dumps({"batch": 9, "files": ["sink/9/part-0-r0b9p0a0.json"],
                                                "delivery": 1}).encode())
    v = only_checkpoint(scenario, outcome, extra, "sink/_manifest/9: the sink files and the outcome disagree")
    assert (v.batch, v.expected, v.actual) == (9, None, [])


def test_at_least_once_part_files_are_read_back_too():
    scenario = make("aggregate", batches=4, sink="at_least_once")
    finished = run_scenario(scenario)
    outcome, storage = finished.outcome(), finished.storage
    assert failures(check_outcome(scenario, outcome, storage)) == []
    edited = storage.copy()
    part = next(p for p in storage.list("sink/1/") if json.loads(storage.read(p)))
    edited.write(part, json.dumps(json.loads(storage.read(part))[1:]).encode(), overwrite=True)
    only_checkpoint(scenario, outcome, edited, "sink/1/: the sink files hold other rows than the outcome's sink")
    retried = storage.copy()   # a second part file of the partition, with no rows: the same rows, two deliveries
    retried.write(part.replace("a0.json", "a1.json"), b"[]")
    v = only_checkpoint(scenario, outcome, retried, "sink/1/: the sink files count another number of deliveries")
    assert (v.expected, v.actual) == (1, 2)
