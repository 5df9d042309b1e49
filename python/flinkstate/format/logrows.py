"""Rows of the manifest and log tables across releases: columns added later, damaged metadata.

Small pure functions the catalog applies to what it reads and appends, so that a manifest
written before a column existed still reads (and keeps its schema), and one damaged log row
is reported for its checkpoint alone.
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa

__all__ = ["parse_metadata", "conform_rows", "as_table_schema"]


def parse_metadata(row: dict[str, Any], log_url: str) -> tuple[dict[str, Any], str | None]:
    """A log row's metadata document, or ({}, what is wrong) when it is not a JSON object."""
    try:
        meta = json.loads(row["metadata"])
    except (json.JSONDecodeError, TypeError) as e:
        return {}, f"checkpoint {row['checkpoint_id']} is damaged: its metadata in the log {log_url} is not valid JSON ({e})"
    if not isinstance(meta, dict):
        return {}, f"checkpoint {row['checkpoint_id']} is damaged: its metadata in the log {log_url} is not a JSON object"
    return meta, None


def conform_rows(t: pa.Table, schema: pa.Schema) -> pa.Table:
    """Rows of one Delta data file in the current schema: columns added since it was written read as null."""
    for f in schema:
        if f.name not in t.column_names and f.nullable:
            t = t.append_column(f, pa.nulls(t.num_rows, f.type))
    return t.select(schema.names).cast(schema)


def as_table_schema(rows: pa.Table, table: Any) -> pa.Table:
    """Rows to append, without the columns an existing table predates (a root created by an
    earlier release keeps its schema, so that release can still read it)."""
    if table is None:
        return rows
    names = set(pa.schema(table.schema().to_arrow()).names)
    return rows.select([n for n in rows.column_names if n in names])
