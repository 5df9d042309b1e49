"""Flink SQL logical types (`org.apache.flink.table.types.logical.LogicalType`) as plain data, and their Arrow types.

The table runtime's serializer snapshots keep each RowData field's LogicalType Java-serialized; `javaser` walks that
stream as data and `sql_type` turns it into a `SqlType` by its `typeRoot` (the same for every Flink release). The Arrow
type of each SQL type is what a BinaryRowData field decodes to (`rowdata`), and what an encoder accepts back.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from flinkstate.flink.errors import UnsupportedSerializerError
from flinkstate.flink.serde.javaser import JArray, JEnum, JObject

__all__ = ["SqlType", "sql_type", "sql_arrow_type", "sql_type_from_json", "FIXED_SIZE"]

# the width of a value in a BinaryArrayData's fixed part (BinaryArrayData.calculateFixLengthPartSize); 8 otherwise
FIXED_SIZE = {"BOOLEAN": 1, "TINYINT": 1, "SMALLINT": 2, "INTEGER": 4, "FLOAT": 4, "DATE": 4, "TIME_WITHOUT_TIME_ZONE": 4,
              "INTERVAL_YEAR_MONTH": 4}
_SQL_NAMES = {"INTEGER": "INT", "TIME_WITHOUT_TIME_ZONE": "TIME", "TIMESTAMP_WITHOUT_TIME_ZONE": "TIMESTAMP",
              "TIMESTAMP_WITH_LOCAL_TIME_ZONE": "TIMESTAMP_LTZ", "TIMESTAMP_WITH_TIME_ZONE": "TIMESTAMP WITH TIME ZONE",
              "INTERVAL_YEAR_MONTH": "INTERVAL YEAR TO MONTH", "INTERVAL_DAY_TIME": "INTERVAL DAY TO SECOND"}


@dataclass(frozen=True)
class SqlType:
    """One SQL type: its root (LogicalTypeRoot name), nullability, length/precision/scale, and nested types."""

    root: str
    nullable: bool = True
    length: int | None = None  # CHAR, VARCHAR, BINARY, VARBINARY
    precision: int | None = None  # DECIMAL, TIME, TIMESTAMP(_LTZ)
    scale: int | None = None  # DECIMAL
    children: tuple[SqlType, ...] = ()  # ARRAY/MULTISET: (element,); MAP: (key, value); ROW: the fields
    names: tuple[str, ...] = ()  # ROW: the field names

    def __str__(self) -> str:
        base = _SQL_NAMES.get(self.root, self.root)
        if self.root in ("CHAR", "VARCHAR", "BINARY", "VARBINARY"):
            base = f"{base}({self.length})"
        elif self.root == "DECIMAL":
            base = f"DECIMAL({self.precision}, {self.scale})"
        elif self.root in ("TIME_WITHOUT_TIME_ZONE", "TIMESTAMP_WITHOUT_TIME_ZONE", "TIMESTAMP_WITH_LOCAL_TIME_ZONE"):
            base = f"{base}({self.precision})"
        elif self.root in ("ARRAY", "MULTISET"):
            base = f"{base}<{self.children[0]}>"
        elif self.root == "MAP":
            base = f"MAP<{self.children[0]}, {self.children[1]}>"
        elif self.root == "ROW":
            base = "ROW<" + ", ".join(f"{n} {t}" for n, t in zip(self.names, self.children, strict=True)) + ">"
        return base if self.nullable else f"{base} NOT NULL"

    @property
    def compact(self) -> bool:
        """A DECIMAL or TIMESTAMP kept whole in its 8-byte slot (DecimalData/TimestampData.isCompact)."""
        if self.root == "DECIMAL":
            return (self.precision or 0) <= 18
        return (self.precision or 0) <= 3

    def to_json(self) -> dict[str, Any]:
        """A JSON-able form (kept with an imported state's serializers)."""
        out: dict[str, Any] = {"root": self.root}
        if not self.nullable:
            out["nullable"] = False
        for k in ("length", "precision", "scale"):
            if getattr(self, k) is not None:
                out[k] = getattr(self, k)
        if self.children:
            out["children"] = [c.to_json() for c in self.children]
        if self.names:
            out["names"] = list(self.names)
        return out

    def with_names(self, names: tuple[str, ...]) -> SqlType:
        """This ROW with other field names (from a SQL plan)."""
        if len(names) != len(self.children):
            raise ValueError(f"{len(names)} names for a row of {len(self.children)} fields")
        return SqlType(self.root, self.nullable, children=self.children, names=names)


def sql_type_from_json(d: dict[str, Any]) -> SqlType:
    """The inverse of `SqlType.to_json`."""
    return SqlType(d["root"], d.get("nullable", True), d.get("length"), d.get("precision"), d.get("scale"),
                   tuple(sql_type_from_json(c) for c in d.get("children", ())), tuple(d.get("names", ())))


def sql_type_from_text(text: str) -> SqlType:
    """A SqlType from its JSON text."""
    return sql_type_from_json(json.loads(text))


def _items(value: Any) -> list[Any]:
    """The elements of a Java List walked as data (ArrayList's elementData, an unmodifiable list's backing list)."""
    if isinstance(value, JArray):
        return [v for v in value.values if v is not None]
    if isinstance(value, JObject):
        for name in ("list", "c", "elementData", "a"):
            inner = value.get(name)
            if inner is not None:
                items = _items(inner)
                size = value.get("size")
                return items[:size] if isinstance(size, int) else items
        annotations = [v for vs in value.annotations.values() for v in vs if isinstance(v, JObject)]
        return annotations  # ArrayList writes its elements after its size, in writeObject
    return []


def sql_type(t: Any, where: str = "") -> SqlType:
    """A Java-serialized LogicalType (a `JObject`) as a SqlType, by its typeRoot."""
    if not isinstance(t, JObject):
        raise UnsupportedSerializerError(f"{where}: a RowData field type is not a Java-serialized LogicalType ({type(t).__name__})")
    root_enum = t.get("typeRoot")
    if not isinstance(root_enum, JEnum):
        raise UnsupportedSerializerError(f"{where}: LogicalType {t.class_name} has no typeRoot")
    root = root_enum.name
    nullable = bool(t.get("isNullable", True))
    if root in ("CHAR", "VARCHAR", "BINARY", "VARBINARY"):
        return SqlType(root, nullable, length=t.get("length"))
    if root == "DECIMAL":
        return SqlType(root, nullable, precision=t.get("precision"), scale=t.get("scale"))
    if root in ("TIME_WITHOUT_TIME_ZONE", "TIMESTAMP_WITHOUT_TIME_ZONE", "TIMESTAMP_WITH_LOCAL_TIME_ZONE", "TIMESTAMP_WITH_TIME_ZONE"):
        return SqlType(root, nullable, precision=t.get("precision"))
    if root in ("ARRAY", "MULTISET"):
        return SqlType(root, nullable, children=(sql_type(t.get("elementType"), where),))
    if root == "MAP":
        return SqlType(root, nullable, children=(sql_type(t.get("keyType"), where), sql_type(t.get("valueType"), where)))
    if root == "ROW":
        fields = _items(t.get("fields"))
        return SqlType(root, nullable, children=tuple(sql_type(f.get("type"), where) for f in fields),
                       names=tuple(str(f.get("name")) for f in fields))
    if root == "STRUCTURED_TYPE":  # its internal form is a RowData of its attributes (an accumulator class's fields)
        attributes = _items(t.get("attributes"))
        return SqlType("ROW", nullable, children=tuple(sql_type(a.get("type"), where) for a in attributes),
                       names=tuple(str(a.get("name")) for a in attributes))
    if root == "DISTINCT_TYPE":  # stored as its source type
        source = sql_type(t.get("sourceType"), where)
        return SqlType(source.root, nullable, source.length, source.precision, source.scale, source.children, source.names)
    return SqlType(root, nullable)


_ARROW: dict[str, pa.DataType] = {
    "BOOLEAN": pa.bool_(), "TINYINT": pa.int8(), "SMALLINT": pa.int16(), "INTEGER": pa.int32(), "BIGINT": pa.int64(),
    "FLOAT": pa.float32(), "DOUBLE": pa.float64(), "CHAR": pa.string(), "VARCHAR": pa.string(), "BINARY": pa.binary(),
    "VARBINARY": pa.binary(), "DATE": pa.date32(), "TIME_WITHOUT_TIME_ZONE": pa.time32("ms"),
    # months, and milliseconds: Flink's internal forms of the two interval kinds
    "INTERVAL_YEAR_MONTH": pa.int32(), "INTERVAL_DAY_TIME": pa.int64(), "RAW": pa.binary(), "NULL": pa.null(),
}


def sql_arrow_type(t: SqlType) -> pa.DataType:
    """The Arrow type a value of this SQL type decodes to (TIMESTAMP(p > 3) in ns; RAW as its serialized bytes)."""
    if t.root in _ARROW:
        return _ARROW[t.root]
    if t.root == "DECIMAL":
        return pa.decimal128(t.precision or 10, t.scale or 0)
    if t.root == "TIMESTAMP_WITHOUT_TIME_ZONE":
        return pa.timestamp("ms" if t.compact else "ns")
    if t.root == "TIMESTAMP_WITH_LOCAL_TIME_ZONE":
        return pa.timestamp("ms" if t.compact else "ns", tz="UTC")
    if t.root == "ARRAY":
        return pa.list_(sql_arrow_type(t.children[0]))
    if t.root == "MULTISET":
        return pa.map_(sql_arrow_type(t.children[0]), pa.int32())
    if t.root == "MAP":
        return pa.map_(sql_arrow_type(t.children[0]), sql_arrow_type(t.children[1]))
    if t.root == "ROW":
        return pa.struct([pa.field(n, sql_arrow_type(c)) for n, c in zip(t.names, t.children, strict=True)])
    raise UnsupportedSerializerError(f"SQL type {t} has no Arrow form")
