"""Fast tier: the vectorised CRC32C and snappy framing equal the byte-by-byte reference (`encode._masked_crc32c`)."""

from __future__ import annotations

import numpy as np
from flinkstate.flink.serde._crc32c import masked_crc32c, snappy_frames
from flinkstate.flink.serde.encode import _masked_crc32c, snappy_frame


def test_masked_crc32c_of_every_length_class():
    rng = np.random.default_rng(5)
    sizes = [0, 1, 3, 4, 5, 63, 64, 65, 127, 128, 129, 1000, 4096, 65535, 65536, *rng.integers(0, 70000, 20).tolist()]
    messages = [rng.integers(0, 256, n, dtype=np.uint8).tobytes() for n in sizes]
    messages += [b"\x00" * 300, b"\xff" * 70, b"123456789"]
    assert masked_crc32c(messages) == [_masked_crc32c(m) for m in messages]
    assert masked_crc32c([]) == []


def test_snappy_frames_equal_one_by_one_framing():
    rng = np.random.default_rng(6)
    streams = [b"", b"x", rng.integers(0, 4, 65536, dtype=np.uint8).tobytes(), rng.integers(0, 256, 200_001, dtype=np.uint8).tobytes()]
    assert snappy_frames(streams) == [snappy_frame(s) for s in streams]
