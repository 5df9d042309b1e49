"""The difference of one keyed state (or timer service) between two checkpoints.

`diff_tables(old, new, pk)` compares two views entry by entry (an entry is a primary key:
key, namespace, user key or timestamp) and returns the rows that changed, tagged
`change_type` = `upsert` (new or changed; the new row) or `delete` (gone; the old row).
`diff_state` does it for the files of one key-group range and skips the work when both
checkpoints use exactly the same files there, which is what makes the change feed of an
incremental checkpoint cheap. Vectorized over Arrow; nested values are compared exactly.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from flinkstate.core.errors import InvalidArgumentError
from flinkstate.format import constants as C
from flinkstate.format.datafile import (
    FileEntry,
    primary_key_columns,
    state_schema,
    timer_schema,
)
from flinkstate.format.merge import flat_key_columns, overlaps

if TYPE_CHECKING:
    from flinkstate.core.io import FileIO
    from flinkstate.read.checkpoint import StoreCheckpoint
    from flinkstate.read.scan import Checkpoint

__all__ = ["CHANGE_TYPE", "UPSERT", "DELETE", "diff_tables", "diff_state", "changed_key_group_ranges", "state_changes",
           "operator_max_parallelism"]

CHANGE_TYPE = "change_type"


class Checkpoints(Protocol):
    """What a change listing needs of a root (a `CheckpointStore` is one): its IO and its pinned checkpoints."""

    io: FileIO

    def checkpoint(self, checkpoint_id: int | None = None) -> StoreCheckpoint: ...
UPSERT = "upsert"
DELETE = "delete"


def _primitive(t: pa.DataType) -> bool:
    return not (pa.types.is_nested(t) or pa.types.is_dictionary(t))


def _equal_rows(a: pa.Table, b: pa.Table, columns: Sequence[str]) -> np.ndarray:
    """Row-wise equality of two aligned tables on `columns` (nulls equal nulls)."""
    n = a.num_rows
    same = np.ones(n, dtype=bool)
    for name in columns:
        x, y = a.column(name), b.column(name)
        if x.type != y.type:
            try:
                y = y.cast(x.type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                same &= False
                continue
        if _primitive(x.type):
            eq = pc.equal(x, y)
            both_null = pc.and_(pc.is_null(x), pc.is_null(y))
            res = pc.or_kleene(pc.fill_null(eq, False), both_null)
            same &= res.to_numpy(zero_copy_only=False).astype(bool)
        else:
            idx = np.nonzero(same)[0]
            if idx.size == 0:
                continue
            xs = x.take(pa.array(idx)).to_pylist()
            ys = y.take(pa.array(idx)).to_pylist()
            same[idx] = np.array([p == q for p, q in zip(xs, ys)], dtype=bool)
    return same


def diff_tables(old: pa.Table | None, new: pa.Table | None, pk: Sequence[str]) -> pa.Table | None:
    """Changes from `old` to `new` (same schema): new and changed rows as upserts, gone rows as deletes.

    Returns the columns of `new` (or `old`) plus `change_type` first, or None when both are None.
    """
    if old is None and new is None:
        return None
    if old is None or old.num_rows == 0:
        base = new if new is not None else old
        assert base is not None
        return base.add_column(0, CHANGE_TYPE, pa.array([UPSERT] * base.num_rows, pa.string()))
    if new is None or new.num_rows == 0:
        return old.add_column(0, CHANGE_TYPE, pa.array([DELETE] * old.num_rows, pa.string()))
    if new.schema != old.schema:
        old = old.select(new.column_names).cast(new.schema)
    n_old, n_new = old.num_rows, new.num_rows
    keys_old = flat_key_columns(old, pk)
    keys_new = flat_key_columns(new, pk)
    names = [f"__k{i}" for i in range(len(keys_old))]
    both = pa.table(
        {
            **{n: pa.chunked_array(list(_chunks(a)) + list(_chunks(b)), type=a.type) for n, a, b in zip(names, keys_old, keys_new)},
            "__oi": pa.array(np.concatenate([np.arange(n_old), np.full(n_new, -1)]).astype(np.int64)),
            "__ni": pa.array(np.concatenate([np.full(n_old, -1), np.arange(n_new)]).astype(np.int64)),
        }
    )
    g = both.group_by(names, use_threads=False).aggregate([("__oi", "max"), ("__ni", "max")])
    oi = g.column("__oi_max").to_numpy()
    ni = g.column("__ni_max").to_numpy()
    inserted = ni[(oi < 0) & (ni >= 0)]
    deleted = oi[(ni < 0) & (oi >= 0)]
    m = (oi >= 0) & (ni >= 0)
    po, pn = oi[m], ni[m]
    compare = [c for c in new.column_names if c not in pk and c != C.COL_KEY_GROUP]
    if po.size and compare:
        same = _equal_rows(old.take(pa.array(po)), new.take(pa.array(pn)), compare)
        changed = pn[~same]
    else:
        changed = np.empty(0, dtype=np.int64)
    ups = np.sort(np.concatenate([inserted, changed]))
    parts = []
    if ups.size:
        t = new.take(pa.array(ups))
        parts.append(t.add_column(0, CHANGE_TYPE, pa.array([UPSERT] * t.num_rows, pa.string())))
    if deleted.size:
        t = old.take(pa.array(np.sort(deleted)))
        parts.append(t.add_column(0, CHANGE_TYPE, pa.array([DELETE] * t.num_rows, pa.string())))
    if not parts:
        return new.slice(0, 0).add_column(0, CHANGE_TYPE, pa.array([], pa.string()))
    return pa.concat_tables(parts)


def _chunks(a: pa.Array | pa.ChunkedArray) -> list[pa.Array]:
    return list(a.chunks) if isinstance(a, pa.ChunkedArray) else [a]


def _overlapping(entries: Sequence[FileEntry], r: tuple[int, int] | None) -> list[FileEntry]:
    if r is None:
        return list(entries)
    return [e for e in entries if overlaps(e, *r)]


def changed_key_group_ranges(
    old_entries: Sequence[FileEntry], new_entries: Sequence[FileEntry], ranges: Sequence[tuple[int, int] | None]
) -> list[tuple[int, int] | None]:
    """The ranges whose files differ between the two checkpoints (others cannot have changed; None: every key group)."""
    out = []
    for r in ranges:
        a = {e.path for e in _overlapping(old_entries, r)}
        b = {e.path for e in _overlapping(new_entries, r)}
        if a != b:
            out.append(r)
    return out


def _stored(io: Any, desc: Any, entries: Sequence[FileEntry], maxp: int, rng: tuple[int, int] | None, timers: bool) -> pa.Table:
    """The merged stored rows of a state's files in a range, through the scan task every reader uses."""
    from flinkstate.read.keyed_scan import StateScanTask
    from flinkstate.read.timer_scan import TimerScanTask

    r = rng if rng is not None else (0, maxp - 1)
    if timers:
        return TimerScanTask(io, [desc.to_dict()], list(entries), r, maxp).to_arrow()
    return StateScanTask(io, desc.to_dict(), list(entries), r, maxp, reference_ms=0, raw=True).to_arrow()


def diff_state(
    io: Any,
    desc: Any,
    old_entries: Sequence[FileEntry] | None,
    new_entries: Sequence[FileEntry] | None,
    old_max_parallelism: int,
    new_max_parallelism: int,
    key_group_range: tuple[int, int] | None = None,
    *,
    timers: bool = False,
) -> pa.Table:
    """The changes of one state (or timer service) in a key-group range, storage columns plus `change_type`.

    `None` entries mean the state does not exist in that checkpoint. Key-group ranges only
    line up when both checkpoints have the same max parallelism; otherwise pass None.
    """
    pk = primary_key_columns(desc)
    schema = timer_schema(desc) if timers else state_schema(desc)
    empty = schema.empty_table().add_column(0, CHANGE_TYPE, pa.array([], pa.string()))
    same_mp = old_max_parallelism == new_max_parallelism
    if old_entries is not None and new_entries is not None and same_mp:
        if not changed_key_group_ranges(old_entries, new_entries, [key_group_range]):
            return empty
    r_old = key_group_range if same_mp else None
    old = None if old_entries is None else _stored(io, desc, old_entries, old_max_parallelism, r_old, timers)
    new = None if new_entries is None else _stored(io, desc, new_entries, new_max_parallelism, key_group_range, timers)
    if old is not None:
        old = old.select(schema.names).cast(schema) if old.schema != schema else old
    if new is not None:
        new = new.select(schema.names).cast(schema) if new.schema != schema else new
    out = diff_tables(old, new, pk)
    return empty if out is None else out


def state_changes(store: Checkpoints, operator: str, state: str, from_checkpoint_id: int, to_checkpoint_id: int) -> pa.Table:
    """Changes of a keyed state between two committed checkpoints (whole state, one process); from <= to."""
    if from_checkpoint_id > to_checkpoint_id:
        raise InvalidArgumentError(
            f"changes of operator {operator!r} state {state!r}: from checkpoint {from_checkpoint_id} is after to checkpoint {to_checkpoint_id}"
        )
    ck_from, ck_to = store.checkpoint(from_checkpoint_id), store.checkpoint(to_checkpoint_id)
    try:
        desc = ck_to.state_descriptor(operator, state)
        new_entries: list[FileEntry] | None = ck_to.state_files(operator, state)
    except LookupError:
        desc = ck_from.state_descriptor(operator, state)
        new_entries = None
    try:
        ck_from.state_descriptor(operator, state)
        old_entries: list[FileEntry] | None = ck_from.state_files(operator, state)
    except LookupError:  # StateNotFoundError, OperatorNotFoundError
        old_entries = None
    return diff_state(store.io, desc, old_entries, new_entries, *operator_max_parallelism(ck_from, ck_to, operator))


def operator_max_parallelism(ck_from: Checkpoint, ck_to: Checkpoint, operator: str) -> tuple[int, int]:
    """An operator's max parallelism in two checkpoints (one lacking the operator takes the other's)."""
    old = ck_from.max_parallelism_of(operator) if operator in ck_from.operators else None
    new = ck_to.max_parallelism_of(operator) if operator in ck_to.operators else None
    old, new = (old if old is not None else new), (new if new is not None else old)
    if old is None or new is None:
        return ck_from.max_parallelism, ck_to.max_parallelism
    return old, new
