"""Fast writer and verified reader of the binary state-file format (spec section 3).

The bytes are *exactly* those of ``reference.protocol.changelog.encode_state_file``
(header with uid and parent uid, put / delete records, end marker with record
count and CRC-32), so the reference verifier reads every changelog this store
writes. The difference is speed:

* Values stay as their canonical JSON bytes (``reference.protocol.changelog.encode_value``)
  from ``put`` to RocksDB to the changelog and back, so neither writing nor
  replaying a changelog runs ``json.dumps`` / ``json.loads``.
* The store encodes each record when the key is written, into one buffer
  per batch (``ChangelogBuffer``), the way Spark's changelog writer streams
  records as the batch runs; the commit only checksums the buffer and writes
  it: no per-record work on the commit path.
* Replay (``replay_records`` / ``replay_chunks``) checks the CRC and the end
  marker first, then walks the records with at most one ``struct`` call per
  record: header, key and value length come out of a precompiled ``Struct``
  chosen by the key-length byte; while consecutive records have the same key
  and value lengths one ``Struct`` yields the whole record, value included;
  in a long such run one ``Struct`` yields 32 records, which go to the sink
  without a Python-level loop (``_walk``).

A reader rejects a bad magic, a truncated file, a record count or CRC that does
not match, a malformed record and trailing bytes, with ``CheckpointFormatError``
naming the file and the version. Malformed records are found by the fast walk
and then located precisely by a careful one, so the message gives the byte.
"""

from __future__ import annotations

import struct
import zlib
from collections import deque
from typing import Any, Callable, Iterable, Iterator

from reference.protocol.changelog import DELETE, END, FORMAT_VERSION, MAGIC, PUT, StateFileHeader, decode_header
from reference.protocol.storage import CheckpointFormatError

RawChange = tuple[bytes, "bytes | None"]  # (utf-8 key, canonical JSON value or None for a delete)

_HEAD = struct.Struct(">BQ")
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_REC = struct.Struct(">BI")
_END_BYTES = 1 + 4 + 4  # 0xFF, record count, CRC
_DELETE_VALUE_LENGTH = _U32.pack(0)
# Records per WriteBatch when a replay feeds RocksDB: large, so a changelog is
# usually one write (a memtable filling up mid-replay would stall the next write).
REPLAY_BATCH_RECORDS = 1 << 20

# Record prefixes (type byte + key length) for keys shorter than 256 bytes.
_PUT_PREFIX = tuple(_REC.pack(PUT, n) for n in range(256))
_DELETE_PREFIX = tuple(_REC.pack(DELETE, n) for n in range(256))
# (type, key length, key, value length) of a record whose key is n < 256 bytes.
_KEY_HEAD = tuple(struct.Struct(f">BI{n}sI").unpack_from for n in range(256))
# Compiled Structs of runs of records with fixed lengths: (key length, value length, records).
_WHOLE_RECORD: dict[tuple[int, int, int], struct.Struct] = {}
_WHOLE_RECORD_CACHE_LIMIT = 4096
_BLOCK_RECORDS = 32        # records per Struct call in a long run of equal lengths
_RUN_BEFORE_BLOCKS = 32    # records read whole in a row before blocks are tried
_CONSUME: Callable[[Iterable[Any]], None] = deque(maxlen=0).extend  # runs an iterator of sink calls at C speed


def put_record(key: bytes, value: bytes) -> bytes:
    """The encoded put record of ``key`` -> ``value`` (canonical JSON)."""
    n = len(key)
    return b"".join((_PUT_PREFIX[n] if n < 256 else _REC.pack(PUT, n), key, _U32.pack(len(value)), value))


def delete_record(key: bytes) -> bytes:
    """The encoded delete record of ``key``."""
    n = len(key)
    return b"".join((_DELETE_PREFIX[n] if n < 256 else _REC.pack(DELETE, n), key, _DELETE_VALUE_LENGTH))


def encode_header(header: StateFileHeader) -> bytes:
    parts = [MAGIC[header.kind], _HEAD.pack(FORMAT_VERSION, header.version)]
    for text in (header.uid, header.parent_uid):
        raw = text.encode()
        parts.append(_U16.pack(len(raw)))
        parts.append(raw)
    return b"".join(parts)


def _framed(head: bytes, records: bytes | bytearray, count: int) -> bytes:
    """Header, records, end marker and the CRC of all three, copied once into the file's bytes."""
    end = _REC.pack(END, count)
    crc = zlib.crc32(end, zlib.crc32(records, zlib.crc32(head)))
    return b"".join((head, records, end, _U32.pack(crc)))


def assemble_state_file(header: StateFileHeader, records: Iterable[bytes], count: int) -> bytes:
    """A whole state file from already encoded records (``put_record`` / ``delete_record``)."""
    return _framed(encode_header(header), b"".join(records), count)


class ChangelogBuffer:
    """One batch's changes as changelog records, encoded as the batch writes them.

    The first record of each key is appended to ``log`` and ``first`` maps the
    key to its offset there (dict order = first-touch order). A key written
    again keeps its place: its newest record goes to ``latest`` and takes the
    place of the first one when the file is assembled. So the records come out
    in first-touch order, last write winning, exactly as the reference writes
    them, and a batch that writes each key once (the usual case: an operator
    writes a key's new state once per batch) is one contiguous buffer that the
    commit checksums and writes without touching a record.
    """

    __slots__ = ("log", "first", "latest")

    def __init__(self) -> None:
        self.log = bytearray()
        self.first: dict[bytes, int] = {}
        self.latest: dict[bytes, bytes] = {}

    def put(self, key: bytes, value: bytes) -> None:
        if key in self.first:
            self.latest[key] = put_record(key, value)
            return
        log, n = self.log, len(key)
        self.first[key] = len(log)
        log += _PUT_PREFIX[n] if n < 256 else _REC.pack(PUT, n)
        log += key
        log += _U32.pack(len(value))
        log += value

    def delete(self, key: bytes) -> None:
        if key in self.first:
            self.latest[key] = delete_record(key)
            return
        log, n = self.log, len(key)
        self.first[key] = len(log)
        log += _DELETE_PREFIX[n] if n < 256 else _REC.pack(DELETE, n)
        log += key
        log += _DELETE_VALUE_LENGTH

    def __len__(self) -> int:
        return len(self.first)

    def _end_of(self, start: int, key: bytes) -> int:
        value_start = start + 9 + len(key)
        return value_start + _U32.unpack_from(self.log, value_start - 4)[0]

    def body(self) -> bytes | bytearray:
        """The records of the changelog, in order (the buffer itself when no key was written twice)."""
        if not self.latest:
            return self.log
        log, pos = self.log, 0
        parts: list[bytes | bytearray] = []
        for start, key in sorted((self.first[key], key) for key in self.latest):
            parts.append(log[pos:start])
            parts.append(self.latest[key])
            pos = self._end_of(start, key)
        parts.append(log[pos:])
        return b"".join(parts)

    def changes(self) -> Iterator[RawChange]:
        """(key, value or None for a delete) in first-touch order, last write winning."""
        for key, start in self.first.items():
            record: bytes | bytearray | None = self.latest.get(key)
            if record is None:
                record = self.log[start:self._end_of(start, key)]
            yield key, None if record[0] == DELETE else bytes(record[9 + len(key):])

    def state_file(self, header: StateFileHeader) -> bytes:
        """The whole state file: header, the records, end marker and CRC."""
        return _framed(encode_header(header), self.body(), len(self.first))


def encode_state_file_raw(header: StateFileHeader, changes: Iterable[RawChange]) -> bytes:
    """Byte-identical to ``encode_state_file`` for values already in canonical JSON."""
    records = [put_record(key, value) if value is not None else delete_record(key) for key, value in changes]
    return assemble_state_file(header, records, len(records))


def read_header(data: bytes, name: str) -> StateFileHeader:
    """Decode only the header (lineage walks need just the parent uid)."""
    header, _reader = decode_header(data, name)
    return header


class _Malformed(Exception):
    """Raised inside the fast walk; the careful walk then names the byte."""


def _bad_record(_key: bytes, _value: bytes) -> None:
    raise _Malformed


def _verified_body(data: bytes, name: str) -> tuple[StateFileHeader, str, int, int, int]:
    """Header, place name, first record byte, end of records and declared count; CRC checked."""
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
    return header, where, reader.pos, end, declared


def _compiled(cache: dict[tuple[int, int, int], struct.Struct], key_length: int, value_length: int,
              records: int) -> struct.Struct:
    """The ``Struct`` of ``records`` consecutive records with these key and value lengths."""
    found = cache.get((key_length, value_length, records))
    if found is None:
        if len(cache) >= _WHOLE_RECORD_CACHE_LIMIT:
            cache.clear()
        found = cache[(key_length, value_length, records)] = struct.Struct(
            ">" + f"BI{key_length}sI{value_length}s" * records)
    return found


def _walk(data: bytes, pos: int, count: int, put: Callable[[bytes, bytes], object],
          delete: Callable[[bytes], object]) -> int:
    """Hand ``count`` records starting at ``pos`` to the sinks; returns the position after them.

    Three speeds: a record is read field by field (its key length byte picks
    a precompiled ``Struct`` for header and key); once two records in a row
    have the same key and value lengths, a record is read whole by one
    ``Struct`` (while keys keep that length: a value of another length is
    then cut out by its own length); once a run of equal lengths is long,
    blocks of ``_BLOCK_RECORDS`` puts are read by one ``Struct`` and handed on
    without a Python-level loop. Every speculative read is checked (types and
    lengths) before use.

    Raises ``_Malformed``, ``struct.error`` or ``IndexError`` on a bad record
    (the caller has checked the CRC, so only a bad writer gets there).
    """
    def delete_empty(key: bytes, value: bytes) -> None:
        if value:
            raise _Malformed
        delete(key)

    by_kind: list[Callable[[bytes, bytes], object]] = [_bad_record] * 256
    by_kind[PUT], by_kind[DELETE] = put, delete_empty
    key_head, whole, unpack_rec, unpack_u32 = _KEY_HEAD, _WHOLE_RECORD, _REC.unpack_from, _U32.unpack_from
    consume, block_records = _CONSUME, _BLOCK_RECORDS
    guess_key = guess_value = -1  # the lengths of the record before
    remaining = count
    while remaining:
        # Field by field, until two records in a row have the same lengths.
        while remaining:
            kind, key_length, key, value_length = key_head[data[pos + 4]](data, pos)
            if key_length > 255:  # the length byte was only the low byte: read it in full
                kind, key_length = unpack_rec(data, pos)
                key = data[pos + 5:pos + 5 + key_length]
                (value_length,) = unpack_u32(data, pos + 5 + key_length)
            start = pos + 9 + key_length
            pos = start + value_length
            by_kind[kind](key, data[start:pos])
            remaining -= 1
            if value_length == guess_value and key_length == guess_key and key_length < 256:
                break
            guess_key, guess_value = key_length, value_length
        # Whole records while the lengths repeat; blocks of them once the run is long.
        compiled = whole.get((guess_key, guess_value, 1)) or _compiled(whole, guess_key, guess_value, 1)
        record, record_size = compiled.unpack_from, compiled.size
        run = 0
        other_value = -1  # the length of the last value that was not the expected one
        while remaining:
            if run >= _RUN_BEFORE_BLOCKS and remaining >= block_records:
                compiled = _compiled(whole, guess_key, guess_value, block_records)
                block, block_size = compiled.unpack_from, compiled.size
                while remaining >= block_records:
                    try:
                        fields = block(data, pos)
                    except struct.error:  # shorter records near the end of the file
                        break
                    if (fields[1::5].count(guess_key) != block_records
                            or fields[3::5].count(guess_value) != block_records
                            or fields[0::5].count(PUT) != block_records):
                        break
                    consume(map(put, fields[2::5], fields[4::5]))
                    pos += block_size
                    remaining -= block_records
                run = -block_records  # the run ends within a block: go past it one record at a time
                continue
            try:
                kind, key_length, key, value_length, value = record(data, pos)
            except struct.error:  # a shorter record near the end of the file
                break
            if key_length != guess_key:
                break
            if value_length == guess_value:
                pos += record_size
                run += 1
            else:  # header and key were read right; the value has another length
                start = pos + 9 + key_length
                pos = start + value_length
                value = data[start:pos]
                run = 0
                if value_length == other_value:  # the second in a row of that length: expect it
                    guess_value = value_length
                    compiled = whole.get((guess_key, guess_value, 1)) or _compiled(whole, guess_key, guess_value, 1)
                    record, record_size = compiled.unpack_from, compiled.size
                other_value = value_length
            by_kind[kind](key, value)
            remaining -= 1
    return pos


def _locate_error(data: bytes, pos: int, end: int, declared: int, where: str) -> CheckpointFormatError:
    """Walk the records one field at a time and describe the first thing wrong."""
    count = 0
    try:
        while pos < end:
            kind, key_length = _REC.unpack_from(data, pos)
            record_start = pos
            pos += 5 + key_length
            (value_length,) = _U32.unpack_from(data, pos)
            pos += 4 + value_length
            if kind == DELETE and value_length:
                return CheckpointFormatError(f"{where}: delete record with a value at byte {record_start}")
            if kind not in (PUT, DELETE):
                return CheckpointFormatError(f"{where}: unknown record type 0x{kind:02x} at byte {record_start}")
            count += 1
    except struct.error as exc:
        return CheckpointFormatError(f"{where}: record runs past the end marker: {exc}")
    if pos != end:
        return CheckpointFormatError(f"{where}: records overrun the end marker by {pos - end} bytes")
    if count != declared:
        return CheckpointFormatError(f"{where}: end marker says {declared} records, read {count}")
    return CheckpointFormatError(f"{where}: malformed records")


def replay_records(data: bytes, name: str, sink_put: Callable[[bytes, bytes], object],
                   sink_delete: Callable[[bytes], object]) -> tuple[StateFileHeader, int]:
    """Verify a whole state file, then stream its records to ``sink_put`` / ``sink_delete``.

    The CRC and the end marker are checked *before* any record is handed on,
    so a corrupt file never half-applies. A file with a valid CRC but
    malformed records (a bad writer) raises after some records were handed
    on; callers feed a batch or a fresh database they discard on error.
    Returns the header and the record count.
    """
    result = None
    for result in replay_chunks(data, name, lambda: (sink_put, sink_delete), None):
        pass
    assert result is not None, "replay_chunks yields at least once"
    return result


def replay_chunks(data: bytes, name: str, new_sinks: Callable[[], tuple[Callable, Callable]],
                  chunk_records: int | None = REPLAY_BATCH_RECORDS) -> Iterator[tuple[StateFileHeader, int]]:
    """Like ``replay_records`` but in chunks of ``chunk_records`` records.

    Calls ``new_sinks()`` for each chunk (e.g. a new RocksDB ``WriteBatch``'s
    ``put`` / ``delete``) and yields ``(header, records so far)`` after each
    chunk, so the caller can write the chunk before the next one is parsed.
    """
    header, where, first, end, declared = _verified_body(data, name)
    step = declared if not chunk_records else chunk_records
    pos, done = first, 0
    while True:
        todo = min(step, declared - done)
        put, delete = new_sinks()
        try:
            pos = _walk(data, pos, todo, put, delete)
        except (_Malformed, struct.error, IndexError):
            raise _locate_error(data, first, end, declared, where) from None
        done += todo
        if pos > end or (done == declared and pos != end):
            raise _locate_error(data, first, end, declared, where)
        yield header, done
        if done == declared:
            return


def decode_raw(data: bytes, name: str) -> tuple[StateFileHeader, list[RawChange]]:
    """Verify and decode a state file into raw (key, value-or-None) pairs."""
    out: list[RawChange] = []
    header, _count = replay_records(data, name, lambda k, v: out.append((k, v)),
                                    lambda k: out.append((k, None)))
    return header, out
