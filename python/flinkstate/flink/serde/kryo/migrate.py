"""What Flink 2.x reads where Flink 1.x wrote Kryo 2: the serializers a state is migrated to for a 2.x savepoint.

Flink 2.0 replaced Kryo 2 with Kryo 5 and gave fields and types declared `List<T>`, `Set<T>` and `Map<K, V>` (the
interfaces, with classes as type arguments) its own serializers (`TypeExtractor.privateGetForClass`: NullableListTypeInfo
& co.). So, per Kryo serializer of a 1.x state (`migrate_state`), as Flink 2.3's TypeExtractor decides for the same Java
type:
- declared `java.util.List` / `Set` / `Map` whose elements (keys, values) are of one class with a Flink serializer:
  `NullableSerializer(ListSerializer(NullableSerializer(E)))`, `NullableSerializer(SetSerializer(E))`,
  `NullableSerializer(MapSerializer(NullableSerializer(K), V))` (null padding 0), E a basic serializer, an enum's, or
  Kryo 5 for a class 2.x also gives to Kryo (java.time's LocalDate & co., UUID);
- anything else (`ArrayList`, `HashMap`, a user class, nested generics): Kryo 5, same registrations, values written by Kryo 5.
Without migration Flink 2.x refuses the first kind (an incompatible serializer: RocksDB's StateMigrationException, a
HashMap restore failing on the bytes) and reads the second's Kryo 2 bytes with Kryo 5 without an error, wrong (lists
losing elements, doubles of other bits): `Migration.without` says which. What cannot be migrated (Kryo 2 values kept as
bytes, a custom Kryo serializer, element types the values do not tell) is a `KryoMigrationError` naming state and class.
"""

from __future__ import annotations

import dataclasses
import struct
from dataclasses import dataclass

from flinkstate.flink._io import DataReader
from flinkstate.flink.errors import KryoMigrationError
from flinkstate.flink.serde.kryo.bind import is_kryo, kryo_paths
from flinkstate.flink.serde.kryo.registry import parse_kryo_snapshot
from flinkstate.flink.serde.serializers import _BASE, _COMPOSITE, _SIMPLE, StateMeta, TypeNode

__all__ = ["KryoMigrationError", "Migration", "migrate_state", "needs_migration"]

_CLS = {kind: cls for cls, kind in _SIMPLE.items()}  # kind -> snapshot class (the DataStream/basic one listed last)
_COMP = {kind: cls for cls, (kind, _) in _COMPOSITE.items()}
_ENUM = _BASE + "EnumSerializer$EnumSerializerSnapshot"
# element classes -> the serializer kind Flink 2.x's TypeExtractor gives a class type argument (createTypeInfo(Class))
_BASIC = {"java.lang.String": "string", "java.lang.Long": "long", "java.lang.Integer": "int", "java.lang.Short": "short",
          "java.lang.Byte": "byte", "java.lang.Double": "double", "java.lang.Float": "float", "java.lang.Boolean": "bool",
          "java.lang.Character": "char", "java.math.BigDecimal": "bigdec", "java.math.BigInteger": "bigint",
          "java.time.Instant": "instant", "java.sql.Date": "sqldate", "java.sql.Time": "sqltime", "java.sql.Timestamp": "sqltimestamp"}
# classes Flink 2.x still gives to Kryo (GenericTypeInfo) as type arguments: read and written by Kryo 5
_KRYO_ELEMENTS = frozenset({"java.time.LocalDate", "java.time.LocalTime", "java.time.LocalDateTime", "java.time.Duration",
                            "java.util.UUID"})
_INTERFACES = {"java.util.List": "list", "java.util.Set": "set", "java.util.Map": "map"}
_OPTIONAL_MAP_HEADER = 0x4F2C69A3D70
REFUSED = "refused: an incompatible serializer (StateMigrationException; a HashMap restore fails)"
MISREAD = "misread: no error, wrong values (Kryo 5 reads the Kryo 2 bytes)"


@dataclass(frozen=True)
class Migration:
    """One Kryo serializer of a state and its migration: where it is, the class the 1.x snapshot declares, what the 2.x
    savepoint gets, and what Flink 2.x does with the state unmigrated."""

    path: str
    declared: str
    written: str
    without: str

    def to_dict(self) -> dict[str, str]:
        """As JSON: path, declared, written, without."""
        return dataclasses.asdict(self)


def _kryo2(node: TypeNode) -> bool:
    """A Kryo serializer whose values Kryo 2 wrote (Flink 1.x): bound, or kept as bytes by a read that knew the release
    (a node of unknown release, from an import before releases were recorded, is not known to be)."""
    return (is_kryo(node) or node.kind == "kryo") and node.params[:1] == (2,)


def needs_migration(node: TypeNode | None) -> bool:
    """Whether a serializer tree holds Kryo 2 (Flink 1.x) serializers, bound or not."""
    if node is None:
        return False
    return any(_kryo2(n) for _, n in kryo_paths(node, ""))


def _describe(node: TypeNode) -> str:
    """A target serializer tree as text: ListSerializer<NullableSerializer<String>>."""
    short = node.cls.rsplit(".", 1)[-1].rsplit("$", 1)[-1].removesuffix("Snapshot")
    if node.kind == "kryo":
        return f"Kryo 5 ({node.names[0] if node.names else '?'})"
    if node.kind == "enum":
        return f"EnumSerializer({node.cls})"
    if node.children:
        return f"{short}<{', '.join(_describe(c) for c in node.children)}>"
    return short


def _payload_for(type_class: str, like: bytes, where: str) -> bytes:
    """A KryoSerializerSnapshot payload for type_class as the same job's Flink writes one: its registrations are the
    type itself, then the job's registered classes (those of `like`, another Kryo snapshot of the job), then Avro's."""
    regs = parse_kryo_snapshot(like, where)
    r = DataReader(like, where=where)
    r.utf()
    r.i64()
    entries: list[tuple[str, bytes]] = []
    for _ in range(r.i32()):
        name = r.utf()
        start = r.pos
        if r.bool():
            r.sized()
        if r.bool():
            r.sized()
        entries.append((name, bytes(r.buf[start : r.pos])))
    rest = bytes(r.buf[r.pos :])  # the default serializers' maps, as they were
    del regs

    def utf(s: str) -> bytes:
        raw = s.encode("utf-8")
        return struct.pack(">H", len(raw)) + raw

    first = utf(type_class)
    own = utf(type_class) + b"\x01" + struct.pack(">i", len(first)) + first + b"\x01"
    value = first + struct.pack(">i", 0)
    own += struct.pack(">i", len(value)) + value
    kept = [e for name, e in entries[1:] if name != type_class]
    names = [name for name, _ in entries[1:] if name != type_class]
    out = utf(type_class) + struct.pack(">qi", _OPTIONAL_MAP_HEADER, 1 + len(kept)) + own
    for name, e in zip(names, kept, strict=True):
        out += utf(name) + e
    return out + rest


def _element(shape: TypeNode, kryo: TypeNode, where: str) -> TypeNode:
    """The 2.x serializer of a collection's element (key, value) class, from the shape of what the values held."""
    kind, cls = shape.kind[2:], shape.cls
    if kind == "null":
        raise KryoMigrationError(f"{where}: its values held no elements (only empty or null collections were seen), so the "
                                 "element type Flink 2.x gives it is unknown")
    if cls in _BASIC:
        return TypeNode(_BASIC[cls], _CLS[_BASIC[cls]])
    if kind == "enum":
        if not shape.names or shape.names == ("#ordinal",):
            raise KryoMigrationError(f"{where}: enum {cls} without its constants (give --kryo-class '{cls}=enum:A,B,...')")
        return TypeNode("enum", cls, (), shape.names)
    if cls in _KRYO_ELEMENTS:
        payload = _payload_for(cls, kryo.payload, where)
        return TypeNode("kryo", kryo.cls, (shape,), (cls,), payload=payload, params=(5,), logical=kryo.logical)
    raise KryoMigrationError(f"{where}: elements of {cls or 'several classes'} ({kind}): which serializer Flink 2.x gives "
                             "them cannot be told from the savepoint")


def _nullable(node: TypeNode) -> TypeNode:
    return TypeNode("nullable", _COMP["nullable"], (node,), params=(0,))


def _typed(declared: str, node: TypeNode, where: str) -> TypeNode | None:
    """The serializer Flink 2.x gives a declared List/Set/Map of these elements, or None when it gives Kryo (nested
    generics: a type argument that is not a class)."""
    shape = node.children[0]
    kind = _INTERFACES[declared]
    parts = shape.children  # list/set: (element,); map: (key, value)
    if any(p.kind[2:] in ("list", "set", "map", "array", "object") for p in parts):
        return None  # List<List<X>>, Map<K, SomeClass>: 2.x's TypeExtractor keeps Kryo for them
    if kind == "list":
        return _nullable(TypeNode("list", _COMP["list"], (_nullable(_element(parts[0], node, where)),)))
    if kind == "set":
        return _nullable(TypeNode("set", _COMP["set"], (_element(parts[0], node, where),)))
    return _nullable(TypeNode("map", _COMP["map"], (_nullable(_element(parts[0], node, where + " (keys)")),
                                                     _element(parts[1], node, where + " (values)"))))


def _migrate(node: TypeNode, where: str) -> tuple[TypeNode, Migration]:
    declared = node.names[0] if node.names else "?"
    if node.kind != "kryo":
        why = node.logical[0] if node.logical else "its values were kept as their bytes"
        raise KryoMigrationError(f"{where}: Kryo 2 values of {declared} cannot be written for Flink 2.x: {why}")
    if not node.children:
        raise KryoMigrationError(f"{where}: Kryo 2 values of {declared} of no known type cannot be written for Flink 2.x")
    custom = parse_kryo_snapshot(node.payload, where).custom()
    if custom:
        cls, ser = next(iter(custom.items()))
        raise KryoMigrationError(f"{where}: the job gives {cls} its own Kryo serializer {ser}, which wrote Kryo 2 bytes; Flink "
                                 "2.x needs one for Kryo 5 and flinkstate cannot write what it would")
    if node.children[0].kind == "j.null":  # only nulls: nothing to write but the snapshot
        typed = None
    else:
        typed = _typed(declared, node, f"{where} ({declared})") if declared in _INTERFACES else None
    if typed is not None:
        return typed, Migration("", declared, _describe(typed), REFUSED)
    moved = dataclasses.replace(node, params=(5,))
    return moved, Migration("", declared, _describe(moved), MISREAD)


def migrate_state(meta: StateMeta, key: TypeNode, where: str) -> tuple[StateMeta, TypeNode, list[Migration]]:
    """meta and the key serializer as a Flink 2.x savepoint holds them (every Kryo 2 serializer migrated) and what was
    migrated; a KryoMigrationError naming where and the class when a part cannot be."""
    done: list[Migration] = []

    def walk(node: TypeNode, path: str) -> TypeNode:
        if _kryo2(node):
            new, m = _migrate(node, f"{where}, serializer {path}")
            done.append(dataclasses.replace(m, path=path))
            return new
        if not node.children:
            return node
        kids = tuple(walk(c, f"{path}/{i}") for i, c in enumerate(node.children))
        # changed children: the snapshot as read (kept to write an unchanged serializer back verbatim) no longer holds
        return node if kids == node.children else dataclasses.replace(node, children=kids, snapshot=b"")

    sers = {role: walk(n, role) for role, n in meta.serializers.items()}
    new_key = walk(key, "KEY")
    return (dataclasses.replace(meta, serializers=sers) if done else meta), new_key, done
