"""Metadata tables (`checkpoints`, `files`, `states`, `operators`): the core's inspect tables, exposed to Spark.

They run in the task of the read's single partition, over the checkpoints pinned at planning.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from flinkstate.read.insight import CheckpointInsight, history_table
from flinkstate.read.inspect import checkpoints_table

from pyspark_flinkstate.options import INSIGHT_TABLES
from pyspark_flinkstate.resolve import Resolved

__all__ = ["metadata_table"]


def metadata_table(res: Resolved) -> pa.Table:
    """The rows of the metadata table the read asks for."""
    t = res.opts.table
    if t == "checkpoints":
        return checkpoints_table(res.infos)
    op = res.opts.operator
    if t in INSIGHT_TABLES:
        return _insight(res, t, op)
    parts = []
    for ck in res.pinned:
        if t == "files":
            parts.append(ck.inspect.files(op))
        elif t == "states":
            parts.append(ck.inspect.states(op))
        else:
            ops = ck.inspect.operators()
            parts.append(ops if op is None else ops.filter(pc.equal(ops.column("operator"), op)))
    if not parts:
        from pyspark_flinkstate.resolve import output_columns

        return pa.schema(output_columns(res)).empty_table()
    return pa.concat_tables(parts)


def _insight(res: Resolved, t: str, op: str | None) -> pa.Table:
    """An insight table (`flinkstate.read.insight`) of the pinned checkpoint; history over every retained one."""
    o = res.opts
    if t == "history":
        h = history_table(res.pinned)
        return h if op is None else h.filter(pc.equal(h.column("operator"), op))
    ins = CheckpointInsight(res.pinned[0])
    if t in ("sourceSplits", "sourceEnumerator"):
        from flinkstate.flink.bridge.source_positions import source_enumerator, source_splits

        read = source_splits if t == "sourceSplits" else source_enumerator
        return read(res.pinned[0], op, o.source_kinds)  # type: ignore[arg-type]
    if t == "keyGroups":
        return ins.key_groups(op)
    if t == "topKeys":
        return ins.top_keys(o.top_n, op)
    if t == "ttlExpiry":
        return ins.ttl_expiry(o.ttl_bucket, op)
    ck = res.pinned[0]
    ops = [op] if op is not None else [u for u in sorted(ck.operators) if ck.operator(u).keyed_states and (o.parallelism or ck.operator(u).parallelism)]
    parts = [ins.subtasks(u, o.parallelism) for u in ops]
    from flinkstate.read.insight import SUBTASKS_SCHEMA

    return pa.concat_tables(parts) if parts else SUBTASKS_SCHEMA.empty_table()
