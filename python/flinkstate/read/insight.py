"""State insight tables of a pinned checkpoint: where the bytes are, which keys are hot, when TTL state expires, how it grew.

Works on any `read.scan.Checkpoint` (a flinkstate root's or a Flink savepoint read in place) through its public
interface. Per key group, entries and bytes come from what the files tell without decoding a value
(`Checkpoint.key_group_figures`: a flinkstate file's `key_group` column and row groups, a canonical Flink file's
record framing and per-key-group offsets); where they do not (RocksDB, heap-native), the state's rows are decoded and
their Arrow size counted. The largest keys are found exactly while decoding as few key groups as possible: key groups
are read heaviest first, and reading stops once the N-th key's figure is at least the next key group's total (a key
lives in one key group, so no unread key can beat it). A key's bytes are its share of its key group's stored bytes,
by the Arrow size of its rows. Elements are a list's elements and a map's entries (a value state: its entries).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from flinkstate.core.errors import InvalidArgumentError
from flinkstate.core.keygroups import key_group_range, operator_index_for_key_group
from flinkstate.format import constants as C
from flinkstate.read.scan import Checkpoint

__all__ = ["BUCKETS", "CheckpointInsight", "HISTORY_SCHEMA", "KEY_GROUPS_SCHEMA", "SUBTASKS_SCHEMA", "TOP_KEYS_SCHEMA",
           "TTL_EXPIRY_SCHEMA", "history_table", "row_nbytes"]

_TS = pa.timestamp("ms", tz="UTC")
BUCKETS = {"hour": 3_600_000, "day": 86_400_000}
KEY_GROUPS_SCHEMA = pa.schema([("checkpoint_id", pa.int64()), ("operator", pa.string()), ("state", pa.string()),
                               ("state_kind", pa.string()), ("key_group", pa.int32()), ("subtask", pa.int32()),
                               ("entries", pa.int64()), ("bytes", pa.int64()), ("measured_from", pa.string())])
SUBTASKS_SCHEMA = pa.schema([("checkpoint_id", pa.int64()), ("operator", pa.string()), ("parallelism", pa.int32()),
                             ("subtask", pa.int32()), ("key_group_start", pa.int32()), ("key_group_end", pa.int32()),
                             ("entries", pa.int64()), ("bytes", pa.int64()), ("bytes_share", pa.float64())])
TOP_KEYS_SCHEMA = pa.schema([("checkpoint_id", pa.int64()), ("operator", pa.string()), ("state", pa.string()),
                             ("state_kind", pa.string()), ("ranked_by", pa.string()), ("rank", pa.int32()), ("key", pa.string()),
                             ("key_group", pa.int32()), ("entries", pa.int64()), ("elements", pa.int64()), ("bytes", pa.int64())])
TTL_EXPIRY_SCHEMA = pa.schema([("checkpoint_id", pa.int64()), ("operator", pa.string()), ("state", pa.string()),
                               ("bucket", pa.string()), ("offset", pa.int64()), ("bucket_start", _TS), ("entries", pa.int64())])
HISTORY_SCHEMA = pa.schema([("checkpoint_id", pa.int64()), ("created_at", _TS), ("operator", pa.string()), ("state", pa.string()),
                            ("state_kind", pa.string()), ("files", pa.int64()), ("rows", pa.int64()), ("bytes", pa.int64())])
_BATCH = 16  # key groups decoded per step of the top-keys search


def _sizes(arr: pa.Array) -> np.ndarray:
    """Per row of arr, the bytes its values take in Arrow (offsets and nested children counted; nulls 0)."""
    n = len(arr)
    t = arr.type
    if n == 0:
        return np.zeros(0, np.float64)
    if pa.types.is_dictionary(t):
        return _sizes(arr.dictionary_decode())
    if pa.types.is_null(t):
        return np.zeros(n, np.float64)
    valid = np.asarray(pc.is_valid(arr).to_numpy(zero_copy_only=False), np.float64)
    if pa.types.is_binary(t) or pa.types.is_string(t) or pa.types.is_large_binary(t) or pa.types.is_large_string(t):
        offset = 8 if pa.types.is_large_binary(t) or pa.types.is_large_string(t) else 4
        return np.asarray(pc.fill_null(pc.binary_length(arr), 0).to_numpy(zero_copy_only=False), np.float64) + offset * valid
    if pa.types.is_map(t):
        inner = pa.ListArray.from_arrays(arr.offsets, pa.StructArray.from_arrays([arr.keys, arr.items], ["key", "value"]))
        return _sizes(inner) * valid
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        flat = pc.list_flatten(arr)
        parents = np.asarray(pc.list_parent_indices(arr).to_numpy(zero_copy_only=False), np.int64)
        return np.bincount(parents, weights=_sizes(flat), minlength=n)[:n] + 4 * valid
    if pa.types.is_struct(t):
        out = np.zeros(n, np.float64)
        for child in arr.flatten():
            out += _sizes(child)
        return out * valid
    try:
        return np.full(n, t.bit_width / 8) * valid
    except ValueError:  # a type without a fixed width not handled above: its buffers shared evenly
        return np.full(n, arr.nbytes / n)


def row_nbytes(table: pa.Table) -> np.ndarray:
    """The Arrow bytes of each row of table (every column's values, offsets and nested children)."""
    out = np.zeros(table.num_rows, np.float64)
    for col in table.columns:
        out += _sizes(col.combine_chunks())
    return out


def _key_text(key: pa.ChunkedArray) -> pa.Array:
    """Keys as text (a struct or tuple key as its Python form), to group by and to show."""
    arr = key.combine_chunks()
    if pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type):
        return arr.cast(pa.string())
    try:
        return arr.cast(pa.string())
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid):
        return pa.array([str(v) for v in arr.to_pylist()], pa.string())


def _per_key(rows: pa.Table, kind: str) -> pa.Table:
    """Decoded stored rows -> per key: key_group, key (text), entries, elements, arrow (bytes of its rows in Arrow)."""
    if kind == "list":
        elements = pc.fill_null(pc.list_value_length(rows.column(C.COL_VALUE)), 0).cast(pa.int64())
    else:
        elements = pa.array(np.ones(rows.num_rows, np.int64))
    t = pa.table({"key_group": rows.column(C.COL_KEY_GROUP).cast(pa.int32()), "key": _key_text(rows.column(C.COL_KEY)),
                  "elements": elements, "arrow": pa.array(row_nbytes(rows))})
    g = t.group_by(["key_group", "key"]).aggregate([("elements", "count"), ("elements", "sum"), ("arrow", "sum")])
    return pa.table({"key_group": g.column("key_group"), "key": g.column("key"), "entries": g.column("elements_count"),
                     "elements": g.column("elements_sum"), "arrow": g.column("arrow_sum")})


@dataclass
class _StateKeys:
    """What is known of one keyed state while its largest keys are searched: per key group figures and decoded keys."""

    kind: str
    figures: pa.Table  # key_group, entries, bytes[, elements]
    measured_from: str  # "files" (no value decoded) or "decoded"
    keys: dict[int, pa.Table] = field(default_factory=dict)  # key group -> _per_key rows


@dataclass
class CheckpointInsight:
    """Insight tables of one pinned checkpoint (a flinkstate root's or a Flink savepoint's).

    `key_groups()`, `subtasks(operator, parallelism)`, `top_keys(n)`, `ttl_expiry(bucket)`; `history_table` takes
    several checkpoints. States whose values cannot be read (a Kryo state without raw values) are left out of the
    decoded figures and listed in `skipped`.
    """

    checkpoint: Checkpoint
    skipped: dict[str, str] = field(default_factory=dict)  # "operator/state" -> why
    _states: dict[tuple[str, str], _StateKeys] = field(default_factory=dict, repr=False)

    def _keyed(self, operator: str | None) -> list[tuple[str, str, str]]:
        ck = self.checkpoint
        if operator is not None:
            ck.operator(operator)  # OperatorNotFoundError lists the operators
        ops = sorted(ck.operators) if operator is None else [ck.name_of(operator)]
        return [(uid, name, d.kind) for uid in ops for name, d in sorted(ck.operator(uid).keyed_states.items())]

    def _decode(self, uid: str, state: str, kind: str, key_groups: list[int] | None) -> dict[int, pa.Table]:
        """Decode the stored rows of these key groups (None: all) into per-key rows, by key group."""
        scan = self.checkpoint.scan(uid, state, key_groups=key_groups, raw=True)
        out: dict[int, pa.Table] = {k: None for k in key_groups or ()}  # type: ignore[misc]
        for task in scan.plan():
            rows = task.to_arrow()
            if rows.num_rows == 0:
                continue
            per = _per_key(rows, kind)
            for kg in pc.unique(per.column("key_group")).to_pylist():
                out[kg] = per.filter(pc.equal(per.column("key_group"), kg))
        empty = _per_key(pa.schema(scan.schema).empty_table(), kind) if None in out.values() else None
        return {k: (empty if v is None else v) for k, v in out.items()}

    def _state(self, uid: str, state: str, kind: str) -> _StateKeys | None:
        """The state's key-group figures (from its files, else decoded), None when its values cannot be read."""
        if (uid, state) in self._states:
            return self._states[(uid, state)]
        try:
            figures = self.checkpoint.key_group_figures(uid, state)
            if figures is not None:
                st = _StateKeys(kind, figures, "files")
            else:
                keys = self._decode(uid, state, kind, None)
                per = pa.concat_tables(keys.values()) if keys else _per_key(pa.table({C.COL_KEY_GROUP: pa.array([], pa.int32()),
                                                                                        C.COL_KEY: pa.array([], pa.string()),
                                                                                        C.COL_VALUE: pa.array([], pa.int64())}), "value")
                g = per.group_by("key_group").aggregate([("entries", "sum"), ("elements", "sum"), ("arrow", "sum")])
                figures = pa.table({"key_group": g.column("key_group"), "entries": g.column("entries_sum"),
                                    "bytes": pc.cast(pc.round(g.column("arrow_sum")), pa.int64()), "elements": g.column("elements_sum")})
                st = _StateKeys(kind, figures, "decoded", keys)
        except NotImplementedError as e:  # UnsupportedSerializerError: a state whose values this read cannot decode
            self.skipped[f"{uid}/{state}"] = str(e)
            return None
        self._states[(uid, state)] = st
        return st

    # ------------------------------------------------------------------------------------------ per key group
    def key_groups(self, operator: str | None = None) -> pa.Table:
        """One row per keyed state and key group with entries: entries, bytes and the subtask holding it at the
        operator's parallelism (NULL when the checkpoint does not record it)."""
        ck = self.checkpoint
        parts = []
        for uid, state, kind in self._keyed(operator):
            st = self._state(uid, state, kind)
            if st is None or st.figures.num_rows == 0:
                continue
            f = st.figures.sort_by("key_group")
            kgs = f.column("key_group").to_pylist()
            p, maxp = ck.operator(uid).parallelism, ck.max_parallelism_of(uid)
            subtask = [operator_index_for_key_group(maxp, p, k) for k in kgs] if p else [None] * len(kgs)
            n = f.num_rows
            parts.append(pa.table({"checkpoint_id": pa.array([ck.checkpoint_id] * n, pa.int64()), "operator": [uid] * n,
                                   "state": [state] * n, "state_kind": [kind] * n, "key_group": f.column("key_group").cast(pa.int32()),
                                   "subtask": pa.array(subtask, pa.int32()), "entries": f.column("entries").cast(pa.int64()),
                                   "bytes": f.column("bytes").cast(pa.int64()), "measured_from": [st.measured_from] * n},
                                  schema=KEY_GROUPS_SCHEMA))
        return pa.concat_tables(parts) if parts else KEY_GROUPS_SCHEMA.empty_table()

    def subtasks(self, operator: str, parallelism: int | None = None) -> pa.Table:
        """What each subtask would hold at `parallelism` (default the operator's): its key-group range (Flink's
        KeyGroupRangeAssignment) and the entries and bytes of every keyed state in it."""
        ck = self.checkpoint
        uid = operator if operator in ck.operators else ck.name_of(operator)
        maxp = ck.max_parallelism_of(uid)
        p = parallelism or ck.operator(uid).parallelism
        if not p or not 1 <= p <= maxp:
            raise InvalidArgumentError(f"parallelism {p!r} of operator {operator!r}: give one from 1 to its max parallelism {maxp}")
        kg = self.key_groups(uid)
        entries = np.zeros(maxp, np.int64)
        nbytes = np.zeros(maxp, np.int64)
        np.add.at(entries, np.asarray(kg.column("key_group").to_numpy(), np.int64), kg.column("entries").to_numpy())
        np.add.at(nbytes, np.asarray(kg.column("key_group").to_numpy(), np.int64), kg.column("bytes").to_numpy())
        total = max(int(nbytes.sum()), 1)
        rows = []
        for i in range(p):
            lo, hi = key_group_range(maxp, p, i)
            b = int(nbytes[lo : hi + 1].sum())
            rows.append({"checkpoint_id": ck.checkpoint_id, "operator": uid, "parallelism": p, "subtask": i, "key_group_start": lo,
                         "key_group_end": hi, "entries": int(entries[lo : hi + 1].sum()), "bytes": b, "bytes_share": b / total})
        return pa.Table.from_pylist(rows, schema=SUBTASKS_SCHEMA)

    # ------------------------------------------------------------------------------------------ largest keys
    def _bounds(self, st: _StateKeys, by: str) -> dict[int, float]:
        """Per key group, the most any one key in it can have of `by` (bytes or elements); inf where unknown."""
        f = st.figures
        kgs = f.column("key_group").to_pylist()
        if by == "bytes":
            vals = f.column("bytes").to_pylist()
        elif "elements" in f.column_names:
            vals = f.column("elements").to_pylist()
        elif st.kind != "list":
            vals = f.column("entries").to_pylist()  # a map's entries, a value state's (namespaced) entries
        else:
            vals = [float("inf")] * len(kgs)  # a list's elements are not told by its files: decode them
        return dict(zip(kgs, vals))

    def _scored(self, st: _StateKeys) -> pa.Table:
        """Every decoded key with its share of its key group's stored bytes."""
        parts = [t for t in st.keys.values() if t.num_rows]
        if not parts:
            return pa.table({"key_group": pa.array([], pa.int32()), "key": pa.array([], pa.string()), "entries": pa.array([], pa.int64()),
                             "elements": pa.array([], pa.int64()), "bytes": pa.array([], pa.int64())})
        t = pa.concat_tables(parts)
        stored = dict(zip(st.figures.column("key_group").to_pylist(), st.figures.column("bytes").to_pylist()))
        kg = t.column("key_group").to_numpy()
        arrow = t.column("arrow").to_numpy()
        total = np.zeros(int(kg.max()) + 1)
        np.add.at(total, kg, arrow)
        share = np.array([stored.get(int(k), 0) for k in kg], np.float64) * arrow / np.maximum(total[kg], 1e-9)
        return t.drop_columns(["arrow"]).append_column("bytes", pa.array(np.round(share).astype(np.int64)))

    def _search(self, uid: str, state: str, st: _StateKeys, by: str, n: int) -> pa.Table:
        """The n keys with the most `by`, decoding key groups heaviest first until no unread one can hold a larger key."""
        bounds = self._bounds(st, by)
        order = sorted(bounds, key=lambda k: (-bounds[k], k))
        i = 0
        while i < len(order):
            scored = self._scored(st)
            vals = sorted(scored.column(by).to_pylist(), reverse=True)
            if len(vals) >= n and bounds[order[i]] <= vals[n - 1]:
                break
            batch = [k for k in order[i : i + _BATCH] if k not in st.keys]
            if batch:
                st.keys.update(self._decode(uid, state, st.kind, batch))
            i += _BATCH
        scored = self._scored(st)
        return scored.sort_by([(by, "descending"), ("key", "ascending")]).slice(0, n)

    def top_keys(self, n: int = 10, operator: str | None = None) -> pa.Table:
        """Per keyed state, the n largest keys by bytes and, for list and map states, by elements (ranked_by says which)."""
        if n < 1:
            raise InvalidArgumentError(f"top keys: n must be at least 1, got {n}")
        ck = self.checkpoint
        parts = []
        for uid, state, kind in self._keyed(operator):
            st = self._state(uid, state, kind)
            if st is None:
                continue
            for by in ("bytes", "elements") if kind in ("list", "map") else ("bytes",):
                t = self._search(uid, state, st, by, n)
                m = t.num_rows
                parts.append(pa.table({"checkpoint_id": pa.array([ck.checkpoint_id] * m, pa.int64()), "operator": [uid] * m,
                                       "state": [state] * m, "state_kind": [kind] * m, "ranked_by": [by] * m,
                                       "rank": pa.array(range(1, m + 1), pa.int32()), "key": t.column("key"),
                                       "key_group": t.column("key_group").cast(pa.int32()), "entries": t.column("entries").cast(pa.int64()),
                                       "elements": t.column("elements").cast(pa.int64()), "bytes": t.column("bytes")}, schema=TOP_KEYS_SCHEMA))
        return pa.concat_tables(parts) if parts else TOP_KEYS_SCHEMA.empty_table()

    # ------------------------------------------------------------------------------------------ TTL
    def ttl_expiry(self, bucket: str = "hour", operator: str | None = None) -> pa.Table:
        """Per TTL state, entries (list elements) expiring in each hour or day after the checkpoint's time (offset 0:
        the first; negative: already expired then). A Flink savepoint's state whose TTL duration it does not hold
        (and none was given) is left out."""
        if bucket not in BUCKETS:
            raise InvalidArgumentError(f"TTL expiry bucket {bucket!r}: choose one of {sorted(BUCKETS)}")
        ck = self.checkpoint
        width = BUCKETS[bucket]
        created = ck.created_at_ms
        parts = []
        for uid, state, _ in self._keyed(operator):
            desc = ck.state_descriptor(uid, state)
            if not desc.ttl_enabled or desc.ttl is None:
                continue
            ts = self._ttl_timestamps(uid, state)
            if ts is None or len(ts) == 0:
                continue
            expiry = np.asarray(ts.to_numpy(zero_copy_only=False), np.int64) + int(desc.ttl.ttl_ms)
            offsets, counts = np.unique(np.floor_divide(expiry - created, width), return_counts=True)
            m = len(offsets)
            parts.append(pa.table({"checkpoint_id": pa.array([ck.checkpoint_id] * m, pa.int64()), "operator": [uid] * m,
                                   "state": [state] * m, "bucket": [bucket] * m, "offset": pa.array(offsets, pa.int64()),
                                   "bucket_start": pa.array(created + offsets * width, pa.int64()).cast(_TS),
                                   "entries": pa.array(counts, pa.int64())}, schema=TTL_EXPIRY_SCHEMA))
        return pa.concat_tables(parts) if parts else TTL_EXPIRY_SCHEMA.empty_table()

    def _ttl_timestamps(self, uid: str, state: str) -> pa.Array | None:
        """Last-access times from the files where they tell them apart, else from the decoded rows."""
        ts = self.checkpoint.ttl_timestamps(uid, state)
        if ts is not None:
            return ts
        try:
            rows = self.checkpoint.scan(uid, state, raw=True).to_arrow()
        except NotImplementedError as e:
            self.skipped[f"{uid}/{state}"] = str(e)
            return None
        if C.COL_TTL not in rows.column_names:
            return None
        col = rows.column(C.COL_TTL).combine_chunks()
        if pa.types.is_list(col.type) or pa.types.is_large_list(col.type):
            col = pc.list_flatten(col)
        return pc.drop_null(col)


def history_table(checkpoints: Iterable[Checkpoint]) -> pa.Table:
    """Size per checkpoint, operator and state over a root's history (each checkpoint's `inspect.states()`: the
    manifest's figures, no data file opened; a Flink savepoint's from its handles)."""
    parts = []
    for ck in checkpoints:
        s = ck.inspect.states()  # type: ignore[attr-defined]
        n = s.num_rows
        created = dt.datetime.fromtimestamp(ck.created_at_ms / 1000, dt.timezone.utc)
        parts.append(pa.table({"checkpoint_id": s.column("checkpoint_id"), "created_at": pa.array([created] * n, _TS),
                               "operator": s.column("operator"), "state": s.column("state"), "state_kind": s.column("state_kind"),
                               "files": s.column("files"), "rows": s.column("rows"), "bytes": s.column("bytes")}, schema=HISTORY_SCHEMA))
    return pa.concat_tables(parts) if parts else HISTORY_SCHEMA.empty_table()
