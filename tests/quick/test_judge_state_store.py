"""The reference state store driven by hand (reference/protocol/state_store.py, spec sections 2 and 3).

Found by mutation testing the judge: the store was pinned only through whole
runs, so which file a commit writes, when a snapshot is due, how a load
plans its base and falls back, and what cleanup deletes could change unseen.
Every expected file name and value below is worked out from the rules of docs/spec.md:
version v is the state after v commits; ``<v>_<uid>.<kind>``; a snapshot is
due when a version is ``min_deltas_for_snapshot`` past the last one.
"""

from __future__ import annotations

import dataclasses

import pytest

from reference.protocol.changelog import StateFileHeader, encode_state_file
from reference.protocol.state_store import (LoadPlan, StateStore, apply_plan, cleanup_store, load_version, parent_uid,
                                   plan_load, read_state_file, readable, resolve_uid, store_files)
from reference.protocol.storage import CheckpointFormatError, DurableStorage

D = "state/0/1"


def store(provider: str = "changelog", every: int = 2, storage: DurableStorage | None = None) -> StateStore:
    return StateStore(storage or DurableStorage(), "0", 1, provider=provider, min_deltas_for_snapshot=every)


def four_versions(provider: str = "changelog") -> StateStore:
    """Versions 1..4 by uids u1..u4: a=1; a=2, b=1; c=5; b deleted. Maintenance after each commit."""
    s = store(provider)
    for uid, edit in (("u1", lambda: s.put("a", 1)), ("u2", lambda: (s.put("a", 2), s.put("b", 1))),
                      ("u3", lambda: s.put("c", 5)), ("u4", lambda: s.delete("b"))):
        edit()
        s.commit(uid)
        s.do_maintenance()
    return s


def test_changelog_provider_writes_a_changelog_each_commit_and_a_snapshot_every_second_version():
    s = four_versions()
    assert sorted(s.storage.list()) == [f"{D}/1_u1.changelog", f"{D}/2_u2.changelog", f"{D}/2_u2.snapshot",
                                        f"{D}/3_u3.changelog", f"{D}/4_u4.changelog", f"{D}/4_u4.snapshot"]
    assert (s.version, s.uid, s.items()) == (4, "u4", [("a", 2), ("c", 5)])


def test_delta_provider_writes_deltas_and_the_snapshot_provider_only_snapshots():
    assert sorted(four_versions("delta").storage.list()) == [
        f"{D}/1_u1.delta", f"{D}/2_u2.delta", f"{D}/2_u2.snapshot", f"{D}/3_u3.delta", f"{D}/4_u4.delta",
        f"{D}/4_u4.snapshot"]
    assert sorted(four_versions("snapshot").storage.list()) == [f"{D}/{v}_u{v}.snapshot" for v in range(1, 5)]


def test_an_unknown_provider_is_refused_naming_it():
    with pytest.raises(ValueError, match="state_store.provider 'rocks'"):
        store("rocks")


def test_a_snapshot_is_uploaded_only_once_its_version_is_durable():
    s = store(every=1)
    s.put("a", 1)
    sealed = s.seal("u1")
    s.write(sealed)
    assert s.do_maintenance() is None                # sealed and written, not yet state_commit
    assert s.mark_durable(sealed) == 1
    assert s.do_maintenance() == f"{D}/1_u1.snapshot"
    assert s.do_maintenance() is None                # nothing pending any more


def test_values_deletes_and_ranges():
    s = store()
    with pytest.raises(ValueError, match="key 'a' must not be None"):
        s.put("a", None)
    s.delete("missing")
    assert s.changes == {}
    for key in ("a", "b", "c", "d"):
        s.put(key, 1)
    s.commit("u1")
    s.delete_range("b", "d")                          # [b, d): b and c go, d stays
    assert s.changes == {"b": None, "c": None}
    s.commit("u2")
    assert load_version(s.storage, "0", 1, 2, "u2") == {"a": 1, "d": 1}   # the deletes are in the changelog
    assert s.get("a") == 1 and s.get("b") is None


def test_abort_and_restore_drop_uncommitted_changes():
    s = four_versions()
    saved = s.memento()
    s.put("a", 99)
    s.abort()
    assert (s.get("a"), s.changes) == (2, {})
    s.put("z", 1)
    s.restore(saved)
    assert (s.get("z"), s.changes, s.version) == (None, {}, 4)


def test_load_sets_version_lineage_and_snapshot_base():
    s = four_versions()
    fresh = store(storage=s.storage)
    fresh.load(3)
    assert (fresh.version, fresh.uid, fresh.items()) == (3, "u3", [("a", 2), ("b", 1), ("c", 5)])
    assert (fresh.last_snapshot_version, fresh.durable_versions, fresh.pending_snapshot) == (2, {3}, None)


def test_resolve_uid_needs_exactly_one_attempt():
    s = four_versions()
    assert resolve_uid(s.storage, "0", 1, 0) == ""
    assert resolve_uid(s.storage, "0", 1, 3) == "u3"
    with pytest.raises(CheckpointFormatError, match=r"^state/0/1 version 5: no state file for this version$"):
        resolve_uid(s.storage, "0", 1, 5)
    s.storage.write(f"{D}/3_zz.changelog", s.storage.read(f"{D}/3_u3.changelog"))
    with pytest.raises(CheckpointFormatError, match=r"several attempts \['u3', 'zz'\]"):
        resolve_uid(s.storage, "0", 1, 3)


def test_a_load_plan_starts_at_the_newest_snapshot_on_the_chain_unless_skipped():
    s = four_versions()
    assert plan_load(s.storage, "0", 1, 3, "u3") == LoadPlan(3, "u3", 2, f"{D}/2_u2.snapshot",
                                                             (f"{D}/3_u3.changelog",))
    assert plan_load(s.storage, "0", 1, 3, None, skip_snapshots=frozenset({2})) == LoadPlan(
        3, "u3", 0, None, (f"{D}/1_u1.changelog", f"{D}/2_u2.changelog", f"{D}/3_u3.changelog"))
    s.storage.delete(f"{D}/1_u1.changelog")
    with pytest.raises(CheckpointFormatError, match="no snapshot or changelog for version 1 with lineage id 'u1'"):
        plan_load(s.storage, "0", 1, 3, "u3", skip_snapshots=frozenset({2}))


def test_a_corrupt_snapshot_falls_back_to_its_changelog_and_fails_loudly_without_one():
    s = four_versions()
    s.storage.write(f"{D}/4_u4.snapshot", b"junk", overwrite=True)
    assert load_version(s.storage, "0", 1, 4, "u4") == {"a": 2, "c": 5}     # SPARK-21696
    assert not readable(s.storage, f"{D}/4_u4.snapshot") and readable(s.storage, f"{D}/4_u4.changelog")
    only = four_versions("snapshot")
    only.storage.write(f"{D}/4_u4.snapshot", b"junk", overwrite=True)
    with pytest.raises(CheckpointFormatError, match="no changelog of version 4 to fall back on"):
        load_version(only.storage, "0", 1, 4, "u4")


def test_a_file_whose_header_names_another_version_or_kind_is_refused():
    s = four_versions()
    s.storage.write(f"{D}/3_u3.changelog", encode_state_file(StateFileHeader("changelog", 7, "u3", "u2"), ()),
                    overwrite=True)
    with pytest.raises(CheckpointFormatError, match=r"3_u3.changelog: header says version 7, expected 3"):
        load_version(s.storage, "0", 1, 3, "u3")
    t = four_versions()
    t.storage.write(f"{D}/2_u2.snapshot", t.storage.read(f"{D}/2_u2.changelog"), overwrite=True)
    plan = LoadPlan(3, "u3", 2, f"{D}/2_u2.snapshot", (f"{D}/3_u3.changelog",))
    with pytest.raises(CheckpointFormatError, match=r"2_u2.snapshot: is a changelog file, expected a snapshot"):
        apply_plan(t.storage, plan)
    assert load_version(t.storage, "0", 1, 3, "u3") == {"a": 2, "b": 1, "c": 5}   # a load falls back past it


def test_parent_uid_reads_whichever_file_of_the_version_decodes():
    s = four_versions()
    files = store_files(s.storage, "0", 1)
    assert parent_uid(s.storage, files, "0", 1, 2, "u2") == "u1"
    s.storage.write(f"{D}/2_u2.changelog", b"junk", overwrite=True)
    assert parent_uid(s.storage, files, "0", 1, 2, "u2") == "u1"        # from the snapshot's header
    s.storage.write(f"{D}/2_u2.snapshot", b"junk", overwrite=True)
    with pytest.raises(CheckpointFormatError) as both:
        parent_uid(s.storage, files, "0", 1, 2, "u2")
    assert "2_u2.changelog" in str(both.value) and "2_u2.snapshot" in str(both.value)
    with pytest.raises(CheckpointFormatError, match="no file for version 7 with lineage id 'u7'"):
        parent_uid(s.storage, files, "0", 1, 7, "u7")


def test_cleanup_keeps_what_the_retained_versions_load_from():
    """Retain 2 of 4: versions 3 and 4 load from the snapshot of 2, so only version 1 goes."""
    s = four_versions()
    assert s.cleanup(2) == [f"{D}/1_u1.changelog"]
    assert load_version(s.storage, "0", 1, 3, "u3") == {"a": 2, "b": 1, "c": 5}
    t = four_versions()
    assert cleanup_store(t.storage, "0", 1, 1, 4, "u4") == [f"{D}/1_u1.changelog", f"{D}/2_u2.changelog",
                                                             f"{D}/2_u2.snapshot", f"{D}/3_u3.changelog"]


def test_cleanup_walks_past_a_corrupt_snapshot_to_an_older_readable_one():
    s = four_versions()
    s.storage.write(f"{D}/4_u4.snapshot", b"junk", overwrite=True)
    assert cleanup_store(s.storage, "0", 1, 1, 4, "u4") == [f"{D}/1_u1.changelog"]


def test_a_task_retried_after_its_state_commit_commits_the_same_version_again():
    """A task attempt can fail after state_commit; the retry rolls memory back and commits that version again
    under its own uid: the committed version stays where it was, it does not move back."""
    s = store()
    before = s.memento()
    s.put("a", 1)
    assert s.commit("a0") == 1
    s.restore(before)
    s.put("a", 1)
    assert s.commit("a1") == 1 and s.durable_versions == {1}
    assert sorted(s.storage.list()) == [f"{D}/1_a0.changelog", f"{D}/1_a1.changelog"]


def test_a_snapshot_is_due_every_ten_versions_by_default_as_in_spark():
    """spark.sql.streaming.stateStore.minDeltasForSnapshot defaults to 10."""
    s = StateStore(DurableStorage(), "0", 1)
    for v in range(1, 10):
        s.put("k", v)
        s.commit(f"u{v}")
        assert s.pending_snapshot is None
    s.put("k", 10)
    s.commit("u10")
    assert s.pending_snapshot is not None and s.pending_snapshot.version == 10


def test_a_load_plan_is_frozen():
    plan = LoadPlan(1, "u", 0, None, ())
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.version = 2   # type: ignore[misc]


def test_a_snapshot_in_a_backends_own_format_is_read_by_the_first_reader_that_knows_it():
    s = four_versions()
    s.storage.write(f"{D}/4_u4.snapshot", b"SST!rows", overwrite=True)
    decoded = (StateFileHeader("snapshot", 4, "u4", "u3"), (("a", 2), ("c", 5)))
    seen = []

    def not_mine(_storage, path, _data):
        seen.append(path)
        return None

    def mine(_storage, _path, data):
        return decoded if data.startswith(b"SST!") else None

    s.storage.snapshot_readers = (not_mine, mine)
    assert read_state_file(s.storage, f"{D}/4_u4.snapshot") == decoded
    assert seen == [f"{D}/4_u4.snapshot"]
    assert read_state_file(s.storage, f"{D}/2_u2.snapshot")[0].kind == "snapshot"   # our own format: no reader
    assert seen == [f"{D}/4_u4.snapshot"]


def test_skip_snapshots_is_keyword_only():
    s = four_versions()
    with pytest.raises(TypeError):
        plan_load(s.storage, "0", 1, 3, "u3", frozenset({2}))   # type: ignore[misc]
    with pytest.raises(TypeError):
        load_version(s.storage, "0", 1, 3, "u3", frozenset({2}))   # type: ignore[misc]


def test_cleanup_stops_at_a_snapshot_whose_parent_an_earlier_cleanup_removed():
    """Cleanup at version 4 keeping 1 removed versions 1..3; version 5 follows. Keeping 3 now, the walk from
    5 reaches the snapshot of 4, whose parent version has no file left: it stops there, deleting nothing."""
    s = four_versions()
    assert s.cleanup(1) == [f"{D}/1_u1.changelog", f"{D}/2_u2.changelog", f"{D}/2_u2.snapshot",
                            f"{D}/3_u3.changelog"]
    s.put("a", 9)
    s.commit("u5")
    assert cleanup_store(s.storage, "0", 1, 3, 5, "u5") == []
    assert sorted(s.storage.list()) == [f"{D}/4_u4.changelog", f"{D}/4_u4.snapshot", f"{D}/5_u5.changelog"]


def test_cleanup_of_a_lineage_with_a_missing_link_fails_naming_it():
    s = store(every=100)
    for v in (1, 2, 3):
        s.put("a", v)
        s.commit(f"u{v}")
    s.storage.delete(f"{D}/1_u1.changelog")
    with pytest.raises(CheckpointFormatError, match="no file for version 1 with lineage id 'u1'"):
        cleanup_store(s.storage, "0", 1, 1, 3, "u3")


def test_a_load_that_cannot_plan_says_so_and_a_failed_fallback_names_what_it_skipped():
    s = four_versions()
    s.storage.delete(f"{D}/3_u3.changelog")
    with pytest.raises(CheckpointFormatError) as plain:
        load_version(s.storage, "0", 1, 3, "u3")
    assert str(plain.value).startswith(f"{D}: cannot load version 3: no snapshot or changelog for version 3")
    t = four_versions()
    t.storage.write(f"{D}/4_u4.snapshot", b"junk", overwrite=True)
    t.storage.delete(f"{D}/3_u3.changelog")
    with pytest.raises(CheckpointFormatError) as fallback:
        load_version(t.storage, "0", 1, 4, "u4")
    assert str(fallback.value).startswith(f"{D}/4_u4.snapshot") and "; falling back to an older snapshot failed: " \
        f"{D}: cannot load version 4" in str(fallback.value)


def test_async_state_may_seal_a_second_version_before_the_first_is_durable():
    s = store()
    s.put("a", 1)
    first = s.seal("u1")
    s.put("a", 2)
    second = s.seal("u2")                      # batch 1's task runs while batch 0's state is not yet durable
    for sealed in (first, second):
        s.write(sealed)
        s.mark_durable(sealed)
    assert load_version(s.storage, "0", 1, 2, "u2") == {"a": 2}
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.version = 3   # type: ignore[misc]


def test_a_snapshot_may_be_uploaded_again():
    s = store(every=1)
    s.put("a", 1)
    s.commit("u1")
    pending = s.pending_snapshot
    assert s.do_maintenance() == f"{D}/1_u1.snapshot"
    s.pending_snapshot = pending                # maintenance after a reload uploads the same version again
    assert s.do_maintenance() == f"{D}/1_u1.snapshot"


def test_a_bad_changelog_replayed_from_version_zero_is_a_format_error():
    s = store(every=100)
    for v in (1, 2, 3):
        s.put("a", v)
        s.commit(f"u{v}")
    s.storage.write(f"{D}/2_u2.changelog", encode_state_file(StateFileHeader("changelog", 7, "u2", "u1"), ()),
                    overwrite=True)
    with pytest.raises(CheckpointFormatError, match="2_u2.changelog: header says version 7, expected 2"):
        load_version(s.storage, "0", 1, 3, "u3")
