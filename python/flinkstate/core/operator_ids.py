"""Flink's operator ids: a uid's id is Guava's murmur3_128 of its UTF-8 bytes (`StreamGraphHasherV2`).

Flink 1.x savepoints record operators by id only; a checkpoint imported from one lists an operator by its id unless
a uid was given, and a read by uid finds it through this hash.
"""

from __future__ import annotations

import struct

__all__ = ["murmur3_128", "operator_id"]


def murmur3_128(data: bytes, seed: int = 0) -> bytes:
    """Guava's murmur3_128 (x64 variant) hash bytes: Flink's operator id of a uid (StreamGraphHasherV2)."""
    m = (1 << 64) - 1
    c1, c2 = 0x87C37B91114253D5, 0x4CF5AD432745937F
    h1 = h2 = seed

    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (64 - r))) & m

    def fmix(k: int) -> int:
        k ^= k >> 33
        k = (k * 0xFF51AFD7ED558CCD) & m
        k ^= k >> 33
        k = (k * 0xC4CEB9FE1A85EC53) & m
        return k ^ (k >> 33)

    n = len(data)
    nblocks = n // 16
    for i in range(nblocks):
        k1, k2 = struct.unpack_from("<QQ", data, 16 * i)
        k1 = (rotl((k1 * c1) & m, 31) * c2) & m
        h1 ^= k1
        h1 = (rotl(h1, 27) + h2) & m
        h1 = (h1 * 5 + 0x52DCE729) & m
        k2 = (rotl((k2 * c2) & m, 33) * c1) & m
        h2 ^= k2
        h2 = (rotl(h2, 31) + h1) & m
        h2 = (h2 * 5 + 0x38495AB5) & m
    tail = data[16 * nblocks:] + bytes(16)
    k1, k2 = struct.unpack_from("<QQ", tail)
    if n & 15 > 8:
        h2 ^= (rotl((k2 * c2) & m, 33) * c1) & m
    if n & 15:
        h1 ^= (rotl((k1 * c1) & m, 31) * c2) & m
    h1 ^= n
    h2 ^= n
    h1 = (h1 + h2) & m
    h2 = (h2 + h1) & m
    h1, h2 = fmix(h1), fmix(h2)
    h1 = (h1 + h2) & m
    h2 = (h2 + h1) & m
    return struct.pack("<QQ", h1, h2)


def operator_id(uid: str) -> str:
    """The operator id (32 hex digits) Flink derives from a uid."""
    return murmur3_128(uid.encode("utf-8")).hex()
