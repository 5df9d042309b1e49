"""Writing the `sourceSplits` and `sourceEnumerator` tables: rows go to the driver, which rewrites the sources' reader and
enumerator state together in one new checkpoint (`flink.bridge.source_positions.write_splits` / `write_enumerator`).

`mode("append")` upserts splits by (operator, subtask, split_id), or adds processed paths; `operation="delete"` drops
splits, or forgets processed paths. A source's positions are small (a row per split): the tasks hand their rows to the
driver. `mode("overwrite")` is refused (a source's state is rewritten, never replaced by a DataFrame).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import pyarrow as pa
from flinkstate.core.errors import InvalidArgumentError
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage

from pyspark_flinkstate.options import SOURCE_TABLES, WRITE_OPTIONS, source_kinds, storage_options_from

__all__ = ["SourceRowsMessage", "SourceTableWriter", "is_source_write"]


def is_source_write(options: dict[str, str]) -> bool:
    """Whether a write's options name one of the source tables."""
    return {str(k).lower(): v for k, v in options.items()}.get("table") in SOURCE_TABLES


@dataclass
class SourceRowsMessage(WriterCommitMessage):
    """One task's rows."""

    batches: list[pa.RecordBatch] = field(default_factory=list)


class SourceTableWriter(DataSourceArrowWriter):
    """`df.write.format("flinkstate").option("table", "sourceSplits" | "sourceEnumerator")`: one new checkpoint."""

    def __init__(self, options: dict[str, str], overwrite: bool) -> None:
        lo = {str(k).lower(): str(v) for k, v in options.items() if v is not None}
        unknown = sorted(k for k in lo if k not in {w.lower() for w in WRITE_OPTIONS} and not k.startswith("storage."))
        if unknown:
            raise InvalidArgumentError(f"unknown write options {unknown}; known: {sorted(WRITE_OPTIONS)}")
        if overwrite:
            raise InvalidArgumentError(f"table={lo['table']}: mode('overwrite') would replace a source's state; write with "
                                       f"mode('append') (upserts) or operation=delete")
        if not lo.get("path"):
            raise InvalidArgumentError("the job root is missing: use .save(path) or option 'path'")
        operation = lo.get("operation", "upsert").strip().lower()
        if operation not in ("upsert", "delete"):
            raise InvalidArgumentError(f"option 'operation' must be upsert or delete, got {operation!r}")
        self.path, self.table, self.delete = lo["path"], lo["table"], operation == "delete"
        self.operator = lo.get("operator") or None
        self.kinds = source_kinds(lo.get("sourcekinds"))
        self.storage_options = storage_options_from(options) or None

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return SourceRowsMessage(list(iterator))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        import flinkstate
        from flinkstate.flink.bridge.source_positions import write_enumerator, write_splits

        batches = [b for m in messages if isinstance(m, SourceRowsMessage) for b in m.batches if b.num_rows]
        if not batches:
            raise InvalidArgumentError(f"table={self.table}: no rows to write")
        t = pa.Table.from_batches(batches)
        if "operator" not in t.column_names:
            if self.operator is None:
                raise InvalidArgumentError(f"table={self.table}: give an operator column or option 'operator'")
            t = t.append_column("operator", pa.array([self.operator] * t.num_rows, pa.string()))
        store = flinkstate.open(self.path, self.storage_options)
        (write_splits if self.table == "sourceSplits" else write_enumerator)(store, t, delete=self.delete, kinds=self.kinds)  # type: ignore[arg-type]

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        return None  # nothing was written before commit
