"""Read one Kryo-serialized value as Flink's KryoSerializer wrote it (`kryo.writeClassAndObject`, references on).

A value is read into a tagged tree: every non-null node is `(java class, kind, value)` with kind one of the scalar kinds
(`long`, `int`, `string`, `bigdec`, `localdate`, ...), `enum` ((ordinal, name or None)), `list`, `set`, `map` (a list of
(key, value) pairs), `array` or `object` (field name -> node). The readers are the read methods of Kryo 2.24 and Kryo 5.6
side by side (`Kryo.readClassAndObject`, `readObjectOrNull`, `DefaultClassResolver.readClass`, `MapReferenceResolver`,
`CollectionSerializer`, `MapSerializer`, `FieldSerializer`, `DefaultSerializers`, `DefaultArraySerializers`, Kryo 5's
`TimeSerializers`, chill-java's serializers of Flink 1.x): references are numbered in the order their "not null" markers
are read, class names are remembered per value, and the generic types a field declares tell which elements are written
without their class (Kryo 2: one level; Kryo 5: every level). What cannot be read (a class without a schema, a custom
serializer) is a `KryoUndecodable` naming the class; bytes that do not read as the class declares are a `WireError`.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from flinkstate.flink.serde._temporal import _days_from_civil as epoch_day
from flinkstate.flink.serde.kryo.schema import BOXED, PRIMITIVES, JType, Schemas
from flinkstate.flink.serde.kryo.wire import KryoInput, WireError

__all__ = ["KryoDecoder", "KryoUndecodable", "Node", "COLLECTIONS", "MAPS", "SETS"]

Node = tuple[str, str, Any] | None

_WRAPPER_KIND = {"java.lang.Integer": "int", "java.lang.Long": "long", "java.lang.Short": "short", "java.lang.Byte": "byte",
                 "java.lang.Float": "float", "java.lang.Double": "double", "java.lang.Boolean": "bool",
                 "java.lang.Character": "char"}
_PRIM_OF = {v: k for k, v in BOXED.items()}
# JDK collections and maps read with Kryo's CollectionSerializer / MapSerializer (every Collection / Map class is)
_IMMUTABLE = "java.util.ImmutableCollections$"  # List.of, Set.of, Map.of (Kryo writes them as collections and maps)
SETS = frozenset({_IMMUTABLE + "SetN", _IMMUTABLE + "Set12", "java.util.HashSet", "java.util.LinkedHashSet", "java.util.TreeSet", "java.util.concurrent.ConcurrentSkipListSet",
                  "java.util.concurrent.CopyOnWriteArraySet"})
COLLECTIONS = frozenset({_IMMUTABLE + "ListN", _IMMUTABLE + "List12", "java.util.ArrayList", "java.util.LinkedList", "java.util.ArrayDeque", "java.util.Vector",
                         "java.util.Stack", "java.util.concurrent.CopyOnWriteArrayList", "java.util.concurrent.ConcurrentLinkedQueue",
                         "java.util.concurrent.LinkedBlockingQueue", "java.util.concurrent.ArrayBlockingQueue", *SETS})
MAPS = frozenset({_IMMUTABLE + "MapN", _IMMUTABLE + "Map1", "java.util.HashMap", "java.util.LinkedHashMap", "java.util.TreeMap", "java.util.Hashtable",
                  "java.util.concurrent.ConcurrentHashMap", "java.util.concurrent.ConcurrentSkipListMap", "java.util.IdentityHashMap",
                  "java.util.WeakHashMap"})
_SORTED = frozenset({"java.util.TreeSet", "java.util.TreeMap", "java.util.concurrent.ConcurrentSkipListSet",
                     "java.util.concurrent.ConcurrentSkipListMap"})
_EMPTY = {"java.util.Collections$EmptyList": "list", "java.util.Collections$EmptySet": "set", "java.util.Collections$EmptyMap": "map"}
_SINGLETON = {"java.util.Collections$SingletonList": "list", "java.util.Collections$SingletonSet": "set"}
_SINGLETON_MAP = "java.util.Collections$SingletonMap"
_ARRAYS_AS_LIST = "java.util.Arrays$ArrayList"
# java.time classes Kryo 2 (which has no serializers for them) writes with its FieldSerializer: their JDK 8-21 fields by name
_K2_TIME_FIELDS = {
    "java.time.LocalDate": ("day", "month", "year"),
    "java.time.LocalTime": ("hour", "minute", "nano", "second"),
    "java.time.LocalDateTime": ("date", "time"),
    "java.time.Instant": ("nanos", "seconds"),
    "java.time.Duration": ("nanos", "seconds"),
}
_TIME_KIND = {"java.time.LocalDate": "localdate", "java.time.LocalTime": "localtime", "java.time.LocalDateTime": "localdatetime",
              "java.time.Instant": "instant", "java.time.Duration": "duration"}
_PENDING = ("<pending>", "pending", None)
# JDK classes that are not final (their class is written) and that Kryo can hold: interfaces and open classes
_OPEN_JDK = frozenset({"java.lang.Object", "java.lang.Number", "java.lang.Comparable", "java.lang.CharSequence", "java.io.Serializable",
                       "java.math.BigDecimal", "java.math.BigInteger", "java.util.Date", "java.sql.Date", "java.sql.Time",
                       "java.sql.Timestamp", "java.util.Collection", "java.util.List", "java.util.Set", "java.util.Map",
                       "java.util.SortedSet", "java.util.SortedMap", "java.util.NavigableSet", "java.util.NavigableMap",
                       "java.util.Queue", "java.util.Deque", "java.lang.Iterable", "java.lang.Enum", *COLLECTIONS, *MAPS})
_MAX_DEPTH = 200


class KryoUndecodable(Exception):
    """A class in a Kryo value that cannot be read: no schema for it, a custom Kryo serializer, a class Kryo writes in a
    form this reader does not know. `cls` names it."""

    def __init__(self, cls: str, why: str) -> None:
        super().__init__(f"{cls}: {why}")
        self.cls = cls
        self.why = why


class KryoDecoder:
    """Reads values written by one Flink KryoSerializer: Kryo generation `gen` (2: Flink 1.x, 5: Flink 2.x), registration
    ids (`KryoRegistrations.ids`), class schemas, and the classes the job gave custom serializers (cannot be read)."""

    def __init__(self, gen: int, ids: dict[int, str], schemas: Schemas, custom: dict[str, str] | None = None) -> None:
        if gen not in (2, 5):
            raise ValueError(f"Kryo generation {gen} (2 or 5)")
        self.gen, self.ids, self.schemas, self.custom = gen, ids, schemas, custom or {}
        self._in: KryoInput
        self._names: dict[int, str] = {}
        self._refs: list[Node] = []
        self._depth = 0

    # -- entry points -----------------------------------------------------------------------------------------------

    def read(self, buf: bytes | memoryview, pos: int = 0) -> tuple[Node, int]:
        """One `writeClassAndObject` value starting at pos: (its tagged tree, the position after it)."""
        self._in = KryoInput(buf, pos, self.gen)
        self._names = {}
        self._refs = []
        self._depth = 0
        node = self.class_and_object(None)
        return node, self._in.pos

    # -- Kryo's object protocol ---------------------------------------------------------------------------------------

    def read_class(self) -> str | None:
        """DefaultClassResolver.readClass: varint 0 null, 1 a name (id, and the name the first time), else id + 2."""
        i = self._in
        cid = i.varint()
        if cid == 0:
            return None
        if cid == 1:
            name_id = i.varint()
            name = self._names.get(name_id)
            if name is None:
                name = i.string()
                if not name:
                    raise WireError(f"an empty class name at offset {i.pos}")
                self._names[name_id] = name
            return name
        cls = self.ids.get(cid - 2)
        if cls is None:
            raise KryoUndecodable(f"registration id {cid - 2}", "no class is registered with this id (Flink's defaults and "
                                  "the job's registrations in the serializer snapshot)")
        return cls

    def _uses_refs(self, cls: str) -> bool:
        """MapReferenceResolver.useReferences: every class but the primitive wrappers (Kryo 5: and enums)."""
        if cls in _WRAPPER_KIND or cls in PRIMITIVES:
            return False
        return not (self.gen == 5 and self.schemas.enum_of(cls) is not None)

    def _object(self, cls: str, may_be_null: bool, generic: JType | None) -> Node:
        """Kryo.readObject / readObjectOrNull of a known class: the reference marker (when it has one), then the body."""
        i = self._in
        refs = self._uses_refs(cls)
        if may_be_null:
            marker = i.varint()
            if marker == 0:
                return None
            if not refs:
                return self._body(cls, generic)
        else:
            if not refs:
                return self._body(cls, generic)
            marker = i.varint()
        if marker == 1:
            slot = len(self._refs)
            self._refs.append(_PENDING)
            node = self._body(cls, generic)
            self._refs[slot] = node
            return node
        if marker < 0 or marker - 2 >= len(self._refs):
            raise WireError(f"reference {marker - 2} at offset {i.pos} is to no object read before")
        node = self._refs[marker - 2]
        if node is _PENDING:
            raise KryoUndecodable(cls, "a value refers to an object that contains it (a cycle), which has no column form")
        return node

    def class_and_object(self, generic: JType | None) -> Node:
        """Kryo.readClassAndObject."""
        cls = self.read_class()
        if cls is None:
            return None
        return self._object(cls, False, generic)

    # -- serializers --------------------------------------------------------------------------------------------------

    def _body(self, cls: str, generic: JType | None) -> Node:
        self._depth += 1
        if self._depth > _MAX_DEPTH:
            raise WireError(f"values nested deeper than {_MAX_DEPTH} levels")
        try:
            return self._serializer(cls, generic)
        finally:
            self._depth -= 1

    def _serializer(self, cls: str, generic: JType | None) -> Node:
        i = self._in
        if cls in self.custom:
            raise KryoUndecodable(cls, f"the job serializes it with its own Kryo serializer {self.custom[cls]}")
        kind = _WRAPPER_KIND.get(cls) or (_WRAPPER_KIND.get(BOXED[cls]) if cls in PRIMITIVES else None)
        if kind is not None:
            return (BOXED.get(cls, cls), kind, self._scalar(kind))
        if cls == "java.lang.String":
            return (cls, "string", i.string())
        if cls == "void":
            return (cls, "void", None)
        if cls == "java.math.BigInteger":
            return (cls, "bigint", self._big_integer())
        if cls == "java.math.BigDecimal":
            return (cls, "bigdec", self._big_decimal())
        if cls in ("java.util.Date", "java.sql.Date", "java.sql.Time"):
            return (cls, "date" if cls == "java.util.Date" else "sqldate" if cls == "java.sql.Date" else "sqltime", i.varlong(True))
        if cls == "java.sql.Timestamp":  # (getTime(), getNanos()): Kryo 5 writes the whole seconds' milliseconds
            millis, nanos = i.varlong(True), i.varint(True)
            return (cls, "sqltimestamp", (millis + nanos // 1_000_000 if self.gen == 5 else millis, nanos))
        if cls == "java.util.UUID":  # Flink 1.x (chill): two zig-zag varlongs; Flink 2.x: two fixed longs
            return (cls, "uuid", (i.varlong(False), i.varlong(False)) if self.gen == 2 else (i.fixed(8), i.fixed(8)))
        if cls in _TIME_KIND:
            return (cls, _TIME_KIND[cls], self._time(cls))
        if cls.startswith("["):
            return self._array(cls)
        enum = self.schemas.enum_of(cls)
        if enum is not None:
            ordinal = i.varint() - 1
            if ordinal < 0 or ordinal >= len(enum.constants or ()):
                raise WireError(f"enum {enum.name} has no constant of ordinal {ordinal}")
            return (enum.name, "enum", (ordinal, (enum.constants or ())[ordinal]))
        if cls in _EMPTY:
            return (cls, _EMPTY[cls], [])
        if cls in _SINGLETON:
            return (cls, _SINGLETON[cls], [self.class_and_object(None)])
        if cls == _SINGLETON_MAP:
            return (cls, "map", [(self.class_and_object(None), self.class_and_object(None))])
        if cls == _ARRAYS_AS_LIST:
            return self._arrays_as_list(generic)
        if cls in COLLECTIONS:
            return self._collection(cls, generic)
        if cls in MAPS:
            return self._map(cls, generic)
        schema = self.schemas.get(cls)
        if schema is not None:
            return self._fields(cls, schema.fields)
        raise KryoUndecodable(cls, "no schema for this class (Kryo writes a class's fields without names or types): give "
                              f"one, e.g. --kryo-class '{cls}=field:Type,...'")

    def _scalar(self, kind: str) -> Any:
        """A primitive's value as its boxed serializer (and a primitive field) writes it."""
        i = self._in
        if kind == "int":
            return i.varint(False)
        if kind == "long":
            return i.varlong(False)
        if kind == "double":
            return i.float64()
        if kind == "float":
            return i.float32()
        if kind == "bool":
            return i.boolean()
        if kind == "byte":
            return i.sbyte()
        if kind == "short":
            return i.fixed(2)
        return i.char()

    def _big_integer(self) -> int | None:
        i = self._in
        n = i.varint()
        if n == 0:
            return None
        return int.from_bytes(i.bytes(n - 1), "big", signed=True)

    def _big_decimal(self) -> Decimal | None:
        i = self._in
        n = i.varint()
        if n == 0:
            return None
        unscaled = int.from_bytes(i.bytes(n - 1), "big", signed=True)
        scale = i.varint(False)
        sign = 1 if unscaled < 0 else 0
        return Decimal((sign, tuple(int(d) for d in str(abs(unscaled))), -scale))

    def _time(self, cls: str) -> Any:
        i = self._in
        if self.gen == 2:  # Kryo 2 has no java.time serializers: its FieldSerializer writes the JDK's fields
            f = dict(zip(_K2_TIME_FIELDS[cls], self._k2_time_fields(cls), strict=True))
            if cls == "java.time.LocalDate":
                return epoch_day(f["year"], f["month"], f["day"])
            if cls == "java.time.LocalTime":
                return ((f["hour"] * 60 + f["minute"]) * 60 + f["second"]) * 1_000_000_000 + f["nano"]
            if cls == "java.time.LocalDateTime":
                if f["date"] is None or f["time"] is None:
                    raise WireError("a LocalDateTime without its date or time")
                return (f["date"][2], f["time"][2])
            return (f["seconds"], f["nanos"])
        if cls == "java.time.LocalDate":
            return self._k5_date()
        if cls == "java.time.LocalTime":
            return self._k5_time()
        if cls == "java.time.LocalDateTime":
            return (self._k5_date(), self._k5_time())
        if cls == "java.time.Instant":
            return (i.varlong(True), i.varint(True))
        return (i.fixed(8), i.varint(True))  # Duration: a fixed long, then the nanos

    def _k2_time_fields(self, cls: str) -> list[Any]:
        i = self._in
        if cls == "java.time.LocalDate":
            return [i.fixed(2), i.fixed(2), i.varint(False)]
        if cls == "java.time.LocalTime":
            return [i.sbyte(), i.sbyte(), i.varint(False), i.sbyte()]
        if cls == "java.time.LocalDateTime":  # final fields: readObjectOrNull, each with its reference marker
            return [self._object("java.time.LocalDate", True, None), self._object("java.time.LocalTime", True, None)]
        return [i.varint(False), i.varlong(False)]

    def _k5_date(self) -> int:
        i = self._in
        year = i.varint(True)
        month = i.sbyte()
        day = i.sbyte()
        return epoch_day(year, month, day)

    def _k5_time(self) -> int:
        i = self._in
        hour = i.sbyte()
        minute = second = nano = 0
        if hour < 0:
            hour = ~hour
        else:
            minute = i.sbyte()
            if minute < 0:
                minute = ~minute
            else:
                second = i.sbyte()
                if second < 0:
                    second = ~second
                else:
                    nano = i.varint(True)
        return ((hour * 60 + minute) * 60 + second) * 1_000_000_000 + nano

    def _array(self, cls: str) -> Node:
        i = self._in
        n = i.varint()
        if n == 0:
            return None
        n -= 1
        comp = JType(cls).component
        assert comp is not None
        if comp.primitive:
            kind = _WRAPPER_KIND[BOXED[comp.name]]
            box = BOXED[comp.name]
            if comp.name == "byte":
                return (cls, "array", [(box, kind, b - 256 if b > 127 else b) for b in i.bytes(n)])
            return (cls, "array", [(box, kind, self._scalar(kind)) for _ in range(n)])
        self._known(comp, cls)
        if comp.name == "java.lang.String" or self.schemas.is_final(comp):  # StringArraySerializer; final components
            return (cls, "array", [self._object(comp.name, True, None) for _ in range(n)])
        return (cls, "array", [self.class_and_object(None) for _ in range(n)])

    def _known(self, t: JType, where: str) -> None:
        """A declared type must be one whose finality is known (a JDK class or a class with a schema): whether Kryo wrote
        its class before it depends on that."""
        base = t
        while base.component is not None:
            base = base.component
        if base.primitive or base.name in _OPEN_JDK or self.schemas.is_final(base) or self.schemas.get(base.name) is not None:
            return
        raise KryoUndecodable(base.name, f"declared in {where} without a schema: whether Kryo writes its class (a final class "
                              f"or not) is unknown; give one, e.g. --kryo-class '{base.name}=field:Type,...' ('final {base.name}=...' "
                              "for a final class)")

    def _comparator(self, cls: str) -> None:
        if cls in _SORTED and self.class_and_object(None) is not None:
            raise KryoUndecodable(cls, "a sorted collection with a custom comparator")

    def _collection(self, cls: str, generic: JType | None) -> Node:
        i = self._in
        kind = "set" if cls in SETS else "list"
        elem, nested = self.schemas.type_argument(generic, 0, self.gen)
        if self.gen == 2:
            self._comparator(cls)
            n = i.varint()
            if elem is not None:
                return (cls, kind, [self._object(elem.name, True, None) for _ in range(n)])
            return (cls, kind, [self.class_and_object(None) for _ in range(n)])
        nullable = not cls.startswith(_IMMUTABLE)  # Kryo 5's serializers of List.of and Set.of: elementsCanBeNull false
        if elem is not None:
            has_null, n = i.varint_flag() if nullable else (False, i.varint())
            if n == 0:
                return None
            n -= 1
            self._comparator(cls)
            return (cls, kind, [self._object(elem.name, has_null, nested) for _ in range(n)])
        same, n = i.varint_flag()
        if n == 0:
            return None
        n -= 1
        self._comparator(cls)
        if n == 0:
            return (cls, kind, [])
        if not same:
            return (cls, kind, [self.class_and_object(nested) for _ in range(n)])
        ecls = self.read_class()
        if ecls is None:
            return (cls, kind, [None] * n)
        has_null = i.boolean() if nullable else False
        return (cls, kind, [self._object(ecls, has_null, nested) for _ in range(n)])

    def _arrays_as_list(self, generic: JType | None) -> Node:
        """`Arrays.asList`: Flink 1.x (chill) writes the length, the array's component class, then every element with its
        class; Flink 2.x (Kryo 5) writes it as a collection."""
        if self.gen == 5:
            return (_ARRAYS_AS_LIST, "list", self._collection("java.util.ArrayList", generic)[2])  # type: ignore[index]
        i = self._in
        n = i.varint()
        self.read_class()
        return (_ARRAYS_AS_LIST, "list", [self.class_and_object(None) for _ in range(n)])

    def _map(self, cls: str, generic: JType | None) -> Node:
        i = self._in
        (key, kn), (value, vn) = self.schemas.type_argument(generic, 0, self.gen), self.schemas.type_argument(generic, 1, self.gen)
        if self.gen == 2:
            self._comparator(cls)
            n = i.varint()
        else:
            n = i.varint()
            if n == 0:
                return None
            n -= 1
            self._comparator(cls)
        out = []
        for _ in range(n):
            k = self._object(key.name, True, kn) if key is not None else self.class_and_object(kn)
            v = self._object(value.name, True, vn) if value is not None else self.class_and_object(vn)
            out.append((k, v))
        return (cls, "map", out)

    def _fields(self, cls: str, fields: tuple[tuple[str, JType], ...]) -> Node:
        """FieldSerializer: each field in name order; primitives bare, final classes with a null/reference marker, other
        classes with their class first; a field's generic types go to its collection or map."""
        out: dict[str, Node] = {}
        for name, t in fields:
            self._known(t, cls)
            if t.primitive:
                kind = _WRAPPER_KIND[BOXED[t.name]]
                out[name] = (BOXED[t.name], kind, self._scalar(kind))
            elif self.schemas.is_final(t):
                out[name] = self._object(t.name, True, t)
            else:
                fcls = self.read_class()
                out[name] = None if fcls is None else self._object(fcls, False, t)
        return (cls, "object", out)
