"""Export a flinkstate checkpoint as a canonical Flink savepoint through the store's public read API."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping

import pyarrow as pa
import pyarrow.compute as pc

from flinkstate.core.errors import InvalidArgumentError, StateNotFoundError
from flinkstate.flink.bridge.importer import (
    OPERATOR_ID_PROPERTY,
    SERIALIZERS_PROPERTY,
    node_from_json,
)
from flinkstate.flink.bridge.source import open_store
from flinkstate.flink.files.canonical import KeyedState
from flinkstate.flink.serde.encode import _COMP_CLS, type_for_arrow
from flinkstate.flink.serde.serializers import StateMeta, TypeNode, arrow_type
from flinkstate.flink.write.savepoint_writer import (
    DEFAULT_FLINK_VERSION,
    OperatorExport,
    metadata_version_for,
    write_savepoint,
)
from flinkstate.store.store import CheckpointStore

__all__ = ["export_savepoint"]

_LONG = type_for_arrow(pa.int64(), "ttl")
_VOID = TypeNode("void", "org.apache.flink.runtime.state.VoidNamespaceSerializer$VoidNamespaceSerializerSnapshot")
_MODES = {"list": ("OPERATOR", "SPLIT_DISTRIBUTE"), "union": ("OPERATOR", "UNION"), "broadcast": ("BROADCAST", "BROADCAST")}


def _ns(t: pa.DataType | None, ctx: str) -> TypeNode:
    return _VOID if t is None else type_for_arrow(t, ctx)


def _keyed_meta(desc, ctx: str) -> StateMeta:
    """The Flink StateMetaInfoSnapshot of a flinkstate keyed-state descriptor (TTL wraps each value)."""
    if desc.kind == "map":
        elem = type_for_arrow(desc.user_value_type, ctx)
    else:
        elem = type_for_arrow(desc.value_type, ctx)
    if desc.ttl is not None:
        elem = TypeNode("ttl", _COMP_CLS["ttl"], (_LONG, elem))
    if desc.kind == "map":
        value = TypeNode("map", _COMP_CLS["map"], (type_for_arrow(desc.user_key_type, ctx), elem))
    elif desc.kind == "list":
        value = TypeNode("list", _COMP_CLS["list"], (elem,))
    else:
        value = elem
    return StateMeta(desc.name, "KEY_VALUE", {"KEYED_STATE_TYPE": desc.kind.upper()},
                     {"VALUE_SERIALIZER": value, "NAMESPACE_SERIALIZER": _ns(desc.namespace_type, ctx)})


def _sig(n: TypeNode) -> object:
    """What a serializer means for the data: wrappers by kind, everything else by its Arrow type."""
    if n.kind in ("ttl", "list", "map", "timer", "void"):
        return (n.kind, tuple(_sig(c) for c in n.children))
    return str(arrow_type(n))


def _kept(fresh: TypeNode, stored: dict | None, role: str) -> TypeNode:
    """The serializer an imported state came with when its meaning is unchanged (a POJO stays that POJO), else fresh."""
    if stored is None or role not in stored:
        return fresh
    old = node_from_json(stored[role])
    if old.kind in ("parray", "sarray", "garray") and str(arrow_type(old)) == str(arrow_type(fresh)):
        return old  # an array read back as an Arrow list stays that array (not a List)
    return old if _sig(old) == _sig(fresh) else fresh


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


def _explode(t: pa.Table) -> pa.Table:
    """flinkstate list state (one row per key, a list value) as one row per element, order kept."""
    values = t.column("value").combine_chunks()
    rows = pc.list_parent_indices(values)
    lists = [c for c in ("value", "ttl_timestamp", "ttl_last_access") if c in t.column_names and pa.types.is_list(t.schema.field(c).type)]
    out = t.drop_columns(lists).take(rows)
    for c in lists:  # TTL list state keeps a last-access time per element
        out = out.append_column(c, pc.list_flatten(t.column(c).combine_chunks()))
    return out


def export_savepoint(
    store_or_root: CheckpointStore | str | os.PathLike[str],
    dest: str | os.PathLike[str],
    *,
    checkpoint_id: int | None = None,
    compression: bool = False,
    pojo_classes: Mapping[str, str] | None = None,
    storage_options: dict | None = None,
    flink_version: str = DEFAULT_FLINK_VERSION,
) -> str:
    """Write checkpoint checkpoint_id (default the latest) of a flinkstate store as a canonical Flink savepoint at dest.

    Every state's type is mapped before any file is written (UnsupportedSerializerError names state and type);
    dest holding a savepoint is refused (SavepointExistsError). Returns the savepoint directory.
    flink_version is the Flink release that will restore it ("1.18" ... "2.3", default the newest); others are
    refused by name (UnsupportedFlinkVersionError).
    pojo_classes maps "operator/state" to a Java class name: that state's struct values are written as that POJO
    (Flink's PojoSerializer, fields by name) instead of a Row.
    """
    metadata_version_for(flink_version)  # an unsupported target is refused before anything is read
    pojo_classes = dict(pojo_classes or {})
    store = store_or_root if isinstance(store_or_root, CheckpointStore) else open_store(store_or_root, storage_options)
    ck = store.checkpoint(checkpoint_id)  # pinned: every state below is read from this one checkpoint
    meta = ck.metadata
    cid = meta.info.checkpoint_id
    ops: list[OperatorExport] = []
    for uid, op in meta.operators.items():
        keyed = None
        key_types = [d.key_type for d in op.keyed_states.values()] + [d.key_type for d in op.timer_services.values()]
        kept = json.loads(meta.properties.get(SERIALIZERS_PROPERTY + uid, "{}"))
        if key_types:
            key = type_for_arrow(key_types[0], f"operator {uid!r} key")
            keyed = KeyedState(_kept(key, kept, "key") if "key" in kept else key)
            for name, d in op.keyed_states.items():
                ctx = f"operator {uid!r}, state {name!r}"
                m = _keyed_meta(d, ctx)
                sers = {role: _kept(node, kept.get(name), role) for role, node in m.serializers.items()}
                pojo = pojo_classes.pop(f"{uid}/{name}", None)
                if pojo is not None:
                    sers["VALUE_SERIALIZER"] = _as_pojo(sers["VALUE_SERIALIZER"], pojo, ctx)
                keyed.meta[name] = StateMeta(m.name, m.backend_type, m.options, sers)
                t = ck.scan(uid, name, raw=True).to_arrow()  # stored rows: every entry, last-access times
                if "ttl_timestamp" in t.column_names:
                    t = t.rename_columns(["ttl_last_access" if c == "ttl_timestamp" else c for c in t.column_names])
                if d.kind == "list":
                    t = _explode(t)
                keyed.states[name] = t
            for name, d in op.timer_services.items():
                ctx = f"operator {uid!r}, timer service {name!r}"
                sname = name if name.startswith(f"{d.domain}_") else f"{d.domain}_{name}"  # imported services keep Flink's name
                node = TypeNode("timer", _COMP_CLS["timer"], (type_for_arrow(d.key_type, ctx), _ns(d.namespace_type, ctx)))
                node = _kept(node, kept.get("_timer_state/" + sname), "VALUE_SERIALIZER")
                keyed.meta["_timer_state/" + sname] = StateMeta("_timer_state/" + sname, "PRIORITY_QUEUE", {}, {"VALUE_SERIALIZER": node})
                keyed.timers[sname] = ck.scan_timers(uid, name).to_arrow()
        states = {}
        for name, d in op.operator_states.items():
            ctx = f"operator {uid!r}, operator state {name!r}"
            backend, mode = _MODES[d.mode]
            sers = {"VALUE_SERIALIZER": type_for_arrow(d.value_type, ctx)}
            if d.mode == "broadcast":
                sers["KEY_SERIALIZER"] = type_for_arrow(d.key_type, ctx)
            m = StateMeta(name, backend, {"OPERATOR_STATE_DISTRIBUTION_MODE": mode}, sers)
            states[name] = (mode, ck.scan_operator_state(uid, name).to_arrow(), m)
        flink_id = meta.properties.get(OPERATOR_ID_PROPERTY + uid)
        coordinator = None
        if flink_id is not None and op.has_coordinator:  # only a Flink coordinator's own bytes go back to Flink
            t = ck.scan_coordinator(uid).to_arrow()
            payloads = t.filter(pc.equal(t.column("record_type"), "state")).column("payload").to_pylist()
            coordinator = payloads[0] if payloads else None
        if keyed is None and not states and coordinator is None:
            continue
        ops.append(OperatorExport(uid, op.parallelism or 1, ck.max_parallelism_of(uid), keyed, states, coordinator_state=coordinator,
                                  operator_id=flink_id))  # each operator its own max parallelism, as Flink checks on restore
    if pojo_classes:
        raise StateNotFoundError(f"POJO classes given for keyed states that checkpoint {cid} does not have: {sorted(pojo_classes)}")
    return write_savepoint(os.fspath(dest), ops, checkpoint_id=cid, compression=compression, flink_version=flink_version)
