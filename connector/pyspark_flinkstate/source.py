"""The `flinkstate` Spark data source: a thin shell over the reader and writer modules."""

from __future__ import annotations

import sys
from typing import Any

from pyspark.sql.datasource import DataSource

__all__ = ["FlinkStateDataSource"]


def _pushdown_enabled() -> bool:
    """Whether Spark plans this read with filter pushdown on.

    PySpark refuses a reader that implements `pushFilters` when
    `spark.sql.python.filterPushdown.enabled` is off, and does not pass that setting to
    `DataSource.reader`; the planning worker holds it in a local variable, so look for it.
    Without it (pushdown path, or unknown callers) the pushdown reader is used.
    """
    f = sys._getframe(1)
    while f is not None:
        if "enable_pushdown" in f.f_locals and f.f_code.co_filename.endswith("plan_data_source_read.py"):
            return bool(f.f_locals["enable_pushdown"])
        f = f.f_back  # type: ignore[assignment]
    return True


class FlinkStateDataSource(DataSource):
    """`spark.read.format("flinkstate")`, `df.write.format("flinkstate")` and their streaming forms."""

    @classmethod
    def name(cls) -> str:
        return "flinkstate"

    def _resolved(self) -> Any:
        res = getattr(self, "_res", None)
        if res is None:
            from pyspark_flinkstate.resolve import resolve

            res = self._res = resolve(dict(self.options))
        return res

    def schema(self) -> Any:
        from pyspark_flinkstate.resolve import non_null_columns, output_columns
        from pyspark_flinkstate.schema import spark_schema

        res = self._resolved()
        return spark_schema(output_columns(res), non_null_columns(res))

    def reader(self, schema: Any) -> Any:
        from pyspark_flinkstate.reader import FlinkStatePushdownReader, FlinkStateReader

        cls = FlinkStatePushdownReader if _pushdown_enabled() else FlinkStateReader
        res = self._resolved()
        # the reader has it now; Spark pickles this data source into each query's read function (with the reader, which
        # drops what its tasks do not need): the resolved checkpoint (a Flink savepoint's every handle) must not go too
        self._res = None
        return cls(res, schema)

    def writer(self, schema: Any, overwrite: bool) -> Any:
        from pyspark_flinkstate.source_tables import SourceTableWriter, is_source_write
        from pyspark_flinkstate.writer import FlinkStateWriter

        if is_source_write(dict(self.options)):
            return SourceTableWriter(dict(self.options), overwrite)

        return FlinkStateWriter(dict(self.options), schema, overwrite)

    def streamReader(self, schema: Any) -> Any:
        from pyspark_flinkstate.stream_reader import FlinkStateStreamReader

        return FlinkStateStreamReader(dict(self.options), schema)

    def streamWriter(self, schema: Any, overwrite: bool) -> Any:
        from pyspark_flinkstate.stream_writer import FlinkStateStreamWriter

        return FlinkStateStreamWriter(dict(self.options), schema, overwrite)
