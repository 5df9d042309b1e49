"""Reads executed by Spark's own Parquet reader: the core's scan plan compiled into Spark expressions.

A flinkstate checkpoint (and every imported savepoint) is Parquet already, so Spark need not take its rows from a
Python data source, which it copies out of Arrow row by row. The core plans as for every reader (`Checkpoint.scan` →
`Scan.plan()` → tasks, each naming its files and the key groups where each counts: `ScanTask.file_slices`); here each
task becomes `spark.read.schema(stored schema).parquet(files)` with a key-group filter that Parquet statistics prune
(files are sorted by key group), delta chains merge newest-wins (small ones in Spark: the deltas' keys anti-joined from
the full files' rows, the deltas' own newest row per key by a window over the deltas only; large ones by the Python
source's tasks, restricted to the key groups the deltas hold: `choose_merge`), and what `read.visibility` does to
stored rows is done with column expressions: TTL expiry and the `expired` flag, lists flattened by `posexplode`, maps
grouped by `collect_list`. The result has exactly the schema and rows of `format("flinkstate")` with the same options
(`tests/pyspark_flinkstate/test_native.py` checks it for every state kind).

What Spark's Parquet reader cannot read as the Python source shows it (nanosecond timestamps, times, durations,
unsigned 64-bit and half floats, decimals over 38 digits), roots Spark's file systems do not reach (memory://; s3://
needs Hadoop's s3a on the cluster), Flink savepoints read in place and the other tables: `unsupported` says why, and
`pyspark_flinkstate.table` reads those through the Python source.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np
import pyarrow as pa
from flinkstate.core.descriptors import KeyedStateDescriptor, OperatorStateDescriptor, TimerServiceDescriptor
from flinkstate.core.errors import InvalidArgumentError
from flinkstate.format import constants as C
from flinkstate.format.datafile import operator_state_schema, primary_key_columns, state_schema, timer_schema
from flinkstate.read.checkpoint import StoreCheckpoint
from flinkstate.read.slices import FileSlice, key_group_runs, key_groups_held
from flinkstate.read.visibility import MAX_EXPIRY_MS

from pyspark_flinkstate.resolve import Resolved, non_null_columns, output_columns
from pyspark_flinkstate.schema import spark_schema, spark_type

__all__ = ["BROADCAST_DELTA_ROWS", "NATIVE_TABLES", "SPARK_MERGE_SHARE", "Merge", "choose_merge", "frame", "key_column_filter",
           "parquet_readable", "python_frame", "unsupported"]

Merge = Literal["auto", "python", "spark"]

NATIVE_TABLES = ("state", "timers", "operatorState")
# deltas of at most this many rows are broadcast to the anti-join with the full files' rows (no shuffle of those)
BROADCAST_DELTA_ROWS = 2_000_000
# Spark merges a delta chain whose rows are at most this share of the full files' rows (`choose_merge`)
SPARK_MERGE_SHARE = 0.03
_MAX_TS = (1 << 63) - 1
_ROW, _RANK = "__fs_row", "__fs_rank"


def parquet_readable(t: pa.DataType) -> bool:
    """Whether Spark's Parquet reader reads a column of this stored type as `schema.spark_type` shows it."""
    if pa.types.is_dictionary(t):
        return False
    if (pa.types.is_boolean(t) or pa.types.is_int8(t) or pa.types.is_int16(t) or pa.types.is_int32(t) or pa.types.is_int64(t)
            or pa.types.is_uint8(t) or pa.types.is_uint16(t) or pa.types.is_uint32(t) or pa.types.is_float32(t)
            or pa.types.is_float64(t) or pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t)
            or pa.types.is_large_binary(t) or pa.types.is_date32(t)):
        return True
    if pa.types.is_timestamp(t):
        return t.unit in ("ms", "us")
    if pa.types.is_decimal128(t):
        return t.precision <= 38
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return parquet_readable(t.value_type)
    if pa.types.is_map(t):
        return parquet_readable(t.key_type) and parquet_readable(t.item_type)
    if pa.types.is_struct(t):
        return t.num_fields > 0 and all(parquet_readable(t.field(i).type) for i in range(t.num_fields))
    return False


def _stored_schema(res: Resolved) -> list[pa.Schema]:
    """The stored schemas of the files a read reads (a timers read: one per service)."""
    t = res.opts.table
    if t == "state":
        return [state_schema(res.descriptor(), delta=True)]
    if t == "timers":
        return [timer_schema(TimerServiceDescriptor.from_dict(s), delta=True) for s in res.timer_services]
    assert res.desc is not None
    return [operator_state_schema(OperatorStateDescriptor.from_dict(res.desc))]


def unsupported(res: Resolved) -> str | None:
    """Why a resolved read cannot run on Spark's Parquet reader (None: it can)."""
    if res.opts.table not in NATIVE_TABLES:
        return f"table {res.opts.table!r} is read by the Python source"
    if not isinstance(res.checkpoint, StoreCheckpoint):
        return "a Flink savepoint read in place is not Parquet: the Python source decodes it"
    if res.io is None or res.io.scheme != "file":
        return f"the root {getattr(res.io, 'root', None)!r} is not on a local file system Spark reads without its own configuration"
    for schema in _stored_schema(res):
        for f in schema:
            if not parquet_readable(f.type):
                return f"column {f.name!r} of type {f.type} has no Spark Parquet reading equal to the Python source's"
    return None


# ---------------------------------------------------------------------------------------------- literals and filters
def _lit(value: Any, t: pa.DataType) -> Any:
    """A Spark literal of a value of an Arrow type (as `pa.array([value], t).to_pylist()` gives it)."""
    from pyspark.sql import functions as F

    if value is None:
        return F.lit(None).cast(spark_type(t))
    if pa.types.is_struct(t):
        return F.struct(*[_lit(value.get(t.field(i).name), t.field(i).type).alias(t.field(i).name) for i in range(t.num_fields)])
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return F.array(*[_lit(v, t.value_type) for v in value]).cast(spark_type(t))
    if isinstance(value, bytes):
        value = bytearray(value)
    return F.lit(value).cast(spark_type(t))


def key_column_filter(keys: Sequence[Any], key_type: pa.DataType) -> Any:
    """`key IN (keys)` as a Spark column, the keys typed as the state's key type."""
    from pyspark.sql import functions as F

    try:
        values = pa.array(list(keys), key_type).to_pylist()
    except (pa.ArrowException, TypeError, ValueError, OverflowError) as e:
        raise InvalidArgumentError(f"keys {list(keys)[:5]!r} are not values of the key type {key_type}: {e}") from e
    return F.col(C.COL_KEY).isin(*[_lit(v, key_type) for v in values])


def _str(text: str) -> str:
    """A SQL string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _ranges_filter(ranges: tuple[tuple[int, int], ...]) -> str:
    """`key_group` in these inclusive ranges, as SQL (Parquet statistics of the sorted files skip the other row groups)."""
    return " OR ".join(f"`key_group` = {a}" if a == b else f"`key_group` BETWEEN {a} AND {b}" for a, b in ranges)


# ---------------------------------------------------------------------------------------------- reading slices
class _Reads:
    """The stored rows of a set of file slices of one state (or timer service): read by Spark, merged newest-wins."""

    def __init__(self, spark: Any, schema: pa.Schema, pk: list[str], keys: Any) -> None:
        self.spark, self.schema, self.pk, self.keys = spark, schema, pk, keys

    def _struct(self, delta: bool) -> Any:
        from pyspark.sql import types as T

        return T.StructType([T.StructField(f.name, spark_type(f.type), True) for f in self.schema
                             if delta or f.name != C.COL_TOMBSTONE])

    def read(self, slices: list[FileSlice], delta: bool = False, ranks: dict[str, int] | None = None) -> Any:
        """The rows of slices of one file kind, one Parquet scan per key-group filter. Deltas carry the merge's order:
        their file's rank (`ranks`, by file name) and the row's index in its file."""
        by_ranges: dict[tuple[tuple[int, int], ...] | None, list[str]] = {}
        for s in slices:
            by_ranges.setdefault(None if s.whole else s.key_group_ranges, []).append(s.url)
        out = None
        for ranges, urls in by_ranges.items():
            df = self.spark.read.schema(self._struct(delta)).parquet(*urls)
            if ranks is not None:
                names = ", ".join(f"{_str(n)}, {i}" for n, i in ranks.items())
                df = df.selectExpr("*", f"map({names})[_metadata.file_name] AS {_RANK}", f"_metadata.row_index AS {_ROW}")
            if ranges is not None:
                df = df.where(_ranges_filter(ranges))
            if self.keys is not None:
                df = df.where(self.keys)
            out = df if out is None else out.unionByName(df)
        return out

    def stored_rows(self, slices: list[FileSlice]) -> Any:
        """The merged stored rows (the stored columns but the tombstone), None when no slice has any."""
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        full = [s for s in slices if not s.delta]
        deltas = sorted((s for s in slices if s.delta), key=lambda s: s.order)
        cols = [f.name for f in self.schema if f.name != C.COL_TOMBSTONE]
        base = self.read(full) if full else None
        if not deltas:
            return base
        names = [s.url.rsplit("/", 1)[-1] for s in deltas]
        if len(set(names)) == len(names):  # one scan of them all, each row ranked by its file's name
            d = self.read(deltas, True, {n: i for i, n in enumerate(names)})
        else:  # files of one name in two folders (copied there by hand): a scan each
            d = None
            for i, (s, n) in enumerate(zip(deltas, names)):
                one = self.read([s], True, {n: i})
                d = one if d is None else d.unionByName(one)
        keys = [C.COL_KEY_GROUP, *self.pk]
        # every delta row's key and place in the chain, hashed once for both joins (Spark reuses the broadcast)
        placed = d.select(*[F.col(c).alias(f"__fs_k_{c}") for c in keys], F.col(_RANK).alias("__fs_k_rank"), F.col(_ROW).alias("__fs_k_row"))
        small = sum(s.entry.rows for s in deltas) <= BROADCAST_DELTA_ROWS
        if small:
            placed = F.broadcast(placed)

        def same_key(df: Any) -> Any:
            on = None
            for c in keys:
                eq = df[c].eqNullSafe(placed[f"__fs_k_{c}"]) if c == C.COL_NAMESPACE else (df[c] == placed[f"__fs_k_{c}"])
                on = eq if on is None else (on & eq)
            return on

        if small:  # a delta row wins unless a later one (a later file, or further in the file) has its key: no shuffle
            later = (placed["__fs_k_rank"] > d[_RANK]) | ((placed["__fs_k_rank"] == d[_RANK]) & (placed["__fs_k_row"] > d[_ROW]))
            winners = d.join(placed, same_key(d) & later, "left_anti")
        else:  # the newest row per key by a window (a shuffle of the deltas)
            newest = Window.partitionBy(*keys).orderBy(F.col(_RANK).desc(), F.col(_ROW).desc())
            winners = d.withColumn("__fs_n", F.row_number().over(newest)).where(F.col("__fs_n") == 1)
        winners = winners.where(~F.col(C.COL_TOMBSTONE)).select(*cols)
        if base is None:
            return winners
        return base.join(placed, same_key(base), "left_anti").select(*cols).unionByName(winners)


# ---------------------------------------------------------------------------------------------- visibility as expressions
# SQL expression text: one call into Spark per step (each Column built from Python is a round trip to the JVM)
def _q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _expiry(ts: str, ttl_ms: int) -> str:
    """Flink's saturating last access + ttl (a null last access as 0), as `core.ttl.expiry_timestamps`."""
    return f"(least(coalesce({ts}, 0L), {_MAX_TS - ttl_ms}L) + {ttl_ms}L)"


def _shown(exp: str) -> str:
    """An expiry as the `ttl_expires_at` timestamp (saturated at 9999-12-31, as `read.visibility`)."""
    return f"timestamp_millis(least({exp}, {MAX_EXPIRY_MS}L))"


def _shape_state(df: Any, desc: KeyedStateDescriptor, reference_ms: int, include_expired: bool, flatten: bool) -> Any:
    """Stored rows of a keyed state to the rows a read returns: `read.visibility.shape_state` in Spark expressions."""
    from pyspark.sql import functions as F

    ttl_ms = desc.ttl.ttl_ms if desc.ttl_enabled else None  # type: ignore[union-attr]
    rest = [_q(c) for c in df.columns if c != C.COL_TTL]
    if desc.kind == "list":
        return _shape_list(df, ttl_ms, int(reference_ms), include_expired, flatten)
    if ttl_ms is not None:
        exp = _expiry(_q(C.COL_TTL), ttl_ms)
        if include_expired:
            df = df.selectExpr(*rest, f"{_shown(exp)} AS ttl_expires_at", f"{exp} <= {int(reference_ms)}L AS expired")
        else:
            df = df.where(f"{exp} > {int(reference_ms)}L").selectExpr(*rest, f"{_shown(exp)} AS ttl_expires_at")
    if desc.kind == "map" and not flatten:
        group = [C.COL_KEY] + ([C.COL_NAMESPACE] if desc.namespace_type is not None else []) + [C.COL_KEY_GROUP]
        aggs = [F.expr("map_from_entries(collect_list(struct(`user_key`, `value`))) AS `value`")]
        if ttl_ms is not None:
            aggs.append(F.expr("map_from_entries(collect_list(struct(`user_key`, `ttl_expires_at`))) AS `ttl_expires_at`"))
            if include_expired:  # a key is expired when every entry is
                aggs.append(F.expr("bool_and(`expired`) AS `expired`"))
        df = df.groupBy(*group).agg(*aggs)
    return df


def _shape_list(df: Any, ttl_ms: int | None, ref: int, include_expired: bool, flatten: bool) -> Any:
    rest = [_q(c) for c in df.columns if c not in (C.COL_VALUE, C.COL_TTL)]
    v, t = _q(C.COL_VALUE), _q(C.COL_TTL)
    if ttl_ms is not None:  # a value list and its last-access list must pair up (as the Python source checks)
        df = df.selectExpr(*rest, v, f"CASE WHEN coalesce(size({v}), 0) = coalesce(size({t}), 0) THEN {t} "
                                     "ELSE raise_error('list state: the ttl_timestamp list does not match the value list') END AS " + t)
    if flatten:
        if ttl_ms is None:
            return df.selectExpr(*rest, f"explode({v}) AS {v}")
        df = df.selectExpr(*rest, t, f"posexplode({v}) AS (`__fs_pos`, {v})")
        exp = _expiry(f"{t}[`__fs_pos`]", ttl_ms)
        shown = [*rest, v, f"{_shown(exp)} AS ttl_expires_at"]
        if include_expired:
            return df.selectExpr(*shown, f"{exp} <= {ref}L AS expired")
        return df.where(f"{exp} > {ref}L").selectExpr(*shown)
    if ttl_ms is None:
        return df
    if include_expired:  # every element kept; as the Python source, no `expired` flag per key (NULL)
        return df.selectExpr(*rest, v, f"CASE WHEN {v} IS NULL THEN CAST(array() AS array<timestamp>) "
                                        f"ELSE transform({t}, x -> {_shown(_expiry('x', ttl_ms))}) END AS ttl_expires_at",
                             "CAST(NULL AS boolean) AS expired")
    live = f"filter(zip_with({v}, {t}, (x, y) -> named_struct('v', x, 'e', {_expiry('y', ttl_ms)})), p -> p.e > {ref}L)"
    df = df.selectExpr(*rest, f"{live} AS `__fs_live`").where("coalesce(size(`__fs_live`), 0) > 0")  # keys left empty: dropped
    return df.selectExpr(*rest, f"transform(`__fs_live`, p -> p.v) AS {v}", f"transform(`__fs_live`, p -> {_shown('p.e')}) AS ttl_expires_at")


# ---------------------------------------------------------------------------------------------- the frame
def _empty(spark: Any, res: Resolved) -> Any:
    return spark.createDataFrame([], spark_schema(output_columns(res), non_null_columns(res)))


def _set(options: dict[str, str], name: str, value: str) -> None:
    """options[name] = value, replacing the option under any spelling (Spark's option names ignore case)."""
    for k in [k for k in options if k.lower() == name.lower()]:
        del options[k]
    options[name] = value


def python_frame(spark: Any, res: Resolved, options: Mapping[str, str], keys: Sequence[Any] | None = None,
                 key_groups: tuple[tuple[int, int], ...] | None = None) -> Any:
    """The read through the Python source `format("flinkstate")` with these options (`key_groups`: only those), at the
    checkpoint and TTL reference time resolved in `res`, given the schema resolved there (Spark asks the source for none)."""
    opts = {k: v for k, v in options.items() if k.lower() != "path"}
    if res.checkpoint is not None:
        _set(opts, "checkpointId", str(res.checkpoint.checkpoint_id))  # the checkpoint pinned when the read was resolved
    if res.opts.ttl_reference_ms is not None:
        _set(opts, "ttlReferenceTime", str(res.opts.ttl_reference_ms))  # "now" as it was then
    if key_groups is not None:
        _set(opts, "keyGroups", ",".join(f"{a}-{b}" for a, b in key_groups))
    df = spark.read.format("flinkstate").schema(spark_schema(output_columns(res), non_null_columns(res))).options(**opts).load(res.opts.path)
    if keys is not None:
        key_type = (TimerServiceDescriptor.from_dict(res.timer_services[0]).key_type if res.opts.table == "timers"
                    else res.descriptor().key_type)
        df = df.where(key_column_filter(keys, key_type))
    return df


def _split(io: Any, slices: list[FileSlice], max_parallelism: int) -> tuple[list[FileSlice], tuple[tuple[int, int], ...]]:
    """The full files' slices outside the key groups the deltas hold rows of, and those key groups (as ranges)."""
    touched = np.zeros(max_parallelism, dtype=bool)
    for s in slices:
        if s.delta:
            touched[key_groups_held(io, s)] = True
    kept = []
    for s in slices:
        if s.delta:
            continue
        mask = np.zeros(max_parallelism, dtype=bool)
        for a, b in s.key_group_ranges:
            mask[a : b + 1] = True
        runs = key_group_runs(mask & ~touched)
        if runs:
            kept.append(dataclasses.replace(s, key_group_ranges=runs, whole=runs == ((s.entry.key_group_start, s.entry.key_group_end),)))
    return kept, key_group_runs(touched)


def choose_merge(slices: list[FileSlice]) -> Literal["python", "spark"]:
    """Who merges a read's delta chains: Spark when the deltas' rows are at most SPARK_MERGE_SHARE of the full files' (its
    cost is a hash probe of every full-file row, a broadcast and a window over the deltas), else the Python tasks (their cost,
    Spark's row-by-row intake of Python batches, does not grow with the deltas). Measured with bench/bench_native.py and on
    4 M rows with one delta of 0.1%, 1% and 10% of the keys: Spark's merge 1.3, 1.2 and 2.1 CPU s, the Python tasks' 2.0,
    1.9 and 1.7 (the Parquet scan alone 0.2-0.6, a loaded 2-core machine)."""
    full = sum(s.entry.rows for s in slices if not s.delta)
    delta = sum(s.entry.rows for s in slices if s.delta)
    return "spark" if full and delta <= SPARK_MERGE_SHARE * full else "python"


def frame(spark: Any, res: Resolved, keys: Sequence[Any] | None = None, *, merge: Merge = "auto",
          options: Mapping[str, str] | None = None) -> Any:
    """The read as a DataFrame with exactly the schema and rows of `format("flinkstate")` with the same options (and `key IN
    keys` when keys are given), its full files read by Spark's Parquet reader; `unsupported(res)` must be None.

    Key groups where deltas hold rows (a chain not compacted yet) are merged by `merge`: "spark" (the deltas' keys
    anti-joined from the full files' rows, a window over the deltas for their newest rows), "python" (the Python source's
    tasks: `format("flinkstate")` with `options`, restricted to those key groups), or "auto": `choose_merge`."""
    ck, o = res.checkpoint, res.opts
    assert isinstance(ck, StoreCheckpoint) and o.operator is not None
    if merge not in ("auto", "python", "spark"):
        raise ValueError(f"merge must be 'auto', 'python' or 'spark', got {merge!r}")
    python_part = None
    if o.table == "operatorState":
        assert o.state is not None
        slices = [s for task in ck.scan_operator_state(o.operator, o.state).plan() for s in task.file_slices()]  # type: ignore[attr-defined]
        df = _Reads(spark, _stored_schema(res)[0], [], None).read(slices) if slices else None
    else:
        if o.table == "timers":
            scan: Any = ck.scan_timers(o.operator, o.state or None, keys=keys, service_columns=True)
        else:
            assert o.state is not None
            scan = ck.scan(o.operator, o.state, keys=keys, ttl_reference=o.ttl_reference_ms, include_expired=o.include_expired,
                           flatten=o.flatten)
        slices = [s for task in scan.plan(1 << 62) for s in task.file_slices()]
        if any(s.delta for s in slices) and (merge if merge != "auto" else choose_merge(slices)) == "python":
            slices, touched = _split(ck.io, slices, res.max_parallelism)
            if touched:  # (every key group of the read: the Python source's own plan, its tasks of about a million rows)
                python_part = python_frame(spark, res, options or {}, keys, touched if slices else None)
        df = _timer_rows(spark, res, slices, keys) if o.table == "timers" else _state_rows(spark, res, slices, keys, scan.reference_ms)
    out = _empty(spark, res) if df is None else conform(df, res)
    if python_part is None:
        return out
    return python_part if df is None else out.unionByName(python_part)


def _state_rows(spark: Any, res: Resolved, slices: list[FileSlice], keys: Sequence[Any] | None, reference_ms: int) -> Any:
    if not slices:
        return None
    desc = res.descriptor()
    kf = None if keys is None else key_column_filter(keys, desc.key_type)
    df = _Reads(spark, state_schema(desc, delta=True), primary_key_columns(desc), kf).stored_rows(slices)
    return _shape_state(df, desc, reference_ms, res.opts.include_expired, res.opts.flatten)


def _timer_rows(spark: Any, res: Resolved, slices: list[FileSlice], keys: Sequence[Any] | None) -> Any:
    from pyspark.sql import functions as F

    df = None
    for sd in res.timer_services:
        svc = TimerServiceDescriptor.from_dict(sd)
        mine = [s for s in slices if s.entry.state == svc.name]
        if not mine:
            continue
        kf = None if keys is None else key_column_filter(keys, svc.key_type)
        rows = _Reads(spark, timer_schema(svc, delta=True), primary_key_columns(svc), kf).stored_rows(mine)
        rows = rows.withColumn("domain", F.lit(svc.domain)).withColumn("timer_service", F.lit(svc.name))
        df = rows if df is None else df.unionByName(rows)
    return df


def _zero(t: Any) -> str:
    """A non-null SQL literal of a Spark type (what `conform` declares never-null columns with)."""
    from pyspark.sql import types as T

    if isinstance(t, T.StructType):
        parts = [x for f in t.fields for x in (_str(f.name), _zero(f.dataType))]
        return f"named_struct({', '.join(parts)})"
    if isinstance(t, T.ArrayType):
        return f"CAST(array() AS {t.simpleString()})"
    if isinstance(t, T.MapType):
        return f"CAST(map() AS {t.simpleString()})"
    if isinstance(t, T.StringType):
        return "''"
    if isinstance(t, T.BinaryType):
        return "X''"
    if isinstance(t, T.BooleanType):
        return "false"
    if isinstance(t, T.DateType):
        return "DATE'1970-01-01'"
    if isinstance(t, (T.TimestampType, T.TimestampNTZType)):
        return f"CAST(TIMESTAMP_NTZ'1970-01-01 00:00:00' AS {t.simpleString()})"
    return f"CAST(0 AS {t.simpleString()})"


def conform(df: Any, res: Resolved) -> Any:
    """df's columns in the read's order and Spark types. Spark reads every Parquet column as nullable; the columns the read
    declares never null (key and key group: required in the files) are declared so again by a coalesce that never applies
    (Spark keeps no NOT NULL through a filter in a DataFrame's schema), and computed never-null ones nullable as declared."""
    from pyspark.sql import functions as F

    target = spark_schema(output_columns(res), non_null_columns(res))
    have = {f.name: f for f in df.schema.fields}
    casts = {f.name: F.col(f.name).cast(f.dataType) for f in target.fields if f.name in have and have[f.name].dataType != f.dataType}
    if casts:
        df = df.withColumns(casts)
    exprs = []
    for f in target.fields:
        if f.name not in have:
            e = f"CAST(NULL AS {f.dataType.simpleString()})"
        elif not f.nullable:
            e = f"coalesce({_q(f.name)}, {_zero(f.dataType)})"
        elif not have[f.name].nullable:  # folded away by the optimizer; only the schema sees it
            e = f"CASE WHEN {_q(f.name)} IS NULL THEN NULL ELSE {_q(f.name)} END"
        else:
            e = _q(f.name)
        exprs.append(f"{e} AS {_q(f.name)}")
    return df.selectExpr(*exprs)
