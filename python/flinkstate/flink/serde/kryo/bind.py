"""Kryo serializers in a state's serializer tree: bound to what reads them, typed by the values they hold.

A `KryoSerializerSnapshot` parses as an opaque node (its payload kept). A read binds each such node of a state
(`bind_state`) to a `kryo` node: the Kryo generation of the Flink release that wrote the savepoint (Kryo 2 for Flink 1.x,
`_metadata` v4 and older; Kryo 5 for 2.x), the class schemas the read knows (`KryoOptions.schemas`, as spec text in
`logical`) and, once known, the shape of its values (its one child; see `shapes`). Values are read as tagged trees
(`decode`) and, with a shape, as the Python values of its Arrow type. A node without a shape yet is typed by the values a
table holds (`settle`): a load reads the first values of each such state and keeps their shapes in `KryoOptions.shapes`
(by operator id, state and the node's path in the state's serializers), so every read of that state gives one type.
A value that does not fit its state's shape, a class without a schema, a custom Kryo serializer: a `KryoDecodeError`
naming operator, state and class.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from flinkstate.flink.errors import KryoDecodeError
from flinkstate.flink.serde.kryo.decode import KryoDecoder, KryoUndecodable
from flinkstate.flink.serde.kryo.registry import parse_kryo_snapshot
from flinkstate.flink.serde.kryo.schema import ClassSchema, Schemas, parse_class_specs
from flinkstate.flink.serde.kryo.shapes import NULL_SHAPE, ShapeError, from_plain, merge, shape_of, to_plain
from flinkstate.flink.serde.kryo.wire import WireError
from flinkstate.flink.serde.kryo.write import KryoEncoder
from flinkstate.flink.serde.serializers import StateMeta, TypeNode

__all__ = ["KRYO_SNAPSHOT", "KryoOptions", "bind_state", "generation_for", "is_kryo", "kryo_reader",
           "kryo_writer", "kryo_paths", "learnt", "settle", "spec_of", "with_shapes"]

KRYO_SNAPSHOT = "org.apache.flink.api.java.typeutils.runtime.kryo.KryoSerializerSnapshot"
_KRYO5_OF_1X = "org.apache.flink.api.java.typeutils.runtime.kryo5.KryoSerializerSnapshot"  # Flink 1.18-1.20's opt-in Kryo 5


def generation_for(metadata_version: int, cls: str = KRYO_SNAPSHOT) -> int:
    """The Kryo that wrote a KryoSerializerSnapshot's values: 2 in Flink 1.x (`_metadata` v4 and older, which also has
    the opt-in `kryo5` snapshot), 5 in Flink 2.x (v5 and newer)."""
    if cls == _KRYO5_OF_1X:
        return 5
    return 2 if metadata_version <= 4 else 5


def is_kryo(node: TypeNode) -> bool:
    """An unbound Kryo serializer (its snapshot parsed, its values not yet readable)."""
    return node.kind == "opaque" and node.cls in (KRYO_SNAPSHOT, _KRYO5_OF_1X)


def spec_of(s: ClassSchema) -> str:
    """A class schema as `--kryo-class` spec text."""
    if s.constants is not None:
        return f"{s.name}=enum:{','.join(s.constants)}"
    return ("final " if s.final else "") + f"{s.name}=" + ",".join(f"{n}:{t}" for n, t in s.fields)


@dataclass(frozen=True)
class KryoOptions:
    """How a read decodes Kryo values: the Kryo generation of the savepoint (0: unknown, values stay bytes), the class
    schemas (user classes by their fields, enums by their constants), and the shapes learnt per state (picklable)."""

    gen: int = 0
    schemas: Schemas = field(default_factory=Schemas)
    shapes: Mapping[tuple[str, str, str], TypeNode] = field(default_factory=dict)  # (operator id, state, path) -> shape
    # (operator id, state, path) -> why the node's values stay bytes (a class without a schema seen in the first values)
    as_bytes: Mapping[tuple[str, str, str], str] = field(default_factory=dict)
    # of those, the parts whose class has a schema the user gave that the values do not fit (an argument to correct)
    misfits: frozenset[tuple[str, str, str]] = frozenset()

    def specs(self) -> tuple[str, ...]:
        return tuple(sorted(spec_of(s) for s in self.schemas.classes.values()))


def _bound(node: TypeNode, gen: int, specs: tuple[str, ...], shape: TypeNode | None) -> TypeNode:
    return TypeNode("kryo", node.cls, () if shape is None else (shape,), node.names, payload=node.payload, params=(gen,),
                    logical=specs)


def kryo_paths(node: TypeNode, path: str) -> Iterator[tuple[str, TypeNode]]:
    """(path, node) of every Kryo serializer in a serializer tree (paths: the root's, then '/i' per child index)."""
    if is_kryo(node) or node.kind == "kryo":
        yield path, node
        return
    for i, c in enumerate(node.children):
        yield from kryo_paths(c, f"{path}/{i}")


def _replace(node: TypeNode, path: str, fn: Callable[[str, TypeNode], TypeNode]) -> TypeNode:
    if is_kryo(node) or node.kind == "kryo":
        return fn(path, node)
    if not node.children:
        return node
    kids = tuple(_replace(c, f"{path}/{i}", fn) for i, c in enumerate(node.children))
    return node if kids == node.children else dataclasses.replace(node, children=kids)


def bind_state(meta: StateMeta, key_type: TypeNode, options: KryoOptions | None, op_id: str) -> tuple[StateMeta, TypeNode]:
    """meta with every Kryo serializer of its values bound (generation, schemas, the shape learnt for it, if any), and
    the key type as it is; a node whose first values had a class without a schema stays unbound (bytes where framed)."""
    if options is None or options.gen == 0:
        return meta, key_type
    specs = options.specs()

    def bind(state: str) -> Callable[[str, TypeNode], TypeNode]:
        def fn(path: str, node: TypeNode) -> TypeNode:
            if node.kind == "kryo":
                return node
            why = options.as_bytes.get((op_id, state, path))
            if why is not None:  # its values stay bytes: the node says why (messages) and which Kryo wrote them (migration)
                return dataclasses.replace(node, logical=(why,), params=(options.gen,))
            return _bound(node, options.gen, specs, options.shapes.get((op_id, state, path)))
        return fn

    if meta.backend_type == "PRIORITY_QUEUE":
        return meta, key_type  # timers: their keys and namespaces are the operator's key and namespace types
    sers = {role: _replace(n, role, bind(meta.name)) for role, n in meta.serializers.items()}
    # keys stay as they are: a key's key group is its Java hashCode, which a Kryo value's columns do not give
    return (meta if sers == meta.serializers else dataclasses.replace(meta, serializers=sers)), key_type


def _decoder(node: TypeNode) -> tuple[KryoDecoder, Schemas]:
    gen = node.params[0]
    regs = parse_kryo_snapshot(node.payload, f"Kryo serializer snapshot of {node.names[0] if node.names else '?'}")
    schemas = parse_class_specs(node.logical)
    return KryoDecoder(gen, regs.ids(gen), schemas, regs.custom()), schemas


def kryo_reader(node: TypeNode, ctx: str) -> Callable[[bytes, int], tuple[Any, int]]:
    """A reader (buf, pos) -> (value, pos) of a bound Kryo node: the value's tagged tree, or with a shape its column value."""
    dec, _ = _decoder(node)
    shape = node.children[0] if node.children else None
    declared = node.names[0] if node.names else "?"

    def read(buf: bytes, pos: int) -> tuple[Any, int]:
        try:
            tagged, end = dec.read(buf, pos)
        except KryoUndecodable as e:
            raise KryoDecodeError(f"{ctx}: a Kryo value (KryoSerializer of {declared}) cannot be read: {e}", e.cls, declared) from e
        except (WireError, IndexError, UnicodeDecodeError) as e:
            raise KryoDecodeError(f"{ctx}: bytes at offset {pos} do not decode as a Kryo {declared} (Kryo "
                                  f"{dec.gen}): {e}; a class schema that does not match the class?", declared, declared) from e
        if shape is None:
            return tagged, end
        try:
            return to_plain(tagged, shape), end
        except ShapeError as e:
            raise KryoDecodeError(f"{ctx}: a Kryo value (KryoSerializer of {declared}) is not of the type this state's first values "
                                  f"had: {e}", tagged[0] if tagged else declared, declared) from e

    return read


def kryo_writer(node: TypeNode, ctx: str) -> Callable[[bytearray, Any], None]:
    """A writer (out, column value) of a bound Kryo node with a shape: the bytes its Flink's KryoSerializer writes."""
    if not node.children:
        raise KryoDecodeError(f"{ctx}: Kryo values of {node.names[0] if node.names else '?'} have no known type: "
                              "they cannot be written from columns", node.names[0] if node.names else "?")
    gen = node.params[0]
    regs = parse_kryo_snapshot(node.payload, ctx)
    enc = KryoEncoder(gen, regs.ids(gen), parse_class_specs(node.logical))
    shape = node.children[0]

    def write(out: bytearray, v: Any) -> None:
        try:
            out += enc.write(from_plain(v, shape, ctx))
        except (ShapeError, KryoUndecodable) as e:
            raise KryoDecodeError(f"{ctx}: {e}", shape.cls) from e

    return write


# -- typing the values of a table --------------------------------------------------------------------------------------

def _walk(node: TypeNode, value: Any, path: str, out: dict[str, list[Any]]) -> None:
    """Collect the tagged trees under each unshaped Kryo node of node's value (Python values as `values` reads them)."""
    if value is None:
        return
    kind = node.kind
    if kind == "kryo":
        if not node.children:
            out.setdefault(path, []).append(value)
        return
    if kind in ("pojo", "row", "tuple"):
        for i, (name, c) in enumerate(zip(node.names, node.children, strict=True)):
            _walk(c, value.get(name), f"{path}/{i}", out)
    elif kind in ("list", "parray", "sarray", "garray", "set"):
        for x in value:
            _walk(node.children[0], x, f"{path}/0", out)
    elif kind == "map":
        for k, x in value:
            _walk(node.children[0], k, f"{path}/0", out)
            _walk(node.children[1], x, f"{path}/1", out)
    elif kind == "ttl":
        _walk(node.children[1], value[1], f"{path}/1", out)
    elif kind == "nullable":
        _walk(node.children[0], value, f"{path}/0", out)


def _convert(node: TypeNode, value: Any) -> Any:
    """value with every Kryo node's tagged trees turned into the column values of its (now known) shape."""
    if value is None:
        return None
    kind = node.kind
    if kind == "kryo":
        return to_plain(value, node.children[0]) if node.children else value
    if kind in ("pojo", "row", "tuple"):
        return {name: _convert(c, value.get(name)) for name, c in zip(node.names, node.children, strict=True)}
    if kind in ("list", "parray", "sarray", "garray", "set"):
        return [_convert(node.children[0], x) for x in value]
    if kind == "map":
        return [(_convert(node.children[0], k), _convert(node.children[1], x)) for k, x in value]
    if kind == "ttl":
        return (value[0], _convert(node.children[1], value[1]))
    if kind == "nullable":
        return _convert(node.children[0], value)
    return value


def _unshaped(node: TypeNode | None) -> bool:
    return node is not None and any(n.kind == "kryo" and not n.children for _, n in kryo_paths(node, ""))


def settle(node: TypeNode, values: list[Any], ctx: str) -> tuple[TypeNode, list[Any]]:
    """Type the unshaped Kryo nodes of node by the values read (tagged trees inside them): node with their shapes, and
    the values as column values. A value no shape holds together with the others is a KryoDecodeError naming it."""
    if not _unshaped(node):
        return node, values
    found: dict[str, list[Any]] = {}
    for v in values:
        _walk(node, v, "", found)

    def shape_for(path: str, n: TypeNode) -> TypeNode:
        if n.kind != "kryo" or n.children:
            return n
        schemas = parse_class_specs(n.logical)
        shape = NULL_SHAPE
        for tagged in found.get(path, ()):
            try:
                shape = merge(shape, shape_of(tagged, schemas))
            except ShapeError as e:
                raise KryoDecodeError(f"{ctx}: its Kryo values (declared {n.names[0] if n.names else '?'}) do not make "
                                      f"one column type: {e}", tagged[0] if tagged else "?") from e
        return dataclasses.replace(n, children=(shape,))

    typed = _replace(node, "", shape_for)
    try:
        return typed, [_convert(typed, v) for v in values]
    except ShapeError as e:  # cannot happen: every value's shape was merged in
        raise KryoDecodeError(f"{ctx}: {e}", "?") from e


def with_shapes(meta: StateMeta, key_type: TypeNode, shapes: Mapping[str, TypeNode]) -> tuple[StateMeta, TypeNode]:
    """meta and the key type with the bound Kryo nodes at these paths given these shapes."""
    def fn(path: str, node: TypeNode) -> TypeNode:
        shape = shapes.get(path)
        return node if shape is None or node.kind != "kryo" else dataclasses.replace(node, children=(shape,))

    sers = {role: _replace(n, role, fn) for role, n in meta.serializers.items()}
    return dataclasses.replace(meta, serializers=sers), _replace(key_type, "KEY", fn)


def learnt(node: TypeNode | None, root: str) -> dict[str, TypeNode]:
    """The shapes of node's bound Kryo nodes by their paths under root (for `KryoOptions.shapes`)."""
    if node is None:
        return {}
    return {root + path: n.children[0] for path, n in kryo_paths(node, "") if n.kind == "kryo" and n.children}
