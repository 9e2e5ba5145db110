"""The reader of the RocksDB store's snapshots (SST manifests), for the reference's loads and oracles.

The reference reads its own binary snapshots only. A checkpoint written by the
Spark engine holds ``<v>_<uid>.snapshot`` files that are JSON manifests of
shared SST files (``spark_impl.state_store.sst_files``), and its ``metadata``
names their format, ``SNAPSHOT_FORMAT``. A storage that carries
``read_manifest_snapshot`` among its ``snapshot_readers`` (``checkpoint_storage``
makes one) lets ``retained_states``, the ``reconstruction`` and ``lineage``
oracles and ``lightspeed check --checkpoint`` judge a Spark checkpoint from
its files. Nothing is registered process-wide.
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import Any

from reference.protocol import layout
from reference.protocol.changelog import StateFileHeader
from reference.protocol.storage import CheckpointFormatError, LocalStorage, Storage

SNAPSHOT_FORMAT = "rocksdb-sst-manifest"


def read_manifest_snapshot(storage: Storage, path: str, data: bytes, local_root: str | Path | None = None,
                           ) -> tuple[StateFileHeader, tuple[Any, ...]] | None:
    """Decode a snapshot manifest and the SST files it names; None when ``data`` is not a manifest.

    ``local_root``: where the throwaway RocksDB that reads the SSTs goes (default: a temporary folder of this
    process, removed when it ends); bind it with ``functools.partial`` to keep a verifier's reads elsewhere.
    """
    if not data.lstrip().startswith(b"{"):
        return None
    from spark_impl.state_store import read_snapshot_records
    from spark_impl.state_store.sst_files import decode_manifest
    manifest = decode_manifest(data, path)  # raises CheckpointFormatError naming the file
    parts = path.split("/")
    if len(parts) < 4 or parts[0] != layout.STATE:
        raise CheckpointFormatError(f"{path}: a snapshot manifest outside state/<op>/<partition>/")
    op, partition = parts[1], int(parts[2])
    records = read_snapshot_records(storage, op, partition, path,
                                    local_root if local_root is not None else _reader_root())
    header = StateFileHeader("snapshot", manifest.version, manifest.uid, manifest.parent_uid)
    return header, tuple((k, json.loads(json.dumps(v))) for k, v in records)


@functools.cache
def _reader_root() -> Path:
    from spark_impl.scratch import scratch_dir
    return scratch_dir("lightspeed-snapshot-reader-")


def checkpoint_storage(root: str | os.PathLike[str]) -> LocalStorage:
    """The engine's checkpoint directory as a storage that reads the engine's snapshots."""
    return LocalStorage(root, snapshot_readers=(read_manifest_snapshot,))
