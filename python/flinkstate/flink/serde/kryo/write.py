"""Write values as Flink's KryoSerializer writes them (`kryo.writeClassAndObject`, references on), Kryo 2.24 or 5.6.

The mirror of `decode`: a tagged tree in, the bytes Flink 1.x (Kryo 2) or 2.x (Kryo 5) writes for the same Java object
out, byte for byte (checked by reading them back with each Flink's own KryoSerializer, `flinkjobs/kryo/KryoWire.java`).
Objects are written once each (no back references: a tree from columns has no shared objects); classes by registration
id where Flink's Kryo has one, else by name (the first time in a value); the job's registrations are the snapshot's.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from flinkstate.flink.serde._temporal import _civil_from_days as _civil
from flinkstate.flink.serde.kryo.decode import (
    _ARRAYS_AS_LIST,
    _EMPTY,
    _IMMUTABLE,
    _SINGLETON,
    _SINGLETON_MAP,
    _SORTED,
    _WRAPPER_KIND,
    BOXED,
    COLLECTIONS,
    MAPS,
    KryoUndecodable,
    Node,
)
from flinkstate.flink.serde.kryo.schema import PRIMITIVES, JType, Schemas
from flinkstate.flink.serde.kryo.wire import KryoOutput

__all__ = ["KryoEncoder"]

_NS = 1_000_000_000


class KryoEncoder:
    """Writes values for one Flink KryoSerializer: Kryo generation `gen`, its registration ids and the class schemas."""

    def __init__(self, gen: int, ids: dict[int, str], schemas: Schemas) -> None:
        self.gen, self.schemas = gen, schemas
        self.class_ids = {cls: i for i, cls in ids.items() if cls != "void"}
        self._ascii_max = 63 if gen == 2 else 32
        self._out = KryoOutput(gen)
        self._names: dict[str, int] = {}

    def write(self, node: Node) -> bytes:
        """One value as `writeClassAndObject` writes it."""
        self._out = KryoOutput(self.gen)
        self._names = {}
        self.class_and_object(node, None)
        return bytes(self._out.out)

    def write_class(self, cls: str | None) -> None:
        o = self._out
        if cls is None:
            o.byte(0)
            return
        cid = self.class_ids.get(cls)
        if cid is not None:
            o.varint(cid + 2)
            return
        o.byte(1)
        name_id = self._names.get(cls)
        if name_id is not None:
            o.varint(name_id)
            return
        name_id = self._names[cls] = len(self._names)
        o.varint(name_id)
        if self.gen == 5 and cls.isascii():
            o.ascii(cls)
        else:
            o.string(cls, self._ascii_max)

    def _refs(self, cls: str, kind: str) -> bool:
        if cls in _WRAPPER_KIND or cls in PRIMITIVES:
            return False
        return not (self.gen == 5 and kind == "enum")

    def class_and_object(self, node: Node, generic: JType | None) -> None:
        if node is None:
            self._out.byte(0)
            return
        self.write_class(node[0])
        self._object(node, False, generic)

    def _object(self, node: Node, may_be_null: bool, generic: JType | None) -> None:
        """writeObject / writeObjectOrNull: the null or not-null marker where Kryo writes one, then the body."""
        o = self._out
        if node is None:
            o.byte(0)  # only when may_be_null: a null is written as the marker 0
            return
        if may_be_null or self._refs(node[0], node[1]):
            o.byte(1)
        self._body(node, generic)

    def _body(self, node: Node, generic: JType | None) -> None:
        assert node is not None
        o = self._out
        cls, kind, v = node
        if kind == "int":
            o.varint(v, False)
        elif kind == "long":
            o.varlong(v, False)
        elif kind == "double":
            o.float64(v)
        elif kind == "float":
            o.float32(v)
        elif kind == "bool":
            o.boolean(v)
        elif kind == "byte":
            o.byte(v)
        elif kind == "short":
            o.fixed(2, v)
        elif kind == "char":
            o.char(v)
        elif kind == "string":
            o.string(v, self._ascii_max)
        elif kind == "void":
            pass
        elif kind == "bigint":
            self._big_integer(v)
        elif kind == "bigdec":
            sign, digits, exp = Decimal(v).as_tuple()
            assert isinstance(exp, int)
            self._big_integer(int("".join(map(str, digits))) * (-1 if sign else 1))
            o.varint(-exp, False)
        elif kind in ("date", "sqldate", "sqltime"):
            o.varlong(v, True)
        elif kind == "sqltimestamp":
            millis, nanos = v
            o.varlong(millis - nanos // 1_000_000 if self.gen == 5 else millis, True)
            o.varint(nanos, True)
        elif kind == "uuid":
            for half in v:
                if self.gen == 2:
                    o.varlong(half, False)
                else:
                    o.fixed(8, half)
        elif kind in ("localdate", "localtime", "localdatetime", "instant", "duration"):
            self._time(kind, v)
        elif kind == "enum":
            o.varint(v[0] + 1)
        elif kind == "array":
            self._array(cls, v)
        elif kind == "object":
            self._fields(cls, v)
        elif kind == "map":
            self._map(cls, v, generic)
        elif kind in ("list", "set"):
            self._collection(cls, v, generic)
        else:
            raise KryoUndecodable(cls, f"values of kind {kind} cannot be written")

    def _big_integer(self, v: int) -> None:
        raw = v.to_bytes(max(1, (v + (v < 0)).bit_length() // 8 + 1), "big", signed=True)
        self._out.varint(len(raw) + 1)
        self._out.raw(raw)

    def _time(self, kind: str, v: Any) -> None:
        o = self._out
        if self.gen == 2:  # Kryo 2's FieldSerializer of the JDK classes (their fields by name)
            if kind == "localdate":
                y, m, d = _civil(v)
                o.fixed(2, d)
                o.fixed(2, m)
                o.varint(y, False)
            elif kind == "localtime":
                sec, nano = divmod(v, _NS)
                o.byte(sec // 3600)
                o.byte(sec // 60 % 60)
                o.varint(nano, False)
                o.byte(sec % 60)
            elif kind == "localdatetime":
                o.byte(1)
                self._time("localdate", v[0])
                o.byte(1)
                self._time("localtime", v[1])
            else:  # Instant, Duration: nanos, seconds
                o.varint(v[1], False)
                o.varlong(v[0], False)
            return
        if kind == "localdate":
            y, m, d = _civil(v)
            o.varint(y, True)
            o.byte(m)
            o.byte(d)
        elif kind == "localtime":
            sec, nano = divmod(v, _NS)
            h, mi, s = sec // 3600, sec // 60 % 60, sec % 60
            if nano == 0 and s == 0 and mi == 0:
                o.byte(~h)
            elif nano == 0 and s == 0:
                o.byte(h)
                o.byte(~mi)
            elif nano == 0:
                o.byte(h)
                o.byte(mi)
                o.byte(~s)
            else:
                o.byte(h)
                o.byte(mi)
                o.byte(s)
                o.varint(nano, True)
        elif kind == "localdatetime":
            self._time("localdate", v[0])
            self._time("localtime", v[1])
        elif kind == "instant":
            o.varlong(v[0], True)
            o.varint(v[1], True)
        else:
            o.fixed(8, v[0])
            o.varint(v[1], True)

    def _array(self, cls: str, v: list[Node]) -> None:
        o = self._out
        o.varint(len(v) + 1)
        comp = JType(cls).component
        assert comp is not None
        if comp.primitive:
            if comp.name == "byte":
                o.raw(bytes(x[2] & 0xFF for x in v))  # type: ignore[index]
                return
            for x in v:
                self._body(x, None)
            return
        if comp.name == "java.lang.String" or self.schemas.is_final(comp):
            for x in v:
                self._object(x, True, None)
            return
        for x in v:
            self.class_and_object(x, None)

    def _comparator(self, cls: str) -> None:
        if cls in _SORTED:
            self._out.byte(0)  # no comparator

    def _collection(self, cls: str, v: list[Node], generic: JType | None) -> None:
        o = self._out
        if cls in _EMPTY:
            return
        if cls in _SINGLETON:
            self.class_and_object(v[0], None)
            return
        if cls == _ARRAYS_AS_LIST and self.gen == 2:  # chill: length, the array's component class, each element with its class
            o.varint(len(v))
            classes = {x[0] for x in v if x is not None}
            self.write_class(classes.pop() if len(classes) == 1 else "java.lang.Object")
            for x in v:
                self.class_and_object(x, None)
            return
        if cls not in COLLECTIONS and cls != _ARRAYS_AS_LIST:
            raise KryoUndecodable(cls, "a collection class Kryo's CollectionSerializer is not known to write here")
        elem, nested = self.schemas.type_argument(generic, 0, self.gen)
        if self.gen == 2:
            self._comparator(cls)
            o.varint(len(v))
            for x in v:
                if elem is not None:
                    self._object(x, True, None)
                else:
                    self.class_and_object(x, None)
            return
        nullable = not cls.startswith(_IMMUTABLE)
        has_null = any(x is None for x in v)
        if elem is not None:
            if nullable:
                o.varint_flag(has_null, len(v) + 1)
            else:
                o.varint(len(v) + 1)
            self._comparator(cls)
            for x in v:
                self._object(x, has_null, nested)
            return
        if not v:
            o.byte(1)
            self._comparator(cls)
            return
        classes = {x[0] for x in v if x is not None}
        if len(classes) > 1:
            o.varint_flag(False, len(v) + 1)
            self._comparator(cls)
            for x in v:
                self.class_and_object(x, nested)
            return
        o.varint_flag(True, len(v) + 1)
        self._comparator(cls)
        if not classes:
            o.byte(0)
            return
        self.write_class(classes.pop())
        if nullable:
            o.boolean(has_null)
        for x in v:
            self._object(x, has_null and nullable, nested)

    def _map(self, cls: str, v: list[tuple[Node, Node]], generic: JType | None) -> None:
        o = self._out
        if cls in _EMPTY:
            return
        if cls == _SINGLETON_MAP:
            self.class_and_object(v[0][0], None)
            self.class_and_object(v[0][1], None)
            return
        if cls not in MAPS:
            raise KryoUndecodable(cls, "a map class Kryo's MapSerializer is not known to write here")
        (key, kn), (value, vn) = self.schemas.type_argument(generic, 0, self.gen), self.schemas.type_argument(generic, 1, self.gen)
        if self.gen == 2:
            self._comparator(cls)
            o.varint(len(v))
        else:
            o.varint(len(v) + 1)
            self._comparator(cls)
        for k, x in v:
            if key is not None:
                self._object(k, True, kn)
            else:
                self.class_and_object(k, kn)
            if value is not None:
                self._object(x, True, vn)
            else:
                self.class_and_object(x, vn)

    def _fields(self, cls: str, v: dict[str, Node]) -> None:
        schema = self.schemas.get(cls)
        if schema is None:
            raise KryoUndecodable(cls, "no schema for this class: its fields cannot be written")
        for name, t in schema.fields:
            x = v.get(name)
            if t.primitive:
                if x is None:
                    raise KryoUndecodable(cls, f"field {name} is a {t.name}: it cannot be null")
                self._body((BOXED[t.name], _WRAPPER_KIND[BOXED[t.name]], x[2]), None)
            elif self.schemas.is_final(t):
                self._object(x, True, t)
            else:
                if x is None:
                    self._out.byte(0)
                else:
                    self.write_class(x[0])
                    self._object(x, False, t)
