"""Big-endian DataInput reading over bytes, and the xerial snappy framed stream Flink compresses with."""

from __future__ import annotations

import struct

import pyarrow as pa

from flinkstate.flink.errors import CorruptFileError

__all__ = ["DataReader", "snappy_unframe"]

_I16 = struct.Struct(">h")
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_SNAPPY_MAGIC = b"sNaPpY"


class DataReader:
    """A cursor over a buffer reading java.io.DataInputStream encodings; EOF is a CorruptFileError naming `where`."""

    __slots__ = ("buf", "pos", "where")

    def __init__(self, buf: bytes | memoryview, pos: int = 0, where: str = "<bytes>") -> None:
        self.buf = memoryview(buf) if not isinstance(buf, memoryview) else buf
        self.pos = pos
        self.where = where

    def _need(self, n: int) -> int:
        p = self.pos
        if n < 0 or p + n > len(self.buf):
            raise CorruptFileError(f"{self.where}: truncated (needed {n} bytes at offset {p}, have {len(self.buf) - p})")
        self.pos = p + n
        return p

    def remaining(self) -> int:
        """Bytes left after the cursor."""
        return len(self.buf) - self.pos

    def bytes(self, n: int) -> bytes:
        """The next n bytes."""
        p = self._need(n)
        return bytes(self.buf[p : p + n])

    def u8(self) -> int:
        """An unsigned byte."""
        p = self._need(1)
        return self.buf[p]

    def bool(self) -> bool:
        """A writeBoolean."""
        return self.u8() != 0

    def i16(self) -> int:
        """A writeShort, signed."""
        return _I16.unpack_from(self.buf, self._need(2))[0]

    def u16(self) -> int:
        """A writeShort, unsigned."""
        return _U16.unpack_from(self.buf, self._need(2))[0]

    def i32(self) -> int:
        """A writeInt."""
        return _I32.unpack_from(self.buf, self._need(4))[0]

    def i64(self) -> int:
        """A writeLong."""
        return _I64.unpack_from(self.buf, self._need(8))[0]

    def utf(self) -> str:
        """A writeUTF: u16 length and modified UTF-8."""
        n = self.u16()
        raw = self.bytes(n)
        try:
            return _modified_utf8(raw)
        except UnicodeDecodeError as e:
            raise CorruptFileError(f"{self.where}: bad modified UTF-8 string at offset {self.pos - n}") from e

    def sized(self) -> bytes:
        """An i32 length then that many bytes."""
        return self.bytes(self.i32())


def _modified_utf8(raw: bytes) -> str:
    """Java's modified UTF-8: NUL as C0 80 and supplementary characters as surrogate pairs."""
    if raw.isascii():
        return raw.decode("ascii")
    text = raw.replace(b"\xc0\x80", b"\x00").decode("utf-8", "surrogatepass")
    return text.encode("utf-16", "surrogatepass").decode("utf-16")


def snappy_unframe(buf: bytes | memoryview, where: str) -> bytes:
    """Decompress a snappy framed stream (stream identifier + chunks) with pyarrow's raw snappy codec.

    Chunk CRC32C checksums are not verified (no CRC32C in the standard library); lengths are.
    """
    mv = memoryview(buf)
    out: list[bytes] = []
    pos = 0
    n = len(mv)
    while pos < n:
        if pos + 4 > n:
            raise CorruptFileError(f"{where}: truncated snappy chunk header at offset {pos}")
        ctype = mv[pos]
        clen = mv[pos + 1] | (mv[pos + 2] << 8) | (mv[pos + 3] << 16)
        start = pos + 4
        end = start + clen
        if end > n:
            raise CorruptFileError(f"{where}: truncated snappy chunk at offset {pos} ({clen} bytes declared)")
        if ctype == 0xFF:
            if bytes(mv[start:end]) != _SNAPPY_MAGIC:
                raise CorruptFileError(f"{where}: bad snappy stream identifier at offset {pos}")
        elif ctype == 0x00:
            data = mv[start + 4 : end]
            size, _ = _varint(data, where)
            try:
                out.append(pa.decompress(data, decompressed_size=size, codec="snappy").to_pybytes())
            except (OSError, ValueError, pa.ArrowException) as e:
                raise CorruptFileError(f"{where}: bad snappy chunk at offset {pos}: {e}") from e
        elif ctype == 0x01:
            out.append(bytes(mv[start + 4 : end]))
        elif ctype < 0x80:
            raise CorruptFileError(f"{where}: reserved snappy chunk type {ctype:#x} at offset {pos}")
        pos = end
    return b"".join(out)


def _varint(data: memoryview, where: str) -> tuple[int, int]:
    """A little-endian base-128 varint at the start of data: (value, bytes used)."""
    value = shift = 0
    for i in range(min(5, len(data))):
        b = data[i]
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, i + 1
        shift += 7
    raise CorruptFileError(f"{where}: bad snappy length varint")
