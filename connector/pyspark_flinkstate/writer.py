"""Writing a keyed state from a DataFrame: executors write data files, the driver commits once.

Planning (`FlinkStateWriter.__init__`, on the driver) opens the job root, starts a checkpoint
with `store.begin` to pin its id, base and log version, and checks the DataFrame's columns
against the state (or derives a new state's types from them). Each task (`write`) turns its
Arrow batches into storage rows and writes delta files with flinkstate's writer, returning
their manifest entries. `commit` registers them with a `CheckpointWriter` planned against
the same log version (a concurrent commit makes it fail with CommitConflictError and
nothing becomes visible); `abort` deletes the files.

Overwrite replaces the state: its old files are dropped and the new rows are registered as
delta files (tasks hold arbitrary keys, so their files may cover the same key groups; deltas
merge newest-wins where full files would shadow each other). Append upserts; with
`operation=delete` it writes tombstones. Append on a list state appends elements: each task
reads the stored lists of its keys from the planned base checkpoint and writes them followed by
the new elements (`listMode=overwrite` writes only the new lists, replacing each key's).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from flinkstate.core.errors import (
    CommitOutcomeUnknownError,
    InvalidArgumentError,
    SchemaMismatchError,
    StateNotFoundError,
)
from flinkstate.core.io import FileIO
from flinkstate.format import constants as C
from flinkstate.format.datafile import FileEntry
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage

from pyspark_flinkstate.commit import (
    commit_planned,
    delete_entries,
    plan_max_parallelism,
)
from pyspark_flinkstate.options import WriteOptions, parse_write_options

__all__ = ["FlinkStateWriter", "FlinkStateCommitMessage", "WritePlan", "plan_write", "to_storage_table", "commit_plan", "delete_entries"]


@dataclass
class FlinkStateCommitMessage(WriterCommitMessage):
    """What one task wrote: its files and the key groups its rows fall in."""

    entries: list[FileEntry] = field(default_factory=list)
    key_groups: list[int] = field(default_factory=list)
    partition_id: int = 0


@dataclass
class WritePlan:
    """A write fixed at planning time (picklable)."""

    io: FileIO
    operator: str
    desc: dict[str, Any]
    kind: str  # checkpoint | savepoint
    checkpoint_id: int
    base_checkpoint_id: int | None
    planned_version: int
    max_parallelism: int
    mode: str  # full | delta
    tombstones: bool
    flattened_list: bool
    new_state: bool
    list_append: bool = False  # mode("append") on an existing list state: each key's list grows by the new elements
    stored_deletes: bool = False  # a delete by fewer columns than an entry's key (a map's key alone): tombstones of what it names
    sql: Any = None  # flinkstate.flink.bridge.sql_columns.SqlColumns: a SQL job's imported state, written by its columns

    @property
    def collects_lists(self) -> bool:
        """Whether tasks report key groups so the driver merges lists of one key written by several tasks."""
        return (self.flattened_list or self.list_append) and not self.tombstones

    def descriptor(self) -> Any:
        from flinkstate.core.descriptors import descriptor_from_dict

        return descriptor_from_dict(self.desc)


def _arrow_schema(spark_schema: Any) -> pa.Schema:
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(spark_schema, timezone="UTC")


def _new_descriptor(o: WriteOptions, schema: pa.Schema) -> Any:
    from flinkstate.core.descriptors import (
        ListStateDescriptor,
        MapStateDescriptor,
        ValueStateDescriptor,
    )
    from flinkstate.core.keygroups import is_supported_key_type
    from flinkstate.core.ttl import StateTtlConfig

    from pyspark_flinkstate.schema import storage_type

    names = schema.names
    for need in ("key", "value"):
        if need not in names:
            raise SchemaMismatchError(f"writing new state {o.state!r} of operator {o.operator!r}: the DataFrame needs a {need!r} column; got {names}")
    key_t = storage_type(schema.field("key").type)
    if not is_supported_key_type(key_t):
        raise SchemaMismatchError(f"column 'key' has type {key_t}: key groups are defined for int, long, string, boolean, float, double and structs of them")
    ns_t = storage_type(schema.field("namespace").type) if "namespace" in names else None
    kind = o.state_kind or ("map" if "user_key" in names else "value")
    ttl = StateTtlConfig(ttl_ms=o.ttl_ms) if o.ttl_ms else None
    value_t = storage_type(schema.field("value").type)
    if kind == "map":
        if "user_key" not in names:
            raise SchemaMismatchError(f"map state {o.state!r}: the DataFrame needs a 'user_key' column; got {names}")
        return MapStateDescriptor(name=o.state, key_type=key_t, namespace_type=ns_t, ttl=ttl,
                                  user_key_type=storage_type(schema.field("user_key").type), user_value_type=value_t)
    if kind == "list":
        elem = value_t.value_type if pa.types.is_list(value_t) else value_t
        return ListStateDescriptor(name=o.state, key_type=key_t, namespace_type=ns_t, ttl=ttl, value_type=elem)
    return ValueStateDescriptor(name=o.state, key_type=key_t, namespace_type=ns_t, ttl=ttl, value_type=value_t)


def _check_columns(desc: Any, schema: pa.Schema, what: str, tombstones: bool, sql: Any = None) -> bool:
    """Check a DataFrame against a state's types (a SQL state's RowData parts: their columns, or the bytes as stored);
    returns True for a flattened list."""
    from flinkstate.format.datafile import castable

    def typed(name: str, stored: pa.DataType) -> pa.DataType:
        if sql is None or name not in schema.names or pa.types.is_binary(schema.field(name).type):
            return stored
        return sql.column_type(name, stored, schema.field(name).type)

    names = schema.names
    need: list[tuple[str, pa.DataType]] = [("key", typed("key", desc.key_type))]
    # a delete names entries by key alone (a map's or list's whole entry, in every namespace); namespace and user_key narrow it
    if desc.namespace_type is not None and (not tombstones or "namespace" in names):
        need.append(("namespace", desc.namespace_type))
    if desc.kind == "map":
        if not tombstones or "user_key" in names:
            need.append(("user_key", typed("user_key", desc.user_key_type)))
        if not tombstones:
            need.append(("value", typed("value", desc.user_value_type)))
    elif not tombstones:
        need.append(("value", typed("value", desc.value_type)))
    flattened = False
    allowed = {"key", "namespace", "user_key", "value", "key_group", "ttl_expires_at", "ttl_timestamp", "expired"}
    extra = [n for n in names if n not in allowed]
    if extra:
        raise SchemaMismatchError(f"{what}: unexpected columns {extra}; a {desc.kind} state takes {[n for n, _ in need]}")
    for n, t in need:
        if n not in names:
            raise SchemaMismatchError(f"{what}: missing column {n!r} ({t}); got columns {names}")
        got = schema.field(n).type
        if desc.kind == "list" and n == "value":
            if pa.types.is_list(got) or pa.types.is_large_list(got):
                if castable(got, pa.list_(t)):
                    continue
            elif castable(got, t):
                flattened = True
                continue
            raise SchemaMismatchError(f"{what}: column 'value' has type {got}; the list state holds {t} (give elements or arrays of them)")
        if not castable(got, t):
            raise SchemaMismatchError(f"{what}: column {n!r} has type {got}, the state declares {t}")
    return flattened


def plan_write(options: Any, spark_schema: Any, overwrite: bool) -> WritePlan:
    """Check a write against the store and pin its checkpoint (runs on the driver)."""
    import flinkstate

    o = options if isinstance(options, WriteOptions) else parse_write_options(options)
    if o.table != "state":
        raise InvalidArgumentError(f"plan_write writes keyed state (table=state), not table={o.table}; FlinkStateWriter dispatches the others")
    if o.operation == "delete" and overwrite:
        raise InvalidArgumentError("option operation=delete removes keys and needs mode('append'); mode('overwrite') replaces the whole state")
    schema = _arrow_schema(spark_schema) if not isinstance(spark_schema, pa.Schema) else spark_schema
    store = flinkstate.open(o.path, o.storage_options or None)
    w = store.begin(kind="savepoint" if o.savepoint else "checkpoint", checkpoint_id=o.checkpoint_id)
    try:
        base = w.base
        mp = plan_max_parallelism(w, o.operator, o.max_parallelism)
        op = w.operators.get(o.operator)
        existing = op.keyed_states.get(o.state) if op is not None else None
        what = f"operator {o.operator!r} state {o.state!r}"
        if existing is None:
            if o.operation == "delete":
                states = sorted(op.keyed_states) if op is not None else []
                raise StateNotFoundError(f"cannot delete from {what}: it does not exist; keyed states of the operator: {states}")
            if op is not None and o.state in op.timer_services:
                raise InvalidArgumentError(f"{what}: {o.state!r} is a timer service")
            desc = _new_descriptor(o, schema)
        else:
            # ttlMs on an existing TTL state: a new duration, recorded by this checkpoint even if no row changes
            desc = existing if not o.ttl_ms else existing.with_ttl_ms(o.ttl_ms)
            if o.state_kind is not None and o.state_kind != desc.kind:
                raise SchemaMismatchError(f"{what} is a {desc.kind} state, not {o.state_kind}")
            if desc.kind not in ("value", "list", "map", "reducing", "aggregating"):
                raise SchemaMismatchError(f"{what}: cannot write a {desc.kind} state")
        from flinkstate.flink.bridge.sql_columns import sql_columns

        sql = None if existing is None else sql_columns(w.properties, o.operator, o.state)
        flattened = _check_columns(desc, schema, what, o.operation == "delete", sql)
        if o.list_mode is not None and (desc.kind != "list" or overwrite or o.operation == "delete"):
            raise InvalidArgumentError(f"{what}: option listMode applies to mode('append') of a list state; this write is a "
                                       f"{'delete' if o.operation == 'delete' else 'overwrite' if overwrite else 'append'} of a {desc.kind} state")
        list_append = desc.kind == "list" and not overwrite and o.operation != "delete" and existing is not None and o.list_mode != "overwrite"
        from flinkstate.format.deletes import deleted_columns, needs_stored_entries

        stored_deletes = o.operation == "delete" and needs_stored_entries(desc, deleted_columns(desc, list(schema.names), what))
        return WritePlan(
            io=store.io, operator=o.operator, desc=desc.to_dict(), kind=w.kind, checkpoint_id=w.checkpoint_id,
            base_checkpoint_id=None if base is None else base.checkpoint_id, planned_version=int(w.planned_version),
            max_parallelism=mp, mode="full" if overwrite else "delta", tombstones=o.operation == "delete",
            flattened_list=flattened, new_state=existing is None, list_append=list_append, sql=sql, stored_deletes=stored_deletes,
        )
    finally:
        w.abort()  # nothing written: it only pinned the plan


# ------------------------------------------------------------------ executors
def _now_ms() -> int:
    return int(time.time() * 1000)


def to_storage_table(table: pa.Table, desc: Any, *, tombstones: bool, flattened_list: bool) -> pa.Table:
    """DataFrame rows (Arrow) to the storage columns of a keyed state (without key_group)."""
    names = table.column_names
    cols: dict[str, Any] = {C.COL_KEY: table.column("key")}
    if desc.namespace_type is not None:
        cols[C.COL_NAMESPACE] = table.column("namespace")
    if desc.kind == "map":
        cols[C.COL_USER_KEY] = table.column("user_key")
    n = table.num_rows
    if desc.kind == "list":
        vt = pa.list_(desc.value_type)
    elif desc.kind == "map":
        vt = desc.user_value_type
    else:
        vt = desc.value_type
    if tombstones:
        cols[C.COL_VALUE] = pa.nulls(n, vt)
    else:
        cols[C.COL_VALUE] = table.column("value")
    ttl_ms = desc.ttl.ttl_ms if desc.ttl_enabled else None
    if ttl_ms is not None:
        if "ttl_timestamp" in names:
            last = table.column("ttl_timestamp").cast(pa.int64())
        elif "ttl_expires_at" in names and not (desc.kind == "list" and not flattened_list and not tombstones):
            exp = table.column("ttl_expires_at").cast(pa.timestamp("ms", tz="UTC")).cast(pa.int64())
            last = pc.subtract(exp, ttl_ms)
        else:
            last = pa.array(np.full(n, _now_ms(), dtype=np.int64))
        cols[C.COL_TTL] = last
    out = pa.table(cols)
    if desc.kind == "list" and not tombstones:
        if flattened_list:
            out = _collect_lists(out, desc)
        elif ttl_ms is not None:
            values = out.column(C.COL_VALUE).combine_chunks()
            lengths = pc.fill_null(pc.list_value_length(values), 0).to_numpy(zero_copy_only=False)
            last = np.asarray(out.column(C.COL_TTL).to_numpy(zero_copy_only=False), dtype=np.int64)
            flat = np.repeat(last, lengths)
            out = out.set_column(out.column_names.index(C.COL_TTL), C.COL_TTL,
                                 pa.ListArray.from_arrays(pa.array(np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)), pa.array(flat)))
    elif desc.kind == "list" and tombstones and ttl_ms is not None:
        out = out.set_column(out.column_names.index(C.COL_TTL), C.COL_TTL, pa.nulls(n, pa.list_(pa.int64())))
    out = out.append_column(C.COL_TOMBSTONE, pa.array(np.full(out.num_rows, tombstones, dtype=bool)))
    return out


def _collect_lists(t: pa.Table, desc: Any) -> pa.Table:
    """Flattened list rows (one per element) to one row per key (and namespace), in row order."""
    from flinkstate.format.merge import group_rows

    pk = [C.COL_KEY] + ([C.COL_NAMESPACE] if desc.namespace_type is not None else [])
    firsts, order, offsets = group_rows(t, pk)
    out = t.select(pk).take(firsts)
    out = out.append_column(C.COL_VALUE, pa.ListArray.from_arrays(offsets, t.column(C.COL_VALUE).take(order).combine_chunks()))
    if C.COL_TTL in t.column_names:
        out = out.append_column(C.COL_TTL, pa.ListArray.from_arrays(offsets, t.column(C.COL_TTL).take(order).combine_chunks()))
    return out


def _pk(desc: Any) -> list[str]:
    return [C.COL_KEY] + ([C.COL_NAMESPACE] if desc.namespace_type is not None else [])


def _elements(t: pa.Table, pk: list[str]) -> tuple[pa.Table, np.ndarray, np.ndarray]:
    """List rows to one row per element (row order kept); also each element's row and position in its list."""
    values = t.column(C.COL_VALUE).combine_chunks()
    parents = pc.list_parent_indices(values)
    el = t.select(pk).take(parents).append_column(C.COL_VALUE, pc.list_flatten(values))
    if C.COL_TTL in t.column_names:
        el = el.append_column(C.COL_TTL, pc.list_flatten(t.column(C.COL_TTL).combine_chunks()))
    par = np.asarray(parents.to_numpy(zero_copy_only=False), dtype=np.int64)
    offs = np.asarray(values.offsets.to_numpy(zero_copy_only=False), dtype=np.int64)
    pos = np.arange(len(par), dtype=np.int64) + offs[0] - offs[par] if len(par) else par
    return el, par, pos


def _existing_lists(plan: WritePlan, desc: Any, t: pa.Table) -> tuple[pa.Table, np.ndarray]:
    """The stored lists (raw rows of the planned base checkpoint) of t's keys, and for each row of t its match (-1: none)."""
    import flinkstate
    from flinkstate.format.merge import flat_key_columns

    n = t.num_rows
    pk = _pk(desc)
    keys = t.column(C.COL_KEY).cast(desc.key_type)
    store = flinkstate.open(plan.io.root, plan.io.storage_options or None)
    ex = store.read_state(plan.operator, desc.name, plan.base_checkpoint_id, keys=pc.unique(keys).to_pylist(), raw=True)
    match = np.full(n, -1, dtype=np.int64)
    if ex.num_rows == 0 or n == 0:
        return ex, match
    mine = t.select(pk).set_column(0, C.COL_KEY, keys)
    if desc.namespace_type is not None:
        mine = mine.set_column(1, C.COL_NAMESPACE, mine.column(C.COL_NAMESPACE).cast(desc.namespace_type))
    lk, rk = flat_key_columns(mine, pk), flat_key_columns(ex, pk)
    names = [f"__g{i}" for i in range(len(lk))]
    left = pa.table({**dict(zip(names, lk)), "__l": pa.array(np.arange(n, dtype=np.int64))})
    right = pa.table({**dict(zip(names, rk)), "__r": pa.array(np.arange(ex.num_rows, dtype=np.int64))})
    j = left.join(right, keys=names, join_type="inner", use_threads=False)
    match[j.column("__l").to_numpy()] = j.column("__r").to_numpy()
    return ex, match


def _prepend_existing(plan: WritePlan, desc: Any, new: pa.Table, ex: pa.Table, match: np.ndarray) -> pa.Table:
    """One row per key of `new` whose list is the stored list followed by the new elements (Flink's ListState.addAll)."""
    pk = _pk(desc)
    rows = np.nonzero(match >= 0)[0]
    new_el, new_par, _ = _elements(new, pk)
    if len(rows):
        old_el, old_par, _ = _elements(ex.take(pa.array(match[rows])), pk)
        old_par = rows[old_par]
    else:
        old_el, old_par = new_el.slice(0, 0), new_par[:0]
    row_of = np.concatenate([old_par, new_par])
    order = pa.array(np.argsort(row_of, kind="stable"))  # per key: the stored elements first, then the new ones in order
    offsets = pa.array(np.concatenate([[0], np.cumsum(np.bincount(row_of, minlength=new.num_rows))]).astype(np.int32))
    out = new.select(pk)
    vals = pa.concat_arrays([old_el.column(C.COL_VALUE).combine_chunks().cast(desc.value_type),
                             new_el.column(C.COL_VALUE).combine_chunks().cast(desc.value_type)])
    out = out.append_column(C.COL_VALUE, pa.ListArray.from_arrays(offsets, vals.take(order)))
    if C.COL_TTL in new.column_names:
        ttl = pa.concat_arrays([old_el.column(C.COL_TTL).combine_chunks().cast(pa.int64()), new_el.column(C.COL_TTL).combine_chunks().cast(pa.int64())])
        out = out.append_column(C.COL_TTL, pa.ListArray.from_arrays(offsets, ttl.take(order)))
    return out


def _append_lists(plan: WritePlan, desc: Any, storage: pa.Table) -> pa.Table:
    """A task's list rows (elements or arrays) to one row per key holding its stored list plus the new elements."""
    el, _, _ = _elements(storage, _pk(desc))
    new = _collect_lists(el, desc)
    ex, match = _existing_lists(plan, desc, new)
    out = _prepend_existing(plan, desc, new, ex, match)
    return out.append_column(C.COL_TOMBSTONE, pa.array(np.zeros(out.num_rows, dtype=bool)))


def _named_entries(plan: WritePlan, desc: Any, deletes: pa.Table) -> pa.Table:
    """The stored entries (their primary-key columns) that deletes by fewer columns name, in the planned base checkpoint:
    a key alone names its whole map or list (every namespace); namespace and user_key narrow it."""
    import flinkstate
    from flinkstate.core.keygroups import assign_key_groups, is_supported_key_type
    from flinkstate.format.deletes import deleted_columns, named_entries

    given = deleted_columns(desc, deletes.column_names, f"operator {plan.operator!r} state {desc.name!r}")
    kgs = None
    if is_supported_key_type(desc.key_type):  # only the deleted keys' key groups are read
        kgs = sorted(set(assign_key_groups(deletes.column(C.COL_KEY).cast(desc.key_type), plan.max_parallelism).to_pylist()))
    ck = flinkstate.open(plan.io.root, plan.io.storage_options or None).checkpoint(plan.base_checkpoint_id)
    stored = ck.scan(plan.operator, desc.name, key_groups=kgs, raw=True).to_arrow()
    return named_entries(stored, deletes.select(given), desc)


def write_partition(plan: WritePlan, batches: Iterator[pa.RecordBatch], partition_id: int) -> FlinkStateCommitMessage:
    """One task: write its rows as delta files (format v1) and report them."""
    from flinkstate.format.writer import with_key_groups, write_state_files

    bl = [b for b in batches if b.num_rows]
    if not bl:
        return FlinkStateCommitMessage([], [], partition_id)
    table = pa.Table.from_batches(bl)
    desc = plan.descriptor()
    if plan.sql is not None:  # a SQL job's state: its columns encoded to the BinaryRowData it is stored as
        table = plan.sql.encode(table, f"operator {plan.operator!r} state {desc.name!r}")
    if plan.stored_deletes:
        table = _named_entries(plan, desc, table)
    storage = to_storage_table(table, desc, tombstones=plan.tombstones, flattened_list=plan.flattened_list)
    if plan.list_append:
        storage = _append_lists(plan, desc, storage)
    kgs: list[int] = []
    if plan.collects_lists:  # the driver merges lists split over tasks
        storage = with_key_groups(storage, plan.max_parallelism, f"operator {plan.operator!r} state {desc.name!r}", desc.key_type)
        kgs = np.unique(storage.column(C.COL_KEY_GROUP).to_numpy()).tolist()
    entries = write_state_files(plan.io, plan.operator, desc, storage, checkpoint_id=plan.checkpoint_id, checkpoint_kind=plan.kind,
                                max_parallelism=plan.max_parallelism, delta=True, seq=partition_id + 1, write_empty=False)
    return FlinkStateCommitMessage(entries, kgs, partition_id)


# ------------------------------------------------------------------ driver commit
def _list_fixup(plan: WritePlan, messages: list[FlinkStateCommitMessage]) -> list[FileEntry]:
    """Flattened list rows of one key may land in several tasks: merge those keys' lists."""
    from flinkstate.format.datafile import read_data_file
    from flinkstate.format.writer import write_state_files

    count: dict[int, int] = {}
    for m in messages:
        for k in m.key_groups:
            count[k] = count.get(k, 0) + 1
    shared = sorted(k for k, c in count.items() if c > 1)
    if not shared:
        return []
    import pyarrow.dataset as ds

    desc = plan.descriptor()
    ordered = sorted((m for m in messages if set(m.key_groups) & set(shared)), key=lambda m: m.partition_id)
    parts = []
    for m in ordered:
        for e in m.entries:
            if e.key_group_end < shared[0] or e.key_group_start > shared[-1]:
                continue
            parts.append(read_data_file(plan.io, e, filter=ds.field(C.COL_KEY_GROUP).isin(shared)))
    if not parts:
        return []
    t = pa.concat_tables(parts)
    pk = _pk(desc)
    # explode to elements (in task order), then collect again per key
    el, par, pos = _elements(t, pk)
    if plan.list_append:  # every task put the stored list first: keep it once
        ex, match = _existing_lists(plan, desc, t)
        lengths = np.zeros(t.num_rows + 1, dtype=np.int64)
        hit = match >= 0
        if hit.any():
            stored = pc.fill_null(pc.list_value_length(ex.column(C.COL_VALUE).combine_chunks().take(pa.array(match[hit]))), 0)
            lengths[np.nonzero(hit)[0]] = stored.to_numpy(zero_copy_only=False)
        el = el.filter(pa.array(pos >= lengths[par]))
        new = _collect_lists(el, desc)
        ex, match = _existing_lists(plan, desc, new)
        merged = _prepend_existing(plan, desc, new, ex, match)
    else:
        merged = _collect_lists(el, desc)
    merged = merged.append_column(C.COL_TOMBSTONE, pa.array(np.zeros(merged.num_rows, dtype=bool)))
    seq = max((e.seq for m in messages for e in m.entries), default=0) + 1
    return write_state_files(plan.io, plan.operator, desc, merged, checkpoint_id=plan.checkpoint_id, checkpoint_kind=plan.kind,
                             max_parallelism=plan.max_parallelism, delta=True, seq=seq, ranges=[(shared[0], shared[-1])], write_empty=False)


def commit_plan(plan: WritePlan, messages: list[Any]) -> Any:
    """Register the tasks' files and complete the checkpoint in one commit (driver)."""
    msgs = [m for m in messages if isinstance(m, FlinkStateCommitMessage)]
    entries = [e for m in msgs for e in m.entries]

    def register(w: Any, store: Any) -> None:
        files = entries
        if plan.collects_lists:
            fixup = _list_fixup(plan, msgs)
            w.adopt(fixup)
            files = entries + fixup
        w.add_state_files(plan.operator, plan.descriptor(), files, mode=plan.mode)
        from flinkstate.store.maintenance import compact_into

        compact_into(w, plan.operator, plan.descriptor().name)  # ranges past the compaction policy: full files, same checkpoint

    return commit_planned(plan, entries, register)


class FlinkStateWriter(DataSourceArrowWriter):
    """`df.write.format("flinkstate")`: a new checkpoint (or savepoint) with one state rewritten."""

    def __init__(self, options: dict[str, str], schema: Any, overwrite: bool) -> None:
        o = parse_write_options(options)
        self.plan: Any
        if o.table == "state":
            self.plan = plan_write(o, schema, overwrite)
        else:  # timers / operatorState
            from pyspark_flinkstate.writer_tables import plan_tables_write

            self.plan = plan_tables_write(o, _arrow_schema(schema) if not isinstance(schema, pa.Schema) else schema, overwrite)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        pid = ctx.partitionId() if ctx is not None else 0
        if isinstance(self.plan, WritePlan):
            return write_partition(self.plan, iterator, pid)
        from pyspark_flinkstate.writer_tables import write_tables_partition

        return write_tables_partition(self.plan, iterator, pid)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        try:
            if isinstance(self.plan, WritePlan):
                commit_plan(self.plan, list(messages))
                return
            from pyspark_flinkstate.writer_tables import commit_tables_plan

            commit_tables_plan(self.plan, list(messages))
        except CommitOutcomeUnknownError:
            self._outcome_unknown = True  # Spark calls abort next: the files may belong to a landed checkpoint
            raise

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        from pyspark_flinkstate.writer_tables import tables_entries

        if getattr(self, "_outcome_unknown", False):
            return  # kept: garbage collection deletes them if the commit did not land

        for m in messages:
            if isinstance(m, FlinkStateCommitMessage):
                delete_entries(self.plan.io, m.entries)
        delete_entries(self.plan.io, tables_entries(list(messages)))
