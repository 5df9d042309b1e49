"""Java types and class schemas for Kryo: what Kryo's FieldSerializer writes for a class is its fields' values, sorted by
field name, with no names or types on the wire, so a user class is read by a schema: from a POJO serializer snapshot of
the same class where the savepoint has one, else from the user (`com.acme.Order=id:String,tags:List<String>`).

Type names: Java's primitives (`long`, `int`, ...; no null, no class on the wire), boxed and JDK classes by their simple
or full names (`Long`, `String`, `BigDecimal`, `LocalDate`, `java.util.Date`), generics (`List<String>`,
`Map<String,Long>`, `Set<Integer>`), arrays (`int[]`, `String[]`) and user classes by their full names. Whether a field's
class is final decides whether Kryo writes its class: JDK classes are known; a user class is final when its schema says so
(`final com.acme.Point=x:int,y:int`). Enums: `com.acme.Color=enum:RED,GREEN,BLUE` (constants in ordinal order).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from flinkstate.core.errors import InvalidArgumentError

__all__ = ["ClassSchema", "JType", "Schemas", "parse_class_specs", "parse_type", "PRIMITIVES"]

PRIMITIVES = ("boolean", "byte", "short", "int", "long", "float", "double", "char")
BOXED = {"boolean": "java.lang.Boolean", "byte": "java.lang.Byte", "short": "java.lang.Short", "int": "java.lang.Integer",
         "long": "java.lang.Long", "float": "java.lang.Float", "double": "java.lang.Double", "char": "java.lang.Character"}
_SHORT = {
    **{v.rsplit(".", 1)[1]: v for v in BOXED.values()}, "Integer": "java.lang.Integer", "String": "java.lang.String",
    "string": "java.lang.String", "Object": "java.lang.Object",
    "BigDecimal": "java.math.BigDecimal", "BigInteger": "java.math.BigInteger", "Date": "java.util.Date",
    "LocalDate": "java.time.LocalDate", "LocalTime": "java.time.LocalTime", "LocalDateTime": "java.time.LocalDateTime",
    "Instant": "java.time.Instant", "Duration": "java.time.Duration", "UUID": "java.util.UUID",
    **{n: f"java.util.{n}" for n in ("List", "ArrayList", "LinkedList", "Collection", "Map", "HashMap", "LinkedHashMap",
                                     "TreeMap", "Set", "HashSet", "LinkedHashSet", "TreeSet")},
}
# JDK classes that are final (Kryo writes no class before a field or element of such a type)
_FINAL_JDK = frozenset({*BOXED.values(), "java.lang.String", "java.time.LocalDate", "java.time.LocalTime",
                        "java.time.LocalDateTime", "java.time.Instant", "java.time.Duration", "java.util.UUID"})
# array element codes of Class.getName() ("[I", "[Ljava.lang.String;")
_ARRAY_CODES = {"Z": "boolean", "B": "byte", "S": "short", "I": "int", "J": "long", "F": "float", "D": "double", "C": "char"}
_CODE_OF = {v: k for k, v in _ARRAY_CODES.items()}


@dataclass(frozen=True)
class JType:
    """A Java type as a field declares it: its class (Class.getName(): `long`, `java.util.List`, `[I`) and type arguments."""

    name: str
    args: tuple[JType, ...] = ()

    @property
    def primitive(self) -> bool:
        return self.name in PRIMITIVES

    @property
    def component(self) -> JType | None:
        """An array's element type, else None."""
        if not self.name.startswith("["):
            return None
        rest = self.name[1:]
        if rest.startswith("["):
            return JType(rest)
        if rest.startswith("L") and rest.endswith(";"):
            return JType(rest[1:-1])
        return JType(_ARRAY_CODES[rest])

    def __str__(self) -> str:
        comp = self.component
        if comp is not None:
            return f"{comp}[]"
        return self.name + (f"<{','.join(map(str, self.args))}>" if self.args else "")


@dataclass(frozen=True)
class ClassSchema:
    """A class as Kryo's FieldSerializer writes it: its fields (every non-static, non-transient field of the class and its
    superclasses) in Kryo's order, by name; or an enum's constants in ordinal order."""

    name: str
    fields: tuple[tuple[str, JType], ...] = ()
    final: bool = False
    constants: tuple[str, ...] | None = None  # an enum

    @property
    def is_enum(self) -> bool:
        return self.constants is not None


@dataclass(frozen=True)
class Schemas:
    """The class schemas a read knows (by class name) and where each came from ("user", "POJO snapshot")."""

    classes: Mapping[str, ClassSchema] = field(default_factory=dict)
    origin: Mapping[str, str] = field(default_factory=dict)

    def get(self, name: str) -> ClassSchema | None:
        return self.classes.get(name)

    def enum_of(self, name: str) -> ClassSchema | None:
        """The enum schema of a class name, also for a constant with a body (`Color$1`, the enum's anonymous subclass)."""
        s = self.classes.get(name)
        if s is not None and s.is_enum:
            return s
        outer, dollar, tail = name.rpartition("$")
        if dollar and tail.isdigit():
            s = self.classes.get(outer)
            if s is not None and s.is_enum:
                return s
        return None

    def is_final(self, t: JType) -> bool:
        """Kryo.isFinal of a declared type: primitives, final JDK classes, enums without bodies, user classes whose schema
        says final, arrays of any of these."""
        comp = t.component
        while comp is not None:
            t, comp = comp, comp.component
        if t.primitive or t.name in _FINAL_JDK:
            return True
        s = self.classes.get(t.name)
        return s is not None and (s.final or s.is_enum)

    def type_argument(self, generic: JType | None, index: int, gen: int) -> tuple[JType | None, JType | None]:
        """What Kryo `gen` uses of a declared generic type's argument `index` for a collection's element (a map's key or
        value): (its class when final: elements then written without their class, or None; the type handed down to the
        element: Kryo 5 hands generic types down every level, Kryo 2 none)."""
        if generic is None or len(generic.args) <= index:
            return None, None
        t = generic.args[index]
        return (t if self.is_final(t) else None), (None if gen == 2 else t)

    def merged(self, other: Schemas) -> Schemas:
        """These schemas with other's added; a class in both keeps this one's."""
        return Schemas({**other.classes, **self.classes}, {**other.origin, **self.origin})


def _split(text: str, sep: str) -> list[str]:
    """text split at sep outside <...>."""
    out, depth, cur = [], 0, []
    for ch in text:
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        if ch == sep and depth == 0:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    out.append("".join(cur))
    return out


def parse_type(text: str) -> JType:
    """A type as written in a schema: `long`, `Long`, `List<String>`, `int[]`, `com.acme.Item` (short JDK names allowed)."""
    t = text.strip()
    if not t:
        raise InvalidArgumentError("an empty Java type in a Kryo class schema")
    if t.endswith("[]"):
        comp = parse_type(t[:-2])
        if comp.primitive:
            return JType("[" + _CODE_OF[comp.name])
        return JType("[" + comp.name if comp.name.startswith("[") else f"[L{comp.name};")
    args: tuple[JType, ...] = ()
    if "<" in t:
        if not t.endswith(">"):
            raise InvalidArgumentError(f"Java type {text!r}: unbalanced '<'")
        base, _, inner = t[:-1].partition("<")
        args = tuple(parse_type(a) for a in _split(inner, ","))
        t = base.strip()
    if t in PRIMITIVES:
        if args:
            raise InvalidArgumentError(f"Java type {text!r}: a primitive has no type arguments")
        return JType(t)
    name = _SHORT.get(t, t)
    if "." not in name and "$" not in name:
        raise InvalidArgumentError(f"Java type {text!r}: give a user class by its full name (com.acme.{t})")
    return JType(name, args)


def parse_class_specs(specs: str | Iterable[str] | Mapping[str, str] | None) -> Schemas:
    """User class schemas: `[final ]com.acme.Order=id:String,tags:List<String>` or `com.acme.Color=enum:RED,GREEN`, several
    separated by ';' (or given as a list, or as a mapping of class to its fields)."""
    if specs is None or specs == "":
        return Schemas()
    items: list[tuple[str, str]] = []
    if isinstance(specs, Mapping):
        items = [(str(k), str(v)) for k, v in specs.items()]
    else:
        parts = [p for s in ([specs] if isinstance(specs, str) else specs) for p in s.split(";")]
        for part in parts:
            if not part.strip():
                continue
            cls, eq, body = part.partition("=")
            if not eq:
                raise InvalidArgumentError(f"Kryo class schema {part.strip()!r}: expected 'com.acme.Class=field:Type,...'")
            items.append((cls.strip(), body))
    out: dict[str, ClassSchema] = {}
    for cls, body in items:
        final = cls.startswith("final ")
        name = cls.removeprefix("final ").strip()
        if not name or " " in name:
            raise InvalidArgumentError(f"Kryo class schema for {cls!r}: expected a class name")
        body = body.strip()
        if body.startswith("enum:"):
            constants = tuple(c.strip() for c in body[5:].split(",") if c.strip())
            if not constants:
                raise InvalidArgumentError(f"Kryo class schema for {name}: an enum needs its constants (enum:A,B,C)")
            out[name] = ClassSchema(name, (), True, constants)
            continue
        fields = []
        for f in _split(body, ",") if body else []:
            fname, colon, ftype = f.partition(":")
            if not colon or not fname.strip():
                raise InvalidArgumentError(f"Kryo class schema for {name}: field {f.strip()!r} is not 'name:Type'")
            fields.append((fname.strip(), parse_type(ftype)))
        names = [f for f, _ in fields]
        if len(set(names)) != len(names):
            raise InvalidArgumentError(f"Kryo class schema for {name}: a field is named twice ({names})")
        out[name] = ClassSchema(name, tuple(sorted(fields, key=lambda f: f[0])), final)
    return Schemas(out, {k: "user" for k in out})
