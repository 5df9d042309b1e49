"""State surgery on a real Flink savepoint with Spark: import, change through Spark, export, and real Flink 2.3 restores it.

The savepoint is the checked-in one real Flink 2.3 wrote (tests/fixtures/flink-2.3-canonical/files). Through Spark:
keys 0-4 deleted from a keyed state of `long-keyed` of each kind (value, list, map; with and without TTL), `count` of key 5 upserted, `last` of `string-keyed` overwritten,
a new operator `arrow` bootstrapped from DataFrames (struct, list, map and byte[] states), `string-keyed` renamed to
`sk2`, operator `bcast` removed, max parallelism 128 -> 300;
`SavepointWriter.write(flink_savepoint=...)` exports it. Flink restores it with the HashMap backend at parallelism 1 and
RocksDB at 2; its dump after restore is the original dump with exactly those changes.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fsc_helpers import delete_keys, flink_harness, state_per_kind

from flinkstate.flink.bridge.importer import import_savepoint

pytestmark = [pytest.mark.flink, pytest.mark.slow, pytest.mark.spark]

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "flink-2.3-canonical" / "files" / "savepoint"


def _expected(original: list[str], deleted: set[str]) -> list[str]:
    out = []
    for line in original:
        parts = line.split(" ")
        if parts[0] == "long-keyed" and parts[1] in deleted and parts[2] in {"0", "1", "2", "3", "4"}:
            continue  # deleted by Spark
        if parts[0] == "long-keyed" and parts[1] == "count" and parts[2] == "5":
            line = "long-keyed count 5 424242"
        if parts[0] == "string-keyed" and parts[1] == "last":
            continue  # overwritten by Spark
        if parts[0] == "bcast":
            continue  # operator removed
        if parts[0] == "string-keyed":
            line = "sk2" + line[len("string-keyed"):]
        out.append(line)
    return sorted(out + [
        "arrow profile k1 +I[1, x, 1.5]", "arrow profile ü2 +I[2, null, -0.25]",
        "arrow events k1 [3, 1, 2]",
        "arrow counts k1 a=3", "arrow counts k1 b=4", "arrow counts ü2 c=5",
        "arrow blob k1 [1, -1]",
        "sk2 last k0 new0", "sk2 last zz new-zz",
    ])


def test_spark_changes_on_imported_flink_savepoint_restore_in_flink(spark, tmp_path, canonical_flink_dump):
    from pyspark_flinkstate import SavepointWriter

    harness = flink_harness()
    original = list(canonical_flink_dump)  # FIXTURE restored by Flink (HashMap, parallelism 1)
    root = str(tmp_path / "root")
    import_savepoint(FIXTURE, root, raw_values=True)
    deleted = state_per_kind(root, "long-keyed")  # a Spark write each: one state of every kind, with and without TTL
    assert {"by_color", "ttl", "ttl_list"} <= deleted and len(deleted) >= 5
    delete_keys(spark, root, "long-keyed", range(5), deleted)
    (spark.createDataFrame([(5, 424242)], "key long, value long").write.format("flinkstate")
     .options(operator="long-keyed", state="count").mode("append").save(root))
    (spark.createDataFrame([("k0", "new0"), ("zz", "new-zz")], "key string, value string").write.format("flinkstate")
     .options(operator="string-keyed", state="last").mode("overwrite").save(root))
    profile = spark.createDataFrame([("k1", (1, "x", 1.5)), ("ü2", (2, None, -0.25))],
                                    "key string, value struct<id: long, name: string, score: double>")
    events = spark.createDataFrame([("k1", [3, 1, 2])], "key string, value array<long>")
    counts = spark.createDataFrame([("k1", "a", 3), ("k1", "b", 4), ("ü2", "c", 5)], "key string, user_key string, value int")
    blob = spark.createDataFrame([("k1", bytearray(b"\x01\xff"))], "key string, value binary")
    dest = tmp_path / "flink-sp"
    (SavepointWriter(spark, root)
        .with_state("arrow", "profile", profile)
        .with_state("arrow", "events", events, state_kind="list")
        .with_state("arrow", "counts", counts, state_kind="map")
        .with_state("arrow", "blob", blob)
        .rename_operator("string-keyed", "sk2")
        .remove_operator("bcast")
        .set_max_parallelism(300)
        .write(flink_savepoint=str(dest)))
    want = _expected(original, deleted)
    for backend, parallelism in (("hashmap", 1), ("rocksdb", 2)):
        got = harness.restore_and_dump(dest, tmp_path / f"dump-{backend}.txt", backend, parallelism, ("long-keyed", "sk2", "+arrow"))
        assert got == want, backend
