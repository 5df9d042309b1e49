"""Metadata tables (`checkpoints`, `files`, `states`, `operators`): the core's inspect tables, exposed to Spark.

They run in the task of the read's single partition, over the checkpoints pinned at planning.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from flinkstate.read.inspect import checkpoints_table

from pyspark_flinkstate.resolve import Resolved

__all__ = ["metadata_table"]


def metadata_table(res: Resolved) -> pa.Table:
    """The rows of the metadata table the read asks for."""
    t = res.opts.table
    if t == "checkpoints":
        return checkpoints_table(res.infos)
    op = res.opts.operator
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
