"""Encode values and serializer snapshots in Flink's byte formats (the mirror of `values` and `serializers`).

Also maps Arrow types to Flink serializers (`type_for_arrow`), so states built from Arrow tables get
snapshots Flink accepts, and provides murmur3_128 (operator ids) and snappy framing with CRC32C.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from flinkstate.core.errors import InvalidArgumentError
from flinkstate.core.operator_ids import murmur3_128
from flinkstate.flink.errors import UnsupportedSerializerError
from flinkstate.flink.serde._datastream import datastream_writer
from flinkstate.flink.serde._jstring import write_java_string
from flinkstate.flink.serde._temporal import WRITERS
from flinkstate.flink.serde.serializers import (
    _COMPOSITE,
    _COMPOSITE_MAGIC,
    _ENUM,
    _NESTED_MAGIC,
    _OPTIONAL_MAP_HEADER,
    _POJO,
    _SIMPLE,
    StateMeta,
    TypeNode,
    whole_bytes,
)

__all__ = ["Writer", "encode_utf", "make_writer", "plain_values", "murmur3_128", "snappy_frame", "type_for_arrow", "write_state_meta", "write_type"]

Writer = Callable[[bytearray, Any], None]
_CLS = {kind: cls for cls, kind in _SIMPLE.items()}
_COMP_CLS = {kind: cls for cls, (kind, _) in _COMPOSITE.items()}
_OUTER_VERSION = {"list": 1, "map": 1, "row": 4, "tuple": 2, "ttl": 2, "timer": 2, "garray": 1, "set": 1, "nullable": 2}
_FIXED = {"long": ">q", "int": ">i", "short": ">h", "byte": ">b", "double": ">d", "float": ">f", "bool": ">?"}


def encode_utf(s: str) -> bytes:
    """Java writeUTF: u16 length + modified UTF-8 (NUL as C0 80, supplementary characters as surrogate pairs)."""
    if s.isascii() and "\x00" not in s:
        raw = s.encode("ascii")
    else:
        units = struct.unpack(f"<{len(s.encode('utf-16-le', 'surrogatepass')) // 2}H", s.encode("utf-16-le", "surrogatepass"))
        out = bytearray()
        for u in units:
            if 0 < u < 0x80:
                out.append(u)
            elif u < 0x800:
                out += bytes([0xC0 | (u >> 6), 0x80 | (u & 0x3F)])
            else:
                out += bytes([0xE0 | (u >> 12), 0x80 | ((u >> 6) & 0x3F), 0x80 | (u & 0x3F)])
        raw = bytes(out)
    if len(raw) > 0xFFFF:
        raise InvalidArgumentError(f"string of {len(raw)} bytes is too long for a Java writeUTF: {s[:40]!r}...")
    return struct.pack(">H", len(raw)) + raw


def write_type(out: bytearray, node: TypeNode) -> None:
    """A `writeVersionedSnapshot` of this serializer, as Flink 2.3 writes it."""
    kind = node.kind
    if node.snapshot:  # table runtime and unknown classes: the snapshot exactly as it was read
        out += node.snapshot
        return
    if kind in _CLS:  # the class read when it is one of this kind (a table-runtime window keeps its own), else the kind's
        out += encode_utf(node.cls if _SIMPLE.get(node.cls) == kind else _CLS[kind]) + struct.pack(">i", 3)
        return
    if kind in ("parray", "sarray"):  # simple snapshots named by node.cls
        out += encode_utf(node.cls) + struct.pack(">i", 3)
        return
    if kind == "enum":
        out += encode_utf(_ENUM) + struct.pack(">i", 3) + encode_utf(node.cls) + struct.pack(">i", len(node.names))
        for name in node.names:
            out += encode_utf(name)
        return
    if kind in ("opaque", "kryo"):  # Kryo/Avro: the snapshot as read
        out += encode_utf(node.cls) + struct.pack(">i", 2) + node.payload
        return
    if kind == "pojo":
        out += encode_utf(_POJO) + struct.pack(">i", 2) + encode_utf(node.cls)
        out += struct.pack(">qi", _OPTIONAL_MAP_HEADER, len(node.children))
        for name, child in zip(node.names, node.children, strict=True):
            key = encode_utf(node.cls) + encode_utf(name)
            val = bytearray()
            write_type(val, child)
            out += encode_utf(name) + b"\x01" + struct.pack(">i", len(key)) + key + b"\x01" + struct.pack(">i", len(val)) + val
        out += struct.pack(">qi", _OPTIONAL_MAP_HEADER, 0) + struct.pack(">qi", _OPTIONAL_MAP_HEADER, 0)
        return
    if kind not in _COMP_CLS:
        raise UnsupportedSerializerError(f"serializer {node.cls} ({kind}) has no snapshot writer")
    out += encode_utf(_COMP_CLS[kind]) + struct.pack(">iii", 3, _COMPOSITE_MAGIC, _OUTER_VERSION[kind])
    if kind == "row":
        out.append(0 if node.legacy_row else 1)
    elif kind == "tuple":
        out += encode_utf(node.cls if node.cls != _COMP_CLS["tuple"] else f"org.apache.flink.api.java.tuple.Tuple{len(node.children)}")
    elif kind == "garray":
        out += encode_utf(node.names[0])
    elif kind == "nullable":
        out += struct.pack(">i", node.params[0] if node.params else 0)
    out += struct.pack(">iii", _NESTED_MAGIC, 1, len(node.children))
    for c in node.children:
        write_type(out, c)


def write_state_meta(out: bytearray, m: StateMeta) -> None:
    """One StateMetaInfoSnapshot (meta version 7 layout)."""
    out += encode_utf(m.name) + struct.pack(">i", ("KEY_VALUE", "OPERATOR", "BROADCAST", "PRIORITY_QUEUE").index(m.backend_type))
    out += struct.pack(">i", len(m.options))
    for k, v in m.options.items():
        out += encode_utf(k) + encode_utf(v)
    out += struct.pack(">i", len(m.serializers))
    for k, node in m.serializers.items():
        out += encode_utf(k) + struct.pack(">i", 2)
        write_type(out, node)


def make_writer(node: TypeNode, ctx: str) -> Writer:
    """A function (out, value) appending the value serialized with this serializer; ctx names the state in errors."""
    kind = node.kind
    if kind in _FIXED:
        s = struct.Struct(_FIXED[kind])
        return lambda out, v: out.extend(s.pack(v))
    if kind == "char":
        return lambda out, v: out.extend(struct.pack(">H", ord(v)))
    if kind == "string":
        return write_java_string
    if kind == "bytes":
        return lambda out, v: out.extend(struct.pack(">i", len(v)) + bytes(v))
    if kind == "void":
        return lambda out, v: out.append(0)
    if kind in WRITERS:
        return WRITERS[kind]
    if kind in ("row", "tuple", "pojo"):
        return _struct_writer(node, ctx)
    if kind == "enum":
        ordinals = {name: i for i, name in enumerate(node.names)}
        return lambda out, v: out.extend(struct.pack(">i", ordinals[v]))
    if kind == "timewindow":
        return lambda out, v: out.extend(struct.pack(">qq", v["start"], v["end"]))
    if kind in ("opaque", "unknown") or whole_bytes(node):  # raw serialized bytes, written back as they were read
        return lambda out, v: out.extend(bytes(v))
    if kind == "kryo":  # values of the Java types the state held, written by the Kryo of the node (serde.kryo)
        from flinkstate.flink.serde.kryo.bind import kryo_writer

        return kryo_writer(node, ctx)
    if kind in ("rowdata", "arraydata"):  # BinaryRowData/BinaryArrayData bytes: i32 size, then the bytes
        return lambda out, v: out.extend(struct.pack(">i", len(v)) + bytes(v))
    if kind == "stringdata":
        return _write_string_data
    if kind == "timestampdata":
        return _write_timestamp_data if node.params[0] <= 3 else _write_timestamp_data_nanos
    if kind == "decimaldata":
        return _decimal_data_writer(node.params[0], node.params[1])
    if kind == "nullable":
        inner = make_writer(node.children[0], ctx)
        pad = bytes(node.params[0] if node.params else 0)

        def wn(out: bytearray, v: Any) -> None:
            if v is None:
                out.append(1)
                out += pad
            else:
                out.append(0)
                inner(out, v)
        return wn
    if kind in ("garray", "set"):  # GenericArraySerializer, SetSerializer: i32 n, per element a presence/null flag
        component = make_writer(node.children[0], ctx)
        present = 1 if kind == "garray" else 0

        def wg(out: bytearray, v: list) -> None:
            out += struct.pack(">i", len(v))
            for e in v:
                out.append(present ^ (e is None))
                if e is not None:
                    component(out, e)
        return wg
    if kind in ("list", "parray", "sarray"):
        elem = make_writer(node.children[0], ctx)

        def wl(out: bytearray, v: list) -> None:
            out += struct.pack(">i", len(v))
            for e in v:
                elem(out, e)
        return wl
    if kind == "map":
        kw, vw = make_writer(node.children[0], ctx), make_writer(node.children[1], ctx)

        def wm(out: bytearray, v: Any) -> None:
            items = list(v.items()) if isinstance(v, dict) else list(v)
            out += struct.pack(">i", len(items))
            for k, x in items:
                kw(out, k)
                out.append(1 if x is None else 0)
                if x is not None:
                    vw(out, x)
        return wm
    if kind == "transparent":  # a wrapper that writes its nested serializer's bytes (ExternalSerializer, RowDataKey)
        return make_writer(node.children[0], ctx)
    ds = datastream_writer(node, ctx, make_writer)  # Either, CEP, interval-join buffers, stream records, Value types...
    if ds is not None:
        return ds
    raise UnsupportedSerializerError(f"{ctx}: values of serializer {node.cls} cannot be encoded")


def _write_string_data(out: bytearray, v: str) -> None:
    raw = v.encode("utf-8", "surrogatepass")
    out += struct.pack(">i", len(raw)) + raw


def _epoch_nanos(v: Any) -> int:
    """A timestamp value (naive datetime, pandas Timestamp or epoch integer in the column's unit) as epoch nanoseconds."""
    import datetime as dt

    if isinstance(v, dt.datetime):
        delta = v.replace(tzinfo=None) - dt.datetime(1970, 1, 1)
        return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1_000 + getattr(v, "nanosecond", 0)
    return int(v)


def _write_timestamp_data(out: bytearray, v: Any) -> None:
    out += struct.pack(">q", _epoch_nanos(v) // 1_000_000)


def _write_timestamp_data_nanos(out: bytearray, v: Any) -> None:
    ns = _epoch_nanos(v)
    out += struct.pack(">qi", ns // 1_000_000, ns % 1_000_000)


def _decimal_data_writer(precision: int, scale: int) -> Writer:
    import decimal

    def write(out: bytearray, v: Any) -> None:
        unscaled = int(decimal.Decimal(v).scaleb(scale).to_integral_value())
        if precision <= 18:
            out += struct.pack(">q", unscaled)
        else:
            raw = unscaled.to_bytes(max(1, (unscaled.bit_length() + 8) // 8), "big", signed=True)
            out += struct.pack(">i", len(raw)) + raw

    return write


def _struct_writer(node: TypeNode, ctx: str) -> Writer:
    fields = [(n, make_writer(c, ctx)) for n, c in zip(node.names, node.children, strict=True)]
    kind = node.kind
    offset = 0 if node.legacy_row else 2
    mask_bytes = (len(fields) + offset + 7) // 8

    def write(out: bytearray, v: dict) -> None:
        if kind == "tuple":
            for name, w in fields:
                w(out, v[name])
        elif kind == "pojo":
            if v is None:
                out.append(1)
                return
            out.append(2)
            for name, w in fields:
                x = v.get(name)
                out.append(1 if x is None else 0)
                if x is not None:
                    w(out, x)
        else:
            mask = 0
            top = 8 * mask_bytes - 1 - offset
            for i, (name, _) in enumerate(fields):
                if v.get(name) is None:
                    mask |= 1 << (top - i)
            out += mask.to_bytes(mask_bytes, "big")
            for name, w in fields:
                x = v.get(name)
                if x is not None:
                    w(out, x)
    return write


_ARROW_KINDS = [
    (pa.types.is_int64, "long"), (pa.types.is_int32, "int"), (pa.types.is_int16, "short"), (pa.types.is_int8, "byte"),
    (pa.types.is_float64, "double"), (pa.types.is_float32, "float"), (pa.types.is_boolean, "bool"),
    (lambda t: pa.types.is_string(t) or pa.types.is_large_string(t), "string"),
    (lambda t: pa.types.is_binary(t) or pa.types.is_large_binary(t), "bytes"),
    (pa.types.is_decimal, "bigdec"), (pa.types.is_date32, "localdate"), (pa.types.is_time, "localtime"),
    (lambda t: pa.types.is_timestamp(t) and t.tz is None, "localdatetime"),
    (lambda t: pa.types.is_timestamp(t) and t.tz is not None, "instant"),
]


def _ns_type(t: pa.DataType) -> pa.DataType:
    """t with times and timestamps in nanoseconds (what the writers take), nested types included."""
    if pa.types.is_timestamp(t):
        return pa.timestamp("ns", tz=t.tz)
    if pa.types.is_time(t):
        return pa.time64("ns")
    if pa.types.is_struct(t):
        return pa.struct([f.with_type(_ns_type(f.type)) for f in t])
    if pa.types.is_map(t):
        return pa.map_(_ns_type(t.key_type), _ns_type(t.item_type))
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return pa.list_(_ns_type(t.value_type))
    return t


def _int_type(t: pa.DataType) -> pa.DataType:
    if pa.types.is_timestamp(t) or pa.types.is_time64(t):
        return pa.int64()
    if pa.types.is_date32(t):
        return pa.int32()
    if pa.types.is_struct(t):
        return pa.struct([f.with_type(_int_type(f.type)) for f in t])
    if pa.types.is_map(t):
        return pa.map_(_int_type(t.key_type), _int_type(t.item_type))
    if pa.types.is_list(t):
        return pa.list_(_int_type(t.value_type))
    return t


def plain_values(column: pa.ChunkedArray | pa.Array) -> list[Any]:
    """Python values of a column for the writers: dates as epoch days, times and timestamps as nanoseconds (exact)."""
    t = column.type
    ns = _ns_type(t)
    if ns != t:
        column = column.cast(ns)
    it = _int_type(ns)
    if it != ns:
        column = column.cast(it)
    return column.to_pylist()


def type_for_arrow(t: pa.DataType, ctx: str) -> TypeNode:
    """The Flink serializer of an Arrow type: Long, Integer, ..., String, byte[], BigDecimal (decimal), LocalDate (date32),
    LocalTime (time), LocalDateTime (timestamp), Instant (timestamp with a time zone), Row (struct), List, Map."""
    for pred, kind in _ARROW_KINDS:
        if pred(t):
            return TypeNode(kind, _CLS[kind])
    if pa.types.is_struct(t):
        return TypeNode("row", _COMP_CLS["row"], tuple(type_for_arrow(f.type, ctx) for f in t), tuple(f.name for f in t))
    if pa.types.is_map(t):
        return TypeNode("map", _COMP_CLS["map"], (type_for_arrow(t.key_type, ctx), type_for_arrow(t.item_type, ctx)))
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return TypeNode("list", _COMP_CLS["list"], (type_for_arrow(t.value_type, ctx),))
    raise UnsupportedSerializerError(f"{ctx}: Arrow type {t} has no Flink serializer here")


def _crc32c_table() -> list[int]:
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC_TABLE = _crc32c_table()


def _masked_crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    t = _CRC_TABLE
    for b in data:
        crc = t[(crc ^ b) & 0xFF] ^ (crc >> 8)
    crc ^= 0xFFFFFFFF
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def snappy_frame(data: bytes) -> bytes:
    """A xerial snappy framed stream (identifier + compressed chunks of <= 64 KiB with masked CRC32C)."""
    out = bytearray(b"\xff\x06\x00\x00sNaPpY")
    for i in range(0, len(data), 65536):
        chunk = data[i : i + 65536]
        comp = pa.compress(chunk, codec="snappy", asbytes=True)
        body = struct.pack("<I", _masked_crc32c(chunk)) + comp
        out += bytes([0]) + len(body).to_bytes(3, "little") + body
    return bytes(out)


