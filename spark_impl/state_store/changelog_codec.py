"""Fast writer and verified reader of the binary state-file format (SPEC section 3).

The bytes are *exactly* those of ``reference.changelog.encode_state_file``
(header with uid and parent uid, put / delete records, end marker with record
count and CRC-32), so the reference verifier reads every changelog this store
writes. The difference is speed: the store keeps values as their canonical
JSON bytes (``reference.changelog.encode_value``), so encoding never re-runs
``json.dumps`` and replay never runs ``json.loads``; replay feeds raw
(key, value) bytes straight into a RocksDB ``WriteBatch``.

A reader rejects a bad magic, a truncated file, a record count or CRC that does
not match, and trailing bytes, with ``CheckpointFormatError`` naming the file
and the version.
"""

from __future__ import annotations

import struct
import zlib
from typing import Callable, Iterable

from reference.changelog import DELETE, END, FORMAT_VERSION, MAGIC, PUT, StateFileHeader, decode_header
from reference.storage import CheckpointFormatError

RawChange = tuple[bytes, "bytes | None"]  # (utf-8 key, canonical JSON value or None for a delete)

_HEAD = struct.Struct(">BQ")
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_REC = struct.Struct(">BI")
_END_BYTES = 1 + 4 + 4  # 0xFF, record count, CRC
_DELETE_VALUE_LENGTH = _U32.pack(0)
REPLAY_BATCH_RECORDS = 65_536


def encode_state_file_raw(header: StateFileHeader, changes: Iterable[RawChange]) -> bytes:
    """Byte-identical to ``encode_state_file`` for values already in canonical JSON."""
    parts: list[bytes] = [MAGIC[header.kind], _HEAD.pack(FORMAT_VERSION, header.version)]
    for text in (header.uid, header.parent_uid):
        raw = text.encode()
        parts.append(_U16.pack(len(raw)))
        parts.append(raw)
    append = parts.append
    put_head, del_head, u32 = _REC.pack, _REC.pack, _U32.pack
    count = 0
    for key, value in changes:
        if value is None:
            append(del_head(DELETE, len(key)))
            append(key)
            append(_DELETE_VALUE_LENGTH)
        else:
            append(put_head(PUT, len(key)))
            append(key)
            append(u32(len(value)))
            append(value)
        count += 1
    parts.append(_REC.pack(END, count))
    body = b"".join(parts)
    return body + _U32.pack(zlib.crc32(body))


def read_header(data: bytes, name: str) -> StateFileHeader:
    """Decode only the header (lineage walks need just the parent uid)."""
    header, _reader = decode_header(data, name)
    return header


def replay_records(data: bytes, name: str, sink_put: Callable[[bytes, bytes], None],
                   sink_delete: Callable[[bytes], None]) -> tuple[StateFileHeader, int]:
    """Verify a whole state file, then stream its records to ``sink_put`` / ``sink_delete``.

    The CRC and the end marker are checked *before* any record is handed on, so
    a corrupt file never half-applies. Returns the header and the record count.
    """
    header, reader = decode_header(data, name)
    where = f"{name} (version {header.version})"
    size = len(data)
    end = size - _END_BYTES
    if end < reader.pos or data[end] != END:
        raise CheckpointFormatError(f"{where}: truncated: no end marker in {size} bytes")
    (declared,) = _U32.unpack_from(data, end + 1)
    (crc,) = _U32.unpack_from(data, end + 5)
    if crc != zlib.crc32(memoryview(data)[:end + 5]):
        raise CheckpointFormatError(f"{where}: checksum mismatch (file is corrupt or truncated)")
    pos, count = reader.pos, 0
    unpack_rec, unpack_u32 = _REC.unpack_from, _U32.unpack_from
    try:
        while pos < end:
            kind, key_length = unpack_rec(data, pos)
            pos += 5
            key = data[pos:pos + key_length]
            pos += key_length
            (value_length,) = unpack_u32(data, pos)
            pos += 4
            if kind == PUT:
                sink_put(key, data[pos:pos + value_length])
                pos += value_length
            elif kind == DELETE:
                if value_length:
                    raise CheckpointFormatError(f"{where}: delete record with a value at byte {pos}")
                sink_delete(key)
            else:
                raise CheckpointFormatError(f"{where}: unknown record type 0x{kind:02x} at byte {pos - 5 - key_length - 4}")
            count += 1
    except struct.error as exc:
        raise CheckpointFormatError(f"{where}: record runs past the end marker: {exc}") from None
    if pos != end:
        raise CheckpointFormatError(f"{where}: records overrun the end marker by {pos - end} bytes")
    if count != declared:
        raise CheckpointFormatError(f"{where}: end marker says {declared} records, read {count}")
    return header, count


def decode_raw(data: bytes, name: str) -> tuple[StateFileHeader, list[RawChange]]:
    """Verify and decode a state file into raw (key, value-or-None) pairs."""
    out: list[RawChange] = []
    header, _count = replay_records(data, name, lambda k, v: out.append((k, v)),
                                    lambda k: out.append((k, None)))
    return header, out
