"""Flink SQL operators' state seen by its columns: BinaryRowData keys, values, map keys and list elements decoded.

The table runtime keeps a SQL operator's keys and values as RowData (`RowDataSerializer` snapshots list each field's
SQL type); the decoders of `flink.files` keep them as their BinaryRowData bytes. `sql_states` wraps an operator's
decoders so that every RowData part comes out as a struct column named by the SQL (`SqlNames`, from a compiled plan)
or f0..fn, while key groups stay Flink's: a key looked up by its columns is encoded back to BinaryRowData and hashed
as Flink hashes it (`sql_key_groups`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from flinkstate.core.errors import InvalidArgumentError
from flinkstate.flink.serde.rowdata import decode_rows, encode_rows, row_type
from flinkstate.flink.serde.serializers import TypeNode, arrow_type
from flinkstate.flink.serde.sqltypes import SqlType, sql_arrow_type

__all__ = ["SqlNames", "SqlDecoder", "SqlTimerDecoder", "sql_states", "sql_key_groups", "sql_keys", "is_sql_operator",
           "SQL_OPS", "SQL_NAMING"]

SQL_OPS = "sql_ops"  # meta.options: operator label -> the ROW type of its keys (struct-keyed SQL operators)
SQL_NAMING = "sql_naming"  # meta.options: a callable (op, state name, inner decoder) -> SqlNames, or absent (f0..fn)


@dataclass(frozen=True)
class SqlNames:
    """Column names of one state's RowData parts (None: f0..fn), and what the plan says the operator is."""

    key: tuple[str, ...] | None = None
    value: tuple[str, ...] | None = None  # a value state's row, a list state's elements, a map state's values
    user_key: tuple[str, ...] | None = None  # a map state's keys
    value_element: tuple[str, ...] | None = None  # a map state's values that are lists of rows (Top-N)
    node: str | None = None  # the plan's exec node type, e.g. stream-exec-group-aggregate_2
    notes: tuple[str, ...] = field(default_factory=tuple)


def _named(sql: tuple[SqlType, ...], names: tuple[str, ...] | None) -> SqlType:
    if names is not None and len(names) == len(sql) and len(set(names)) == len(names):
        return row_type(sql, names)
    return row_type(sql)


def _row_of(node: TypeNode | None, names: tuple[str, ...] | None) -> SqlType | None:
    return _named(node.sql, names) if node is not None and node.kind == "rowdata" and node.sql else None


class _Part:
    """How one column of a decoded table becomes columns: a RowData (struct), a list of RowData, or unchanged."""

    def __init__(self, node: TypeNode | None, names: tuple[str, ...] | None, element_names: tuple[str, ...] | None = None) -> None:
        self.row = _row_of(node, names)
        self.element = None
        if self.row is None and node is not None and node.kind == "list" and node.children:
            self.element = _row_of(node.children[0], element_names if element_names is not None else names)
        self.node = node

    @property
    def sql(self) -> bool:
        return self.row is not None or self.element is not None

    def arrow(self) -> pa.DataType | None:
        if self.row is not None:
            return sql_arrow_type(self.row)
        if self.element is not None:
            return pa.list_(sql_arrow_type(self.element))
        return None

    def decode(self, column: pa.ChunkedArray, where: str, kind: str) -> pa.Array:
        col = column.combine_chunks()
        if self.row is not None:
            return decode_rows(col, self.row, where, row_kind=kind)  # type: ignore[arg-type]
        if self.element is not None:
            elements = decode_rows(col.flatten(), self.element, where, row_kind=kind)  # type: ignore[arg-type]
            offsets = pa.array(np.asarray(col.offsets) - int(col.offsets[0].as_py()), pa.int32())
            return pa.ListArray.from_arrays(offsets, elements, mask=col.is_null() if col.null_count else None)
        return col


class SqlDecoder:
    """A decoded keyed state of a SQL operator with its RowData parts as struct columns (key groups unchanged)."""

    def __init__(self, inner: Any, names: SqlNames) -> None:
        self.inner = inner
        self.names = names
        self.meta = inner.meta
        self.ctx = inner.ctx
        self.kind = inner.kind
        self.timer = False
        self.ttl = inner.ttl
        self.key_node = inner.key_node
        self.ns_node = inner.ns_node
        self.value_node = inner.value_node
        self.elem_node = inner.elem_node
        self.unreadable = inner.unreadable
        self.raw_error = inner.raw_error
        self._key = _Part(inner.key_node, names.key)
        user_key = inner.value_node.children[0] if inner.kind == "MAP" else None
        self._user_key = _Part(user_key, names.user_key)
        self._value = _Part(inner.elem_node, names.value, names.value_element)
        self.key_type = self._key.arrow() or arrow_type(inner.key_node)
        self.user_key_type = None if user_key is None else (self._user_key.arrow() or arrow_type(user_key))
        self.value_type = None if inner.elem_node is None else (self._value.arrow() or arrow_type(inner.elem_node))

    @property
    def key_row(self) -> SqlType | None:
        """The ROW type of the keys (None: not RowData)."""
        return self._key.row

    def table(self, raw_values: bool = False) -> pa.Table:
        """The entries with key, user key and value columns decoded from BinaryRowData."""
        t = self.inner.table(raw_values)
        for name, part, kind in (("key", self._key, "insert"), ("user_key", self._user_key, "any"), ("value", self._value, "any")):
            if part.sql and name in t.column_names:
                t = t.set_column(t.column_names.index(name), name, part.decode(t.column(name), f"{self.ctx}, column {name!r}", kind))
        return t


class SqlTimerDecoder:
    """A SQL operator's timer service with its RowData keys decoded (the namespace, a window, unchanged)."""

    def __init__(self, inner: Any, names: SqlNames) -> None:
        self.inner = inner
        self.meta = inner.meta
        self.ctx = inner.ctx
        self.timer = True
        self.kind = "TIMER"
        self.ttl = False
        self.key_node = inner.key_node
        self.ns_node = inner.ns_node
        self.value_node = None
        self._key = _Part(inner.key_node, names.key)
        self.key_type = self._key.arrow() or arrow_type(inner.key_node)

    def table(self) -> pa.Table:
        t = self.inner.table()
        return t.set_column(t.column_names.index("key"), "key", self._key.decode(t.column("key"), f"{self.ctx}, column 'key'", "insert"))


def _rowdata_parts(dec: Any) -> bool:
    nodes = [dec.key_node] if dec.timer else [dec.key_node, dec.elem_node, *(dec.value_node.children[:1] if dec.kind == "MAP" else ())]
    return any(n is not None and (n.kind == "rowdata" or (n.kind == "list" and n.children and n.children[0].kind == "rowdata"))
               for n in nodes)


def is_sql_operator(decoders: Mapping[str, Any]) -> bool:
    """True when an operator's states keep RowData (a SQL or Table API operator's)."""
    return any(_rowdata_parts(d) for d in decoders.values())


def sql_states(meta: Any, op: Any, decoders: dict[str, Any]) -> dict[str, Any]:
    """An operator's decoders with RowData decoded to columns, when the read asks for SQL columns (meta.options["sql"])."""
    if meta.options.get("sql", "columns") != "columns" or not is_sql_operator(decoders):
        return decoders
    naming: Callable[[Any, str, Any], SqlNames] | None = meta.options.get(SQL_NAMING)
    out: dict[str, Any] = {}
    key_row: SqlType | None = None
    for name, dec in decoders.items():
        names = naming(op, name, dec) if naming is not None else SqlNames()
        wrapped = SqlTimerDecoder(dec, names) if dec.timer else SqlDecoder(dec, names)
        if wrapped._key.row is not None and key_row is None:
            key_row = wrapped._key.row
        out[name] = wrapped
    if key_row is not None:
        meta.options.setdefault(SQL_OPS, {})[op.uid or op.operator_id] = key_row
    return out


def sql_keys(keys: Sequence[Any], key_row: SqlType) -> pa.Array:
    """Keys given by their columns as a struct array of the key row: dicts or tuples of the fields, or (a one-field
    key) the field's values themselves; an InvalidArgumentError naming the key type otherwise."""
    typ = sql_arrow_type(key_row)
    rows: list[Any] = []
    for k in keys:
        if isinstance(k, Mapping):
            rows.append(dict(k))
        elif isinstance(k, (tuple, list)):
            rows.append(dict(zip(key_row.names, k, strict=False)) if len(k) == len(key_row.names) else k)
        elif len(key_row.names) == 1:
            rows.append({key_row.names[0]: k})
        else:
            rows.append(k)
    try:
        return pa.array(rows, typ)
    except (pa.ArrowException, TypeError, ValueError, OverflowError) as e:
        raise InvalidArgumentError(f"keys {list(keys)[:5]!r} are not rows of the SQL key type {key_row}: {e}") from e


def sql_key_groups(keys: Sequence[Any] | pa.Array, key_row: SqlType, max_parallelism: int) -> pa.Array:
    """Flink's key groups of SQL keys given by their columns: murmur of BinaryRowData.hashCode over the encoded row."""
    from flinkstate.core.keygroups import assign_key_groups

    arr = keys if isinstance(keys, pa.Array) else sql_keys(keys, key_row)
    return assign_key_groups(encode_rows(arr, key_row), max_parallelism)
