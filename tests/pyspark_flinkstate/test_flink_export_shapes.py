"""Issue 42's round trip with real Flink: import -> one Spark change -> export -> Flink restores it, and its dump shows
exactly that change; every state nobody changed is written back byte for byte (flinkjobs/src/ShapesJob.java: Tuple2
operator list state, POJO union state, broadcast state of enum keys and POJO values, Tuple, POJO, enum, Row and Kryo
keyed states; checked-in savepoints of tests/fixtures/flink-shapes, their dump.txt what the job held)."""

from __future__ import annotations

from pathlib import Path

import pytest
from fsc_helpers import flink_harness
from savepoint_bytes import read_savepoint_bytes

from flinkstate.cli import main

pytestmark = [pytest.mark.flink, pytest.mark.slow, pytest.mark.spark]

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "flink-shapes"
DUMP = (FIXTURES / "dump.txt").read_text(encoding="utf-8").splitlines()


def untouched_identical(original: Path, export: Path, changed: set[str]) -> None:
    """Every state but `changed` the same bytes (records per key group as sets: HashMap savepoints order them by hash)."""
    a, b = read_savepoint_bytes(str(original)), read_savepoint_bytes(str(export))
    assert (a.key_serializers, a.keyed_serializers, a.operator_serializers, a.coordinators) == \
        (b.key_serializers, b.keyed_serializers, b.operator_serializers, b.coordinators)
    for k in a.records:
        if k[1] not in changed:
            assert {kg: sorted(r) for kg, r in a.records[k].items()} == {kg: sorted(r) for kg, r in b.records[k].items()}, k
    assert a.elements == b.elements


def test_spark_upsert_of_a_pojo_state_restores_with_exactly_that_change(spark, tmp_path: Path) -> None:
    """Flink 2.3: a Spark upsert of one key's POJO value; Flink restores the export on RocksDB at parallelism 3."""
    src = FIXTURES / "2.3-hashmap" / "savepoint"
    root = str(tmp_path / "root")
    assert main(["import", str(src), root]) == 0
    schema = "key string, value struct<color:string, inner:struct<label:string, weight:double>, x:bigint, y:bigint>"
    (spark.createDataFrame([("k3", ("BLUE", ("changed", 0.5), 7, 8))], schema).write.format("flinkstate")
     .options(operator="shapes", state="point").mode("append").save(root))
    dest = tmp_path / "export"
    assert main(["export", root, str(dest)]) == 0
    untouched_identical(src, dest, {"point"})
    got = flink_harness().shapes_restore(dest, tmp_path / "dump.txt", "rocksdb", 3)
    expected = sorted([line for line in DUMP if not line.startswith("shapes point k3 ")] + ["shapes point k3 Point(7,8,BLUE,Inner(changed,0.5))"])
    assert got == expected


def test_spark_delete_by_key_restores_without_that_key(spark, tmp_path: Path) -> None:
    """Flink 1.20: Spark deletes key k5 from a map state (enum keys, POJO values) and from a list state (of Tuple3) by
    key alone; Flink 1.20 restores the export (HashMap, parallelism 2) with exactly those entries gone."""
    src = FIXTURES / "1.20-hashmap" / "savepoint"
    root = str(tmp_path / "root")
    assert main(["import", str(src), root, *[a for u in ("shapes", "rules", "split", "source") for a in ("--uid", u)]]) == 0
    for state in ("by_color", "history"):
        (spark.createDataFrame([("k5",)], "key string").write.format("flinkstate")
         .options(operator="shapes", state=state, operation="delete").mode("append").save(root))
    dest = tmp_path / "export"
    assert main(["export", root, str(dest), "--flink-version", "1.20"]) == 0
    untouched_identical(src, dest, {"by_color", "history"})
    got = flink_harness().shapes_restore(dest, tmp_path / "dump.txt", "hashmap", 2, version="1.20")
    gone = [line for line in DUMP if line.startswith(("shapes by_color k5 ", "shapes history k5 "))]
    assert len(gone) == 5  # four colors and the list
    assert got == [line for line in DUMP if line not in gone]
