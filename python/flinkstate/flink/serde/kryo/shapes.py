"""The Java types that Kryo values of a state hold (their "shape"), as the columns they become, and back.

A shape is a `TypeNode` tree of kinds `j.<kind>` (the kinds of `decode`'s tagged trees: `j.long`, `j.string`,
`j.list`, `j.map`, `j.object`, ...; `j.null` where only nulls were seen) whose `cls` is the Java class of that node
(`""` where values of several collection classes were seen). It is learnt from decoded values (`shape_of`, `merge`),
gives the Arrow type of the column (`arrow_of`), turns tagged trees into the Python values of that column (`to_plain`)
and column values back into tagged trees for the Kryo writer (`from_plain`). Enums become their constant names when the
constants are known (an enum schema), else their ordinals; BigDecimal/BigInteger their exact decimal text (as Flink's
BigDecSerializer columns are); times and timestamps epoch days, milliseconds or nanoseconds as the Arrow types take them.
"""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal
from typing import Any

import pyarrow as pa

from flinkstate.flink.serde._temporal import _decimal_text
from flinkstate.flink.serde.kryo.decode import Node
from flinkstate.flink.serde.kryo.schema import Schemas
from flinkstate.flink.serde.serializers import TypeNode, arrow_type

__all__ = ["ShapeError", "arrow_of", "from_plain", "merge", "shape_of", "to_plain", "NULL_SHAPE"]

NULL_SHAPE = TypeNode("j.null", "")
_NS = 1_000_000_000
_DAY_NS = 86_400 * _NS
_SCALARS = frozenset({"long", "int", "short", "byte", "float", "double", "bool", "char", "string", "void", "bigint", "bigdec",
                      "date", "sqldate", "sqltime", "sqltimestamp", "localdate", "localtime", "localdatetime", "instant",
                      "duration", "uuid"})
_CONTAINERS = ("list", "set", "array", "map")


class ShapeError(ValueError):
    """Values that one column cannot hold: classes that differ where one type is needed, or a value of another type than
    the state's shape."""


def shape_of(node: Node, schemas: Schemas | None = None) -> TypeNode:
    """The shape of one tagged tree; an enum's constants from its schema, if any."""
    if node is None:
        return NULL_SHAPE
    cls, kind, v = node
    if kind in _SCALARS:
        return TypeNode("j." + kind, cls)
    if kind == "enum":
        s = schemas.enum_of(cls) if schemas is not None else None
        return TypeNode("j.enum", cls, names=s.constants or () if s is not None else ("#ordinal",))
    if kind in ("list", "set", "array"):
        elem = NULL_SHAPE
        for x in v:
            elem = merge(elem, shape_of(x, schemas))
        return TypeNode("j." + kind, cls, (elem,))
    if kind == "map":
        k, x = NULL_SHAPE, NULL_SHAPE
        for a, b in v:
            k, x = merge(k, shape_of(a, schemas)), merge(x, shape_of(b, schemas))
        return TypeNode("j.map", cls, (k, x))
    if kind == "object":
        names = tuple(v)
        return TypeNode("j.object", cls, tuple(shape_of(v[n], schemas) for n in names), names)
    raise ShapeError(f"values of kind {kind} ({cls}) have no column form")


def merge(a: TypeNode, b: TypeNode) -> TypeNode:
    """The shape holding values of both a and b; a ShapeError naming the classes when one column cannot."""
    if a.kind == "j.null":
        return b
    if b.kind == "j.null" or a == b:
        return a
    if a.kind != b.kind:
        raise ShapeError(f"values of {a.cls or a.kind[2:]} and of {b.cls or b.kind[2:]} in one place")
    kind = a.kind[2:]
    if kind in _CONTAINERS:
        cls = a.cls if a.cls == b.cls else ""  # ArrayList here, LinkedList there: one list column, its class not one
        return TypeNode(a.kind, cls, tuple(merge(x, y) for x, y in zip(a.children, b.children, strict=True)))
    if a.cls != b.cls:
        raise ShapeError(f"values of {a.cls} and of {b.cls} in one place")
    if kind == "object":
        if a.names != b.names:
            raise ShapeError(f"{a.cls} read with different fields ({a.names} and {b.names})")
        return TypeNode(a.kind, a.cls, tuple(merge(x, y) for x, y in zip(a.children, b.children, strict=True)), a.names)
    if kind == "enum":
        return a if a.names else b
    raise ShapeError(f"values of {a.cls} read as {a.kind} and {b.kind}")


def arrow_of(shape: TypeNode) -> pa.DataType:
    """The Arrow type of a column holding values of this shape (`serializers.arrow_type` of a shape node)."""
    return arrow_type(shape)


def to_plain(node: Node, shape: TypeNode) -> Any:
    """A tagged tree as the Python value of its column (a ShapeError when it is not of the shape)."""
    if node is None:
        return None
    cls, kind, v = node
    want = shape.kind[2:]
    if want != kind or (shape.cls and shape.cls != cls and want not in _CONTAINERS):
        raise ShapeError(f"a value of {cls} ({kind}) where the state's values are {shape.cls or want}")
    if kind in ("long", "int", "short", "byte", "float", "double", "bool", "char", "string", "void", "localdate", "localtime"):
        return v
    if kind in ("date", "sqldate", "sqltime"):
        return v
    if kind == "bigint":
        return str(v)
    if kind == "bigdec":
        sign, digits, exp = v.as_tuple()
        return _decimal_text(int("".join(map(str, digits))) * (-1 if sign else 1), -exp)
    if kind == "sqltimestamp":
        millis, nanos = v
        return (millis // 1000) * _NS + nanos
    if kind == "localdatetime":
        return v[0] * _DAY_NS + v[1]
    if kind in ("instant", "duration"):
        return v[0] * _NS + v[1]
    if kind == "uuid":
        return str(uuid.UUID(int=((v[0] & (2**64 - 1)) << 64) | (v[1] & (2**64 - 1))))
    if kind == "enum":
        return v[0] if shape.names == ("#ordinal",) else v[1]
    if kind in ("list", "set", "array"):
        return [to_plain(x, shape.children[0]) for x in v]
    if kind == "map":
        return [(to_plain(a, shape.children[0]), to_plain(b, shape.children[1])) for a, b in v]
    if kind == "object":
        if tuple(v) != shape.names:
            raise ShapeError(f"{cls} read with fields {tuple(v)}, the state's shape has {shape.names}")
        return {n: to_plain(v[n], c) for n, c in zip(shape.names, shape.children, strict=True)}
    raise ShapeError(f"values of kind {kind} have no column form")


def _ns(v: Any) -> int:
    """A time, timestamp or duration column value (nanoseconds, or a datetime/timedelta) as nanoseconds."""
    if isinstance(v, dt.timedelta):
        return (v.days * 86_400 + v.seconds) * _NS + v.microseconds * 1000
    if isinstance(v, dt.datetime):
        delta = v.replace(tzinfo=None) - dt.datetime(1970, 1, 1)
        return (delta.days * 86_400 + delta.seconds) * _NS + delta.microseconds * 1000 + getattr(v, "nanosecond", 0)
    return int(v)


def from_plain(value: Any, shape: TypeNode, where: str) -> Node:
    """A column value (as `encode.plain_values` gives it: timestamps and times in nanoseconds, dates as epoch days) as the
    tagged tree the Kryo writer takes, classes from the shape (a ShapeError naming where when it has none)."""
    if value is None:
        return None
    kind = shape.kind[2:]
    cls = shape.cls
    if not cls and kind != "null":
        raise ShapeError(f"{where}: its values were of several Java classes ({kind}); Kryo bytes cannot be written without one")
    if kind in ("long", "int", "short", "byte", "bool", "char", "string", "void"):
        return (cls, kind, value)
    if kind in ("float", "double"):
        return (cls, kind, float(value))
    if kind == "bigint":
        return (cls, kind, int(value))
    if kind == "bigdec":
        return (cls, kind, Decimal(str(value)))
    if kind in ("date", "sqldate", "sqltime"):
        return (cls, kind, _ns(value) // 1_000_000)
    if kind == "sqltimestamp":
        sec, nanos = divmod(_ns(value), _NS)
        return (cls, kind, (sec * 1000 + nanos // 1_000_000, nanos))
    if kind == "localdate":
        return (cls, kind, value.toordinal() - 719163 if isinstance(value, dt.date) else int(value))
    if kind == "localtime":
        return (cls, kind, _ns(value))
    if kind == "localdatetime":
        return (cls, kind, divmod(_ns(value), _DAY_NS))
    if kind in ("instant", "duration"):
        return (cls, kind, divmod(_ns(value), _NS))
    if kind == "uuid":
        n = uuid.UUID(str(value)).int
        hi, lo = n >> 64, n & (2**64 - 1)
        return (cls, kind, (hi - (1 << 64) if hi >= 1 << 63 else hi, lo - (1 << 64) if lo >= 1 << 63 else lo))
    if kind == "enum":
        if shape.names == ("#ordinal",):
            return (cls, kind, (int(value), None))
        if value not in shape.names:
            raise ShapeError(f"{where}: {value!r} is not a constant of enum {cls} ({', '.join(shape.names)})")
        return (cls, kind, (shape.names.index(value), value))
    if kind in ("list", "set", "array"):
        return (cls, kind, [from_plain(x, shape.children[0], where) for x in value])
    if kind == "map":
        items = value.items() if isinstance(value, dict) else value
        return (cls, kind, [(from_plain(a, shape.children[0], where), from_plain(b, shape.children[1], where)) for a, b in items])
    if kind == "object":
        return (cls, kind, {n: from_plain(value.get(n), c, where) for n, c in zip(shape.names, shape.children, strict=True)})
    if kind == "null":
        raise ShapeError(f"{where}: a value where the state held only nulls (its Java class is unknown)")
    raise ShapeError(f"{where}: shape {shape.kind} cannot be written")
