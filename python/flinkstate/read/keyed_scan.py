"""Keyed-state scans of a flinkstate checkpoint: a plan of key-group-range tasks, each merging the newest full file and
later deltas of its range (`format.merge`), then TTL visibility and flattening (`visibility.shape_state`).

`KeyedTask` is the keyed task of any source: a Flink savepoint's tasks (`flink.bridge.checkpoint`) subclass it too.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from flinkstate.core.descriptors import KeyedStateDescriptor, descriptor_from_dict
from flinkstate.core.errors import InvalidArgumentError
from flinkstate.core.io import FileIO
from flinkstate.format import constants as C
from flinkstate.format.datafile import FileEntry, primary_key_columns, state_schema
from flinkstate.format.merge import read_range
from flinkstate.format.stream import RangeStream
from flinkstate.read.chunks import StreamChunks, opened
from flinkstate.read.scan import ChunkReader, ScanTask
from flinkstate.read.shared import conform, rechecked
from flinkstate.read.slices import FileSlice, file_slices
from flinkstate.read.visibility import EXPIRED, TTL_EXPIRES_AT, shape_state

__all__ = ["KeyedTask", "StateScanTask", "key_filter", "key_groups_of", "keyed_output_schema"]

_TS = pa.timestamp("ms", tz="UTC")


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


def key_filter(keys: Sequence[Any] | None, key_type: pa.DataType) -> Any:
    if keys is None:
        return None
    import pyarrow.dataset as ds

    return ds.field(C.COL_KEY).isin(pa.array(list(keys), key_type))


def key_groups_of(keys: Sequence[Any] | None, key_groups: Sequence[int] | None, key_type: pa.DataType, maxp: int) -> set[int] | None:
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
            yield from conform(view, self.schema).to_batches()


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
        with rechecked(self.io, self.origin):
            yield from super().to_batches()

    def chunk_reader(self) -> ChunkReader:
        """The range's rows a sub-range at a time, its files' row groups read as the sub-ranges come (a read restricted
        to keys or key groups: read whole and cut)."""
        lo, hi = self.key_group_range
        if self.keys is not None or (self.key_groups is not None and self.key_groups != list(range(lo, hi + 1))):
            return super().chunk_reader()
        desc, schema = self.desc, self.schema
        with rechecked(self.io, self.origin):
            streams = opened(iter([RangeStream(self.io, self.entries, primary_key_columns(desc), self.max_parallelism, (lo, hi),
                                               descriptor=desc)]))

        def shape(_: int, view: pa.Table | None) -> pa.Table | None:
            if view is not None and view.num_rows and not self.raw:
                view = shape_state(view, desc, reference_ms=self.reference_ms, include_expired=self.include_expired, flatten=self.flatten)
            return conform(view, schema) if view is not None and view.num_rows else None

        return StreamChunks(streams, shape, schema, lambda: rechecked(self.io, self.origin))

    def file_slices(self) -> list[FileSlice]:
        """The files whose rows make the task's stored rows, and the key groups where each counts (`read.slices`): what an
        engine reading Parquet itself (Spark's native path) reads; rows also keep to `keys` when given."""
        return file_slices(self.io, self.entries, self.max_parallelism, self.key_group_range, self.key_groups)

    def stored_rows(self) -> pa.Table | None:
        """The merged stored rows of the range (newest full + later deltas, newest wins), None when no file has any."""
        import pyarrow.dataset as ds

        desc = self.desc
        expr = key_filter(self.keys, desc.key_type)
        lo, hi = self.key_group_range
        if self.key_groups is not None and self.key_groups != list(range(lo, hi + 1)):
            kg = ds.field(C.COL_KEY_GROUP).isin(self.key_groups)
            expr = kg if expr is None else expr & kg
        return read_range(self.io, self.entries, primary_key_columns(desc), self.max_parallelism, self.key_group_range,
                          key_groups=self.key_groups, filter=expr, descriptor=desc)
