"""The binary state file byte by byte (reference/protocol/changelog.py, spec section 3).

Found by mutation testing the judge: the format was pinned only by round
trips, so a changed format version, unsorted JSON values or a wrong byte
offset in an error went unseen. The expected bytes are assembled here by hand
from the layout in the module docstring.
"""

from __future__ import annotations

import dataclasses
import struct
import zlib

import pytest

from reference.protocol.changelog import StateFileHeader, decode_state_file, encode_state_file
from reference.protocol.storage import CheckpointFormatError

HEADER = StateFileHeader("changelog", 3, "u3", "u2")
HEAD = b"LSCL" + b"\x02" + b"\x00" * 7 + b"\x03" + b"\x00\x02u3" + b"\x00\x02u2"   # 21 bytes
PUT_A = b"\x01" + b"\x00\x00\x00\x01a" + b"\x00\x00\x00\x0d" + b'{"x":2,"y":1}'
DELETE_B = b"\x02" + b"\x00\x00\x00\x01b" + b"\x00\x00\x00\x00"


def sealed(body: bytes, count: int) -> bytes:
    """Append the end marker, the record count and the CRC-32 of everything before it."""
    body += b"\xff" + struct.pack(">I", count)
    return body + struct.pack(">I", zlib.crc32(body))


def test_a_changelog_is_laid_out_as_the_format_says():
    data = encode_state_file(HEADER, [("a", {"y": 1, "x": 2}), ("b", None)])
    assert data == sealed(HEAD + PUT_A + DELETE_B, 2)
    assert decode_state_file(data, "f") == (HEADER, (("a", {"x": 2, "y": 1}), ("b", None)))


def test_each_kind_has_its_magic():
    for kind, magic in (("delta", b"LSDL"), ("snapshot", b"LSSN")):
        assert encode_state_file(StateFileHeader(kind, 1, "u", ""), ()).startswith(magic + b"\x02")


@pytest.mark.parametrize("data, message", [
    (HEAD[:10], "f: truncated while reading header at byte 4 of 10"),
    (b"XXXX" + HEAD[4:], "f: not a state file (magic b'XXXX')"),
    (HEAD[:4] + b"\x03" + HEAD[5:], "f: format version 3, expected 2"),
    (HEAD[:15] + b"\xff\xfe" + HEAD[17:], "f: header uid is not UTF-8 (file is corrupt)"),
    (sealed(HEAD + PUT_A + DELETE_B, 5), "f (version 3): end marker says 5 records, read 2"),
    (sealed(HEAD + PUT_A, 1)[:-1] + b"\x00", "f (version 3): checksum mismatch (file is corrupt)"),
    (sealed(HEAD + PUT_A, 1) + b"xyz", "f (version 3): 3 trailing bytes after end marker"),
    (sealed(HEAD + b"\x07" + PUT_A[1:], 1), "f (version 3): unknown record type 0x07 at byte 21"),
    (sealed(HEAD + PUT_A[:-13] + b"{not json!!!}", 1), "f (version 3): unreadable record"),
    (sealed(HEAD + b"\x01\x00\x00\x00\x01\xff" + PUT_A[6:], 1), "f (version 3): unreadable record"),
])
def test_a_damaged_file_is_refused_naming_it_and_what_is_wrong(data, message):
    with pytest.raises(CheckpointFormatError) as caught:
        decode_state_file(data, "f")
    assert str(caught.value).startswith(message)


def test_a_header_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        HEADER.version = 4   # type: ignore[misc]
