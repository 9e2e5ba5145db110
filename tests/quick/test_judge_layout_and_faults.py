"""The names of the checkpoint layout (``reference/protocol/layout.py``), the sink's files (``reference/protocol/sink_files.py``)
and the faults refused because no run can fire them (``reference/language/fault_reach.py``).

``classify`` knows every file a checkpoint holds and nothing else; ``sink_files`` reads the sink back from its
files; a fault no backend can reach is refused when the scenario is read, naming it.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from reference.protocol import layout
from reference.language.catalogue import make, scenario_dict
from reference.judge.checkpoint_rules import violations
from reference.language.fault_reach import MAX_LATENCY_FAULT_MS, last_batch, unreachable
from reference.protocol.layout import Entry, classify, classify_folder, number
from reference.protocol.run import run_scenario
from reference.language.scenario import Scenario, ScenarioError
from reference.protocol.sink_files import Manifest, manifest_batches, read_manifest, read_part, visible_output
from reference.protocol.storage import CheckpointFormatError, DurableStorage
from streamtest import crash, fault


@pytest.mark.parametrize("text, value", [("0", 0), ("7", 7), ("120", 120), ("07", None), ("", None), ("+7", None),
                                         ("7a", None), ("٣", None), ("-1", None)])
def test_ids_are_canonical_decimals(text, value):
    assert number(text) == value


@pytest.mark.parametrize("path, entry", [
    ("metadata", Entry("metadata")),
    (".lightspeed-run.lock", Entry("run_lock")),
    ("offsets/0", Entry("offset", 0)),
    ("commits/12", Entry("commit", 12)),
    ("sink/_manifest/4", Entry("manifest", 4)),
    ("sink/4/part-1-r0b4p1a0.json", Entry("sink_part", 4, partition=1)),
    ("sink/4/part-0-x.y-z.json", Entry("sink_part", 4, partition=0)),
    ("sources/1/3", Entry("fetch_state", 3, partition=1)),
    ("state/0/1/5_r1b4p1a0.changelog", Entry("state", 5, "0", 1)),
    ("state/0.left/0/3_u.delta", Entry("state", 3, "0.left", 0)),
    ("state/1/0/2_u.snapshot", Entry("state", 2, "1", 0)),
    ("state/0/1/SSTs/000008-ab-v3.sst", Entry("snapshot_data", None, "0", 1)),
    ("offsets/.3.123.456.0123abcd.tmp", Entry("temp", 3, written="offset")),
    ("state/0/1/.5_u.changelog.1.2.abcdef01.tmp", Entry("temp", 5, "0", 1, written="state")),
    (".metadata.1.2.abcdef01.tmp", Entry("temp", written="metadata")),
    ("commits/.4.tmp", Entry("temp", 4, written="commit")),
])
def test_every_file_of_the_layout_is_classified(path, entry):
    assert classify(path) == entry


@pytest.mark.parametrize("path", [
    "junk", "offsets", "offsets/03", "offsets/x", "offsets/3/4", "commits/-1", "sink/_manifest/04", "sink/4",
    "sink/4/part-01-x.json", "sink/4/part-1-x.txt", "sink/04/part-1-x.json", "sink/4/other.json", "sources/0/03",
    "sources/00/3", "sources/0", "state/0/1/05_u.changelog", "state/0/1/5_u.log", "state/0/01/5_u.changelog",
    "state//1/5_u.changelog", "state/0/1/SSTs/x.txt", "state/0/1/SSTs/.sst", "state/0/1/OTHER/x.sst",
    "state/0/1/SSTs/deeper/x.sst", "offsets/.3", "offsets/.x.1.2.abcdef01.tmp", "offsets/.3.1.2.ABCDEF01.tmp", "offsets/.3.1.abcdef01.tmp",
    "..lightspeed-run.lock.1.2.abcdef01.tmp", "..3.1.2.abcdef01.tmp.1.2.abcdef01.tmp", "state/0", "metadata/x",
    "meta", "offsets/3.tmp",
])
def test_anything_else_is_not_part_of_the_layout(path):
    assert classify(path) is None


@pytest.mark.parametrize("path, entry", [
    ("offsets", Entry("log")), ("commits", Entry("log")), ("state", Entry("state")), ("sink", Entry("sink")),
    ("sources", Entry("sources")), ("sink/_manifest", Entry("manifests")), ("sink/3", Entry("sink_batch", 3)),
    ("sources/2", Entry("source", partition=2)), ("state/0", Entry("store", store="0")),
    ("state/0/1", Entry("store", store="0", partition=1)),
    ("state/0/1/SSTs", Entry("snapshot_data", store="0", partition=1)),
])
def test_every_folder_of_the_layout_is_classified(path, entry):
    assert classify_folder(path) == entry


@pytest.mark.parametrize("path", ["junk", "metadata", "sink/x", "sink/03", "sources/x", "state/0/x", "state/0/1/x",
                                  "state/0/1/SSTs/y", "offsets/3", "sink/3/x", "state/", "sources/1/2"])
def test_any_other_folder_is_not_part_of_the_layout(path):
    assert classify_folder(path) is None


def test_batch_of_reads_only_canonical_log_entries():
    assert layout.batch_of("offsets/3", "offsets") == 3 and layout.batch_of("offsets/03", "offsets") is None
    assert layout.batch_of("commits/3", "offsets") is None and layout.batch_of("offsets/x", "offsets") is None


# ------------------------------------------------------------------------------- sink files


@pytest.fixture(scope="module")
def exactly_once() -> tuple[Any, DurableStorage]:
    scenario = make("aggregate", batches=3, faults=[crash("sink_commit", 1)])
    finished = run_scenario(scenario)
    return finished.outcome(), finished.storage


def test_the_sink_reads_back_as_the_outcome_reports_it(exactly_once):
    outcome, storage = exactly_once
    assert manifest_batches(storage) == [0, 1, 2]
    assert visible_output(storage, "exactly_once") == tuple(
        type(e)(e.batch, e.rows, e.deliveries) for e in outcome.sink)
    assert read_manifest(storage, 1) == Manifest(1, tuple(sorted(p for p in storage.list("sink/1/") if "r1b1" in p)),
                                                 2)
    assert visible_output(storage, "exactly_once", {1: ("d1", "d2")})[1].delivery_digests == ("d1", "d2")


def test_a_stray_name_in_the_manifest_folder_is_no_batch(exactly_once):
    _outcome, storage = exactly_once
    edited = storage.copy()
    edited.write("sink/_manifest/01", b"{}")
    edited.write("sink/_manifest/x", b"{}")
    assert manifest_batches(edited) == [0, 1, 2]


def test_at_least_once_reads_every_part_file_and_counts_a_partitions_files():
    scenario = make("aggregate", batches=3, sink="at_least_once")
    finished = run_scenario(scenario)
    storage = finished.storage.copy()
    assert visible_output(storage, "at_least_once") == tuple(
        type(e)(e.batch, e.rows, e.deliveries) for e in finished.outcome().sink)
    rows = read_part(storage, "sink/1/part-0-r0b1p0a0.json")
    storage.write("sink/1/part-0-r9b1p0a1.json", json.dumps(rows).encode())
    storage.write("sink/1/notes.txt", b"not a part")
    again = {e.batch: e for e in visible_output(storage, "at_least_once")}
    assert again[1].deliveries == 2 and len(again[1].rows) == len(rows) + len(
        {e.batch: e for e in finished.outcome().sink}[1].rows)
    assert again[0].deliveries == 1


def test_a_part_file_that_is_not_a_list_of_rows_is_named():
    storage = DurableStorage()
    storage.write("sink/1/part-0-u.json", b'{"rows": []}')
    with pytest.raises(CheckpointFormatError, match=r"^sink/1/part-0-u.json: a sink part file holds a JSON list"):
        read_part(storage, "sink/1/part-0-u.json")
    storage.write("sink/1/part-1-u.json", b"[[1, NaN]]")
    with pytest.raises(CheckpointFormatError, match=r"^sink/1/part-1-u.json: unreadable sink part file: \[0\]\[1\]: "
                                                    r"NaN"):
        read_part(storage, "sink/1/part-1-u.json")


@pytest.mark.parametrize("body", [b'{"batch": true, "files": [], "delivery": 1}',
                                  b'{"batch": 1, "files": [], "delivery": true}',
                                  b'{"batch": 1, "files": [3], "delivery": 1}',
                                  b'{"batch": 1, "files": []}',
                                  b'[1]'])
def test_a_manifest_of_another_shape_is_named(body):
    storage = DurableStorage()
    storage.write("sink/_manifest/1", body)
    with pytest.raises(CheckpointFormatError, match=r"^sink/_manifest/1: "):
        read_manifest(storage, 1)


def test_a_manifest_with_a_field_more_is_named_by_the_one_rule_of_unknown_fields():
    """An unknown field is the ``fields`` rule's finding (reference/checkpoint_rules.py), for every checkpoint
    file alike; the manifest's reader reads the fields it knows."""
    storage = DurableStorage()
    storage.write("sink/_manifest/1", b'{"batch": 1, "files": [], "delivery": 1, "more": 0}')
    assert read_manifest(storage, 1).delivery == 1
    found = [m for rule, m in violations(storage, make("map", batches=2), ("fields",)) if rule == "fields"]
    assert found == ['sink/_manifest/1: holds the field "more", which a sink manifest does not have (tampered?)']


# ------------------------------------------------------------------------ faults that cannot fire


def refused(raw: dict[str, Any]) -> str:
    with pytest.raises(ScenarioError) as caught:
        Scenario.from_dict(raw)
    return str(caught.value)


def rate(faults: list[Any], cuts: str = "trigger", rows: int = 10) -> dict[str, Any]:
    raw = scenario_dict("aggregate", faults=faults)
    raw["source"] = {"kind": "rate", "rows_per_second": rows, "duration_s": 2, "partitions": 1}
    raw["engine"]["batch_cuts"] = cuts
    return raw


def test_the_last_batch_any_backend_cuts():
    assert last_batch(make("aggregate", batches=4)) == 4
    assert last_batch(Scenario.from_dict(rate([]))) == 20           # one record per batch at most, 20 records
    assert last_batch(Scenario.from_dict(rate([], "fixed"))) == 3   # 2000 ms in 1000 ms cuts
    assert last_batch(Scenario.from_dict(rate([], rows=1))) == 3    # fewer records than fixed cuts
    join = scenario_dict("join", batches=3)
    join["sources"]["right"]["batches"] = 3
    assert last_batch(Scenario.from_dict(join)) == 3


def test_a_batch_past_what_any_backend_cuts_is_refused():
    assert refused(rate([crash("offset_log_write", 20)])) == \
        "faults[0].at.batch: batch 20 never runs: no backend cuts more than 20 batches (0..19) from this input"
    Scenario.from_dict(rate([crash("offset_log_write", 19)]))
    assert "no backend cuts more than 3 batches" in refused(rate([crash("offset_log_write", 3)], "fixed"))
    Scenario.from_dict(rate([crash("offset_log_write", 2)], "fixed"))


@pytest.mark.parametrize("step", ["state_load", "changelog_write", "state_commit", "snapshot_upload"])
def test_a_stateful_step_of_a_stateless_query_is_refused(step):
    raw = scenario_dict("map", faults=[fault("task_failure" if step != "snapshot_upload" else "storage_write_error",
                                             step, 1)])
    assert refused(raw) == f"faults[0].at.step: {step} never runs: the query (map) keeps no state, so this fault " \
                           "could never fire"
    stateful = scenario_dict("aggregate", faults=[fault("storage_latency", step, 1, ms=1)])
    assert Scenario.from_dict(stateful).faults


def test_maintenance_under_the_snapshot_provider_is_refused():
    raw = scenario_dict("aggregate", "snapshot_provider", faults=[fault("storage_write_error", "snapshot_upload", 1)])
    assert refused(raw).startswith("faults[0].at.step: snapshot_upload never runs under the snapshot provider")
    raw = scenario_dict("aggregate", "delta_provider", faults=[fault("storage_write_error", "snapshot_upload", 1)])
    assert Scenario.from_dict(raw).faults


def test_times_and_lengths_that_never_come_or_never_end_are_refused():
    never = scenario_dict("aggregate", faults=[{"at": {"time_ms": 10**12 + 1}, "kind": "driver_crash"}])
    assert refused(never) == "faults[0].at.time_ms: 1000000000001 ms never comes: times are at most " \
                             "1000000000000 ms"
    Scenario.from_dict(scenario_dict("aggregate", faults=[{"at": {"time_ms": 10**12}, "kind": "driver_crash"}]))
    hour = 3_600_000
    assert MAX_LATENCY_FAULT_MS == hour
    long = scenario_dict("aggregate", faults=[fault("storage_latency", "plan", 1, ms=hour + 1)])
    assert refused(long) == ("faults[0].ms: a storage_latency of 3600001 ms: at most 3600000 ms (an hour), since a "
                             "backend that sleeps it must finish")
    Scenario.from_dict(scenario_dict("aggregate", faults=[fault("storage_latency", "plan", 1, ms=hour)]))
    skew = scenario_dict("aggregate", faults=[fault("clock_skew", "plan", 1, ms=10**12 + 1)])
    assert refused(skew) == "faults[0].ms: a clock_skew of 1000000000001 ms: at most 1000000000000 ms"
    Scenario.from_dict(scenario_dict("aggregate", faults=[fault("clock_skew", "plan", 1, ms=10**12)]))
    back = scenario_dict("aggregate", faults=[fault("clock_skew", "plan", 1, ms=-(10**12) - 1)])
    with pytest.raises(ScenarioError):   # ms is an integer >= 0, so a skew back in time is refused as such
        Scenario.from_dict(back)


def test_the_first_unreachable_fault_is_named_and_a_reachable_scenario_has_none():
    assert unreachable(make("aggregate", faults=[crash("offset_log_write", 1)])) is None
    both = make("aggregate", faults=[crash("offset_log_write", 1)])
    later = both.with_changes(faults=both.faults + (both.faults[0].__class__(
        both.faults[0].at.__class__("changelog_write", 1), "task_failure"),))
    assert unreachable(later) is None
    stateless = make("map").with_changes(faults=later.faults)
    assert unreachable(stateless) == ("faults[1].at.step", "changelog_write never runs: the query (map) keeps no "
                                                          "state, so this fault could never fire")


def test_layout_values_are_frozen():
    import dataclasses
    with pytest.raises(dataclasses.FrozenInstanceError):
        Entry("offset", 1).batch = 2   # type: ignore[misc]
    parsed = layout.parse_state_file("2_u.changelog")
    assert parsed is not None
    with pytest.raises(dataclasses.FrozenInstanceError):
        parsed.version = 3   # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        Manifest(1, (), 1).delivery = 2   # type: ignore[misc]


def test_the_shortest_snapshot_data_name_is_one_character_and_sst():
    assert classify("state/0/1/SSTs/x.sst") == Entry("snapshot_data", None, "0", 1)


@pytest.mark.parametrize("files, says", [
    (["junk"], "names 'junk', not a part file of batch 1"),
    (["sink/_manifest/1"], "names 'sink/_manifest/1', not a part file of batch 1"),
    (["sink/1/" + "n" * 100], "names '" + "sink/1/" + "n" * 73 + "', not a part file of batch 1"),
])
def test_a_manifest_naming_anything_but_part_files_of_its_batch_is_named(files, says):
    storage = DurableStorage()
    storage.write("sink/_manifest/1", json.dumps({"batch": 1, "files": files, "delivery": 1}).encode())
    with pytest.raises(CheckpointFormatError) as caught:
        read_manifest(storage, 1)
    assert str(caught.value) == f"sink/_manifest/1: {says}"


def test_a_manifest_quotes_at_most_twenty_characters_of_a_wrong_batch_or_delivery():
    storage = DurableStorage()
    storage.write("sink/_manifest/1", json.dumps({"batch": "b" * 30, "files": [], "delivery": 1}).encode())
    with pytest.raises(CheckpointFormatError, match="^sink/_manifest/1: the manifest is of batch " + "b" * 20 +
                                                    ", not of batch 1 as its name says$"):
        read_manifest(storage, 1)
    storage.write("sink/_manifest/1", json.dumps({"batch": 1, "files": [], "delivery": "d" * 30}).encode(),
                  overwrite=True)
    with pytest.raises(CheckpointFormatError, match="^sink/_manifest/1: delivery " + "d" * 20 + " is not a count"):
        read_manifest(storage, 1)
