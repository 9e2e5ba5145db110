"""Cleanup's remembered lineage walk gives the walk afresh's answer (reference/protocol/lineage_memo.py, spec section 2).

``cleanup_store`` over a ``DurableStorage`` remembers its walk between purges
(``reference.protocol.lineage_memo``) so a purge costs what changed since the last one.
The reference is the judge, so a wrong memo is a wrong spec. A Hypothesis
state machine runs one store through commits, failed and retried attempts,
zombie files, maintenance, rollbacks to any version, corrupt, deleted and
rewritten files, new snapshot readers, a subfolder, and cleanups with any
retention from the store's version or from an older one; before every
cleanup it computes the answer afresh (``store_files`` and ``lineage_base``,
which never look at the memo) and the cleanup must delete exactly that, or
raise the same error. Cost: over a long run without a snapshot, a purge
reads and lists a bounded number of times, whatever the run's length. The
same machine checks ``load_versions`` (each retained version loaded from the
one before, as the judge reads a run's retained state) against
``load_version`` of each, errors included.
"""

from __future__ import annotations

import pytest
from hypothesis import note
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from reference.protocol.changelog import StateFileHeader, encode_state_file
from reference.protocol import state_store
from reference.protocol.lineage_memo import LineageMemo
from reference.protocol.state_store import (StateStore, cleanup_store, lineage_base, load_version, load_versions, readable,
                                   store_files)
from reference.protocol.storage import CheckpointFormatError, DurableStorage

OP, PARTITION = "0", 2
D = f"state/{OP}/{PARTITION}"


def afresh(storage: DurableStorage, retain: int, latest: int, uid: str) -> list[str] | str:
    """What cleanup deletes, walked afresh from a listing (or the error it raises)."""
    oldest = max(latest - retain + 1, 1)
    files = store_files(storage, OP, PARTITION)
    try:
        base = lineage_base(storage, files, OP, PARTITION, latest, uid, oldest)
    except CheckpointFormatError as exc:
        return f"error: {exc}"
    return sorted(path for (v, _u, _k), path in files.items() if v < base)


def remembered(storage: DurableStorage, retain: int, latest: int, uid: str) -> list[str] | str:
    try:
        return cleanup_store(storage, OP, PARTITION, retain, latest, uid)
    except CheckpointFormatError as exc:
        return f"error: {exc}"


def foreign_reader(_storage, _path, data):
    """A backend's own snapshot format: ``SST!`` then the parent uid."""
    if not data.startswith(b"SST!"):
        return None
    return StateFileHeader("snapshot", 0, "", data[4:].decode()), ()


@pytest.fixture(autouse=True)
def remember_every_walk(monkeypatch):
    """Cleanup remembers a store's lineage only after a long walk; here from the first, so every rule meets it."""
    monkeypatch.setattr(state_store, "REMEMBER_WALKS_PAST", -1)


class MemoAgainstAfresh(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.storage = DurableStorage()
        self.history: list[tuple[int, str]] = [(0, "")]   # every (version, uid) a commit made
        self.n = 0
        self.retain = 1

    @initialize(provider=st.sampled_from(["changelog", "changelog", "delta", "snapshot"]), every=st.integers(1, 4),
                retain=st.integers(1, 6))
    def open_store(self, provider: str, every: int, retain: int) -> None:
        """A store, and the retention its purges use (the engine purges after every batch)."""
        note(f"{provider} store, a snapshot every {every}, retain {retain}")
        self.store = StateStore(self.storage, OP, PARTITION, provider, every)
        self.retain = retain

    def uid(self) -> str:
        self.n += 1
        return f"u{self.n}"

    def files(self) -> list[str]:
        return sorted(self.storage.list(D + "/"))

    @rule(keys=st.lists(st.sampled_from("abcde"), max_size=3), maintain=st.booleans())
    def commit(self, keys: list[str], maintain: bool) -> None:
        for k in keys:
            self.store.put(k, self.n)
        uid = self.uid()
        self.store.commit(uid)
        self.history.append((self.store.version, uid))
        if maintain:
            self.store.do_maintenance()
        self.cleanup(self.retain, 0)

    @rule()
    def failed_attempt_then_retry(self) -> None:
        before = self.store.memento()
        self.store.put("z", self.n)
        self.store.commit(self.uid())          # the failed attempt's file stays
        self.store.restore(before)
        self.store.durable_versions = {before[0]}
        self.commit([], False)

    @rule(back=st.integers(0, 8))
    def zombie_file(self, back: int) -> None:
        """A late write of a failed attempt at an older version, its parent anything."""
        v = max(self.store.version - back, 1)
        parent = self.history[min(v - 1, len(self.history) - 1)][1]
        header = StateFileHeader("changelog", v, self.uid(), parent)
        self.storage.write(f"{D}/{v}_{header.uid}.changelog", encode_state_file(header, [("k", 1)]))

    @rule(data=st.data())
    def rollback(self, data: st.DataObject) -> None:
        """A restart reloads an older committed version (maybe no longer loadable) and goes on from it."""
        version, uid = data.draw(st.sampled_from(self.history))
        try:
            self.store.load(version, uid)
        except CheckpointFormatError:
            return
        self.history = [h for h in self.history if h[0] < version] + [(version, uid)]

    @precondition(lambda self: self.files())
    @rule(data=st.data(), how=st.sampled_from(["corrupt", "delete", "copy", "junk snapshot", "foreign snapshot"]))
    def damage(self, data: st.DataObject, how: str) -> None:
        path = data.draw(st.sampled_from(self.files()))
        note(f"{how} {path}")
        if how == "corrupt":
            self.storage.write(path, self.storage.read(path)[:-3], overwrite=True)
        elif how == "delete":
            self.storage.delete(path)
        elif how == "copy":   # another file's bytes under this name: its header names another version or uid
            other = data.draw(st.sampled_from(self.files()))
            self.storage.write(path, self.storage.read(other), overwrite=True)
        else:
            name = path.rsplit("/", 1)[1]
            v, uid = name.split(".")[0].split("_")
            snapshot = f"{D}/{v}_{uid}.snapshot"
            parent = data.draw(st.sampled_from([u for _v, u in self.history]))
            body = b"junk" if how == "junk snapshot" else b"SST!" + parent.encode()
            self.storage.write(snapshot, body, overwrite=True)

    @rule(on=st.booleans())
    def snapshot_readers(self, on: bool) -> None:
        self.storage.snapshot_readers = (foreign_reader,) if on else ()

    @rule()
    def rename_a_file(self) -> None:
        files = self.files()
        if files:
            src = files[-1]
            self.storage.rename(src, src.replace(".changelog", ".delta"))

    @rule(retain=st.integers(1, 6), older=st.integers(0, 3))
    def cleanup(self, retain: int, older: int) -> None:
        latest, uid = self.history[max(len(self.history) - 1 - older, 0)]
        expected = afresh(self.storage, retain, latest, uid)
        note(f"cleanup retain {retain} from {latest} {uid!r}: {expected}")
        assert remembered(self.storage, retain, latest, uid) == expected

    @rule(data=st.data())
    def load_versions_in_turn(self, data: st.DataObject) -> None:
        """``load_versions`` (each version from the one before) equals ``load_version`` of each, errors too: on
        the committed history, or on versions of any attempt present."""
        present: dict[int, list[str]] = {}
        for (v, uid, _kind) in sorted(store_files(self.storage, OP, PARTITION)):
            present.setdefault(v, []).append(uid)
        committed = dict(self.history[1:])
        wanted = sorted((v, data.draw(st.sampled_from(sorted({*uids, committed.get(v, uids[0])})), label=f"uid {v}"))
                        for v, uids in present.items()) if data.draw(st.booleans(), label="any attempt") \
            else self.history[1:]
        self.compare_loads(wanted)

    @invariant()
    def loading_the_committed_versions_in_turn_gives_each_ones_load(self) -> None:
        self.compare_loads(self.history[1:])

    def compare_loads(self, wanted: list[tuple[int, str]]) -> None:
        together = load_versions(self.storage, OP, PARTITION, wanted)
        assert list(together) == [v for v, _u in wanted]
        for v, uid in wanted:
            try:
                alone: object = load_version(self.storage, OP, PARTITION, v, uid)
            except CheckpointFormatError as exc:
                alone = f"error: {exc}"
            got = together[v]
            assert (f"error: {got}" if isinstance(got, CheckpointFormatError) else got) == alone, v

    @invariant()
    def the_memo_mirrors_a_listing(self) -> None:
        memo = LineageMemo.of(self.storage, D, readable)
        if memo is not None:
            assert memo.files == store_files(self.storage, OP, PARTITION)


TestMemoAgainstAfresh = MemoAgainstAfresh.TestCase


def commits(store: StateStore, versions: range) -> None:
    for v in versions:
        store.put("k", v)
        store.commit(f"u{v}")


class CountingStorage(DurableStorage):
    def __init__(self) -> None:
        super().__init__()
        self.reads = self.lists = 0

    def read(self, path: str) -> bytes:
        self.reads += 1
        return super().read(path)

    def list(self, prefix: str = "") -> list[str]:
        self.lists += 1
        return super().list(prefix)


def test_a_purge_reads_and_lists_a_bounded_number_of_times_however_long_the_run():
    """No snapshot in 2,000 versions: the walk afresh would read every header at every purge."""
    storage = CountingStorage()
    store = StateStore(storage, OP, PARTITION, "changelog", 10**6)
    per_purge = {}
    for v in range(1, 2001):
        commits(store, range(v, v + 1))
        storage.reads = storage.lists = 0
        assert cleanup_store(storage, OP, PARTITION, 100, v, f"u{v}") == []
        per_purge[v] = (storage.reads, storage.lists)
    assert per_purge[1] == (1, 2)   # the first purge walks afresh (a listing, one header), then starts the memo
    assert max(per_purge[v] for v in range(2, 2001)) == (2, 0)   # then: the new version and version 1


def test_cleanup_remembers_only_after_a_long_walk(monkeypatch):
    """Short runs (the explorer's) walk afresh; the first walk longer than the threshold starts the memo."""
    monkeypatch.setattr(state_store, "REMEMBER_WALKS_PAST", 32)
    storage = CountingStorage()
    store = StateStore(storage, OP, PARTITION, "changelog", 10**6)
    reads = {}
    for v in range(1, 101):
        commits(store, range(v, v + 1))
        storage.reads = 0
        cleanup_store(storage, OP, PARTITION, 10, v, f"u{v}")
        reads[v] = storage.reads
        assert (LineageMemo.found(storage, D) is not None) == (v >= 33)   # 33 versions walked, past 32
    assert reads[33] == 33 and reads[34] == 34 and max(reads[v] for v in range(35, 101)) == 2


def test_a_file_corrupted_after_the_walk_remembered_it_fails_the_next_cleanup_as_afresh():
    s = StateStore(DurableStorage(), OP, PARTITION, "changelog", 100)
    commits(s, range(1, 6))
    assert s.cleanup(2) == []
    s.storage.write(f"{D}/3_u3.changelog", b"LSCL", overwrite=True)
    with pytest.raises(CheckpointFormatError, match="3_u3.changelog"):
        s.cleanup(2)


def test_a_snapshot_uploaded_on_the_remembered_lineage_becomes_the_base():
    s = StateStore(DurableStorage(), OP, PARTITION, "changelog", 3)
    commits(s, range(1, 5))           # version 3's snapshot is pending, not uploaded
    assert s.cleanup(1) == []
    s.do_maintenance()                # uploads 3_u3.snapshot
    assert s.cleanup(2) == [f"{D}/1_u1.changelog", f"{D}/2_u2.changelog"]


def test_a_rollback_and_a_new_attempt_walk_the_new_lineage():
    s = StateStore(DurableStorage(), OP, PARTITION, "changelog", 2)
    commits(s, range(1, 7))
    s.do_maintenance()                # 6_u6.snapshot
    assert s.cleanup(1) == [f"{D}/1_u1.changelog", f"{D}/2_u2.changelog", f"{D}/3_u3.changelog",
                            f"{D}/4_u4.changelog", f"{D}/5_u5.changelog"]
    s.load(6, "u6")
    s.put("k", 60)
    s.commit("x7")                    # another lineage at 7, beside u7 that never was
    assert cleanup_store(s.storage, OP, PARTITION, 1, 7, "x7") == []
    s.storage.delete(f"{D}/6_u6.changelog")   # the snapshot of 6 still names its parent
    assert cleanup_store(s.storage, OP, PARTITION, 1, 7, "x7") == []


def test_a_subfolder_under_the_store_makes_cleanup_walk_afresh():
    s = StateStore(DurableStorage(), OP, PARTITION, "changelog", 100)
    commits(s, range(1, 4))
    s.cleanup(1)
    s.storage.write(f"{D}/sub/1_v1.changelog", b"x")
    assert LineageMemo.of(s.storage, D, readable) is None
    assert s.cleanup(1) == []


def test_a_copy_of_the_storage_has_no_memo_and_a_pickled_one_keeps_none():
    import pickle
    s = StateStore(DurableStorage(), OP, PARTITION, "changelog", 100)
    commits(s, range(1, 4))
    s.cleanup(1)
    assert s.storage.watchers
    assert not s.storage.copy().watchers
    assert not pickle.loads(pickle.dumps(s.storage)).watchers


def test_new_snapshot_readers_can_make_a_remembered_snapshot_the_base():
    """A snapshot in a backend's own format decodes only once its reader is there."""
    s = StateStore(DurableStorage(), OP, PARTITION, "changelog", 100)
    commits(s, range(1, 7))
    s.storage.write(f"{D}/4_u4.snapshot", b"SST!u3")
    assert s.cleanup(2) == [] and s.cleanup(2) == []   # 4's snapshot does not decode: the walk goes on to 0
    s.storage.snapshot_readers = (foreign_reader,)
    assert s.cleanup(2) == [f"{D}/1_u1.changelog", f"{D}/2_u2.changelog", f"{D}/3_u3.changelog"]


def test_a_rewritten_snapshot_that_names_another_parent_is_read_again():
    """The snapshot provider's versions name their parents in their snapshots alone; one rewritten to name a
    parent that has no file stops the walk there."""
    storage = DurableStorage(snapshot_readers=(foreign_reader,))
    s = StateStore(storage, OP, PARTITION, "snapshot")
    commits(s, range(1, 6))
    assert s.cleanup(5) == [] and s.cleanup(5) == []
    storage.write(f"{D}/3_u3.snapshot", b"SST!gone", overwrite=True)
    assert s.cleanup(5) == [f"{D}/1_u1.snapshot", f"{D}/2_u2.snapshot"]


def header_file(version: int, uid: str, parent: str, records: list, kind: str = "changelog",
                named: int | None = None) -> tuple[str, bytes]:
    """A state file written by hand: its name may say another version than its header (``named``)."""
    header = StateFileHeader(kind, version, uid, parent)
    return f"{D}/{named or version}_{uid}.{kind}", encode_state_file(header, records)


def test_loading_in_turn_starts_from_a_snapshot_where_the_version_has_one():
    """A version with a snapshot loads from it, not from the version before plus its changelog (here the
    snapshot holds another state than the replay gives)."""
    storage = DurableStorage()
    s = StateStore(storage, OP, PARTITION, "changelog", 100)
    commits(s, range(1, 4))
    storage.write(*header_file(3, "u3", "u2", [("k", 99)], kind="snapshot"))
    loaded = load_versions(storage, OP, PARTITION, [(1, "u1"), (2, "u2"), (3, "u3")])
    assert loaded == {1: {"k": 1}, 2: {"k": 2}, 3: {"k": 99}} == {
        v: load_version(storage, OP, PARTITION, v, f"u{v}") for v in (1, 2, 3)}


def test_loading_in_turn_follows_on_only_from_the_version_just_below():
    """Versions 1, 2 and 4 asked for: 4 names as its parent a version-3 uid equal to 2's; it is not 2's state
    plus 4's changes (3's file is missing, so 4 does not load)."""
    storage = DurableStorage()
    for path, data in (header_file(1, "a", "", [("k", 1)]), header_file(2, "b", "a", [("k", 2)]),
                       header_file(4, "d", "b", [("k", 4)])):
        storage.write(path, data)
    loaded = load_versions(storage, OP, PARTITION, [(1, "a"), (2, "b"), (4, "d")])
    assert loaded[2] == {"k": 2}
    assert isinstance(loaded[4], CheckpointFormatError) and "version 3" in str(loaded[4])


def test_loading_in_turn_checks_the_version_a_file_says_it_is():
    """A file named as version 2 whose header says version 7 (naming version 1 as its parent) fails the load
    of version 2, as a load of it alone does."""
    storage = DurableStorage()
    for path, data in (header_file(1, "a", "", [("k", 1)]), header_file(7, "b", "a", [("k", 7)], named=2)):
        storage.write(path, data)
    loaded = load_versions(storage, OP, PARTITION, [(1, "a"), (2, "b")])
    assert isinstance(loaded[2], CheckpointFormatError) and "header says version 7, expected 2" in str(loaded[2])
