"""Format v1 Arrow schemas per file kind, and the conforming, casting and sorting of tables to them.

Below `datafile` (the one writer/reader of v1 files) and `checks` (which compares a file against them).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from flinkstate.core.descriptors import (
    KeyedStateDescriptor,
    OperatorStateDescriptor,
    TimerServiceDescriptor,
)
from flinkstate.core.errors import InvalidArgumentError, SchemaMismatchError
from flinkstate.format import constants as C

__all__ = ["castable", "state_schema", "timer_schema", "operator_state_schema", "coordinator_schema", "primary_key_columns",
           "conform", "as_table", "sort_for_kind"]


def _key_fields(key_type: pa.DataType, namespace_type: pa.DataType | None) -> list[pa.Field]:
    fields = [pa.field(C.COL_KEY_GROUP, pa.int32(), nullable=False), pa.field(C.COL_KEY, key_type, nullable=False)]
    if namespace_type is not None:
        fields.append(pa.field(C.COL_NAMESPACE, namespace_type))
    return fields


def state_schema(desc: KeyedStateDescriptor, *, delta: bool = False) -> pa.Schema:
    """Schema of a keyed state's full (or delta) file."""
    fields = _key_fields(desc.key_type, desc.namespace_type)
    ttl = desc.ttl_enabled
    if desc.kind == "map":
        fields.append(pa.field(C.COL_USER_KEY, desc.user_key_type, nullable=False))  # type: ignore[union-attr]
        fields.append(pa.field(C.COL_VALUE, desc.user_value_type))  # type: ignore[union-attr]
        if ttl:
            fields.append(pa.field(C.COL_TTL, pa.int64()))
    elif desc.kind == "list":
        fields.append(pa.field(C.COL_VALUE, pa.list_(desc.value_type)))
        if ttl:
            fields.append(pa.field(C.COL_TTL, pa.list_(pa.int64())))
    else:
        fields.append(pa.field(C.COL_VALUE, desc.value_type))
        if ttl:
            fields.append(pa.field(C.COL_TTL, pa.int64()))
    if delta:
        fields.append(pa.field(C.COL_TOMBSTONE, pa.bool_(), nullable=False))
    return pa.schema(fields)


def timer_schema(desc: TimerServiceDescriptor, *, delta: bool = False) -> pa.Schema:
    """Schema of a timer service's file: key group, key, namespace, timestamp."""
    fields = _key_fields(desc.key_type, desc.namespace_type)
    fields.append(pa.field(C.COL_TIMESTAMP, pa.int64(), nullable=False))
    if delta:
        fields.append(pa.field(C.COL_TOMBSTONE, pa.bool_(), nullable=False))
    return pa.schema(fields)


def operator_state_schema(desc: OperatorStateDescriptor) -> pa.Schema:
    """Schema of an operator state file: subtask plus element (broadcast: key and value)."""
    fields = [pa.field(C.COL_SUBTASK, pa.int32(), nullable=False)]
    if desc.mode == "broadcast":
        assert desc.key_type is not None
        fields.append(pa.field(C.COL_KEY, desc.key_type, nullable=False))
    fields.append(pa.field(C.COL_VALUE, desc.value_type))
    return pa.schema(fields)


def coordinator_schema() -> pa.Schema:
    """Schema of coordinator state: opaque state bytes and buffered events, in order."""
    return pa.schema(
        [
            pa.field(C.COL_RECORD_TYPE, pa.string(), nullable=False),  # 'state' or 'event'
            pa.field(C.COL_SUBTASK, pa.int32()),  # event target subtask (null for state)
            pa.field(C.COL_SEQ, pa.int64(), nullable=False),
            pa.field(C.COL_PAYLOAD, pa.binary()),
        ]
    )


def primary_key_columns(desc: KeyedStateDescriptor | TimerServiceDescriptor) -> list[str]:
    """Columns that identify one entry (the unit of upsert and tombstone)."""
    cols = [C.COL_KEY]
    if desc.namespace_type is not None:
        cols.append(C.COL_NAMESPACE)
    if isinstance(desc, TimerServiceDescriptor):
        cols.append(C.COL_TIMESTAMP)
    elif desc.kind == "map":
        cols.append(C.COL_USER_KEY)
    return cols


def conform(table: pa.Table, schema: pa.Schema, what: str) -> pa.Table:
    """Select and cast a table's columns to a file schema, or raise naming the column at fault.

    Columns the schema does not have are refused (only `key_group`, which the writer
    verifies, and an all-false `tombstone` may be given extra): a misspelt column must not
    vanish silently.
    """
    table = as_table(table, what)
    arrays = []
    for f in schema:
        if f.name not in table.column_names:
            if f.name == C.COL_TOMBSTONE:
                arrays.append(pa.array([False] * table.num_rows, pa.bool_()))
                continue
            raise SchemaMismatchError(f"{what}: missing column {f.name!r} (expected {f.type}); got columns {table.column_names}")
        col = table.column(f.name)
        if col.type != f.type:
            if not castable(col.type, f.type):
                raise SchemaMismatchError(f"{what}: column {f.name!r} has type {col.type}, the state declares {f.type}")
            try:
                col = col.cast(f.type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                raise SchemaMismatchError(f"{what}: column {f.name!r} of type {col.type} cannot be cast to {f.type}: {e}") from e
        if not f.nullable and col.null_count:
            raise SchemaMismatchError(f"{what}: column {f.name!r} has {col.null_count} null values but may not be null")
        if f.name == C.COL_TTL:
            _check_ttl_timestamps(col, what)
        arrays.append(col)
    extra = [n for n in table.column_names if n not in schema.names and n != C.COL_KEY_GROUP]
    if C.COL_TOMBSTONE in extra:  # a full write may carry a delta's tombstone column if it deletes nothing
        if pc.any(table.column(C.COL_TOMBSTONE)).as_py():
            raise SchemaMismatchError(f"{what}: a full write cannot delete: column 'tombstone' has true values (use a delta)")
        extra.remove(C.COL_TOMBSTONE)
    if extra:
        hint = "; this state declares no namespace" if C.COL_NAMESPACE in extra else ""
        raise SchemaMismatchError(f"{what}: unknown columns {extra}{hint}; expected columns {schema.names}")
    return pa.Table.from_arrays(arrays, schema=schema)


def _check_ttl_timestamps(col: Any, what: str) -> None:
    """Last-access times are epoch milliseconds >= 0, as Flink's processing time gives them (never Long.MIN_VALUE)."""
    flat = pc.list_flatten(col) if pa.types.is_list(col.type) else col
    low = pc.min(flat).as_py() if len(flat) else None
    if low is not None and low < 0:
        raise InvalidArgumentError(f"{what}: column {C.COL_TTL!r} holds the last-access time {low}; "
                                   "TTL timestamps are epoch milliseconds >= 0")


def as_table(table: Any, what: str) -> pa.Table:
    """A pyarrow Table (a RecordBatch is wrapped); anything else is refused naming its type."""
    if isinstance(table, pa.Table):
        return table
    if isinstance(table, pa.RecordBatch):
        return pa.Table.from_batches([table])
    raise InvalidArgumentError(f"{what}: expected a pyarrow.Table, got {type(table).__name__}")


def castable(src: pa.DataType, dst: pa.DataType) -> bool:
    """Same shape and family (ints, floats, strings, lists, structs by field name, maps):
    Arrow's safe cast then refuses values that would not fit."""
    if src == dst or pa.types.is_null(src):
        return True
    if pa.types.is_dictionary(src):
        return castable(src.value_type, dst)
    if pa.types.is_integer(src) and pa.types.is_integer(dst):
        return True
    if pa.types.is_floating(src) and pa.types.is_floating(dst):
        return True
    strings = (pa.string(), pa.large_string(), pa.string_view())
    if src in strings and dst in strings:
        return True
    binaries = (pa.binary(), pa.large_binary(), pa.binary_view())
    if src in binaries and dst in binaries:
        return True
    lists = (pa.types.is_list, pa.types.is_large_list, pa.types.is_list_view, pa.types.is_fixed_size_list)
    if any(f(src) for f in lists) and any(f(dst) for f in lists[:2]):
        return castable(src.value_type, dst.value_type)
    if pa.types.is_struct(src) and pa.types.is_struct(dst):
        if src.num_fields != dst.num_fields:
            return False
        return all(
            src.field(i).name == dst.field(i).name and castable(src.field(i).type, dst.field(i).type) for i in range(src.num_fields)
        )
    if pa.types.is_map(src) and pa.types.is_map(dst):
        return castable(src.key_type, dst.key_type) and castable(src.item_type, dst.item_type)
    if pa.types.is_timestamp(src) and pa.types.is_timestamp(dst):
        return src.tz == dst.tz or src.tz is None or dst.tz is None
    if pa.types.is_decimal(src) and pa.types.is_decimal(dst):
        return src.scale <= dst.scale
    return False


def sort_for_kind(table: pa.Table, kind: str) -> pa.Table:
    """Sort rows in the order format v1 prescribes for a file kind."""
    if kind in (C.KIND_TIMERS_FULL, C.KIND_TIMERS_DELTA):
        return _sort(table, [C.COL_KEY_GROUP, C.COL_TIMESTAMP, C.COL_KEY])
    if kind in (C.KIND_FULL, C.KIND_DELTA):
        by = [C.COL_KEY_GROUP, C.COL_KEY]
        if C.COL_USER_KEY in table.column_names:
            by.append(C.COL_USER_KEY)
        return _sort(table, by)
    if kind == C.KIND_OPERATOR:
        return _sort(table, [C.COL_SUBTASK])
    return table


def _integer_column(column: pa.ChunkedArray) -> bool:
    """Whether a column orders as its numpy integers do (an integer column without nulls: Arrow orders nulls last)."""
    return pa.types.is_integer(column.type) and column.null_count == 0


def _ordered(columns: list[np.ndarray]) -> bool:
    """Whether rows are already in ascending order of the columns (lexicographic, the first column first)."""
    tied = np.ones(len(columns[0]) - 1, dtype=bool)  # adjacent rows equal on every column so far
    for col in columns:
        a, b = col[:-1], col[1:]
        if np.any(tied & (a > b)):
            return False
        tied &= a == b
    return True


def _packed_order(kg: np.ndarray, key: np.ndarray) -> np.ndarray | None:
    """The stable order of rows by (key group, integer key), or None when they do not pack into 64 bits.

    Key group, key (offset by its minimum) and row position packed into one uint64 in that bit order: values are
    unique and order as (key group, key, position) does, so numpy's fast unstable value sort gives the stable order
    (the position, read back from the low bits); without room for the position, a stable argsort of the packed pair.
    """
    if key.dtype.kind != "i" or kg.min() < 0:
        return None
    lo, span = int(key.min()), int(key.max()) - int(key.min())
    kg_bits, key_bits, pos_bits = int(kg.max()).bit_length(), span.bit_length(), (len(key) - 1).bit_length()
    if kg_bits + key_bits > 64:
        return None
    shifted = key.astype(np.int64, copy=False).view(np.uint64) - np.uint64(lo % (1 << 64))  # key - lo, exact modulo 2^64
    if kg_bits + key_bits + pos_bits > 64:
        return np.argsort((kg.astype(np.uint64) << np.uint64(key_bits)) | shifted, kind="stable")
    packed = (kg.astype(np.uint64) << np.uint64(key_bits + pos_bits)) | (shifted << np.uint64(pos_bits))
    packed |= np.arange(len(key), dtype=np.uint64)
    packed.sort()
    return (packed & np.uint64((1 << pos_bits) - 1)).astype(np.int64)


def _sort(table: pa.Table, by: list[str]) -> pa.Table:
    """Sort by the given columns, skipping columns whose type Arrow cannot order.

    When the first column is the key group: rows already in order (integer keys, checked by one vectorised adjacent
    compare) are returned as they are; a key group with one integer key (long keys) is sorted as one packed uint64 (`_packed_order`);
    otherwise rows are bucketed by key group (a stable integer argsort) and only each bucket is sorted by the rest:
    much cheaper than one multi-column comparison sort over the whole table. Ties keep their order (stable).
    """
    keys = []
    for name in by:
        t = table.schema.field(name).type
        if pa.types.is_struct(t) or pa.types.is_list(t) or pa.types.is_map(t) or pa.types.is_null(t):
            break
        keys.append((name, "ascending"))
    if not keys or table.num_rows < 2:
        return table
    if keys[0][0] != C.COL_KEY_GROUP:
        return table.take(pc.sort_indices(table, sort_keys=keys))
    if table.column(0).num_chunks > 1:  # one copy now spares every take below walking many chunks (a Spark task's batches)
        table = table.combine_chunks()
    kg = table.column(C.COL_KEY_GROUP).to_numpy()
    rest = keys[1:]
    ints = [table.column(k).to_numpy() for k, _ in rest] if rest and all(_integer_column(table.column(k)) for k, _ in rest) else None
    if ints is not None and _ordered([kg, *ints]):
        return table  # already in order (timers as a savepoint holds them): no sort, no copy
    if ints is not None and len(ints) == 1 and (packed := _packed_order(kg, ints[0])) is not None:
        # key group and an integer key (long keys) in one uint64, order preserved: one sort, no per-key-group pass
        order, rest = packed, []
    else:
        # key groups are below 2^15: a stable sort of 16-bit integers is numpy's radix sort, several times a 32-bit one
        order = np.argsort(kg.astype(np.uint16) if kg.min() >= 0 and kg.max() <= 0xFFFF else kg, kind="stable")
    if rest:
        skg = kg[order]
        bounds = np.flatnonzero(np.diff(skg)) + 1
        starts = np.concatenate([[0], bounds])
        ends = np.concatenate([bounds, [len(skg)]])
        sub = table.select([k for k, _ in rest]).take(pa.array(order))
        for a, b in zip(starts.tolist(), ends.tolist()):
            if b - a > 1:
                order[a:b] = order[a:b][pc.sort_indices(sub.slice(a, b - a), sort_keys=rest).to_numpy()]
    if np.all(order[1:] > order[:-1]):
        return table
    return table.take(pa.array(order))
