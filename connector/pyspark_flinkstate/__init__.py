"""Spark data source `format("flinkstate")`: read, query and rewrite flinkstate checkpoints.

Spark finds this module (a top-level `pyspark_*` module exporting `DefaultSource`) when it
first plans a Python data source, so `spark.read.format("flinkstate")` works right after
`pip install`. Importing it stays cheap and never fails: the reader, writer and
SavepointWriter load on first use. It may import flinkstate (the core never imports it);
its own modules are layered as tests/test_layers.py lists.
"""

from __future__ import annotations

from typing import Any

from pyspark_flinkstate.workers import check_workers, cli_session, worker_python

__all__ = ["DefaultSource", "FlinkStateDataSource", "SavepointWriter", "register", "check_workers", "cli_session", "worker_python", "compact", "expire",
           "table", "register_tables"]

try:
    from pyspark_flinkstate.source import FlinkStateDataSource

    DefaultSource = FlinkStateDataSource
except ImportError:  # pragma: no cover - pyspark missing: keep the module importable
    # no DefaultSource then: Spark's lookup skips modules without one
    __all__ = ["SavepointWriter", "register", "check_workers", "cli_session", "worker_python", "compact", "expire", "table", "register_tables"]


def register(spark: Any) -> None:
    """Register the data source with `spark` (needed where Spark's lookup cannot see it), checking its workers first."""
    check_workers(spark)
    spark.dataSource.register(FlinkStateDataSource)


def __getattr__(name: str) -> Any:
    if name == "SavepointWriter":
        from pyspark_flinkstate.savepoint import SavepointWriter

        return SavepointWriter
    if name in ("table", "register_tables"):  # state as DataFrames on Spark's own Parquet reader where the files allow
        from pyspark_flinkstate import tables

        return getattr(tables, name)
    if name in ("compact", "expire"):  # state maintenance as Spark jobs
        from pyspark_flinkstate import maintenance

        return getattr(maintenance, name)
    raise AttributeError(f"module 'pyspark_flinkstate' has no attribute {name!r}")
