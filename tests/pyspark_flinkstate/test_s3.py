"""s3:// job roots through s3fs against a moto server: reads, writes and SQL."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

import flinkstate as fs
from fsc_helpers import N, build_job

pytestmark = [pytest.mark.spark, pytest.mark.s3]


def _opts(s3):
    return {f"storage.{k}": v for k, v in s3["storage_options"].items()}


def test_s3_read_write_sql(spark, s3):
    root = s3["root"]
    store = build_job(root, s3["storage_options"])
    r = spark.read.format("flinkstate").options(**_opts(s3)).option("operator", "sessions").option("state", "count")
    df = r.load(root)
    assert df.count() == N
    assert [(x.key, x.value) for x in df.where("key = 'u1'").collect()] == [("u1", 100)]
    (spark.createDataFrame([("s3key", 5)], "key string, value bigint").write.format("flinkstate").options(**_opts(s3))
     .option("operator", "sessions").option("state", "count").mode("append").save(root))
    assert store.latest_checkpoint_id() == 3
    assert store.read_state("sessions", "count").num_rows == N + 1
    so = json.dumps(s3["storage_options"]).replace("'", "")
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW s3cnt USING flinkstate OPTIONS (path '{root}', operator 'sessions', state 'count', storageOptions '{so}')")
    assert spark.sql("SELECT value FROM s3cnt WHERE key = 's3key'").collect()[0].value == 5
    files = spark.read.format("flinkstate").options(**_opts(s3)).option("table", "files").load(root)
    assert all(p.path.startswith("s3://") for p in files.collect())
    keys = s3["client"].list_objects_v2(Bucket=s3["bucket"], Prefix="job/shared/")["KeyCount"]
    assert keys > 0


def test_s3_first_write(spark, s3):
    root = s3["root"] + "-new"
    (spark.createDataFrame([(i, float(i)) for i in range(50)], "key int, value double").write.format("flinkstate").options(**_opts(s3))
     .option("operator", "o").option("state", "s").option("maxParallelism", "32").mode("overwrite").save(root))
    store = fs.open(root, s3["storage_options"])
    t = store.read_state("o", "s")
    assert t.num_rows == 50 and store.checkpoint().max_parallelism == 32
    assert store.state_descriptor("o", "s").key_type == pa.int32()
