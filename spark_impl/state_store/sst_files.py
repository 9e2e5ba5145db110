"""RocksDB snapshots in the checkpoint: shared SST files plus a small manifest.

Implements the ``<v>_<uid>.snapshot`` file of spec section 3 for the RocksDB
providers (``changelog`` and ``snapshot``), in the spirit of Spark's
``RocksDBFileManager`` (not its code):

- A snapshot starts as a RocksDB checkpoint (hard links of the live DB's
  files, memtable flushed) taken at commit time. It is immutable from then on.
- Upload copies every SST file of the checkpoint to
  ``state/<op>/<p>/SSTs/<stem>-<content-hash>-v<version>.sst``. The name carries
  a hash of the bytes, so an SST is uploaded once and referenced by every later
  snapshot that still contains it, and two different files that happen to
  share a local name (``000008.sst`` of two DB instances: SPARK-45419,
  SPARK-49770, SPARK-51717) can never be confused. ``<version>`` is the
  version of the snapshot whose upload wrote the file: maintenance deletes an
  SST that no manifest references only when that version is below the
  retention bound, so the files an upload in progress has written, but whose
  manifest is not yet there, are never taken for orphans.
- Reuse is decided against the checkpoint *at upload time*, not against a
  memory of earlier uploads: an SST is reused only if it is listed and a
  readable manifest references it, so an SST deleted meanwhile by another
  executor's maintenance is uploaded again (SPARK-55892), and an orphan (left
  by an upload that died before its manifest) is never adopted just before
  maintenance deletes it. After the manifest is written the upload lists the
  SSTs once more and re-uploads any it references that vanished meanwhile.
- An upload given no reusable SSTs copies every SST (a full snapshot:
  ``RocksDBStateStore(share_ssts=False)``, the baseline of the commit-latency
  benchmark).
- The manifest (versioned JSON with its own CRC) lists the SSTs with sizes and
  hashes and carries the small non-SST files (CURRENT, MANIFEST-*, OPTIONS-*)
  inline, so writing it is the single atomic step that makes a snapshot exist.
- Restore verifies every byte count and hash; any mismatch is a
  ``CheckpointFormatError`` naming the snapshot file and its version.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from reference.language.json_input import JsonInputError, loads
from reference.protocol.layout import checked_name
from reference.protocol.storage import CheckpointFormatError, Storage, create_new_in, excerpt

from .checkpoint_fs import StoreId, list_sst_names
from .lineage import UID_PATTERN

MANIFEST_FORMAT = "lightspeed-rocksdb-snapshot"
MANIFEST_FORMAT_VERSION = 1
CONTENT_HASH_HEX_CHARS = 24
MAX_INLINE_FILE_BYTES = 16 << 20
# <stem>-<hash>[-v<version>].sst; names without a version come from older uploads.
_DFS_SST_NAME = re.compile(r"^(?P<identity>.+-[0-9a-f]{%d})(?:-v(?P<version>\d+))?\.sst$" % CONTENT_HASH_HEX_CHARS)


@dataclass(frozen=True)
class SstEntry:
    local_name: str
    dfs_name: str
    size_bytes: int
    content_hash: str


@dataclass(frozen=True)
class InlineFile:
    name: str
    size_bytes: int
    data: bytes


@dataclass(frozen=True)
class SnapshotManifest:
    version: int
    uid: str
    parent_uid: str
    ssts: tuple[SstEntry, ...]
    other_files: tuple[InlineFile, ...]

    def encode(self) -> bytes:
        body = {
            "format": MANIFEST_FORMAT,
            "format_version": MANIFEST_FORMAT_VERSION,
            "version": self.version,
            "uid": self.uid,
            "parent_uid": self.parent_uid,
            "ssts": [{"local_name": s.local_name, "dfs_name": s.dfs_name, "size_bytes": s.size_bytes,
                      "content_hash": s.content_hash} for s in self.ssts],
            "other_files": [{"name": f.name, "size_bytes": f.size_bytes,
                             "data_b64": base64.b64encode(f.data).decode()} for f in self.other_files],
        }
        raw = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
        return json.dumps({"crc32": zlib.crc32(raw), "manifest": body},
                          sort_keys=True, separators=(",", ":")).encode()


MANIFEST_FIELDS = frozenset({"format", "format_version", "version", "uid", "parent_uid", "ssts", "other_files"})
SST_FIELDS = frozenset({"local_name", "dfs_name", "size_bytes", "content_hash"})
INLINE_FIELDS = frozenset({"name", "size_bytes", "data_b64"})


def decode_manifest(data: bytes, path: str) -> SnapshotManifest:
    """Parse and verify a manifest; every failure names the file (and the version when known).

    A manifest is read from a checkpoint, so it is untrusted: every file name in it must pass
    ``reference.protocol.layout.checked_name`` as one path component (an SST's checkpoint name must also be an SST
    name of this layout), no name may be given twice, a lineage id must be one, and a field the format does
    not have is refused, each naming the field."""
    try:
        outer = loads(data)
        body = outer["manifest"]
        raw = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
    except (JsonInputError, KeyError, TypeError) as exc:
        raise CheckpointFormatError(f"{path}: unreadable snapshot manifest: {exc}") from None
    if not isinstance(body, dict) or set(outer) != {"crc32", "manifest"}:
        raise CheckpointFormatError(f"{path}: a snapshot manifest is {{\"crc32\": n, \"manifest\": {{...}}}}")
    where = f"{path} (version {str(body.get('version', '?'))[:20]})"
    if outer.get("crc32") != zlib.crc32(raw):
        raise CheckpointFormatError(f"{where}: manifest checksum mismatch (file is corrupt)")
    if body.get("format") != MANIFEST_FORMAT or body.get("format_version") != MANIFEST_FORMAT_VERSION:
        raise CheckpointFormatError(f"{where}: unknown manifest format {str(body.get('format'))[:40]!r} "
                                    f"v{str(body.get('format_version'))[:20]!r}")
    _known_fields(body, MANIFEST_FIELDS, where, "manifest")
    ssts: list[SstEntry] = []
    others: list[InlineFile] = []
    names: set[str] = set()
    for i, s in enumerate(_listed(body, "ssts", where)):
        _known_fields(s, SST_FIELDS, where, f"ssts[{i}]")
        local = checked_name(s["local_name"], where, f"ssts[{i}].local_name")
        dfs = checked_name(s["dfs_name"], where, f"ssts[{i}].dfs_name")
        if parse_dfs_sst_name(dfs) is None:
            raise CheckpointFormatError(f"{where}: ssts[{i}].dfs_name {excerpt(dfs)} is not an SST name of this "
                                        "layout (<stem>-<hash>[-v<version>].sst)")
        if not isinstance(s["content_hash"], str):
            raise CheckpointFormatError(f"{where}: ssts[{i}].content_hash is not a string")
        ssts.append(SstEntry(_unique(local, names, where, f"ssts[{i}].local_name"), dfs,
                             _count(s["size_bytes"], where, f"ssts[{i}].size_bytes"), s["content_hash"]))
    for i, f in enumerate(_listed(body, "other_files", where)):
        _known_fields(f, INLINE_FIELDS, where, f"other_files[{i}]")
        name = checked_name(f["name"], where, f"other_files[{i}].name")
        try:
            inline = base64.b64decode(f["data_b64"], validate=True)
        except (TypeError, ValueError):
            raise CheckpointFormatError(f"{where}: other_files[{i}].data_b64 is not base64") from None
        others.append(InlineFile(_unique(name, names, where, f"other_files[{i}].name"),
                                 _count(f["size_bytes"], where, f"other_files[{i}].size_bytes"), inline))
    for key in ("uid", "parent_uid"):
        uid = body[key]
        if not isinstance(uid, str) or not (UID_PATTERN.match(uid) or (key == "parent_uid" and uid == "")):
            raise CheckpointFormatError(f"{where}: {key} {excerpt(str(uid))} is not a lineage id "
                                        f"({UID_PATTERN.pattern})")
    return SnapshotManifest(_count(body["version"], where, "version"), body["uid"], body["parent_uid"],
                            tuple(ssts), tuple(others))


def _known_fields(value: object, fields: frozenset[str], where: str, what: str) -> None:
    """``value`` is an object with exactly ``fields``: a missing or an unknown one is named."""
    if not isinstance(value, dict):
        raise CheckpointFormatError(f"{where}: {what} is not a JSON object")
    unknown, missing = sorted(set(value) - fields), sorted(fields - set(value))
    if unknown:
        raise CheckpointFormatError(f"{where}: {what} has the field {excerpt(unknown[0])}, which a snapshot "
                                    "manifest does not have (tampered?)")
    if missing:
        raise CheckpointFormatError(f"{where}: {what} lacks the field {missing[0]!r}")


def _listed(body: dict, key: str, where: str) -> list:
    value = body[key]
    if not isinstance(value, list):
        raise CheckpointFormatError(f"{where}: {key} is not a list")
    return value


def _count(value: object, where: str, field: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise CheckpointFormatError(f"{where}: {field} {str(value)[:20]} is not a count (an integer >= 0)")
    return value


def _unique(name: str, seen: set[str], where: str, field: str) -> str:
    if name in seen:
        raise CheckpointFormatError(f"{where}: {field} {excerpt(name)} names a file the manifest already lists")
    seen.add(name)
    return name


@dataclass(frozen=True)
class LocalCheckpoint:
    """An immutable RocksDB checkpoint of version ``version`` (lineage ``uid``) on local disk.

    ``hash_cache`` is the content-hash memo of the DB instance that produced it,
    keyed by (local name, size): local SST names are unique only within one
    instance, so the memo is never shared across instances.
    """

    path: str
    version: int
    uid: str
    parent_uid: str
    hash_cache: dict[tuple[str, int], str] = field(default_factory=dict, compare=False, hash=False)


def content_hash(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=CONTENT_HASH_HEX_CHARS // 2).hexdigest()


def sst_identity(local_name: str, digest: str) -> str:
    """What two uploads of the same file share: local stem and content hash."""
    stem = local_name[:-4] if local_name.endswith(".sst") else local_name
    return f"{stem}-{digest}"


def dfs_sst_name(local_name: str, digest: str, version: int | None = None) -> str:
    """The checkpoint name of an SST uploaded by the snapshot of ``version``."""
    identity = sst_identity(local_name, digest)
    return f"{identity}.sst" if version is None else f"{identity}-v{version}.sst"


def parse_dfs_sst_name(name: str) -> tuple[str, int | None] | None:
    """(identity, uploading snapshot's version or None) of an SST name; None if not one."""
    match = _DFS_SST_NAME.match(name)
    if match is None:
        return None
    version = match.group("version")
    return match.group("identity"), None if version is None else int(version)


def reusable_ssts(present: Iterable[str], referenced: Iterable[str]) -> dict[str, str]:
    """identity -> name of every listed SST that a readable manifest references."""
    listed = set(present)
    out: dict[str, str] = {}
    for name in sorted(set(referenced) & listed):
        parsed = parse_dfs_sst_name(name)
        if parsed is not None:
            out.setdefault(parsed[0], name)
    return out


def upload_checkpoint(storage: Storage, store: StoreId, checkpoint: LocalCheckpoint,
                      manifest_path: str, reusable: dict[str, str] | None = None) -> SnapshotManifest:
    """Upload the SSTs not in ``reusable``, then the manifest (the atomic step), then repair.

    ``reusable`` maps identity -> name of the SSTs this snapshot may reference
    without uploading (see ``reusable_ssts``); None means every listed SST
    (the behaviour of a store that has no manifest index), {} means none:
    every SST is copied (a full snapshot).
    """
    if reusable is None:
        listed = list_sst_names(storage, store)
        reusable = reusable_ssts(listed, listed)
    reusable = dict(reusable)
    ssts: list[SstEntry] = []
    local_files: dict[str, Path] = {}
    others: list[InlineFile] = []
    root = Path(checkpoint.path)
    for name in sorted(os.listdir(root)):
        full = root / name
        if full.is_dir():
            continue
        if not full.exists():
            raise FileNotFoundError(f"{full}: a file of the local checkpoint of version {checkpoint.version} "
                                    f"disappeared during its upload; no manifest is written")
        if name.endswith(".sst"):
            entry = _upload_sst(storage, store, checkpoint, full, reusable)
            ssts.append(entry)
            local_files[entry.dfs_name] = full
        else:
            others.append(_inline_file(full))
    if not any(f.name == "CURRENT" for f in others) or not any(f.name.startswith("MANIFEST-") for f in others):
        # A manifest without RocksDB's own CURRENT and MANIFEST could never be restored: refuse to write it.
        raise FileNotFoundError(f"{root}: the local checkpoint of version {checkpoint.version} lacks RocksDB's "
                                f"CURRENT or MANIFEST file (was it deleted during the upload?); no manifest is written")
    manifest = SnapshotManifest(checkpoint.version, checkpoint.uid, checkpoint.parent_uid,
                                tuple(ssts), tuple(others))
    storage.write(manifest_path, manifest.encode(), overwrite=True)
    # A reused SST may have been deleted by another executor's maintenance
    # between our listing and the manifest write: put back what is missing.
    missing = set(local_files) - list_sst_names(storage, store)
    for dfs_name in sorted(missing):
        storage.write(store.sst_path(dfs_name), local_files[dfs_name].read_bytes(), overwrite=True)
    return manifest


def _upload_sst(storage: Storage, store: StoreId, checkpoint: LocalCheckpoint, full: Path,
                reusable: dict[str, str]) -> SstEntry:
    """Upload one local SST unless an identical one is reusable; ``reusable`` learns what was uploaded."""
    name, size = full.name, full.stat().st_size
    digest = checkpoint.hash_cache.get((name, size))
    data: bytes | None = None
    if digest is None:
        data = full.read_bytes()
        digest = content_hash(data)
        checkpoint.hash_cache[(name, size)] = digest
    identity = sst_identity(name, digest)
    dfs_name = reusable.get(identity)
    if dfs_name is None:
        dfs_name = dfs_sst_name(name, digest, checkpoint.version)
        storage.write(store.sst_path(dfs_name), data if data is not None else full.read_bytes(), overwrite=True)
        reusable[identity] = dfs_name
    return SstEntry(name, dfs_name, size, digest)


def _inline_file(full: Path) -> InlineFile:
    """A small non-SST file of the checkpoint (CURRENT, MANIFEST-*, OPTIONS-*), carried in the manifest."""
    size = full.stat().st_size
    if size > MAX_INLINE_FILE_BYTES:
        raise ValueError(f"{full}: {size} bytes is too large to inline in a snapshot manifest")
    return InlineFile(full.name, size, full.read_bytes())


def restore_snapshot(storage: Storage, store: StoreId, manifest_path: str, expected_version: int,
                     expected_uid: str, target_dir: str) -> SnapshotManifest:
    """Download a snapshot into ``target_dir`` (a new, empty local DB directory), verifying every file.

    Every name was checked by ``decode_manifest`` to be one path component, and each file is created in
    ``target_dir`` through a descriptor of it, new (never over an existing file) and never through a link, so
    a tampered manifest can write nothing outside ``target_dir``."""
    manifest = decode_manifest(storage.read(manifest_path), manifest_path)
    where = f"{manifest_path} (version {expected_version})"
    if manifest.version != expected_version or manifest.uid != expected_uid:
        raise CheckpointFormatError(f"{where}: manifest is of version {manifest.version} "
                                    f"uid {manifest.uid!r}, expected uid {expected_uid!r}")
    root = Path(target_dir)
    root.mkdir(parents=True, exist_ok=True)
    folder = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        for sst in manifest.ssts:
            try:
                data = storage.read(store.sst_path(sst.dfs_name))
            except CheckpointFormatError as exc:
                raise CheckpointFormatError(f"{where}: SST {sst.dfs_name} is missing: {exc}") from None
            if len(data) != sst.size_bytes or content_hash(data) != sst.content_hash:
                raise CheckpointFormatError(f"{where}: SST {sst.dfs_name} is corrupt "
                                            f"({len(data)} bytes, expected {sst.size_bytes})")
            create_new_in(folder, sst.local_name, data)
        for inline in manifest.other_files:
            if len(inline.data) != inline.size_bytes:
                raise CheckpointFormatError(f"{where}: inline file {inline.name} has {len(inline.data)} bytes, "
                                            f"expected {inline.size_bytes}")
            create_new_in(folder, inline.name, inline.data)
    finally:
        os.close(folder)
    return manifest


def manifest_ssts(storage: Storage, manifest_path: str) -> set[str]:
    """The DFS names of the SSTs a manifest references."""
    return {s.dfs_name for s in decode_manifest(storage.read(manifest_path), manifest_path).ssts}
