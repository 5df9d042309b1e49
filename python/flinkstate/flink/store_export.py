"""Export a flinkstate checkpoint as a canonical Flink savepoint through the store's public read API."""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.compute as pc

from flinkstate.flink.canonical import KeyedState
from flinkstate.flink.encode import _COMP_CLS, type_for_arrow
from flinkstate.flink.savepoint_writer import OperatorExport, write_savepoint
from flinkstate.flink.serializers import StateMeta, TypeNode
from flinkstate.store import CheckpointStore, open_store

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


def _explode(t: pa.Table) -> pa.Table:
    """flinkstate list state (one row per key, a list value) as one row per element, order kept."""
    values = t.column("value").combine_chunks()
    rows = pc.list_parent_indices(values)
    out = t.drop_columns(["value"]).take(rows)
    return out.append_column("value", pc.list_flatten(values))


def export_savepoint(
    store_or_root: CheckpointStore | str | os.PathLike[str],
    dest: str | os.PathLike[str],
    *,
    checkpoint_id: int | None = None,
    compression: bool = False,
    storage_options: dict | None = None,
) -> str:
    """Write checkpoint checkpoint_id (default the latest) of a flinkstate store as a canonical Flink savepoint at dest.

    Every state's type is mapped before any file is written (UnsupportedSerializerError names state and type);
    dest holding a savepoint is refused (SavepointExistsError). Returns the savepoint directory.
    """
    store = store_or_root if isinstance(store_or_root, CheckpointStore) else open_store(store_or_root, storage_options)
    meta = store.metadata(checkpoint_id)
    cid = meta.info.checkpoint_id
    maxp = meta.info.max_parallelism
    ops: list[OperatorExport] = []
    for uid, op in meta.operators.items():
        keyed = None
        key_types = [d.key_type for d in op.keyed_states.values()] + [d.key_type for d in op.timer_services.values()]
        if key_types:
            keyed = KeyedState(type_for_arrow(key_types[0], f"operator {uid!r} key"))
            for name, d in op.keyed_states.items():
                ctx = f"operator {uid!r}, state {name!r}"
                keyed.meta[name] = _keyed_meta(d, ctx)
                t = store.read_state(uid, name, cid)
                if "ttl_timestamp" in t.column_names:
                    t = t.rename_columns(["ttl_last_access" if c == "ttl_timestamp" else c for c in t.column_names])
                if d.kind == "list":
                    t = _explode(t)
                keyed.states[name] = t
            for name, d in op.timer_services.items():
                ctx = f"operator {uid!r}, timer service {name!r}"
                sname = f"{d.domain}_{name}"
                node = TypeNode("timer", _COMP_CLS["timer"], (type_for_arrow(d.key_type, ctx), _ns(d.namespace_type, ctx)))
                keyed.meta["_timer_state/" + sname] = StateMeta("_timer_state/" + sname, "PRIORITY_QUEUE", {}, {"VALUE_SERIALIZER": node})
                keyed.timers[sname] = store.read_timers(uid, name, cid)
        states = {}
        for name, d in op.operator_states.items():
            ctx = f"operator {uid!r}, operator state {name!r}"
            backend, mode = _MODES[d.mode]
            sers = {"VALUE_SERIALIZER": type_for_arrow(d.value_type, ctx)}
            if d.mode == "broadcast":
                sers["KEY_SERIALIZER"] = type_for_arrow(d.key_type, ctx)
            m = StateMeta(name, backend, {"OPERATOR_STATE_DISTRIBUTION_MODE": mode}, sers)
            states[name] = (mode, store.read_operator_state(uid, name, cid), m)
        if keyed is None and not states:
            continue
        ops.append(OperatorExport(uid, op.parallelism or 1, maxp, keyed, states))
    return write_savepoint(os.fspath(dest), ops, checkpoint_id=cid, compression=compression)
