"""Reading checkpoints: partitions by key-group range, filter pushdown, Arrow batches out.

The driver plans (`FlinkStateReader.__init__`, `pushFilters`, `partitions`); executors run
`read(partition)`, which merges the newest full file and later deltas of its key-group
range with flinkstate's merge, applies TTL visibility and flattening, and yields
`pyarrow.RecordBatch`es cast to the schema Spark expects. Partitions carry only picklable
things: key-group ranges and manifest entries.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSourceReader, InputPartition

from flinkstate.format import constants as C
from flinkstate.format.datafile import FileEntry
from flinkstate.format.merge import overlaps
from flinkstate.ttl import expiry_timestamps

from pyspark_flinkstate.resolve import Resolved

__all__ = ["FlinkStateReader", "FlinkStatePushdownReader", "StatePartition", "plan_ranges", "read_metrics"]

TARGET_ROWS_PER_PARTITION = 1_000_000
MAX_EXPIRY_MS = 253402300799999  # 9999-12-31T23:59:59.999Z: expiry shown as a timestamp saturates here
BATCH_ROWS = 131072

# files opened by read() in this process (tests and the bench look at it)
_METRICS = {"files_opened": 0, "partitions_read": 0}


def read_metrics(reset: bool = False) -> dict[str, int]:
    """Counters of this process's reads (files opened, partitions read)."""
    out = dict(_METRICS)
    if reset:
        for k in _METRICS:
            _METRICS[k] = 0
    return out


@dataclass
class StatePartition(InputPartition):
    """One task: a key-group range, the files overlapping it, and pushed key groups."""

    key_group_start: int
    key_group_end: int
    entries: list[FileEntry]
    key_groups: list[int] | None = None  # None: every key group in the range
    old_entries: list[FileEntry] | None = None  # changes: the from-checkpoint files
    whole: bool = False  # changes across a max-parallelism change: no range restriction

    def __init__(self, key_group_start: int, key_group_end: int, entries: list[FileEntry], key_groups: list[int] | None = None,
                 old_entries: list[FileEntry] | None = None, whole: bool = False) -> None:
        super().__init__((key_group_start, key_group_end))
        self.key_group_start = key_group_start
        self.key_group_end = key_group_end
        self.entries = entries
        self.key_groups = key_groups
        self.old_entries = old_entries
        self.whole = whole


def _elementary(entries: Sequence[FileEntry], lo: int, hi: int) -> list[tuple[int, int]]:
    """[lo, hi] cut at the starts of the full files (of the deltas when there is no full file)."""
    base = [e for e in entries if e.kind not in C.DELTA_KINDS] or list(entries)
    cuts = sorted({e.key_group_start for e in base if lo < e.key_group_start <= hi} | {lo})
    return [(cuts[i], (cuts[i + 1] - 1) if i + 1 < len(cuts) else hi) for i in range(len(cuts))]


def _estimate(entries: Sequence[FileEntry], lo: int, hi: int) -> int:
    r = 0
    for e in entries:
        if overlaps(e, lo, hi):
            span = e.key_group_end - e.key_group_start + 1
            r += e.rows * (min(hi, e.key_group_end) - max(lo, e.key_group_start) + 1) // max(1, span)
    return r


def plan_ranges(entries: Sequence[FileEntry], max_parallelism: int, allowed: set[int] | None = None,
                target_rows: int = TARGET_ROWS_PER_PARTITION) -> list[tuple[int, int]]:
    """Key-group ranges of the read's partitions.

    The ranges of the full files (of the deltas when there is no full file); a range holding
    more than `target_rows` is split into Flink's sub-ranges, small adjacent ones are
    combined up to `target_rows`; with pushed key groups, only ranges holding them remain,
    tightened to them.
    """
    if not entries:
        return []
    from flinkstate.keygroups import key_group_range

    pieces: list[tuple[int, int, int]] = []
    for lo, hi in _elementary(entries, 0, max_parallelism - 1):
        r = _estimate(entries, lo, hi)
        width = hi - lo + 1
        k = min(width, max(1, -(-r // max(1, target_rows))))
        for i in range(k):
            a, b = key_group_range(width, k, i)
            pieces.append((lo + a, lo + b, r // k))
    out: list[tuple[int, int]] = []
    cur: list[int] | None = None
    acc = 0
    for lo, hi, r in pieces:
        if allowed is not None:
            inside = [kg for kg in allowed if lo <= kg <= hi]
            if not inside:
                continue
            out.append((min(inside), max(inside)))
            continue
        if cur is not None and acc + r <= target_rows:
            cur[1] = hi
            acc += r
        else:
            if cur is not None:
                out.append((cur[0], cur[1]))
            cur, acc = [lo, hi], r
    if cur is not None:
        out.append((cur[0], cur[1]))
    return out


# ------------------------------------------------------------------ filters
def _col(f: Any) -> str | None:
    attr = getattr(f, "attribute", None)
    if isinstance(attr, tuple) and len(attr) == 1:
        return str(attr[0])
    return None


_HASHABLE_KEY = (pa.types.is_integer, pa.types.is_string, pa.types.is_large_string, pa.types.is_boolean, pa.types.is_floating)


class FlinkStateReader(DataSourceReader):
    """Reads one table of a checkpoint (no filter pushdown: used when Spark has it off)."""

    def __init__(self, res: Resolved, schema: Any) -> None:
        self.res = res
        self.schema = schema
        self.key_values: list[Any] | None = None  # pushed equality / IN on key
        self.key_groups: set[int] | None = None  # pushed key_group predicates and key groups of pushed keys
        self.ts_filters: list[tuple[str, int]] = []  # timers: (op, value) on timestamp
        self._target: pa.Schema | None = None

    # ---------------------------------------------------------------- planning
    def partitions(self) -> list[InputPartition]:
        res = self.res
        t = res.opts.table
        if t in ("checkpoints", "files", "states", "operatorState"):
            return [StatePartition(0, 0, list(res.entries))]
        if t == "changes":
            return self._changes_partitions()
        allowed = self.key_groups
        ranges = plan_ranges(res.entries, res.max_parallelism, allowed)
        parts = []
        for lo, hi in ranges:
            files = [e for e in res.entries if overlaps(e, lo, hi)]
            kgs = None if allowed is None else sorted(k for k in allowed if lo <= k <= hi)
            parts.append(StatePartition(lo, hi, files, kgs))
        return parts  # type: ignore[return-value]

    def _changes_partitions(self) -> list[InputPartition]:
        from flinkstate.changes import changed_key_group_ranges

        res = self.res
        new, old = res.entries, res.from_entries
        if res.max_parallelism != res.from_max_parallelism or old is None or not res.state_in_to:
            return [StatePartition(0, res.max_parallelism - 1, list(new), None, old, whole=True)]
        ranges = plan_ranges(list(new) + list(old), res.max_parallelism)
        parts = []
        for lo, hi in changed_key_group_ranges(old, new, ranges):
            parts.append(StatePartition(lo, hi, [e for e in new if overlaps(e, lo, hi)], None, [e for e in old if overlaps(e, lo, hi)]))
        return parts  # type: ignore[return-value]

    # ---------------------------------------------------------------- executors
    def _target_schema(self) -> pa.Schema:
        if self._target is None:
            from pyspark_flinkstate.schema import arrow_schema_for

            self._target = arrow_schema_for(self.schema)
        return self._target

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        from pyspark_flinkstate.schema import to_spark_arrow
        from pyspark_flinkstate.worker_noise import quiet_closed_pipes

        quiet_closed_pipes()  # a limit that stops reading early must not print PySpark's BrokenPipe traceback

        if not isinstance(partition, StatePartition):
            return iter(())  # nothing to read: Spark substitutes one empty partition
        _METRICS["partitions_read"] += 1
        table = self._read_table(partition)
        if table is None or table.num_rows == 0:
            return iter(())
        out = to_spark_arrow(table, self._target_schema())
        return iter(out.to_batches(max_chunksize=BATCH_ROWS))

    def _read_table(self, p: StatePartition) -> pa.Table | None:
        t = self.res.opts.table
        if t == "checkpoints":
            from pyspark_flinkstate.metadata import checkpoints_table

            return checkpoints_table(self.res)
        if t == "files":
            from pyspark_flinkstate.metadata import files_table

            return files_table(self.res)
        if t == "states":
            from pyspark_flinkstate.metadata import states_table

            return states_table(self.res)
        if t == "operatorState":
            from flinkstate.format.datafile import read_data_file

            tables = [read_data_file(self.res.io, e) for e in p.entries]
            _METRICS["files_opened"] += len(tables)
            return pa.concat_tables(tables) if tables else None
        if t == "timers":
            return self._read_timers(p)
        if t == "changes":
            return self._read_changes(p)
        return self._read_state(p)

    def _row_filter(self) -> Any:
        import pyarrow.dataset as ds

        expr = None
        if self.key_values is not None:
            expr = ds.field(C.COL_KEY).isin(self.key_values)
        return expr

    def _kg_filter(self, p: StatePartition, expr: Any) -> Any:
        import pyarrow.dataset as ds

        if p.key_groups is None:
            return expr
        if p.key_groups == list(range(p.key_group_start, p.key_group_end + 1)):
            return expr  # read_view restricts to the range already
        e = ds.field(C.COL_KEY_GROUP).isin(p.key_groups)
        return e if expr is None else expr & e

    def _view(self, p: StatePartition, pk: list[str], filter: Any, descriptor: Any = None) -> pa.Table | None:
        """Merge per range of one full file: full files of disjoint ranges need no de-duplication."""
        from flinkstate.format.merge import read_view

        files = [e for e in p.entries if overlaps(e, p.key_group_start, p.key_group_end)]
        _METRICS["files_opened"] += len(files)
        parts = []
        for lo, hi in _elementary(files, p.key_group_start, p.key_group_end):
            if p.key_groups is not None and not any(lo <= k <= hi for k in p.key_groups):
                continue
            sub = [e for e in files if overlaps(e, lo, hi)]
            v = read_view(self.res.io, sub, pk, self.res.max_parallelism, key_group_range=(lo, hi), filter=filter, descriptor=descriptor)
            if v is not None and v.num_rows:
                parts.append(v)
        if not parts:
            return None
        return parts[0] if len(parts) == 1 else pa.concat_tables(parts)

    def _read_state(self, p: StatePartition) -> pa.Table | None:
        from flinkstate.format.datafile import primary_key_columns

        desc = self.res.descriptor()
        view = self._view(p, primary_key_columns(desc), self._kg_filter(p, self._row_filter()), desc)
        if view is None or view.num_rows == 0:
            return None
        return shape_state(view, desc, self.res.opts, self._reference_ms())

    def _reference_ms(self) -> int:
        ref = self.res.opts.ttl_reference_ms
        return self.res.created_at_ms if ref is None else ref

    def _read_timers(self, p: StatePartition) -> pa.Table | None:
        import pyarrow.dataset as ds

        from flinkstate.descriptors import TimerServiceDescriptor
        from flinkstate.format.datafile import primary_key_columns
        from flinkstate.format.merge import read_view

        expr = self._kg_filter(p, self._row_filter())
        for op, v in self.ts_filters:
            f = ds.field(C.COL_TIMESTAMP)
            e = {"gt": f > v, "ge": f >= v, "lt": f < v, "le": f <= v, "eq": f == v}[op]
            expr = e if expr is None else expr & e
        parts = []
        for sd in self.res.timer_services:
            s = TimerServiceDescriptor.from_dict(sd)
            files = [e for e in p.entries if e.state == s.name and overlaps(e, p.key_group_start, p.key_group_end)]
            if not files:
                continue
            _METRICS["files_opened"] += len(files)
            v = read_view(self.res.io, files, primary_key_columns(s), self.res.max_parallelism,
                          key_group_range=(p.key_group_start, p.key_group_end), filter=expr, descriptor=s)
            if v is None or v.num_rows == 0:
                continue
            n = v.num_rows
            v = v.append_column("domain", pa.array([s.domain] * n, pa.string()))
            v = v.append_column("timer_service", pa.array([s.name] * n, pa.string()))
            parts.append(v)
        if not parts:
            return None
        return pa.concat_tables(parts, promote_options="permissive")

    def _read_changes(self, p: StatePartition) -> pa.Table | None:
        from flinkstate.changes import diff_state

        res = self.res
        desc = res.descriptor()
        rng = None if p.whole else (p.key_group_start, p.key_group_end)
        _METRICS["files_opened"] += len(p.entries) + len(p.old_entries or [])
        out = diff_state(res.io, desc, p.old_entries, p.entries if res.state_in_to else None, res.from_max_parallelism,
                         res.max_parallelism, rng)
        if out.num_rows == 0:
            return None
        out = shape_state(out, desc, res.opts, 0, changes=True)
        return out.add_column(0, "checkpoint_id", pa.array(np.full(out.num_rows, res.checkpoint_id, dtype=np.int64)))


class FlinkStatePushdownReader(FlinkStateReader):
    """The reader when Spark pushes filters: key, key_group and timer timestamp predicates."""

    def pushFilters(self, filters: list[Any]) -> Iterator[Any]:
        from pyspark.sql.datasource import EqualTo, GreaterThan, GreaterThanOrEqual, In, LessThan, LessThanOrEqual

        from flinkstate.keygroups import assign_key_group

        res = self.res
        table = res.opts.table
        if table not in ("state", "timers"):
            yield from filters
            return
        mp = res.max_parallelism
        if table == "state":
            key_type = res.descriptor().key_type
        else:
            from flinkstate.descriptors import TimerServiceDescriptor

            key_type = TimerServiceDescriptor.from_dict(res.timer_services[0]).key_type
        hashable = any(f(key_type) for f in _HASHABLE_KEY)
        allowed: set[int] | None = None
        for f in filters:
            col = _col(f)
            if col == "key" and hashable and isinstance(f, (EqualTo, In)):
                vals = list(f.value) if isinstance(f, In) else [f.value]
                if any(v is None for v in vals):
                    yield f
                    continue
                try:
                    kgs = {assign_key_group(v, mp, key_type=key_type) for v in vals}
                    pa.array(vals, type=key_type)
                except (ValueError, TypeError, OverflowError, pa.ArrowException):
                    yield f
                    continue
                allowed = kgs if allowed is None else allowed & kgs
                self.key_values = vals if self.key_values is None else [v for v in self.key_values if v in set(vals)]
                continue
            if col == "key_group" and isinstance(f, (EqualTo, In, GreaterThan, GreaterThanOrEqual, LessThan, LessThanOrEqual)):
                vals = list(f.value) if isinstance(f, In) else [f.value]
                if not all(isinstance(v, int) and not isinstance(v, bool) for v in vals):
                    yield f
                    continue
                if isinstance(f, (EqualTo, In)):
                    kgs = {v for v in vals if 0 <= v < mp}
                else:
                    v = vals[0]
                    lo, hi = 0, mp - 1
                    if isinstance(f, GreaterThan):
                        lo = v + 1
                    elif isinstance(f, GreaterThanOrEqual):
                        lo = v
                    elif isinstance(f, LessThan):
                        hi = v - 1
                    else:
                        hi = v
                    kgs = set(range(max(0, lo), min(mp - 1, hi) + 1))
                allowed = kgs if allowed is None else allowed & kgs
                continue
            if table == "timers" and col == "timestamp" and isinstance(f, (EqualTo, GreaterThan, GreaterThanOrEqual, LessThan, LessThanOrEqual)) \
                    and isinstance(f.value, int) and not isinstance(f.value, bool):
                op = {EqualTo: "eq", GreaterThan: "gt", GreaterThanOrEqual: "ge", LessThan: "lt", LessThanOrEqual: "le"}[type(f)]
                self.ts_filters.append((op, int(f.value)))
                continue
            yield f
        if allowed is not None:
            self.key_groups = allowed


# ------------------------------------------------------------------ shaping


def _ts(ms: np.ndarray) -> pa.Array:
    return pa.array(np.minimum(ms, MAX_EXPIRY_MS), type=pa.int64()).cast(pa.timestamp("ms", tz="UTC"))


def shape_state(view: pa.Table, desc: Any, opts: Any, reference_ms: int, *, changes: bool = False) -> pa.Table:
    """Storage rows of a keyed state to the rows a read returns (TTL visibility, flattening)."""
    ttl_ms = desc.ttl.ttl_ms if desc.ttl_enabled else None
    flatten = opts.flatten and not changes
    include_expired = opts.include_expired or changes
    kind = desc.kind
    if kind == "list":
        return _shape_list(view, ttl_ms, flatten, include_expired, reference_ms, changes)
    if ttl_ms is not None:
        exp = expiry_timestamps(view.column(C.COL_TTL), ttl_ms)
        expired = exp <= reference_ms
        view = view.drop_columns([C.COL_TTL]).append_column("ttl_expires_at", _ts(exp))
        if include_expired:
            if not changes:
                view = view.append_column("expired", pa.array(expired))
        elif expired.any():
            view = view.filter(pa.array(~expired))
    if kind == "map" and not flatten:
        view = _group_map(view, ttl_ms is not None, include_expired and not changes)
    return view


def _shape_list(view: pa.Table, ttl_ms: int | None, flatten: bool, include_expired: bool, reference_ms: int, changes: bool) -> pa.Table:
    values = view.column(C.COL_VALUE).combine_chunks()
    if ttl_ms is not None:
        ttl_lists = view.column(C.COL_TTL).combine_chunks()
        flat_ttl = pc.list_flatten(ttl_lists)
        exp = expiry_timestamps(flat_ttl, ttl_ms)
        expired = exp <= reference_ms
    parents = pc.list_parent_indices(values).to_numpy(zero_copy_only=False)
    flat_values = pc.list_flatten(values)
    if ttl_ms is not None and len(flat_ttl) != len(flat_values):
        from flinkstate.errors import CorruptFileError

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
            out = out.append_column("ttl_expires_at", _ts(exp[idx]))
            if include_expired and not changes:
                out = out.append_column("expired", pa.array(expired[idx]))
        return out
    # one row per key: drop expired elements, and keys left empty
    if keep.all():
        out = base.append_column(C.COL_VALUE, values)
        if ttl_ms is not None:
            out = out.append_column("ttl_expires_at", pa.ListArray.from_arrays(values.offsets, _ts(exp)))
        return out
    idx = np.nonzero(keep)[0]
    kept_parents = parents[idx]
    counts = np.bincount(kept_parents, minlength=view.num_rows)
    rows = np.nonzero(counts)[0]
    offsets = np.concatenate([[0], np.cumsum(counts[rows])]).astype(np.int32)
    out = base.take(pa.array(rows))
    out = out.append_column(C.COL_VALUE, pa.ListArray.from_arrays(pa.array(offsets), flat_values.take(pa.array(idx))))
    if ttl_ms is not None:
        out = out.append_column("ttl_expires_at", pa.ListArray.from_arrays(pa.array(offsets), _ts(exp[idx])))
    return out


def _group_map(view: pa.Table, has_ttl: bool, with_expired: bool) -> pa.Table:
    """Map state, one row per key (and namespace): value becomes map<user_key, value>."""
    from flinkstate.format.merge import group_rows

    group_cols = [C.COL_KEY] + ([C.COL_NAMESPACE] if C.COL_NAMESPACE in view.column_names else [])
    firsts, order, offsets = group_rows(view, group_cols)
    base_cols = group_cols + [C.COL_KEY_GROUP]
    out = view.select(base_cols).take(firsts)
    uk = view.column(C.COL_USER_KEY).take(order).combine_chunks()
    uv = view.column(C.COL_VALUE).take(order).combine_chunks()
    out = out.append_column(C.COL_VALUE, pa.MapArray.from_arrays(offsets, uk, uv))
    if has_ttl:
        ex = view.column("ttl_expires_at").take(order).combine_chunks()
        out = out.append_column("ttl_expires_at", pa.MapArray.from_arrays(offsets, uk, ex))
    if with_expired:
        # a key is expired when every entry is: count the unexpired entries of each group
        e = np.asarray(view.column("expired").take(order).combine_chunks().to_numpy(zero_copy_only=False), dtype=bool)
        starts = offsets.to_numpy()[:-1]
        live = np.add.reduceat((~e).astype(np.int64), starts) if e.size else np.zeros(0, dtype=np.int64)
        out = out.append_column("expired", pa.array(live == 0))
    return out
