"""Parse Flink serializer snapshots (the keyed/operator state file headers) into a type tree with Arrow types.

Sources: `KeyedBackendSerializationProxy`, `StateMetaInfoSnapshotReadersWriters`,
`TypeSerializerSnapshot.writeVersionedSnapshot`, `CompositeTypeSerializerSnapshot`,
`NestedSerializersSnapshotDelegate`, `PojoSerializerSnapshotData`, `LinkedOptionalMapSerializer`, and the table
runtime's (`RowDataSerializer`, `StringDataSerializer`, `TimestampDataSerializer`, `DecimalDataSerializer`,
`BinaryRowDataSerializer`, `ArrayDataSerializer`: their `LogicalType`s are Java-serialized, walked by `javaser`).
A snapshot class this module does not know has no length prefix: where the header's end is known (the first key
group's offset, a RocksDB metadata stream, an operator state's first offset), its extent is found as the one
continuation that parses the rest of the header exactly to that end, and it is kept as its bytes ("unknown");
otherwise it is an UnsupportedSerializerError naming the operator, state and class.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

import pyarrow as pa

from flinkstate.flink._io import DataReader
from flinkstate.flink.errors import (
    CorruptFileError,
    UnsupportedFlinkFormatError,
    UnsupportedSerializerError,
)
from flinkstate.flink.serde.javaser import read_stream
from flinkstate.flink.serde.sqltypes import SqlType, sql_type

__all__ = [
    "StateMeta",
    "UnknownSnapshotError",
    "opaque_part",
    "whole_bytes",
    "TypeNode",
    "arrow_type",
    "read_keyed_header",
    "read_operator_header",
    "read_state_meta",
    "read_type",
]

_T = TypeVar("_T")
_COMPOSITE_MAGIC = 911108
_NESTED_MAGIC = 1333245
_OPTIONAL_MAP_HEADER = 0x4F2C69A3D70
_BASE = "org.apache.flink.api.common.typeutils.base."
_SIMPLE = {
    # the table runtime's window namespaces (group-window aggregates): TimeWindow i64 start, i64 end; CountWindow i64 id.
    # Listed first: a kind written back without its class (encode._CLS) takes the DataStream/basic class listed later.
    "org.apache.flink.table.runtime.operators.window.TimeWindow$Serializer$TimeWindowSerializerSnapshot": "timewindow",
    "org.apache.flink.table.runtime.operators.window.CountWindow$Serializer$CountWindowSerializerSnapshot": "long",
    _BASE + "LongSerializer$LongSerializerSnapshot": "long",
    _BASE + "IntSerializer$IntSerializerSnapshot": "int",
    _BASE + "ShortSerializer$ShortSerializerSnapshot": "short",
    _BASE + "ByteSerializer$ByteSerializerSnapshot": "byte",
    _BASE + "DoubleSerializer$DoubleSerializerSnapshot": "double",
    _BASE + "FloatSerializer$FloatSerializerSnapshot": "float",
    _BASE + "BooleanSerializer$BooleanSerializerSnapshot": "bool",
    _BASE + "CharSerializer$CharSerializerSnapshot": "char",
    _BASE + "StringSerializer$StringSerializerSnapshot": "string",
    # PyFlink's map state user keys (flink-python): serialized as byte[] is (i32 length + bytes); listed before byte[] so that
    # writers mapping a kind back to its class (encode._CLS) keep BytePrimitiveArraySerializer
    "org.apache.flink.streaming.api.utils.ByteArrayWrapperSerializer$ByteArrayWrapperSerializerSnapshot": "bytes",
    _BASE + "array.BytePrimitiveArraySerializer$BytePrimitiveArraySerializerSnapshot": "bytes",
    "org.apache.flink.runtime.state.VoidNamespaceSerializer$VoidNamespaceSerializerSnapshot": "void",
    _BASE + "BigDecSerializer$BigDecSerializerSnapshot": "bigdec",
    _BASE + "BigIntSerializer$BigIntSerializerSnapshot": "bigint",
    _BASE + "LocalDateSerializer$LocalDateSerializerSnapshot": "localdate",
    _BASE + "LocalTimeSerializer$LocalTimeSerializerSnapshot": "localtime",
    _BASE + "LocalDateTimeSerializer$LocalDateTimeSerializerSnapshot": "localdatetime",
    _BASE + "InstantSerializer$InstantSerializerSnapshot": "instant",
    _BASE + "SqlDateSerializer$SqlDateSerializerSnapshot": "sqldate",
    _BASE + "SqlTimeSerializer$SqlTimeSerializerSnapshot": "sqltime",
    _BASE + "SqlTimestampSerializer$SqlTimestampSerializerSnapshot": "sqltimestamp",
    # TimeWindow$Serializer: i64 start, i64 end (the namespace of window operators' state and timers)
    "org.apache.flink.streaming.api.windowing.windows.TimeWindow$Serializer$TimeWindowSerializerSnapshot": "timewindow",
}
# Primitive array serializers (i32 length, then the elements back to back): snapshot class -> element kind.
_PRIMITIVE_ARRAYS = {
    f"{_BASE}array.{name}PrimitiveArraySerializer${name}PrimitiveArraySerializerSnapshot": kind
    for name, kind in (("Boolean", "bool"), ("Char", "char"), ("Short", "short"), ("Int", "int"), ("Long", "long"),
                       ("Float", "float"), ("Double", "double"))
}
# StringArraySerializer: i32 length, then each element as StringValue.writeString (null-capable).
_STRING_ARRAY = _BASE + "array.StringArraySerializer$StringArraySerializerSnapshot"
_ENUM = _BASE + "EnumSerializer$EnumSerializerSnapshot"
# Serializers whose value bytes this module cannot decode but whose snapshots it can skip: read as "opaque"
# (raw bytes where the layout frames each value). Kryo (KryoSerializerSnapshotData): UTF type class + three
# LinkedOptionalMaps (registrations, default serializers, default serializer classes); Avro v2: UTF type + UTF schema.
_KRYO = ("org.apache.flink.api.java.typeutils.runtime.kryo.KryoSerializerSnapshot",
         "org.apache.flink.api.java.typeutils.runtime.kryo5.KryoSerializerSnapshot")
_AVRO = "org.apache.flink.formats.avro.typeutils.AvroSerializerSnapshot"
# Composite snapshots: class -> (kind, outer payload reader name).
_COMPOSITE = {
    _BASE + "ListSerializerSnapshot": ("list", None),
    _BASE + "MapSerializerSnapshot": ("map", None),
    # GenericArraySerializer: i32 length, then per element bool nonNull + value; outer payload: component class
    _BASE + "GenericArraySerializerSnapshot": ("garray", "utf"),
    "org.apache.flink.api.java.typeutils.runtime.RowSerializer$RowSerializerSnapshot": ("row", "row"),
    "org.apache.flink.api.java.typeutils.runtime.TupleSerializerSnapshot": ("tuple", "utf"),
    "org.apache.flink.runtime.state.ttl.TtlStateFactory$TtlSerializerSnapshot": ("ttl", None),
    "org.apache.flink.streaming.api.operators.TimerSerializerSnapshot": ("timer", None),
    # Flink 2.x: SetSerializer (i32 n, then per element a null flag and the element) and NullableSerializer (a null flag,
    # then the value, or nullPaddingLength bytes for a null; outer payload: i32 nullPaddingLength), which POJO fields and
    # states declared List<T>, Map<K, V> or Set<T> get (NullableListTypeInfo & co.)
    _BASE + "SetSerializerSnapshot": ("set", None),
    "org.apache.flink.api.java.typeutils.runtime.NullableSerializer$NullableSerializerSnapshot": ("nullable", "int"),
}
_POJO = "org.apache.flink.api.java.typeutils.runtime.PojoSerializerSnapshot"
# The table runtime's serializers (SQL and Table API jobs: RowData keys and values, InternalTypeInfo).
_TR = "org.apache.flink.table.runtime.typeutils."
TABLE_ROW = _TR + "RowDataSerializer$RowDataSerializerSnapshot"  # i32 n, n Java-serialized LogicalTypes, nested
_TABLE_BINARY_ROW = _TR + "BinaryRowDataSerializer$BinaryRowDataSerializerSnapshot"  # i32 number of fields
_TABLE_STRING = _TR + "StringDataSerializer$StringDataSerializerSnapshot"  # simple
_TABLE_TIMESTAMP = _TR + "TimestampDataSerializer$TimestampDataSerializerSnapshot"  # i32 precision
_TABLE_DECIMAL = _TR + "DecimalDataSerializer$DecimalSerializerSnapshot"  # i32 precision, i32 scale
_TABLE_ARRAY = _TR + "ArrayDataSerializer$ArrayDataSerializerSnapshot"  # element LogicalType, element serializer (Java)
# Serialized width in bytes of fixed-length kinds (Flink's TypeSerializer.getLength()).
FIXED_WIDTH = {"long": 8, "int": 4, "short": 2, "byte": 1, "double": 8, "float": 4, "bool": 1, "char": 2, "void": 1,
               "localdate": 6, "localtime": 7, "localdatetime": 13, "instant": 12, "sqldate": 8, "sqltime": 8, "sqltimestamp": 12,
               "enum": 4, "timewindow": 16}


@dataclass(frozen=True)
class TypeNode:
    """One serializer: its kind, snapshot class and nested serializers (fields for row/tuple/pojo)."""

    kind: str
    cls: str
    children: tuple[TypeNode, ...] = ()
    names: tuple[str, ...] = ()
    legacy_row: bool = False
    payload: bytes = b""  # an opaque (Kryo/Avro) snapshot's payload, kept to write it back unchanged
    logical: tuple[str, ...] = ()  # table runtime: the SQL types of a RowData's fields (or an array's element)
    snapshot: bytes = b""  # the whole versioned snapshot as read (table runtime, unknown classes, and every state's top-level serializer): written back verbatim
    params: tuple[int, ...] = ()  # precision (and scale) of table-runtime timestamps and decimals
    sql: tuple[SqlType, ...] = ()  # table runtime: the SQL types of a RowData's fields (or an array's element)

    @property
    def fixed_width(self) -> int:
        """The serialized width when fixed, else -1 (Flink's getLength)."""
        if self.kind in FIXED_WIDTH:
            return FIXED_WIDTH[self.kind]
        if self.kind == "tuple" and self.children and all(c.fixed_width >= 0 for c in self.children):
            return sum(c.fixed_width for c in self.children)
        if self.kind == "timestampdata":
            return 8 if self.params[0] <= 3 else 12
        if self.kind == "decimaldata" and self.params[0] <= 18:
            return 8
        return -1


@dataclass(frozen=True)
class StateMeta:
    """A StateMetaInfoSnapshot: name, backend state type, options and serializers by key."""

    name: str
    backend_type: str
    options: dict[str, str]
    serializers: dict[str, TypeNode] = field(default_factory=dict)

    @property
    def keyed_type(self) -> str:
        """VALUE, LIST, MAP, REDUCING, AGGREGATING (keyed state) or the backend type otherwise."""
        return self.options.get("KEYED_STATE_TYPE", self.backend_type)


_BACKEND_TYPES = ("KEY_VALUE", "OPERATOR", "BROADCAST", "PRIORITY_QUEUE")


class UnknownSnapshotError(UnsupportedSerializerError):
    """A serializer snapshot class whose payload this module cannot walk: where it starts (for the resync)."""

    def __init__(self, message: str, start: int, payload: int) -> None:
        super().__init__(message)
        self.start, self.payload = start, payload


def read_type(r: DataReader, ctx: str) -> TypeNode:
    """A `writeVersionedSnapshot` (class name, version, payload) as a TypeNode; ctx names operator and state."""
    start = r.pos
    cls = r.utf()
    version = r.i32()
    skips = r.skips
    if skips and start in skips:  # an unknown class whose extent the resync found
        r.pos = skips[start]
        return TypeNode("unknown", cls, snapshot=bytes(r.buf[start : r.pos]))
    node = _table_type(r, ctx, cls, version)
    if node is not None:
        return dataclasses.replace(node, snapshot=bytes(r.buf[start : r.pos]))
    if cls in _SIMPLE:
        return TypeNode(_SIMPLE[cls], cls)
    if cls in _PRIMITIVE_ARRAYS:
        return TypeNode("parray", cls, (TypeNode(_PRIMITIVE_ARRAYS[cls], cls),))
    if cls == _STRING_ARRAY:
        return TypeNode("sarray", cls, (TypeNode("string", cls),))
    if cls == _ENUM:
        return _enum(r, ctx, version)
    if cls in _KRYO and version == 2:
        start = r.pos
        type_class = r.utf()
        for _ in range(3):
            _optional_map(r, ctx)
        return TypeNode("opaque", cls, (), (type_class,), payload=bytes(r.buf[start : r.pos]))
    if cls == _AVRO and version == 2:
        start = r.pos
        type_class = r.utf()
        r.utf()  # the Avro schema (JSON)
        return TypeNode("opaque", cls, (), (type_class,), payload=bytes(r.buf[start : r.pos]))
    if cls in _COMPOSITE:
        kind, outer = _COMPOSITE[cls]
        return _composite(r, ctx, cls, kind, outer)
    if cls == _POJO:
        return _pojo(r, ctx, cls)
    raise UnknownSnapshotError(f"{ctx}: serializer snapshot {cls} (version {version}) is not supported; "
                               "Kryo, Avro and custom serializers cannot be decoded", start, r.pos)


def _table_type(r: DataReader, ctx: str, cls: str, version: int) -> TypeNode | None:
    """A table-runtime serializer snapshot (None: not one); `TypeNode.params`/`payload` keep what it configures."""
    if cls == _TABLE_STRING:
        return TypeNode("stringdata", cls)
    if cls == _TABLE_TIMESTAMP:
        return TypeNode("timestampdata", cls, params=(r.i32(),))
    if cls == _TABLE_DECIMAL:
        return TypeNode("decimaldata", cls, params=(r.i32(), r.i32()))
    if cls == _TABLE_BINARY_ROW:
        return TypeNode("rowdata", cls, params=(r.i32(),))
    if cls == TABLE_ROW:
        if version < 3:
            raise UnsupportedFlinkFormatError(f"{r.where}: {ctx}: RowData serializer snapshot version {version} is not supported (3 is)")
        types = [_java_object(r, ctx) for _ in range(r.i32())]
        children = _nested(r, ctx)
        names = tuple(f"f{i}" for i in range(len(children)))
        sql = tuple(sql_type(t, f"{r.where}: {ctx}") for t in types)
        return TypeNode("rowdata", cls, children, names, logical=tuple(str(t) for t in sql), sql=sql)
    if cls == _TABLE_ARRAY:
        element = _java_object(r, ctx)
        _java_object(r, ctx)  # the element serializer object
        sql = (sql_type(element, f"{r.where}: {ctx}"),)
        return TypeNode("arraydata", cls, logical=(str(sql[0]),), sql=sql)
    return None


def _java_object(r: DataReader, ctx: str) -> object:
    """One `InstantiationUtil.serializeObject` stream (walked as data, never instantiated)."""
    value, r.pos = read_stream(r.buf, r.pos, f"{r.where}: {ctx}")
    return value


def _composite(r: DataReader, ctx: str, cls: str, kind: str, outer: str | None) -> TypeNode:
    legacy = False
    if r.i32() != _COMPOSITE_MAGIC:
        raise CorruptFileError(f"{r.where}: {ctx}: bad composite serializer snapshot magic in {cls}")
    outer_version = r.i32()
    if outer == "row":  # RowSerializerSnapshot: <3 no RowKind, 3 RowKind, >=4 a supportsRowKind flag
        legacy = outer_version < 3 or (outer_version > 3 and not r.bool())
    elif outer == "utf":
        outer_class = r.utf()
    elif outer == "int":
        params: tuple[int, ...] = (r.i32(),)
    children = _nested(r, ctx)
    names: tuple[str, ...] = ()
    if kind in ("row", "tuple"):
        names = tuple(f"f{i}" for i in range(len(children)))
    elif kind == "garray":
        names = (outer_class,)  # the component class
    elif kind == "nullable":
        return TypeNode(kind, cls, children, params=params)  # params: the null padding's length
    return TypeNode(kind, cls, children, names, legacy)


def _enum(r: DataReader, ctx: str, version: int) -> TypeNode:
    """EnumSerializerSnapshot (v3): UTF enum class, i32 n, n x UTF constant name (in ordinal order); values are i32 ordinals."""
    if version < 3:
        raise UnsupportedFlinkFormatError(f"{r.where}: {ctx}: enum serializer snapshot version {version} is not supported (3 is)")
    enum_class = r.utf()
    constants = tuple(r.utf() for _ in range(r.i32()))
    return TypeNode("enum", enum_class, (), constants)


def _nested(r: DataReader, ctx: str) -> tuple[TypeNode, ...]:
    if r.i32() != _NESTED_MAGIC:
        raise CorruptFileError(f"{r.where}: {ctx}: bad nested serializers snapshot magic")
    nested_version = r.i32()
    if nested_version != 1:
        raise UnsupportedFlinkFormatError(f"{r.where}: {ctx}: nested serializer snapshot version {nested_version}")
    return tuple(read_type(r, ctx) for _ in range(r.i32()))


def _pojo(r: DataReader, ctx: str, cls: str) -> TypeNode:
    pojo_class = r.utf()
    names: list[str] = []
    fields: list[TypeNode] = []
    for key, value in _optional_map(r, ctx):
        if value is None:
            raise UnsupportedSerializerError(f"{ctx}: POJO {pojo_class} field {key} has no serializer snapshot")
        names.append(key)
        fields.append(read_type(DataReader(value, where=r.where), ctx))
    for _ in range(2):  # registered and non-registered subclasses: their values are not decoded
        for key, _value in _optional_map(r, ctx):
            del key
    return TypeNode("pojo", pojo_class, tuple(fields), tuple(names))


def _optional_map(r: DataReader, ctx: str) -> list[tuple[str, bytes | None]]:
    if r.i64() != _OPTIONAL_MAP_HEADER:
        raise CorruptFileError(f"{r.where}: {ctx}: bad POJO snapshot map header")
    out = []
    for _ in range(r.i32()):
        name = r.utf()
        if r.bool():
            r.sized()  # the key (declaring class + field name, or a class name)
        value = r.sized() if r.bool() else None
        out.append((name, value))
    return out


def read_state_meta(r: DataReader, ctx: str) -> StateMeta:
    """One StateMetaInfoSnapshot (meta version 7 layout)."""
    name = r.utf()
    bt = r.i32()
    if not 0 <= bt < len(_BACKEND_TYPES):
        raise CorruptFileError(f"{r.where}: {ctx}: state {name!r} has unknown backend state type {bt}")
    options = {}
    for _ in range(r.i32()):
        k = r.utf()
        options[k] = r.utf()
    sers = {}
    for _ in range(r.i32()):
        k = r.utf()
        if r.i32() != 2:
            raise UnsupportedFlinkFormatError(f"{r.where}: {ctx}: state {name!r}: serializer snapshot proxy version is not 2")
        sers[k] = _with_bytes(r, f"{ctx}, state {name!r} ({k})")
    return StateMeta(name, _BACKEND_TYPES[bt], options, sers)


def _with_bytes(r: DataReader, ctx: str) -> TypeNode:
    """read_type of a state's (or the key's) serializer, with its versioned snapshot's bytes as read (`TypeNode.snapshot`):
    an export writes an unchanged state's serializer back with exactly these bytes."""
    start = r.pos
    node = read_type(r, ctx)
    return node if node.snapshot else dataclasses.replace(node, snapshot=bytes(r.buf[start : r.pos]))


# a resync tries this many continuations at most before it gives up
_RESYNC_BUDGET = 50_000


def _resynced(r: DataReader, end: int | None, parse: Callable[[DataReader], _T]) -> _T:
    """parse(r); where it meets a serializer snapshot class it does not know and the header ends at `end`, the class's
    extent is the smallest one with which the rest of the header parses to exactly `end` (each unknown class kept as
    its bytes). Without `end`, or when no continuation fits, the UnsupportedSerializerError naming the class stands."""
    origin = r.pos

    def attempt(skips: dict[int, int]) -> tuple[_T, int]:
        rr = DataReader(r.buf, origin, r.where)
        rr.skips = skips
        return parse(rr), rr.pos

    try:
        out, r.pos = attempt({})
        return out
    except UnknownSnapshotError as first:
        if end is None:
            raise
        budget = [_RESYNC_BUDGET]
        found = _search(attempt, {}, first, end, budget)
        if found is None:
            raise UnsupportedSerializerError(f"{first}; its extent could not be told from the rest of the header "
                                             f"({r.where}, up to offset {end})") from first
        out, r.pos = found
        return out


def _search(attempt: Callable[[dict[int, int]], tuple[_T, int]], skips: dict[int, int], u: UnknownSnapshotError, end: int,
            budget: list[int]) -> tuple[_T, int] | None:
    for q in range(u.payload, end + 1):
        if budget[0] <= 0:
            return None
        budget[0] -= 1
        trial = {**skips, u.start: q}
        try:
            out, pos = attempt(trial)
        except UnknownSnapshotError as nxt:
            if nxt.start > u.start and nxt.start not in trial:
                found = _search(attempt, trial, nxt, end, budget)
                if found is not None:
                    return found
            continue
        except (CorruptFileError, UnsupportedFlinkFormatError, UnsupportedSerializerError, UnicodeDecodeError, ValueError,
                IndexError, struct.error):
            continue
        if pos == end:
            return out, pos
    return None


def read_keyed_header(r: DataReader, ctx: str, end: int | None = None) -> tuple[bool, TypeNode, list[StateMeta]]:
    """KeyedBackendSerializationProxy: (snappy compressed, key type, states); `end`: where the header ends, if known."""
    return _resynced(r, end, lambda rr: _keyed_header(rr, ctx))


def _keyed_header(r: DataReader, ctx: str) -> tuple[bool, TypeNode, list[StateMeta]]:
    version = r.i32()
    if version not in (5, 6):
        raise UnsupportedFlinkFormatError(f"{r.where}: {ctx}: keyed state header version {version} is not supported (5, 6 are)")
    compressed = r.bool()
    if r.i32() != 2:
        raise UnsupportedFlinkFormatError(f"{r.where}: {ctx}: key serializer snapshot proxy version is not 2")
    key_type = _with_bytes(r, f"{ctx} (key serializer)")
    n = r.i16()
    return compressed, key_type, [read_state_meta(r, ctx) for _ in range(n)]


def read_operator_header(r: DataReader, ctx: str, end: int | None = None) -> tuple[bool, list[StateMeta], list[StateMeta]]:
    """OperatorBackendSerializationProxy: (snappy compressed, operator states, broadcast states); `end` as above."""
    return _resynced(r, end, lambda rr: _operator_header(rr, ctx))


def _operator_header(r: DataReader, ctx: str) -> tuple[bool, list[StateMeta], list[StateMeta]]:
    version = r.i32()
    if version not in (5, 6):
        raise UnsupportedFlinkFormatError(f"{r.where}: {ctx}: operator state header version {version} is not supported (5, 6 are)")
    compressed = r.bool() if version >= 6 else False
    ops = [read_state_meta(r, ctx) for _ in range(r.i16())]
    bcast = [read_state_meta(r, ctx) for _ in range(r.i16())]
    return compressed, ops, bcast


def opaque_part(node: TypeNode | None) -> TypeNode | None:
    """The first Kryo/Avro/unknown (opaque) serializer in this serializer tree, or None."""
    if node is None:
        return None
    if node.kind in ("opaque", "unknown"):
        return node
    if node.kind in ("rowdata", "arraydata"):
        return None  # read as a whole (BinaryRowData/BinaryArrayData bytes): what its fields are serialized with does not matter
    for c in node.children:
        found = opaque_part(c)
        if found is not None:
            return found
    return None


_ARROW = {
    "long": pa.int64(), "int": pa.int32(), "short": pa.int16(), "byte": pa.int8(), "double": pa.float64(),
    "float": pa.float32(), "bool": pa.bool_(), "char": pa.string(), "string": pa.string(), "bytes": pa.binary(),
    # BigDecimal/BigInteger have no fixed precision or scale: their exact decimal text (BigDecimal.toString) keeps
    # unscaled value and scale, so equals/hashCode (key groups of such keys) survive a round trip.
    "bigdec": pa.string(), "bigint": pa.string(),
    "localdate": pa.date32(), "localtime": pa.time64("ns"), "localdatetime": pa.timestamp("ns"),
    "instant": pa.timestamp("ns", tz="UTC"),
    # java.sql.Date/Time hold epoch milliseconds; Timestamp milliseconds plus nanoseconds
    "sqldate": pa.timestamp("ms"), "sqltime": pa.timestamp("ms"), "sqltimestamp": pa.timestamp("ns"),
}


_WHOLE = frozenset({"row", "tuple", "pojo", "garray", "list", "map", "set", "nullable"})


def whole_bytes(node: TypeNode) -> bool:
    """A composite serializer with an opaque part (a Kryo class without a schema, Avro, an unknown class) inside: its
    values are read, where a record frames them, and written back as their serialized bytes whole."""
    return node.kind in _WHOLE and opaque_part(node) is not None


def arrow_type(node: TypeNode) -> pa.DataType:
    """The Arrow type values of this serializer decode to (TTL wrappers are unwrapped)."""
    if whole_bytes(node):
        return pa.binary()  # the value's bytes (a POJO with a field of a Kryo class without a schema, say)
    if node.kind in _ARROW:
        return _ARROW[node.kind]
    if node.kind in ("row", "tuple", "pojo"):
        return pa.struct([pa.field(n, arrow_type(c)) for n, c in zip(node.names, node.children, strict=True)])
    if node.kind in ("list", "parray", "sarray", "garray", "set"):
        return pa.list_(arrow_type(node.children[0]))
    if node.kind == "nullable":
        return arrow_type(node.children[0])
    if node.kind == "enum":
        return pa.string()  # the constant's name
    if node.kind in ("opaque", "unknown", "rowdata", "arraydata"):
        return pa.binary()  # Kryo/Avro/unknown values as their raw serialized bytes; table-runtime rows as BinaryRowData bytes
    if node.kind == "stringdata":
        return pa.string()
    if node.kind == "timestampdata":
        return pa.timestamp("ms" if node.params[0] <= 3 else "ns")
    if node.kind == "decimaldata":
        return pa.decimal128(node.params[0], node.params[1]) if node.params[0] <= 38 else pa.string()
    if node.kind == "timewindow":
        return pa.struct([pa.field("start", pa.int64()), pa.field("end", pa.int64())])
    if node.kind == "map":
        return pa.map_(arrow_type(node.children[0]), arrow_type(node.children[1]))
    if node.kind == "ttl":
        return arrow_type(node.children[1])
    if node.kind == "kryo":  # a Kryo serializer bound to a read (serde.kryo): the type of the values it holds (its shape)
        return arrow_type(node.children[0]) if node.children else pa.binary()
    if node.kind.startswith("j."):  # the shape of Kryo values (serde.kryo.shapes): the Java types they hold
        return _shape_arrow(node)
    raise UnsupportedSerializerError(f"serializer {node.cls} ({node.kind}) has no Arrow type")


# The column types of Kryo values' Java types (serde.kryo.shapes: kinds "j.<kind>", cls the Java class).
_J_ARROW = {
    "long": pa.int64(), "int": pa.int32(), "short": pa.int16(), "byte": pa.int8(), "float": pa.float32(), "double": pa.float64(),
    "bool": pa.bool_(), "char": pa.string(), "string": pa.string(), "void": pa.null(), "null": pa.null(), "bigint": pa.string(),
    "bigdec": pa.string(), "date": pa.timestamp("ms"), "sqldate": pa.timestamp("ms"), "sqltime": pa.timestamp("ms"),
    "sqltimestamp": pa.timestamp("ns"), "localdate": pa.date32(), "localtime": pa.time64("ns"), "localdatetime": pa.timestamp("ns"),
    "instant": pa.timestamp("ns", tz="UTC"), "duration": pa.duration("ns"), "uuid": pa.string(),
}


def _shape_arrow(shape: TypeNode) -> pa.DataType:
    kind = shape.kind[2:]
    if kind in _J_ARROW:
        return _J_ARROW[kind]
    if kind == "enum":  # constant names, or ordinals where the constants are unknown
        return pa.int32() if shape.names == ("#ordinal",) else pa.string()
    if kind in ("list", "set", "array"):
        return pa.list_(arrow_type(shape.children[0]))
    if kind == "map":
        return pa.map_(arrow_type(shape.children[0]), arrow_type(shape.children[1]))
    if kind == "object":
        return pa.struct([pa.field(n, arrow_type(c)) for n, c in zip(shape.names, shape.children, strict=True)])
    raise UnsupportedSerializerError(f"Kryo value shape {shape.kind} ({shape.cls}) has no Arrow type")
