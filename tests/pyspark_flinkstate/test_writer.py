"""Writing state with df.write.format("flinkstate"): modes, first write, savepoints, failures, conflicts."""

from __future__ import annotations

import datetime as dt
import decimal
import os

import pyarrow as pa
import pytest

import flinkstate as fs
from fsc_helpers import build_job, error_text, fmt

pytestmark = pytest.mark.spark


def _w(df, root, mode="append", **opts):
    w = df.write.format("flinkstate").mode(mode)
    for k, v in opts.items():
        w = w.option(k, v)
    w.save(root)


def _data_files(root):
    out = set()
    for d, _, files in os.walk(root):
        if "_flinkstate" in d:
            continue
        out.update(os.path.join(d, f) for f in files if f.endswith(".parquet"))
    return out


NESTED = "key string, value struct<name:string, tags:array<string>, score:decimal(10,2), seen:timestamp, attrs:map<string,int>>"


def _nested_rows(n):
    return [(f"k{i}", (f"n{i}", [f"t{i}", "x"], decimal.Decimal(f"{i}.50"), dt.datetime(2024, 5, 1, 12, 0, i % 60), {"a": i})) for i in range(n)]


def test_first_write_creates_root_value_roundtrip(spark, tmp_path):
    root = str(tmp_path / "new")
    df = spark.createDataFrame(_nested_rows(300), NESTED).repartition(3)
    _w(df, root, "overwrite", operator="op", state="prof")
    store = fs.open(root)
    info = store.checkpoint()
    assert info.checkpoint_id == 1 and info.max_parallelism == 128
    desc = store.state_descriptor("op", "prof")
    assert desc.kind == "value" and desc.key_type == pa.string()
    assert desc.value_type.field("score").type == pa.decimal128(10, 2)
    back = fmt(spark, root, operator="op", state="prof")
    assert sorted(tuple(r.value.asDict().values())[:3] + (r.key,) for r in back.collect()) == sorted(
        (n, t, s, k) for k, (n, t, s, _, _) in _nested_rows(300))
    one = back.where("key = 'k7'").collect()[0]
    assert one.value.attrs == {"a": 7} and one.value.seen.replace(tzinfo=None) == dt.datetime(2024, 5, 1, 12, 0, 7)
    assert one.key_group == fs.assign_key_group("k7", 128)


def test_max_parallelism_option_and_list_map_roundtrip(spark, tmp_path):
    root = str(tmp_path / "lm")
    items = spark.createDataFrame([(1, ("a", 1)), (1, ("b", 2)), (2, ("c", 3)), (1, ("d", 4)), (3, ("e", 5))],
                                  "key bigint, value struct<sku:string, qty:int>").repartition(3)
    _w(items, root, "overwrite", operator="op", state="items", stateKind="list", maxParallelism="64")
    assert fs.open(root).checkpoint().max_parallelism == 64
    got = {r.key: sorted(x.sku for x in r.value) for r in fmt(spark, root, operator="op", state="items", flattenCollections="false").collect()}
    assert got == {1: ["a", "b", "d"], 2: ["c"], 3: ["e"]}
    assert fmt(spark, root, operator="op", state="items").count() == 5
    # unflattened input (arrays) with listMode=overwrite replaces whole lists
    _w(spark.createDataFrame([(2, [("z", 9), ("y", 8)])], "key bigint, value array<struct<sku:string, qty:int>>"), root,
       operator="op", state="items", listMode="overwrite")
    got = {r.key: [x.sku for x in r.value] for r in fmt(spark, root, operator="op", state="items", flattenCollections="false").collect()}
    assert got[2] == ["z", "y"] and sorted(got[1]) == ["a", "b", "d"]
    m = spark.createDataFrame([("u", "k1", [1.0]), ("u", "k2", [2.0]), ("v", "k1", [3.0])], "key string, user_key string, value array<double>")
    _w(m, root, "overwrite", operator="op", state="m")
    assert fs.open(root).state_descriptor("op", "m").kind == "map"
    got = {(r.key, r.user_key): r.value for r in fmt(spark, root, operator="op", state="m").collect()}
    assert got == {("u", "k1"): [1.0], ("u", "k2"): [2.0], ("v", "k1"): [3.0]}
    _w(spark.createDataFrame([("u", "k2")], "key string, user_key string"), root, operator="op", state="m", operation="delete")
    got = {(r.key, r.user_key) for r in fmt(spark, root, operator="op", state="m").collect()}
    assert got == {("u", "k1"), ("v", "k1")}


def test_overwrite_append_delete_and_carry_over(spark, tmp_path):
    root = str(tmp_path / "job")
    store = build_job(root)
    before_profile = store.read_state("sessions", "profile")
    _w(spark.createDataFrame([("a", 1), ("b", 2)], "key string, value bigint"), root, "overwrite", operator="sessions", state="count")
    assert sorted((r.key, r.value) for r in fmt(spark, root, operator="sessions", state="count").collect()) == [("a", 1), ("b", 2)]
    _w(spark.createDataFrame([("b", 20), ("c", 3)], "key string, value bigint"), root, operator="sessions", state="count")
    _w(spark.createDataFrame([("a",)], "key string"), root, operator="sessions", state="count", operation="delete")
    assert sorted((r.key, r.value) for r in fmt(spark, root, operator="sessions", state="count").collect()) == [("b", 20), ("c", 3)]
    # the appended rows are delta files (incremental), other states carried by reference
    kinds = {e.kind for e in store.state_files("sessions", "count")}
    assert "delta" in kinds
    assert store.read_state("sessions", "profile").equals(before_profile)
    prof_paths = {e.path for e in store.state_files("sessions", "profile")}
    assert prof_paths == {e.path for e in store.state_files("sessions", "profile", 1)}
    assert [c.checkpoint_id for c in store.checkpoints()] == [1, 2, 3, 4, 5]


def test_savepoint_is_self_contained(spark, tmp_path):
    root = str(tmp_path / "sp")
    store = build_job(root)
    _w(spark.createDataFrame([("x", 1)], "key string, value bigint"), root, operator="sessions", state="count", savepoint="true")
    info = store.checkpoint()
    assert info.kind == "savepoint"
    assert all(e.path.startswith(f"savepoints/sp-{info.checkpoint_id:010d}/") for e in store.files(info.checkpoint_id))
    assert fmt(spark, root, operator="sessions", state="count").where("key = 'x'").count() == 1
    kinds = {r.kind for r in fmt(spark, root, table="checkpoints").collect()}
    assert kinds == {"checkpoint", "savepoint"}


def test_type_mismatch_is_refused(spark, tmp_path):
    root = str(tmp_path / "tm")
    build_job(root)
    with pytest.raises(Exception) as ei:
        _w(spark.createDataFrame([("a", "not a number")], "key string, value string"), root, operator="sessions", state="count")
    assert "value" in error_text(ei) and "int64" in error_text(ei)
    with pytest.raises(Exception) as ei:
        _w(spark.createDataFrame([("a", 1, 2)], "key string, value bigint, extra int"), root, operator="sessions", state="count")
    assert "extra" in error_text(ei)
    with pytest.raises(Exception) as ei:
        _w(spark.createDataFrame([("a",)], "key string"), root, operator="sessions", state="nope", operation="delete")
    assert "nope" in error_text(ei) and "count" in error_text(ei)
    with pytest.raises(Exception) as ei:
        _w(spark.createDataFrame([("a", 1)], "key string, value bigint"), root, operator="sessions", state="count", stateKind="heap")
    assert "stateKind" in error_text(ei) and "value, list, map" in error_text(ei)
    assert [c.checkpoint_id for c in fs.open(root).checkpoints()] == [1, 2]


@pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning")  # F.udf checks the pandas version
def test_failed_job_leaves_no_visible_change(spark, tmp_path):
    from pyspark.sql import functions as F

    root = str(tmp_path / "fail")
    store = build_job(root)
    files_before = _data_files(root)

    @F.udf("bigint")
    def boom(v):
        if v == 77:
            raise RuntimeError("task failure on purpose")
        return v

    df = spark.range(0, 200, numPartitions=4).select(F.concat(F.lit("k"), F.col("id").cast("string")).alias("key"), boom(F.col("id")).alias("value"))
    with pytest.raises(Exception) as ei:
        _w(df, root, "overwrite", operator="sessions", state="count")
    assert "task failure on purpose" in error_text(ei)
    assert [c.checkpoint_id for c in store.checkpoints()] == [1, 2]
    assert fmt(spark, root, operator="sessions", state="count").count() == 200
    # abort() removed the files of the tasks that finished before it; a task Spark was still
    # cancelling may finish writing after it (Spark's abort contract allows that): such files
    # belong to no checkpoint, and the registry deletes them once later checkpoints complete
    leftover = _data_files(root) - files_before
    referenced = {os.path.join(root, e.path) for c in store.checkpoints() for e in store.files(c.checkpoint_id)}
    assert not leftover & referenced
    good = spark.createDataFrame([("k1", 1)], "key string, value bigint")
    _w(good, root, "append", operator="sessions", state="count")
    _w(good, root, "append", operator="sessions", state="count")
    store.retain(10)
    assert not leftover & _data_files(root)


def test_concurrent_rewrites_one_commits_other_conflicts(tmp_path):
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    from pyspark_flinkstate.writer import commit_plan, plan_write, write_partition

    root = str(tmp_path / "cc")
    store = build_job(root)
    schema = StructType([StructField("key", StringType()), StructField("value", LongType())])
    opts = {"path": root, "operator": "sessions", "state": "count"}
    a = plan_write(opts, schema, False)
    b = plan_write(opts, schema, True)
    assert a.checkpoint_id == b.checkpoint_id == 3
    ma = write_partition(a, iter([pa.record_batch({"key": ["a"], "value": pa.array([1], pa.int64())})]), 0)
    mb = write_partition(b, iter([pa.record_batch({"key": ["b"], "value": pa.array([2], pa.int64())})]), 0)
    commit_plan(a, [ma])
    with pytest.raises(fs.CommitConflictError):
        commit_plan(b, [mb])
    assert [c.checkpoint_id for c in store.checkpoints()] == [1, 2, 3]
    assert not any(store.io.exists(e.path) for e in mb.entries)
    assert all(store.io.exists(e.path) for e in ma.entries)
    t = store.read_state("sessions", "count")
    assert "a" in t.column("key").to_pylist() and "b" not in t.column("key").to_pylist()


@pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning")  # F.udf checks the pandas version
def test_concurrent_commit_during_spark_write_conflicts(spark, tmp_path):
    """A commit that lands while a Spark write runs makes that write fail; nothing of it is visible."""
    from pyspark.sql import functions as F

    root = str(tmp_path / "race")
    store = build_job(root)
    files_before = _data_files(root)

    @F.udf("bigint")
    def interfere(v):
        import pyarrow as pa

        import flinkstate as fs

        if v == 0:  # one task commits a checkpoint of its own while the job runs
            s = fs.open(root)
            with s.begin() as w:
                w.put_state("other", fs.ValueStateDescriptor(name="x", value_type=pa.int64()),
                            pa.table({"key": ["q"], "value": pa.array([1], pa.int64())}))
        return v

    df = spark.range(0, 10, numPartitions=1).select(F.lit("k").alias("key"), interfere(F.col("id")).alias("value"))
    with pytest.raises(Exception) as ei:
        _w(df, root, operator="sessions", state="count")
    assert "CommitConflictError" in error_text(ei) or "already committed" in error_text(ei)
    assert [c.checkpoint_id for c in store.checkpoints()] == [1, 2, 3]
    assert "other" in store.metadata(3).operators
    new_files = _data_files(root) - files_before
    assert all("/other/" in p for p in new_files)
