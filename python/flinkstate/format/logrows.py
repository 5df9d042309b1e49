"""Rows of the manifest and log tables across releases: columns added later, damaged metadata.

Small pure functions the catalog applies to what it reads and appends, so that a manifest
written before a column existed still reads (and keeps its schema), and one damaged log row
is reported for its checkpoint alone.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

__all__ = ["Collection", "parse_metadata", "parse_collection", "conform_rows", "as_table_schema"]


@dataclass(frozen=True)
class Collection:
    """A garbage collection as its COLLECTING log row announces it: what it may delete, planned at one log version.

    A writer whose commit lands after it re-checks its files against it: the files of a checkpoint not in
    `protected`, files whose last use is at or below `line` other than `kept_paths`, and folders of savepoint
    attempts with ids at or below `latest` may be deleted by it.
    """

    attempt_id: str
    planned_version: int  # the log version the collection was planned on (it committed at planned_version + 1)
    line: int  # the newest checkpoint id (kind checkpoint) at that version
    latest: int  # the newest id of any kind at that version
    protected: frozenset[int]  # checkpoints whose files it keeps: retained after its discards, or pinned
    kept_paths: frozenset[str]  # files pinned for reuse by pending snapshots of the collecting process


def parse_collection(row: dict[str, Any]) -> Collection:
    """The Collection a COLLECTING row describes (ValueError/KeyError/TypeError when its metadata is not one)."""
    doc = json.loads(row["metadata"])
    return Collection(
        attempt_id=str(row["attempt_id"]),
        planned_version=int(doc["planned_log_version"]),
        line=int(doc["line"]),
        latest=int(doc["latest"]),
        protected=frozenset(int(c) for c in doc["protected"]),
        kept_paths=frozenset(str(p) for p in doc["kept_paths"]),
    )


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
