"""The snappy framed stream Flink compresses state with (xerial's format: a stream identifier, then compressed and
uncompressed chunks with a CRC each) unframed exactly; a corrupt chunk is a CorruptFileError naming where and the
chunk's offset."""

from __future__ import annotations

import os

import cramjam
import pytest

from flinkstate.flink._io import snappy_unframe
from flinkstate.flink.errors import CorruptFileError


def _chunk(kind: int, body: bytes) -> bytes:
    return bytes([kind]) + len(body).to_bytes(3, "little") + body


def _framed(parts: list[tuple[bool, bytes]]) -> bytes:
    out = _chunk(0xFF, b"sNaPpY")
    for compressed, part in parts:
        crc = b"\0\0\0\0"  # not verified (the reader says so)
        out += _chunk(0x00, crc + bytes(cramjam.snappy.compress_raw(part))) if compressed else _chunk(0x01, crc + part)
    return out


def test_compressed_and_plain_chunks_unframe_to_their_bytes() -> None:
    parts = [(True, os.urandom(100) * 300), (False, b"plain bytes"), (True, b""), (True, bytes(range(256)) * 9)]
    assert snappy_unframe(_framed(parts), "state.bin") == b"".join(p for _, p in parts)
    assert snappy_unframe(memoryview(_framed(parts))[0:], "state.bin") == b"".join(p for _, p in parts)


def test_a_corrupt_compressed_chunk_is_named_with_its_offset() -> None:
    good = _framed([(True, b"a" * 5000)])
    second = len(good)
    bad = bytearray(_framed([(True, b"a" * 5000), (True, b"b" * 5000)]))
    bad[second + 9 :] = b"\xff" * (len(bad) - second - 9)  # past the chunk header, the CRC and the length preamble
    with pytest.raises(CorruptFileError, match=rf"^state\.bin key group 7: bad snappy chunk at offset {second}: "):
        snappy_unframe(bytes(bad), "state.bin key group 7")


def test_a_chunk_whose_preamble_claims_gigabytes_is_refused_before_allocating() -> None:
    """A compressed chunk of 10 bytes whose length preamble says 4 GiB - 1: refused by size, with its offset."""
    data = _chunk(0xFF, b"sNaPpY") + _chunk(0x00, b"\0\0\0\0" + b"\xff\xff\xff\xff\x0f" + b"\x00" * 5)
    with pytest.raises(CorruptFileError, match=r"^state\.bin: bad snappy chunk at offset 10: its preamble says 4294967295 bytes, "
                                               r"more than 10 compressed bytes can hold"):
        snappy_unframe(data, "state.bin")


@pytest.mark.parametrize(("cut", "message"), [(3, "truncated snappy chunk header"), (-1, "truncated snappy chunk at offset")])
def test_a_truncated_stream_is_named(cut: int, message: str) -> None:
    data = _framed([(True, b"x" * 1000)])
    data = data[: 10 + cut] if cut > 0 else data[:cut]
    with pytest.raises(CorruptFileError, match=message):
        snappy_unframe(data, "state.bin")


def test_a_bad_stream_identifier_is_named() -> None:
    with pytest.raises(CorruptFileError, match="bad snappy stream identifier"):
        snappy_unframe(_chunk(0xFF, b"sNaPpZ"), "state.bin")
