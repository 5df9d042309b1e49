"""Writing the data files of one state for a checkpoint (v1): key groups, splitting, layout.

Used by the store on the driver and by Spark executors alike: it needs only a FileIO and a
descriptor, and returns manifest entries for the driver to commit.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from flinkstate.core.descriptors import (
    KeyedStateDescriptor,
    OperatorStateDescriptor,
    TimerServiceDescriptor,
    validate_name,
)
from flinkstate.core.errors import (
    DuplicateKeyError,
    KeyGroupOutOfRangeError,
    SchemaMismatchError,
)
from flinkstate.core.io import FileIO
from flinkstate.core.keygroups import assign_key_groups, key_group_range
from flinkstate.format import constants as C
from flinkstate.format.datafile import (
    DataFileSink,
    FileEntry,
    as_table,
    castable,
    conform,
    coordinator_schema,
    operator_state_schema,
    sort_for_kind,
    state_schema,
    timer_schema,
    write_data_file,
)
from flinkstate.format.merge import flat_key_columns

__all__ = ["data_dir", "file_path", "cast_key", "with_key_groups", "check_unique", "split_ranges", "write_state_files", "write_timer_files", "RangeFileWriter", "write_operator_state_file", "write_coordinator_file"]


def data_dir(checkpoint_kind: str, checkpoint_id: int) -> str:
    """Base directory for the files a checkpoint creates: shared/ or its own savepoint folder."""
    if checkpoint_kind == C.SAVEPOINT:
        return f"{C.SAVEPOINTS_DIR}/sp-{checkpoint_id:010d}"
    return C.SHARED_DIR


def file_path(base: str, operator: str, sub: str, checkpoint_id: int, kind: str, kg: tuple[int, int]) -> str:
    """Relative path of a new data file (names validated: nothing escapes the root)."""
    validate_name(operator, "operator uid")
    for part in sub.split("/"):
        if not part.startswith("_"):
            validate_name(part, "state name")
    return f"{base}/{operator}/{sub}/{checkpoint_id:010d}-{kind}-kg{kg[0]:05d}-{kg[1]:05d}-{uuid.uuid4().hex[:12]}.parquet"


def _leaves(t: pa.DataType) -> list[pa.DataType]:
    if pa.types.is_struct(t):
        return [x for i in range(t.num_fields) for x in _leaves(t.field(i).type)]
    return [t.value_type if pa.types.is_dictionary(t) else t]


def cast_key(column: pa.Array | pa.ChunkedArray, key_type: pa.DataType, what: str) -> pa.Array | pa.ChunkedArray:
    """The key column in the state's declared key type, cast losslessly or refused.

    Key groups hash the declared type (Flink's Integer and Long hash negative keys apart):
    hashing any other type would file keys under key groups Flink would not give them.
    """
    src = column.type
    if src == key_type:
        return column
    err = SchemaMismatchError(f"{what}: column 'key' has type {src}, the state declares key type {key_type}; "
                              "cast the keys to the declared type (only a lossless cast is done implicitly)")
    if not castable(src, key_type):
        raise err
    try:
        out = column.cast(key_type, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise SchemaMismatchError(f"{err}: {e}") from e
    narrows = any(pa.types.is_floating(a) and pa.types.is_floating(b) and a.bit_width > b.bit_width
                  for a, b in zip(_leaves(src), _leaves(key_type)))
    if narrows and not out.cast(src).equals(column):
        raise err
    return out


def with_key_groups(table: pa.Table, max_parallelism: int, what: str, key_type: pa.DataType | None = None) -> pa.Table:
    """Add (or verify) the key_group column computed from `key` with Flink's assignment.

    With `key_type` the keys are first cast to it (`cast_key`), so they hash as Flink hashes them.
    """
    table = as_table(table, what)
    if C.COL_KEY not in table.column_names:
        raise SchemaMismatchError(f"{what}: missing column 'key'; got columns {table.column_names}")
    nulls = table.column(C.COL_KEY).null_count
    if nulls:
        raise SchemaMismatchError(f"{what}: column 'key' has {nulls} null values but may not be null (Flink rejects null keys)")
    if key_type is not None:
        table = table.set_column(table.column_names.index(C.COL_KEY), C.COL_KEY, cast_key(table.column(C.COL_KEY), key_type, what))
    kg = assign_key_groups(table.column(C.COL_KEY), max_parallelism)
    if C.COL_KEY_GROUP in table.column_names:
        given = table.column(C.COL_KEY_GROUP).cast(pa.int32())
        if not pc.all(pc.equal(given, kg)).as_py():
            raise SchemaMismatchError(
                f"{what}: column 'key_group' does not match Flink's key-group assignment of 'key' for max parallelism {max_parallelism}"
            )
        return table.set_column(table.column_names.index(C.COL_KEY_GROUP), C.COL_KEY_GROUP, kg)
    return table.add_column(0, C.COL_KEY_GROUP, kg)


def _sortable(t: pa.DataType) -> bool:
    return not (pa.types.is_struct(t) or pa.types.is_list(t) or pa.types.is_map(t) or pa.types.is_null(t) or pa.types.is_floating(t))


def check_unique(table: pa.Table, pk: Sequence[str], what: str, *, adjacent: bool = False) -> None:
    """Refuse a full write that holds one entry twice (which value would win is undefined), naming it.

    `adjacent`: the table is sorted so that equal entries are neighbours (one linear pass);
    otherwise the entries are hash-grouped.
    """
    if table.num_rows < 2:
        return
    if adjacent:
        same = None
        for name in pk:
            c = table.column(name)
            eq = pc.fill_null(pc.equal(c.slice(1), c.slice(0, len(c) - 1)), False)
            same = eq if same is None else pc.and_(same, eq)
        if not pc.any(same).as_py():
            return
        i = int(pc.index(same, True).as_py())
        first = table.slice(i, 1).select(list(pk)).to_pylist()[0]
        raise DuplicateKeyError(f"{what}: a full put holds entry {first} more than once; give each entry once")
    flat = flat_key_columns(table, pk)
    cols = [f"__g{i}" for i in range(len(flat))]
    g = pa.table({**dict(zip(cols, flat)), "__i": pa.array(np.arange(table.num_rows, dtype=np.int64))})
    agg = g.group_by(cols, use_threads=False).aggregate([("__i", "min"), ("__i", "count")])
    dup = agg.filter(pc.greater(agg.column("__i_count"), 1))
    if dup.num_rows:
        first = table.slice(dup.column("__i_min")[0].as_py(), 1).select(list(pk)).to_pylist()[0]
        raise DuplicateKeyError(
            f"{what}: a full put holds entry {first} more than once ({dup.num_rows} entries are repeated); give each entry once"
        )


def split_ranges(max_parallelism: int, rows: int, rows_per_file: int = C.DEFAULT_ROWS_PER_FILE) -> list[tuple[int, int]]:
    """Default file split: Flink's key-group ranges for a parallelism sized to the data."""
    p = max(1, min(max_parallelism, math.ceil(rows / max(1, rows_per_file))))
    return [key_group_range(max_parallelism, p, i) for i in range(p)]


def _slices(table: pa.Table, ranges: Sequence[tuple[int, int]], what: str) -> list[tuple[tuple[int, int], pa.Table]]:
    """Split rows (sorted by key group) into zero-copy slices by key-group range; every row must
    fall in exactly one of the (disjoint) ranges."""
    rs = sorted((int(a), int(b)) for a, b in ranges)
    for (a, b), (c, _) in zip(rs, rs[1:]):
        if c <= b:
            raise KeyGroupOutOfRangeError(f"{what}: key-group ranges overlap: [{a}, {b}] and [{c}, ...]")
    if any(a > b for a, b in rs):
        raise KeyGroupOutOfRangeError(f"{what}: empty key-group range in {rs}")
    kg = table.column(C.COL_KEY_GROUP).to_numpy()
    out = []
    covered = 0
    for r in ranges:
        a = int(np.searchsorted(kg, r[0], side="left"))
        b = int(np.searchsorted(kg, r[1], side="right"))
        covered += b - a
        out.append(((int(r[0]), int(r[1])), table.slice(a, b - a)))
    if covered != table.num_rows:
        starts = np.array([a for a, _ in rs])
        ends = np.array([b for _, b in rs])
        pos = np.searchsorted(starts, kg, side="right") - 1
        outside = (pos < 0) | (kg > ends[np.clip(pos, 0, None)])
        bad = sorted(set(kg[outside].tolist()))[:10]
        raise KeyGroupOutOfRangeError(f"{what}: {int(outside.sum())} rows fall in key groups {bad} outside the ranges {rs} being written")
    return out


def _prepared(table: pa.Table, schema: pa.Schema, kind: str, max_parallelism: int, what: str) -> pa.Table:
    """Rows as a file of kind stores them: key groups added (verified), conformed to schema, sorted, full writes refused
    if they hold an entry twice. Key groups depend on the key alone, so parts of a write over disjoint key groups can be
    prepared apart and come out as the whole would."""
    table = with_key_groups(table, max_parallelism, what, schema.field(C.COL_KEY).type)
    table = conform(table, schema, what)
    # one sort of the whole table, key group first: what _slices needs
    table = sort_for_kind(table, kind)
    if kind in (C.KIND_FULL, C.KIND_TIMERS_FULL):
        pk = [c for c in (C.COL_KEY, C.COL_NAMESPACE, C.COL_USER_KEY, C.COL_TIMESTAMP) if c in schema.names]
        # the sort (key group, key, user key / timestamp) puts equal entries side by side unless
        # a namespace or an unorderable type is part of the entry
        check_unique(table, pk, what, adjacent=C.COL_NAMESPACE not in pk and all(_sortable(schema.field(c).type) for c in pk))
    return table


def _check_ranges(ranges: Sequence[tuple[int, int]], max_parallelism: int, what: str) -> None:
    outside = [(int(a), int(b)) for a, b in ranges if not 0 <= int(a) <= int(b) < max_parallelism]
    if outside:
        raise KeyGroupOutOfRangeError(f"{what}: key-group ranges {outside} are not inside [0, {max_parallelism - 1}] (max parallelism {max_parallelism})")


def _write_ranged(
    io: FileIO,
    operator: str,
    name: str,
    sub: str,
    table: pa.Table,
    schema: pa.Schema,
    what: str,
    *,
    kind: str,
    checkpoint_id: int,
    checkpoint_kind: str,
    max_parallelism: int,
    ranges: Sequence[tuple[int, int]] | None,
    seq: int,
    write_empty: bool,
    extra_metadata: dict[str, str],
) -> list[FileEntry]:
    """Key groups, conform, split by range, one file per range."""
    table = _prepared(table, schema, kind, max_parallelism, what)
    if ranges is None:
        ranges = split_ranges(max_parallelism, table.num_rows)
    _check_ranges(ranges, max_parallelism, what)
    base = data_dir(checkpoint_kind, checkpoint_id)
    meta = {**extra_metadata, C.META_MAX_PARALLELISM: str(max_parallelism)}
    out = []
    for r, part in _slices(table, ranges, what):
        if part.num_rows == 0 and not write_empty:
            continue
        path = file_path(base, operator, sub, checkpoint_id, kind, r)
        out.append(
            write_data_file(io, path, part, kind=kind, operator=operator, state=name, key_group_start=r[0], key_group_end=r[1],
                            checkpoint_id=checkpoint_id, seq=seq, extra_metadata=meta, sort=False)
        )
    return out


def write_state_files(
    io: FileIO,
    operator: str,
    desc: KeyedStateDescriptor,
    table: pa.Table,
    *,
    checkpoint_id: int,
    checkpoint_kind: str,
    max_parallelism: int,
    delta: bool = False,
    ranges: Sequence[tuple[int, int]] | None = None,
    seq: int = 0,
    write_empty: bool = True,
) -> list[FileEntry]:
    """Write a keyed state's rows as one file per key-group range; return the entries."""
    return _write_ranged(
        io, operator, desc.name, desc.name, table, state_schema(desc, delta=delta), f"operator {operator!r} state {desc.name!r}",
        kind=C.KIND_DELTA if delta else C.KIND_FULL, checkpoint_id=checkpoint_id, checkpoint_kind=checkpoint_kind,
        max_parallelism=max_parallelism, ranges=ranges, seq=seq, write_empty=write_empty,
        extra_metadata={C.META_STATE_KIND: desc.kind},
    )


def write_timer_files(
    io: FileIO,
    operator: str,
    desc: TimerServiceDescriptor,
    table: pa.Table,
    *,
    checkpoint_id: int,
    checkpoint_kind: str,
    max_parallelism: int,
    delta: bool = False,
    ranges: Sequence[tuple[int, int]] | None = None,
    seq: int = 0,
    write_empty: bool = True,
) -> list[FileEntry]:
    """Write a timer service's timers (key group, key, namespace, timestamp) per key-group range."""
    return _write_ranged(
        io, operator, desc.name, f"{C.TIMERS_SUBDIR}/{desc.name}", table, timer_schema(desc, delta=delta),
        f"operator {operator!r} timer service {desc.name!r}",
        kind=C.KIND_TIMERS_DELTA if delta else C.KIND_TIMERS_FULL, checkpoint_id=checkpoint_id, checkpoint_kind=checkpoint_kind,
        max_parallelism=max_parallelism, ranges=ranges, seq=seq, write_empty=write_empty,
        extra_metadata={C.META_TIMER_DOMAIN: desc.domain},
    )


class RangeFileWriter:
    """A keyed state's or timer service's full file over one key-group range, written from its rows part by part.

    Each `write` takes the rows of key groups after those of the parts before (an import decodes a subtask's key groups
    a chunk at a time); every part is prepared as `write_state_files` prepares the whole and appended as row groups,
    so the file holds what one `write_state_files(..., ranges=[key_group_range])` of all the rows writes, while memory
    holds one part. `close` returns the file's entries (one file, empty if no row came); `abort` drops the file.
    """

    def __init__(self, io: FileIO, operator: str, desc: KeyedStateDescriptor | TimerServiceDescriptor, *, checkpoint_id: int,
                 checkpoint_kind: str, max_parallelism: int, key_group_range: tuple[int, int], seq: int = 0) -> None:
        timers = isinstance(desc, TimerServiceDescriptor)
        self.what = f"operator {operator!r} {'timer service' if timers else 'state'} {desc.name!r}"
        self.schema = timer_schema(desc) if timers else state_schema(desc)  # type: ignore[arg-type]
        self.kind = C.KIND_TIMERS_FULL if timers else C.KIND_FULL
        self.max_parallelism = max_parallelism
        self.range = (int(key_group_range[0]), int(key_group_range[1]))
        _check_ranges([self.range], max_parallelism, self.what)
        self.next_kg = self.range[0]  # parts must come in key-group order
        sub = f"{C.TIMERS_SUBDIR}/{desc.name}" if timers else desc.name
        extra = {C.META_TIMER_DOMAIN: desc.domain} if timers else {C.META_STATE_KIND: desc.kind}  # type: ignore[union-attr]
        path = file_path(data_dir(checkpoint_kind, checkpoint_id), operator, sub, checkpoint_id, self.kind, self.range)
        self.sink = DataFileSink(io, path, self.schema, kind=self.kind, operator=operator, state=desc.name,
                                 key_group_start=self.range[0], key_group_end=self.range[1], checkpoint_id=checkpoint_id, seq=seq,
                                 extra_metadata={**extra, C.META_MAX_PARALLELISM: str(max_parallelism)})

    def write(self, table: pa.Table) -> None:
        """Append rows of key groups after every key group written before (inside the file's range)."""
        table = _prepared(table, self.schema, self.kind, self.max_parallelism, self.what)
        if table.num_rows == 0:
            return
        kg = table.column(C.COL_KEY_GROUP)
        first, last = int(kg[0].as_py()), int(kg[-1].as_py())
        if first < self.next_kg:
            raise KeyGroupOutOfRangeError(f"{self.what}: rows of key group {first} come after those of key group {self.next_kg - 1} "
                                          f"(or before the range {self.range}): parts must come in key-group order")
        ((_, part),) = _slices(table, [self.range], self.what)  # every row inside the range
        self.next_kg = last + 1
        self.sink.write(part)

    @property
    def pending_bytes(self) -> int:
        """The bytes of rows held for the file's next row group."""
        return self.sink.pending_bytes

    def flush(self) -> None:
        """Write the rows held as a (shorter) row group now."""
        self.sink.flush()

    def close(self) -> list[FileEntry]:
        """Finish the file; its manifest entry."""
        return [self.sink.close()]

    def abort(self) -> None:
        """Drop the partial file."""
        self.sink.abort()


def write_operator_state_file(
    io: FileIO, operator: str, desc: OperatorStateDescriptor, table: pa.Table, *, checkpoint_id: int, checkpoint_kind: str, seq: int = 0
) -> FileEntry:
    """Write an operator state (list, union or broadcast) as one file."""
    what = f"operator {operator!r} operator state {desc.name!r}"
    table = conform(table, operator_state_schema(desc), what)
    path = file_path(data_dir(checkpoint_kind, checkpoint_id), operator, f"{C.OPERATOR_SUBDIR}/{desc.name}", checkpoint_id, C.KIND_OPERATOR, (0, 0))
    return write_data_file(io, path, table, kind=C.KIND_OPERATOR, operator=operator, state=desc.name, key_group_start=0, key_group_end=0,
                           checkpoint_id=checkpoint_id, seq=seq, extra_metadata={C.META_OPERATOR_STATE_MODE: desc.mode})


def write_coordinator_file(io: FileIO, operator: str, table: pa.Table, *, checkpoint_id: int, checkpoint_kind: str, seq: int = 0) -> FileEntry:
    """Write an operator coordinator's state and its buffered events as one file."""
    what = f"operator {operator!r} coordinator state"
    table = conform(table, coordinator_schema(), what)
    path = file_path(data_dir(checkpoint_kind, checkpoint_id), operator, C.COORDINATOR_SUBDIR, checkpoint_id, C.KIND_COORDINATOR, (0, 0))
    return write_data_file(io, path, table, kind=C.KIND_COORDINATOR, operator=operator, state=None, key_group_start=0, key_group_end=0,
                           checkpoint_id=checkpoint_id, seq=seq, sort=False)
