"""java.io.DataOutput writing for the source codecs (reading is `flink._io.DataReader`), and exact-parse checks."""

from __future__ import annotations

import struct

from flinkstate.flink._io import DataReader
from flinkstate.flink.errors import CorruptFileError
from flinkstate.flink.serde.encode import encode_utf, make_writer
from flinkstate.flink.serde.serializers import basic_node
from flinkstate.flink.serde.values import read_java_string

__all__ = ["Out", "done", "read_string_value"]

_STRING = make_writer(basic_node("string"), "source split")


class Out:
    """A growing big-endian buffer with DataOutputStream's writes."""

    __slots__ = ("buf",)

    def __init__(self) -> None:
        self.buf = bytearray()

    def i32(self, v: int) -> Out:
        self.buf += struct.pack(">i", v)
        return self

    def i64(self, v: int) -> Out:
        self.buf += struct.pack(">q", v)
        return self

    def bool(self, v: bool) -> Out:
        self.buf.append(1 if v else 0)
        return self

    def utf(self, s: str) -> Out:
        self.buf += encode_utf(s)
        return self

    def string_value(self, s: str | None) -> Out:
        """StringValue.writeString (Flink's StringUtils.writeString)."""
        _STRING(self.buf, s)
        return self

    def sized(self, b: bytes) -> Out:
        self.buf += struct.pack(">i", len(b)) + b
        return self

    def raw(self, b: bytes) -> Out:
        self.buf += b
        return self

    def bytes(self) -> bytes:
        return bytes(self.buf)


def read_string_value(r: DataReader) -> str | None:
    """StringValue.readString at the reader's position."""
    whole = r.buf.obj if isinstance(r.buf.obj, bytes) and len(r.buf.obj) == len(r.buf) else bytes(r.buf)
    try:
        s, r.pos = read_java_string(whole, r.pos)
    except (IndexError, UnicodeDecodeError) as e:
        raise CorruptFileError(f"{r.where}: bad string at offset {r.pos}") from e
    if r.pos > len(r.buf):
        raise CorruptFileError(f"{r.where}: a string runs past the end ({len(r.buf)} bytes)")
    return s


def done(r: DataReader) -> None:
    """The reader must be at the end of its bytes (the format parsed exactly)."""
    if r.remaining():
        raise CorruptFileError(f"{r.where}: {r.remaining()} unexpected bytes after offset {r.pos}")
