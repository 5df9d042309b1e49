"""Spark data source `format("flinkstate")`: read, query and rewrite flinkstate checkpoints.

Spark finds this module (a top-level `pyspark_*` module exporting `DefaultSource`) when it
first plans a Python data source, so `spark.read.format("flinkstate")` works right after
`pip install`. Importing it stays cheap and never fails: the reader, writer and
SavepointWriter load on first use.
"""

from __future__ import annotations

from typing import Any

__all__ = ["DefaultSource", "FlinkStateDataSource", "SavepointWriter", "register"]

try:
    from pyspark_flinkstate.source import FlinkStateDataSource

    DefaultSource = FlinkStateDataSource
except ImportError:  # pragma: no cover - pyspark missing: keep the module importable
    # no DefaultSource then: Spark's lookup skips modules without one
    __all__ = ["SavepointWriter", "register"]


def register(spark: Any) -> None:
    """Register the data source explicitly (only needed where auto-discovery is off)."""
    spark.dataSource.register(FlinkStateDataSource)


def __getattr__(name: str) -> Any:
    if name == "SavepointWriter":
        from pyspark_flinkstate.savepoint import SavepointWriter

        return SavepointWriter
    raise AttributeError(f"module 'pyspark_flinkstate' has no attribute {name!r}")
