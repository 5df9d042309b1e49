"""A real Flink savepoint or checkpoint as a pinned checkpoint: the same scans, tasks and rows as a flinkstate root.

`FlinkCheckpoint` holds the parsed `_metadata` and the descriptors mapped from the serializer
snapshots (read once, from each operator's first keyed-state header). A scan plans one task per
subtask handle (the key-group range Flink wrote it for), restricted to the asked key groups; a
task decodes its handle, turns the entries into flinkstate's stored rows (`flink.mapping`) and
ends in the same `visibility.shape_state` as every flinkstate read, so TTL and flattening are
identical. TTL is judged by default at the savepoint's time: the `_metadata` file's time.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from flinkstate.core.descriptors import KeyedStateDescriptor, OperatorStateDescriptor, TimerServiceDescriptor
from flinkstate.core.errors import (
    InvalidArgumentError,
    OperatorNotFoundError,
    StateNotFoundError,
)
from flinkstate.core.ttl import StateTtlConfig
from flinkstate.flink._io import FlinkFiles
from flinkstate.flink.bridge.declared import operator_metadata
from flinkstate.flink.bridge.mapping import (
    ReadOptions,
    decode_subtask,
    stored_rows,
    subtask_range,
)
from flinkstate.flink.bridge.kryo_types import with_kryo_types
from flinkstate.flink.bridge.sizes import checkpoint_size, operator_size, state_sizes
from flinkstate.core.errors import FlinkStateError
from flinkstate.flink.errors import UnsupportedSerializerError
from flinkstate.flink.files.canonical import TIMER_PREFIX
from flinkstate.flink.files.operator_state import read_operator_state
from flinkstate.flink.meta.metadata import CheckpointMetadata as FlinkMetadata
from flinkstate.flink.meta.metadata import OperatorState
from flinkstate.flink.meta.names import (
    KeyedFacts,
    ResolvedOptions,
    find_operator,
    operator_name,
    operators_text,
    resolve_options,
)
from flinkstate.flink.serde.kryo.schema import parse_class_specs
from flinkstate.flink.sql.decoders import SQL_NAMING, SQL_OPS, sql_keys
from flinkstate.format.filekind import Scope
from flinkstate.format.metadata import CheckpointInfo, OperatorMetadata
from flinkstate.read.inspect import CheckpointInspect, Figures
from flinkstate.read.keyed_scan import KeyedTask, keyed_output_schema
from flinkstate.read.scan import DEFAULT_TARGET_ROWS, Checkpoint, Scan, ScanTask
from flinkstate.read.shared import conform
from flinkstate.read.timer_scan import TimerTask

__all__ = ["FlinkCheckpoint", "FlinkInspect", "FlinkStateTask", "FlinkTimerTask", "load_flink_checkpoint"]

def _decoded(meta: FlinkMetadata, uid: str, subtask: int, key_groups: list[int] | None, states: list[str] | None = None) -> dict[str, Any]:
    """One subtask's decoded states (with `states`, only their records); with key groups asked, a canonical or heap file is
    read only in their byte ranges."""
    op = meta.operator(uid)
    sub = next(s for s in op.subtasks if s.index == subtask)
    return decode_subtask(meta, op, sub, key_groups, states)


def _restrict(t: pa.Table, key_groups: list[int] | None, keys: list[Any] | None) -> pa.Table:
    if key_groups is not None and t.num_rows:
        t = t.filter(pc.is_in(t.column("key_group"), pa.array(key_groups, pa.int32())))
    if keys is not None and t.num_rows:
        typ = t.column("key").type
        if pa.types.is_struct(typ):  # a SQL key's columns: no is_in kernel for structs, so a semi join on its fields
            return _rows_with_keys(t, pa.array(keys, typ))
        t = t.filter(pc.is_in(t.column("key"), pa.array(keys, typ)))
    return t


def _rows_with_keys(t: pa.Table, keys: pa.StructArray) -> pa.Table:
    """The rows of t whose struct key is one of keys (null fields match null fields), in t's order."""
    from flinkstate.flink.bridge.mapping import _groupable

    have = _groupable(pa.table({"key": t.column("key")}))
    want = _groupable(pa.table({"key": keys}))
    cols = have.column_names
    have = have.append_column("__row", pa.array(range(t.num_rows), pa.int64()))
    hit = have.join(want, keys=cols, join_type="left semi", use_threads=False).column("__row")
    return t.take(hit.take(pc.sort_indices(hit))) if len(hit) else t.slice(0, 0)


@dataclass
class FlinkStateTask(KeyedTask):
    """One subtask handle's entries of one keyed state, decoded into stored rows (then shaped as every keyed read)."""

    meta: FlinkMetadata
    uid: str
    subtask: int
    state: str
    descriptor: dict[str, Any]
    key_group_range: tuple[int, int]
    reference_ms: int
    key_groups: list[int] | None = None
    keys: list[Any] | None = None
    include_expired: bool = False
    flatten: bool = True
    columns: list[str] | None = None
    raw: bool = False
    raw_values: bool = False

    def stored_rows(self) -> pa.Table | None:
        dec = _decoded(self.meta, self.uid, self.subtask, self.key_groups, [self.state]).get(self.state)
        if dec is None:
            return None
        return _restrict(stored_rows(dec.table(self.raw_values), self.desc), self.key_groups, self.keys)


@dataclass
class FlinkTimerTask(TimerTask):
    """One subtask handle's timers of one or more timer services."""

    meta: FlinkMetadata
    uid: str
    subtask: int
    services: list[dict[str, Any]]
    key_group_range: tuple[int, int]
    key_groups: list[int] | None = None
    keys: list[Any] | None = None
    timestamp_filter: Any = None
    service_columns: bool = False

    def service_rows(self) -> Iterator[tuple[TimerServiceDescriptor, pa.Table]]:
        import pyarrow.dataset as ds

        decoded = _decoded(self.meta, self.uid, self.subtask, self.key_groups, [TIMER_PREFIX + sd["name"] for sd in self.services])
        for sd in self.services:
            s = TimerServiceDescriptor.from_dict(sd)
            dec = decoded.get(TIMER_PREFIX + s.name)
            if dec is None:
                continue
            t = _restrict(dec.table(), self.key_groups, self.keys)
            if self.timestamp_filter is not None and t.num_rows:
                t = ds.dataset(t).to_table(filter=self.timestamp_filter)
            yield s, t


@dataclass
class OperatorStateTask(ScanTask):
    """An operator state of every subtask (subtask, [key], value)."""

    meta: FlinkMetadata
    uid: str
    name: str
    out_schema: pa.Schema
    key_group_range: tuple[int, int] = (0, 0)

    @property
    def schema(self) -> pa.Schema:
        return self.out_schema

    def to_batches(self) -> Iterator[pa.RecordBatch]:
        t = read_operator_state(self.meta, self.uid, self.name)
        if t.num_rows:
            yield from conform(t, self.out_schema).to_batches()


@dataclass
class TaskList(Scan):
    """A scan whose tasks are known when it is made (one per subtask handle)."""

    tasks: list[ScanTask]
    out_schema: pa.Schema

    @property
    def schema(self) -> pa.Schema:
        return self.out_schema

    def plan(self, target_rows: int = DEFAULT_TARGET_ROWS) -> list[ScanTask]:
        return list(self.tasks)


@dataclass(frozen=True)
class FlinkCheckpoint(Checkpoint):
    """A Flink savepoint or retained checkpoint, pinned: its parsed `_metadata` and the mapped descriptors."""

    meta: FlinkMetadata
    ops: dict[str, OperatorMetadata]
    created_ms: int
    ttl_unknown: tuple[str, ...] = ()
    uids: dict[str, str] = field(default_factory=dict)  # name here -> Flink uid or operator id
    options: ReadOptions = field(default_factory=ReadOptions)
    refused: dict[str, str] = field(default_factory=dict)  # "operator/state" -> why its values cannot be read (Kryo/Avro)
    ttl: dict[str, StateTtlConfig | int] = field(default_factory=dict)  # TTL durations given, keyed as `names.state_key`
    serializers: dict[str, tuple[str | None, str]] = field(default_factory=dict)  # "operator/state" -> key, value snapshot classes
    broken: dict[str, FlinkStateError] = field(default_factory=dict)  # operator -> why its keyed or operator state headers do not read

    def _declared_or_broken(self, operator: str, find: Any) -> Any:
        """find(); a state of an operator whose headers do not read raises why (not "no such state")."""
        try:
            return find()
        except StateNotFoundError:
            why = self.broken.get(self._name(operator))
            if why is not None:
                raise why
            raise

    def state_descriptor(self, operator: str, state: str) -> KeyedStateDescriptor:
        return self._declared_or_broken(operator, lambda: super(FlinkCheckpoint, self).state_descriptor(operator, state))

    def timer_service(self, operator: str, service: str) -> TimerServiceDescriptor:
        return self._declared_or_broken(operator, lambda: super(FlinkCheckpoint, self).timer_service(operator, service))

    def operator_state_descriptor(self, operator: str, name: str) -> OperatorStateDescriptor:
        return self._declared_or_broken(operator, lambda: super(FlinkCheckpoint, self).operator_state_descriptor(operator, name))

    def timer_services_of(self, operator: str, service: str | None) -> list[TimerServiceDescriptor]:
        return self._declared_or_broken(operator, lambda: super(FlinkCheckpoint, self).timer_services_of(operator, service))

    def serializers_of(self, operator: str, state: str) -> tuple[str | None, str | None]:
        return self.serializers.get(f"{self._name(operator)}/{state}", (None, None))

    @property
    def checkpoint_id(self) -> int:
        return self.meta.checkpoint_id

    @property
    def max_parallelism(self) -> int:
        return self.meta.default_max_parallelism  # every operator has its own: max_parallelism_of

    @property
    def created_at_ms(self) -> int:
        return self.created_ms

    @property
    def operators(self) -> dict[str, OperatorMetadata]:
        return self.ops

    @property
    def flink_version(self) -> str:
        """The Flink release(s) whose format this is, as far as the bytes tell (`version.guess_flink_version`)."""
        return self.meta.flink_version.label

    @property
    def kind(self) -> str:
        """"savepoint", or "checkpoint" for a `chk-N` folder."""
        return "checkpoint" if os.path.basename(os.path.dirname(self.meta.path)).startswith("chk-") else "savepoint"

    @property
    def info(self) -> CheckpointInfo:
        """Figures as a flinkstate checkpoint has them: state files and bytes from the handles; rows are not known without decoding."""
        size = checkpoint_size(self.meta)
        return CheckpointInfo(checkpoint_id=self.checkpoint_id, kind=self.kind, status="completed",
                              created_at=dt.datetime.fromtimestamp(self.created_ms / 1000, dt.timezone.utc),
                              max_parallelism=self.max_parallelism, files=size.files, rows=None, bytes=size.bytes or 0)

    @property
    def entries(self) -> tuple[()]:
        """flinkstate data files: none (the state is in Flink's own files)."""
        return ()

    @property
    def inspect(self) -> Any:
        """Metadata tables: states(), operators() with sizes from the handles (files() is empty: Flink's files are not flinkstate data files)."""
        return FlinkInspect(self)  # type: ignore[arg-type]

    def key_group_figures(self, operator: str, state: str) -> pa.Table | None:
        """Per key group: records and serialized bytes from the canonical files' framing and per-key-group offsets (no
        value decoded); None for RocksDB/ForSt and heap-native handles."""
        from flinkstate.flink.bridge.sizes import key_group_figures

        self.state_descriptor(operator, state)  # typed errors name what exists
        return key_group_figures(self.meta, self._flink_op(operator), state)

    def _name(self, operator: str) -> str:
        """The name an operator goes by here, given that name, its uid or its operator id (`names.find_operator`)."""
        if operator in self.ops:
            return operator
        op = find_operator(self.meta.operators, operator)
        if op is not None:
            label = op.uid or op.operator_id
            return next((name for name, flink in self.uids.items() if flink == label), operator)
        return operator

    def name_of(self, operator: str) -> str:
        """The name this checkpoint lists an operator by, given that name, its uid or its operator id (unchanged if none)."""
        return self._name(operator)

    def operator(self, uid: str) -> OperatorMetadata:
        """One operator by its name here, its uid (on 1.x: whose hash is its operator id) or its operator id."""
        name = self._name(uid)
        if name not in self.ops:
            here = [op for op in self.meta.operators if (op.uid or op.operator_id) in self.uids.values()]
            raise OperatorNotFoundError(f"operator {uid!r} is not in checkpoint {self.checkpoint_id} by name, uid or operator id; "
                                        f"operators: {operators_text(here, self.uids)}")
        return self.ops[name]

    def _uid(self, operator: str) -> str:
        self.operator(operator)  # typed error listing the operators
        return self.uids[self._name(operator)]

    def _flink_op(self, operator: str) -> OperatorState:
        return self.meta.operator(self._uid(operator))

    def _subtasks(self, operator: str, allowed: set[int] | None) -> list[tuple[int, tuple[int, int], list[int] | None]]:
        out = []
        for sub in self._flink_op(operator).subtasks:
            rng = subtask_range(sub)
            if rng is None:
                continue
            kgs = None if allowed is None else sorted(k for k in allowed if rng[0] <= k <= rng[1])
            if kgs == []:
                continue  # none of the asked key groups: this handle is not read at all
            out.append((sub.index, rng, kgs))
        return out

    def _sql_keys(self, operator: str, keys: Sequence[Any] | None) -> list[Any] | None:
        """Keys of a SQL operator given by their columns (dicts, tuples, a one-field key's values) as dicts of its key row."""
        key_row = self.meta.options.get(SQL_OPS, {}).get(self._uid(operator))
        if keys is None or key_row is None:
            return None if keys is None else list(keys)
        return sql_keys(list(keys), key_row).to_pylist()

    def scan(self, operator: str, state: str, *, keys: Sequence[Any] | None = None, key_groups: Sequence[int] | None = None,
             ttl_reference: int | None = None, include_expired: bool = False, flatten: bool = True,
             columns: Sequence[str] | None = None, raw: bool = False) -> Scan:
        from flinkstate.flink.bridge.mapping import key_groups_of

        desc = self.state_descriptor(operator, state)
        if f"{self._name(operator)}/{state}" in self.refused:  # before any file is read (in Spark: on the driver)
            raise UnsupportedSerializerError(self.refused[f"{self._name(operator)}/{state}"])
        keys, uid = self._sql_keys(operator, keys), self._uid(operator)
        allowed = key_groups_of(self.meta, uid, keys, key_groups, desc.key_type, self.max_parallelism_of(operator))
        ref = self.created_ms if ttl_reference is None else int(ttl_reference)
        d = desc.to_dict()
        cols = None if columns is None else list(columns)
        tasks: list[ScanTask] = [
            FlinkStateTask(self.meta.narrowed(uid, index), uid, index, state, d, rng, ref, kgs, None if keys is None else list(keys),
                           include_expired, flatten, cols, raw, self.options.raw_values)
            for index, rng, kgs in self._subtasks(operator, allowed)]
        schema = keyed_output_schema(desc, flatten=flatten, include_expired=include_expired, raw=raw)
        if cols is not None:
            unknown = [c for c in cols if c not in schema.names]
            if unknown:
                raise InvalidArgumentError(f"state {state!r} of operator {operator!r} has no column {unknown}; columns: {schema.names}")
            schema = pa.schema([schema.field(c) for c in cols])
        return TaskList(tasks, schema)

    def scan_timers(self, operator: str, service: str | None = None, *, keys: Sequence[Any] | None = None,
                    key_groups: Sequence[int] | None = None, timestamp_filter: Any = None, service_columns: bool = False) -> Scan:
        from flinkstate.flink.bridge.mapping import key_groups_of

        services = self.timer_services_of(operator, service)
        keys, uid = self._sql_keys(operator, keys), self._uid(operator)
        allowed = key_groups_of(self.meta, uid, keys, key_groups, services[0].key_type, self.max_parallelism_of(operator))
        sd = [s.to_dict() for s in services]
        with_cols = service_columns or service is None
        tasks: list[ScanTask] = [
            FlinkTimerTask(self.meta.narrowed(uid, index), uid, index, sd, rng, kgs, None if keys is None else list(keys), timestamp_filter, with_cols)
            for index, rng, kgs in self._subtasks(operator, allowed)]
        schema = tasks[0].schema if tasks else FlinkTimerTask(self.meta, "", 0, sd, (0, 0), service_columns=with_cols).schema
        return TaskList(tasks, schema)

    def scan_operator_state(self, operator: str, name: str) -> Scan:
        from flinkstate.format.datafile import operator_state_schema

        desc = self.operator_state_descriptor(operator, name)
        schema, uid = operator_state_schema(desc), self._uid(operator)
        return TaskList([OperatorStateTask(self.meta.narrowed(uid), uid, name, schema)], schema)

    def scan_coordinator(self, operator: str) -> Scan:
        from flinkstate.format.datafile import coordinator_schema

        op = self._flink_op(operator)
        if op.coordinator_state is None:
            raise StateNotFoundError(f"operator {operator!r} has no coordinator state in Flink checkpoint {self.checkpoint_id}")
        t = pa.table({"record_type": ["state"], "subtask": pa.array([None], pa.int32()), "seq": pa.array([0], pa.int64()),
                      "payload": [op.coordinator_state]}, schema=coordinator_schema())
        return TaskList([_Fixed(t)], t.schema)


@dataclass
class _Fixed(ScanTask):
    table: pa.Table
    key_group_range: tuple[int, int] = (0, 0)

    @property
    def schema(self) -> pa.Schema:
        return self.table.schema

    def to_batches(self) -> Iterator[pa.RecordBatch]:
        yield from self.table.to_batches()


def _facts(meta: FlinkMetadata, ops: Mapping[str, OperatorMetadata], names: Mapping[str, str]) -> dict[str, dict[str, KeyedFacts]]:
    """Per operator id, its keyed states as options see them (TTL or not, PyFlink or not), from the mapped descriptors."""
    pyflink_ops = meta.options.get("pyflink_ops", ())
    by_label = {label: name for name, label in names.items()}
    out: dict[str, dict[str, KeyedFacts]] = {}
    for op in meta.operators:
        label = op.uid or op.operator_id
        om = ops.get(by_label.get(label, ""))
        if om is not None:
            out[op.operator_id] = {s: KeyedFacts(ttl=d.ttl is not None, pyflink=label in pyflink_ops) for s, d in om.keyed_states.items()}
    return out


def load_flink_checkpoint(path: str, *, ttl: Mapping[str, StateTtlConfig | int] | None = None,
                          reference_ms: int | None = None, uids: Iterable[str] = (), pyflink: Any = None,
                          files: FlinkFiles | None = None, options: ReadOptions | None = None) -> FlinkCheckpoint:
    """Parse the `_metadata` at path (file or folder, local or URL) and map its operators' states; the savepoint's time is the file's.

    uids names operators that the metadata records only by id (Flink 1.x): each is matched by Flink's hash of the uid.
    pyflink: a `flink.pyflink.PyFlinkOptions` (types of PyFlink jobs' states, unpickle), else the defaults.
    options: Row field names and Kryo/Avro values as raw bytes (`mapping.ReadOptions`).
    Every uid and every operator/state the options name (by uid or operator id) must match the checkpoint
    (`names.resolve_options`): else an InvalidArgumentError naming it, before any state is read.
    """
    import dataclasses

    from flinkstate.flink.meta.metadata import read_metadata
    from flinkstate.flink.pyflink.coders import PyFlinkOptions

    meta = read_metadata(path, files)
    options = options or ReadOptions()
    plan = None
    if options.sql_plan is not None:
        from flinkstate.flink.sql.plan import load_plan

        plan = load_plan(options.sql_plan, meta.files)
    known = tuple(uids)
    if plan is not None:  # the plan's uids that name an operator here (Flink 1.x records only their hashes)
        from flinkstate.flink.meta.names import uid_hash

        ids = {op.operator_id for op in meta.operators} | {op.uid for op in meta.operators if op.uid}
        known += tuple(u for u in plan.uids() if u not in known and (u in ids or uid_hash(u) in ids))
    if known:  # messages name an operator recorded by id only (Flink 1.x) by the uid the caller gave for it
        ops_named = [dataclasses.replace(op, name=operator_name(op, known)) if op.uid is None and op.name is None else op
                     for op in meta.operators]
        meta = dataclasses.replace(meta, operators=type(meta.operators)(ops_named))
    pyflink = pyflink if pyflink is not None else PyFlinkOptions()
    named: ResolvedOptions = resolve_options(meta.operators, meta.path, uids=known, ttl=ttl, row_fields=options.row_fields,
                                             pyflink=pyflink.states)
    options = dataclasses.replace(options, row_fields=named.row_fields)
    meta.options["pyflink"] = dataclasses.replace(pyflink, states=named.pyflink)
    meta.options["sql"] = options.sql_rows
    if plan is not None:
        meta.options[SQL_NAMING] = plan.naming
    meta = with_kryo_types(meta, parse_class_specs(options.kryo_classes))  # Kryo values: their schemas and column types
    unknown: list[str] = []
    ops: dict[str, OperatorMetadata] = {}
    flink_ids: dict[str, str] = {}
    refused: dict[str, str] = {}
    serializers: dict[str, tuple[str | None, str]] = {}
    broken: dict[str, FlinkStateError] = {}
    for op in meta.operators:
        name = operator_name(op, known)
        om = operator_metadata(meta, op, name, named.ttl, unknown, options, refused, serializers, broken)
        if om.keyed_states or om.timer_services or om.operator_states or om.has_coordinator or name in broken:
            ops[name] = om
            flink_ids[name] = op.uid or op.operator_id
    named.check_states(_facts(meta, ops, flink_ids))
    created = reference_ms if reference_ms is not None else meta.files.modified_ms(meta.path)
    return FlinkCheckpoint(meta, ops, created, tuple(unknown), flink_ids, options, refused, named.ttl, serializers, broken)


class FlinkInspect(CheckpointInspect):
    """The metadata tables of a Flink savepoint/checkpoint: sizes from its handles, TTL durations it does not hold flagged."""

    checkpoint: FlinkCheckpoint  # type: ignore[assignment]

    def _flink_op(self, uid: str) -> OperatorState:
        return self.checkpoint._flink_op(uid)

    def _sizes(self) -> dict[tuple[str, str | None, Scope], Figures]:
        ck = self.checkpoint
        out: dict[tuple[str, str | None, Scope], Figures] = {}
        for uid in ck.operators:
            for (name, scope), s in state_sizes(ck.meta, self._flink_op(uid)).items():
                out[(uid, name, scope)] = (s.files, s.rows, s.bytes)
        return out

    def _operator_totals(self) -> dict[str, Figures]:
        ck = self.checkpoint
        out: dict[str, Figures] = {}
        for uid in ck.operators:
            s = operator_size(ck.meta, self._flink_op(uid))
            out[uid] = (s.files, s.rows, s.bytes)
        return out

    def _ttl(self, uid: str, name: str, desc: Any) -> tuple[int | None, bool]:
        if f"{uid}/{name}" in self.checkpoint.ttl_unknown:
            return None, True
        return super()._ttl(uid, name, desc)
