"""Which state versions a checkpoint retains, read through the committed lineage.

The latest commit entry names, per store and partition, the lineage uid of
the newest committed version. Walking parent uids down from there gives the
committed chain; every version on it from the lowest usable base (a snapshot,
or version 1 when every changelog back to the start is there) is retained and
loadable. Files of other attempts are never on the chain.

A version the retention policy keeps (one of the last ``min_batches_to_retain``
committed) that is missing from that range is reported as a load error
naming its store and version, so a deleted file is never a silently shorter
state.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import layout
from .logs import CommitEntry, log_batches
from .state_store import read_state_file, store_files
from .storage import CheckpointFormatError, Storage


@dataclass(frozen=True)
class ChainLink:
    version: int
    uid: str
    snapshot: str | None
    delta: str | None


def committed_chain(storage: Storage, sid: str, partition: int, version: int, uid: str) -> list[ChainLink]:
    """Links from ``version`` down to the lowest version with a file, newest first (a fresh list)."""
    remembered = getattr(storage, "remembered", None)
    if remembered is not None:
        return list(remembered(("committed_chain", sid, partition, version, uid),
                               lambda: _walked_chain(storage, sid, partition, version, uid)))
    return _walked_chain(storage, sid, partition, version, uid)


def _walked_chain(storage: Storage, sid: str, partition: int, version: int, uid: str) -> list[ChainLink]:
    files = store_files(storage, sid, partition)
    chain = []
    v, u = version, uid
    while v > 0:
        snap = files.get((v, u, "snapshot"))
        delta = files.get((v, u, "changelog")) or files.get((v, u, "delta"))
        if snap is None and delta is None:
            break
        link = ChainLink(v, u, snap, delta)
        chain.append(link)
        parent = parent_uid(storage, link)
        if parent is None:
            break
        v, u = v - 1, parent
    return chain


def parent_uid(storage: Storage, link: ChainLink) -> str | None:
    """The lineage uid of the version below ``link``, from whichever of its files reads (None if neither)."""
    for path in (link.delta, link.snapshot):
        if path is None:
            continue
        try:
            return read_state_file(storage, path)[0].parent_uid
        except CheckpointFormatError:
            continue
    return None


def unreadable(storage: Storage, link: ChainLink) -> str | None:
    """Why none of ``link``'s files reads (naming each file), or None when one does."""
    errors = []
    for path in (link.delta, link.snapshot):
        if path is None:
            continue
        try:
            read_state_file(storage, path)
            return None
        except CheckpointFormatError as exc:
            errors.append(str(exc))
    return "; ".join(errors) or None


def retained_range(chain: list[ChainLink]) -> list[int]:
    """Versions loadable from the chain: from its lowest snapshot (or version 1) up."""
    if not chain:
        return []
    lowest = chain[-1]
    if lowest.version == 1 and lowest.delta is not None:
        base = 1
    else:
        snaps = [link.version for link in chain if link.snapshot is not None]
        if not snaps:
            return []
        base = min(snaps)
    return [link.version for link in reversed(chain) if link.version >= base]


def latest_lineage(storage: Storage) -> tuple[int, dict[str, dict[str, str]]] | None:
    """(newest committed version, store -> partition -> uid) from the latest commit entry."""
    commits = log_batches(storage, layout.COMMITS)
    if not commits:
        return None
    entry = CommitEntry.read(storage, commits[-1])
    return entry.batch + 1, entry.state_lineage


def unretained(storage: Storage, sid: str, partition: int, chain: list[ChainLink], loadable: list[int],
               latest: int, retain: int) -> list[str]:
    """Errors for the versions among the last ``retain`` committed that ``loadable`` lacks, each naming its store
    and version, and the missing file where the lineage names it."""
    errors = []
    uids = {link.version: link.uid for link in chain}
    if chain and chain[-1].version > 1:
        below = parent_uid(storage, chain[-1])
        if below is not None:
            uids[chain[-1].version - 1] = below
    folder = layout.store_dir(sid, partition)
    on_chain = {link.version for link in chain}
    broken = next((link for link in reversed(chain) if unreadable(storage, link)), None)
    for v in range(max(1, latest - retain + 1), latest + 1):
        if v in loadable:
            continue
        if broken is not None and v <= broken.version:
            errors.append(f"{folder}: version {v} is one of the last {retain} committed versions, but the lineage "
                          f"down to it is unreadable at version {broken.version}: {unreadable(storage, broken)}")
        elif v not in on_chain:
            uid = uids.get(v)
            names = f"{v}_{uid}.snapshot, .changelog or .delta" if uid else "a snapshot or changelog"
            errors.append(f"{folder}: version {v} is one of the last {retain} committed versions, but its file is "
                          f"missing (expected {names})")
        else:
            errors.append(f"{folder}: version {v} is one of the last {retain} committed versions, but no snapshot "
                          f"at or below it is left to load it from")
    return errors


def retained_states(storage: Storage, store_ids: list[str], partitions: int, retain: int | None = None,
                    ) -> tuple[dict[str, dict[str, dict[str, list[list[Any]]]]], list[str]]:
    """store -> partition -> version -> sorted pairs, and the load errors met. With ``retain``
    (``min_batches_to_retain``), a retained version that has no loadable file is an error too."""
    from .state_store import load_versions
    out: dict[str, dict[str, dict[str, list[list[Any]]]]] = {}
    errors: list[str] = []
    latest = latest_lineage(storage)
    for sid in store_ids:
        out[sid] = {}
        for p in range(partitions):
            per_version: dict[str, list[list[Any]]] = {}
            out[sid][str(p)] = per_version
            if latest is None:
                continue
            version, lineage = latest
            uid = lineage.get(sid, {}).get(str(p))
            if uid is None:
                errors.append(f"{layout.store_dir(sid, p)}: latest commit entry names no lineage uid")
                continue
            chain = committed_chain(storage, sid, p, version, uid)
            uids = {link.version: link.uid for link in chain}
            loadable = retained_range(chain)
            if retain is not None:
                errors.extend(unretained(storage, sid, p, chain, loadable, version, retain))
            for v, data in load_versions(storage, sid, p, [(v, uids[v]) for v in loadable]).items():
                if isinstance(data, CheckpointFormatError):
                    errors.append(str(data))
                    continue
                per_version[str(v)] = [[k, data[k]] for k in sorted(data)]
    return out, errors
