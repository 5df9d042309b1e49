"""Compare what flinkstate reads from DataStreamStatesJob's savepoints with the dump real Flink writes of them.

The dump (`DataStreamStatesJob dump`, flinkjobs/src) has one JSON line per keyed value, list, map entry, timer and
operator-state element, written from the state real Flink restored with the savepoint's own serializers. This module
writes the same lines from flinkstate's reads (`read_state(raw=True)`, `read_timers`, `read_operator_state`), so the
two compare as multisets of lines: temporal values as integers (epoch days, nanoseconds of the day, epoch ms or ns),
byte arrays and values kept as bytes as hex, maps as [key, value] pairs sorted by the key's JSON, sets sorted.
"""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa

from flinkstate.flink.serde.serializers import TypeNode

__all__ = ["dump_lines", "flinkstate_lines", "differences", "type_nodes", "without"]


def dump_lines(path: Path) -> Counter[str]:
    """The dump's lines (a .gz file too), each as canonical JSON (keys sorted)."""
    raw = path.read_bytes()
    text = gzip.decompress(raw).decode("utf-8") if path.suffix == ".gz" else raw.decode("utf-8")
    return Counter(_canon_line(json.loads(line)) for line in text.splitlines() if line.strip())


def _canon_line(d: dict[str, Any]) -> str:
    return json.dumps(d, sort_keys=True, ensure_ascii=True)


def _int_type(t: pa.DataType) -> pa.DataType:
    """t with every temporal type replaced by its integer (what the dump writes)."""
    if pa.types.is_timestamp(t) or pa.types.is_time64(t) or pa.types.is_date64(t):
        return pa.int64()
    if pa.types.is_date32(t) or pa.types.is_time32(t):
        return pa.int32()
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, _int_type(f.type)) for f in t])
    if pa.types.is_map(t):
        return pa.map_(_int_type(t.key_type), _int_type(t.item_type))
    if pa.types.is_large_list(t):
        return pa.large_list(_int_type(t.value_type))
    if pa.types.is_list(t):
        return pa.list_(_int_type(t.value_type))
    return t


def _pylist(col: pa.ChunkedArray | pa.Array) -> list[Any]:
    return col.cast(_int_type(col.type)).to_pylist()


def _child(node: TypeNode | None, i: int) -> TypeNode | None:
    if node is None or node.kind not in ("row", "tuple", "pojo", "list", "parray", "garray", "set", "map", "ttl", "nullable",
                                         "transparent"):
        return None
    if node.kind == "ttl":
        return node.children[1]
    return node.children[i] if i < len(node.children) else None


def _has_kryo(node: TypeNode) -> bool:
    return node.kind == "kryo" or any(_has_kryo(c) for c in node.children if isinstance(c, TypeNode))


def _kryo_hex(v: Any, node: TypeNode) -> str:
    """A value whose serializer holds a Kryo part that flinkstate decodes to typed columns, serialized again with that
    serializer (the Kryo part by the Kryo that wrote it): the dump writes such values as the hex of Flink's bytes."""
    from flinkstate.flink.serde.encode import make_writer

    out = bytearray()
    make_writer(node, "dump")(out, v)
    return bytes(out).hex()


def _canon(v: Any, t: pa.DataType, node: TypeNode | None) -> Any:
    """A decoded value as the dump writes it (node: its serializer, where known: sets are sorted)."""
    if node is not None and node.kind in ("nullable", "transparent"):
        return _canon(v, t, node.children[0])
    if node is not None and node.kind == "ttl":  # the value (its last-access time is a column of its own)
        return _canon(v, t, node.children[1])
    if v is None:
        return None
    if node is not None and node.kind in ("row", "tuple", "pojo") and _has_kryo(node):
        return _kryo_hex(v, node)
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).hex()
    if pa.types.is_map(t):
        pairs = [[_canon(k, t.key_type, _child(node, 0)), _canon(x, t.item_type, _child(node, 1))] for k, x in v]
        return sorted(pairs, key=lambda p: json.dumps(p[0], ensure_ascii=True))
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        out = [_canon(x, t.value_type, _child(node, 0)) for x in v]
        if node is not None and node.kind == "set":
            out.sort(key=lambda x: json.dumps(x, ensure_ascii=True))
        return out
    if pa.types.is_struct(t):
        kids = node.kind in ("row", "tuple", "pojo") if node is not None else False
        return {f.name: _canon(v[f.name], f.type, node.children[i] if kids and node is not None else None) for i, f in enumerate(t)}
    if isinstance(v, float) and v == int(v) and abs(v) < 1e15:
        return float(v)
    return v


def type_nodes(meta: Any, uid: str) -> dict[str, dict[str, TypeNode]]:
    """Per keyed state of an operator (Flink names), its serializers (key, namespace, value) from a subtask's header."""
    from flinkstate.flink.bridge.mapping import subtask_range, subtask_states

    op = meta.operator(uid)
    for sub in op.subtasks:
        if subtask_range(sub) is not None:
            return {name: {"KEY": dec.key_node, **dec.meta.serializers} for name, dec in subtask_states(meta, op, sub).items()}
    return {}


def flinkstate_lines(read: Any, operators: list[str], nodes: dict[str, dict[str, dict[str, TypeNode]]],
                     refused: dict[str, str] | None = None) -> Counter[str]:
    """Every state of these operators as read through `read` (a FlinkSource or a flinkstate store), as dump lines; a
    state that is refused when read (a typed UnsupportedSerializerError) is named in `refused` instead."""
    from flinkstate.flink.errors import UnsupportedSerializerError

    out: Counter[str] = Counter()
    ck = read.checkpoint()
    for op in operators:
        if op not in ck.operators:
            continue
        om = ck.operators[op]
        for state, desc in om.keyed_states.items():
            sers = nodes.get(op, {}).get(state, {})
            value_node = sers.get("VALUE_SERIALIZER")
            try:
                t = read.read_state(op, state, raw=True)
            except UnsupportedSerializerError as e:
                if refused is None:
                    raise
                refused[f"{op}/{state}"] = str(e)
                continue
            ttl = "ttl_timestamp" in t.column_names
            key_t, key_node = t.schema.field("key").type, sers.get("KEY")
            keys = [_canon(k, key_t, key_node) for k in _pylist(t.column("key"))]
            nss = _pylist(t.column("namespace")) if "namespace" in t.column_names else [None] * t.num_rows
            ns_t = t.schema.field("namespace").type if "namespace" in t.column_names else pa.null()
            ns_node = sers.get("NAMESPACE_SERIALIZER")
            kgs = t.column("key_group").to_pylist()
            values = _pylist(t.column("value"))
            value_t = t.schema.field("value").type
            ttls = t.column("ttl_timestamp").to_pylist() if ttl else [None] * t.num_rows
            uks = _pylist(t.column("user_key")) if "user_key" in t.column_names else None
            kind = desc.kind
            for i in range(t.num_rows):
                line: dict[str, Any] = {"op": op, "state": state, "kg": kgs[i], "key": keys[i], "ns": _canon(nss[i], ns_t, ns_node)}
                if kind == "list":
                    elem_node = _child(value_node, 0)
                    elems = [_canon(x, value_t.value_type, elem_node) for x in values[i]]
                    if ttl:
                        elems = [{"ttl": ts, "value": x} for ts, x in zip(ttls[i], elems, strict=True)]
                    line["value"] = elems
                else:
                    node = value_node
                    if kind == "map":
                        line["uk"] = _canon(uks[i], t.schema.field("user_key").type, _child(value_node, 0))
                        node = _child(value_node, 1)
                    v = _canon(values[i], value_t, node)
                    line["value"] = {"ttl": ttls[i], "value": v} if ttl else v
                out[_canon_line(line)] += 1
        for service in om.timer_services:
            try:
                tt = read.read_timers(op, service)
            except UnsupportedSerializerError as e:
                if refused is None:
                    raise
                refused[f"{op}/{service}"] = str(e)
                continue
            if not tt.num_rows:
                continue
            key_t = tt.schema.field("key").type
            nss = _pylist(tt.column("namespace")) if "namespace" in tt.column_names else [None] * tt.num_rows
            ns_t = tt.schema.field("namespace").type if "namespace" in tt.column_names else pa.null()
            for kg, k, ns, ts in zip(tt.column("key_group").to_pylist(), _pylist(tt.column("key")), nss,
                                     tt.column("timestamp").to_pylist(), strict=True):
                out[_canon_line({"op": op, "timer": service, "kg": kg, "key": _canon(k, key_t, None), "ns": _canon(ns, ns_t, None),
                                 "ts": ts})] += 1
        for state, desc in om.operator_states.items():
            ot = read.read_operator_state(op, state)
            value_t = ot.schema.field("value").type
            subtasks = ot.column("subtask").to_pylist()
            values = _pylist(ot.column("value"))
            if desc.mode == "broadcast":
                key_t = ot.schema.field("key").type
                first = min(subtasks) if subtasks else 0
                for s, k, v in zip(subtasks, _pylist(ot.column("key")), values, strict=True):
                    if s == first:
                        out[_canon_line({"op": op, "state": state, "mode": "broadcast", "key": _canon(k, key_t, None),
                                         "value": _canon(v, value_t, None)})] += 1
                continue
            for v in values:
                out[_canon_line({"op": op, "state": state, "mode": "union" if desc.mode == "union" else "split",
                                 "value": _canon(v, value_t, None)})] += 1
    return out


def without(lines: Counter[str], states: set[str]) -> Counter[str]:
    """The lines of every state but these ("operator/state")."""
    out: Counter[str] = Counter()
    for line, n in lines.items():
        d = json.loads(line)
        if f"{d['op']}/{d.get('state') or d.get('timer')}" not in states:
            out[line] = n
    return out


def differences(want: Counter[str], got: Counter[str], limit: int = 8) -> str:
    """A readable account of two line multisets' differences ('' when equal)."""
    missing, extra = want - got, got - want
    if not missing and not extra:
        return ""
    by_state: Counter[str] = Counter()
    for line in list(missing) + list(extra):
        d = json.loads(line)
        by_state[f"{d['op']}/{d.get('state') or d.get('timer')}"] += 1
    parts = [f"{len(missing)} dump lines not read, {len(extra)} lines read that the dump lacks; by state: {dict(by_state)}"]
    parts += [f"- {line[:400]}" for line in list(missing)[:limit]]
    parts += [f"+ {line[:400]}" for line in list(extra)[:limit]]
    return "\n".join(parts)
