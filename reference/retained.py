"""Which state versions a checkpoint retains, read through the committed lineage.

The latest commit entry names, per store and partition, the lineage uid of
the newest committed version. Walking parent uids down from there gives the
committed chain; every version on it from the lowest usable base (a snapshot,
or version 1 when every changelog back to the start is there) is retained and
loadable. Files of other attempts are never on the chain.
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
    """Links from ``version`` down to the lowest version with a file, newest first."""
    files = store_files(storage, sid, partition)
    chain = []
    v, u = version, uid
    while v > 0:
        snap = files.get((v, u, "snapshot"))
        delta = files.get((v, u, "changelog")) or files.get((v, u, "delta"))
        if snap is None and delta is None:
            break
        chain.append(ChainLink(v, u, snap, delta))
        try:
            u = read_state_file(storage, delta or snap)[0].parent_uid  # type: ignore[arg-type]
        except CheckpointFormatError:
            if delta is None or snap is None:
                break
            u = read_state_file(storage, snap)[0].parent_uid
        v -= 1
    return chain


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


def retained_states(storage: Storage, store_ids: list[str], partitions: int,
                    ) -> tuple[dict[str, dict[str, dict[str, list[list[Any]]]]], list[str]]:
    """store -> partition -> version -> sorted pairs, and the load errors met."""
    from .state_store import load_version
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
            for v in retained_range(chain):
                try:
                    data = load_version(storage, sid, p, v, uids[v])
                except CheckpointFormatError as exc:
                    errors.append(str(exc))
                    continue
                per_version[str(v)] = [[k, data[k]] for k in sorted(data)]
    return out, errors
