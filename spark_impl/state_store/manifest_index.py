"""Which uploaded SST files each snapshot manifest of one store references.

spec section 3 (``<v>_<uid>.snapshot`` as a manifest of shared SSTs) and
section 6 (SPARK-55892): both the upload (which SSTs it may reuse) and cleanup
(which SSTs it may delete) decide from the manifests that are in the
checkpoint *now*, the role of the file mappings in Spark's
``RocksDBFileManager``. A snapshot file is written once per (version, uid), so
its parsed references are memoized by path; entries of files no longer listed
are dropped.
"""

from __future__ import annotations

from reference.protocol.changelog import MAGIC
from reference.protocol.storage import CheckpointFormatError, Storage

from .checkpoint_fs import StateFileKey
from .sst_files import decode_manifest


class ManifestIndex:
    """The SST names each readable snapshot of one store references, memoized by path."""

    def __init__(self, storage: Storage):
        self.storage = storage
        self._refs_by_path: dict[str, frozenset[str]] = {}

    def refs_by_path(self, files: dict[StateFileKey, str]) -> tuple[dict[str, frozenset[str]], list[StateFileKey]]:
        """SST names each readable snapshot among ``files`` references, and the keys of unreadable ones."""
        self._forget_unlisted(files)
        refs: dict[str, frozenset[str]] = {}
        unreadable: list[StateFileKey] = []
        for key, path in files.items():
            if key[2] != "snapshot":
                continue
            found = self._refs_by_path.get(path)
            if found is None:
                try:
                    found = self._read_refs(path)
                except CheckpointFormatError:
                    unreadable.append(key)
                    continue
                self._refs_by_path[path] = found
            refs[path] = found
        return refs, unreadable

    def _forget_unlisted(self, files: dict[StateFileKey, str]) -> None:
        listed = {path for (_v, _u, kind), path in files.items() if kind == "snapshot"}
        for stale in set(self._refs_by_path) - listed:
            self._refs_by_path.pop(stale, None)

    def _read_refs(self, path: str) -> frozenset[str]:
        data = self.storage.read(path)
        if data[:4] == MAGIC["snapshot"]:
            return frozenset()  # a binary snapshot (``delta`` provider) references no SST
        return frozenset(s.dfs_name for s in decode_manifest(data, path).ssts)
