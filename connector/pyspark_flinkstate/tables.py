"""A checkpoint's state as Spark tables: `table(...)` reads one as a DataFrame, `register_tables(...)` names them all.

Where the files allow, the DataFrame runs on Spark's own Parquet reader (`native`); elsewhere it is `format("flinkstate")`,
the Python source. Either way its schema and rows are those of `spark.read.format("flinkstate")` with the same options.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from flinkstate.core.errors import InvalidArgumentError
from flinkstate.read.scan import Checkpoint, TableRef

from pyspark_flinkstate.native import frame, python_frame, unsupported
from pyspark_flinkstate.options import parse_read_options
from pyspark_flinkstate.resolve import open_store, resolve

__all__ = ["TABLES_VIEW", "table", "register_tables"]

TABLES_VIEW = "flinkstate_tables"  # the view register_tables lists its views in (after the prefix)


def _option_strings(options: Mapping[str, Any]) -> dict[str, str]:
    """Options as Spark hands them to a data source: strings (booleans as true/false), None left out."""
    out = {}
    for k, v in options.items():
        if v is None:
            continue
        out[k] = ("true" if v else "false") if isinstance(v, bool) else str(v)
    return out


def table(spark: Any, path: str, operator: str | None = None, state: str | None = None, *, keys: Sequence[Any] | None = None,
          **options: Any) -> Any:
    """One table of a checkpoint as a DataFrame with exactly the schema and rows of
    `spark.read.format("flinkstate").options(operator=..., state=..., **options).load(path)` (and `.where(key IN keys)`
    when `keys` is given), read by Spark's own Parquet reader wherever the files allow.

    `options` are the read options of `format("flinkstate")` as it spells them (`table`, `checkpointId`,
    `ttlReferenceTime`, `includeExpired`, `flattenCollections`, `storage.<name>`...; booleans may be bools). A keyed
    state, timer services or operator state of a flinkstate root (an imported savepoint is one) on a local file system
    is read from its Parquet files by Spark: the core plans the scan (the checkpoint pinned now, newest full file plus
    later deltas per key-group range), a delta chain of up to 3% of the full files' rows merges newest-wins in Spark (a
    larger one through the Python source's tasks, in the key groups its deltas hold), TTL visibility, list and map
    flattening are column expressions, and `keys` reads only the keys' key groups (Parquet statistics skip the rest). A Flink savepoint
    or checkpoint read in place (binary, not Parquet), the metadata, insight and changes tables, a root Spark's file
    systems do not reach as configured here (memory://, s3://) and a column type Spark's Parquet reader shows otherwise
    (nanosecond timestamps, times, durations) are read through the Python source `format("flinkstate")`, which Spark
    takes row by row (2-4x slower on large states). Either way the checkpoint is the one current when this is called.
    """
    given = {"operator": operator, "state": state, **options}
    if "path" in {k.lower() for k in given}:
        raise InvalidArgumentError("give the root as table()'s path argument, not as an option 'path'")
    opts = _option_strings(given)
    res = resolve(parse_read_options({**opts, "path": path}))
    if keys is not None and res.opts.table not in ("state", "timers"):
        raise InvalidArgumentError(f"keys apply to table=state and table=timers, not table={res.opts.table}")
    ks = None if keys is None else list(keys)
    if unsupported(res) is None:
        return frame(spark, res, ks, options=opts)
    return python_frame(spark, res, opts, ks)


@dataclass(frozen=True)
class _View:
    name: str
    ref: TableRef


def view_name(ref: TableRef, prefix: str = "") -> str:
    """A name a person can type for a table: operator and state in lower-case letters, digits and underscores, words of
    camel case apart (`sessions_count`, `window_event_window_timers`, `source_source_reader_state`), or the metadata
    table's own name (`checkpoints`)."""
    parts = [p for p in (ref.operator, ref.state) if p]
    if not parts or ref.table not in ("state", "timers", "operatorState"):
        parts.append(ref.table)
    words = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", "_".join(parts))  # SourceReaderState: source_reader_state
    name = re.sub(r"_+", "_", re.sub(r"[^a-z0-9_]", "_", words.lower())).strip("_")
    name = prefix + (name or "t")
    return name if re.match(r"[a-z_]", name) else f"t_{name}"


def _views(refs: list[TableRef], prefix: str) -> list[_View]:
    """Each table's view name, made unique: a clash gets the table kind, then a number."""
    out: list[_View] = []
    taken: set[str] = set()
    for ref in refs:
        name = view_name(ref, prefix)
        if name in taken:
            name = f"{name}_{view_name(TableRef(ref.table))}"
        base, i = name, 2
        while name in taken:
            name, i = f"{base}_{i}", i + 1
        taken.add(name)
        out.append(_View(name, ref))
    return out


def register_tables(spark: Any, path: str, checkpoint_id: int | None = None, *, prefix: str = "", **options: Any) -> Any:
    """Every table of a checkpoint as a temporary view, and a view `<prefix>flinkstate_tables` listing them; returns that list.

    Each keyed state, timer service and operator state (every table the checkpoint lists: `Checkpoint.tables()`) becomes a
    view named `<operator>_<state>` in lower-case letters, digits and underscores, read as `table(...)` reads it (Spark's
    Parquet reader where the files allow); the metadata tables are `checkpoints` (every retained checkpoint), `files`,
    `states` and `operators` (of this checkpoint). The checkpoint is `checkpoint_id`, else the latest now. A Flink
    savepoint read in place registers the same views over the Python source. `options` are read options for every view
    (`storage.<name>`, and for Flink savepoints `ttl`, `rowFields`, `rawValues`, `sqlPlan`...); existing views of these
    names are replaced. The list has columns `name`, `table`, `operator`, `state`, `kind` and `native` (whether Spark's
    Parquet reader reads it)."""
    from pyspark.sql import types as T

    opts = _option_strings(options)
    if checkpoint_id is not None:
        opts["checkpointId"] = str(int(checkpoint_id))
    base_opts = parse_read_options({**opts, "path": path, "table": "operators"})
    store = open_store(base_opts)  # opened once: every view's resolve reads this store
    base = resolve(base_opts, store)
    ck: Checkpoint = base.pinned[-1] if base.pinned else None  # type: ignore[assignment]
    if ck is None:
        from flinkstate.core.errors import CheckpointNotFoundError

        raise CheckpointNotFoundError(f"no committed checkpoint at {path}")
    pinned = {**opts, "checkpointId": str(ck.checkpoint_id)}
    rows = []
    for v in _views(ck.tables(), prefix):
        r = v.ref
        given = {**(opts if r.table == "checkpoints" else pinned), "table": r.table, "operator": r.operator, "state": r.state}
        res = resolve(parse_read_options({**_option_strings(given), "path": path}), store)
        native = unsupported(res) is None
        df = frame(spark, res, options=_option_strings(given)) if native else python_frame(spark, res, _option_strings(given))
        df.createOrReplaceTempView(v.name)
        rows.append((v.name, r.table, r.operator, r.state, r.kind, native))
    schema = T.StructType([T.StructField("name", T.StringType(), False), T.StructField("table", T.StringType(), False),
                           T.StructField("operator", T.StringType(), True), T.StructField("state", T.StringType(), True),
                           T.StructField("kind", T.StringType(), False), T.StructField("native", T.BooleanType(), False)])
    listing = spark.createDataFrame(rows, schema)
    listing.createOrReplaceTempView(prefix + TABLES_VIEW)
    return listing
