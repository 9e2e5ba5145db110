"""Which state files and SSTs retention lets go (spec section 2 ``purge``, section 5 ``retention``).

The rule is the reference's ``cleanup_store``, as Spark's
``RocksDBFileManager.deleteOldVersions`` applies it: walk the lineage down from
the store's version to the newest snapshot S at or below the oldest retained
version. Every retained version loads from S plus changelogs, so every state
file of a version below S, of any attempt, is deleted; nothing at or above S is
touched, so in-flight attempts and newer versions are safe. (If an earlier
cleanup already purged everything below a newer snapshot, because the store
was reloaded at an older retained version since, that snapshot is S.)

Then SSTs: one that a remaining manifest references is kept (SPARK-55892); one
that only deleted manifests referenced is deleted; one that no manifest
references (an orphan of an upload that died before writing its manifest) is
deleted only if the snapshot version in its name is below S, so the fresh SSTs
of an upload still in progress (of a version S or later, whose manifest is not
written yet) are never touched. If a remaining manifest is unreadable no SST is
deleted.

``RetentionPlan`` asserts what it promises (TIGER_STYLE): no file or SST it
deletes is one the retained versions' load chain needs.
"""

from __future__ import annotations

from dataclasses import dataclass

from reference.protocol import layout
from reference.protocol.changelog import MAGIC
from reference.protocol.storage import CheckpointFormatError, Storage

from .changelog_codec import read_header
from .checkpoint_fs import StateFileKey, StoreId, list_sst_names, list_state_files
from .maintenance import MaintenancePool
from .manifest_index import ManifestIndex
from .sst_files import decode_manifest, parse_dfs_sst_name


@dataclass(frozen=True)
class RetentionPlan:
    """What one cleanup keeps and deletes, from the lineage walk of the retained versions."""

    keep_from: int                      # S: every retained version loads from here
    needed_files: frozenset[str]        # the state files on the retained versions' lineage down to S
    needed_ssts: frozenset[str]         # the SSTs the snapshots among them reference
    doomed_files: tuple[str, ...]
    dead_ssts: frozenset[str]

    def __post_init__(self) -> None:
        kept = self.needed_files.intersection(self.doomed_files)
        assert not kept, f"cleanup would delete files a retained version loads: {sorted(kept)}"
        shared = self.needed_ssts & self.dead_ssts
        assert not shared, f"cleanup would delete SSTs a retained snapshot references: {sorted(shared)}"


class SecondWriterError(CheckpointFormatError):
    """A store's directory holds a version another store wrote after this one loaded: cleaning up by this
    store's lineage would delete the other writer's files (Spark keeps one active instance per store)."""


def plan_retention(storage: Storage, store: StoreId, index: ManifestIndex, latest_version: int,
                   latest_uid: str, min_versions_to_retain: int,
                   known_files: frozenset[str] | None = None) -> RetentionPlan:
    """The plan that keeps every version in ``[latest - retain + 1, latest]`` loadable.

    ``known_files``: the files of versions above ``latest`` that the store knows of (on file when it loaded,
    or its own failed attempts). Any other such file was written by a second writer after this store
    opened: ``SecondWriterError`` names it, and nothing is deleted.
    """
    if min_versions_to_retain < 1:
        raise ValueError("min_versions_to_retain must be >= 1")
    oldest = max(latest_version - min_versions_to_retain + 1, 1)
    files = list_state_files(storage, store)
    if known_files is not None:
        foreign = sorted((v, u, p) for (v, u, _k), p in files.items() if v > latest_version and p not in known_files)
        if foreign:
            version, uid, path = foreign[0]
            raise SecondWriterError(
                f"{store.directory}: {path} (version {version}, lineage id {uid!r}) was written after this store "
                f"loaded, past its version {latest_version}: another store writes this directory, so this one "
                f"deletes nothing")
    chain = retained_chain(storage, store, files, latest_version, latest_uid, oldest)
    keep_from = chain[-1][0]
    needed = frozenset(files[(v, u, kind)] for v, u in chain for kind in layout.STATE_KINDS if (v, u, kind) in files)
    refs, unreadable = index.refs_by_path(files)
    needed_ssts = frozenset().union(*(refs.get(path, frozenset()) for path in needed))
    doomed = tuple(sorted(path for (ver, _u, _k), path in files.items() if ver < keep_from))
    dead = dead_ssts(storage, store, files, refs, unreadable, keep_from)
    return RetentionPlan(keep_from, needed, needed_ssts, doomed, frozenset(dead))


def retained_chain(storage: Storage, store: StoreId, files: dict[StateFileKey, str], latest_version: int,
                   latest_uid: str, oldest: int) -> list[tuple[int, str]]:
    """(version, uid) from the latest down to the base S the retained versions load from (last)."""
    chain: list[tuple[int, str]] = []
    v, u = latest_version, latest_uid
    while v > 0 and not (v <= oldest and (v, u, "snapshot") in files):
        chain.append((v, u))
        parent = parent_uid(storage, store, files, v, u)
        if (v, u, "snapshot") in files and not any((v - 1, parent, kind) in files for kind in layout.STATE_KINDS):
            # An earlier cleanup purged everything below this snapshot (the store
            # was since reloaded at an older retained version): nothing more to walk.
            return chain
        u, v = parent, v - 1
    chain.append((v, u))
    return chain


def dead_ssts(storage: Storage, store: StoreId, files: dict[StateFileKey, str], refs: dict[str, frozenset[str]],
              unreadable: list[StateFileKey], keep_from: int) -> set[str]:
    """The SSTs cleanup may delete when every state file below ``keep_from`` goes."""
    if any(key[0] >= keep_from for key in unreadable):
        return set()  # cannot tell what a retained snapshot needs: delete no SST
    kept_refs: set[str] = set()
    doomed_refs: set[str] = set()
    for (ver, _u, _kind), path in files.items():
        if path in refs:
            (kept_refs if ver >= keep_from else doomed_refs).update(refs[path])
    dead: set[str] = set()
    for name in list_sst_names(storage, store):
        if name in kept_refs:
            continue
        parsed = parse_dfs_sst_name(name)
        if name in doomed_refs or (parsed is not None and parsed[1] is not None and parsed[1] < keep_from):
            dead.add(name)
    return dead


def parent_uid(storage: Storage, store: StoreId, files: dict[StateFileKey, str], version: int, uid: str) -> str:
    """The lineage parent of (version, uid), read from any of its files (header or manifest)."""
    for kind in ("changelog", "delta", "snapshot"):
        path = files.get((version, uid, kind))
        if path is None:
            continue
        data = storage.read(path)
        if kind == "snapshot" and data[:4] != MAGIC["snapshot"]:
            return decode_manifest(data, path).parent_uid
        return read_header(data, path).parent_uid
    raise CheckpointFormatError(f"{store.directory}: no file for version {version} with lineage id {uid!r}")


def delete_planned(storage: Storage, store: StoreId, plan: RetentionPlan, pool: MaintenancePool) -> list[str]:
    """Delete the plan's state files, then its SSTs, each set in parallel; returns every deleted path."""
    pool.delete_all(storage, plan.doomed_files)
    sst_paths = sorted(store.sst_path(name) for name in plan.dead_ssts)
    pool.delete_all(storage, sst_paths)
    return list(plan.doomed_files) + sst_paths
