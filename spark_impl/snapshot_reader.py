"""Lets the reference's loads and oracles read the RocksDB store's snapshots (SST manifests).

The reference reads its own binary snapshots only. A checkpoint written by the
Spark engine holds ``<v>_<uid>.snapshot`` files that are JSON manifests of
shared SST files (``spark_impl.state_store.sst_files``); ``install()``
registers a reader for them with ``reference.state_store``, so
``retained_states``, the ``reconstruction`` and ``lineage`` oracles and
``lightspeed check --checkpoint`` judge a Spark checkpoint from its files.
"""

from __future__ import annotations

import json
from typing import Any

from reference import layout
from reference.changelog import StateFileHeader
from reference.state_store import register_snapshot_reader
from reference.storage import CheckpointFormatError, Storage


def read_manifest_snapshot(storage: Storage, path: str, data: bytes) -> tuple[StateFileHeader, tuple[Any, ...]] | None:
    if not data.lstrip().startswith(b"{"):
        return None
    from spark_impl.state_store import read_snapshot_records
    from spark_impl.state_store.sst_files import decode_manifest
    manifest = decode_manifest(data, path)  # raises CheckpointFormatError naming the file
    parts = path.split("/")
    if len(parts) < 4 or parts[0] != layout.STATE:
        raise CheckpointFormatError(f"{path}: a snapshot manifest outside state/<op>/<partition>/")
    op, partition = parts[1], int(parts[2])
    records = read_snapshot_records(storage, op, partition, path)
    header = StateFileHeader("snapshot", manifest.version, manifest.uid, manifest.parent_uid)
    return header, tuple((k, json.loads(json.dumps(v))) for k, v in records)


def install() -> None:
    register_snapshot_reader(read_manifest_snapshot)
