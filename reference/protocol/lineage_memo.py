"""What a state store's cleanup walk learned, kept in step with the store's files (spec section 2 ``purge``).

``reference.protocol.state_store.cleanup_store`` walks a store's lineage from its latest version down to the
snapshot every retained version loads from, and deletes every file below it. Walked afresh at every
purge, the walk and the listing before it grow with the run: until a snapshot exists at or below the
oldest retained version the walk reaches version 0 and deletes nothing, so every purge reads every
header again and a run costs the square of its length. This memo makes a purge cost what changed
since the last one, and gives the same answer as the walk afresh.

It caches what the checkpoint's files say, never what an engine holds in memory: it belongs to the
``DurableStorage``, which tells it of every change under the store's folder (``DurableStorage.watch``).
A driver crash, a restart or a rollback changes nothing it relies on unless a file changes, and then
it hears of it; a copy of the storage starts without one; a storage that cannot watch (a real
directory, which other processes write) gets the walk afresh. What it holds:

- ``files``: (version, uid, kind) -> path for every state file of the store, of every attempt:
  what a listing gives (``reference.protocol.state_store.store_files``); ``by_version``: the same paths by version;
- ``chain``: the lineage the last walk took, version -> uid, from ``top`` (where it started) down to
  ``lo`` (where it stopped; 1 when it ran out at version 0), each uid the one its child's header named;
- ``snapshots``: the chain's versions that have a snapshot file, sorted; ``decoded``: whether a
  snapshot file decodes, per path.

A walk takes the walk afresh's steps one by one (``step``, the same function) until it reaches a node
of the chain. Below it the chain is known: the walk afresh would stop at the newest chain snapshot at
or below the oldest retained version that decodes and is above ``lo``, and at no other node above
``lo``: each such node's parent has a file (its header was read), so the stop at a snapshot whose
parent an earlier cleanup removed cannot apply. Without such a snapshot the walk goes on from ``lo``,
step by step again. Any change to a file of a chain node other than a new snapshot (a corrupt, deleted
or rewritten file), or new snapshot readers, drops the chain; a file under a subfolder of the store's
folder (which the listing would count) makes the memo step aside for good (``usable``).
"""

from __future__ import annotations

import bisect
from typing import Any, Callable

from . import layout

Key = tuple[int, str, str]          # (version, uid, kind) of a state file
Step = Callable[[int, str], "str | None"]   # one node of the walk: its parent uid, or None where the walk stops


class LineageMemo:
    """The memo of one store's folder; find it with ``of``, walk with ``walk``, list the doomed with ``below``."""

    def __init__(self, storage: Any, folder: str, decodes: Callable[[Any, str], bool]):
        self.storage, self.folder, self.decodes = storage, folder, decodes
        self.usable = True
        self.files: dict[Key, str] = {}
        self.by_version: dict[int, set[str]] = {}
        self.floor = 0                  # no state file has a version below this
        self.readers = storage.snapshot_readers
        self.decoded: dict[str, bool] = {}
        self._drop_chain()
        for path in storage.list(folder + "/"):
            self(path, "create")

    @classmethod
    def of(cls, storage: Any, folder: str, decodes: Callable[[Any, str], bool]) -> LineageMemo | None:
        """The memo of ``folder`` on ``storage`` (made and registered on first use); None when the storage
        cannot tell it of changes, or the folder holds subfolders."""
        if not callable(getattr(storage, "watch", None)) or not isinstance(getattr(storage, "watchers", None), dict):
            return None
        memo = cls._registered(storage, folder)
        if memo is None:
            memo = cls(storage, folder, decodes)
            storage.watch(folder, memo)
        return memo if memo.usable else None

    @classmethod
    def found(cls, storage: Any, folder: str) -> LineageMemo | None:
        """The usable memo already kept for ``folder`` on ``storage``, else None (none is made)."""
        memo = cls._registered(storage, folder)
        return memo if memo is not None and memo.usable else None

    @classmethod
    def _registered(cls, storage: Any, folder: str) -> LineageMemo | None:
        watchers = getattr(storage, "watchers", None)
        if not isinstance(watchers, dict):
            return None
        return next((w for w in watchers.get(folder, ()) if isinstance(w, cls)), None)

    # ------------------------------------------------------------ changes
    def __call__(self, path: str, change: str) -> None:
        """A file under the folder was created, replaced or deleted: keep ``files`` exact, and drop the chain
        if the change touches one of its nodes (a new snapshot on it is only noted)."""
        name = path[len(self.folder) + 1:]
        if "/" in name:
            self.usable = False
            return
        parsed = layout.parse_state_file(name)
        if parsed is None:
            return
        v, key = parsed.version, (parsed.version, parsed.uid, parsed.kind)
        self.decoded.pop(path, None)
        if change == "delete":
            self.files.pop(key, None)
            same = self.by_version.get(v)
            if same is not None:
                same.discard(path)
                if not same:
                    del self.by_version[v]
        else:
            self.files[key] = path
            self.by_version.setdefault(v, set()).add(path)
            self.floor = min(self.floor, v)
        if self.chain.get(v) == parsed.uid:
            if change == "create" and parsed.kind == "snapshot":
                bisect.insort(self.snapshots, v)
            else:
                self._drop_chain()

    def _drop_chain(self) -> None:
        self.chain: dict[int, str] = {}
        self.snapshots: list[int] = []
        self.lo = self.top = 0

    # --------------------------------------------------------------- walk
    def readable(self, path: str) -> bool:
        """Whether the snapshot at ``path`` decodes (memoized until the file changes)."""
        known = self.decoded.get(path)
        if known is None:
            known = self.decoded[path] = self.decodes(self.storage, path)
        return known

    def walk(self, latest: int, uid: str, oldest: int, step: Step) -> int:
        """The version the walk from (latest, uid) stops at (0 if it runs out), as the walk afresh finds it.

        An error of ``step`` (a lineage link no file names) propagates at the node where the walk afresh
        raises it, and leaves the memo as it was."""
        if self.storage.snapshot_readers is not self.readers:   # what a snapshot decodes to may have changed
            self.readers, self.decoded = self.storage.snapshot_readers, {}
            self._drop_chain()
        above: list[tuple[int, str]] = []   # nodes stepped through before reaching the chain
        below: list[tuple[int, str]] = []   # nodes stepped through from lo down
        joined = 0
        v, u = latest, uid
        while v > 0:
            if not joined and self.chain.get(v) == u:
                joined = v
                stop = self._snapshot_stop(min(v, oldest))
                if stop is not None:
                    self._remember(latest, above, joined, below, stop)
                    return stop
                v, u = self.lo, self.chain[self.lo]
            parent = step(v, u)
            (below if joined else above).append((v, u))
            if parent is None:
                break
            v, u = v - 1, parent
        self._remember(latest, above, joined, below, v)
        return v

    def _snapshot_stop(self, limit: int) -> int | None:
        """The newest chain version in (lo, limit] whose snapshot decodes."""
        i = bisect.bisect_right(self.snapshots, limit)
        while i > 0 and self.snapshots[i - 1] > self.lo:
            v = self.snapshots[i - 1]
            if self.readable(self.files[(v, self.chain[v], "snapshot")]):
                return v
            i -= 1
        return None

    def _remember(self, latest: int, above: list[tuple[int, str]], joined: int, below: list[tuple[int, str]],
                  base: int) -> None:
        """Make the chain the path just walked: ``above`` down to ``joined``, the old chain from there down to
        its lo, then ``below``; cut at ``base``. Each node is added and removed once: linear over a run."""
        chain, snaps = self.chain, self.snapshots
        if not joined:
            chain.clear()
            snaps.clear()
        else:
            for v in range(joined + 1, self.top + 1):
                chain.pop(v, None)
            for v in range(self.lo, base):
                chain.pop(v, None)
            del snaps[bisect.bisect_right(snaps, joined):]
            del snaps[:bisect.bisect_left(snaps, base)]
        fresh = [(v, u) for v, u in below if v >= base and v not in chain]
        fresh += reversed(above)   # oldest first: versions below the old chain, then above the join
        for v, u in fresh:
            chain[v] = u
            if (v, u, "snapshot") in self.files:
                bisect.insort(snaps, v)
        self.top, self.lo = latest, max(base, 1) if chain else 0

    def below(self, base: int) -> list[str]:
        """Every state file of a version below ``base`` (of any attempt), sorted: what cleanup deletes."""
        while self.floor < base and self.floor not in self.by_version:
            self.floor += 1
        return sorted(path for v in range(self.floor, base) for path in self.by_version.get(v, ()))
