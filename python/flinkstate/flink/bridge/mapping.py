"""Flink state in flinkstate's terms: descriptors from serializer snapshots, stored rows from decoded tables.

Shared by `flinkstate import` and by the Flink savepoint as a pinned checkpoint (`flink.checkpoint`):
a Flink keyed state maps to a flinkstate descriptor, and its decoded entries to the rows a
flinkstate data file stores (`ttl_timestamp` last-access times; list state one row per key).
"""

from __future__ import annotations

import numbers
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from flinkstate.core.descriptors import (
    AggregatingStateDescriptor,
    KeyedStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    ValueStateDescriptor,
)
from flinkstate.core.errors import InvalidArgumentError
from flinkstate.core.ttl import MAX_TIMESTAMP, StateTtlConfig
from flinkstate.flink.errors import UnsupportedFlinkFormatError
from flinkstate.flink.files.canonical import (
    _StateDecoder,
    decode_keyed_handle,
    decode_rocksdb_handle,
)
from flinkstate.flink.files.key_group_ranges import (
    KeyedHeader,
    decode_key_groups,
    header_bytes,
    key_group_chunks,
    read_header,
)
from flinkstate.flink.files.rocksdb import rocksdb_chunks
from flinkstate.flink.meta.metadata import (
    CheckpointMetadata,
    KeyGroupsHandle,
    OperatorState,
    SubtaskState,
    UnsupportedKeyedHandle,
)
from flinkstate.flink.meta.names import lookup, state_key
from flinkstate.flink.pyflink.coders import (
    PREFIX,
    PyFlinkDecoder,
    pyflink_states,
    row_key_groups,
)
from flinkstate.flink.serde.kryo.bind import spec_of
from flinkstate.flink.serde.kryo.schema import parse_class_specs
from flinkstate.flink.serde.serializers import arrow_type
from flinkstate.flink.sql.decoders import (
    SQL_OPS,
    SqlDecoder,
    sql_key_groups,
    sql_states,
)

__all__ = ["ReadOptions", "kryo_specs", "parse_row_fields", "parse_ttl", "state_descriptor", "stored_rows",
           "subtask_states", "decode_subtask", "decode_subtask_chunks", "subtask_range"]

_KINDS = {"VALUE": ValueStateDescriptor, "LIST": ListStateDescriptor, "REDUCING": ReducingStateDescriptor,
          "AGGREGATING": AggregatingStateDescriptor}


SqlRows = Literal["columns", "bytes"]


@dataclass(frozen=True)
class ReadOptions:
    """How Flink values become columns: user names for Row fields ("operator/state" -> names), Kryo/Avro values as raw bytes,
    SQL operators' RowData as columns (named by a compiled plan at sql_plan) or as their BinaryRowData bytes."""

    raw_values: bool = False
    row_fields: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    sql_rows: SqlRows = "columns"
    sql_plan: str | None = None
    kryo_classes: tuple[str, ...] = ()  # class schemas of Kryo values ("com.acme.Order=id:String,tags:List<String>")

    @staticmethod
    def of(raw_values: bool = False, row_fields: str | Mapping[str, Sequence[str] | str] | None = None, *,
           sql_rows: str = "columns", sql_plan: str | os.PathLike[str] | None = None,
           kryo_classes: str | Sequence[str] | Mapping[str, str] | None = None) -> ReadOptions:
        """Options from user input: row_fields as a mapping or as "op/state=a,b;op/state2=c" (parse_row_fields);
        kryo_classes as "com.acme.Order=id:String,n:long;final com.acme.Point=x:int,y:int" or a list or mapping of them."""
        if sql_rows not in ("columns", "bytes"):
            raise InvalidArgumentError(f"sql_rows must be 'columns' or 'bytes', got {sql_rows!r}")
        if sql_plan is not None and sql_rows == "bytes":
            raise InvalidArgumentError("sql_plan names SQL columns: it needs sql_rows='columns'")
        return ReadOptions(bool(raw_values), parse_row_fields(row_fields), sql_rows,  # type: ignore[arg-type]
                           None if sql_plan is None else os.fspath(sql_plan), kryo_specs(kryo_classes))


def kryo_specs(spec: str | Sequence[str] | Mapping[str, str] | None) -> tuple[str, ...]:
    """Kryo class schemas from user input, checked and as spec texts (`serde.kryo.schema.parse_class_specs`)."""
    return tuple(sorted(spec_of(s) for s in parse_class_specs(spec).classes.values()))


def parse_row_fields(spec: str | Mapping[str, Sequence[str] | str] | None) -> dict[str, tuple[str, ...]]:
    """Row field names per state: {"operator/state": ["id", "name"]} or "operator/state=id,name;operator/other=a,b"."""
    if spec is None or spec == "":
        return {}
    items: list[tuple[str, Sequence[str] | str]]
    if isinstance(spec, str):
        items = []
        for part in spec.split(";"):
            if not part.strip():
                continue
            target, eq, names = part.partition("=")
            if not eq:
                raise InvalidArgumentError(f"row fields {part.strip()!r}: expected 'operator/state=name,name,...'")
            items.append((target.strip(), names))
    else:
        items = list(spec.items())
    out: dict[str, tuple[str, ...]] = {}
    for target, names in items:
        got = tuple(n.strip() for n in (names.split(",") if isinstance(names, str) else names))
        if "/" not in target or not all(got) or len(set(got)) != len(got):
            raise InvalidArgumentError(f"row fields for {target!r}: expected 'operator/state' and distinct non-empty names, got {list(got)}")
        out[target] = got
    return out


def parse_ttl(spec: str | Iterable[str] | Mapping[str, StateTtlConfig | int] | None) -> dict[str, StateTtlConfig | int]:
    """TTL durations per state: {"operator/state": ms or StateTtlConfig}, "operator/state=MS;state=MS", or such items (`--ttl`)."""
    if spec is None or spec == "":
        return {}
    if isinstance(spec, Mapping):
        items = list(spec.items())
    else:
        items = []
        for part in (spec.split(";") if isinstance(spec, str) else spec):
            if not part.strip():
                continue
            target, eq, ms = part.partition("=")
            if not eq or not ms.strip().isdigit() or not target.strip():
                raise InvalidArgumentError(f"ttl {part.strip()!r}: expected 'operator/state=milliseconds' or 'state=milliseconds'")
            items.append((target.strip(), int(ms)))
    out: dict[str, StateTtlConfig | int] = {}
    for target, got in items:
        if not isinstance(got, StateTtlConfig) and (isinstance(got, bool) or not isinstance(got, numbers.Integral) or got <= 0):
            raise InvalidArgumentError(f"ttl for {target!r}: expected milliseconds (a positive integer) or a StateTtlConfig, got {got!r}")
        out[str(target)] = got if isinstance(got, StateTtlConfig) else int(got)
    return out


def _named(typ: pa.DataType, names: tuple[str, ...] | None, where: str) -> pa.DataType:
    """A Row's struct type with the user's field names (positional: Flink's Row serializer keeps no names)."""
    if names is None:
        return typ
    if not pa.types.is_struct(typ) or typ.num_fields != len(names):
        raise InvalidArgumentError(f"{where}: row fields {list(names)} do not fit its values of type {typ}")
    return pa.struct([pa.field(n, typ.field(i).type) for i, n in enumerate(names)])


def _rename_struct(col: pa.ChunkedArray, typ: pa.DataType) -> pa.ChunkedArray:
    """col (a struct column) with the field names of typ (same fields, other names), values unchanged."""
    chunks = []
    for ch in col.chunks:
        mask = ch.is_null() if ch.null_count else None
        chunks.append(pa.StructArray.from_arrays([ch.field(i) for i in range(ch.type.num_fields)], fields=list(typ), mask=mask))
    return pa.chunked_array(chunks, typ)


def ttl_for(ttl: Mapping[str, StateTtlConfig | int], op: OperatorState, state: str) -> StateTtlConfig | None:
    """The TTL a user gave for a state of an operator (ttl resolved by `names.resolve_options`), as a StateTtlConfig."""
    got = lookup(ttl, op, state)
    if got is None:
        return None
    return got if isinstance(got, StateTtlConfig) else StateTtlConfig(ttl_ms=int(got))


def state_descriptor(dec: _StateDecoder, op: str, ttl: Mapping[str, StateTtlConfig | int], unknown: list[str],
                     options: ReadOptions | None = None, *, flink_op: OperatorState) -> KeyedStateDescriptor:
    """The flinkstate descriptor of a Flink keyed state of flink_op (named op here), from its serializer snapshot.

    A savepoint does not hold TTL durations: a TTL state without one given keeps its timestamps
    under a TTL that never expires, and is named in `unknown`. Row fields are f0..fn unless
    options name them for "operator/state". ttl and options are keyed as `names.resolve_options` resolves them.
    """
    names = (options or ReadOptions()).row_fields.get(state_key(flink_op, dec.meta.name))
    value_type = None if dec.elem_node is None else _named(arrow_type(dec.elem_node), names, f"operator {op!r}, state {dec.meta.name!r}")
    ns = None if dec.ns_node.kind == "void" else arrow_type(dec.ns_node)
    if isinstance(dec, (PyFlinkDecoder, SqlDecoder)):  # PyFlink: the types it declared, its unwrapped key; SQL: RowData as columns
        key_type, user_key_type, value_type = dec.key_type, dec.user_key_type, dec.value_type
    else:
        key_type = arrow_type(dec.key_node)
        user_key_type = arrow_type(dec.value_node.children[0]) if dec.kind == "MAP" else None
    cfg = None
    if dec.ttl:
        cfg = ttl_for(ttl, flink_op, dec.meta.name)
        if cfg is None:
            unknown.append(f"{op}/{dec.meta.name}")
            cfg = StateTtlConfig(ttl_ms=MAX_TIMESTAMP)
    common: dict[str, Any] = {"name": dec.meta.name, "key_type": key_type, "namespace_type": ns, "ttl": cfg}
    if dec.kind == "MAP":
        return MapStateDescriptor(user_key_type=user_key_type, user_value_type=value_type, **common)
    cls = _KINDS.get(dec.kind)
    if cls is None:
        raise UnsupportedFlinkFormatError(f"operator {op!r}, state {dec.meta.name!r}: keyed state type {dec.kind} cannot be read")
    return cls(value_type=value_type, **common)


def stored_rows(table: pa.Table, desc: KeyedStateDescriptor) -> pa.Table:
    """A decoded Flink state table in flinkstate's stored layout: ttl_timestamp, and a list per key for list state."""
    if "ttl_last_access" in table.column_names:
        table = table.rename_columns(["ttl_timestamp" if c == "ttl_last_access" else c for c in table.column_names])
    want = desc.user_value_type if isinstance(desc, MapStateDescriptor) else getattr(desc, "value_type", None)
    if "value" in table.column_names and want is not None and pa.types.is_struct(want) and table.schema.field("value").type != want:
        table = table.set_column(table.column_names.index("value"), "value", _rename_struct(table.column("value"), want))
    if isinstance(desc, ListStateDescriptor):
        keys = [c for c in ("key_group", "key", "namespace") if c in table.column_names]
        lists = [c for c in ("value", "ttl_timestamp") if c in table.column_names]
        # A list's elements come decoded from its one record, one after another: each run of equal keys is a list,
        # its elements already in order (no grouping, no reordering copy of the values).
        starts = _key_runs(_groupable(table.select(keys)))
        offsets = pa.array(np.append(starts, table.num_rows).astype(np.int32))
        first = pa.array(starts)
        cols = {k: table.column(k).take(first) for k in keys}
        for c in lists:
            cols[c] = pa.ListArray.from_arrays(offsets, table.column(c).combine_chunks())
        table = pa.table(cols)
    return table


def _key_runs(keys: pa.Table) -> np.ndarray:
    """Where each run of rows with equal (non-nested) key columns starts (nulls equal to nulls)."""
    n = keys.num_rows
    if n == 0:
        return np.zeros(0, np.int64)
    new = np.zeros(n, bool)
    new[0] = True
    for col in keys.columns:
        a, b = col.slice(1), col.slice(0, n - 1)
        eq = pc.fill_null(pc.equal(a, b), False)
        if col.null_count:
            eq = pc.or_(eq, pc.and_(pc.is_null(a), pc.is_null(b)))
        new[1:] |= ~eq.to_numpy(zero_copy_only=False)
    return np.flatnonzero(new)


def _groupable(table: pa.Table) -> pa.Table:
    """The columns with every struct (a Tuple, Row or POJO key) replaced by its fields, recursively: Arrow's hash
    grouping has no kernel for nested types."""
    cols: dict[str, pa.ChunkedArray] = {}

    def add(name: str, col: pa.ChunkedArray) -> None:
        if pa.types.is_struct(col.type):
            for i in range(col.type.num_fields):
                add(f"{name}.{i}", pc.struct_field(col, [i]))
        else:
            cols[name] = col

    for name in table.column_names:
        add(name, table.column(name))
    return pa.table(cols)


def subtask_range(sub: SubtaskState) -> tuple[int, int] | None:
    """The key-group range of a subtask's keyed state (None: it has none)."""
    h = sub.managed_keyed
    if h is None:
        return None
    if isinstance(h, UnsupportedKeyedHandle):
        return (h.start, h.start + h.count - 1)
    return (h.start, h.end)


def decode_subtask(meta: CheckpointMetadata, op: OperatorState, sub: SubtaskState,
                   key_groups: list[int] | None = None, states: Iterable[str] | None = None,
                   header: KeyedHeader | None = None) -> dict[str, _StateDecoder]:
    """Every keyed state and timer service of one subtask (by state name), decoded; with `states` (Flink names),
    only their records are decoded (the others come back empty), so reading one state does not decode the operator's.

    With key groups asked, a canonical or heap file is read only in their byte ranges (per-key-group offsets), a
    RocksDB handle only in the SSTs and blocks that may hold them (a run of consecutive key groups at a time).
    """
    only = None if states is None else frozenset(n for s in states for n in (s, PREFIX + s))  # PyFlink's `X` is python-state-X
    h = sub.managed_keyed
    if h is None:
        return {}
    if sub.raw_keyed is not None:
        raise UnsupportedFlinkFormatError(f"{meta.path}: operator {op.label} subtask {sub.index} has raw keyed state, which is not supported")
    if key_groups is not None and isinstance(h, KeyGroupsHandle):
        return _wrapped(meta, op, decode_key_groups(h, meta.directory, op, key_groups, only=only, header=header)[2])
    if isinstance(h, UnsupportedKeyedHandle):
        if h.meta_stream is None:
            raise UnsupportedFlinkFormatError(f"{meta.path}: operator {op.label} subtask {sub.index} uses {h.kind}, which is not supported")
        if key_groups is None:
            return _wrapped(meta, op, decode_rocksdb_handle(h, meta.directory, op, only=only)[2])
        decoders, indexes = None, {}
        for run in _runs(sorted(k for k in set(key_groups) if h.start <= k < h.start + h.count)) or [(h.start, h.start - 1)]:
            decoders = decode_rocksdb_handle(h, meta.directory, op, decoders, only, run, indexes)[2]
        return _wrapped(meta, op, decoders)
    return _wrapped(meta, op, decode_keyed_handle(h, meta.directory, op, only=only)[2])


def _runs(key_groups: list[int]) -> list[tuple[int, int]]:
    """Sorted key groups as runs of consecutive ones (first, last)."""
    out: list[tuple[int, int]] = []
    for k in key_groups:
        if out and out[-1][1] == k - 1:
            out[-1] = (out[-1][0], k)
        else:
            out.append((k, k))
    return out


def decode_subtask_chunks(meta: CheckpointMetadata, op: OperatorState, sub: SubtaskState,
                          chunk_bytes: int) -> Iterator[tuple[tuple[int, int] | None, dict[str, _StateDecoder]]]:
    """One subtask's keyed states decoded a chunk of key groups at a time: per chunk its key groups (first, last; None: the
    whole handle) and its decoders (`decode_subtask` over those key groups), so memory holds one chunk, not the subtask.

    A canonical or heap file is cut by its per-key-group offsets into chunks of about chunk_bytes of file
    (`key_group_chunks`) and each chunk read by ranged reads; a RocksDB handle into runs of about chunk_bytes of SSTs by
    their key spans in the MANIFEST (`rocksdb_chunks`), each read from the SSTs and blocks that may hold it; state
    inline in `_metadata` is one chunk. Every chunk declares every state of the header (a state without rows there has
    an empty decoder).
    """
    h = sub.managed_keyed
    if isinstance(h, UnsupportedKeyedHandle) and h.meta_stream is not None:
        prefix = 1 if op.max_parallelism <= 128 else 2
        indexes: dict = {}  # each SST's index, read by the first run that meets it
        for run in rocksdb_chunks(h, meta.directory, prefix, f"operator {op.label} subtask {sub.index}", chunk_bytes):
            yield run, _wrapped(meta, op, decode_rocksdb_handle(h, meta.directory, op, key_groups=run, indexes=indexes)[2])
        return
    if not isinstance(h, KeyGroupsHandle) or h.stream.data is not None:
        yield None, decode_subtask(meta, op, sub)
        return
    header = None
    for first, last in key_group_chunks(h, chunk_bytes):
        header = header or read_header(h, meta.directory, op)  # read and parsed once for all the chunks
        yield (first, last), decode_subtask(meta, op, sub, key_groups=list(range(first, last + 1)), header=header)


def _wrapped(meta: CheckpointMetadata, op: OperatorState, decoders: dict[str, _StateDecoder]) -> dict[str, Any]:
    """Decoders as the read sees them: PyFlink states under their Python names, SQL operators' RowData as columns."""
    return sql_states(meta, op, pyflink_states(meta, op, decoders))


def subtask_states(meta: CheckpointMetadata, op: OperatorState, sub: SubtaskState) -> dict[str, _StateDecoder]:
    """The keyed states and timer services a subtask's handle declares, from its header only (nothing decoded)."""
    from flinkstate.flink._io import DataReader
    from flinkstate.flink.serde.serializers import read_keyed_header

    h = sub.managed_keyed
    if h is None:
        return {}
    stream = h.meta_stream if isinstance(h, UnsupportedKeyedHandle) else h.stream
    if stream is None:
        raise UnsupportedFlinkFormatError(f"{meta.path}: operator {op.label} subtask {sub.index} uses {h.kind}, which is not supported")
    ctx = f"operator {op.label}"
    where = stream.location(meta.directory) if stream.kind != "inline" else f"inline state {stream.path}"
    data = stream.read(meta.directory) if isinstance(h, UnsupportedKeyedHandle) else header_bytes(h, meta.directory)  # the header only
    _, key_type, metas = read_keyed_header(DataReader(data, where=where), ctx, len(data))  # the header only: its end is the data's
    prefix = 1 if op.max_parallelism <= 128 else 2
    return _wrapped(meta, op, {m.name: _StateDecoder(m, key_type, prefix, f"{ctx}, state {m.name!r}", op.kryo, op.operator_id)
                               for m in metas})


def key_groups_of(meta: CheckpointMetadata, uid: str, keys: Any, key_groups: Any, key_type: pa.DataType, maxp: int) -> set[int] | None:
    """The key groups a read of an operator is restricted to: PyFlink keys hash as the one-field Row PyFlink wraps them in,
    SQL keys (given by their columns) as the BinaryRowData Flink keeps them as."""
    from flinkstate.read.keyed_scan import key_groups_of as plain_key_groups_of

    key_row = meta.options.get(SQL_OPS, {}).get(uid)
    if keys is not None and key_row is not None:
        allowed = plain_key_groups_of(None, key_groups, key_type, maxp)
        kgs = set(sql_key_groups(list(keys), key_row, maxp).to_pylist())
        return kgs if allowed is None else allowed & kgs
    if keys is None or uid not in meta.options.get("pyflink_ops", ()):
        return plain_key_groups_of(keys, key_groups, key_type, maxp)
    allowed = plain_key_groups_of(None, key_groups, key_type, maxp)
    kgs = row_key_groups(list(keys), key_type, maxp)
    return kgs if allowed is None else allowed & kgs

