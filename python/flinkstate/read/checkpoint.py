"""A pinned flinkstate checkpoint and its scans: the one read path of flinkstate's own format.

`store.checkpoint(id)` loads the log record, metadata and file list once into a `StoreCheckpoint` (immutable,
picklable). Its scans plan key-group-range tasks (`keyed_scan`, `timer_scan`; operator and coordinator state here, one
task of whole files). The library's `read_*`, Spark's partitions, backend restore, `changes` and rewrites all read
through these tasks.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from flinkstate.core.descriptors import (
    KeyedStateDescriptor,
    OperatorStateDescriptor,
    TimerServiceDescriptor,
)
from flinkstate.core.errors import InvalidArgumentError, StateNotFoundError
from flinkstate.core.io import FileIO
from flinkstate.format.datafile import (
    FileEntry,
    coordinator_schema,
    operator_state_schema,
    read_data_file,
)
from flinkstate.format import constants as C
from flinkstate.format.filekind import FileKind, Scope
from flinkstate.format.manifest import LogRecord
from flinkstate.format.merge import overlaps
from flinkstate.format.metadata import (
    CheckpointInfo,
    CheckpointMetadata,
    OperatorMetadata,
)
from flinkstate.format.planning import plan_ranges
from flinkstate.read.inspect import CheckpointInspect
from flinkstate.read.keyed_scan import StateScanTask, key_groups_of, keyed_output_schema
from flinkstate.read.scan import DEFAULT_TARGET_ROWS, Checkpoint, Scan, ScanTask
from flinkstate.read.shared import conform, rechecked
from flinkstate.read.slices import FileSlice
from flinkstate.read.timer_scan import TimerScanTask, timer_output_schema

__all__ = ["FilesScan", "FilesScanTask", "StateScan", "StoreCheckpoint", "TimerScan"]


def _ms(t: dt.datetime) -> int:
    return int(t.timestamp() * 1000)


# ---------------------------------------------------------------------------------------------- keyed state and timers
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

    def file_slices(self) -> list[FileSlice]:
        """Every file, whole (no deltas: the rows are the files' rows concatenated), as `read.slices` describes them."""
        return [FileSlice(e, self.io.url(e.path), (e.created_by_checkpoint_id, e.seq, e.path), False, (), True) for e in self.entries]

    def to_batches(self) -> Iterator[pa.RecordBatch]:
        desc = None if self.descriptor is None else OperatorStateDescriptor.from_dict(self.descriptor)
        with rechecked(self.io, self.origin):
            for e in self.entries:
                t = read_data_file(self.io, e, descriptor=desc)
                if t.num_rows:
                    yield from conform(t, self.out_schema).to_batches()


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

    def name_of(self, operator: str) -> str:
        """The name this checkpoint lists an operator by: the name itself, else (an operator imported from Flink) the one
        whose Flink operator id it is, or whose id Flink derives from it as a uid (a 1.x savepoint imported without
        `--uid` lists operators by id); unchanged when none is."""
        if operator in self.operators:
            return operator
        from flinkstate.core.operator_ids import operator_id

        props = self.metadata.properties
        given = operator.lower()
        hashed = operator_id(operator)
        found = sorted(name for name in self.operators
                       if given == props.get(C.FLINK_OPERATOR_ID_PROPERTY + name, "").lower() or hashed in
                       (name.lower(), props.get(C.FLINK_OPERATOR_ID_PROPERTY + name, "").lower()))
        if len(found) > 1:
            raise InvalidArgumentError(f"operator {operator!r} names several operators of checkpoint {self.checkpoint_id}: {found}")
        return found[0] if found else operator

    def state_files(self, operator: str, state: str | None, scope: Scope = Scope.KEYED) -> list[FileEntry]:
        """The files (oldest first) of one state of a scope; coordinator files are per operator (state None)."""
        operator = self.name_of(operator)
        return [e for e in self.entries if e.operator == operator and FileKind(e.kind).scope == scope
                and (scope == Scope.COORDINATOR or e.state == state)]

    # ---- scans
    def scan(self, operator: str, state: str, *, keys: Sequence[Any] | None = None, key_groups: Sequence[int] | None = None,
             ttl_reference: int | None = None, include_expired: bool = False, flatten: bool = True,
             columns: Sequence[str] | None = None, raw: bool = False) -> StateScan:
        desc = self.state_descriptor(operator, state)
        allowed = key_groups_of(keys, key_groups, desc.key_type, self.max_parallelism_of(operator))
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
        allowed = key_groups_of(keys, key_groups, services[0].key_type, self.max_parallelism_of(operator))
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
