"""Spark over a real Flink savepoint stored on S3 (moto): `load("s3://...")` with storage options."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import flinkstate as fs

pytestmark = [pytest.mark.spark, pytest.mark.s3]

SP = Path(__file__).resolve().parents[1] / "fixtures" / "flink-2.3-canonical" / "files" / "savepoint"


def _upload(client, bucket: str, local: Path, prefix: str) -> None:
    for dirpath, _, names in os.walk(local):
        for n in names:
            p = os.path.join(dirpath, n)
            client.upload_file(p, bucket, f"{prefix}/{os.path.relpath(p, local)}")


def test_spark_reads_a_flink_savepoint_on_s3(spark, s3):
    _upload(s3["client"], s3["bucket"], SP, "sp")
    url = f"s3://{s3['bucket']}/sp"
    opts = {f"storage.{k}": v for k, v in s3["storage_options"].items()}
    local = fs.open(str(SP))
    for op, state in (("long-keyed", "count"), ("string-keyed", "map")):
        df = spark.read.format("flinkstate").options(**opts).option("operator", op).option("state", state).load(url)
        lib = local.read_state(op, state)
        assert sorted(map(str, (r.asDict(recursive=True) for r in df.collect()))) == \
            sorted(map(str, ({c: r[c] for c in df.columns} for r in lib.to_pylist()))), (op, state)
    ops = {r.operator for r in spark.read.format("flinkstate").options(**opts).option("table", "operators").load(url).collect()}
    assert {"long-keyed", "string-keyed"} <= ops


def test_spark_key_filter_on_a_flink_savepoint_plans_only_its_key_groups(spark, s3):
    _upload(s3["client"], s3["bucket"], SP, "sp")
    url = f"s3://{s3['bucket']}/sp"
    opts = {f"storage.{k}": v for k, v in s3["storage_options"].items()}
    src = fs.open(url, s3["storage_options"])
    df = spark.read.format("flinkstate").options(**opts).option("operator", "long-keyed").option("state", "count").load(url)
    got = [(r.key, r.value) for r in df.where("key IN (7, 8)").collect()]
    want = src.read_state("long-keyed", "count", keys=[7, 8])
    assert sorted(got) == sorted(zip(want.column("key").to_pylist(), want.column("value").to_pylist(), strict=True))
    # the same scan the connector plans for that filter: one task per handle holding 7 or 8, reading their key groups only
    scan = src.checkpoint().scan("long-keyed", "count", keys=[7, 8])
    kgs = {fs.assign_key_group(k, 128, __import__("pyarrow").int64()) for k in (7, 8)}
    assert all(set(t.key_groups) <= kgs for t in scan.plan())
    before = src.files.bytes_read
    assert sum(b.num_rows for t in scan.plan() for b in t.to_batches()) == want.num_rows
    assert src.files.bytes_read - before < sum(
        s.managed_keyed.stream.size for s in src.checkpoint().meta.operator("long-keyed").subtasks if s.managed_keyed)
