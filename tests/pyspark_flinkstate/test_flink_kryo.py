"""Kryo state in Spark: a Flink 1.20 savepoint's Kryo values as typed columns (option kryoClasses), and its migration to
Flink 2.3 as a Spark job (one task per subtask) giving the savepoint the single-process export gives."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import flinkstate as fs
from flinkstate.flink.bridge.importer import import_savepoint as import_local
from flinkstate.flink.bridge.store_export import export_savepoint as export_local
from pyspark_flinkstate.flink_jobs import export_savepoint, import_savepoint

pytestmark = [pytest.mark.spark]

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "kryo-upgrade"
CLASSES = "KryoUpgradeJob$Item=sku:String,qty:int,price:double;KryoUpgradeJob$Note=text:String,at:long"


def _normalized_metadata(folder: Path) -> bytes:
    """`_metadata` with the random names of the state files blanked (the only difference two exports may have)."""
    return re.sub(rb"[0-9a-f]{32}", b"#" * 32, (folder / "_metadata").read_bytes())


def _files(folder: Path) -> list[bytes]:
    return sorted(p.read_bytes() for p in folder.iterdir() if p.name != "_metadata")


def test_spark_reads_kryo_values_as_columns(spark) -> None:
    df = (spark.read.format("flinkstate").options(operator="25492d42ba26e7848eb0810ec9b3dd63", state="order", kryoClasses=CLASSES)
          .load(str(FIXTURES / "1.20-rocksdb" / "savepoint")))
    assert df.schema["value"].dataType.simpleString() == (
        "struct<codes:array<int>,color:string,counts:map<string,bigint>,day:date,id:string,last:struct<at:bigint,text:string>,"
        "tags:array<string>,total:bigint>")
    row = df.where("key = 4").first()
    assert row["value"]["id"] == "o4" and row["value"]["total"] == 189 and sorted(row["value"]["codes"]) == [1, 2, 3, 4, 5, 6]
    totals = (spark.read.format("flinkstate").options(operator="25492d42ba26e7848eb0810ec9b3dd63", state="totals", kryoClasses=CLASSES)
              .load(str(FIXTURES / "1.20-rocksdb" / "savepoint")))
    assert totals.where("key = 4 and user_key = 'm0'").first()["value"] == {"n": 3, "sum": 78}


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
def test_spark_migration_equals_the_single_process_one(backend: str, spark, tmp_path: Path) -> None:
    """import and export --flink-version 2.3 as Spark jobs: the same keyed files byte for byte and the same _metadata
    as in one process (whose savepoint real Flink 2.3 restores: tests/flinkstate/flink/bridge/test_kryo_upgrade.py)."""
    sp = FIXTURES / f"1.20-{backend}" / "savepoint"
    spark_root, local_root = tmp_path / "spark-root", tmp_path / "local-root"
    import_savepoint(spark, sp, spark_root, uids=["upgrade"], kryo_classes=CLASSES)
    import_local(sp, local_root, uids=["upgrade"], kryo_classes=CLASSES)
    got = Path(export_savepoint(spark, str(spark_root), tmp_path / "spark", flink_version="2.3"))
    want = Path(export_local(str(local_root), tmp_path / "local", flink_version="2.3"))
    assert _normalized_metadata(got) == _normalized_metadata(want)
    assert _files(got) == _files(want)  # every keyed file byte for byte
    again = fs.open(str(got), kryo_classes=CLASSES)
    assert str(again.read_state("upgrade", "history").schema.field("value").type) == "list<item: int64>"
