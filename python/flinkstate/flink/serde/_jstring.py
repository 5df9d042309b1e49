"""Flink's variable-length integers and `StringValue` strings (StringSerializer, CEP's NodeId and NFA state, StringValue).

A varint is 7 bits per byte, least significant group first, high bit set on every byte but the last (the layout of
`StringValue` and of RocksDB's block entries alike).
"""

from __future__ import annotations

import struct

__all__ = ["read_java_string", "read_string_value", "read_varint", "write_java_string", "write_string_value", "write_varint"]


def read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """One varint at pos: (value, offset after it)."""
    value = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7


def _units(buf: bytes, pos: int, n: int) -> tuple[str, int]:
    """n UTF-16 units, each a varint: ASCII copied at once, anything else unit by unit."""
    chunk = buf[pos : pos + n]
    if len(chunk) == n and chunk.isascii():
        return chunk.decode("ascii"), pos + n
    units = []
    for _ in range(n):
        c, pos = read_varint(buf, pos)
        units.append(c)
    return struct.pack(f"<{n}H", *units).decode("utf-16-le", "surrogatepass"), pos


def read_java_string(buf: bytes, pos: int) -> tuple[str | None, int]:
    """StringValue.readString: varint(length+1) (0 = null) then UTF-16 units as 7-bit varints."""
    n, pos = read_varint(buf, pos)
    if n == 0:
        return None, pos
    return _units(buf, pos, n - 1)


def read_string_value(buf: bytes, pos: int) -> tuple[str, int]:
    """StringValue.write (StringValueSerializer): varint length (never null), then the units as varints."""
    n, pos = read_varint(buf, pos)
    return _units(buf, pos, n)


def write_varint(out: bytearray, n: int) -> None:
    """Append n (>= 0) as a 7-bit varint, the mirror of `read_varint`."""
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def _write_units(out: bytearray, s: str, extra: int) -> None:
    """varint(units + extra), then the UTF-16 units as varints (ASCII at once)."""
    if s.isascii():
        write_varint(out, len(s) + extra)
        out += s.encode("ascii")
        return
    raw = s.encode("utf-16-le", "surrogatepass")
    units = struct.unpack(f"<{len(raw) // 2}H", raw)
    write_varint(out, len(units) + extra)
    for u in units:
        write_varint(out, u)


def write_java_string(out: bytearray, s: str | None) -> None:
    """StringValue.writeString (StringSerializer, CEP's names): the mirror of `read_java_string` (None: one byte 0)."""
    if s is None:
        out.append(0)
    else:
        _write_units(out, s, 1)


def write_string_value(out: bytearray, s: str) -> None:
    """StringValue.write (StringValueSerializer): the mirror of `read_string_value`."""
    _write_units(out, s, 0)
