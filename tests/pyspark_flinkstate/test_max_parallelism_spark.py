"""Spark on operators with their own max parallelism: reads and key filters, writes, SavepointWriter per operator.

The job of fsc_helpers.build_job has two operators at 128; a Spark write adds one at 4096 (option
maxParallelism), SavepointWriter rescales one operator only, and every read hashes keys with the
operator's own value.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

import flinkstate as fs
from fsc_helpers import build_job, error_text, fmt
from fsc_helpers import check_key_groups as _check_key_groups

pytestmark = [pytest.mark.spark, pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning")]


def test_spark_writes_and_reads_each_operator_with_its_own_max_parallelism(spark, tmp_path):
    from pyspark_flinkstate import SavepointWriter

    root = str(tmp_path / "job")
    store = build_job(root)
    base = store.checkpoint()
    df = spark.createDataFrame([(i, i * 2) for i in range(300)], "key bigint, value bigint")
    opts = dict(operator="wide", state="n")
    df.write.format("flinkstate").options(**opts, maxParallelism="4096").mode("overwrite").save(root)  # a new operator
    ck = store.checkpoint()
    assert {u: ck.max_parallelism_of(u) for u in ck.operators} == {"sessions": 128, "carts": 128, "wide": 4096}
    assert ck.max_parallelism == base.max_parallelism == 128  # the default stays
    _check_key_groups(store.read_state("wide", "n"), 4096, pa.int64())
    row = fmt(spark, root, **opts).where("key = 299").collect()  # key pushdown hashes with 4096
    assert [(r.key, r.value, r.key_group) for r in row] == [(299, 598, fs.assign_key_group(299, 4096, pa.int64()))]
    spark.createDataFrame([(299, -1)], "key bigint, value bigint").write.format("flinkstate").options(**opts).mode("append").save(root)
    assert fmt(spark, root, **opts).where("key IN (299, 298)").orderBy("key").collect()[1].value == -1
    with pytest.raises(Exception) as e:  # an existing operator keeps its own
        df.write.format("flinkstate").options(**opts, maxParallelism="256").mode("append").save(root)
    assert "maxParallelism=256 differs from operator 'wide'" in error_text(e)
    ops = fmt(spark, root, table="operators").collect()
    assert {r.operator: r.max_parallelism for r in ops} == {"sessions": 128, "carts": 128, "wide": 4096}
    changes = fmt(spark, root, **opts, table="changes").collect()
    assert [(r.key, r.value, r.change_type) for r in changes] == [(299, -1, "upsert")]

    before_sessions = {e.path for e in store.checkpoint().entries if e.operator == "sessions"}
    count_before = store.read_state("carts", "items")
    info = SavepointWriter(spark, root).set_max_parallelism(512, "carts").write()
    ck = store.checkpoint(info.checkpoint_id)
    assert {u: ck.max_parallelism_of(u) for u in ck.operators} == {"sessions": 128, "carts": 512, "wide": 4096}
    assert {e.path for e in ck.entries if e.operator == "sessions"} == before_sessions  # not touched
    items = store.read_state("carts", "items")
    _check_key_groups(items, 512, store.state_descriptor("carts", "items").key_type)
    assert sorted(items.drop_columns(["key_group"]).to_pylist(), key=str) == sorted(count_before.drop_columns(["key_group"]).to_pylist(), key=str)
    with_state = (SavepointWriter(spark, root).set_max_parallelism(1024, "fresh")
                  .with_state("fresh", "n", spark.createDataFrame([(1, 1)], "key bigint, value bigint")).write())
    assert store.checkpoint(with_state.checkpoint_id).max_parallelism_of("fresh") == 1024
