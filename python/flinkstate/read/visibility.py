"""What a reader sees of a keyed state's stored rows: TTL visibility and list/map flattening.

The one place these semantics live: every scan (flinkstate checkpoints and any other pinned
checkpoint) ends in `shape_state`, so the library, Spark and every other caller agree.
Stored rows carry `ttl_timestamp` (last access, epoch ms; a list per element for list state);
readers get `ttl_expires_at` (a UTC timestamp) and, when asked, an `expired` flag.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from flinkstate.core.errors import CorruptFileError
from flinkstate.core.ttl import expiry_timestamps
from flinkstate.format import constants as C

__all__ = ["MAX_EXPIRY_MS", "TTL_EXPIRES_AT", "EXPIRED", "shape_state"]

MAX_EXPIRY_MS = 253402300799999  # 9999-12-31T23:59:59.999Z: an expiry shown as a timestamp saturates here
TTL_EXPIRES_AT = "ttl_expires_at"
EXPIRED = "expired"


def _ts(ms: np.ndarray) -> pa.Array:
    return pa.array(np.minimum(ms, MAX_EXPIRY_MS), type=pa.timestamp("ms", tz="UTC"))


def shape_state(view: pa.Table, desc: Any, *, reference_ms: int, include_expired: bool = False, flatten: bool = True,
                changes: bool = False) -> pa.Table:
    """Stored rows of a keyed state (merged) to the rows a read returns.

    TTL: an entry is expired when last access + ttl <= reference_ms (Flink's TtlUtils); expired
    entries are dropped unless include_expired (then an `expired` column says which). List state
    is one row per element when flatten, else a list per key (expired elements dropped, keys left
    empty dropped); map state one row per entry, else a map per key. changes=True keeps every entry
    unflagged, the rows of a changes table.
    """
    ttl_ms = desc.ttl.ttl_ms if desc.ttl_enabled else None
    if C.COL_TTL not in view.column_names:
        ttl_ms = None
    flatten = flatten and not changes
    include_expired = include_expired or changes
    if desc.kind == "list":
        return _shape_list(view, ttl_ms, flatten, include_expired, reference_ms, changes)
    if ttl_ms is not None:
        exp = expiry_timestamps(view.column(C.COL_TTL), ttl_ms)
        expired = exp <= reference_ms
        view = view.drop_columns([C.COL_TTL]).append_column(TTL_EXPIRES_AT, _ts(exp))
        if include_expired:
            if not changes:
                view = view.append_column(EXPIRED, pa.array(expired))
        elif expired.any():
            view = view.filter(pa.array(~expired))
    elif C.COL_TTL in view.column_names:
        view = view.drop_columns([C.COL_TTL])
    if desc.kind == "map" and not flatten:
        view = _group_map(view, ttl_ms is not None, include_expired and not changes)
    return view


def _shape_list(view: pa.Table, ttl_ms: int | None, flatten: bool, include_expired: bool, reference_ms: int, changes: bool) -> pa.Table:
    values = view.column(C.COL_VALUE).combine_chunks()
    if ttl_ms is not None:
        flat_ttl = pc.list_flatten(view.column(C.COL_TTL).combine_chunks())
        exp = expiry_timestamps(flat_ttl, ttl_ms)
        expired = exp <= reference_ms
    parents = pc.list_parent_indices(values).to_numpy(zero_copy_only=False)
    flat_values = pc.list_flatten(values)
    if ttl_ms is not None and len(flat_ttl) != len(flat_values):
        raise CorruptFileError("list state: the ttl_timestamp list does not match the value list")
    keep = np.ones(len(flat_values), dtype=bool)
    if ttl_ms is not None and not include_expired:
        keep = ~expired
    base = view.drop_columns([c for c in (C.COL_VALUE, C.COL_TTL) if c in view.column_names])
    if flatten:
        idx = np.nonzero(keep)[0]
        out = base.take(pa.array(parents[idx]))
        out = out.append_column(C.COL_VALUE, flat_values.take(pa.array(idx)))
        if ttl_ms is not None:
            out = out.append_column(TTL_EXPIRES_AT, _ts(exp[idx]))
            if include_expired and not changes:
                out = out.append_column(EXPIRED, pa.array(expired[idx]))
        return out
    if ttl_ms is None or include_expired:  # one row per key (every element kept)
        out = base.append_column(C.COL_VALUE, values)
        if ttl_ms is not None:
            out = out.append_column(TTL_EXPIRES_AT, pa.ListArray.from_arrays(values.offsets, _ts(exp)))
        return out
    idx = np.nonzero(keep)[0]  # drop expired elements, and keys left with none (whatever the other keys of the read hold)
    counts = np.bincount(parents[idx], minlength=view.num_rows)
    rows = np.nonzero(counts)[0]
    offsets = np.concatenate([[0], np.cumsum(counts[rows])]).astype(np.int32)
    out = base.take(pa.array(rows))
    out = out.append_column(C.COL_VALUE, pa.ListArray.from_arrays(pa.array(offsets), flat_values.take(pa.array(idx))))
    if ttl_ms is not None:
        out = out.append_column(TTL_EXPIRES_AT, pa.ListArray.from_arrays(pa.array(offsets), _ts(exp[idx])))
    return out


def _group_map(view: pa.Table, has_ttl: bool, with_expired: bool) -> pa.Table:
    """Map state, one row per key (and namespace): value becomes map<user_key, value>."""
    from flinkstate.format.merge import group_rows

    group_cols = [C.COL_KEY] + ([C.COL_NAMESPACE] if C.COL_NAMESPACE in view.column_names else [])
    firsts, order, offsets = group_rows(view, group_cols)
    out = view.select(group_cols + [C.COL_KEY_GROUP]).take(firsts)
    uk = view.column(C.COL_USER_KEY).take(order).combine_chunks()
    uv = view.column(C.COL_VALUE).take(order).combine_chunks()
    out = out.append_column(C.COL_VALUE, pa.MapArray.from_arrays(offsets, uk, uv))
    if has_ttl:
        ex = view.column(TTL_EXPIRES_AT).take(order).combine_chunks()
        out = out.append_column(TTL_EXPIRES_AT, pa.MapArray.from_arrays(offsets, uk, ex))
    if with_expired:  # a key is expired when every entry is
        e = np.asarray(view.column(EXPIRED).take(order).combine_chunks().to_numpy(zero_copy_only=False), dtype=bool)
        starts = offsets.to_numpy()[:-1]
        live = np.add.reduceat((~e).astype(np.int64), starts) if e.size else np.zeros(0, dtype=np.int64)
        out = out.append_column(EXPIRED, pa.array(live == 0))
    return out
