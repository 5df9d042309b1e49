"""Decode serialized Flink values (the serializers' byte formats) into Python values for Arrow.

Formats: `LongSerializer` and the other base serializers (big-endian), `StringValue.writeString`
(length+1 and UTF-16 units as 7-bit varints), `RowSerializer` (RowKind + null mask, MSB first),
`TupleSerializer` (fields back to back), `PojoSerializer` (flags byte, then per field a null flag
and the value), `ListSerializer`/`MapSerializer` (i32 count), `TtlSerializer` (i64 + value).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from flinkstate.flink.errors import UnsupportedSerializerError
from flinkstate.flink.serde._datastream import datastream_reader
from flinkstate.flink.serde._jstring import read_java_string
from flinkstate.flink.serde._temporal import READERS
from flinkstate.flink.serde.serializers import TypeNode

__all__ = ["Reader", "make_reader", "read_count", "read_java_string", "read_rest"]

Reader = Callable[[bytes, int], tuple[Any, int]]
_I64 = struct.Struct(">q")
_TS_NANOS = struct.Struct(">qi")

_FIXED = {
    "long": struct.Struct(">q"), "int": struct.Struct(">i"), "short": struct.Struct(">h"), "byte": struct.Struct(">b"),
    "double": struct.Struct(">d"), "float": struct.Struct(">f"), "bool": struct.Struct(">?"), "char": struct.Struct(">H"),
}


def _unpacker(s: struct.Struct) -> Reader:
    size = s.size
    unpack = s.unpack_from

    def read(buf: bytes, pos: int) -> tuple[Any, int]:
        if pos + size > len(buf):
            raise IndexError("value runs past the end of its record")
        return unpack(buf, pos)[0], pos + size

    return read


def read_count(buf: bytes, pos: int, what: str = "a collection") -> tuple[int, int]:
    """An i32 element count that the bytes left can hold (each element takes at least one byte; the few serializers of
    empty values are bounded by 1 << 24): a negative or larger one is a ValueError, never a loop over garbage."""
    if pos + 4 > len(buf):
        raise IndexError(f"{what}'s length runs past the end of its record")
    n = int.from_bytes(buf[pos : pos + 4], "big", signed=True)
    if n < 0 or n > max(len(buf) - pos - 4, 1 << 24):
        raise ValueError(f"{what} of {n} elements in {len(buf) - pos - 4} bytes")
    return n, pos + 4


def _read_char(buf: bytes, pos: int) -> tuple[str, int]:
    return chr(int.from_bytes(buf[pos : pos + 2], "big")), pos + 2


def _read_bytes(buf: bytes, pos: int) -> tuple[bytes, int]:
    n = int.from_bytes(buf[pos : pos + 4], "big", signed=True)
    end = pos + 4 + n
    if n < 0 or end > len(buf):
        raise IndexError("byte[] runs past the end of its record")
    return bytes(buf[pos + 4 : end]), end


def _read_void(buf: bytes, pos: int) -> tuple[None, int]:
    if pos >= len(buf):
        raise IndexError("a one-byte value runs past the end of its record")
    return None, pos + 1


def _read_string_data(buf: bytes, pos: int) -> tuple[str, int]:
    """StringDataSerializer: i32 length, then UTF-8."""
    raw, end = _read_bytes(buf, pos)
    return raw.decode("utf-8", "surrogatepass"), end


def _read_timestamp_data(buf: bytes, pos: int) -> tuple[int, int]:
    """TimestampDataSerializer, precision <= 3: epoch milliseconds (an Arrow timestamp[ms] value)."""
    if pos + 8 > len(buf):
        raise IndexError("timestamp runs past the end of its record")
    return _I64.unpack_from(buf, pos)[0], pos + 8


def _read_timestamp_data_nanos(buf: bytes, pos: int) -> tuple[int, int]:
    """TimestampDataSerializer, precision > 3: epoch milliseconds and nanoseconds of the millisecond (timestamp[ns])."""
    if pos + 12 > len(buf):
        raise IndexError("timestamp runs past the end of its record")
    ms, nanos = _TS_NANOS.unpack_from(buf, pos)
    return ms * 1_000_000 + nanos, pos + 12


def _decimal_data_reader(precision: int, scale: int) -> Reader:
    """DecimalDataSerializer: the unscaled value as an i64 (precision <= 18) or as i32 length + two's complement bytes."""
    import decimal

    def read(buf: bytes, pos: int) -> tuple[Any, int]:
        if precision <= 18:
            if pos + 8 > len(buf):
                raise IndexError("decimal runs past the end of its record")
            unscaled, pos = _I64.unpack_from(buf, pos)[0], pos + 8
        else:
            raw, pos = _read_bytes(buf, pos)
            unscaled = int.from_bytes(raw, "big", signed=True)
        value = decimal.Decimal(unscaled).scaleb(-scale)
        return (value if precision <= 38 else str(value)), pos

    return read


def make_reader(node: TypeNode, ctx: str) -> Reader:
    """A function (buf, pos) -> (value, new pos) for this serializer; ctx names operator and state in errors."""
    kind = node.kind
    if kind == "char":
        return _read_char
    if kind in _FIXED:
        return _unpacker(_FIXED[kind])
    if kind == "string":
        return read_java_string
    if kind == "bytes":
        return _read_bytes
    if kind == "void":
        return _read_void
    if kind in READERS:
        return READERS[kind]
    if kind == "tuple":
        return _tuple_reader(node, ctx)
    if kind == "row":
        return _row_reader(node, ctx)
    if kind == "pojo":
        return _pojo_reader(node, ctx)
    if kind in ("list", "parray", "sarray"):
        return _list_reader(node, ctx)
    if kind == "garray":
        return _generic_array_reader(node, ctx)
    if kind == "enum":
        return _enum_reader(node, ctx)
    if kind == "timewindow":
        return _read_time_window
    if kind in ("opaque", "unknown"):
        return _opaque_reader(node, ctx)
    if kind in ("rowdata", "arraydata"):
        return _read_bytes  # BinaryRowData/BinaryArrayData: i32 size, then the binary layout (kept as its bytes)
    if kind == "stringdata":
        return _read_string_data
    if kind == "timestampdata":
        return _read_timestamp_data if node.params[0] <= 3 else _read_timestamp_data_nanos
    if kind == "decimaldata":
        return _decimal_data_reader(node.params[0], node.params[1])
    if kind == "map":
        return _map_reader(node, ctx)
    if kind == "ttl":
        return _ttl_reader(node, ctx)
    if kind == "kryo":  # bound to the Kryo that wrote it (serde.kryo)
        from flinkstate.flink.serde.kryo.bind import kryo_reader

        return kryo_reader(node, ctx)
    found = datastream_reader(node, ctx, make_reader)
    if found is not None:
        return found
    if kind == "refused":
        return _opaque_reader(node, ctx)
    raise UnsupportedSerializerError(f"{ctx}: values of serializer {node.cls} cannot be decoded")


def _tuple_reader(node: TypeNode, ctx: str) -> Reader:
    fields = [(n, make_reader(c, ctx)) for n, c in zip(node.names, node.children, strict=True)]

    def read(buf: bytes, pos: int) -> tuple[dict[str, Any], int]:
        out = {}
        for name, rd in fields:
            out[name], pos = rd(buf, pos)
        return out, pos

    return read


def _row_reader(node: TypeNode, ctx: str) -> Reader:
    fields = [(n, make_reader(c, ctx)) for n, c in zip(node.names, node.children, strict=True)]
    return masked_row_reader(fields, 0 if node.legacy_row else 2)


def masked_row_reader(fields: list[tuple[str, Reader]], kind_bits: int) -> Reader:
    """A reader of rows led by a null mask (RowSerializer, PyFlink's RowCoder): kind_bits row-kind bits, then one bit per field."""
    mask_bytes = (len(fields) + kind_bits + 7) // 8
    top = 8 * mask_bytes - 1 - kind_bits

    def read(buf: bytes, pos: int) -> tuple[dict[str, Any], int]:
        mask = int.from_bytes(buf[pos : pos + mask_bytes], "big")
        pos += mask_bytes
        out: dict[str, Any] = {}
        for i, (name, rd) in enumerate(fields):
            if (mask >> (top - i)) & 1:
                out[name] = None
            else:
                out[name], pos = rd(buf, pos)
        return out, pos

    return read


def _pojo_reader(node: TypeNode, ctx: str) -> Reader:
    fields = [(n, make_reader(c, ctx)) for n, c in zip(node.names, node.children, strict=True)]

    def read(buf: bytes, pos: int) -> tuple[dict[str, Any] | None, int]:
        flags = buf[pos]
        pos += 1
        if flags & 1:
            return None, pos
        if not flags & 2:
            raise UnsupportedSerializerError(f"{ctx}: a value is a subclass of POJO {node.cls}; subclasses are not supported")
        out = {}
        for name, rd in fields:
            isnull = buf[pos]
            pos += 1
            if isnull:
                out[name] = None
            else:
                out[name], pos = rd(buf, pos)
        return out, pos

    return read


def _list_reader(node: TypeNode, ctx: str) -> Reader:
    elem = make_reader(node.children[0], ctx)

    def read(buf: bytes, pos: int) -> tuple[list[Any], int]:
        n, pos = read_count(buf, pos, "a list")
        out = []
        for _ in range(n):
            v, pos = elem(buf, pos)
            out.append(v)
        return out, pos

    return read


def _generic_array_reader(node: TypeNode, ctx: str) -> Reader:
    return flagged_array_reader(make_reader(node.children[0], ctx))


def flagged_array_reader(elem: Reader) -> Reader:
    """A reader of arrays whose elements carry a presence flag (GenericArraySerializer, PyFlink's GenericArrayCoder)."""

    def read(buf: bytes, pos: int) -> tuple[list[Any], int]:
        n, pos = read_count(buf, pos, "an array")
        out = []
        for _ in range(n):
            flag = buf[pos]
            pos += 1
            v = None
            if flag:
                v, pos = elem(buf, pos)
            out.append(v)
        return out, pos

    return read


def _enum_reader(node: TypeNode, ctx: str) -> Reader:
    names = node.names

    def read(buf: bytes, pos: int) -> tuple[str, int]:
        i = int.from_bytes(buf[pos : pos + 4], "big", signed=True)
        if not 0 <= i < len(names):
            raise ValueError(f"{ctx}: enum ordinal {i} of {node.cls} is not one of its {len(names)} constants")
        return names[i], pos + 4

    return read


def _opaque_reader(node: TypeNode, ctx: str) -> Reader:
    """Kryo/Avro/unknown values inside a stream: their length is unknown, so they cannot even be skipped."""
    typ = f" (type {node.names[0]})" if node.names else ""

    def read(buf: bytes, pos: int) -> tuple[Any, int]:
        raise UnsupportedSerializerError(
            f"{ctx}: serializer {node.cls}{typ} cannot be decoded, and here its values are not "
            "length-framed (nested in another type, a list element, a key, or a HashMap native snapshot), "
            "so they cannot be read as raw bytes either")

    return read


def read_rest(buf: bytes, pos: int) -> tuple[bytes, int]:
    """The rest of a length-framed value as raw bytes (a Kryo/Avro value alone in its record)."""
    return bytes(buf[pos:]), len(buf)


def _read_time_window(buf: bytes, pos: int) -> tuple[dict[str, int], int]:
    start, end = _TIME_WINDOW.unpack_from(buf, pos)
    return {"start": start, "end": end}, pos + 16


_TIME_WINDOW = struct.Struct(">qq")


def _map_reader(node: TypeNode, ctx: str) -> Reader:
    return map_entries_reader(make_reader(node.children[0], ctx), make_reader(node.children[1], ctx))


def map_entries_reader(kr: Reader, vr: Reader) -> Reader:
    """A reader of Flink's map layout (MapSerializer, PyFlink's MapCoder): i32 n, then n x (key, null flag, value)."""

    def read(buf: bytes, pos: int) -> tuple[list[tuple[Any, Any]], int]:
        n, pos = read_count(buf, pos, "a map")
        out = []
        for _ in range(n):
            k, pos = kr(buf, pos)
            isnull = buf[pos]
            pos += 1
            v = None
            if not isnull:
                v, pos = vr(buf, pos)
            out.append((k, v))
        return out, pos

    return read


def _ttl_reader(node: TypeNode, ctx: str) -> Reader:
    ts = _unpacker(_FIXED["long"])
    user = make_reader(node.children[1], ctx)

    def read(buf: bytes, pos: int) -> tuple[tuple[int, Any], int]:
        t, pos = ts(buf, pos)
        v, pos = user(buf, pos)
        return (t, v), pos

    return read
