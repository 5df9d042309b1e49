"""Flink SQL operators' state seen by its columns: every BinaryRowData in a key, namespace, map key or value decoded.

The table runtime keeps a SQL operator's keys and values as RowData (`RowDataSerializer` snapshots list each field's
SQL type), often inside other serializers: a regular join's rows with their association count (`Tuple2<RowData,
Integer>`), an interval join's cached rows (`List<Tuple2<RowData, Boolean>>` per timestamp), a Top-N's rows per sort
key, a CEP event (`Lockable<RowData>`). The decoders of `flink.files` keep each RowData as its BinaryRowData bytes;
`sql_states` wraps an operator's decoders so that every RowData, wherever it sits in a state's serializer tree, comes
out as a struct column named by the SQL (`SqlNames`, from a compiled plan) or f0..fn, and the table runtime's own
helper serializer that the serde keeps as bytes is read too (a retracting Top-N's `SortedMapSerializer`). Key
groups stay Flink's: a key looked up by its columns is encoded back to BinaryRowData and hashed as Flink hashes it
(`sql_key_groups`). A RowData whose SQL type has no Arrow form stays a typed error when its state is read (its bytes
with raw_values), never when the operator is listed.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from flinkstate.core.errors import InvalidArgumentError
from flinkstate.flink.errors import UnsupportedSerializerError
from flinkstate.flink.serde.registry import SORTED_MAP_SNAPSHOT
from flinkstate.flink.serde.rowdata import decode_rows, encode_rows, row_type
from flinkstate.flink.serde.serializers import TypeNode, arrow_type
from flinkstate.flink.serde.sqltypes import SqlType, sql_arrow_type
from flinkstate.flink.serde.values import Reader, make_reader, map_entries_reader

__all__ = ["SqlNames", "SqlDecoder", "SqlTimerDecoder", "sql_states", "sql_key_groups", "sql_keys", "is_sql_operator",
           "SQL_OPS", "SQL_NAMING"]

SQL_OPS = "sql_ops"  # meta.options: operator label -> the ROW type of its keys (struct-keyed SQL operators)
SQL_NAMING = "sql_naming"  # meta.options: a callable (op, state name, inner decoder) -> SqlNames, or absent (f0..fn)

# struct kinds whose Arrow fields are their nested serializers' values, by field name (flink.serde's Arrow forms)
_FIELDS = {"bufferentry": ("element",), "lockable": ("element",), "streamrecord": (None, "value"), "either": (None, "left", "right"),
           "taggedunion": (None, "one", "two")}


@dataclass(frozen=True)
class SqlNames:
    """Column names of one state's RowData (None: f0..fn), and what the plan says the operator is.

    key names the key's row; user_key every row in a map state's keys; value every row in the value (a value state's
    row, a list state's elements, a map state's values, rows nested in tuples or lists there: a state keeps one row type
    in its value); value_element is an older name for the rows of a list value, used where value is not given."""

    key: tuple[str, ...] | None = None
    value: tuple[str, ...] | None = None
    user_key: tuple[str, ...] | None = None
    value_element: tuple[str, ...] | None = None
    node: str | None = None  # the plan's exec node type, e.g. stream-exec-group-aggregate_2
    notes: tuple[str, ...] = field(default_factory=tuple)


# SQL type roots one name may stand for (a plan column's root against the state's field type)
_SAME_ROOT = {"CHAR": "VARCHAR", "BINARY": "VARBINARY", "STRUCTURED_TYPE": "ROW"}


def _fits(name: str, t: SqlType) -> bool:
    root = getattr(name, "root", None)  # a plan Column's; a plain name fits any type
    return root is None or _SAME_ROOT.get(root, root) == _SAME_ROOT.get(t.root, t.root)


def _named(sql: tuple[SqlType, ...], names: tuple[str, ...] | None) -> SqlType:
    """The ROW of a RowData's fields, named when the names fit it (as many, distinct, each of its field's type), else f0..fn."""
    if (names is not None and len(names) == len(sql) and len(set(names)) == len(names)
            and all(_fits(n, t) for n, t in zip(names, sql, strict=True))):
        return row_type(sql, tuple(str(n) for n in names))
    return row_type(sql)


def _typed_row(node: TypeNode) -> bool:
    """A RowData whose field types the snapshot lists (RowDataSerializer; a BinaryRowDataSerializer lists none, so only
    one of no fields is known: the timers' key of an operator keyed by the empty key, a Top-N without PARTITION BY)."""
    return node.kind == "rowdata" and ("BinaryRowDataSerializer" not in node.cls or tuple(node.params[:1]) == (0,))


def _table_reader(node: TypeNode, ctx: str) -> Reader | None:
    """A reader of a table-runtime helper serializer the serde keeps as bytes (None: not one this module reads): a
    retracting Top-N's SortedMapSerializer (kept as bytes there: its snapshot must go back as it was, not as a MapSerializer's)."""
    if node.cls == SORTED_MAP_SNAPSHOT and len(node.children) == 2:  # AbstractMapSerializer: i32 n, n x (key, null flag, value)
        return map_entries_reader(make_reader(node.children[0], ctx), make_reader(node.children[1], ctx))
    return None


def _table_arrow(node: TypeNode) -> pa.DataType:
    return pa.map_(arrow_type(node.children[0]), arrow_type(node.children[1]))


class _Shape:
    """How one column of a decoded table becomes its SQL form: each RowData in its serializer tree a struct of the row's
    fields (named by `names`), each table-runtime helper read from its bytes; everything else as it was decoded."""

    def __init__(self, node: TypeNode | None, names: tuple[str, ...] | None, row_kind: str, ctx: str) -> None:
        self.node, self.names, self.row_kind, self.ctx = node, names, row_kind, ctx
        self.error: str | None = None
        self.sql = False
        self.type: pa.DataType | None = None
        if node is None:
            return
        try:
            self.type = self._type(node)
        except UnsupportedSerializerError as e:  # a SQL type with no Arrow form: the state is an error when read
            self.error = f"{ctx}: {e}"
            self.type = arrow_type(node)

    def _type(self, node: TypeNode) -> pa.DataType:
        k, ch = node.kind, node.children
        if _typed_row(node):
            self.sql = True
            return sql_arrow_type(_named(node.sql, self.names))
        if k in ("opaque", "unknown") and _table_reader(node, self.ctx) is not None:
            self.sql = True
            return self._type_of_value(node)
        if k == "ttl":
            return self._type(ch[1])
        if k in ("nullable", "transparent"):
            return self._type(ch[0])
        if k in ("list", "set", "garray"):
            return pa.list_(self._type(ch[0]))
        if k == "map":
            return pa.map_(self._type(ch[0]), self._type(ch[1]))
        base = arrow_type(node)
        if pa.types.is_struct(base) and (k in ("row", "tuple", "pojo") or k in _FIELDS):
            fields = [base.field(i) for i in range(base.num_fields)]
            return pa.struct([f.with_type(self._type(c)) if c is not None else f for f, c in zip(fields, self._children(node, base), strict=True)])
        return base

    def _type_of_value(self, node: TypeNode) -> pa.DataType:
        return pa.map_(self._type(node.children[0]), self._type(node.children[1]))

    @staticmethod
    def _children(node: TypeNode, base: pa.StructType) -> list[TypeNode | None]:
        """The nested serializer of each Arrow field of a struct kind (None: a field of the kind's own)."""
        if node.kind in ("row", "tuple", "pojo"):
            return list(node.children)
        names = _FIELDS[node.kind]
        out: list[TypeNode | None] = []
        for f in base:
            i = names.index(f.name) if f.name in names else -1
            out.append(node.children[i - (1 if names[0] is None else 0)] if i >= 0 else None)
        return out

    def convert(self, col: pa.ChunkedArray | pa.Array) -> pa.Array:
        arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
        if self.node is None or not self.sql:
            return arr
        return self._convert(arr, self.node)

    def _convert(self, arr: pa.Array, node: TypeNode) -> pa.Array:
        k, ch = node.kind, node.children
        if _typed_row(node) and (pa.types.is_binary(arr.type) or pa.types.is_large_binary(arr.type)):
            return decode_rows(arr, _named(node.sql, self.names), self.ctx, row_kind=self.row_kind)
        if k in ("opaque", "unknown"):
            reader = _table_reader(node, self.ctx)
            if reader is None or not (pa.types.is_binary(arr.type) or pa.types.is_large_binary(arr.type)):
                return arr
            return self._table_values(arr, node, reader)
        if k == "ttl":
            return self._convert(arr, ch[1])
        if k in ("nullable", "transparent"):
            return self._convert(arr, ch[0])
        if k in ("list", "set", "garray") and pa.types.is_list(arr.type):
            values = self._convert(arr.values, ch[0])
            return pa.ListArray.from_arrays(arr.offsets, values, mask=arr.is_null() if arr.null_count else None)
        if k == "map" and pa.types.is_map(arr.type):
            return self._map(arr, ch[0], ch[1])
        if pa.types.is_struct(arr.type) and (k in ("row", "tuple", "pojo") or k in _FIELDS):
            kids = self._children(node, arr.type)
            fields = [arr.field(i) for i in range(arr.type.num_fields)]
            converted = [self._convert(f, c) if c is not None else f for f, c in zip(fields, kids, strict=True)]
            names = [arr.type.field(i).name for i in range(arr.type.num_fields)]
            return pa.StructArray.from_arrays(converted, names=names, mask=arr.is_null() if arr.null_count else None)
        return arr

    def _map(self, arr: pa.MapArray, key: TypeNode, value: TypeNode) -> pa.Array:
        keys, items = self._convert(arr.keys, key), self._convert(arr.items, value)
        return pa.MapArray.from_arrays(arr.offsets, keys, items, mask=arr.is_null() if arr.null_count else None)

    def _table_values(self, arr: pa.Array, node: TypeNode, reader: Reader) -> pa.Array:
        """Values of a table-runtime helper serializer read from their bytes (each value's bytes are exactly one value)."""
        out: list[Any] = []
        for i, b in enumerate(arr.to_pylist()):
            if b is None:
                out.append(None)
                continue
            try:
                v, end = reader(b, 0)
            except (IndexError, ValueError, struct.error, UnicodeDecodeError) as e:
                raise UnsupportedSerializerError(f"{self.ctx}: value {i} of {node.cls} does not decode: {e}") from e
            if end != len(b):
                raise UnsupportedSerializerError(f"{self.ctx}: value {i} of {node.cls}: {len(b) - end} bytes left after it")
            out.append(v)
        return self._map(pa.array(out, _table_arrow(node)), node.children[0], node.children[1])


def _value_tree(dec: Any) -> TypeNode | None:
    """The serializer of what a state's `value` column holds (a list state's element, a map state's value)."""
    return dec.elem_node


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
        value_names = names.value if names.value is not None else names.value_element
        user_key = inner.value_node.children[0] if inner.kind == "MAP" else None
        self._key = _Shape(inner.key_node, names.key, "insert", f"{self.ctx}, column 'key'")
        self._ns = _Shape(inner.ns_node, None, "insert", f"{self.ctx}, column 'namespace'")
        self._user_key = _Shape(user_key, names.user_key, "any", f"{self.ctx}, column 'user_key'")
        self._value = _Shape(_value_tree(inner), value_names, "any", f"{self.ctx}, column 'value'")
        # a value the serde keeps as bytes but this module reads (a Top-N's sorted map): read raw, then decoded here
        self._raw_value = inner.raw_error is not None and self._value.sql and _only_table_opaque(inner.elem_node)
        if self._raw_value:
            self.raw_error = None
        self.key_type = self._key.type
        self.user_key_type = None if user_key is None else self._user_key.type
        self.value_type = None if inner.elem_node is None else self._value.type

    @property
    def key_row(self) -> SqlType | None:
        """The ROW type of the keys (None: not RowData)."""
        node = self.key_node
        return _named(node.sql, self.names.key) if node is not None and _typed_row(node) and self._key.error is None else None

    def kept_as_bytes(self) -> str | None:
        return self.inner.kept_as_bytes()

    def table(self, raw_values: bool = False) -> pa.Table:
        """The entries with every RowData in key, namespace, user key and value decoded to struct columns."""
        t = self.inner.table(raw_values or self._raw_value)
        for name, part in (("key", self._key), ("namespace", self._ns), ("user_key", self._user_key), ("value", self._value)):
            if name not in t.column_names or not part.sql:
                continue
            if part.error is not None:
                if raw_values:
                    continue  # that part as its bytes
                raise UnsupportedSerializerError(f"{part.error}; read with raw_values=True (Spark: rawValues) for its bytes")
            t = t.set_column(t.column_names.index(name), name, part.convert(t.column(name)))
        return t


def _only_table_opaque(node: TypeNode | None) -> bool:
    """True when every opaque serializer in the tree is a table-runtime helper this module reads."""
    if node is None:
        return True
    if node.kind in ("opaque", "unknown"):
        return _table_reader(node, "") is not None and all(_only_table_opaque(c) for c in node.children)
    return all(_only_table_opaque(c) for c in node.children)


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
        self._key = _Shape(inner.key_node, names.key, "insert", f"{self.ctx}, column 'key'")
        self.key_type = self._key.type

    def table(self) -> pa.Table:
        t = self.inner.table()
        if self._key.error is not None:
            raise UnsupportedSerializerError(self._key.error)
        return t.set_column(t.column_names.index("key"), "key", self._key.convert(t.column("key")))


def _rowdata_parts(dec: Any) -> bool:
    nodes = [dec.key_node] if dec.timer else [dec.key_node, dec.value_node]

    def has(n: TypeNode | None) -> bool:
        return n is not None and (_typed_row(n) or any(has(c) for c in n.children))

    return any(has(n) for n in nodes)


def is_sql_operator(decoders: Mapping[str, Any]) -> bool:
    """True when an operator's states keep RowData (a SQL or Table API operator's)."""
    return any(_rowdata_parts(d) for d in decoders.values())


def sql_states(meta: Any, op: Any, decoders: dict[str, Any]) -> dict[str, Any]:
    """An operator's decoders with RowData decoded to columns, when the read asks for SQL columns (meta.options["sql"]).

    Every state and timer service of the operator keys by the same row, so all take the key names the plan gives any
    of them (a state the plan does not name, a timer service, still has its operator's key column names)."""
    if meta.options.get("sql", "columns") != "columns" or not is_sql_operator(decoders):
        return decoders
    naming: Callable[[Any, str, Any], SqlNames] | None = meta.options.get(SQL_NAMING)
    named = {name: naming(op, name, dec) if naming is not None else SqlNames() for name, dec in decoders.items()}
    key_names = next((n.key for n in named.values() if n.key is not None), None)
    out: dict[str, Any] = {}
    key_row: SqlType | None = None
    for name, dec in decoders.items():
        names = named[name]
        if names.key is None and key_names is not None:
            names = SqlNames(key_names, names.value, names.user_key, names.value_element, names.node, names.notes)
        wrapped = SqlTimerDecoder(dec, names) if dec.timer else SqlDecoder(dec, names)
        if not dec.timer and key_row is None and wrapped.key_row is not None:
            key_row = wrapped.key_row
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


