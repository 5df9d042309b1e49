"""A JSON description of one data file, as `schemas/v1/data-file.schema.json` validates it.

`describe_data_file(io, path)` opens a Parquet data file and reports what is physically in
it: the `flinkstate.*` key-value metadata, the columns (name, Arrow type string, nullability)
in file order, row groups and compression, the sort keys the format prescribes for the file
kind and whether the rows really are in that order. It never trusts the manifest: it is the
tool to audit a file written by any implementation (see schemas/FORMAT.md, "Data file
descriptions").
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from flinkstate.core.io import FileIO
from flinkstate.format import constants as C
from flinkstate.format.filekind import FileKind

__all__ = ["describe_data_file", "sort_keys_for", "is_sorted", "key_group_sizes", "ttl_column"]

_ARROW_SCHEMA_KEY = "ARROW:schema"


def _orderable(t: pa.DataType) -> bool:
    return not (pa.types.is_struct(t) or pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_map(t) or pa.types.is_null(t))


def sort_keys_for(kind: str, schema: pa.Schema) -> list[str]:
    """The columns a v1 file of `kind` is sorted by: the longest orderable prefix of the kind's sort columns."""
    wanted = [c for c in FileKind(kind).sort_keys if c in schema.names]  # coordinator files: the order they were written in
    out = []
    for name in wanted:
        if name not in schema.names or not _orderable(schema.field(name).type):
            break
        out.append(name)
    return out


def is_sorted(table: pa.Table, keys: list[str]) -> bool:
    """True when the rows are in ascending lexicographic order of `keys` (ties in any order)."""
    if not keys or table.num_rows <= 1:
        return True
    # the sort is stable: rows already in order come back as 0, 1, 2, ...
    idx = pc.sort_indices(table.select(keys), sort_keys=[(k, "ascending") for k in keys])
    return bool(pc.all(pc.equal(idx, pa.array(range(table.num_rows), pa.uint64()))).as_py())


def describe_data_file(io: FileIO, path: str) -> dict[str, Any]:
    """Describe the data file at `path` (relative to the root of `io`) as a JSON-able dict."""
    with io.open(path, "rb") as f:
        pf = pq.ParquetFile(f)
        md = pf.metadata
        schema = pf.schema_arrow
        table = pf.read()
    raw = md.metadata or {}
    metadata = {k.decode("utf-8"): v.decode("utf-8") for k, v in raw.items() if k.decode("utf-8") != _ARROW_SCHEMA_KEY}
    kind = metadata.get(C.META_FILE_KIND)
    version_text = metadata.get(C.META_FORMAT_VERSION)
    format_version: int | None = int(version_text) if version_text is not None and version_text.isdigit() else None
    columns = [{"name": fld.name, "type": str(fld.type), "nullable": bool(fld.nullable)} for fld in schema]
    codecs = sorted({md.row_group(i).column(j).compression for i in range(md.num_row_groups) for j in range(md.num_columns)})
    keys = sort_keys_for(kind or "", schema)
    return {
        "path": path,
        "format_version": format_version,
        "kind": kind,
        "metadata": dict(sorted(metadata.items())),
        "has_arrow_schema": _ARROW_SCHEMA_KEY.encode() in raw,
        "columns": columns,
        "column_order": ",".join(c["name"] for c in columns),
        "num_rows": int(md.num_rows),
        "row_groups": [int(md.row_group(i).num_rows) for i in range(md.num_row_groups)],
        "compression": codecs,
        "sort_keys": keys,
        "sorted": is_sorted(table, keys),
    }


def key_group_sizes(io: FileIO, path: str, list_state: bool = False) -> pa.Table:
    """Per key group of one keyed-state data file: its live entries, elements and share of the file's bytes
    (`key_group`, `entries`, `elements`, `bytes`), from the `key_group` (and a delta's `tombstone`) column and the row
    groups' sizes: a row group's compressed bytes are shared among its rows (tombstones count for bytes, not entries).
    No value is decoded, but for a list state (`list_state`), whose `value` column is read for its list lengths: its
    rows are weighted by their elements (plus one) and its elements counted."""
    with io.open(path, "rb") as f:
        pf = pq.ParquetFile(f)
        md = pf.metadata
        cols = [c for c in (C.COL_KEY_GROUP, C.COL_TOMBSTONE) if c in pf.schema_arrow.names]
        if list_state and C.COL_VALUE in pf.schema_arrow.names:
            cols.append(C.COL_VALUE)
        parts = []
        for i in range(md.num_row_groups):
            rg = md.row_group(i)
            if rg.num_rows == 0:
                continue
            t = pf.read_row_group(i, columns=cols)
            live = pc.invert(t.column(C.COL_TOMBSTONE)) if C.COL_TOMBSTONE in cols else pa.array(np.ones(t.num_rows, bool))
            live = pc.cast(live, pa.int64())
            if C.COL_VALUE in cols:
                n = pc.cast(pc.fill_null(pc.list_value_length(t.column(C.COL_VALUE)), 0), pa.int64())
                elements = pc.multiply(n, live)
                weight = np.asarray(n.to_numpy(), np.float64) + 1
            else:
                elements = live
                weight = np.ones(t.num_rows)
            nbytes = sum(rg.column(j).total_compressed_size for j in range(rg.num_columns))
            parts.append(pa.table({"key_group": pc.cast(t.column(C.COL_KEY_GROUP), pa.int32()), "entries": live,
                                   "elements": elements, "bytes": pa.array(weight * nbytes / weight.sum())}))
    if not parts:
        return pa.table({"key_group": pa.array([], pa.int32()), "entries": pa.array([], pa.int64()),
                         "elements": pa.array([], pa.int64()), "bytes": pa.array([], pa.int64())})
    t = pa.concat_tables(parts).group_by("key_group").aggregate([("entries", "sum"), ("elements", "sum"), ("bytes", "sum")])
    return pa.table({"key_group": t.column("key_group"), "entries": t.column("entries_sum"), "elements": t.column("elements_sum"),
                     "bytes": pc.cast(pc.round(t.column("bytes_sum")), pa.int64())})


def ttl_column(io: FileIO, path: str) -> pa.Array:
    """The last-access times (epoch ms) of a TTL state's data file, one per live entry or list element: its
    `ttl_timestamp` column alone (no value decoded; a delta's tombstones left out)."""
    with io.open(path, "rb") as f:
        pf = pq.ParquetFile(f)
        cols = [c for c in (C.COL_TTL, C.COL_TOMBSTONE) if c in pf.schema_arrow.names]
        if C.COL_TTL not in cols:
            return pa.array([], pa.int64())
        t = pf.read(columns=cols)
    if C.COL_TOMBSTONE in cols:
        t = t.filter(pc.invert(t.column(C.COL_TOMBSTONE)))
    col = t.column(C.COL_TTL).combine_chunks()
    if pa.types.is_list(col.type) or pa.types.is_large_list(col.type):
        col = pc.list_flatten(col)
    return pc.drop_null(col)
