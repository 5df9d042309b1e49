"""Byte helpers the Flink decoder tests build inputs with (Flink's own encodings, written out by hand)."""

from __future__ import annotations


def varint7(n: int) -> bytes:
    """Flink's StringValue varint: 7 bits at a time, low first, high bit = more."""
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)
