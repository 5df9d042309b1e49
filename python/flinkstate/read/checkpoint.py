"""A pinned flinkstate checkpoint and its scans: the one read path of flinkstate's own format.

`store.checkpoint(id)` loads the log record, metadata and file list once into a
`StoreCheckpoint` (immutable, picklable). Its scans plan key-group-range tasks; a task
merges the newest full file and later deltas of its range (`format.merge.read_range`), then
`visibility.shape_state` applies TTL visibility and flattening. The library's `read_*`,
Spark's partitions, backend restore, `changes` and rewrites all read through these tasks.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from flinkstate.core.descriptors import (
    KeyedStateDescriptor,
    OperatorStateDescriptor,
    TimerServiceDescriptor,
    descriptor_from_dict,
)
from flinkstate.core.errors import (
    CheckpointNotFoundError,
    CorruptFileError,
    InvalidArgumentError,
    StateNotFoundError,
)
from flinkstate.core.io import FileIO
from flinkstate.format import constants as C
from flinkstate.format.datafile import (
    FileEntry,
    coordinator_schema,
    operator_state_schema,
    primary_key_columns,
    read_data_file,
    state_schema,
    timer_schema,
)
from flinkstate.format.filekind import FileKind, Scope
from flinkstate.format.manifest import LogRecord
from flinkstate.format.merge import overlaps, read_range
from flinkstate.format.metadata import (
    CheckpointInfo,
    CheckpointMetadata,
    OperatorMetadata,
)
from flinkstate.format.planning import plan_ranges
from flinkstate.format.stream import RangeStream
from flinkstate.read.chunks import StreamChunks, opened
from flinkstate.read.inspect import CheckpointInspect
from flinkstate.read.scan import (
    DEFAULT_TARGET_ROWS,
    Checkpoint,
    ChunkReader,
    Scan,
    ScanTask,
)
from flinkstate.read.visibility import EXPIRED, TTL_EXPIRES_AT, shape_state

__all__ = ["KeyedTask", "timer_output_schema", "with_service_columns", "StoreCheckpoint", "StateScan", "StateScanTask", "TimerScan", "TimerScanTask", "FilesScan", "FilesScanTask",
           "keyed_output_schema"]

_TS = pa.timestamp("ms", tz="UTC")


def _ms(t: dt.datetime) -> int:
    return int(t.timestamp() * 1000)


def keyed_output_schema(desc: KeyedStateDescriptor, *, flatten: bool = True, include_expired: bool = False, raw: bool = False) -> pa.Schema:
    """The schema of a keyed-state scan's rows (before a column projection)."""
    if raw:
        return state_schema(desc)
    base = [f for f in state_schema(desc) if f.name not in (C.COL_VALUE, C.COL_TTL, C.COL_USER_KEY)]
    ttl = desc.ttl_enabled
    fields = list(base)
    if desc.kind == "map":
        if flatten:
            fields += [pa.field(C.COL_USER_KEY, desc.user_key_type, nullable=False), pa.field(C.COL_VALUE, desc.user_value_type)]  # type: ignore[union-attr]
            ttl_t: pa.DataType = _TS
        else:
            fields += [pa.field(C.COL_VALUE, pa.map_(desc.user_key_type, desc.user_value_type))]  # type: ignore[union-attr]
            ttl_t = pa.map_(desc.user_key_type, _TS)  # type: ignore[union-attr]
    elif desc.kind == "list":
        fields.append(pa.field(C.COL_VALUE, desc.value_type if flatten else pa.list_(desc.value_type)))
        ttl_t = _TS if flatten else pa.list_(_TS)
    else:
        fields.append(pa.field(C.COL_VALUE, desc.value_type))
        ttl_t = _TS
    if ttl:
        fields.append(pa.field(TTL_EXPIRES_AT, ttl_t))
        if include_expired:
            fields.append(pa.field(EXPIRED, pa.bool_()))
    return pa.schema(fields)


def _conform(t: pa.Table, schema: pa.Schema) -> pa.Table:
    """t with schema's columns in schema's order and types (the stored rows may order or type them loosely)."""
    cols = []
    for f in schema:
        if f.name not in t.column_names:
            cols.append(pa.nulls(t.num_rows, f.type))
            continue
        c = t.column(f.name)
        cols.append(c if c.type == f.type else c.cast(f.type))  # only columns whose type differs: nested casts are costly
    return pa.Table.from_arrays(cols, schema=schema)


def _key_filter(keys: Sequence[Any] | None, key_type: pa.DataType) -> Any:
    if keys is None:
        return None
    import pyarrow.dataset as ds

    return ds.field(C.COL_KEY).isin(pa.array(list(keys), key_type))


def _key_groups_of(keys: Sequence[Any] | None, key_groups: Sequence[int] | None, key_type: pa.DataType, maxp: int) -> set[int] | None:
    """The key groups a read is restricted to (keys hashed as Flink does), None for all."""
    allowed: set[int] | None = None
    if key_groups is not None:
        allowed = {int(k) for k in key_groups if 0 <= int(k) < maxp}
    if keys is not None:
        from flinkstate.core.keygroups import assign_key_groups

        try:
            kgs = set(assign_key_groups(pa.array(list(keys), key_type), maxp).to_pylist())
        except (pa.ArrowException, TypeError, ValueError, OverflowError) as e:
            raise InvalidArgumentError(f"keys {list(keys)[:5]!r} are not values of the key type {key_type}: {e}") from e
        allowed = kgs if allowed is None else allowed & kgs
    return allowed


# ---------------------------------------------------------------------------------------------- keyed state
class KeyedTask(ScanTask):
    """A keyed-state task of any source: its stored rows, then TTL visibility and flattening, then the columns asked for.

    Subclasses hold `descriptor`, `reference_ms`, `include_expired`, `flatten`, `columns`, `raw` and read `stored_rows`.
    """

    descriptor: dict[str, Any]
    reference_ms: int
    include_expired: bool
    flatten: bool
    columns: list[str] | None
    raw: bool

    @property
    def desc(self) -> KeyedStateDescriptor:
        """The state's descriptor."""
        return descriptor_from_dict(self.descriptor)

    @property
    def schema(self) -> pa.Schema:
        s = keyed_output_schema(self.desc, flatten=self.flatten, include_expired=self.include_expired, raw=self.raw)
        return pa.schema([s.field(c) for c in self.columns]) if self.columns is not None else s

    def stored_rows(self) -> pa.Table | None:
        """The task's stored rows (merged, with key_group and ttl_timestamp), None when there are none."""
        raise NotImplementedError

    def to_batches(self) -> Iterator[pa.RecordBatch]:
        view = self.stored_rows()
        if view is None or view.num_rows == 0:
            return
        if not self.raw:
            view = shape_state(view, self.desc, reference_ms=self.reference_ms, include_expired=self.include_expired, flatten=self.flatten)
        if view.num_rows:
            yield from _conform(view, self.schema).to_batches()


@dataclass
class StateScanTask(KeyedTask):
    """The rows of one keyed state in a key-group range: merged, then TTL visibility and flattening."""

    io: FileIO
    descriptor: dict[str, Any]
    entries: list[FileEntry]
    key_group_range: tuple[int, int]
    max_parallelism: int
    reference_ms: int
    key_groups: list[int] | None = None
    keys: list[Any] | None = None
    include_expired: bool = False
    flatten: bool = True
    columns: list[str] | None = None
    raw: bool = False
    origin: tuple[int, str] | None = None  # (checkpoint id, attempt id) read: a missing file is re-checked against the log

    def to_batches(self) -> Iterator[pa.RecordBatch]:
        with _rechecked(self.io, self.origin):
            yield from super().to_batches()

    def chunk_reader(self) -> ChunkReader:
        """The range's rows a sub-range at a time, its files' row groups read as the sub-ranges come (a read restricted
        to keys or key groups: read whole and cut)."""
        lo, hi = self.key_group_range
        if self.keys is not None or (self.key_groups is not None and self.key_groups != list(range(lo, hi + 1))):
            return super().chunk_reader()
        desc, schema = self.desc, self.schema
        with _rechecked(self.io, self.origin):
            streams = opened(iter([RangeStream(self.io, self.entries, primary_key_columns(desc), self.max_parallelism, (lo, hi),
                                               descriptor=desc)]))

        def shape(_: int, view: pa.Table | None) -> pa.Table | None:
            if view is not None and view.num_rows and not self.raw:
                view = shape_state(view, desc, reference_ms=self.reference_ms, include_expired=self.include_expired, flatten=self.flatten)
            return _conform(view, schema) if view is not None and view.num_rows else None

        return StreamChunks(streams, shape, schema, lambda: _rechecked(self.io, self.origin))

    def stored_rows(self) -> pa.Table | None:
        """The merged stored rows of the range (newest full + later deltas, newest wins), None when no file has any."""
        import pyarrow.dataset as ds

        desc = self.desc
        expr = _key_filter(self.keys, desc.key_type)
        lo, hi = self.key_group_range
        if self.key_groups is not None and self.key_groups != list(range(lo, hi + 1)):
            kg = ds.field(C.COL_KEY_GROUP).isin(self.key_groups)
            expr = kg if expr is None else expr & kg
        return read_range(self.io, self.entries, primary_key_columns(desc), self.max_parallelism, self.key_group_range,
                          key_groups=self.key_groups, filter=expr, descriptor=desc)


@dataclass
class StateScan(Scan):
    """A planned read of one keyed state."""

    checkpoint: StoreCheckpoint
    operator: str
    state: str
    reference_ms: int
    keys: list[Any] | None = None
    key_groups: set[int] | None = None
    include_expired: bool = False
    flatten: bool = True
    columns: list[str] | None = None
    raw: bool = False

    @property
    def descriptor(self) -> KeyedStateDescriptor:
        """The state's descriptor."""
        return self.checkpoint.state_descriptor(self.operator, self.state)

    @property
    def schema(self) -> pa.Schema:
        s = keyed_output_schema(self.descriptor, flatten=self.flatten, include_expired=self.include_expired, raw=self.raw)
        return pa.schema([s.field(c) for c in self.columns]) if self.columns is not None else s

    def plan(self, target_rows: int = DEFAULT_TARGET_ROWS) -> list[ScanTask]:
        ck = self.checkpoint
        entries = ck.state_files(self.operator, self.state)
        d = self.descriptor.to_dict()
        tasks: list[ScanTask] = []
        mp = ck.max_parallelism_of(self.operator)
        for lo, hi in plan_ranges(entries, mp, self.key_groups, target_rows):
            kgs = None if self.key_groups is None else sorted(k for k in self.key_groups if lo <= k <= hi)
            tasks.append(StateScanTask(ck.io, d, [e for e in entries if overlaps(e, lo, hi)], (lo, hi), mp,
                                       self.reference_ms, kgs, self.keys, self.include_expired, self.flatten, self.columns, self.raw,
                                       ck.origin))
        return tasks


# ---------------------------------------------------------------------------------------------- timers
def timer_output_schema(service: TimerServiceDescriptor, service_columns: bool) -> pa.Schema:
    """The schema of a timers scan's rows: the stored columns, plus `domain` and `timer_service` when asked."""
    s = timer_schema(service)
    if service_columns:
        s = s.append(pa.field("domain", pa.string())).append(pa.field("timer_service", pa.string()))
    return s


def with_service_columns(t: pa.Table, service: TimerServiceDescriptor) -> pa.Table:
    """Timers of one service with the `domain` and `timer_service` columns a scan of several services has."""
    t = t.append_column("domain", pa.array([service.domain] * t.num_rows, pa.string()))
    return t.append_column("timer_service", pa.array([service.name] * t.num_rows, pa.string()))


class TimerTask(ScanTask):
    """A timer task of any source: each service's timers, then the service columns asked for, in the output schema.

    Subclasses hold `services` (descriptor dicts) and `service_columns`, and yield `service_rows`.
    """

    services: list[dict[str, Any]]
    service_columns: bool

    @property
    def schema(self) -> pa.Schema:
        return timer_output_schema(TimerServiceDescriptor.from_dict(self.services[0]), self.service_columns)

    def service_rows(self) -> Iterator[tuple[TimerServiceDescriptor, pa.Table]]:
        """Each service with its timers of this task (filtered; services without timers may be left out)."""
        raise NotImplementedError

    def to_batches(self) -> Iterator[pa.RecordBatch]:
        for s, t in self.service_rows():
            if t.num_rows:
                yield from _conform(with_service_columns(t, s) if self.service_columns else t, self.schema).to_batches()


@dataclass
class TimerScanTask(TimerTask):
    """The timers of one or more services of an operator in a key-group range."""

    io: FileIO
    services: list[dict[str, Any]]
    entries: list[FileEntry]
    key_group_range: tuple[int, int]
    max_parallelism: int
    key_groups: list[int] | None = None
    keys: list[Any] | None = None
    timestamp_filter: Any = None
    service_columns: bool = False
    origin: tuple[int, str] | None = None  # (checkpoint id, attempt id) read: a missing file is re-checked against the log

    def to_batches(self) -> Iterator[pa.RecordBatch]:
        with _rechecked(self.io, self.origin):
            yield from super().to_batches()

    def chunk_reader(self) -> ChunkReader:
        """The range's timers a sub-range at a time, each service's files' row groups read as the sub-ranges come (a read
        restricted to keys, key groups or timestamps: read whole and cut)."""
        lo, hi = self.key_group_range
        if (self.keys is not None or self.timestamp_filter is not None
                or (self.key_groups is not None and self.key_groups != list(range(lo, hi + 1)))):
            return super().chunk_reader()
        services = [TimerServiceDescriptor.from_dict(sd) for sd in self.services]
        schema = self.schema
        with _rechecked(self.io, self.origin):
            streams = opened(RangeStream(self.io, [e for e in self.entries if e.state == s.name and overlaps(e, lo, hi)],
                                         primary_key_columns(s), self.max_parallelism, (lo, hi), descriptor=s) for s in services)

        def shape(i: int, t: pa.Table | None) -> pa.Table | None:
            if t is None or not t.num_rows:
                return None
            return _conform(with_service_columns(t, services[i]) if self.service_columns else t, schema)

        return StreamChunks(streams, shape, schema, lambda: _rechecked(self.io, self.origin))

    def service_rows(self) -> Iterator[tuple[TimerServiceDescriptor, pa.Table]]:
        import pyarrow.dataset as ds

        lo, hi = self.key_group_range
        for sd in self.services:
            s = TimerServiceDescriptor.from_dict(sd)
            files = [e for e in self.entries if e.state == s.name and overlaps(e, lo, hi)]
            if not files:
                continue
            expr = _key_filter(self.keys, s.key_type)
            if self.key_groups is not None and self.key_groups != list(range(lo, hi + 1)):
                kg = ds.field(C.COL_KEY_GROUP).isin(self.key_groups)
                expr = kg if expr is None else expr & kg
            if self.timestamp_filter is not None:
                expr = self.timestamp_filter if expr is None else expr & self.timestamp_filter
            v = read_range(self.io, files, primary_key_columns(s), self.max_parallelism, (lo, hi), key_groups=self.key_groups,
                           filter=expr, descriptor=s)
            if v is not None:
                yield s, v


@dataclass
class TimerScan(Scan):
    """A planned read of timer services."""

    checkpoint: StoreCheckpoint
    operator: str
    services: list[TimerServiceDescriptor]
    keys: list[Any] | None = None
    key_groups: set[int] | None = None
    timestamp_filter: Any = None
    service_columns: bool = False

    @property
    def schema(self) -> pa.Schema:
        return timer_output_schema(self.services[0], self.service_columns)

    def plan(self, target_rows: int = DEFAULT_TARGET_ROWS) -> list[ScanTask]:
        ck = self.checkpoint
        names = {s.name for s in self.services}
        entries = [e for e in ck.entries if e.operator == self.operator and e.state in names and FileKind(e.kind).scope == Scope.TIMERS]
        sd = [s.to_dict() for s in self.services]
        tasks: list[ScanTask] = []
        mp = ck.max_parallelism_of(self.operator)
        for lo, hi in plan_ranges(entries, mp, self.key_groups, target_rows):
            kgs = None if self.key_groups is None else sorted(k for k in self.key_groups if lo <= k <= hi)
            tasks.append(TimerScanTask(ck.io, sd, [e for e in entries if overlaps(e, lo, hi)], (lo, hi), mp, kgs,
                                       self.keys, self.timestamp_filter, self.service_columns, ck.origin))
        return tasks


# ---------------------------------------------------------------------------------------------- whole-file states
@dataclass
class FilesScanTask(ScanTask):
    """Operator or coordinator state: every file of it, concatenated (these states are not key-grouped)."""

    io: FileIO
    entries: list[FileEntry]
    out_schema: pa.Schema
    descriptor: dict[str, Any] | None = None
    key_group_range: tuple[int, int] = (0, 0)
    origin: tuple[int, str] | None = None  # (checkpoint id, attempt id) read: a missing file is re-checked against the log

    @property
    def schema(self) -> pa.Schema:
        return self.out_schema

    def to_batches(self) -> Iterator[pa.RecordBatch]:
        desc = None if self.descriptor is None else OperatorStateDescriptor.from_dict(self.descriptor)
        with _rechecked(self.io, self.origin):
            for e in self.entries:
                t = read_data_file(self.io, e, descriptor=desc)
                if t.num_rows:
                    yield from _conform(t, self.out_schema).to_batches()


@contextmanager
def _rechecked(io: FileIO, origin: tuple[int, str] | None) -> Iterator[None]:
    """A damaged or missing file of a checkpoint that a fresh read of the log no longer retains (discarded and collected
    by another writer while it was read) is CheckpointNotFoundError, not damage."""
    try:
        yield
    except CorruptFileError as e:
        if origin is None:
            raise
        from flinkstate.format.manifest import DeltaCatalog

        cid, attempt = origin
        if any(r.checkpoint_id == cid and r.attempt_id == attempt and r.status == C.STATUS_COMPLETED for r in DeltaCatalog(io).records()):
            raise
        raise CheckpointNotFoundError(f"checkpoint {cid} was discarded at {io.root} while it was being read ({e})") from e


@dataclass
class FilesScan(Scan):
    """A read of operator or coordinator state: one task."""

    task: FilesScanTask

    @property
    def schema(self) -> pa.Schema:
        return self.task.out_schema

    def plan(self, target_rows: int = DEFAULT_TARGET_ROWS) -> list[ScanTask]:
        return [self.task] if self.task.entries else []


# ---------------------------------------------------------------------------------------------- the checkpoint
@dataclass(frozen=True)
class StoreCheckpoint(Checkpoint):
    """A flinkstate checkpoint or savepoint, loaded once: log record, metadata and files (oldest first)."""

    io: FileIO
    record: LogRecord
    metadata: CheckpointMetadata
    entries: tuple[FileEntry, ...] = field(default=())
    committed: bool = True  # False for a writer's view of the checkpoint it is building (maintenance.writer_view)

    # ---- figures (as CheckpointInfo has them)
    @property
    def info(self) -> CheckpointInfo:
        """The checkpoint's figures."""
        return self.metadata.info

    @property
    def checkpoint_id(self) -> int:
        return self.record.checkpoint_id

    @property
    def max_parallelism(self) -> int:
        return self.record.max_parallelism  # the default; each operator's own: max_parallelism_of

    @property
    def created_at_ms(self) -> int:
        return _ms(self.record.created_at)

    @property
    def created_at(self) -> dt.datetime:
        """When it was committed (UTC)."""
        return self.info.created_at

    @property
    def kind(self) -> str:
        """"checkpoint" or "savepoint"."""
        return self.info.kind

    @property
    def status(self) -> str:
        """"completed", "discarded" or "damaged"."""
        return self.info.status

    @property
    def files(self) -> int:
        """Number of files it uses (as CheckpointInfo; the files themselves are `entries`)."""
        return self.info.files

    @property
    def rows(self) -> int:
        """Rows of its files (a flinkstate checkpoint always counts them)."""
        return self.info.rows or 0

    @property
    def bytes(self) -> int:
        """Bytes of its files."""
        return self.info.bytes

    @property
    def base_checkpoint_id(self) -> int | None:
        """The checkpoint it was written on top of."""
        return self.info.base_checkpoint_id

    @property
    def format_version(self) -> int:
        """Format version of its log record."""
        return self.info.format_version

    def to_dict(self) -> dict[str, Any]:
        """JSON-able figures (as CheckpointInfo.to_dict)."""
        return self.info.to_dict()

    @property
    def origin(self) -> tuple[int, str] | None:
        """(checkpoint id, attempt id) of a committed checkpoint (None for a writer's view): what its tasks re-check."""
        return (self.record.checkpoint_id, self.record.attempt_id) if self.committed else None

    # ---- lookups
    @property
    def operators(self) -> dict[str, OperatorMetadata]:
        """Operators by uid."""
        return self.metadata.operators

    def state_files(self, operator: str, state: str | None, scope: Scope = Scope.KEYED) -> list[FileEntry]:
        """The files (oldest first) of one state of a scope; coordinator files are per operator (state None)."""
        return [e for e in self.entries if e.operator == operator and FileKind(e.kind).scope == scope
                and (scope == Scope.COORDINATOR or e.state == state)]

    # ---- scans
    def scan(self, operator: str, state: str, *, keys: Sequence[Any] | None = None, key_groups: Sequence[int] | None = None,
             ttl_reference: int | None = None, include_expired: bool = False, flatten: bool = True,
             columns: Sequence[str] | None = None, raw: bool = False) -> StateScan:
        desc = self.state_descriptor(operator, state)
        allowed = _key_groups_of(keys, key_groups, desc.key_type, self.max_parallelism_of(operator))
        scan = StateScan(self, operator, state, self.created_at_ms if ttl_reference is None else int(ttl_reference),
                         None if keys is None else list(keys), allowed, include_expired, flatten,
                         None if columns is None else list(columns), raw)
        if columns is not None:
            full = keyed_output_schema(desc, flatten=flatten, include_expired=include_expired, raw=raw)
            unknown = [c for c in columns if c not in full.names]
            if unknown:
                raise InvalidArgumentError(f"state {state!r} of operator {operator!r} has no column {unknown}; columns: {full.names}")
        return scan

    def scan_timers(self, operator: str, service: str | None = None, *, keys: Sequence[Any] | None = None,
                    key_groups: Sequence[int] | None = None, timestamp_filter: Any = None, service_columns: bool = False) -> TimerScan:
        services = self.timer_services_of(operator, service)
        allowed = _key_groups_of(keys, key_groups, services[0].key_type, self.max_parallelism_of(operator))
        return TimerScan(self, operator, services, None if keys is None else list(keys), allowed, timestamp_filter,
                         service_columns or service is None)

    def scan_operator_state(self, operator: str, name: str) -> FilesScan:
        desc = self.operator_state_descriptor(operator, name)
        return FilesScan(FilesScanTask(self.io, self.state_files(operator, name, Scope.OPERATOR), operator_state_schema(desc),
                                       desc.to_dict(), origin=self.origin))

    def scan_coordinator(self, operator: str) -> FilesScan:
        if not self.operator(operator).has_coordinator:
            raise StateNotFoundError(f"operator {operator!r} has no coordinator state in checkpoint {self.checkpoint_id}")
        return FilesScan(FilesScanTask(self.io, self.state_files(operator, None, Scope.COORDINATOR), coordinator_schema(),
                                       origin=self.origin))

    @property
    def inspect(self) -> Any:
        """Metadata tables of this checkpoint: files(), states(), operators()."""
        return CheckpointInspect(self)

    def key_group_figures(self, operator: str, state: str) -> pa.Table | None:
        """Per key group: live entries, elements and bytes of the state's files (stored rows: a delta's upsert and the row
        it replaces both count), from their `key_group` columns and row groups (`format.inspect.key_group_sizes`)."""
        from flinkstate.format.inspect import key_group_sizes

        lists = self.state_descriptor(operator, state).kind == "list"  # typed errors name what exists
        parts = [key_group_sizes(self.io, e.path, lists) for e in self.state_files(operator, state)]
        if not parts:
            return None
        t = pa.concat_tables(parts).group_by("key_group").aggregate([("entries", "sum"), ("elements", "sum"), ("bytes", "sum")])
        return pa.table({"key_group": t.column("key_group"), "entries": t.column("entries_sum"), "elements": t.column("elements_sum"),
                         "bytes": t.column("bytes_sum")})

    def ttl_timestamps(self, operator: str, state: str) -> pa.Array | None:
        """The `ttl_timestamp` columns of the state's files (stored rows: a delta's upsert and the row it replaces both count)."""
        from flinkstate.format.inspect import ttl_column

        if not self.state_descriptor(operator, state).ttl_enabled:
            return None
        parts = [ttl_column(self.io, e.path) for e in self.state_files(operator, state)]
        return pa.concat_arrays(parts) if parts else pa.array([], pa.int64())


def sort_timers(t: pa.Table) -> pa.Table:
    """Timers in (key group, timestamp) order, as `read_timers` returns them."""
    if t.num_rows == 0:
        return t
    return t.take(pc.sort_indices(t, [(C.COL_KEY_GROUP, "ascending"), (C.COL_TIMESTAMP, "ascending")]))
