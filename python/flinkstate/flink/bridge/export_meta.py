"""The Flink serializers an export writes each state of a flinkstate checkpoint with.

An operator imported from Flink keeps what Flink wrote: the import records, per operator, the serializers of its key
and of every keyed, timer, operator and broadcast state, their snapshots' bytes included (`serializer_json`). Export
writes each such state with them, snapshots byte for byte, as long as the state's columns still have the types those
serializers decode to: a Tuple2 stays a Tuple2, an enum that enum, a POJO that POJO, a Row a Row, whether its values
changed or not. A state whose types changed since cannot be written with them: SerializerMismatchError names operator,
state, column, serializer and both types before anything is written. A state flinkstate created (or an operator that
was not imported) gets serializers from its Arrow types (`type_for_arrow`: a struct is a Row, or the POJO class given).
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import pyarrow as pa

from flinkstate.core.errors import InvalidArgumentError
from flinkstate.flink.bridge.serializer_json import (
    OPERATOR_STATE_PREFIX,
    SERIALIZERS_PROPERTY,
    node_from_json,
)
from flinkstate.flink.errors import SerializerMismatchError
from flinkstate.flink.files.canonical import TIMER_PREFIX
from flinkstate.flink.serde.encode import _COMP_CLS, type_for_arrow
from flinkstate.flink.serde.serializers import VOID_NAMESPACE, StateMeta, TypeNode, arrow_type

__all__ = ["Recorded", "key_serializer", "keyed_meta", "operator_meta", "timer_meta"]

_LONG = type_for_arrow(pa.int64(), "ttl")
_VOID = VOID_NAMESPACE
_MODES = {"list": ("OPERATOR", "SPLIT_DISTRIBUTE"), "union": ("OPERATOR", "UNION"), "broadcast": ("BROADCAST", "BROADCAST")}


class Recorded:
    """The serializers an import recorded for one operator (none for an operator flinkstate created)."""

    def __init__(self, properties: Mapping[str, str], uid: str) -> None:
        self.uid = uid
        self._doc: dict = json.loads(properties.get(SERIALIZERS_PROPERTY + uid, "{}"))

    def key(self) -> TypeNode | None:
        """The operator's key serializer as Flink wrote it."""
        return node_from_json(self._doc["key"]) if "key" in self._doc else None

    def state(self, name: str) -> dict[str, TypeNode] | None:
        """A keyed state's or timer service's (`_timer_state/<service>`) serializers by role, in Flink's order."""
        got = self._doc.get(name)
        return None if got is None else {role: node_from_json(d) for role, d in got.items()}

    def operator_state(self, name: str) -> dict[str, TypeNode] | None:
        """An operator (list, union, broadcast) state's serializers by role."""
        return self.state(OPERATOR_STATE_PREFIX + name)


def _same(a: pa.DataType, b: pa.DataType) -> bool:
    return a == b or str(a) == str(b)


def _fits(node: TypeNode, t: pa.DataType | None) -> bool:
    """Whether values of Arrow type t are what this serializer decodes to (so it writes them back)."""
    if t is None:
        return node.kind == "void"
    if _same(arrow_type(node), t):
        return True
    try:  # the same serializer Arrow type t maps to (e.g. a type stored at another unit or width)
        return _same(arrow_type(node), arrow_type(type_for_arrow(t, "check")))
    except (InvalidArgumentError, NotImplementedError):
        return False


def _unttl(node: TypeNode) -> TypeNode:
    return node.children[1] if node.kind == "ttl" else node


def _columns(backend: str, kind: str, sers: Mapping[str, TypeNode]) -> dict[str, TypeNode | None]:
    """Column -> the part of the recorded serializers that writes it (None: no such part)."""
    if backend == "PRIORITY_QUEUE":
        timer = sers.get("VALUE_SERIALIZER")
        return {"key": timer.children[0], "namespace": timer.children[1]} if timer is not None and timer.kind == "timer" else {}
    if backend in ("OPERATOR", "BROADCAST"):
        return {"value": sers.get("VALUE_SERIALIZER"), **({"key": sers.get("KEY_SERIALIZER")} if backend == "BROADCAST" else {})}
    value = sers.get("VALUE_SERIALIZER")
    out: dict[str, TypeNode | None] = {"namespace": sers.get("NAMESPACE_SERIALIZER")}
    if value is None:
        return out
    if kind == "MAP" and value.kind == "map":
        out["user_key"], out["value"] = value.children[0], _unttl(value.children[1])
    elif kind == "LIST" and value.kind == "list":
        out["value"] = _unttl(value.children[0])
    else:
        out["value"] = _unttl(value)
    return out


def _recorded(backend: str, kind: str, roles: tuple[str, ...], recorded: dict[str, TypeNode] | None,
              types: Mapping[str, pa.DataType | None], where: str) -> dict[str, TypeNode] | None:
    """The recorded serializers when every column still fits them (None: nothing recorded); SerializerMismatchError
    naming the column that does not."""
    if recorded is None:
        return None
    parts = _columns(backend, kind, recorded)
    same_roles = set(recorded) == set(roles)
    for column, t in types.items():
        node = parts.get(column)
        if node is None or not same_roles or not _fits(node, t):
            cls = "none" if node is None else node.cls
            had = "no serializer" if node is None else str(arrow_type(node))
            raise SerializerMismatchError(
                f"{where}, column {column!r}: Flink wrote it with serializer {cls} ({had}); it now holds {t}, which that "
                "serializer cannot write (write values of its type; a POJO class given for the state replaces it); nothing was written")
    return dict(recorded)


def key_serializer(key_type: pa.DataType, recorded: Recorded, uid: str) -> TypeNode:
    """The operator's key serializer: Flink's when the key type is the one it decodes to, else from the Arrow type."""
    old = recorded.key()
    if old is None:
        return type_for_arrow(key_type, f"operator {uid!r} key")
    if not _fits(old, key_type):
        raise SerializerMismatchError(f"operator {uid!r}, column 'key': Flink wrote it with serializer {old.cls} ({arrow_type(old)}); "
                                      f"its keys are now {key_type}, which that serializer cannot write; nothing was written")
    return old


def _ns(t: pa.DataType | None, ctx: str) -> TypeNode:
    return _VOID if t is None else type_for_arrow(t, ctx)


def _as_pojo(node: TypeNode, cls: str, ctx: str) -> TypeNode:
    """The value serializer with its struct (inside TTL, list and map wrappers) as the POJO class cls, fields by name."""
    if node.kind == "row":
        order = sorted(range(len(node.names)), key=lambda i: node.names[i])  # Flink's PojoTypeInfo sorts fields by name
        return TypeNode("pojo", cls, tuple(node.children[i] for i in order), tuple(node.names[i] for i in order))
    if node.kind in ("ttl", "map"):
        return TypeNode(node.kind, node.cls, (node.children[0], _as_pojo(node.children[1], cls, ctx)))
    if node.kind == "list":
        return TypeNode("list", node.cls, (_as_pojo(node.children[0], cls, ctx),))
    raise InvalidArgumentError(f"{ctx}: a POJO class was given for it, but its values are not a struct ({node.kind})")


def keyed_meta(desc, recorded: Recorded, uid: str, pojo: str | None = None) -> StateMeta:
    """The StateMetaInfoSnapshot of a keyed state (TTL wraps each value): Flink's serializers for an imported state whose
    types are unchanged, else from its Arrow types (`pojo`: its struct values as that POJO class, which replaces any
    recorded serializer: an explicit change)."""
    ctx = f"operator {uid!r}, state {desc.name!r}"
    options = {"KEYED_STATE_TYPE": desc.kind.upper()}
    if pojo is None:
        types = {"namespace": desc.namespace_type, "value": desc.user_value_type if desc.kind == "map" else desc.value_type}
        if desc.kind == "map":
            types["user_key"] = desc.user_key_type
        kept = _recorded("KEY_VALUE", desc.kind.upper(), ("VALUE_SERIALIZER", "NAMESPACE_SERIALIZER"), recorded.state(desc.name), types, ctx)
        if kept is not None:
            return StateMeta(desc.name, "KEY_VALUE", options, kept)
    elem = type_for_arrow(desc.user_value_type if desc.kind == "map" else desc.value_type, ctx)
    if desc.ttl is not None:
        elem = TypeNode("ttl", _COMP_CLS["ttl"], (_LONG, elem))
    if desc.kind == "map":
        value = TypeNode("map", _COMP_CLS["map"], (type_for_arrow(desc.user_key_type, ctx), elem))
    elif desc.kind == "list":
        value = TypeNode("list", _COMP_CLS["list"], (elem,))
    else:
        value = elem
    if pojo is not None:
        value = _as_pojo(value, pojo, ctx)
    return StateMeta(desc.name, "KEY_VALUE", options, {"VALUE_SERIALIZER": value, "NAMESPACE_SERIALIZER": _ns(desc.namespace_type, ctx)})


def timer_meta(service: str, desc, recorded: Recorded, uid: str) -> StateMeta:
    """The StateMetaInfoSnapshot of a timer service (`_timer_state/<service>`, Flink's name)."""
    ctx = f"operator {uid!r}, timer service {service!r}"
    name = TIMER_PREFIX + service
    kept = _recorded("PRIORITY_QUEUE", "PRIORITY_QUEUE", ("VALUE_SERIALIZER",), recorded.state(name),
                     {"key": desc.key_type, "namespace": desc.namespace_type}, ctx)
    if kept is None:
        kept = {"VALUE_SERIALIZER": TypeNode("timer", _COMP_CLS["timer"], (type_for_arrow(desc.key_type, ctx), _ns(desc.namespace_type, ctx)))}
    return StateMeta(name, "PRIORITY_QUEUE", {}, kept)


def operator_meta(name: str, desc, recorded: Recorded, uid: str) -> tuple[str, StateMeta]:
    """(distribution mode, StateMetaInfoSnapshot) of an operator list, union or broadcast state."""
    ctx = f"operator {uid!r}, operator state {name!r}"
    backend, mode = _MODES[desc.mode]
    types: dict[str, pa.DataType | None] = {"value": desc.value_type}
    roles = ("VALUE_SERIALIZER",)
    if desc.mode == "broadcast":
        types["key"] = desc.key_type
        roles += ("KEY_SERIALIZER",)
    kept = _recorded(backend, backend, roles, recorded.operator_state(name), types, ctx)
    if kept is None:
        kept = {"VALUE_SERIALIZER": type_for_arrow(desc.value_type, ctx)}
        if desc.mode == "broadcast":
            kept["KEY_SERIALIZER"] = type_for_arrow(desc.key_type, ctx)
    return mode, StateMeta(name, backend, {"OPERATOR_STATE_DISTRIBUTION_MODE": mode}, kept)
