"""Spark's `sourceSplits` and `sourceEnumerator` tables: read on a Flink savepoint in place and on an imported root, and
written there (append upserts splits, delete forgets processed paths), then exported."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import flinkstate as fs
from flinkstate.flink.bridge.importer import import_savepoint
from flinkstate.flink.bridge.source_positions import source_enumerator, source_splits

pytestmark = [pytest.mark.spark, pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning")]

SAVEPOINT = Path(__file__).resolve().parents[1] / "fixtures" / "sources-files-2.3" / "savepoint"


def _rows(df: Any) -> list[dict]:
    return sorted((r.asDict() for r in df.collect()), key=lambda r: (str(r.get("subtask")), str(r.get("split_id")), str(r.get("path"))))


def test_source_tables_read_and_write(spark: Any, tmp_path: Path) -> None:
    def read(path: Path, table: str) -> Any:
        return spark.read.format("flinkstate").option("table", table).load(str(path))

    in_place = _rows(read(SAVEPOINT, "sourceSplits").drop("split_bytes"))  # a Flink savepoint read in place
    want = source_splits(fs.open(SAVEPOINT).checkpoint()).drop_columns(["split_bytes"]).to_pylist()
    assert in_place == sorted(want, key=lambda r: (str(r["subtask"]), str(r["split_id"]), str(r["path"])))
    root = tmp_path / "root"
    import_savepoint(SAVEPOINT, root)
    assert read(root, "sourceEnumerator").where("entry = 'processed_path'").count() == 6  # an imported root

    split = in_place[0]
    spark.createDataFrame([("files", split["subtask"], split["split_id"], 0)], "operator string, subtask int, split_id string, records_to_skip long") \
        .coalesce(1).write.format("flinkstate").option("table", "sourceSplits").mode("append").save(str(root))
    done = [r for r in source_enumerator(fs.open(root).checkpoint()).to_pylist() if r["entry"] == "processed_path"]
    reading = {r["path"] for r in in_place} | {r["path"] for r in source_enumerator(fs.open(root).checkpoint()).to_pylist() if r["entry"] == "split"}
    forget = next(r["path"] for r in done if r["path"] not in reading)
    spark.createDataFrame([(forget,)], "path string").coalesce(1).write.format("flinkstate") \
        .options(table="sourceEnumerator", operator="files", operation="delete").mode("append").save(str(root))
    after = {r["split_id"]: r for r in source_splits(fs.open(root).checkpoint()).to_pylist()}
    assert after[split["split_id"]]["records_to_skip"] is None  # rewound to its start
    assert forget not in source_enumerator(fs.open(root).checkpoint()).column("path").to_pylist()
    with pytest.raises(Exception, match="overwrite"):
        spark.createDataFrame([("files", 0, "x", 0)], "operator string, subtask int, split_id string, records_to_skip long") \
            .write.format("flinkstate").option("table", "sourceSplits").mode("overwrite").save(str(root))
    assert len(fs.open(root).checkpoints()) == 3  # the import, then one checkpoint per write
