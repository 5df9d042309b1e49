"""CRC32C of many byte strings at once with numpy, and xerial snappy framing of many streams (the compressed keyed writer).

CRC32C (Castagnoli, reflected, as snappy framing masks it) is linear over GF(2), so a message's CRC is
assembled from the CRCs of its fixed-size blocks: every block of every message is run through the
byte table in parallel (one numpy step per byte position of a block), then neighbouring blocks are
combined level by level, crc(A || B) = shift_|B|(crc(A)) ^ crc(B), where shift_n (the effect of n zero
bytes) is a 32x32 bit matrix applied with four 256-entry tables. Leading zero bytes do not change a
CRC computed from register 0, so messages are left-padded to whole blocks, and the initial register
0xFFFFFFFF is folded into a message's first four bytes. Same results as the byte-by-byte loop
(`encode._masked_crc32c`), checked in tests.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

__all__ = ["masked_crc32c", "snappy_frames"]

_POLY = 0x82F63B78
_BLOCK = 64
_CHUNK = 65536
_BATCH = 1 << 24


def _byte_table() -> np.ndarray:
    t = np.arange(256, dtype=np.uint32)
    for _ in range(8):
        t = np.where(t & 1, (t >> 1) ^ np.uint32(_POLY), t >> 1).astype(np.uint32)
    return t


_TABLE = _byte_table()


def _apply(basis: np.ndarray, x: np.ndarray) -> np.ndarray:
    """The bit matrix with these 32 column images applied to each value of x."""
    out = np.zeros(len(x), np.uint32)
    for bit in range(len(basis)):
        out ^= np.where((x >> np.uint32(bit)) & np.uint32(1), basis[bit], np.uint32(0))
    return out


def _shift_basis(nbytes: int) -> np.ndarray:
    """The images of the 32 unit registers after nbytes zero bytes (nbytes a power of two), by squaring."""
    units = (np.uint32(1) << np.arange(32, dtype=np.uint32)).astype(np.uint32)
    basis = _TABLE[units & np.uint32(0xFF)] ^ (units >> np.uint32(8))  # one zero byte
    n = 1
    while n < nbytes:
        basis = _apply(basis, basis)
        n *= 2
    return basis


def _tables(basis: np.ndarray) -> np.ndarray:
    """Four 256-entry tables: the matrix applied to each byte of a register, XORed together."""
    v = np.arange(256, dtype=np.uint32)
    return np.stack([_apply(basis[8 * k : 8 * k + 8], v) for k in range(4)])


_SHIFTS: dict[int, np.ndarray] = {}


def _shift(values: np.ndarray, nbytes: int) -> np.ndarray:
    if nbytes not in _SHIFTS:
        _SHIFTS[nbytes] = _tables(_shift_basis(nbytes))
    t = _SHIFTS[nbytes]
    v = values
    return t[0][v & 0xFF] ^ t[1][(v >> 8) & 0xFF] ^ t[2][(v >> 16) & 0xFF] ^ t[3][v >> 24]


def _crc32c(messages: list[bytes]) -> np.ndarray:
    """The (unmasked) CRC32C of each message of at least 4 bytes."""
    lens = np.array([len(m) for m in messages], np.int64)
    blocks = -(-lens // _BLOCK)
    pad = (blocks * _BLOCK - lens).tolist()
    data = np.frombuffer(b"".join(b for p, m in zip(pad, messages, strict=True) for b in (bytes(p), m)), np.uint8).copy()
    starts = (np.cumsum(blocks) - blocks) * _BLOCK + pad
    for k in range(4):  # the initial register 0xFFFFFFFF, folded into the first four bytes
        data[starts + k] ^= 0xFF
    columns = np.ascontiguousarray(data.reshape(-1, _BLOCK).T)  # byte j of every block, contiguous
    crc = np.zeros(columns.shape[1], np.uint32)
    for j in range(_BLOCK):
        crc = _TABLE[(crc ^ columns[j]) & 0xFF] ^ (crc >> np.uint32(8))
    counts, size = blocks, _BLOCK
    while (counts > 1).any():
        odd = counts % 2 == 1
        if odd.any():  # a leading zero block (CRC 0) for messages with an odd count: pairs line up
            first = np.cumsum(counts) - counts
            crc = np.insert(crc, first[odd & (counts > 1)], np.uint32(0))
            counts = counts + (odd & (counts > 1))
        single = counts == 1
        first = np.cumsum(counts) - counts
        keep = np.zeros(len(crc), bool)
        keep[first[single]] = True
        pairs = np.flatnonzero(~keep)
        left = pairs[0::2]
        merged = _shift(crc[left], size) ^ crc[left + 1]
        out = np.empty(int(single.sum() + (counts[~single] // 2).sum()), np.uint32)
        new_counts = np.where(single, 1, counts // 2)
        new_first = np.cumsum(new_counts) - new_counts
        out[new_first[single]] = crc[first[single]]
        slots = np.ones(len(out), bool)
        slots[new_first[single]] = False
        out[slots] = merged
        crc, counts, size = out, new_counts, size * 2
    return crc ^ np.uint32(0xFFFFFFFF)


def masked_crc32c(messages: list[bytes]) -> list[int]:
    """The masked CRC32C (snappy framing's checksum) of each message."""
    crc = np.zeros(len(messages), np.uint32)
    long = [i for i, m in enumerate(messages) if len(m) >= 4]
    batch: list[int] = []
    size = 0
    for n, i in enumerate(long):  # batches of about 16 MiB: bounded index arrays
        batch.append(i)
        size += len(messages[i])
        if size >= _BATCH or n == len(long) - 1:
            crc[batch] = _crc32c([messages[j] for j in batch])
            batch, size = [], 0
    for i, m in enumerate(messages):
        if len(m) < 4:
            c = 0xFFFFFFFF
            for b in m:
                c = int(_TABLE[(c ^ b) & 0xFF]) ^ (c >> 8)
            crc[i] = c ^ 0xFFFFFFFF
    c = crc.astype(np.uint64)
    return (((((c >> 15) | (c << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF).astype(np.int64).tolist()


def snappy_frames(streams: list[bytes]) -> list[bytes]:
    """Each stream as a xerial snappy framed stream (identifier + compressed chunks of <= 64 KiB with masked CRC32C)."""
    chunks = [s[i : i + _CHUNK] for s in streams for i in range(0, len(s), _CHUNK)]
    crcs = iter(masked_crc32c(chunks))
    out = []
    for s in streams:
        framed = bytearray(b"\xff\x06\x00\x00sNaPpY")
        for i in range(0, len(s), _CHUNK):
            body = next(crcs).to_bytes(4, "little") + pa.compress(s[i : i + _CHUNK], codec="snappy", asbytes=True)
            framed += b"\x00" + len(body).to_bytes(3, "little") + body
        out.append(bytes(framed))
    return out
