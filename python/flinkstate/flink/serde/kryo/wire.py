"""Kryo's byte encodings (`com.esotericsoftware.kryo.io.Input`/`Output`) for Kryo 2.24 (Flink 1.x) and Kryo 5.6 (Flink 2.x).

Varints (7 bits a byte, least significant first; zig-zag unless "positive") and strings are the same in both; fixed-width
numbers are big-endian in Kryo 2 and little-endian in Kryo 5. Strings: ASCII with the last byte's high bit set, or a
"UTF8" length (chars + 1, 0 = null; 6 bits in the first byte, whose bit 8 flags UTF8 and bit 7 a next byte) followed by
each UTF-16 unit in 1 to 3 bytes. Kryo 5's `writeVarIntFlag` puts a flag in bit 8 of a varint's first byte the same way.
"""

from __future__ import annotations

import struct

__all__ = ["KryoInput", "KryoOutput", "WireError"]


class WireError(ValueError):
    """Bytes that do not decode as the Kryo form read at that position (truncated, or a varint too long)."""


_BE = {2: struct.Struct(">h"), 4: struct.Struct(">i"), 8: struct.Struct(">q"), "f": struct.Struct(">f"), "d": struct.Struct(">d"),
       "c": struct.Struct(">H")}
_LE = {2: struct.Struct("<h"), 4: struct.Struct("<i"), 8: struct.Struct("<q"), "f": struct.Struct("<f"), "d": struct.Struct("<d"),
       "c": struct.Struct("<H")}


def _zigzag(n: int) -> int:
    return (n >> 1) ^ -(n & 1)


class KryoInput:
    """A cursor over one value's bytes, reading Kryo `gen` (2 or 5) encodings."""

    __slots__ = ("buf", "pos", "gen", "_fixed")

    def __init__(self, buf: bytes | memoryview, pos: int, gen: int) -> None:
        self.buf, self.pos, self.gen = buf, pos, gen
        self._fixed = _BE if gen == 2 else _LE

    def byte(self) -> int:
        """An unsigned byte."""
        p = self.pos
        if p >= len(self.buf):
            raise WireError(f"truncated at offset {p}")
        self.pos = p + 1
        return self.buf[p]

    def sbyte(self) -> int:
        """A signed byte."""
        b = self.byte()
        return b - 256 if b > 127 else b

    def boolean(self) -> bool:
        return self.byte() == 1

    def bytes(self, n: int) -> bytes:
        p = self.pos
        if n < 0 or p + n > len(self.buf):
            raise WireError(f"{n} bytes at offset {p} run past the value's end")
        self.pos = p + n
        return bytes(self.buf[p : p + n])

    def _uvar(self, limit: int) -> int:
        out = shift = 0
        for i in range(limit):
            b = self.byte()
            if i == limit - 1 and limit == 9:  # Kryo's 9th varlong byte holds 8 bits
                return out | (b << shift)
            out |= (b & 0x7F) << shift
            if b < 0x80:
                return out
            shift += 7
        raise WireError(f"a varint longer than {limit} bytes at offset {self.pos - limit}")

    def varint(self, positive: bool = True) -> int:
        """Input.readVarInt(optimizePositive): a 32-bit value."""
        n = self._uvar(5) & 0xFFFFFFFF
        if positive:
            return n - (1 << 32) if n >= 1 << 31 else n
        return _zigzag(n)

    def varlong(self, positive: bool = True) -> int:
        """Input.readVarLong(optimizePositive): a 64-bit value."""
        n = self._uvar(9) & 0xFFFFFFFFFFFFFFFF
        if positive:
            return n - (1 << 64) if n >= 1 << 63 else n
        return _zigzag(n)

    def varint_flag(self) -> tuple[bool, int]:
        """Kryo 5 readVarIntFlag(): (the flag in bit 8 of the first byte, the positive varint of the other bits)."""
        b = self.byte()
        flag = bool(b & 0x80)
        out = b & 0x3F
        if b & 0x40:
            shift = 6
            for _ in range(4):
                b = self.byte()
                out |= (b & 0x7F) << shift
                if b < 0x80:
                    break
                shift += 7
            else:
                raise WireError(f"a flagged varint longer than 5 bytes at offset {self.pos - 5}")
        out &= 0xFFFFFFFF
        return flag, out - (1 << 32) if out >= 1 << 31 else out

    def fixed(self, width: int) -> int:
        """A fixed-width signed integer (2, 4 or 8 bytes): big-endian in Kryo 2, little-endian in Kryo 5."""
        p = self.pos
        if p + width > len(self.buf):
            raise WireError(f"{width} bytes at offset {p} run past the value's end")
        self.pos = p + width
        return self._fixed[width].unpack_from(self.buf, p)[0]

    def float32(self) -> float:
        return self._unpack("f", 4)

    def float64(self) -> float:
        return self._unpack("d", 8)

    def char(self) -> str:
        return chr(self._unpack("c", 2))

    def _unpack(self, code: str, width: int) -> float:
        p = self.pos
        if p + width > len(self.buf):
            raise WireError(f"{width} bytes at offset {p} run past the value's end")
        self.pos = p + width
        return self._fixed[code].unpack_from(self.buf, p)[0]

    def be_long(self, n: int) -> int:
        """Kryo 5 Input.readLong(count): n big-endian bytes, sign-extended."""
        return int.from_bytes(self.bytes(n), "big", signed=True)

    def string(self) -> str | None:
        """Input.readString: ASCII (last byte flagged) or a UTF8 length (0 = null, 1 = "") and the characters."""
        b = self.byte()
        if not b & 0x80:  # ASCII: up to the byte with bit 8 set
            start = self.pos - 1
            buf = self.buf
            p = start
            while True:
                if p >= len(buf):
                    raise WireError(f"an ASCII string at offset {start} runs past the value's end")
                if buf[p] & 0x80:
                    break
                p += 1
            raw = bytearray(buf[start : p + 1])
            raw[-1] &= 0x7F
            self.pos = p + 1
            return raw.decode("ascii")
        count = b & 0x3F
        if b & 0x40:
            shift = 6
            for _ in range(4):
                nb = self.byte()
                count |= (nb & 0x7F) << shift
                if nb < 0x80:
                    break
                shift += 7
        if count == 0:
            return None
        count -= 1
        units = []
        for _ in range(count):
            c = self.byte()
            if c < 0x80:
                units.append(c)
            elif c >> 5 == 0x6:
                units.append((c & 0x1F) << 6 | (self.byte() & 0x3F))
            elif c >> 4 == 0xE:
                units.append((c & 0x0F) << 12 | (self.byte() & 0x3F) << 6 | (self.byte() & 0x3F))
            else:
                raise WireError(f"byte {c:#x} at offset {self.pos - 1} starts no UTF-8 character of a Kryo string")
        if all(u < 0x80 for u in units):
            return bytes(units).decode("ascii")
        return struct.pack(f"<{count}H", *units).decode("utf-16-le", "surrogatepass")


class KryoOutput:
    """Appends Kryo `gen` (2 or 5) encodings to a bytearray."""

    __slots__ = ("out", "gen", "_fixed")

    def __init__(self, gen: int) -> None:
        self.out = bytearray()
        self.gen = gen
        self._fixed = _BE if gen == 2 else _LE

    def byte(self, b: int) -> None:
        self.out.append(b & 0xFF)

    def boolean(self, v: bool) -> None:
        self.out.append(1 if v else 0)

    def raw(self, b: bytes) -> None:
        self.out += b

    def varint(self, n: int, positive: bool = True) -> None:
        """Output.writeVarInt: 32-bit two's complement (zig-zag unless positive), 1 to 5 bytes."""
        n &= 0xFFFFFFFF
        if not positive:
            s = n - (1 << 32) if n >= 1 << 31 else n
            n = ((s << 1) ^ (s >> 31)) & 0xFFFFFFFF
        self._uvar(n, 5)

    def varlong(self, n: int, positive: bool = True) -> None:
        """Output.writeVarLong: 64-bit, 1 to 9 bytes (the 9th holds 8 bits)."""
        n &= 0xFFFFFFFFFFFFFFFF
        if not positive:
            s = n - (1 << 64) if n >= 1 << 63 else n
            n = ((s << 1) ^ (s >> 63)) & 0xFFFFFFFFFFFFFFFF
        self._uvar(n, 9)

    def _uvar(self, n: int, limit: int) -> None:
        out = self.out
        for i in range(limit):
            if limit == 9 and i == 8:
                out.append(n & 0xFF)
                return
            if n < 0x80:
                out.append(n)
                return
            out.append((n & 0x7F) | 0x80)
            n >>= 7

    def varint_flag(self, flag: bool, n: int) -> None:
        """Kryo 5 writeVarIntFlag(flag, n, true)."""
        n &= 0xFFFFFFFF
        first = (n & 0x3F) | (0x80 if flag else 0)
        if n >> 6 == 0:
            self.out.append(first)
            return
        self.out.append(first | 0x40)
        self._uvar(n >> 6, 5)

    def fixed(self, width: int, n: int) -> None:
        self.out += self._fixed[width].pack(n)

    def float32(self, v: float) -> None:
        self.out += self._fixed["f"].pack(v)

    def float64(self, v: float) -> None:
        self.out += self._fixed["d"].pack(v)

    def char(self, c: str) -> None:
        self.out += self._fixed["c"].pack(ord(c))

    def string(self, s: str | None, ascii_max: int) -> None:
        """Output.writeString: ASCII when 1 < length <= ascii_max and every char is ASCII (Kryo 2: 63, Kryo 5: 32), else UTF8."""
        if s is None:
            self.out.append(0x80)
            return
        units = s.encode("utf-16-le", "surrogatepass")
        n = len(units) // 2
        if n == 0:
            self.out.append(0x81)
            return
        if 1 < n <= ascii_max and s.isascii():
            raw = bytearray(s.encode("ascii"))
            raw[-1] |= 0x80
            self.out += raw
            return
        self._utf8_length(n + 1)
        if s.isascii():
            self.out += s.encode("ascii")
            return
        for (u,) in struct.iter_unpack("<H", units):
            if u < 0x80:
                self.out.append(u)
            elif u < 0x800:
                self.out += bytes((0xC0 | u >> 6, 0x80 | (u & 0x3F)))
            else:
                self.out += bytes((0xE0 | u >> 12, 0x80 | (u >> 6 & 0x3F), 0x80 | (u & 0x3F)))

    def ascii(self, s: str) -> None:
        """Output.writeAscii (Kryo 5's class names): 0 and 1 characters as UTF8 lengths, else the flagged last byte."""
        if len(s) == 0:
            self.out.append(0x81)
        elif len(s) == 1:
            self.out += bytes((0x82, ord(s)))
        else:
            raw = bytearray(s.encode("ascii"))
            raw[-1] |= 0x80
            self.out += raw

    def _utf8_length(self, n: int) -> None:
        first = (n & 0x3F) | 0x80
        if n >> 6 == 0:
            self.out.append(first)
            return
        self.out.append(first | 0x40)
        self._uvar(n >> 6, 5)
