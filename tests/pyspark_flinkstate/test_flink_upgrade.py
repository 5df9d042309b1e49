"""The upgrade path users take: a Flink 1.20 savepoint imported, changed with Spark, exported for 2.3, restored by 2.3."""

from __future__ import annotations

from pathlib import Path

import pytest
from fsc_helpers import delete_keys, flink_harness, state_per_kind

from flinkstate.cli import main

pytestmark = [pytest.mark.flink, pytest.mark.slow, pytest.mark.spark]

ROOT = Path(__file__).resolve().parents[2]
SAVEPOINT_1_20 = ROOT / "tests" / "fixtures" / "flink-1.20" / "canonical" / "savepoint"


def test_flink_1_20_savepoint_changed_in_spark_restores_in_flink_2_3(spark, tmp_path):
    """1.20 savepoint -> import -> Spark deletes keys 0-4 (from a state of each kind) and upserts count 5 -> export
    --flink-version 2.3 -> Flink 2.3 restores."""
    harness = flink_harness()
    original = harness.restore_and_dump(SAVEPOINT_1_20, tmp_path / "orig.txt", "hashmap", 1, version="1.20")
    assert len(original) > 500
    root = str(tmp_path / "root")
    uids = ["--uid", "long-keyed", "--uid", "string-keyed", "--uid", "opstate", "--uid", "bcast"]  # 1.x metadata holds only ids
    assert main(["import", str(SAVEPOINT_1_20), root, *uids]) == 0
    deleted = state_per_kind(root, "long-keyed") | {"count"}  # a Spark write each: a state of every kind, with and without TTL
    delete_keys(spark, root, "long-keyed", range(5), deleted)
    (spark.createDataFrame([(5, 424242)], "key long, value long").write.format("flinkstate")
     .options(operator="long-keyed", state="count").mode("append").save(root))
    counts = spark.read.format("flinkstate").options(operator="long-keyed", state="count").load(root)
    assert counts.where("key < 5").count() == 0 and counts.where("key = 5").first()["value"] == 424242
    dest = tmp_path / "sp-2.3"
    assert main(["export", root, str(dest), "--flink-version", "2.3"]) == 0
    expected = []
    for line in original:
        parts = line.split(" ")
        if parts[0] == "long-keyed" and parts[1] in deleted and parts[2] in {"0", "1", "2", "3", "4"}:
            continue  # deleted by Spark
        if parts[0] == "long-keyed" and parts[1] == "count" and parts[2] == "5":
            line = "long-keyed count 5 424242"
        expected.append(line)
    got = harness.restore_and_dump(dest, tmp_path / "dump.txt", "rocksdb", 2, version="2.3")
    assert len(expected) < len(original)
    assert got == sorted(expected)
