"""Each rule of reference/judge/checkpoint_rules.py, broken by hand on a correct checkpoint, with its message.

Found by mutation testing the judge. The checkpoint is a running count over
5 batches, retaining 3: commit entries 1..4 remain, state versions are written
by attempt ``r0b<batch>p<partition>a0`` (docs/spec.md: a file's uid is the
writing attempt's lineage id).
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from reference.protocol import layout
from reference.language.catalogue import make
from reference.protocol.changelog import decode_state_file
from reference.judge.checkpoint_rules import LINE_RULES, RULES, in_flight_limit, violations
from reference.protocol.logs import CommitEntry, encode_entry, query_id
from reference.protocol.run import run_scenario
from reference.protocol.storage import DurableStorage, LocalStorage


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


# ------------------------------------------------------------------ rules of issue 32: every file read or named


def rules(storage: Any, scenario: Any) -> list[str]:
    return [rule for rule, _ in violations(storage, scenario)]


def test_every_rule_is_named_once():
    assert len(set(RULES)) == len(RULES) and {"layout", "log_entries", "offsets_committed", "state_files",
                                                "sink_files", "fetch_state"} <= set(RULES)


@pytest.mark.parametrize("path, says", [
    ("notes.txt", "notes.txt: a stray file"),
    ("offsets/03", "offsets/03: a stray file"),
    ("offsets/.3", "offsets/.3: a stray file"),
    ("state/0/0/backup.bin", "state/0/0/backup.bin: a stray file"),
    ("state/7/0/2_r0b1p0a0.changelog", "state of store '7'; this query's stores are ['0']"),
    ("state/0/2/2_r0b1p0a0.changelog", "state of partition 2; the query has 2"),
    ("state/0/0/SSTs/000008-ab-v3.sst", "metadata names no snapshot_format"),
    ("sink/1/part-2-r0b1p2a0.json", "a sink part file of partition 2; the query has 2"),
    ("sources/0/1", "a fetch state of source partition 0, which is not a redelivering source partition"),
])
def test_layout_names_a_file_that_is_not_this_querys(count, path, says):
    scenario, storage = count
    stray = storage.copy()
    stray.write(path, b"x")
    found = violations(stray, scenario)
    assert found[0] == ("layout", found[0][1]) and found[0][1].startswith(path) and says in found[0][1], found


def test_layout_takes_a_manifest_only_of_an_exactly_once_sink_and_snapshot_data_only_with_its_format(count):
    scenario, storage = count
    at_least_once = make("aggregate", batches=5, retain=3, sink="at_least_once")
    found = violations(storage, at_least_once)
    assert found[0][0] == "layout" and "a sink manifest, but this query's sink is at-least-once" in found[0][1]
    foreign = storage.copy()
    foreign.write("metadata", encode_entry({"id": query_id(scenario.seed), "scenario_digest": scenario.query_digest(),
                                             "snapshot_format": "rocksdb-sst-manifest"}), overwrite=True)
    foreign.write("state/0/0/SSTs/000008-ab-v3.sst", b"x")
    assert violations(foreign, scenario) == []
    foreign.write("state/0/0/.2_r0b1p0a0.changelog.12.34.0123abcd.tmp", b"half")   # a dead writer's litter
    foreign.write(".lightspeed-run.lock", b"123")
    assert violations(foreign, scenario) == []
    foreign.write("state/3/0/.2_r0b1p0a0.changelog.12.34.0123abcd.tmp", b"half")
    assert rules(foreign, scenario) == ["layout"]


def test_an_unreadable_metadata_file_leaves_its_naming_to_the_checkpoint_oracle(count):
    scenario, storage = count
    broken = storage.copy()
    broken.write("metadata", b"v1\n{", overwrite=True)
    assert violations(broken, scenario) == []


@pytest.fixture
def local(count, tmp_path) -> tuple[Any, Any]:
    """The checkpoint as a real directory."""
    scenario, storage = count
    storage.dump_to(tmp_path / "ck")
    return scenario, LocalStorage(tmp_path / "ck")


def test_layout_names_links_fifos_and_stray_folders_of_a_real_directory(local, tmp_path):
    scenario, storage = local
    root = storage.root
    assert violations(storage, scenario) == []
    (tmp_path / "outside").mkdir()
    (root / "sink" / "9").symlink_to(tmp_path / "outside")
    assert violations(storage, scenario) == [("layout", "sink/9: is a symlink; a checkpoint holds regular files and "
                                                        "folders only")]
    (root / "sink" / "9").unlink()
    os.mkfifo(root / "commits" / "fifo")
    assert violations(storage, scenario)[0] == ("layout", "commits/fifo: is a fifo; a checkpoint holds regular files "
                                                          "and folders only")
    (root / "commits" / "fifo").unlink()
    for folder, says in (("junk", "a stray folder"), ("state/9", "state of store '9'"),
                         ("state/0/5", "state of partition 5"), ("sources/1", "not a redelivering source"),
                         ("state/0/0/SSTs", "no snapshot_format")):
        (root / folder).mkdir(parents=True)
        found = violations(storage, scenario)
        assert found[0][0] == "layout" and found[0][1].startswith(folder + ": ") and says in found[0][1], found
        (root / folder).rmdir()
    (root / "sources").rmdir()
    (root / "state" / "0" / "0" / "x").mkdir()
    assert violations(storage, scenario)[0][1].startswith("state/0/0/x: a stray folder")


def redelivering_run() -> tuple[Any, Any]:
    scenario = make("aggregate", source_kind="redelivering")
    return scenario, run_scenario(scenario).storage


def test_a_redelivering_sources_fetch_state_is_read_and_of_its_batch():
    scenario, storage = redelivering_run()
    fetch = sorted(p for p in storage.list() if p.startswith("sources/"))
    assert fetch and violations(storage, scenario) == []
    for body, says in ((b"{", "unreadable fetch state"), (b"[]", "not the fetch state of batch"),
                       (storage.read(fetch[0]), "not the fetch state of batch"),
                       (b'{"batch": 1, "through_ms": 0, "ledger": {}}', "not the fetch state of batch"),
                       (b'{"batch": 1, "through_ms": "0", "ledger": []}', "not the fetch state of batch")):
        edited = storage.copy()
        target = next(p for p in fetch if p.endswith("/1"))
        edited.write(target, body, overwrite=True)
        assert violations(edited, scenario) == [("fetch_state", violations(edited, scenario)[0][1])]
        assert violations(edited, scenario)[0][1].startswith(target) and says in violations(edited, scenario)[0][1]


@pytest.mark.parametrize("body, says", [
    (b"v1\n{", "truncated or corrupt log entry"),
    (b'v1\n{"batch":2,"start_offsets":[6,6],"end_offsets":[9,9]}', "of batch 2, not of batch 3"),
    (b'v1\n{"batch":3,"start_offsets":[9],"end_offsets":[12]}', "offsets of 1 source partitions; the query reads 2"),
    (b'v1\n{"batch":3,"start_offsets":[8,9],"end_offsets":[12,12]}', "starts at [8, 9], but offsets/2 ended at [9, 9]"),
])
def test_log_entries_names_an_offset_entry_that_is_not_its_batchs(count, body, says):
    scenario, storage = count
    edited = storage.copy()
    edited.write("offsets/3", body, overwrite=True)
    found = violations(edited, scenario)
    assert found == [("log_entries", found[0][1])] and found[0][1].startswith("offsets/3: ") and says in found[0][1]


def test_log_entries_takes_the_first_batch_only_from_the_beginning():
    scenario = make("aggregate", batches=3, retain=5)
    storage = run_scenario(scenario).storage
    assert storage.exists("offsets/0") and violations(storage, scenario) == []
    storage.write("offsets/0", b'v1\n{"batch":0,"start_offsets":[1,0],"end_offsets":[3,3]}', overwrite=True)
    assert violations(storage, scenario) == [("log_entries", "offsets/0: the first batch starts at [1, 0], not at "
                                                             "the beginning")]


def test_log_entries_names_a_commit_entry_whose_lineage_is_not_the_querys(count):
    scenario, storage = count
    for lineage in ({}, {"0": {"0": "u"}}, {"0": {"0": "u", "1": "v"}, "1": {"0": "w", "1": "x"}},
                    {"0": {"0": "u", "2": "v"}}):
        edited = storage.copy()
        edit_commit(edited, 3, state_lineage=lineage)
        found = violations(edited, scenario)
        assert found[0][0] == "log_entries" and found[0][1].startswith("commits/3: names lineage ids of stores and "
                                                                       "partitions"), found
    stateless = make("map", batches=3)
    assert violations(run_scenario(stateless).storage, stateless) == []


def test_offsets_committed_allows_only_the_newest_batches_in_flight_under_sync_progress(count):
    """Sync progress: offsets/L without commits/L is a crash between the two writes, legal only for the newest
    batches, at most as many as the modes keep in flight (1 here)."""
    scenario, storage = count
    crashed = storage.copy()
    crashed.write("offsets/5", b'v1\n{"batch":5,"start_offsets":[15,15],"end_offsets":[15,15]}')
    assert violations(crashed, scenario) == []
    two = crashed.copy()
    two.write("offsets/6", b'v1\n{"batch":6,"start_offsets":[15,15],"end_offsets":[15,15]}')
    assert violations(two, scenario)[:1] == [("offsets_committed", "2 offset entries (offsets/5 to offsets/6) have no "
                                                               "commit entry; at most 1 batch(es) can be in flight in "
                                                               "these modes")]
    pipelined = make("aggregate", "pipelining", batches=5, retain=3)
    assert violations(two, pipelined) == []
    both = make("aggregate", "async_state", batches=5, retain=3)
    assert "offsets_committed" not in rules(two, both)   # (six offset entries break log_retention there)
    middle = storage.copy()
    middle.delete("commits/3")
    found = violations(middle, scenario)
    assert ("offsets_committed", "offsets/3 has no commits/3, but commits/4 exists: under sync progress only the "
                                 "newest batches may be planned and not committed") in found
    async_progress = make("map", "async_progress", batches=6)
    gaps = run_scenario(async_progress).storage
    gaps.write("offsets/5", b'v1\n{"batch":5,"start_offsets":[15,15],"end_offsets":[18,18]}')
    gaps.delete("commits/2")
    assert "offsets_committed" not in rules(gaps, async_progress)


def test_the_in_flight_limit_is_the_replay_bound():
    assert in_flight_limit(make("aggregate")) == 1
    assert in_flight_limit(make("aggregate", "pipelining", pipeline_depth=3)) == 3
    assert in_flight_limit(make("aggregate", "async_state")) == 2


def test_state_files_names_a_file_whose_header_is_not_its_name(count):
    scenario, storage = count
    for source, target in (("state/0/0/3_r0b2p0a0.changelog", "state/0/0/5_r0b4p0a0.changelog"),
                           ("state/0/0/2_r0b1p0a0.snapshot", "state/0/0/2_r0b1p0a0.changelog"),
                           ("state/0/1/3_r0b2p1a0.changelog", "state/0/1/3_r9b2p1a0.changelog")):
        edited = storage.copy()
        edited.write(target, storage.read(source), overwrite=True)
        found = violations(edited, scenario)
        assert ("state_files", found[-1][1]) == found[-1] and found[-1][1].startswith(f"{target}: holds"), found
    damaged = storage.copy()
    damaged.write("state/0/0/3_r0b2p0a0.changelog", b"\0" * 3, overwrite=True)   # off the newest chain? no: named
    assert "state_files" in rules(damaged, scenario) or "lineage_reachable" in rules(damaged, scenario)


def test_state_files_decodes_a_foreign_snapshot_with_its_reader(count):
    """A snapshot of a backend's own format passes when its reader decodes it as what its name says, and is named
    when no reader decodes it (a load may fall back past it, SPARK-21696: only this rule sees it then)."""
    scenario, storage = count
    original = storage.read("state/0/0/2_r0b1p0a0.snapshot")

    def reader(_storage, path, data):   # the reference's own decoding of the bytes the foreign file stands for
        return decode_state_file(original, path) if data == b"{ours}" else None
    foreign = DurableStorage(dict(storage.files), snapshot_readers=(reader,))
    foreign.write("state/0/0/2_r0b1p0a0.snapshot", b"{ours}", overwrite=True)
    assert "state_files" not in rules(foreign, scenario)
    foreign.write("state/0/0/2_r0b1p0a0.snapshot", b"{not ours}", overwrite=True)
    assert rules(foreign, scenario)[-1] == "state_files"
    plain = storage.copy()
    plain.write("state/0/0/2_r0b1p0a0.snapshot", b"{not ours}", overwrite=True)
    assert rules(plain, scenario)[-1] == "state_files"


@pytest.mark.parametrize("path, body, says", [
    ("sink/_manifest/2", b"{", "unreadable sink manifest"),
    ("sink/_manifest/2", b'{"batch": 2, "files": []}', "a sink manifest is"),
    ("sink/_manifest/2", b'{"batch": 1, "files": [], "delivery": 1}', "of batch 1, not of batch 2"),
    ("sink/_manifest/2", b'{"batch": 2, "files": [], "delivery": 0}', "delivery 0 is not a count"),
    ("sink/_manifest/2", b'{"batch": 2, "files": "x", "delivery": 1}', "files is not a list of paths"),
    ("sink/_manifest/2", b'{"batch": 2, "files": ["sink/1/part-0-r0b1p0a0.json"], "delivery": 1}',
     "names 'sink/1/part-0-r0b1p0a0.json', not a part file of batch 2"),
    ("sink/_manifest/2", b'{"batch": 2, "files": ["sink/2/part-0-gone.json"], "delivery": 1}', "sink/2/part-0-gone"),
    ("sink/2/part-0-r0b2p0a0.json", b"[1, ", "unreadable sink part file"),
    ("sink/2/part-0-r0b2p0a0.json", b"{}", "a sink part file holds a JSON list of rows"),
    ("sink/2/part-0-r9b2p0a9.json", b"{}", "a sink part file holds a JSON list of rows"),
])
def test_sink_files_names_a_manifest_or_part_file_that_does_not_decode(count, path, body, says):
    scenario, storage = count
    edited = storage.copy()
    edited.write(path, body, overwrite=True)
    found = violations(edited, scenario)
    assert found == [("sink_files", found[0][1])] and says in found[0][1], found


def test_an_empty_changelog_is_named_with_its_own_version(count):
    """The lineage chain stops at the version whose file does not decode: that file and version are named, not
    the version below it the chain can no longer reach."""
    scenario, storage = count
    empty = storage.copy()
    empty.write("state/0/1/5_r0b4p1a0.changelog", b"", overwrite=True)
    found = dict(violations(empty, scenario))
    assert found["lineage_reachable"].startswith("state/0/1: the lineage chain stops at version 5, whose file does "
                                                 "not decode (state/0/1/5_r0b4p1a0.changelog: truncated")
    assert "version 3 (commits/2 names 'r0b2p1a0') is below it" in found["lineage_reachable"]


def test_the_line_rules_judge_one_stores_logs_and_lineage_alone(count):
    """The bug zoo writes one store's files and the logs its committed line implies: no sink, one source
    partition, a store of its own name. The layout, the entries' shape and the files' decoding are not judged;
    the logs' order and the lineage are."""
    scenario, storage = count
    partial = storage.copy()
    partial.write("notes.txt", b"x")
    partial.write("offsets/3", b'v1\n{"batch":3,"start_offsets":[9],"end_offsets":[12]}', overwrite=True)
    partial.write("sink/2/part-0-r0b2p0a0.json", b"{", overwrite=True)
    assert violations(partial, scenario, LINE_RULES) == []
    assert rules(partial, scenario) == ["layout", "log_entries"]
    edit_commit(partial, 3, state_lineage={"0": {"0": "u"}})
    assert violations(partial, scenario, LINE_RULES) == [
        ("lineage_reachable", "state/0/0: version 4 (commits/3 names 'u') has lineage id 'r0b3p0a0'")]
    gap = partial.copy()
    gap.delete("commits/2")
    assert [r for r, _ in violations(gap, scenario, LINE_RULES)][:2] == ["commit_order", "offsets_committed"]
    assert set(LINE_RULES) < set(RULES)


def test_an_at_least_once_checkpoint_has_no_manifest_and_its_own_files_pass():
    scenario = make("aggregate", batches=5, retain=3, sink="at_least_once")
    storage = run_scenario(scenario).storage
    assert violations(storage, scenario) == []
    storage.write("sink/_manifest/2", b"{}")
    assert violations(storage, scenario)[0] == ("layout", "sink/_manifest/2: a sink manifest, but this query's sink "
                                                          "is at-least-once")


def test_unreadable_metadata_names_no_snapshot_format(count):
    scenario, storage = count
    broken = storage.copy()
    broken.write("metadata", b"v1\n{", overwrite=True)
    broken.write("state/0/0/SSTs/000008-ab-v3.sst", b"x")
    assert violations(broken, scenario)[0] == ("layout", "state/0/0/SSTs/000008-ab-v3.sst: snapshot data of a "
                                                         "backend's own format, but metadata names no "
                                                         "snapshot_format")


def test_a_crash_before_the_first_commit_leaves_offsets_without_commits():
    """offsets/0 and no commit entry at all: the crash between the first two log writes, which is legal."""
    scenario = make("aggregate", batches=3, retain=3)
    storage = DurableStorage()
    storage.write("offsets/0", b'v1\n{"batch":0,"start_offsets":[0,0],"end_offsets":[3,3]}')
    assert violations(storage, scenario) == []


def test_the_count_of_batches_in_flight_names_the_first_and_the_last():
    scenario = make("aggregate", "pipelining", batches=5, retain=3)
    storage = run_scenario(make("aggregate", batches=5, retain=3)).storage
    for b in (5, 6, 7):
        storage.write(f"offsets/{b}", f'v1\n{{"batch":{b},"start_offsets":[15,15],"end_offsets":[15,15]}}'.encode())
    assert violations(storage, scenario)[:1] == [("offsets_committed", "3 offset entries (offsets/5 to offsets/7) have no "
                                                                   "commit entry; at most 2 batch(es) can be in flight "
                                                                   "in these modes")]


def test_a_store_with_no_file_of_its_newest_version_is_named_without_a_chain(count):
    scenario, storage = count
    gone = storage.copy()
    gone.delete("state/0/1/5_r0b4p1a0.changelog")
    assert dict(violations(gone, scenario))["lineage_reachable"] == (
        "state/0/1: version 3 (commits/2 names 'r0b2p1a0') has no file on the chain")


def test_a_chain_that_stops_below_a_wrong_lineage_id_names_the_wrong_id_first(count):
    """Version 3's changelog (no snapshot beside it) is empty, so the chain stops there; commits/3 names
    another attempt for version 4, which is above the stop: that is what is named."""
    scenario, storage = count
    edited = storage.copy()
    edited.write("state/0/1/3_r0b2p1a0.changelog", b"", overwrite=True)
    lineage = CommitEntry.read(edited, 3).state_lineage
    lineage["0"]["1"] = "r5b3p1a2"
    edit_commit(edited, 3, state_lineage=lineage)
    assert dict(violations(edited, scenario))["lineage_reachable"] == (
        "state/0/1: version 4 (commits/3 names 'r5b3p1a2') has lineage id 'r0b3p1a0'")


def test_a_chain_stopping_deep_down_names_its_lowest_link():
    scenario = make("aggregate", batches=7, retain=6)
    storage = run_scenario(scenario).storage
    changelogs = sorted(p for p in storage.list("state/0/1/") if p.endswith(".changelog"))
    alone = [p for p in changelogs if not storage.exists(p.replace(".changelog", ".snapshot"))]
    stop = sorted(alone, key=lambda p: int(p.rsplit("/", 1)[1].split("_")[0]))[1]   # a version above the oldest
    version = int(stop.rsplit("/", 1)[1].split("_")[0])
    assert 2 < version < 6, "the stop lies below the newest version and above a retained one"
    storage.write(stop, b"", overwrite=True)
    found = dict(violations(storage, scenario))["lineage_reachable"]
    assert found.startswith(f"state/0/1: the lineage chain stops at version {version}, whose file does not decode "
                            f"({stop}: truncated")


def test_a_snapshot_of_the_references_format_is_read_even_where_foreign_readers_are(count):
    scenario, storage = count
    foreign = DurableStorage(dict(storage.files), snapshot_readers=(lambda *_: None,))
    foreign.write("state/0/0/4_r0b3p0a0.snapshot", storage.read("state/0/0/2_r0b1p0a0.snapshot"), overwrite=True)
    assert rules(foreign, scenario)[-1] == "state_files"


def test_the_oldest_batch_planned_and_not_committed_is_named(count):
    scenario, storage = count
    two = storage.copy()
    two.delete("commits/2")
    two.delete("commits/3")
    assert dict(violations(two, scenario))["offsets_committed"].startswith("offsets/2 has no commits/2, but "
                                                                           "commits/4 exists")
