"""Conversion between the backend's in-memory tables and the Arrow tables of format v1.

Writing runs on the snapshot thread over frozen bucket references; reading runs on restore.
Struct keys (tuples) come back as tuples so they stay hashable.
"""

from __future__ import annotations

from itertools import chain
from typing import Any

import pyarrow as pa

from flinkstate.backend.tables import FrozenTable
from flinkstate.core.descriptors import KeyedStateDescriptor, TimerServiceDescriptor
from flinkstate.core.ttl import is_expired
from flinkstate.format import constants as C
from flinkstate.format.datafile import state_schema, timer_schema

__all__ = ["state_to_arrow", "timers_to_arrow", "arrow_to_state_items", "arrow_to_timer_keys", "to_hashable"]


def _split_pk(pks: list[Any], namespaced: bool) -> tuple[list[Any], list[Any] | None]:
    if not namespaced:
        return pks, None
    return [p[0] for p in pks], [p[1] for p in pks]


def _build(desc: KeyedStateDescriptor, delta: bool, cols: dict[str, list[Any]]) -> pa.Table:
    schema = state_schema(desc, delta=delta)
    arrays = []
    for f in schema:
        if f.name == C.COL_KEY_GROUP:
            continue
        arrays.append(pa.array(cols[f.name], type=f.type))
    names = [f.name for f in schema if f.name != C.COL_KEY_GROUP]
    return pa.Table.from_arrays(arrays, names=names)


def state_to_arrow(
    desc: KeyedStateDescriptor,
    frozen: FrozenTable,
    *,
    delta: bool,
    now: int | None = None,
    drop_expired: bool = False,
) -> pa.Table:
    """Rows of a frozen state table: every entry (full) or the changed keys with tombstones (delta).

    The key_group column is left out (the writer computes it, Flink's assignment).
    """
    kind = desc.kind
    namespaced = desc.namespace_type is not None
    ttl_on = desc.ttl_enabled
    ttl_ms = desc.ttl.ttl_ms if ttl_on and desc.ttl else 0
    filt = drop_expired and ttl_on and now is not None
    pks: list[Any] = []
    values: list[Any] = []
    ttls: list[Any] = []
    uks: list[Any] = []
    tomb: list[bool] = []

    if kind == "map":
        if delta:
            for pk, uk in frozen.changed_keys():
                m = frozen.get(pk)
                e = None if m is None else m.get(uk, _ABSENT)
                pks.append(pk)
                uks.append(uk)
                if m is None or e is _ABSENT:
                    values.append(None)
                    ttls.append(None)
                    tomb.append(True)
                else:
                    if ttl_on:
                        values.append(e[0])
                        ttls.append(e[1])
                    else:
                        values.append(e)
                    tomb.append(False)
        else:
            for b in frozen.buckets:
                for pk, m in b.items():
                    for uk, e in m.items():
                        if ttl_on:
                            if filt and is_expired(e[1], ttl_ms, now):  # type: ignore[arg-type]
                                continue
                            values.append(e[0])
                            ttls.append(e[1])
                        else:
                            values.append(e)
                        pks.append(pk)
                        uks.append(uk)
    elif kind == "list":
        def emit(pk: Any, lst: list[Any]) -> bool:
            if ttl_on:
                if filt:
                    lst = [e for e in lst if not is_expired(e[1], ttl_ms, now)]  # type: ignore[arg-type]
                    if not lst:
                        return False
                values.append([e[0] for e in lst])
                ttls.append([e[1] for e in lst])
            else:
                values.append(lst)
            pks.append(pk)
            return True

        if delta:
            for pk in frozen.changed_keys():
                lst = frozen.get(pk)
                if lst is not None and emit(pk, lst):
                    tomb.append(False)
                else:
                    pks.append(pk)
                    values.append(None)
                    ttls.append(None)
                    tomb.append(True)
        else:
            for b in frozen.buckets:
                for pk, lst in b.items():
                    emit(pk, lst)
    else:
        if delta:
            for pk in frozen.changed_keys():
                v = frozen.get(pk)
                pks.append(pk)
                if v is None:
                    values.append(None)
                    ttls.append(None)
                    tomb.append(True)
                else:
                    if ttl_on:
                        values.append(v[0])
                        ttls.append(v[1])
                    else:
                        values.append(v)
                    tomb.append(False)
        elif ttl_on and filt:
            for b in frozen.buckets:
                for pk, (v, ts) in b.items():
                    if is_expired(ts, ttl_ms, now):  # type: ignore[arg-type]
                        continue
                    pks.append(pk)
                    values.append(v)
                    ttls.append(ts)
        elif ttl_on:
            pks = list(chain.from_iterable(b.keys() for b in frozen.buckets))
            pairs = list(chain.from_iterable(b.values() for b in frozen.buckets))
            if pairs:
                values, ttls = (list(x) for x in zip(*pairs))
        else:
            for b in frozen.buckets:
                pks.extend(b.keys())
                values.extend(b.values())
    keys, nss = _split_pk(pks, namespaced)
    cols: dict[str, list[Any]] = {C.COL_KEY: keys, C.COL_VALUE: values}
    if nss is not None:
        cols[C.COL_NAMESPACE] = nss
    if kind == "map":
        cols[C.COL_USER_KEY] = uks
    if ttl_on:
        cols[C.COL_TTL] = ttls
    if delta:
        cols[C.COL_TOMBSTONE] = tomb
    return _build(desc, delta, cols)


_ABSENT = object()


def timers_to_arrow(desc: TimerServiceDescriptor, frozen: FrozenTable, *, delta: bool) -> pa.Table:
    """Rows of a frozen timer table (key, [namespace], timestamp[, tombstone])."""
    keys: list[Any] = []
    nss: list[Any] = []
    tss: list[int] = []
    tomb: list[bool] = []
    if delta:
        for pk in frozen.changed_keys():
            keys.append(pk[0])
            nss.append(pk[1])
            tss.append(pk[2])
            tomb.append(frozen.get(pk) is None)
    else:
        pks = list(chain.from_iterable(b.keys() for b in frozen.buckets))
        if pks:
            keys, nss, tss = (list(x) for x in zip(*pks))
    schema = timer_schema(desc, delta=delta)
    cols = {C.COL_KEY: keys, C.COL_NAMESPACE: nss, C.COL_TIMESTAMP: tss, C.COL_TOMBSTONE: tomb}
    names = [f.name for f in schema if f.name != C.COL_KEY_GROUP]
    return pa.Table.from_arrays([pa.array(cols[n], type=schema.field(n).type) for n in names], names=names)


# ---------------------------------------------------------------------------------------- restore


def to_hashable(values: list[Any], t: pa.DataType) -> list[Any]:
    """Arrow struct values (dicts) become tuples, recursively, so they can be dict keys."""
    if pa.types.is_struct(t):
        fields = [(t.field(i).name, t.field(i).type) for i in range(t.num_fields)]
        conv = [(n, ft) for n, ft in fields]
        out = []
        for v in values:
            if v is None:
                out.append(None)
            else:
                out.append(tuple(_one(v[n], ft) for n, ft in conv))
        return out
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return [None if v is None else tuple(to_hashable(v, t.value_type)) for v in values]
    return values


def _one(v: Any, t: pa.DataType) -> Any:
    return to_hashable([v], t)[0]


_NUMPY_LISTABLE = (pa.types.is_string, pa.types.is_large_string, pa.types.is_binary, pa.types.is_large_binary)


def _col(table: pa.Table, name: str) -> list[Any]:
    """A column as Python values; through numpy where that gives the same values faster.

    Strings and binaries (nulls become None) and null-free integers and floats convert in C
    through numpy's ``tolist``; everything else (structs, lists, temporals) via ``to_pylist``.
    """
    col = table.column(name)
    t = col.type
    if any(f(t) for f in _NUMPY_LISTABLE) or (
        (pa.types.is_integer(t) or pa.types.is_floating(t)) and col.null_count == 0
    ):
        return col.to_numpy().tolist()
    return col.to_pylist()


def arrow_to_state_items(desc: KeyedStateDescriptor, table: pa.Table) -> tuple[list[Any], list[Any]]:
    """(primary keys, stored values) of a state table, in the backend's in-memory representation."""
    keys = to_hashable(_col(table, C.COL_KEY), desc.key_type)
    if desc.namespace_type is not None:
        nss = to_hashable(_col(table, C.COL_NAMESPACE), desc.namespace_type)
        pks: list[Any] = list(zip(keys, nss))
    else:
        pks = keys
    values = _col(table, C.COL_VALUE)
    ttl_on = desc.ttl_enabled
    ttls = _col(table, C.COL_TTL) if ttl_on else None
    if desc.kind == "map":
        uks = to_hashable(_col(table, C.COL_USER_KEY), desc.user_key_type)  # type: ignore[union-attr]
        entries = list(zip(values, ttls)) if ttls is not None else values
        maps: dict[Any, dict[Any, Any]] = {}
        for pk, uk, e in zip(pks, uks, entries):
            m = maps.get(pk)
            if m is None:
                maps[pk] = {uk: e}
            else:
                m[uk] = e
        return list(maps.keys()), list(maps.values())
    if desc.kind == "list":
        if ttls is not None:
            values = [list(zip(v, t)) if v else None for v, t in zip(values, ttls)]
        keep = [i for i, v in enumerate(values) if v]
        if len(keep) != len(values):
            pks = [pks[i] for i in keep]
            values = [values[i] for i in keep]
        return pks, values
    if ttls is not None:
        return pks, list(zip(values, ttls))
    return pks, values


def arrow_to_timer_keys(desc: TimerServiceDescriptor, table: pa.Table) -> list[Any]:
    """(key, namespace, timestamp) tuples of a timer table."""
    keys = to_hashable(_col(table, C.COL_KEY), desc.key_type)
    if desc.namespace_type is not None:
        nss = to_hashable(_col(table, C.COL_NAMESPACE), desc.namespace_type)
    else:
        nss = [None] * table.num_rows
    tss = _col(table, C.COL_TIMESTAMP)
    return list(zip(keys, nss, tss))
