"""Timer scans of a flinkstate checkpoint: a plan of key-group-range tasks over one or more timer services of an operator.

`TimerTask` is the timer task of any source: a Flink savepoint's tasks (`flink.bridge.checkpoint`) subclass it too.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from flinkstate.core.descriptors import TimerServiceDescriptor
from flinkstate.core.io import FileIO
from flinkstate.format import constants as C
from flinkstate.format.datafile import FileEntry, primary_key_columns, timer_schema
from flinkstate.format.merge import overlaps, read_range
from flinkstate.format.stream import RangeStream
from flinkstate.read.chunks import StreamChunks, opened
from flinkstate.read.keyed_scan import key_filter
from flinkstate.read.scan import ChunkReader, ScanTask
from flinkstate.read.shared import conform, rechecked
from flinkstate.read.slices import FileSlice, file_slices

__all__ = ["TimerScanTask", "TimerTask", "sort_timers", "timer_output_schema", "with_service_columns"]


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
                yield from conform(with_service_columns(t, s) if self.service_columns else t, self.schema).to_batches()


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
        with rechecked(self.io, self.origin):
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
        with rechecked(self.io, self.origin):
            streams = opened(RangeStream(self.io, [e for e in self.entries if e.state == s.name and overlaps(e, lo, hi)],
                                         primary_key_columns(s), self.max_parallelism, (lo, hi), descriptor=s) for s in services)

        def shape(i: int, t: pa.Table | None) -> pa.Table | None:
            if t is None or not t.num_rows:
                return None
            return conform(with_service_columns(t, services[i]) if self.service_columns else t, schema)

        return StreamChunks(streams, shape, schema, lambda: rechecked(self.io, self.origin))

    def file_slices(self) -> list[FileSlice]:
        """Each service's files and the key groups where each counts (`read.slices`; a slice's `entry.state` is its service,
        and services merge apart); rows also keep to `keys` when given."""
        return [s for sd in self.services
                for s in file_slices(self.io, [e for e in self.entries if e.state == sd["name"]], self.max_parallelism,
                                     self.key_group_range, self.key_groups)]

    def service_rows(self) -> Iterator[tuple[TimerServiceDescriptor, pa.Table]]:
        import pyarrow.dataset as ds

        lo, hi = self.key_group_range
        for sd in self.services:
            s = TimerServiceDescriptor.from_dict(sd)
            files = [e for e in self.entries if e.state == s.name and overlaps(e, lo, hi)]
            if not files:
                continue
            expr = key_filter(self.keys, s.key_type)
            if self.key_groups is not None and self.key_groups != list(range(lo, hi + 1)):
                kg = ds.field(C.COL_KEY_GROUP).isin(self.key_groups)
                expr = kg if expr is None else expr & kg
            if self.timestamp_filter is not None:
                expr = self.timestamp_filter if expr is None else expr & self.timestamp_filter
            v = read_range(self.io, files, primary_key_columns(s), self.max_parallelism, (lo, hi), key_groups=self.key_groups,
                           filter=expr, descriptor=s)
            if v is not None:
                yield s, v


def sort_timers(t: pa.Table) -> pa.Table:
    """Timers in (key group, timestamp) order, as `read_timers` returns them."""
    if t.num_rows == 0:
        return t
    return t.take(pc.sort_indices(t, [(C.COL_KEY_GROUP, "ascending"), (C.COL_TIMESTAMP, "ascending")]))
