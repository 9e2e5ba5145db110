"""Binary state files: changelog, delta and snapshot (spec section 3).

One record-stream format serves all three file kinds, in the shape of Spark's
changelog V2 (``StateStoreChangelog.scala``)::

    header   magic (4 bytes: LSCL changelog, LSDL delta, LSSN snapshot)
             format version (1 byte, = 2)
             state version (u64)
             uid (u16 length + UTF-8)           the lineage id of this file
             parent uid (u16 length + UTF-8)    the uid of version - 1 ('' for a snapshot / version 1)
    records  type (1 byte: 0x01 put, 0x02 delete)
             key length (u32), key (UTF-8)
             value length (u32), value (canonical JSON; length 0 for a delete)
    end      0xFF, record count (u32), CRC-32 of every preceding byte (u32)

A file that ends early, has a bad magic, a wrong record count or a CRC that does
not match raises ``CheckpointFormatError`` naming the file and the version:
never a silently smaller state.
"""

from __future__ import annotations

import functools
import json
import struct
import zlib
from dataclasses import dataclass
from typing import Any, Iterable, Iterator

from .storage import CheckpointFormatError

FORMAT_VERSION = 2
MAGIC = {"changelog": b"LSCL", "delta": b"LSDL", "snapshot": b"LSSN"}
KIND_OF_MAGIC = {v: k for k, v in MAGIC.items()}
PUT, DELETE, END = 0x01, 0x02, 0xFF

Change = tuple[str, Any]  # (key, value); value None means delete


def encode_value(value: Any) -> bytes:
    """Canonical JSON: every backend writes the same bytes for the same value."""
    return _canonical(value).encode()


# what json.dumps(value, sort_keys=True, separators=(",", ":")) does, without building an encoder per value
_canonical = json.JSONEncoder(sort_keys=True, separators=(",", ":")).encode


def decode_value(data: bytes) -> Any:
    return json.loads(data)


@dataclass(frozen=True)
class StateFileHeader:
    kind: str
    version: int
    uid: str
    parent_uid: str


def encode_state_file(header: StateFileHeader, changes: Iterable[Change]) -> bytes:
    """Serialize a header and a stream of puts (value not None) and deletes (value None)."""
    out = bytearray()
    out += MAGIC[header.kind]
    out += struct.pack(">BQ", FORMAT_VERSION, header.version)
    for text in (header.uid, header.parent_uid):
        raw = text.encode()
        out += struct.pack(">H", len(raw)) + raw
    count = 0
    for key, value in changes:
        raw_key = key.encode()
        if value is None:
            out += struct.pack(">BI", DELETE, len(raw_key)) + raw_key + struct.pack(">I", 0)
        else:
            raw_value = encode_value(value)
            out += struct.pack(">BI", PUT, len(raw_key)) + raw_key
            out += struct.pack(">I", len(raw_value)) + raw_value
        count += 1
    out += struct.pack(">BI", END, count)
    out += struct.pack(">I", zlib.crc32(bytes(out)))
    return bytes(out)


class _Reader:
    def __init__(self, data: bytes, name: str):
        self.data, self.name, self.pos = data, name, 0

    def take(self, n: int, what: str) -> bytes:
        if self.pos + n > len(self.data):
            raise CheckpointFormatError(
                f"{self.name}: truncated while reading {what} at byte {self.pos} of {len(self.data)}"
            )
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def unpack(self, fmt: str, what: str) -> tuple:
        return struct.unpack(fmt, self.take(struct.calcsize(fmt), what))


def decode_header(data: bytes, name: str) -> tuple[StateFileHeader, _Reader]:
    reader = _Reader(data, name)
    magic = reader.take(4, "magic")
    if magic not in KIND_OF_MAGIC:
        raise CheckpointFormatError(f"{name}: not a state file (magic {magic!r})")
    fmt, version = reader.unpack(">BQ", "header")
    if fmt != FORMAT_VERSION:
        raise CheckpointFormatError(f"{name}: format version {fmt}, expected {FORMAT_VERSION}")
    uid = _text(reader.take(reader.unpack(">H", "uid length")[0], "uid"), name, "uid")
    parent = _text(reader.take(reader.unpack(">H", "parent uid length")[0], "parent uid"), name, "parent uid")
    return StateFileHeader(KIND_OF_MAGIC[magic], version, uid, parent), reader


def _text(raw: bytes, name: str, what: str) -> str:
    try:
        return raw.decode()
    except UnicodeDecodeError:
        raise CheckpointFormatError(f"{name}: header {what} is not UTF-8 (file is corrupt)") from None


def decode_state_file(data: bytes, name: str) -> tuple[StateFileHeader, tuple[Change, ...]]:
    """Parse and verify a whole state file. Errors name the file and the version."""
    return _decode_cached(data, name)


@functools.lru_cache(maxsize=8192)
def _decode_cached(data: bytes, name: str) -> tuple[StateFileHeader, tuple[Change, ...]]:
    header, reader = decode_header(data, name)
    where = f"{name} (version {header.version})"
    changes: list[Change] = []
    try:
        for key, value in _records(reader, where):
            changes.append((key, value))
    except CheckpointFormatError:
        raise
    except (ValueError, UnicodeDecodeError) as exc:
        raise CheckpointFormatError(f"{where}: unreadable record: {exc}") from None
    return header, tuple(changes)


def _records(reader: _Reader, where: str) -> Iterator[Change]:
    reader.name = where
    count = 0
    while True:
        (kind,) = reader.unpack(">B", "record type")
        if kind == END:
            (declared,) = reader.unpack(">I", "record count")
            body_end = reader.pos
            (crc,) = reader.unpack(">I", "checksum")
            if declared != count:
                raise CheckpointFormatError(f"{where}: end marker says {declared} records, read {count}")
            if crc != zlib.crc32(reader.data[:body_end]):
                raise CheckpointFormatError(f"{where}: checksum mismatch (file is corrupt)")
            if reader.pos != len(reader.data):
                raise CheckpointFormatError(f"{where}: {len(reader.data) - reader.pos} trailing bytes after end marker")
            return
        if kind not in (PUT, DELETE):
            raise CheckpointFormatError(f"{where}: unknown record type 0x{kind:02x} at byte {reader.pos - 1}")
        key = reader.take(reader.unpack(">I", "key length")[0], "key").decode()
        raw_value = reader.take(reader.unpack(">I", "value length")[0], "value")
        count += 1
        yield key, (decode_value(raw_value) if kind == PUT else None)
