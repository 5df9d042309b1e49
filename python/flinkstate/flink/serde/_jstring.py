"""`StringValue.readString`: the Java string layout of Flink's StringSerializer (also inside CEP's NodeId, NFA state)."""

from __future__ import annotations

import struct

__all__ = ["read_java_string"]


def read_java_string(buf: bytes, pos: int) -> tuple[str | None, int]:
    """StringValue.readString: varint(length+1) (0 = null) then UTF-16 units as 7-bit varints."""
    n = 0
    shift = 0
    while True:
        b = buf[pos]
        pos += 1
        n |= (b & 0x7F) << shift
        if b < 0x80:
            break
        shift += 7
    if n == 0:
        return None, pos
    n -= 1
    chunk = buf[pos : pos + n]
    if len(chunk) == n and chunk.isascii():
        return chunk.decode("ascii"), pos + n
    units = []
    for _ in range(n):
        c = buf[pos]
        pos += 1
        if c >= 0x80:
            shift = 7
            c &= 0x7F
            while True:
                b = buf[pos]
                pos += 1
                c |= (b & 0x7F) << shift
                if b < 0x80:
                    break
                shift += 7
        units.append(c)
    raw = struct.pack(f"<{n}H", *units)
    return raw.decode("utf-16-le", "surrogatepass"), pos
