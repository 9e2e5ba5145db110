"""The RocksDB state store against the reference model, step by step (SPEC sections 2, 5).

A Hypothesis state machine drives ``spark_impl.state_store.RocksDBStateStore``
(over a real directory through ``LocalStorage``) and
``reference.state_store.StateStore`` (over ``DurableStorage``) with the same
operations: put, delete, range delete, commit, abort, crash, load of any
retained version, maintenance and cleanup at any moment, a snapshot upload
that dies after its SSTs but before its manifest (orphan SSTs for cleanup),
and a task retry whose failed attempt's file lands later (a zombie writer).
After every rule the live states agree, and every retained committed version
loads identically from both checkpoint directories.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import note, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from reference.changelog import StateFileHeader, encode_state_file
from reference.state_store import PROVIDERS, StateStore, load_version
from reference.storage import DurableStorage, LocalStorage, StorageError
from spark_impl.state_store import RocksDBStateStore

OP, PARTITION = "0", 3
KEYS = st.sampled_from(["a", "b", "ba", "c", "d", "e", "é", "f"])
VALUES = st.one_of(st.integers(-3, 3), st.lists(st.integers(0, 2), max_size=2),
                   st.dictionaries(st.sampled_from(["n", "m"]), st.integers(0, 2), max_size=1))


class ManifestFailingStorage(LocalStorage):
    """LocalStorage whose snapshot-file writes fail while ``failing`` is set (an executor dying)."""

    failing = False

    def write(self, path: str, data: bytes, *, overwrite: bool = False) -> None:
        if self.failing and path.endswith(".snapshot"):
            raise StorageError(f"{path}: injected failure before the manifest")
        super().write(path, data, overwrite=overwrite)


def _profile_examples() -> int:
    try:
        name = settings.get_current_profile_name()
    except AttributeError:  # older Hypothesis
        name = "default"
    return 300 if name == "thorough" else 30


class StoreMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="rocksdb-sm-"))
        self.storage = ManifestFailingStorage(self.tmp / "checkpoint")
        self.ref_storage = DurableStorage()
        self.attempts = 0
        self.crashes = 0
        self.lineage: dict[int, str] = {0: ""}
        self.floor = 0
        self.checked_signature: object = None
        self.mine: RocksDBStateStore | None = None
        self.verifier: RocksDBStateStore | None = None

    # ------------------------------------------------------------- setup
    @initialize(provider=st.sampled_from(PROVIDERS), min_deltas=st.integers(1, 3), retain=st.integers(2, 4))
    def setup(self, provider: str, min_deltas: int, retain: int) -> None:
        note(f"provider={provider} min_deltas_for_snapshot={min_deltas} min_versions_to_retain={retain}")
        self.provider, self.min_deltas, self.retain = provider, min_deltas, retain
        self.ref = StateStore(self.ref_storage, OP, PARTITION, provider, min_deltas)
        self.mine = self._new_store("live0")
        self.verifier = self._new_store("verifier")

    def _new_store(self, name: str) -> RocksDBStateStore:
        return RocksDBStateStore(self.storage, OP, PARTITION, self.provider, self.min_deltas,
                                 local_root=self.tmp / name)

    def _uid(self, prefix: str) -> str:
        self.attempts += 1
        return f"{prefix}{self.attempts}"

    def teardown(self) -> None:
        for store in (self.mine, self.verifier):
            if store is not None:
                store.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    # ------------------------------------------------------------ writes
    @rule(writes=st.lists(st.tuples(KEYS, VALUES), min_size=1, max_size=4))
    def put(self, writes: list) -> None:
        for key, value in writes:
            note(f"put {key!r} = {value!r}")
            self.ref.put(key, value)
            self.mine.put(key, value)

    @rule(key=KEYS)
    def delete(self, key: str) -> None:
        note(f"delete {key!r}")
        self.ref.delete(key)
        self.mine.delete(key)

    @rule(bounds=st.tuples(KEYS, st.sampled_from(["b", "c", "e", "z"])).map(sorted))
    def delete_range(self, bounds: list[str]) -> None:
        start, end = bounds
        note(f"delete_range [{start!r}, {end!r})")
        self.ref.delete_range(start, end)
        self.mine.delete_range(start, end)

    @rule()
    def commit(self) -> None:
        uid = self._uid("c")
        version = self.ref.commit(uid)
        mine_version = self.mine.commit(uid)
        note(f"commit -> version {version} uid {uid}")
        assert mine_version == version
        self.lineage = {v: u for v, u in self.lineage.items() if v < version}
        self.lineage[version] = uid

    @rule()
    def abort(self) -> None:
        note("abort the uncommitted batch")
        self.ref.abort()
        self.mine.abort()

    # --------------------------------------------------------- failures
    @rule()
    def crash(self) -> None:
        version, uid = self.ref.version, self.ref.uid
        note(f"crash; restart both from the checkpoint at version {version} uid {uid!r}")
        self.mine.crash()
        assert not self.mine.local_dir.exists()
        self.crashes += 1
        self.mine = self._new_store(f"live{self.crashes}")
        self.mine.load(version, uid)
        self.ref = StateStore(self.ref_storage, OP, PARTITION, self.provider, self.min_deltas)
        self.ref.load(version, uid)

    @rule(writes=st.lists(st.tuples(KEYS, VALUES), min_size=1, max_size=3),
          retry_writes=st.lists(st.tuples(KEYS, VALUES), max_size=3))
    def task_retry_with_zombie(self, writes: list, retry_writes: list) -> None:
        """Attempt A applies ``writes`` and fails; the retry B commits; A's file lands afterwards."""
        base_version, base_uid = self.ref.version, self.ref.uid
        zombie_uid = self._uid("z")
        for key, value in writes:
            self.ref.put(key, value)
            self.mine.put(key, value)
        note(f"attempt {zombie_uid} of version {base_version + 1} wrote {writes} and failed")
        self.ref.abort()
        self.mine.abort()
        for key, value in retry_writes:
            self.ref.put(key, value)
            self.mine.put(key, value)
        self.commit()
        kind = "snapshot" if self.provider == "snapshot" else self.ref.delta_kind
        header = StateFileHeader(kind, base_version + 1, zombie_uid, "" if kind == "snapshot" else base_uid)
        data = encode_state_file(header, [(k, v) for k, v in writes] + [("zombie", 1)])
        path = self.ref.file_path(base_version + 1, zombie_uid, kind)
        note(f"zombie {zombie_uid} lands {path} after the retry committed")
        self.ref_storage.write(path, data)
        self.storage.write(path, data)

    # ------------------------------------------------------ maintenance
    @rule()
    def maintenance(self) -> None:
        note("maintenance uploads the pending snapshot")
        self.ref.do_maintenance()
        self.mine.do_maintenance()

    @rule()
    def maintenance_dies_before_manifest(self) -> None:
        note("maintenance uploads the pending snapshot's SSTs and dies before its manifest")
        self.storage.failing = True
        try:
            self.mine.do_maintenance()
        except StorageError:
            pass
        finally:
            self.storage.failing = False

    @rule()
    def cleanup(self) -> None:
        note(f"cleanup keeping {self.retain} versions below version {self.ref.version}")
        # The reference's cleanup walks the lineage down to a snapshot at or below the
        # oldest retained version and raises when an earlier cleanup already purged that
        # far (possible after a load of an older retained version), so it is never asked
        # to retain below the purge floor. The store under test gets the plain request.
        self.ref.cleanup(max(1, min(self.retain, self.ref.version - self.floor + 1)))
        self.mine.cleanup(self.retain)
        self.floor = max(self.floor, self.ref.version - self.retain + 1)

    def retained(self) -> list[int]:
        low = max(self.ref.version - self.retain + 1, self.floor, 0)
        return [v for v in sorted(self.lineage) if low <= v <= self.ref.version]

    @precondition(lambda self: self.mine is not None)
    @rule(data=st.data())
    def load(self, data: st.DataObject) -> None:
        version = data.draw(st.sampled_from(self.retained()), label="version")
        uid = self.lineage[version]
        note(f"load version {version} uid {uid!r} (uncommitted changes are dropped)")
        self.ref.load(version, uid)
        self.mine.load(version, uid)
        self.lineage = {v: u for v, u in self.lineage.items() if v <= version}

    # ------------------------------------------------------- invariants
    @invariant()
    def live_states_agree(self) -> None:
        if self.mine is None:
            return
        assert self.mine.items() == self.ref.items()
        assert self.mine.version == self.ref.version

    @invariant()
    def retained_versions_agree(self) -> None:
        if self.mine is None:
            return
        signature = (tuple(self.storage.list()), tuple(self.ref_storage.list()),
                     tuple(sorted(self.lineage.items())), self.floor, self.ref.version)
        if signature == self.checked_signature:
            return  # no checkpoint file changed since the last full check
        for version in self.retained():
            uid = self.lineage[version]
            expected = sorted(load_version(self.ref_storage, OP, PARTITION, version, uid).items())
            self.verifier.load(version, uid)
            assert self.verifier.items() == expected, f"version {version} uid {uid!r}"
        self.checked_signature = signature


TestRocksDBStoreAgainstReference = StoreMachine.TestCase
TestRocksDBStoreAgainstReference.settings = settings(
    settings.default, max_examples=_profile_examples(), stateful_step_count=30, deadline=None)
