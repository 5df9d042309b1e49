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
from flinkstate.flink.serde._datastream import datastream_arrow
from flinkstate.flink.serde._node import FIXED_WIDTH, TypeNode
from flinkstate.flink.serde._snapshots import (
    COMPOSITE_MAGIC as _COMPOSITE_MAGIC,
)
from flinkstate.flink.serde._snapshots import (
    NESTED_MAGIC as _NESTED_MAGIC,
)
from flinkstate.flink.serde._snapshots import (
    OPTIONAL_MAP_HEADER as _OPTIONAL_MAP_HEADER,
)
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
    "TypeNode",
    "arrow_type",
    "read_keyed_header",
    "read_operator_header",
    "read_state_meta",
    "read_type",
    "unit_namespace",
]

_T = TypeVar("_T")
# What the writer (`encode`) maps kinds back to: simple snapshot classes by kind (for a kind several classes share, the
# registry lists the one written back last), the composites it rebuilds, the enum and POJO snapshot classes.
_SIMPLE = {s.cls: s.kind for s in SNAPSHOTS.values() if s.read == "simple" and s.kind not in ("parray", "sarray", "opaque", "refused", "javaser")}
_COMPOSITE = {s.cls: (s.kind, "utf" if s.read == "composite:class" else "row" if s.read == "composite:row" else None)
              for s in SNAPSHOTS.values() if s.kind in ("list", "map", "garray", "row", "tuple", "ttl", "timer") and not s.alias}
_ENUM = "org.apache.flink.api.common.typeutils.base.EnumSerializer$EnumSerializerSnapshot"
_POJO = "org.apache.flink.api.java.typeutils.runtime.PojoSerializerSnapshot"
TABLE_ROW = "org.apache.flink.table.runtime.typeutils.RowDataSerializer$RowDataSerializerSnapshot"


def unit_namespace(node: TypeNode) -> bool:
    """A namespace of one value, written as one byte 0 (VoidNamespace, GlobalWindow): no namespace column."""
    return node.kind == "void"


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
        sers[k] = read_type(r, f"{ctx}, state {name!r} ({k})")
    return StateMeta(name, _BACKEND_TYPES[bt], options, sers)


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
    key_type = read_type(r, f"{ctx} (key serializer)")
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


def arrow_type(node: TypeNode) -> pa.DataType:
    """The Arrow type values of this serializer decode to (TTL wrappers are unwrapped)."""
    if node.kind in _ARROW:
        return _ARROW[node.kind]
    if node.kind in ("row", "tuple", "pojo"):
        return pa.struct([pa.field(n, arrow_type(c)) for n, c in zip(node.names, node.children, strict=True)])
    if node.kind in ("list", "parray", "sarray", "garray"):
        return pa.list_(arrow_type(node.children[0]))
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
    found = datastream_arrow(node, arrow_type)
    if found is not None:
        return found
    raise UnsupportedSerializerError(f"serializer {node.cls} ({node.kind}) has no Arrow type")
