"""The store's fast state-file codec against the reference's (spec section 3).

The writer must produce the reference's bytes exactly, and the replay, with
its speculative whole-record and 32-record block reads, must hand on exactly
the records the reference decoder reads, in order, for any chunking. A file
whose CRC is valid but whose records are malformed (a bad writer) must fail
with an error naming the file and the version, wherever the bad record sits,
in particular inside a long run of same-length records that the block reader
takes.
"""

from __future__ import annotations

import random
import struct
import zlib
from typing import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reference.protocol.changelog import StateFileHeader, decode_state_file, encode_state_file, encode_value
from reference.protocol.storage import CheckpointFormatError
from spark_impl.state_store.changelog_codec import (
    ChangelogBuffer,
    assemble_state_file,
    decode_raw,
    delete_record,
    encode_state_file_raw,
    put_record,
    replay_chunks,
)

HEADER = StateFileHeader("changelog", 7, "uid-a", "uid-b")

# Runs of records with equal key and value lengths (the block reader's case),
# broken by deletes, long keys (> 255 bytes) and odd values.
RUN = st.tuples(st.integers(1, 80), st.sampled_from([1, 5, 12]), st.sampled_from([0, 3, 9, 40, 300]))
ODD = st.one_of(
    st.tuples(st.text(min_size=1, max_size=3), st.none()),
    st.tuples(st.text(min_size=256, max_size=300), st.integers()),
    st.tuples(st.text(max_size=4), st.one_of(st.integers(), st.text(max_size=300), st.lists(st.booleans()))),
)


@st.composite
def changes(draw) -> list[tuple[str, object]]:
    out: list[tuple[str, object]] = []
    for part in draw(st.lists(st.one_of(RUN, ODD), max_size=12)):
        if len(part) == 3:
            count, key_length, digits = part
            base = len(out)
            out += [(f"{base + i:0{key_length}d}"[-key_length:], "7" * digits if digits else [])
                    for i in range(count)]
        else:
            out.append(part)
    return out


def sink() -> tuple[list, Callable]:
    """A list and a ``new_sinks`` for ``replay_chunks`` that appends to it."""
    out: list = []
    return out, lambda: (lambda k, v: out.append((k, v)), lambda k: out.append((k, None)))


@given(changes(), st.sampled_from([None, 1, 3, 32, 33, 100]))
def test_writer_and_replay_agree_with_the_reference(items, chunk):
    data = encode_state_file(HEADER, items)
    raw = [(k.encode(), None if v is None else encode_value(v)) for k, v in items]
    assert encode_state_file_raw(HEADER, raw) == data
    assert assemble_state_file(HEADER, [put_record(k, v) if v is not None else delete_record(k)
                                        for k, v in raw], len(raw)) == data
    _header, reference_records = decode_state_file(data, "f")
    out, sinks = sink()
    counts = [done for _h, done in replay_chunks(data, "f", sinks, chunk)]
    assert counts[-1] == len(raw) and counts == sorted(counts)
    assert [(k.decode(), None if v is None else v) for k, v in out] == [
        (k, None if v is None else encode_value(v)) for k, v in reference_records]
    assert decode_raw(data, "f")[1] == raw


@pytest.mark.parametrize("seed", range(6))
def test_replay_of_keys_of_one_length_with_values_changing_length(seed):
    # Keys of one length, values whose length stays, alternates or drifts (the
    # whole-record reader must cut out values of another length, switch to a
    # new length, and leave blocks), with a few deletes in between.
    rng = random.Random(seed)
    items: list[tuple[str, object]] = []
    length = 3
    for i in range(600):
        mode = (i // 100) % 3
        if mode == 1:
            length = rng.choice([3, 4])
        elif mode == 2 and rng.random() < 0.05:
            length = rng.choice([2, 5, 8])
        items.append((f"k{i:05d}", None if rng.random() < 0.02 else "v" * length))
    data = encode_state_file(HEADER, items)
    _header, reference_records = decode_state_file(data, "f")
    for chunk in (None, 7, 50):
        out, sinks = sink()
        for _ in replay_chunks(data, "f", sinks, chunk):
            pass
        assert [(k.decode(), v) for k, v in out] == [
            (k, None if v is None else encode_value(v)) for k, v in reference_records]


@given(st.lists(st.tuples(st.sampled_from(["a", "b", "ba", "é", "k" * 300]),
                          st.one_of(st.none(), st.integers(-5, 5), st.text(max_size=3))), max_size=40))
def test_the_batch_buffer_writes_first_touch_order_last_write_wins(ops):
    buffer = ChangelogBuffer()
    latest: dict[str, object] = {}  # a dict keeps first-touch order and takes the last write
    for key, value in ops:
        if value is None:
            buffer.delete(key.encode())
        else:
            buffer.put(key.encode(), encode_value(value))
        latest[key] = value
    assert len(buffer) == len(latest)
    assert buffer.state_file(HEADER) == encode_state_file(HEADER, list(latest.items()))
    assert list(buffer.changes()) == [(k.encode(), None if v is None else encode_value(v))
                                      for k, v in latest.items()]


def _with_crc(body: bytes) -> bytes:
    return body + struct.pack(">I", zlib.crc32(body))


def _run_file(n: int = 100) -> tuple[bytes, list[int]]:
    """A file of n same-length puts (block reads) and each record's offset."""
    records = [put_record(f"k{i:04d}".encode(), b"12") for i in range(n)]
    data = assemble_state_file(HEADER, records, n)
    first = len(data) - 9 - sum(map(len, records))
    return data[:-4], [first + i * len(records[0]) for i in range(n)]


@pytest.mark.parametrize("where", [0, 9, 60, 99])
def test_a_bad_record_type_inside_a_run_is_named(where):
    body, offsets = _run_file()
    at = offsets[where]
    bad = _with_crc(body[:at] + b"\x07" + body[at + 1:])
    with pytest.raises(CheckpointFormatError, match=rf"^FILE \(version 7\): unknown record type 0x07 at byte {at}$"):
        decode_raw(bad, "FILE")


@pytest.mark.parametrize("declared", [0, 99, 101, 10**6])
def test_a_wrong_record_count_is_named(declared):
    body, _offsets = _run_file()
    bad = _with_crc(body[:-4] + struct.pack(">I", declared))
    with pytest.raises(CheckpointFormatError, match=r"^FILE \(version 7\): "):
        decode_raw(bad, "FILE")


def test_a_delete_with_a_value_and_a_record_past_the_end_are_named():
    records = [put_record(b"a", b"1"), b"\x02\x00\x00\x00\x01b\x00\x00\x00\x01x"]
    bad = assemble_state_file(HEADER, records, 2)
    with pytest.raises(CheckpointFormatError, match=r"FILE \(version 7\): delete record with a value"):
        decode_raw(bad, "FILE")
    overrun = assemble_state_file(HEADER, [put_record(b"a", b"1"), b"\x01\x00\x00\x00\x05ab"], 2)
    with pytest.raises(CheckpointFormatError, match=r"FILE \(version 7\): record"):
        decode_raw(overrun, "FILE")
