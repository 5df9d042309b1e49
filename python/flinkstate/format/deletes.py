"""Deletes that name an entry by fewer columns than its primary key: a key alone removes the key's whole entry (every
user key of its map, its list; in every namespace), and `namespace` and `user_key` narrow what it removes.

A delta file deletes by tombstones of whole primary keys (`schemas.primary_key_columns`), so such a delete becomes the
tombstones of the stored entries it names: `named_entries` finds them among the stored rows of the deleted keys, which
the caller reads (the writer from the files of the checkpoint it builds, Spark tasks from the checkpoint they planned on).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from flinkstate.core.errors import SchemaMismatchError
from flinkstate.format import constants as C
from flinkstate.format.merge import flat_key_columns
from flinkstate.format.schemas import primary_key_columns, state_schema

__all__ = ["deleted_columns", "named_entries", "needs_stored_entries", "tombstones"]


def deleted_columns(desc: Any, columns: list[str], what: str) -> list[str]:
    """The primary-key columns a delete gives (key first, then namespace and user_key where given); a delete without a
    key column, or naming a column the state does not have, is SchemaMismatchError naming it."""
    pk = primary_key_columns(desc)
    if C.COL_KEY not in columns:
        raise SchemaMismatchError(f"{what}: a delete needs a 'key' column (namespace and user_key narrow it); got columns {columns}")
    for c in (C.COL_NAMESPACE, C.COL_USER_KEY):
        if c in columns and c not in pk:
            raise SchemaMismatchError(f"{what}: a delete of a {desc.kind} state has no {c!r} column to narrow it by; it takes {pk}")
    return [c for c in pk if c in columns]


def needs_stored_entries(desc: Any, columns: list[str]) -> bool:
    """Whether a delete by these columns names entries by less than their primary key (a map state's key without user_key,
    a namespaced state's key without namespace): its tombstones are those of the stored entries it names."""
    return any(c not in columns for c in primary_key_columns(desc))


def named_entries(stored: pa.Table, deletes: pa.Table, desc: Any) -> pa.Table:
    """The primary-key columns of the stored rows (a state's raw rows of the deleted keys, or more) that the deletes name:
    a stored row is named when it equals a delete on every column the delete gives. Order: the stored rows' order."""
    pk = primary_key_columns(desc)
    given = [c for c in pk if c in deletes.column_names]
    if not stored.num_rows or not deletes.num_rows:
        return stored.select(pk).slice(0, 0)
    mine = pa.table({c: deletes.column(c).cast(stored.schema.field(c).type) for c in given})
    left, right = flat_key_columns(mine, given), flat_key_columns(stored, given)
    names = [f"__g{i}" for i in range(len(left))]
    rows = pa.table({**dict(zip(names, right)), "__row": pa.array(np.arange(stored.num_rows, dtype=np.int64))})
    hit = rows.join(pa.table(dict(zip(names, left))).group_by(names).aggregate([]), keys=names, join_type="left semi",
                    use_threads=False)
    order = np.sort(hit.column("__row").to_numpy())
    return stored.select(pk).take(pa.array(order))


def tombstones(entries: pa.Table, desc: Any) -> pa.Table:
    """A delta's rows deleting these entries (their primary-key columns): no value, no last-access time, tombstone true."""
    n = entries.num_rows
    cols = {}
    for f in state_schema(desc, delta=True):
        if f.name == C.COL_KEY_GROUP:
            continue
        if f.name == C.COL_TOMBSTONE:
            cols[f.name] = pa.array(np.ones(n, dtype=bool))
        elif f.name in entries.column_names:
            cols[f.name] = entries.column(f.name).cast(f.type)
        else:
            cols[f.name] = pa.nulls(n, f.type)
    return pa.table(cols)
