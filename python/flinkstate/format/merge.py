"""The view of a state at a checkpoint: newest full file plus later deltas, newest wins.

Per key group, rows of files older than the newest full file covering that key group are
masked; the remaining rows are de-duplicated on the primary key keeping the newest, and
tombstones are dropped. Everything is vectorized over Arrow arrays.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from flinkstate.format import constants as C
from flinkstate.format.datafile import FileEntry

if TYPE_CHECKING:
    from flinkstate.core.io import FileIO

__all__ = ["order_entries", "newest_full_order", "merge_tables", "read_range", "overlaps", "live_positions", "flat_key_columns",
           "group_rows", "elementary_ranges"]

_SEQ = "__fs_seq"


def order_entries(entries: Sequence[FileEntry]) -> list[FileEntry]:
    """Entries oldest first: by creating checkpoint, then write order within it."""
    return sorted(entries, key=lambda e: (e.created_by_checkpoint_id, e.seq, e.path))


def newest_full_order(entries: Sequence[FileEntry], max_parallelism: int) -> np.ndarray:
    """For each key group, the position (in `entries`, already ordered) of its newest full file (-1: none)."""
    out = np.full(max_parallelism, -1, dtype=np.int64)
    for i, e in enumerate(entries):
        if e.kind not in C.DELTA_KINDS:
            out[e.key_group_start : e.key_group_end + 1] = i
    return out


def overlaps(e: FileEntry, lo: int, hi: int) -> bool:
    """True when a file's key-group range meets [lo, hi]."""
    return not (e.key_group_end < lo or e.key_group_start > hi)


def live_positions(ordered: Sequence[FileEntry], full_order: np.ndarray) -> list[int]:
    """Positions of the (ordered) files not wholly shadowed: some key group of theirs has no newer full file."""
    return [pos for pos, e in enumerate(ordered) if pos >= full_order[e.key_group_start : e.key_group_end + 1].min()]


def flat_key_columns(table: pa.Table, names: Sequence[str]) -> list[pa.ChunkedArray | pa.Array]:
    """The leaf columns of key columns (struct keys flattened, null-typed ones dropped), for hash grouping."""
    out: list[pa.ChunkedArray | pa.Array] = []
    for name in names:
        stack = [table.column(name)]
        while stack:
            c = stack.pop()
            if pa.types.is_struct(c.type):
                flat = c.combine_chunks() if isinstance(c, pa.ChunkedArray) else c
                for i in reversed(range(flat.type.num_fields)):
                    stack.append(pc.struct_field(flat, [i]))
            elif not pa.types.is_null(c.type):
                out.append(c)
    return out


def group_rows(table: pa.Table, names: Sequence[str]) -> tuple[pa.Array, pa.Array, pa.Array]:
    """Group rows by key columns, keeping row order within a group.

    Returns (first row of each group, all row indices grouped, offsets of the groups in it),
    ready for `table.take(firsts)` and `pa.ListArray.from_arrays(offsets, column.take(order))`.
    """
    flat = flat_key_columns(table, names)
    cols = [f"__g{i}" for i in range(len(flat))]
    g = pa.table({**dict(zip(cols, flat)), "__i": pa.array(np.arange(table.num_rows, dtype=np.int64))})
    lists = g.group_by(cols, use_threads=False).aggregate([("__i", "list")]).column("__i_list").combine_chunks()
    return pc.list_element(lists, 0), pc.list_flatten(lists), lists.offsets


def _group_columns(table: pa.Table, pk: list[str]) -> tuple[pa.Table, list[str]]:
    """Append the flattened key columns so Arrow's hash group-by can use them."""
    flat = flat_key_columns(table, pk)
    names = [f"__g{i}" for i in range(len(flat))]
    t = table
    for n, c in zip(names, flat):
        t = t.append_column(n, c)
    return t, names


def merge_tables(
    tables: Sequence[pa.Table],
    positions: Sequence[int],
    full_order: np.ndarray | None,
    pk: list[str],
) -> pa.Table:
    """Merge file tables (oldest first) into the state's view; drops the tombstone column.

    `positions[i]` is the ordered position of the file `tables[i]` came from; rows whose key
    group has a newer full file than their file are masked out.
    """
    if not tables:
        raise ValueError("merge_tables needs at least one table")
    has_delta = any(C.COL_TOMBSTONE in t.column_names for t in tables)
    parts = []
    for t, pos in zip(tables, positions):
        if full_order is not None and len(tables) > 1:
            kg = t.column(C.COL_KEY_GROUP).to_numpy()
            keep = full_order[kg] <= pos
            if not keep.all():
                t = t.filter(pa.array(keep))
        if C.COL_TOMBSTONE not in t.column_names:
            t = t.append_column(C.COL_TOMBSTONE, pa.array(np.zeros(t.num_rows, dtype=bool)))
        parts.append(t)
    if len(parts) == 1 and not has_delta:
        return parts[0].drop_columns([C.COL_TOMBSTONE])
    schema = parts[-1].schema
    parts = [p.cast(schema) if p.schema != schema else p for p in parts]
    combined = pa.concat_tables(parts)
    if len(parts) > 1 or has_delta:
        combined = combined.append_column(_SEQ, pa.array(np.arange(combined.num_rows, dtype=np.int64)))
        grouped, gcols = _group_columns(combined, pk)
        if gcols:
            last = grouped.select(gcols + [_SEQ]).group_by(gcols, use_threads=False).aggregate([(_SEQ, "max")])
            idx = pc.sort_indices(last.column(f"{_SEQ}_max"))
            rows = pc.take(last.column(f"{_SEQ}_max"), idx)
            combined = combined.take(rows)
        combined = combined.drop_columns([_SEQ])
    tomb = combined.column(C.COL_TOMBSTONE)
    if pc.any(tomb).as_py():
        combined = combined.filter(pc.invert(tomb))
    return combined.drop_columns([C.COL_TOMBSTONE])


def elementary_ranges(entries: Sequence[FileEntry], lo: int, hi: int) -> list[tuple[int, int]]:
    """[lo, hi] cut at the starts of the full files (of the deltas when there is no full file)."""
    base = [e for e in entries if e.kind not in C.DELTA_KINDS] or list(entries)
    cuts = sorted({e.key_group_start for e in base if lo < e.key_group_start <= hi} | {lo})
    return [(cuts[i], (cuts[i + 1] - 1) if i + 1 < len(cuts) else hi) for i in range(len(cuts))]


def read_range(
    io: FileIO,
    entries: Sequence[FileEntry],
    pk: list[str],
    max_parallelism: int,
    key_group_range: tuple[int, int],
    *,
    key_groups: Sequence[int] | None = None,
    filter: object = None,
    descriptor: object = None,
) -> pa.Table | None:
    """The merged stored rows of one state in a key-group range (None when no file has any).

    Merged per range of one full file: full files of disjoint ranges need no de-duplication
    across them. key_groups (sorted, inside the range) skips the sub-ranges holding none.
    """
    lo, hi = key_group_range
    files = [e for e in entries if overlaps(e, lo, hi)]
    parts = []
    for a, b in elementary_ranges(files, lo, hi):
        if key_groups is not None and not any(a <= k <= b for k in key_groups):
            continue
        v = _read_view(io, [e for e in files if overlaps(e, a, b)], pk, max_parallelism, key_group_range=(a, b), filter=filter,
                       descriptor=descriptor)
        if v is not None and v.num_rows:
            parts.append(v)
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else pa.concat_tables(parts)


def _read_view(
    io: FileIO,
    entries: Sequence[FileEntry],
    pk: list[str],
    max_parallelism: int,
    *,
    key_group_range: tuple[int, int] | None = None,
    filter: object = None,
    columns: list[str] | None = None,
    descriptor: object = None,
    verify: bool = True,
) -> pa.Table | None:
    """Read and merge the files of one state (optionally one key-group range); None if no file.

    Each file is checked on read (format.checks), against `descriptor` when given."""
    import pyarrow.dataset as ds

    from flinkstate.format.datafile import read_data_file

    ordered = order_entries(entries)
    full_order = newest_full_order(ordered, max_parallelism)
    tables, positions = [], []
    for pos in live_positions(ordered, full_order):
        e = ordered[pos]
        if key_group_range is not None and not overlaps(e, *key_group_range):
            continue
        expr = filter
        if key_group_range is not None and (e.key_group_start < key_group_range[0] or e.key_group_end > key_group_range[1]):
            kg_expr = (ds.field(C.COL_KEY_GROUP) >= key_group_range[0]) & (ds.field(C.COL_KEY_GROUP) <= key_group_range[1])
            expr = kg_expr if expr is None else (expr & kg_expr)  # type: ignore[operator]
        cols = None
        if columns is not None:
            cols = list(columns)
            if e.kind in C.DELTA_KINDS and C.COL_TOMBSTONE not in cols:
                cols.append(C.COL_TOMBSTONE)
        tables.append(read_data_file(io, e, filter=expr, columns=cols, descriptor=descriptor, verify=verify,  # type: ignore[arg-type]
                                     max_parallelism=max_parallelism))
        positions.append(pos)
    if not tables:
        return None
    return merge_tables(tables, positions, full_order, pk)
