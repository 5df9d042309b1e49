"""Writing the `timers` and `operatorState` tables from a DataFrame (`option("table", ...)`).

Same two phases as a keyed state write (`writer.py`): the driver pins the checkpoint with
`store.begin` and checks the columns; each task writes its rows as files of its own and
returns their manifest entries; the driver commits them against the log version it planned
with, or deletes them.

Timers (key, [namespace], timestamp) are written as timer delta files: `mode("overwrite")`
replaces the service's timers, `mode("append")` adds timers (a timer the checkpoint already
holds stays once, as Flink's registerTimer), `operation=delete` removes the given timers. A
timer given twice in one write is refused (DuplicateKeyError), as a full put refuses it.

Operator state (subtask, [key], value) is written as one file per task: `mode("overwrite")`
replaces the state, `mode("append")` adds elements (list, union) or entries (broadcast; an
entry (subtask, key) already stored or given twice is refused with DuplicateKeyError).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from flinkstate.core.descriptors import OperatorStateDescriptor, TimerServiceDescriptor
from flinkstate.core.errors import (
    InvalidArgumentError,
    SchemaMismatchError,
    StateNotFoundError,
)
from flinkstate.core.io import FileIO
from flinkstate.format import constants as C
from flinkstate.format.datafile import FileEntry, castable
from pyspark.sql.datasource import WriterCommitMessage

from pyspark_flinkstate.commit import commit_planned, plan_max_parallelism
from pyspark_flinkstate.options import WriteOptions

__all__ = ["TablesWritePlan", "plan_tables_write"]


@dataclass
class TablesWritePlan:
    """A timers or operatorState write fixed at planning time (picklable)."""

    io: FileIO
    table: str  # timers | operatorState
    operator: str
    desc: dict[str, Any]
    kind: str  # checkpoint | savepoint
    checkpoint_id: int
    base_checkpoint_id: int | None
    planned_version: int
    max_parallelism: int
    overwrite: bool
    tombstones: bool
    has_subtask: bool = False

    def timer_descriptor(self) -> TimerServiceDescriptor:
        """The timer service written."""
        return TimerServiceDescriptor.from_dict(self.desc)

    def operator_descriptor(self) -> OperatorStateDescriptor:
        """The operator state written."""
        return OperatorStateDescriptor.from_dict(self.desc)

    @property
    def what(self) -> str:
        """The target, as error messages name it."""
        word = "timer service" if self.table == "timers" else "operator state"
        return f"operator {self.operator!r} {word} {self.desc['name']!r}"


def _storage_type(t: pa.DataType) -> pa.DataType:
    from pyspark_flinkstate.schema import storage_type

    return storage_type(t)


def _check(schema: pa.Schema, need: list[tuple[str, pa.DataType]], optional: dict[str, pa.DataType], what: str, takes: str) -> None:
    """Every needed column present and castable, nothing else; errors name the column."""
    names = schema.names
    allowed = {n for n, _ in need} | set(optional)
    extra = [n for n in names if n not in allowed]
    if extra:
        raise SchemaMismatchError(f"{what}: unexpected columns {extra}; {takes}")
    for n, t in need:
        if n not in names:
            raise SchemaMismatchError(f"{what}: missing column {n!r} ({t}); got columns {names}; {takes}")
    for n, t in [*need, *optional.items()]:
        if n in names and not castable(schema.field(n).type, t):
            raise SchemaMismatchError(f"{what}: column {n!r} has type {schema.field(n).type}, expected {t}")


def _integer(schema: pa.Schema, name: str, what: str) -> None:
    if name in schema.names and not pa.types.is_integer(schema.field(name).type):
        raise SchemaMismatchError(f"{what}: column {name!r} has type {schema.field(name).type}; it holds integers")


def _timer_desc(o: WriteOptions, op: Any, schema: pa.Schema) -> tuple[TimerServiceDescriptor, bool]:
    """The timer service written (existing, or new from the DataFrame and timeDomain) and whether it is new."""
    what = f"operator {o.operator!r} timer service {o.state!r}"
    existing = op.timer_services.get(o.state) if op is not None else None
    if op is not None and o.state in op.keyed_states:
        raise InvalidArgumentError(f"{what}: {o.state!r} is a keyed state of the operator; timer services: {sorted(op.timer_services)}")
    if existing is not None:
        if o.time_domain is not None and o.time_domain != existing.domain:
            raise SchemaMismatchError(f"{what} is a {existing.domain}-time service, not {o.time_domain} (option timeDomain)")
        return existing, False
    if o.operation == "delete":
        raise StateNotFoundError(f"cannot delete timers of {what}: it does not exist; timer services: {sorted(op.timer_services) if op else []}")
    domain = o.time_domain or next((d for d in ("event", "processing") if o.state.startswith(d)), None)
    if domain is None:
        raise InvalidArgumentError(f"{what} is new: give option timeDomain (event or processing)")
    if "key" not in schema.names:
        raise SchemaMismatchError(f"writing new {what}: the DataFrame needs a 'key' column; got {schema.names}")
    from flinkstate.core.keygroups import is_supported_key_type

    key_t = _storage_type(schema.field("key").type)
    if not is_supported_key_type(key_t):
        raise SchemaMismatchError(f"column 'key' has type {key_t}: key groups are defined for int, long, string, boolean, float, double and structs of them")
    keyed = [*op.keyed_states.values(), *op.timer_services.values()] if op is not None else []
    if keyed:  # one key type per keyed operator (Flink has one key serializer): the new service takes it
        if not castable(key_t, keyed[0].key_type):
            raise SchemaMismatchError(f"writing new {what}: column 'key' has type {key_t}, the operator's keys are {keyed[0].key_type}")
        key_t = keyed[0].key_type
    ns_t = _storage_type(schema.field("namespace").type) if "namespace" in schema.names else None
    return TimerServiceDescriptor(name=o.state, domain=domain, key_type=key_t, namespace_type=ns_t), True  # type: ignore[arg-type]


def _operator_desc(o: WriteOptions, op: Any, schema: pa.Schema) -> OperatorStateDescriptor:
    what = f"operator {o.operator!r} operator state {o.state!r}"
    if op is not None and (o.state in op.keyed_states or o.state in op.timer_services):
        raise InvalidArgumentError(f"{what}: {o.state!r} is a keyed state or timer service of the operator; operator states: {sorted(op.operator_states)}")
    existing = op.operator_states.get(o.state) if op is not None else None
    if existing is not None:
        if o.state_kind is not None and o.state_kind != existing.mode:
            raise SchemaMismatchError(f"{what} is a {existing.mode} state, not {o.state_kind} (option stateKind)")
        return existing
    mode = o.state_kind or ("broadcast" if "key" in schema.names else "list")
    if "value" not in schema.names:
        raise SchemaMismatchError(f"writing new {what}: the DataFrame needs a 'value' column; got {schema.names}")
    if mode == "broadcast" and "key" not in schema.names:
        raise SchemaMismatchError(f"writing new broadcast {what}: the DataFrame needs a 'key' column; got {schema.names}")
    key_t = _storage_type(schema.field("key").type) if mode == "broadcast" else None
    return OperatorStateDescriptor(name=o.state, value_type=_storage_type(schema.field("value").type), mode=mode, key_type=key_t)  # type: ignore[arg-type]


def plan_tables_write(o: WriteOptions, schema: pa.Schema, overwrite: bool) -> TablesWritePlan:
    """Check a timers / operatorState write against the store and pin its checkpoint (driver)."""
    import flinkstate


    if o.operation == "delete" and overwrite:
        raise InvalidArgumentError("option operation=delete removes timers and needs mode('append'); mode('overwrite') replaces them all")
    store = flinkstate.open(o.path, o.storage_options or None)
    w = store.begin(kind="savepoint" if o.savepoint else "checkpoint", checkpoint_id=o.checkpoint_id)
    try:
        base = w.base
        mp = plan_max_parallelism(w, o.operator, o.max_parallelism)
        op = w.operators.get(o.operator)
        has_subtask = False
        if o.table == "timers":
            desc: Any
            desc, _ = _timer_desc(o, op, schema)
            what = f"operator {o.operator!r} timer service {desc.name!r}"
            need = [("key", desc.key_type)] + ([("namespace", desc.namespace_type)] if desc.namespace_type is not None else [])
            need.append(("timestamp", pa.int64()))
            read_cols = {"key_group": pa.int32(), "domain": pa.string(), "timer_service": pa.string()}  # what a timers read returns
            _check(schema, need, read_cols, what, f"timers take {[n for n, _ in need]} (and optionally {sorted(read_cols)})")
            _integer(schema, "timestamp", what)
        else:
            desc = _operator_desc(o, op, schema)
            what = f"operator {o.operator!r} operator state {desc.name!r}"
            need = ([("key", desc.key_type)] if desc.mode == "broadcast" else []) + [("value", desc.value_type)]
            _check(schema, need, {"subtask": pa.int32()}, what, f"a {desc.mode} operator state takes {[n for n, _ in need]} and optionally subtask")
            _integer(schema, "subtask", what)
            has_subtask = "subtask" in schema.names
        return TablesWritePlan(
            io=store.io, table=o.table, operator=o.operator, desc=desc.to_dict(), kind=w.kind, checkpoint_id=w.checkpoint_id,
            base_checkpoint_id=None if base is None else base.checkpoint_id, planned_version=int(w.planned_version),
            max_parallelism=mp, overwrite=overwrite, tombstones=o.operation == "delete", has_subtask=has_subtask,
        )
    finally:
        w.abort()  # nothing written: it only pinned the plan


# ------------------------------------------------------------------ executors
@dataclass
class TablesCommitMessage(WriterCommitMessage):
    """What one task wrote: its files and (timers) the key groups of its rows."""

    entries: list[FileEntry]
    key_groups: list[int]
    partition_id: int


def _timer_rows(plan: TablesWritePlan, table: pa.Table) -> pa.Table:
    desc = plan.timer_descriptor()
    cols: dict[str, Any] = {C.COL_KEY: table.column("key")}
    if desc.namespace_type is not None:
        cols[C.COL_NAMESPACE] = table.column("namespace")
    ts = table.column("timestamp")
    if ts.null_count:
        raise SchemaMismatchError(f"{plan.what}: column 'timestamp' has {ts.null_count} null values; every timer has a timestamp")
    cols[C.COL_TIMESTAMP] = ts.cast(pa.int64())
    for name, want in (("domain", desc.domain), ("timer_service", desc.name)):  # a timers read written back: its own service only
        if name in table.column_names:
            other = pc.filter(table.column(name), pc.invert(pc.fill_null(pc.equal(table.column(name), want), False)))
            if len(other):
                raise SchemaMismatchError(f"{plan.what}: column {name!r} holds {other[0].as_py()!r}; this write is {want!r}")
    if "key_group" in table.column_names:
        cols[C.COL_KEY_GROUP] = table.column("key_group")
    cols[C.COL_TOMBSTONE] = pa.array(np.full(table.num_rows, plan.tombstones, dtype=bool))
    return pa.table(cols)


def _timer_pk(desc: TimerServiceDescriptor) -> list[str]:
    return [C.COL_KEY] + ([C.COL_NAMESPACE] if desc.namespace_type is not None else []) + [C.COL_TIMESTAMP]


def _operator_rows(plan: TablesWritePlan, table: pa.Table, partition_id: int) -> pa.Table:
    desc = plan.operator_descriptor()
    n = table.num_rows
    if plan.has_subtask:
        sub = table.column("subtask")
        if sub.null_count or (n and pc.min(sub).as_py() < 0):
            raise SchemaMismatchError(f"{plan.what}: column 'subtask' holds nulls or negative values; subtasks are 0, 1, ...")
        sub = sub.cast(pa.int32())
    else:
        sub = pa.array(np.zeros(n, dtype=np.int32))
    cols: dict[str, Any] = {C.COL_SUBTASK: sub}
    if desc.mode == "broadcast":
        cols[C.COL_KEY] = table.column("key")
    cols[C.COL_VALUE] = table.column("value")
    return pa.table(cols)


def write_tables_partition(plan: TablesWritePlan, batches: Iterator[pa.RecordBatch], partition_id: int) -> TablesCommitMessage:
    """One task: write its timers (delta files) or operator-state elements (one file) and report them."""
    from flinkstate.format.writer import (
        check_unique,
        with_key_groups,
        write_operator_state_file,
        write_timer_files,
    )

    bl = [b for b in batches if b.num_rows]
    if not bl:
        return TablesCommitMessage([], [], partition_id)
    table = pa.Table.from_batches(bl)
    if plan.table == "timers":
        desc = plan.timer_descriptor()
        rows = with_key_groups(_timer_rows(plan, table), plan.max_parallelism, plan.what, desc.key_type)
        if not plan.tombstones:
            check_unique(rows, _timer_pk(desc), plan.what)
        kgs = np.unique(rows.column(C.COL_KEY_GROUP).to_numpy()).tolist()
        entries = write_timer_files(plan.io, plan.operator, desc, rows, checkpoint_id=plan.checkpoint_id, checkpoint_kind=plan.kind,
                                    max_parallelism=plan.max_parallelism, delta=True, seq=partition_id + 1, write_empty=False)
        return TablesCommitMessage(entries, kgs, partition_id)
    odesc = plan.operator_descriptor()
    rows = _operator_rows(plan, table, partition_id)
    if odesc.mode == "broadcast":
        check_unique(rows, [C.COL_SUBTASK, C.COL_KEY], plan.what)
    entry = write_operator_state_file(plan.io, plan.operator, odesc, rows, checkpoint_id=plan.checkpoint_id, checkpoint_kind=plan.kind,
                                      seq=partition_id + 1)
    return TablesCommitMessage([entry], [], partition_id)


# ------------------------------------------------------------------ driver commit
def _check_across_tasks(plan: TablesWritePlan, msgs: list[TablesCommitMessage], store: Any) -> None:
    """A timer (or broadcast entry) given by two tasks, or a broadcast entry already stored: DuplicateKeyError."""
    import pyarrow.dataset as ds
    from flinkstate.format.datafile import read_data_file
    from flinkstate.format.writer import check_unique

    if plan.tombstones:
        return
    if plan.table == "timers":
        count: dict[int, int] = {}
        for m in msgs:
            for k in m.key_groups:
                count[k] = count.get(k, 0) + 1
        shared = sorted(k for k, c in count.items() if c > 1)
        if not shared:
            return
        parts = [read_data_file(plan.io, e, filter=ds.field(C.COL_KEY_GROUP).isin(shared))
                 for m in msgs for e in m.entries if not (e.key_group_end < shared[0] or e.key_group_start > shared[-1])]
        check_unique(pa.concat_tables(parts), _timer_pk(plan.timer_descriptor()), plan.what)
        return
    desc = plan.operator_descriptor()
    if desc.mode != "broadcast":
        return
    parts = [read_data_file(plan.io, e) for m in msgs for e in m.entries]
    if not plan.overwrite and plan.base_checkpoint_id is not None:
        op = store.checkpoint(plan.base_checkpoint_id).operators.get(plan.operator)
        if op is not None and desc.name in op.operator_states:
            parts.append(store.read_operator_state(plan.operator, desc.name, plan.base_checkpoint_id))
    if len(parts) > 1:
        cols = [C.COL_SUBTASK, C.COL_KEY]
        check_unique(pa.concat_tables([p.select(cols) for p in parts]), cols, plan.what + " (stored and written entries)")


def commit_tables_plan(plan: TablesWritePlan, messages: list[Any]) -> Any:
    """Register the tasks' files and complete the checkpoint in one commit (driver)."""

    msgs = [m for m in messages if isinstance(m, TablesCommitMessage)]
    entries = [e for m in msgs for e in m.entries]

    def register(w: Any, store: Any) -> None:
        _check_across_tasks(plan, msgs, store)
        if plan.table == "timers":
            w.add_timer_files(plan.operator, plan.timer_descriptor(), entries, mode="full" if plan.overwrite else "delta")
        else:
            w.add_operator_state_files(plan.operator, plan.operator_descriptor(), entries, mode="full" if plan.overwrite else "append")

    return commit_planned(plan, entries, register)


def tables_entries(messages: list[Any]) -> list[FileEntry]:
    """The files the tasks of a failed write left (for abort)."""
    return [e for m in messages if isinstance(m, TablesCommitMessage) for e in m.entries]
