"""The reference state store: one per (operator store, partition).

It models the three providers of spec section 2 over a ``Storage``:

- ``changelog`` (RocksDB with changelog checkpointing): each commit writes
  ``<v>_<uid>.changelog``; a commit that is ``min_deltas_for_snapshot`` versions
  past the last snapshot also freezes a pending snapshot, which only
  maintenance uploads (``<v>_<uid>.snapshot``).
- ``delta`` (the HDFS-backed provider): ``<v>_<uid>.delta`` every commit,
  snapshots by maintenance under the same rule.
- ``snapshot`` (RocksDB with changelog checkpointing off): every commit writes
  a full ``<v>_<uid>.snapshot``.

Version ``v`` is the state after batches ``0..v-1``. A commit is split into the
three protocol steps so async state checkpointing can separate them:
``seal`` (``task_apply`` ends: the in-memory version advances), ``write``
(``changelog_write``) and ``mark_durable`` (``state_commit``).

Loading version ``j`` walks the lineage back from ``(j, uid)``: each changelog
names its parent uid, and the walk stops at the newest snapshot on the chain
(``<= j`` by construction). A corrupt snapshot falls back to the changelog of
the same version when one exists (SPARK-21696); otherwise the load fails
loudly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from . import layout
from .changelog import MAGIC, Change, StateFileHeader, decode_state_file, encode_state_file
from .lineage_memo import LineageMemo
from .storage import CheckpointFormatError, Storage

PROVIDERS = ("changelog", "delta", "snapshot")


@dataclass(frozen=True)
class Sealed:
    """A version whose changes are fixed in memory but maybe not yet durable."""

    version: int
    uid: str
    parent_uid: str
    changes: tuple[Change, ...]
    snapshot: tuple[tuple[str, Any], ...] | None  # the full state, when a snapshot is due


@dataclass(frozen=True)
class LoadPlan:
    """How a version is rebuilt: a base (snapshot or empty) and the files replayed on top."""

    version: int
    uid: str
    base_version: int
    base_file: str | None
    replayed: tuple[str, ...]


@dataclass
class StateStore:
    storage: Storage
    op: str
    partition: int
    provider: str = "changelog"
    min_deltas_for_snapshot: int = 10
    version: int = 0
    uid: str = ""
    data: dict[str, Any] = field(default_factory=dict)
    changes: dict[str, Any] = field(default_factory=dict)
    last_snapshot_version: int = 0
    pending_snapshot: Sealed | None = None
    durable_versions: set[int] = field(default_factory=set)

    def __post_init__(self) -> None:
        if self.provider not in PROVIDERS:
            raise ValueError(f"state_store.provider {self.provider!r}: expected one of {PROVIDERS}")

    # ----------------------------------------------------------------- naming
    def file_path(self, version: int, uid: str, kind: str) -> str:
        return layout.state_file(self.op, self.partition, version, uid, kind)

    @property
    def delta_kind(self) -> str:
        return "delta" if self.provider == "delta" else "changelog"

    # ------------------------------------------------------------ operations
    def get(self, key: str) -> Any:
        return self.data.get(key)

    def put(self, key: str, value: Any) -> None:
        if value is None:
            raise ValueError(f"state value for key {key!r} must not be None (use delete)")
        self.data[key] = value
        self.changes[key] = value

    def delete(self, key: str) -> None:
        if key in self.data:
            del self.data[key]
            self.changes[key] = None

    def delete_range(self, start: str, end: str) -> None:
        """Delete every key in ``[start, end)``; each delete is recorded (SPARK-55510)."""
        for key in [k for k in self.data if start <= k < end]:
            self.delete(key)

    def items(self) -> list[tuple[str, Any]]:
        return sorted(self.data.items())

    def abort(self) -> None:
        """Discard uncommitted changes by reloading the current version."""
        if self.changes:
            self.load(self.version, self.uid)

    def memento(self) -> tuple:
        """The in-memory state, to roll a failed attempt back without reading the checkpoint."""
        return (self.version, self.uid, dict(self.data), self.last_snapshot_version, self.pending_snapshot)

    def restore(self, memento: tuple) -> None:
        self.version, self.uid, data, self.last_snapshot_version, self.pending_snapshot = memento
        self.data, self.changes = dict(data), {}

    # ---------------------------------------------------------------- commit
    def seal(self, uid: str) -> Sealed:
        """End of ``task_apply``: fix this version's changes in memory and advance."""
        pending = self.version - max(self.durable_versions, default=0)
        assert pending <= 1, f"{self.op}/{self.partition}: {pending} state commits pending; at most one may be"
        new_version = self.version + 1
        snapshot = None
        due = new_version - self.last_snapshot_version >= self.min_deltas_for_snapshot
        if self.provider == "snapshot" or due:
            snapshot = tuple(sorted(self.data.items()))
        sealed = Sealed(new_version, uid, self.uid, tuple(self.changes.items()), snapshot)
        if snapshot is not None and self.provider != "snapshot":
            self.pending_snapshot = sealed
            self.last_snapshot_version = new_version
        self.version, self.uid, self.changes = new_version, uid, {}
        return sealed

    def write(self, sealed: Sealed) -> str:
        """``changelog_write``: the one file this commit writes."""
        if self.provider == "snapshot":
            assert sealed.snapshot is not None
            return self._write_snapshot(sealed)
        path = self.file_path(sealed.version, sealed.uid, self.delta_kind)
        header = StateFileHeader(self.delta_kind, sealed.version, sealed.uid, sealed.parent_uid)
        self.storage.write(path, encode_state_file(header, sealed.changes))
        return path

    def mark_durable(self, sealed: Sealed) -> int:
        """``state_commit``: the version is durable and may be named in the commit log."""
        assert sealed.version >= max(self.durable_versions, default=0), \
            f"{self.op}/{self.partition}: the committed version only moves forward " \
            f"({sealed.version} after {max(self.durable_versions)})"
        self.durable_versions.add(sealed.version)
        return sealed.version

    def commit(self, uid: str) -> int:
        """Seal, write and mark durable in one call (synchronous state checkpointing)."""
        sealed = self.seal(uid)
        self.write(sealed)
        return self.mark_durable(sealed)

    # ----------------------------------------------------------- maintenance
    def do_maintenance(self) -> str | None:
        """``snapshot_upload``: upload the newest pending snapshot if its version is durable."""
        pending = self.pending_snapshot
        if pending is None or pending.version not in self.durable_versions:
            return None
        self.pending_snapshot = None
        return self._write_snapshot(pending)

    def _write_snapshot(self, sealed: Sealed) -> str:
        path = self.file_path(sealed.version, sealed.uid, "snapshot")
        header = StateFileHeader("snapshot", sealed.version, sealed.uid, sealed.parent_uid)
        self.storage.write(path, encode_state_file(header, sealed.snapshot or ()), overwrite=True)
        return path

    # ------------------------------------------------------------------ load
    def load(self, version: int, uid: str | None = None) -> None:
        """Load version ``version`` (lineage ``uid``) from the checkpoint, dropping memory."""
        self.data = load_version(self.storage, self.op, self.partition, version, uid)
        self.version = version
        self.uid = uid if uid is not None else resolve_uid(self.storage, self.op, self.partition, version)
        self.changes = {}
        self.pending_snapshot = None
        plan = plan_load(self.storage, self.op, self.partition, version, self.uid)
        self.last_snapshot_version = plan.base_version
        self.durable_versions = {version}

    def cleanup(self, min_versions_to_retain: int) -> list[str]:
        """Delete files no version in the retained window of this store's version needs."""
        return cleanup_store(self.storage, self.op, self.partition, min_versions_to_retain,
                             self.version, self.uid)


# --------------------------------------------------------------------------
# Reading a store's files: used by loads, by purge and by the oracles.


def store_files(storage: Storage, op: str, partition: int) -> dict[tuple[int, str, str], str]:
    """Map (version, uid, kind) -> path for every state file of one store (a fresh dict the caller may change)."""
    remembered = getattr(storage, "remembered", None)
    if remembered is not None:
        return dict(remembered(("store_files", op, partition), lambda: _listed_store_files(storage, op, partition)))
    return _listed_store_files(storage, op, partition)


def _listed_store_files(storage: Storage, op: str, partition: int) -> dict[tuple[int, str, str], str]:
    out = {}
    for path in storage.list(layout.store_dir(op, partition) + "/"):
        parsed = layout.parse_state_file(path)
        if parsed is not None:
            out[(parsed.version, parsed.uid, parsed.kind)] = path
    return out


def resolve_uid(storage: Storage, op: str, partition: int, version: int) -> str:
    """The one uid present for ``version``; ambiguous or missing lineage is an error."""
    if version == 0:
        return ""
    uids = sorted({uid for (v, uid, _k) in store_files(storage, op, partition) if v == version})
    if len(uids) == 1:
        return uids[0]
    where = f"{layout.store_dir(op, partition)} version {version}"
    if not uids:
        raise CheckpointFormatError(f"{where}: no state file for this version")
    raise CheckpointFormatError(f"{where}: files of several attempts {uids} and no lineage id to choose one")


def plan_load(storage: Storage, op: str, partition: int, version: int, uid: str | None,
              *, skip_snapshots: frozenset[int] = frozenset()) -> LoadPlan:
    """Walk lineage back from (version, uid) to the newest usable snapshot (or version 0)."""
    files = store_files(storage, op, partition)
    if uid is None:
        uid = resolve_uid(storage, op, partition, version)
    replayed: list[str] = []
    v, u = version, uid
    while v > 0:
        snap = files.get((v, u, "snapshot"))
        if snap is not None and v not in skip_snapshots:
            return LoadPlan(version, uid, v, snap, tuple(reversed(replayed)))
        delta = files.get((v, u, "changelog")) or files.get((v, u, "delta"))
        if delta is None:
            raise CheckpointFormatError(
                f"{layout.store_dir(op, partition)}: cannot load version {version}: "
                f"no snapshot or changelog for version {v} with lineage id {u!r}")
        replayed.append(delta)
        header, _ = read_state_file(storage, delta)
        v, u = v - 1, header.parent_uid
    return LoadPlan(version, uid, 0, None, tuple(reversed(replayed)))


def read_state_file(storage: Storage, path: str) -> tuple[StateFileHeader, tuple[Change, ...]]:
    """Decode one state file (cached by content); errors name the file.

    A ``.snapshot`` in a backend's own format is decoded by the storage's
    ``snapshot_readers`` (each raises ``CheckpointFormatError`` naming the
    file for a damaged file of its own format).
    """
    data = storage.read(path)
    readers = getattr(storage, "snapshot_readers", ())
    if readers and path.endswith(".snapshot") and data[:4] != MAGIC["snapshot"]:
        for reader in readers:
            decoded = reader(storage, path, data)
            if decoded is not None:
                return decoded
    return decode_state_file(data, path)


def load_version(storage: Storage, op: str, partition: int, version: int, uid: str | None,
                 *, skip_snapshots: frozenset[int] = frozenset()) -> dict[str, Any]:
    """Rebuild version ``version``: snapshot plus replayed changelogs (a fresh dict the caller may change).

    A snapshot that fails to decode is skipped in favour of an older base when
    the changelog of its version exists (SPARK-21696); the error propagates
    when there is nothing to fall back on.
    """
    remembered = getattr(storage, "remembered", None)
    if remembered is not None:
        key = ("load_version", op, partition, version, uid, skip_snapshots)
        return dict(remembered(key, lambda: _rebuilt(storage, op, partition, version, uid, skip_snapshots)))
    return _rebuilt(storage, op, partition, version, uid, skip_snapshots)


def _rebuilt(storage: Storage, op: str, partition: int, version: int, uid: str | None,
             skip_snapshots: frozenset[int]) -> dict[str, Any]:
    skip = set(skip_snapshots)
    damaged: list[str] = []   # the snapshots skipped so far, with why: named again if the fallback fails
    while True:
        try:
            plan = plan_load(storage, op, partition, version, uid, skip_snapshots=frozenset(skip))
        except CheckpointFormatError as exc:
            if not damaged:
                raise
            raise CheckpointFormatError(f"{'; '.join(damaged)}; falling back to an older snapshot "
                                        f"failed: {exc}") from None
        try:
            return apply_plan(storage, plan)
        except CheckpointFormatError as exc:
            if plan.base_file is None or plan.base_version in skip or str(exc).find(plan.base_file) < 0:
                raise
            files = store_files(storage, op, partition)
            base_uid = layout.parse_state_file(plan.base_file).uid  # type: ignore[union-attr]
            has_changelog = any((plan.base_version, base_uid, k) in files for k in ("changelog", "delta"))
            if not has_changelog:
                raise CheckpointFormatError(
                    f"{exc}; no changelog of version {plan.base_version} to fall back on") from None
            damaged.append(str(exc))
            skip.add(plan.base_version)


def load_versions(storage: Storage, op: str, partition: int,
                  wanted: list[tuple[int, str]]) -> dict[int, dict[str, Any] | CheckpointFormatError]:
    """``load_version`` of each (version, uid) in ``wanted`` (ascending): its state, or the error it raises.

    Loading a run's retained versions one by one replays the changelogs below each again, so judging a long
    run cost the square of its length. Here a version whose file is a changelog (or delta) naming the version
    just loaded as its parent starts from that version's state: its load plan is the previous one plus this
    file, so the state is the same. Only a version the previous one loaded at its first try (no fallback past
    a damaged snapshot) is a start; anything else, or any error on the way, is loaded by ``load_version``
    itself, which gives its own answer and error."""
    files = store_files(storage, op, partition)
    out: dict[int, dict[str, Any] | CheckpointFormatError] = {}
    previous: tuple[int, str, LoadPlan, dict[str, Any]] | None = None
    for version, uid in wanted:
        try:
            step = _next_load(storage, files, previous, version, uid)
            if step is None:
                plan = plan_load(storage, op, partition, version, uid)
                step = plan, apply_plan(storage, plan)
            previous = (version, uid, *step)
            out[version] = dict(step[1])
        except CheckpointFormatError:
            previous = None
            try:
                out[version] = load_version(storage, op, partition, version, uid)
            except CheckpointFormatError as exc:
                out[version] = exc
    return out


def _next_load(storage: Storage, files: dict[tuple[int, str, str], str],
               previous: tuple[int, str, LoadPlan, dict[str, Any]] | None, version: int,
               uid: str) -> tuple[LoadPlan, dict[str, Any]] | None:
    """The plan and state of (version, uid) from the previous version's, when its file follows on from it."""
    if previous is None or previous[0] != version - 1 or (version, uid, "snapshot") in files:
        return None
    delta = files.get((version, uid, "changelog")) or files.get((version, uid, "delta"))
    if delta is None:
        return None
    header, records = read_state_file(storage, delta)
    if header.parent_uid != previous[1]:
        return None
    _check_header(header, delta, version, None)
    plan = previous[2]
    data = dict(previous[3])
    for key, value in records:
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
    return LoadPlan(version, uid, plan.base_version, plan.base_file, plan.replayed + (delta,)), data


def apply_plan(storage: Storage, plan: LoadPlan) -> dict[str, Any]:
    data: dict[str, Any] = {}
    if plan.base_file is not None:
        header, records = read_state_file(storage, plan.base_file)
        _check_header(header, plan.base_file, plan.base_version, "snapshot")
        data.update(records)
    expected = plan.base_version
    for path in plan.replayed:
        header, records = read_state_file(storage, path)
        expected += 1
        _check_header(header, path, expected, None)
        for key, value in records:
            if value is None:
                data.pop(key, None)
            else:
                data[key] = value
    return data


def _check_header(header: StateFileHeader, path: str, version: int, kind: str | None) -> None:
    if header.version != version:
        raise CheckpointFormatError(f"{path}: header says version {header.version}, expected {version}")
    if kind is not None and header.kind != kind:
        raise CheckpointFormatError(f"{path}: is a {header.kind} file, expected a {kind}")


def parent_uid(storage: Storage, files: dict[tuple[int, str, str], str], op: str, partition: int,
               version: int, uid: str) -> str:
    """The lineage parent of (version, uid), read from whichever of its files' headers reads.

    A damaged changelog whose snapshot of the same version is intact still names the parent; only when
    every file of the version is unreadable (or there is none) is it an error, naming each file.
    """
    errors = []
    for kind in ("changelog", "delta", "snapshot"):
        path = files.get((version, uid, kind))
        if path is None:
            continue
        try:
            return read_state_file(storage, path)[0].parent_uid
        except CheckpointFormatError as exc:
            errors.append(str(exc))
    if errors:
        raise CheckpointFormatError("; ".join(errors))
    raise CheckpointFormatError(
        f"{layout.store_dir(op, partition)}: no file for version {version} with lineage id {uid!r}")


def readable(storage: Storage, path: str) -> bool:
    """Whether a state file decodes whole (header, records, end marker and checksum)."""
    try:
        read_state_file(storage, path)
    except CheckpointFormatError:
        return False
    return True


def cleanup_store(storage: Storage, op: str, partition: int, min_versions_to_retain: int,
                  latest_version: int, latest_uid: str) -> list[str]:
    """Delete what no version in ``[latest - retain + 1, latest]`` needs.

    Walk the valid lineage down from (latest, uid) to the newest readable
    snapshot S at or below the oldest retained version. Every retained version
    loads from S, so every file of a version below S, of any attempt, is
    deleted. Nothing at or above S is touched, so in-flight attempts and newer
    versions are safe. A corrupt snapshot is never trusted as S: a load falls
    back past it (SPARK-21696), so the walk goes on to an older readable one.

    The walk also stops at a snapshot whose parent version has no files left:
    an earlier cleanup with a higher latest version already deleted them, and
    the store has since been rolled back (a restart reloading an older
    retained version). Nothing below such a snapshot is loadable anyway.

    On a storage that reports its changes (``DurableStorage``) the walk and the
    listing are remembered between purges (``reference.protocol.lineage_memo``), so a
    purge costs what changed since the last one; the answer is the same.
    """
    oldest = max(latest_version - min_versions_to_retain + 1, 1)
    folder = layout.store_dir(op, partition)
    memo = LineageMemo.found(storage, folder)
    if memo is None:
        files = store_files(storage, op, partition)
        base = lineage_base(storage, files, op, partition, latest_version, latest_uid, oldest)
        doomed = sorted(path for (ver, _u, _k), path in files.items() if ver < base)
        if latest_version - base > REMEMBER_WALKS_PAST:   # a long walk: remember it from the next purge on
            LineageMemo.of(storage, folder, readable)
    else:
        known = memo.files
        base = memo.walk(latest_version, latest_uid, oldest,
                         lambda v, u: lineage_step(storage, known, op, partition, v, u, oldest, memo.readable))
        doomed = memo.below(base)
    for path in doomed:
        storage.delete(path)
    return doomed


# A walk this many versions long makes cleanup remember the store's lineage (``reference.protocol.lineage_memo``): shorter
# ones cost less than keeping the memo in step with every write (the explorer's runs are a few batches long).
REMEMBER_WALKS_PAST = 32


def lineage_base(storage: Storage, files: dict[tuple[int, str, str], str], op: str, partition: int,
                 latest_version: int, latest_uid: str, oldest: int) -> int:
    """The version S cleanup's walk stops at (``cleanup_store``), walked afresh from (latest, uid); 0 if none."""
    v, u = latest_version, latest_uid
    while v > 0:
        parent = lineage_step(storage, files, op, partition, v, u, oldest, lambda path: readable(storage, path))
        if parent is None:
            break
        u, v = parent, v - 1
    return v


def lineage_step(storage: Storage, files: dict[tuple[int, str, str], str], op: str, partition: int,
                 version: int, uid: str, oldest: int, decodes: Callable[[str], bool]) -> str | None:
    """One node of cleanup's walk: None where the walk stops at (version, uid), else the parent uid.

    It stops at a snapshot that decodes at or below ``oldest``, and at a snapshot whose parent version has
    no file left; reading the parent raises ``CheckpointFormatError`` when no file of the node reads."""
    snapshot = files.get((version, uid, "snapshot"))
    if version <= oldest and snapshot is not None and decodes(snapshot):
        return None
    parent = parent_uid(storage, files, op, partition, version, uid)
    if snapshot is not None and not any((version - 1, parent, k) in files for k in layout.STATE_KINDS):
        return None
    return parent
