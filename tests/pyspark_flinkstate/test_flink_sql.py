"""A Flink SQL job's state through Spark by the SQL's column names, and a key reset through Spark that Flink restores.

Fixture: tests/fixtures/flink-2.3-sql/agg-hashmap, a real Flink 2.3 job (`SELECT k, COUNT(*) AS cnt, SUM(v) AS total,
MAX(v) AS mx, AVG(CAST(v AS DOUBLE)) AS av FROM src GROUP BY k` over ids 0..1999, k = 'k' || id % 10) run from its
compiled plan (plan.json) and stopped with a savepoint after emitting emitted.txt.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from fsc_helpers import flink_harness, fmt

from flinkstate.flink.bridge.importer import import_savepoint
from flinkstate.flink.bridge.store_export import export_savepoint

pytestmark = pytest.mark.spark

CELL = Path(__file__).resolve().parents[1] / "fixtures" / "flink-2.3-sql" / "agg-hashmap"
SP, PLAN = CELL / "savepoint", CELL / "plan.json"
OP = "6_group-aggregate"  # the plan's node 6: GroupAggregate[6]


def _emitted() -> list[tuple]:
    out = []
    for line in (CELL / "emitted.txt").read_text(encoding="utf-8").splitlines():
        k, cnt, total, mx, av = line.split(", ")
        out.append((k, int(cnt), int(total), int(mx), float(av)))
    return sorted(out)


def test_spark_sql_over_a_group_aggregates_state_by_its_column_names(spark) -> None:
    df = fmt(spark, str(SP), operator=OP, state="accState", sqlPlan=str(PLAN))
    assert df.schema["key"].dataType.simpleString() == "struct<k:string>"
    df.createOrReplaceTempView("agg_state")
    rows = spark.sql("SELECT key.k AS k, value.cnt AS cnt, value.total AS total, value.mx AS mx, "
                     "value.av_sum / value.av_count AS av FROM agg_state ORDER BY k").collect()
    assert [tuple(r) for r in rows] == _emitted()
    # a key looked up through Spark by its column
    assert fmt(spark, str(SP), operator=OP, state="accState", sqlPlan=str(PLAN)).filter("key.k = 'k3'").count() == 1


@pytest.mark.flink
@pytest.mark.slow
def test_a_key_deleted_through_spark_restarts_its_aggregate_in_flink_and_the_others_continue(spark, tmp_path: Path) -> None:
    root = str(tmp_path / "root")
    report = import_savepoint(SP, root)
    assert report.as_bytes  # stored as the BinaryRowData Flink wrote: key groups and export stay exact
    # the key to reset, found by its column in the savepoint read in place, deleted from the imported state by Spark
    doomed = fmt(spark, str(SP), operator=OP, state="accState", sqlPlan=str(PLAN)).filter("key.k = 'k3'").select("key")
    assert doomed.count() == 1
    doomed.write.format("flinkstate").options(operator=OP, state="accState", operation="delete").mode("append").save(root)
    exported = export_savepoint(root, tmp_path / "exported")
    out = flink_harness().sql_restore("agg", Path(exported), PLAN, tmp_path / "restored")
    changelog = (out / "changelog.txt").read_text(encoding="utf-8").splitlines()
    at_savepoint = {k: cnt for k, cnt, *_ in _emitted()}
    first: dict[str, str] = {}
    final: dict[str, int] = {}
    for line in changelog:
        m = re.match(r"([+-][IUD])\[(k\d), (\d+),", line)
        assert m, line
        kind, k, cnt = m.group(1), m.group(2), int(m.group(3))
        first.setdefault(k, f"{kind} {cnt}")
        if kind in ("+I", "+U"):
            final[k] = cnt
    # k3 starts again from its first new row (an insert counting 1); every other group goes on from its count
    assert first["k3"] == "+I 1"
    assert all(first[k] == f"-U {at_savepoint[k]}" for k in first if k != "k3")
    assert final["k3"] == 200 - at_savepoint["k3"]
    assert {k: v for k, v in final.items() if k != "k3"} == {k: 200 for k in at_savepoint if k != "k3"}
