"""Parse Flink serializer snapshots (the keyed/operator state file headers) into a type tree with Arrow types.

Sources: `KeyedBackendSerializationProxy`, `StateMetaInfoSnapshotReadersWriters`,
`TypeSerializerSnapshot.writeVersionedSnapshot`, and each snapshot class's `readSnapshot` (`_snapshots`, for every class
`registry` lists: the inventory of Flink's jars is checked against it). A snapshot class this module does not know, or
bytes that do not parse as their class, have no length prefix: where the header's end is known (the first key group's
offset, a RocksDB metadata stream, an operator state's first offset), the snapshot's extent is found as the one
continuation that parses the rest of the header exactly to that end, and it is kept as its bytes ("unknown", with the
reason): that state alone is refused when read, every other state stays readable. Otherwise it is an
UnsupportedSerializerError naming the operator, state and class.
"""

from __future__ import annotations

import dataclasses
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
from flinkstate.flink.serde._datastream import datastream_arrow
from flinkstate.flink.serde._node import FIXED_WIDTH, TypeNode
from flinkstate.flink.serde._snapshots import COMPOSITE_MAGIC as _COMPOSITE_MAGIC  # noqa: F401 - the writer's (encode)
from flinkstate.flink.serde._snapshots import NESTED_MAGIC as _NESTED_MAGIC  # noqa: F401 - the writer's (encode)
from flinkstate.flink.serde._snapshots import OPTIONAL_MAP_HEADER as _OPTIONAL_MAP_HEADER  # noqa: F401 - the writer's
from flinkstate.flink.serde._snapshots import (
    PARSE_ERRORS,
    UnknownSnapshotError,
    read_type,
)
from flinkstate.flink.serde.registry import SNAPSHOTS

__all__ = [
    "FIXED_WIDTH",
    "StateMeta",
    "UnknownSnapshotError",
    "opaque_part",
    "whole_bytes",
    "TypeNode",
    "VOID_NAMESPACE",
    "arrow_type",
    "basic_node",
    "read_keyed_header",
    "read_operator_header",
    "read_state_meta",
    "read_type",
    "key_hashing",
    "unit_namespace",
]

_T = TypeVar("_T")
_BASE = "org.apache.flink.api.common.typeutils.base."
# What the writer (`encode`) maps kinds back to: simple snapshot classes by kind (for a kind several classes share, the
# registry lists the one written back last), the composites it rebuilds, the enum and POJO snapshot classes.
_SIMPLE = {s.cls: s.kind for s in SNAPSHOTS.values() if s.read == "simple" and s.kind not in ("parray", "sarray", "opaque", "refused", "javaser")}
_COMPOSITE = {s.cls: (s.kind, "utf" if s.read == "composite:class" else "row" if s.read == "composite:row" else None)
              for s in SNAPSHOTS.values() if s.kind in ("list", "map", "garray", "row", "tuple", "ttl", "timer", "set", "nullable")
              and not s.alias}
_ENUM = "org.apache.flink.api.common.typeutils.base.EnumSerializer$EnumSerializerSnapshot"
_POJO = "org.apache.flink.api.java.typeutils.runtime.PojoSerializerSnapshot"
TABLE_ROW = "org.apache.flink.table.runtime.typeutils.RowDataSerializer$RowDataSerializerSnapshot"
_KIND_CLASS = {kind: cls for cls, kind in _SIMPLE.items()}  # the class written back for a simple kind: the last listed


def basic_node(kind: str) -> TypeNode:
    """A simple serializer's node by kind ("long", "string", "void"...), with the snapshot class a writer writes for it:
    what code outside serde names a basic serializer by, never its class."""
    return TypeNode(kind, _KIND_CLASS[kind])


# VoidNamespace: the namespace of every state outside windows (writers give it to states they make)
VOID_NAMESPACE = basic_node("void")


def unit_namespace(node: TypeNode) -> bool:
    """A namespace of one value, written as one byte 0 (VoidNamespace, GlobalWindow): no namespace column."""
    return node.kind == "void"


# key serializers whose keys' Java hashCode (so Flink's key group) is the Arrow value's, as `core.keygroups` computes it
_JAVA_HASHED = frozenset({"long", "int", "short", "byte", "bool", "double", "float", "string", "char", "rowdata"})


def key_hashing(node: TypeNode) -> str | None:
    """How Flink's key group of a key of this serializer is computed, as far as flinkstate models it: "java" (the Arrow
    value's Java hashCode, `core.keygroups`: boxed primitives, String, Tuples of them, a SQL key's BinaryRowData), "row"
    (Row.hashCode over its fields) or None: not modelled (a POJO's own hashCode, BigDecimal, java.time, Kryo...). Enums,
    which Flink refuses as keys (identity hashCode), are None too."""
    if node.kind in _JAVA_HASHED:
        return "java"
    if node.kind == "tuple" and 0 < len(node.children) <= 25 and all(key_hashing(c) == "java" for c in node.children):
        return "java"
    if node.kind == "row" and not node.legacy_row and all(key_hashing(c) == "java" for c in node.children):
        return "row"
    return None


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


# a resync tries this many continuations at most before it gives up, and skips at most this many snapshots
_RESYNC_BUDGET = 50_000
_RESYNC_DEPTH = 4
_Skips = dict[int, tuple[int, str]]


def _resynced(r: DataReader, end: int | None, parse: Callable[[DataReader], _T]) -> _T:
    """parse(r); where it meets a serializer snapshot it cannot walk (a class it does not know, or bytes that do not parse
    as their class) and the header ends at `end`, that snapshot's extent is the smallest one with which the rest of the
    header parses to exactly `end` (fewest such snapshots first; each kept as its bytes, with the reason). Without `end`,
    or when no continuation fits, the UnsupportedSerializerError naming the class stands."""
    origin = r.pos

    def attempt(skips: _Skips) -> tuple[_T, int]:
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
        found = None
        for depth in range(1, _RESYNC_DEPTH + 1):  # one snapshot skipped, then two...: the fewest that explain the header
            found = _search(attempt, {}, first, end, budget, depth)
            if found is not None or budget[0] <= 0:
                break
        if found is None:
            raise UnsupportedSerializerError(f"{first}; its extent could not be told from the rest of the header "
                                             f"({r.where}, up to offset {end})") from first
        out, r.pos = found
        return out


def _search(attempt: Callable[[_Skips], tuple[_T, int]], skips: _Skips, u: UnknownSnapshotError, end: int,
            budget: list[int], depth: int) -> tuple[_T, int] | None:
    for q in range(u.payload, end + 1):
        if budget[0] <= 0:
            return None
        budget[0] -= 1
        trial = {**skips, u.start: (q, str(u))}
        try:
            out, pos = attempt(trial)
        except UnknownSnapshotError as nxt:
            if depth > 1 and nxt.start > u.start and nxt.start not in trial:
                found = _search(attempt, trial, nxt, end, budget, depth - 1)
                if found is not None:
                    return found
            continue
        except PARSE_ERRORS:
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
    """The first serializer in this tree whose values cannot be decoded (Kryo/Avro/unknown/refused), or None."""
    if node is None:
        return None
    if node.kind in ("opaque", "unknown", "refused"):
        return node
    if node.kind in ("rowdata", "arraydata"):
        return None  # read as a whole (BinaryRowData/BinaryArrayData bytes): what its fields are serialized with does not matter
    for c in node.children:
        found = opaque_part(c)
        if found is not None:
            return found
    return None


_ARROW = {
    "long": pa.int64(), "sortedlong": pa.int64(), "int": pa.int32(), "short": pa.int16(), "byte": pa.int8(), "double": pa.float64(),
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
    found = datastream_arrow(node, arrow_type)
    if found is not None:
        return found
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
