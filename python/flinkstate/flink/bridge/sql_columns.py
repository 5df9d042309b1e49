"""A SQL job's imported state by its columns: read back decoded and named, and written as BinaryRowData.

A SQL operator's state imported into a flinkstate root is stored as Flink wrote it (BinaryRowData bytes, so key
groups and an export stay exact), with each state's serializers, SQL types included, in the checkpoint's
`flink.serializers.<operator>` property. `read_sql_state` reads such a state with every RowData decoded to struct
columns (named from the job's compiled plan, as a savepoint read in place names them); `sql_columns` finds the types
for one state; a write that gives keys, map keys or values as struct columns (a Spark delete or upsert) is encoded by
`SqlColumns.encode` before it is stored, and its key groups are then Flink's (murmur of the encoded row's hash).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pyarrow as pa

from flinkstate.core.errors import SchemaMismatchError, StateNotFoundError
from flinkstate.flink.bridge.importer import SERIALIZERS_PROPERTY, node_from_json
from flinkstate.flink.serde.rowdata import encode_rows, row_type
from flinkstate.flink.serde.serializers import TypeNode
from flinkstate.flink.serde.sqltypes import SqlType, sql_arrow_type

__all__ = ["SqlColumns", "sql_columns", "read_sql_state", "read_sql_timers"]


def _row(node: TypeNode | None) -> SqlType | None:
    return row_type(node.sql) if node is not None and node.kind == "rowdata" and node.sql else None


def _unwrap(node: TypeNode | None) -> TypeNode | None:
    """A TTL wrapper's value serializer (children: timestamp, value), else the node."""
    return node.children[1] if node is not None and node.kind == "ttl" else node


@dataclass(frozen=True)
class SqlColumns:
    """The ROW types of one state's RowData parts (None: that part is not RowData)."""

    key: SqlType | None = None
    user_key: SqlType | None = None
    value: SqlType | None = None
    list_value: bool = False  # a map state's values are lists of rows (Top-N); a list state's rows are its elements

    def column_type(self, name: str, stored: pa.DataType, given: pa.DataType | None = None) -> pa.DataType:
        """The type a write gives column `name` in: a struct for a RowData part (fields by position: named as the
        `given` struct's when it has as many, since a savepoint keeps no names), else the stored type."""
        row = {"key": self.key, "user_key": self.user_key, "value": self.value}.get(name)
        if row is None:
            return stored
        if given is not None and pa.types.is_list(given) and name == "value":
            given = given.value_type
        if given is not None and pa.types.is_struct(given) and given.num_fields == len(row.children):
            row = row.with_names(tuple(f.name for f in given))
        return pa.list_(sql_arrow_type(row)) if name == "value" and self.list_value else sql_arrow_type(row)

    def encode(self, table: pa.Table, what: str) -> pa.Table:
        """table with its struct key, user_key and value columns encoded to BinaryRowData bytes."""
        for name, row in (("key", self.key), ("user_key", self.user_key), ("value", self.value)):
            if row is None or name not in table.column_names:
                continue
            col = table.column(name).combine_chunks()
            if pa.types.is_binary(col.type) or pa.types.is_large_binary(col.type):
                continue  # already BinaryRowData bytes
            try:
                if pa.types.is_list(col.type) or pa.types.is_large_list(col.type):  # lists of rows
                    flat = encode_rows(col.flatten(), row)
                    offsets = pa.array(pa.compute.subtract(col.offsets, col.offsets[0]).to_numpy(), pa.int32())
                    encoded: pa.Array = pa.ListArray.from_arrays(offsets, flat, mask=col.is_null() if col.null_count else None)
                else:
                    encoded = encode_rows(col, row)
            except (pa.ArrowException, TypeError, ValueError, OverflowError) as e:
                raise SchemaMismatchError(f"{what}: column {name!r} ({col.type}) is not a row of the SQL type {row}: {e}") from e
            table = table.set_column(table.column_names.index(name), name, encoded)
        return table


def sql_columns(properties: Mapping[str, str], operator: str, state: str) -> SqlColumns | None:
    """The SQL types of a state imported from a SQL job (its operator's serializers property), None for other states."""
    raw = properties.get(SERIALIZERS_PROPERTY + operator)
    if not raw:
        return None
    kept = json.loads(raw)
    key = _row(node_from_json(kept["key"])) if kept.get("key") else None
    sers = kept.get(state) or {}
    value = _unwrap(node_from_json(sers["VALUE_SERIALIZER"])) if sers.get("VALUE_SERIALIZER") else None
    user_key = None
    list_value = False
    if value is not None and value.kind == "map":
        user_key = _row(value.children[0])
        value = _unwrap(value.children[1])
        if value is not None and value.kind == "list":
            list_value = True
            value = _unwrap(value.children[0])
    elif value is not None and value.kind == "list":
        value = _unwrap(value.children[0])
    out = SqlColumns(key, user_key, _row(value), list_value and _row(value) is not None)
    return out if (out.key or out.user_key or out.value) else None


_KINDS = {"ValueStateDescriptor": "VALUE", "ListStateDescriptor": "LIST", "MapStateDescriptor": "MAP"}


def read_sql_state(store: Any, operator: str, state: str, *, sql_plan: str | os.PathLike[str] | None = None,
                   checkpoint_id: int | None = None, **read: Any) -> pa.Table:
    """A state a flinkstate root imported from a SQL job, read as `store.read_state` reads it (read: keys, raw, flatten,
    ...) with every RowData in its key, namespace, map key and value decoded to struct columns: named from the job's
    compiled plan at sql_plan (as `flinkstate.open(savepoint, sql_plan=...)` names them), else f0..fn. A state that
    was not imported from a SQL job is returned as stored."""
    from flinkstate.flink.sql.decoders import SqlDecoder

    ck = store.checkpoint(checkpoint_id)
    table = store.read_state(operator, state, checkpoint_id=ck.checkpoint_id, **read)
    raw = ck.metadata.properties.get(SERIALIZERS_PROPERTY + operator)
    if not raw:
        return table
    kept = json.loads(raw)
    sers = kept.get(state)
    desc = ck.operators[operator].keyed_states.get(state) if operator in ck.operators else None
    if not sers or desc is None or not kept.get("key"):
        raise StateNotFoundError(f"operator {operator!r} has no imported SQL state {state!r}")
    kind = _KINDS.get(type(desc).__name__, "VALUE")
    value = node_from_json(sers["VALUE_SERIALIZER"])
    elem = value.children[1] if kind == "MAP" else value.children[0] if kind == "LIST" else value
    if elem.kind == "ttl":
        elem = elem.children[1]
    inner = SimpleNamespace(meta=None, ctx=f"operator {operator!r}, state {state!r}", kind=kind, ttl=False, unreadable=None,
                            raw_error=None, key_node=node_from_json(kept["key"]), value_node=value, elem_node=elem,
                            ns_node=node_from_json(sers["NAMESPACE_SERIALIZER"]) if sers.get("NAMESPACE_SERIALIZER") else None,
                            table=lambda raw_values=False: table)
    names = _names(sql_plan, operator, state, inner)
    if kind == "LIST" and (read.get("raw") or read.get("flatten") is False):  # a list per key
        inner.elem_node = TypeNode("list", "", (elem,))
    return SqlDecoder(inner, names).table()


def _names(sql_plan: str | os.PathLike[str] | None, operator: str, state: str, inner: Any) -> Any:
    from flinkstate.flink.sql.decoders import SqlNames

    if sql_plan is None:
        return SqlNames()
    from flinkstate.flink.sql.plan import load_plan

    return load_plan(os.fspath(sql_plan)).naming(SimpleNamespace(name=operator, uid=operator), state, inner)


def read_sql_timers(store: Any, operator: str, service: str, *, sql_plan: str | os.PathLike[str] | None = None,
                    checkpoint_id: int | None = None) -> pa.Table:
    """A timer service a root imported from a SQL job, its keys decoded to the operator's key columns (named from the
    plan at sql_plan: the key of the operator's states)."""
    from flinkstate.flink.sql.decoders import SqlTimerDecoder

    ck = store.checkpoint(checkpoint_id)
    table = store.read_timers(operator, service, checkpoint_id=ck.checkpoint_id)
    raw = ck.metadata.properties.get(SERIALIZERS_PROPERTY + operator)
    kept = json.loads(raw) if raw else {}
    if not kept.get("key"):
        return table
    key = node_from_json(kept["key"])
    states = [s for s in kept if s != "key"]
    names = _names(sql_plan, operator, states[0], SimpleNamespace(kind="VALUE", key_node=key, elem_node=None, value_node=None)) \
        if states else None
    inner = SimpleNamespace(meta=None, ctx=f"operator {operator!r}, timer service {service!r}", key_node=key, ns_node=None,
                            table=lambda: table)
    from flinkstate.flink.sql.decoders import SqlNames

    return SqlTimerDecoder(inner, SqlNames(key=names.key if names is not None else None)).table()
