"""Read one `writeVersionedSnapshot` (class name, version, payload) into a TypeNode, for every class `registry` lists.

Each payload is read as that class's `readSnapshot` reads it (Flink 2.3 and 1.20, checked against their bytecode):
`SimpleTypeSerializerSnapshot` (version 3: nothing; 2: a class name), `GenericTypeSerializerSnapshot` (the type class),
`CompositeTypeSerializerSnapshot` (i32 911108, i32 outer version, the class's outer payload, then
`NestedSerializersSnapshotDelegate`: i32 1333245, i32 1, i32 n, n versioned snapshots), and the classes that read
themselves (`_DIRECT`). A snapshot that does not parse (an unknown class, or bytes that do not fit its class) is an
UnknownSnapshotError carrying where it starts: `serializers` then looks for its extent in the rest of the header.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Callable

from flinkstate.flink._io import DataReader
from flinkstate.flink.errors import (
    CorruptFileError,
    UnsupportedFlinkFormatError,
    UnsupportedSerializerError,
)
from flinkstate.flink.serde._node import TypeNode
from flinkstate.flink.serde.javaser import read_stream
from flinkstate.flink.serde.registry import SNAPSHOTS, Snapshot
from flinkstate.flink.serde.sqltypes import sql_type

__all__ = ["COMPOSITE_MAGIC", "NESTED_MAGIC", "OPTIONAL_MAP_HEADER", "PARSE_ERRORS", "UnknownSnapshotError", "read_type"]

COMPOSITE_MAGIC = 911108
NESTED_MAGIC = 1333245
OPTIONAL_MAP_HEADER = 0x4F2C69A3D70
PARSE_ERRORS = (CorruptFileError, UnsupportedFlinkFormatError, UnsupportedSerializerError, UnicodeDecodeError, ValueError,
                IndexError, struct.error)

# Kinds whose snapshots the writer (`encode.write_type`) rebuilds from the node; every other node keeps the snapshot it
# was read from, so a write gives it back byte for byte.
_REBUILT = frozenset({"long", "int", "short", "byte", "double", "float", "bool", "char", "string", "bytes", "void", "bigdec",
                      "bigint", "localdate", "localtime", "localdatetime", "instant", "sqldate", "sqltime", "sqltimestamp",
                      "timewindow", "parray", "sarray", "enum", "pojo", "list", "map", "row", "tuple", "ttl", "timer", "garray"})
_PRIMITIVE_ELEMENT = {"Boolean": "bool", "Char": "char", "Short": "short", "Int": "int", "Long": "long", "Float": "float",
                      "Double": "double"}


class UnknownSnapshotError(UnsupportedSerializerError):
    """A serializer snapshot this module cannot walk (an unknown class, or bytes that do not fit its class): where it
    starts and where its payload search begins (for the resync)."""

    def __init__(self, message: str, start: int, payload: int) -> None:
        super().__init__(message)
        self.start, self.payload = start, payload


def read_type(r: DataReader, ctx: str) -> TypeNode:
    """A `writeVersionedSnapshot` (class name, version, payload) as a TypeNode; ctx names operator and state."""
    start = r.pos
    skips = r.skips
    if skips and start in skips:  # a snapshot whose extent the resync found: kept as its bytes
        end, why = skips[start]
        cls = _class_name(r)
        r.pos = end
        return TypeNode("unknown", cls, snapshot=bytes(r.buf[start:end]), error=why)
    try:
        cls = r.utf()
        version = r.i32()
    except CorruptFileError as e:
        raise UnknownSnapshotError(f"{ctx}: a serializer snapshot's class name does not read ({e})", start, start + 1) from e
    entry = SNAPSHOTS.get(cls)
    if entry is None:
        raise UnknownSnapshotError(f"{ctx}: serializer snapshot {cls} (version {version}) is not one flinkstate knows "
                                   "(a user-defined serializer?); its values cannot be decoded", start, r.pos)
    payload = r.pos
    try:
        node = _read(r, ctx, entry, version)
    except UnknownSnapshotError:
        raise  # a nested snapshot: its own extent is searched
    except PARSE_ERRORS as e:
        raise UnknownSnapshotError(f"{ctx}: serializer snapshot {cls} (version {version}) does not parse: {e}", start, payload) from e
    if entry.alias or entry.kind not in _REBUILT:
        node = dataclasses.replace(node, snapshot=bytes(r.buf[start : r.pos]))
    return node


def _class_name(r: DataReader) -> str:
    """The class name at the cursor, or a placeholder when even that does not read (the cursor is moved by the caller)."""
    try:
        return r.utf()
    except CorruptFileError:
        return "<unreadable serializer class name>"


def _read(r: DataReader, ctx: str, e: Snapshot, version: int) -> TypeNode:
    read = e.read
    if read == "simple":
        if version == 2:
            r.utf()  # SimpleTypeSerializerSnapshot v2: the serializer class name, read and dropped
        elif version != 3:
            raise UnsupportedFlinkFormatError(f"{r.where}: {ctx}: {e.cls} snapshot version {version} (2 and 3 are read)")
        return _simple(e)
    if read == "generic":
        return TypeNode(e.kind, e.cls, names=(r.utf(),))  # the type class
    if read.startswith("composite"):
        return _composite(r, ctx, e, read.partition(":")[2])
    return _DIRECT[read](r, ctx, e, version)


def _simple(e: Snapshot) -> TypeNode:
    if e.kind == "parray":
        element = e.cls.rsplit(".", 1)[-1].split("PrimitiveArraySerializer")[0]
        return TypeNode("parray", e.cls, (TypeNode(_PRIMITIVE_ELEMENT[element], e.cls),))
    if e.kind == "sarray":
        return TypeNode("sarray", e.cls, (TypeNode("string", e.cls),))
    return TypeNode(e.kind, e.cls)


def _bool_after(threshold: int) -> Callable[[DataReader, int], tuple[int, ...]]:
    """An outer payload that is one boolean from outer version `threshold` + 1 on; version `threshold` implies true,
    older versions false (RowSerializer's supportsRowKind, LinkedListSerializer's hasNullMask...)."""

    def read(r: DataReader, version: int) -> tuple[int, ...]:
        return (int(r.bool()),) if version > threshold else (int(version == threshold),)

    return read


def _utf(r: DataReader, version: int) -> tuple[int, ...]:
    r.utf()  # a class name (Tuple, GenericArray, case class) or a Scala builder's source code
    return ()


def _java_then_bool(r: DataReader, version: int) -> tuple[int, ...]:
    _java_object(r, "")  # ExternalSerializer: the DataType, Java-serialized
    return (int(r.bool()),)


def _nfa(r: DataReader, version: int) -> tuple[int, ...]:
    """NFAStateSerializerSnapshot: outer version >= 2 writes supportsPreviousTimestamp, older ones have none."""
    return (int(r.bool()),) if version >= 2 else (0,)


# readOuterSnapshot of the composite classes that override it (registry "composite:<name>"): returns the node's params
_OUTER: dict[str, Callable[[DataReader, int], tuple[int, ...]]] = {
    "": lambda r, v: (),
    "class": _utf,
    "utf": _utf,
    "i32": lambda r, v: (r.i32(),),  # NullableSerializer: the null padding length
    "row": _bool_after(3),  # RowSerializer: < 3 no RowKind, 3 RowKind, > 3 a supportsRowKind flag
    "bool3": _bool_after(3),  # TwoPhaseCommitSinkFunction: supportsNullTransaction, same rule
    "bool2": _bool_after(2),  # LinkedListSerializer: hasNullMask
    "nfa": _nfa,
    "java_bool": _java_then_bool,
}


def _composite(r: DataReader, ctx: str, e: Snapshot, outer: str) -> TypeNode:
    if r.i32() != COMPOSITE_MAGIC:
        raise CorruptFileError(f"{r.where}: {ctx}: bad composite serializer snapshot magic in {e.cls}")
    outer_version = r.i32()
    component = ""
    if outer in ("class", "utf"):
        component = r.utf()
        params: tuple[int, ...] = ()
    else:
        params = _OUTER[outer](r, outer_version)
    children = nested(r, ctx)
    names: tuple[str, ...] = ()
    legacy = False
    if e.kind in ("row", "tuple"):
        names = tuple(f"f{i}" for i in range(len(children)))
    elif e.kind == "garray":
        names = (component,)  # the component class
    elif e.kind == "opaque" and component:
        names = (component,)
    if e.kind == "row":
        legacy, params = not params[0], ()
    return TypeNode(e.kind, e.cls, children, names, legacy, params=params)


def nested(r: DataReader, ctx: str) -> tuple[TypeNode, ...]:
    """NestedSerializersSnapshotDelegate: magic, version 1, n versioned snapshots."""
    if r.i32() != NESTED_MAGIC:
        raise CorruptFileError(f"{r.where}: {ctx}: bad nested serializers snapshot magic")
    nested_version = r.i32()
    if nested_version != 1:
        raise UnsupportedFlinkFormatError(f"{r.where}: {ctx}: nested serializer snapshot version {nested_version}")
    return tuple(read_type(r, ctx) for _ in range(r.i32()))


def _java_object(r: DataReader, ctx: str) -> object:
    """One `InstantiationUtil.serializeObject` stream (walked as data, never instantiated)."""
    value, r.pos = read_stream(r.buf, r.pos, f"{r.where}: {ctx}")
    return value


def optional_map(r: DataReader, ctx: str) -> list[tuple[str, bytes | None]]:
    """A LinkedOptionalMap (POJO fields and subclasses, Kryo registrations): header, n x (name, framed key, framed value)."""
    if r.i64() != OPTIONAL_MAP_HEADER:
        raise CorruptFileError(f"{r.where}: {ctx}: bad optional map header in a POJO or Kryo snapshot")
    out = []
    for _ in range(r.i32()):
        name = r.utf()
        if r.bool():
            r.sized()  # the key (declaring class + field name, or a class name)
        value = r.sized() if r.bool() else None
        out.append((name, value))
    return out


def _enum(r: DataReader, ctx: str, e: Snapshot, version: int) -> TypeNode:
    """EnumSerializerSnapshot: UTF enum class, i32 n, n x UTF constant name (in ordinal order); values are i32 ordinals."""
    enum_class = r.utf()
    constants = tuple(r.utf() for _ in range(r.i32()))
    return TypeNode("enum", enum_class, (), constants)


def _pojo(r: DataReader, ctx: str, e: Snapshot, version: int) -> TypeNode:
    """PojoSerializerSnapshot v2 (PojoSerializerSnapshotData): UTF class, fields, registered and other subclasses."""
    if version != 2:
        raise UnsupportedFlinkFormatError(f"{r.where}: {ctx}: POJO serializer snapshot version {version} (2 is read)")
    pojo_class = r.utf()
    names: list[str] = []
    fields: list[TypeNode] = []
    for key, value in optional_map(r, ctx):
        if value is None:
            raise UnsupportedSerializerError(f"{ctx}: POJO {pojo_class} field {key} has no serializer snapshot")
        names.append(key)
        fields.append(read_type(DataReader(value, where=r.where), ctx))
    for _ in range(2):  # registered and non-registered subclasses: their values are not decoded
        optional_map(r, ctx)
    return TypeNode("pojo", pojo_class, tuple(fields), tuple(names))


def _kryo(r: DataReader, ctx: str, e: Snapshot, version: int) -> TypeNode:
    """KryoSerializerSnapshotData: UTF type class + three LinkedOptionalMaps (registrations, default serializers, their
    classes); the payload is kept to be written back as it was."""
    start = r.pos
    type_class = r.utf()
    for _ in range(3):
        optional_map(r, ctx)
    return TypeNode("opaque", e.cls, (), (type_class,), payload=bytes(r.buf[start : r.pos]))


def _avro(r: DataReader, ctx: str, e: Snapshot, version: int) -> TypeNode:
    """AvroSerializerSnapshot v2: UTF type class + UTF schema (JSON)."""
    if version != 2:
        raise UnsupportedFlinkFormatError(f"{r.where}: {ctx}: Avro serializer snapshot version {version} (2 is read)")
    start = r.pos
    type_class = r.utf()
    r.utf()
    return TypeNode("opaque", e.cls, (), (type_class,), payload=bytes(r.buf[start : r.pos]))


def _ttl_aware(r: DataReader, ctx: str, e: Snapshot, version: int) -> TypeNode:
    """TtlAwareSerializerSnapshot: bool isTtlEnabled, then the wrapped serializer's versioned snapshot."""
    enabled = r.bool()
    return TypeNode(e.kind, e.cls, (read_type(r, ctx),), params=(int(enabled),))


def _scala_enum(r: DataReader, ctx: str, e: Snapshot, version: int) -> TypeNode:
    """ScalaEnumSerializerSnapshot: UTF enumeration class, i32 n, n x (UTF name, i32 id)."""
    enum_class = r.utf()
    for _ in range(r.i32()):
        r.utf()
        r.i32()
    return TypeNode(e.kind, e.cls, names=(enum_class,))


def _rowdata_key(r: DataReader, ctx: str, e: Snapshot, version: int) -> TypeNode:
    """RowDataKeySerializerSnapshot: two i32-framed Java-serialized generated classes, then the RowData snapshot."""
    for _ in range(2):
        r.bytes(r.i32())
    return TypeNode(e.kind, e.cls, (read_type(r, ctx),))


def _table_row(r: DataReader, ctx: str, e: Snapshot, version: int) -> TypeNode:
    """RowDataSerializerSnapshot (table runtime and flink-python): i32 n, n Java-serialized LogicalTypes, nested."""
    if version < 3 and e.kind == "rowdata":
        raise UnsupportedFlinkFormatError(f"{r.where}: {ctx}: RowData serializer snapshot version {version} is not supported (3 is)")
    types = [_java_object(r, ctx) for _ in range(r.i32())]
    children = nested(r, ctx)
    if e.kind != "rowdata":
        return TypeNode(e.kind, e.cls, children)
    names = tuple(f"f{i}" for i in range(len(children)))
    sql = tuple(sql_type(t, f"{r.where}: {ctx}") for t in types)
    return TypeNode("rowdata", e.cls, children, names, logical=tuple(str(t) for t in sql), sql=sql)


def _table_i32(r: DataReader, ctx: str, e: Snapshot, version: int) -> TypeNode:
    """BinaryRowDataSerializer (number of fields), TimestampDataSerializer (precision): one i32."""
    return TypeNode(e.kind, e.cls, params=(r.i32(),))


def _table_i32_i32(r: DataReader, ctx: str, e: Snapshot, version: int) -> TypeNode:
    """DecimalDataSerializer: i32 precision, i32 scale."""
    return TypeNode(e.kind, e.cls, params=(r.i32(), r.i32()))


def _table_array(r: DataReader, ctx: str, e: Snapshot, version: int) -> TypeNode:
    """ArrayDataSerializer: the element LogicalType and the element serializer, each Java-serialized."""
    element = _java_object(r, ctx)
    _java_object(r, ctx)
    if e.kind != "arraydata":
        return TypeNode(e.kind, e.cls)
    sql = (sql_type(element, f"{r.where}: {ctx}"),)
    return TypeNode("arraydata", e.cls, logical=(str(sql[0]),), sql=sql)


def _java4(r: DataReader, ctx: str, e: Snapshot, version: int) -> TypeNode:
    """MapDataSerializer: key and value LogicalTypes and serializers, four Java-serialized objects."""
    for _ in range(4):
        _java_object(r, ctx)
    return TypeNode(e.kind, e.cls)


def _sorted_map(r: DataReader, ctx: str, e: Snapshot, version: int) -> TypeNode:
    """SortedMapSerializerSnapshot: a Java-serialized comparator, then nested key and value snapshots."""
    _java_object(r, ctx)
    return TypeNode(e.kind, e.cls, nested(r, ctx))


def _either_v2(r: DataReader, ctx: str, e: Snapshot, version: int) -> TypeNode:
    """EitherSerializerSnapshot (1.x, read to migrate pre-1.7 state): version 2 holds the nested snapshots only."""
    if version != 2:
        raise UnsupportedFlinkFormatError(f"{r.where}: {ctx}: {e.cls} version {version} (Flink reads only 2)")
    return TypeNode(e.kind, e.cls, nested(r, ctx))


def _garray_v2(r: DataReader, ctx: str, e: Snapshot, version: int) -> TypeNode:
    """GenericArraySerializerConfigSnapshot (1.x, pre-1.7 state): version 2 holds the component class and nested."""
    if version != 2:
        raise UnsupportedFlinkFormatError(f"{r.where}: {ctx}: {e.cls} version {version} (Flink reads only 2)")
    component = r.utf()
    return TypeNode(e.kind, e.cls, nested(r, ctx), (component,))


# the classes that implement readSnapshot themselves (registry `read`)
_DIRECT: dict[str, Callable[[DataReader, str, Snapshot, int], TypeNode]] = {
    "enum": _enum, "pojo": _pojo, "kryo": _kryo, "avro": _avro, "ttl_aware": _ttl_aware, "scala_enum": _scala_enum,
    "rowdata_key": _rowdata_key, "table_row": _table_row, "table_i32": _table_i32, "table_i32_i32": _table_i32_i32,
    "table_array": _table_array, "java4": _java4, "sorted_map": _sorted_map, "either_v2": _either_v2, "garray_v2": _garray_v2,
}
