"""Reading checkpoints through Spark: state, timers, metadata, SQL, time travel, pushdown, errors."""

from __future__ import annotations

import os
import subprocess
import sys

import pyarrow as pa
import pytest

import flinkstate as fs
from fsc_helpers import COUNT, N, error_text, fmt, list_rows, map_rows, value_rows

pytestmark = pytest.mark.spark


def test_discovered_without_register(spark, job):
    import pyspark_flinkstate

    # what Spark's lookup worker does, in a fresh interpreter with the workers' environment
    code = "import pkgutil; print('pyspark_flinkstate' in {m.name for m in pkgutil.iter_modules()})"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "True"
    assert pyspark_flinkstate.DefaultSource.name() == "flinkstate"
    # no register call anywhere: Spark finds the module by itself
    assert fmt(spark, job, operator="sessions", state="count").count() == N + 1 - 1


def test_value_state_nested_types(spark, job):
    df = fmt(spark, job, operator="sessions", state="profile")
    assert df.columns == ["key", "value", "key_group"]
    assert [f.nullable for f in df.schema.fields] == [False, True, False]  # keys and key groups are never null
    assert df.schema["value"].dataType.simpleString() == "struct<name:string,tags:array<string>,score:decimal(10,2),seen:timestamp>"
    rows = {r.key: r for r in df.collect()}
    expected = value_rows()
    assert len(rows) == N
    for rec in expected.to_pylist()[:20]:
        got = rows[rec["key"]]
        v = got.value.asDict()
        assert v["name"] == rec["value"]["name"] and v["tags"] == rec["value"]["tags"] and v["score"] == rec["value"]["score"]
        assert v["seen"].replace(tzinfo=None) == rec["value"]["seen"].replace(tzinfo=None)
        assert got.key_group == fs.assign_key_group(rec["key"], 128)


def test_list_state_flattened_and_not(spark, job):
    flat = fmt(spark, job, operator="carts", state="items")
    assert flat.columns == ["key", "value", "key_group"]
    expected = list_rows()
    assert flat.count() == sum(len(v) for v in expected.column("value").to_pylist())
    whole = fmt(spark, job, operator="carts", state="items", flattenCollections="false")
    got = {r.key: [x.asDict() for x in r.value] for r in whole.collect()}
    assert got == {r["key"]: r["value"] for r in expected.to_pylist()}


def test_map_state_flattened_and_not(spark, job):
    flat = fmt(spark, job, operator="carts", state="attrs")
    assert flat.columns == ["key", "user_key", "value", "key_group"]
    exp = map_rows().to_pylist()
    got = {(r.key, r.user_key): r.value for r in flat.collect()}
    assert got == {(r["key"], r["user_key"]): dict(r["value"]) for r in exp}
    whole = fmt(spark, job, operator="carts", state="attrs", flattenCollections="false").collect()
    assert len(whole) == 30
    one = [r for r in whole if r.key == "u2"][0]
    assert set(one.value) == {"a0", "a1", "a2"}


def test_time_travel(spark, job):
    latest = {r.key: r.value for r in fmt(spark, job, operator="sessions", state="count").collect()}
    first = {r.key: r.value for r in fmt(spark, job, operator="sessions", state="count", checkpointId=1).collect()}
    assert first["u1"] == 1 and latest["u1"] == 100 and latest["new"] == 7
    assert "u3" in first and "u3" not in latest
    assert len(first) == N and len(latest) == N  # +new -u3


def test_timers_and_pushdown_on_timestamp(spark, job):
    t = fmt(spark, job, operator="sessions", table="timers")
    assert t.columns == ["key", "timestamp", "domain", "timer_service", "key_group"]
    assert [f.name for f in t.schema.fields if not f.nullable] == ["key", "key_group"]
    assert t.count() == N
    due = t.where("timestamp >= 5000 and timestamp < 10000").collect()
    assert sorted(r.key for r in due) == sorted(f"u{i}" for i in range(5, 10))
    assert {r.domain for r in due} == {"event"} and {r.timer_service for r in due} == {"expiry"}


def test_sql_temp_view_and_joins(spark, job):
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW prof USING flinkstate OPTIONS (path '{job}', operator 'sessions', state 'profile')")
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW cnt USING flinkstate OPTIONS (path '{job}', operator 'sessions', state 'count')")
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW tim USING flinkstate OPTIONS (path '{job}', operator 'sessions', table 'timers')")
    joined = spark.sql("SELECT p.key, p.value.name AS name, c.value AS n FROM prof p JOIN cnt c ON p.key = c.key WHERE c.value >= 100").collect()
    assert sorted((r.key, r.name, r.n) for r in joined) == sorted([(f"u{i}", f"n{i}", i) for i in range(100, N)] + [("u1", "n1", 100), ("u2", "n2", 200)])
    due = spark.sql("SELECT c.key, c.value, t.timestamp FROM cnt c JOIN tim t ON c.key = t.key WHERE t.timestamp < 3000").collect()
    assert sorted((r.key, r.value) for r in due) == [("u0", 0), ("u1", 100), ("u2", 200)]


def test_metadata_tables(spark, job):
    cps = fmt(spark, job, table="checkpoints").orderBy("checkpoint_id").collect()
    assert [c.checkpoint_id for c in cps] == [1, 2]
    assert {c.kind for c in cps} == {"checkpoint"} and {c.status for c in cps} == {"completed"}
    assert all(c.max_parallelism == 128 and c.bytes > 0 and c.created_at is not None for c in cps)
    files = fmt(spark, job, table="files", checkpointId=2).collect()
    store = fs.open(job)
    assert len(files) == len(store.files(2))
    assert all(f.path.startswith("file://") and os.path.exists(f.path[len("file://"):]) for f in files)
    assert {f.kind for f in files} == {"full", "delta", "timers-full"}
    deltas = [f for f in files if f.kind == "delta"]
    assert all(f.created_by_checkpoint_id == 2 and f.state == "count" for f in deltas)
    all_files = fmt(spark, job, table="files")
    assert set(r.checkpoint_id for r in all_files.select("checkpoint_id").distinct().collect()) == {1, 2}
    states = {(r.operator, r.state): r for r in fmt(spark, job, table="states", checkpointId=1).collect()}
    assert states[("sessions", "profile")].state_kind == "value" and states[("sessions", "profile")].key_type == "string"
    assert states[("carts", "items")].state_kind == "list" and states[("carts", "attrs")].state_kind == "map"
    assert states[("sessions", "expiry")].state_kind == "timers-event"
    assert states[("sessions", "count")].rows == N and states[("sessions", "count")].ttl is None


def test_partitions_follow_key_group_ranges(spark, tmp_path):
    root = str(tmp_path / "ranges")
    store = fs.open(root)
    t = pa.table({"key": [f"k{i}" for i in range(2000)], "value": pa.array(range(2000), pa.int64())})
    ranges = [fs.key_group_range(128, 4, i) for i in range(4)]
    with store.begin() as w:
        w.put_state("op", COUNT, t, ranges=ranges)
    df = fmt(spark, root, operator="op", state="count")
    assert df.count() == 2000
    from pyspark_flinkstate.reader import plan_ranges

    assert plan_ranges(store.state_files("op", "count"), 128, target_rows=700) == ranges
    split = plan_ranges(store.state_files("op", "count"), 128, target_rows=100)
    assert len(split) > 4 and split[0][0] == 0 and split[-1][1] == 127
    assert all(a[1] + 1 == b[0] for a, b in zip(split, split[1:]))
    assert all(any(r[0] <= s[0] and s[1] <= r[1] for r in ranges) for s in split)  # never across a file's range
    assert plan_ranges(store.state_files("op", "count"), 128) == [(0, 127)]  # small: combined


def _point_setup(root: str) -> tuple[fs.CheckpointStore, str, int]:
    store = fs.open(root)
    t = pa.table({"key": [f"k{i}" for i in range(3000)], "value": pa.array(range(3000), pa.int64())})
    with store.begin() as w:
        w.put_state("op", COUNT, t, ranges=[(i, i) for i in range(128)])
    key = "k1234"
    return store, key, fs.assign_key_group(key, 128)


def test_point_query_reads_only_its_key_group(spark, tmp_path):
    from pyspark.sql.datasource import EqualTo, In

    from pyspark_flinkstate.reader import FlinkStatePushdownReader
    from pyspark_flinkstate.resolve import output_columns, resolve
    from pyspark_flinkstate.schema import spark_schema

    root = str(tmp_path / "point")
    store, key, kg = _point_setup(root)
    # planning: one partition, one file
    res = resolve({"path": root, "operator": "op", "state": "count"})
    reader = FlinkStatePushdownReader(res, spark_schema(output_columns(res)))
    f = EqualTo(("key",), key)
    assert list(reader.pushFilters([f])) == []
    parts = reader.partitions()
    assert len(parts) == 1 and [(e.key_group_start, e.key_group_end) for e in parts[0].task.entries] == [(kg, kg)]
    reader2 = FlinkStatePushdownReader(res, spark_schema(output_columns(res)))
    other = In(("key",), ("k1", "k2"))
    assert list(reader2.pushFilters([other])) == []
    assert len(reader2.partitions()) == len({fs.assign_key_group("k1", 128), fs.assign_key_group("k2", 128)})
    # execution: corrupt every other file; the point query still succeeds, a full scan cannot
    for e in store.state_files("op", "count"):
        if e.key_group_start != kg:
            with open(store.io.fs_path(e.path), "wb") as fh:
                fh.write(b"not parquet")
    got = fmt(spark, root, operator="op", state="count").where(f"key = '{key}'").collect()
    assert [(r.key, r.value, r.key_group) for r in got] == [(key, 1234, kg)]
    with pytest.raises(Exception) as ei:
        fmt(spark, root, operator="op", state="count").count()
    assert "unreadable" in error_text(ei) or "CorruptFileError" in error_text(ei)


def test_key_group_filter_prunes(spark, tmp_path):
    root = str(tmp_path / "kgp")
    store, _, _ = _point_setup(root)
    for e in store.state_files("op", "count"):
        if e.key_group_start > 10:
            os.remove(store.io.fs_path(e.path))
    df = fmt(spark, root, operator="op", state="count").where("key_group BETWEEN 3 AND 10")
    rows = df.collect()
    assert rows and all(3 <= r.key_group <= 10 for r in rows)
    assert len(rows) == sum(1 for i in range(3000) if 3 <= fs.assign_key_group(f"k{i}", 128) <= 10)


def test_pushdown_disabled_still_works(spark, job):
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "false")
    try:
        rows = fmt(spark, job, operator="sessions", state="count").where("key = 'u1'").collect()
        assert [(r.key, r.value) for r in rows] == [("u1", 100)]
        assert fmt(spark, job, operator="sessions", table="timers").where("timestamp < 2000").count() == 2
    finally:
        spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")


def test_ttl_hiding_include_expired_reference_time(spark, tmp_path):
    root = str(tmp_path / "ttl")
    store = fs.open(root)
    d = fs.ValueStateDescriptor(name="s", key_type=pa.string(), value_type=pa.int64(), ttl=fs.StateTtlConfig(ttl_ms=1000))
    ld = fs.ListStateDescriptor(name="l", key_type=pa.string(), value_type=pa.int64(), ttl=fs.StateTtlConfig(ttl_ms=1000))
    now = 10_000_000_000_000  # far future: nothing written "now" is expired judged at the checkpoint's time
    with store.begin() as w:
        w.put_state("op", d, pa.table({"key": ["old", "fresh"], "value": pa.array([1, 2], pa.int64()),
                                       "ttl_timestamp": pa.array([0, now], pa.int64())}))
        w.put_state("op", ld, pa.table({"key": ["a"], "value": pa.array([[1, 2]], pa.list_(pa.int64())),
                                        "ttl_timestamp": pa.array([[0, now]], pa.list_(pa.int64()))}))
    df = fmt(spark, root, operator="op", state="s")
    assert df.columns == ["key", "value", "key_group", "ttl_expires_at"]
    assert [r.key for r in df.collect()] == ["fresh"]
    allr = {r.key: r.expired for r in fmt(spark, root, operator="op", state="s", includeExpired="true").collect()}
    assert allr == {"old": True, "fresh": False}
    # judged at epoch 500 ms: nothing has expired yet
    assert sorted(r.key for r in fmt(spark, root, operator="op", state="s", ttlReferenceTime="500").collect()) == ["fresh", "old"]
    assert [r.key for r in fmt(spark, root, operator="op", state="s", ttlReferenceTime="now").collect()] == ["fresh"]
    assert [r.value for r in fmt(spark, root, operator="op", state="l").collect()] == [2]
    assert [r.value for r in fmt(spark, root, operator="op", state="l", flattenCollections="false").collect()] == [[2]]


def test_operator_state_table(spark, tmp_path):
    root = str(tmp_path / "ops")
    store = fs.open(root)
    od = fs.OperatorStateDescriptor(name="offsets", value_type=pa.int64())
    with store.begin() as w:
        w.put_operator_state("src", od, pa.table({"subtask": pa.array([0, 1], pa.int32()), "value": pa.array([10, 20], pa.int64())}))
    rows = fmt(spark, root, operator="src", table="operatorState", state="offsets").orderBy("subtask").collect()
    assert [(r.subtask, r.value) for r in rows] == [(0, 10), (1, 20)]


BAD = [
    ({"operator": "nope", "state": "count"}, ["nope", "sessions", "carts"]),
    ({"operator": "sessions", "state": "nope"}, ["nope", "count", "profile"]),
    ({"operator": "sessions", "state": "count", "checkpointId": "99"}, ["99", "[1, 2]"]),
    ({"operator": "sessions", "state": "count", "checkpointId": "abc"}, ["checkpointId", "abc"]),
    ({"operator": "sessions", "state": "count", "table": "bogus"}, ["bogus", "timers", "checkpoints"]),
    ({"operator": "sessions", "table": "changes", "state": "count", "fromCheckpointId": "x1"}, ["fromCheckpointId", "x1"]),
    ({"operator": "sessions", "table": "changes", "state": "count", "fromCheckpointId": "2", "toCheckpointId": "1"},
     ["InvalidArgumentError", "'fromCheckpointId' 2 is after 'toCheckpointId' 1"]),
    ({"operator": "sessions", "state": "count", "flattenCollections": "maybe"}, ["flattenCollections", "maybe"]),
    ({"operator": "sessions", "state": "count", "nonsense": "1"}, ["nonsense", "checkpointId"]),
    ({"operator": "sessions"}, ["state", "count", "profile"]),
    ({"state": "count"}, ["operator", "carts", "sessions"]),
    ({"operator": "sessions", "table": "timers", "state": "nope"}, ["nope", "expiry"]),
    ({"operator": "sessions", "state": "count", "ttlReferenceTime": "yesterday"}, ["ttlReferenceTime", "yesterday"]),
]


@pytest.mark.parametrize(("opts", "words"), BAD, ids=[str(i) for i in range(len(BAD))])
def test_bad_options_fail_at_planning(spark, job, opts, words):
    with pytest.raises(Exception) as ei:
        fmt(spark, job, **opts)  # load() plans: no action needed
    text = error_text(ei)
    for w in words:
        assert w in text, (w, text[:2000])


def test_empty_root_is_a_clear_error(spark, tmp_path):
    with pytest.raises(Exception) as ei:
        fmt(spark, str(tmp_path / "empty"), operator="a", state="b")
    assert "no committed checkpoint" in error_text(ei)


def test_changes_table_equals_difference(spark, job):
    ch = fmt(spark, job, table="changes", operator="sessions", state="count", fromCheckpointId=1, toCheckpointId=2).collect()
    got = sorted((r.change_type, r.key, r.value) for r in ch)
    assert got == [("delete", "u3", 3), ("upsert", "new", 7), ("upsert", "u1", 100), ("upsert", "u2", 200)]
    assert {r.checkpoint_id for r in ch} == {2}
    # no difference -> empty; default from = previous checkpoint
    assert fmt(spark, job, table="changes", operator="sessions", state="profile", toCheckpointId=2).count() == 0
    assert fmt(spark, job, table="changes", operator="sessions", state="count").count() == 4


def test_a_planned_reader_ships_without_the_checkpoint():
    """Spark pickles the data source and the reader into the read function it broadcasts with each query, then plans the
    partitions with the live reader: a state or timers read leaves the resolved checkpoint (every operator's handles)
    behind, and its tasks read the same rows."""
    import pickle
    from pathlib import Path

    from pyspark_flinkstate.reader import FlinkStatePushdownReader
    from pyspark_flinkstate.resolve import output_columns, resolve
    from pyspark_flinkstate.schema import spark_schema
    from pyspark_flinkstate.source import FlinkStateDataSource

    sp = Path(__file__).resolve().parents[1] / "fixtures" / "flink-2.3-rocksdb" / "rocksdb" / "savepoint"
    for opts in ({"state": "count"}, {"table": "timers"}):
        res = resolve({"path": str(sp), "operator": "long-keyed", **opts})
        reader = FlinkStatePushdownReader(res, spark_schema(output_columns(res)))
        shipped = pickle.loads(pickle.dumps(reader))  # Spark's order: the read function first, then partitions()
        parts = reader.partitions()
        assert shipped.res is None and len(pickle.dumps(reader)) < len(pickle.dumps(res)) / 2
        rows = pa.Table.from_batches([b for p in parts for b in shipped.read(pickle.loads(pickle.dumps(p)))])
        assert rows.num_rows > 0
        assert rows.equals(pa.Table.from_batches([b for p in parts for b in reader.read(p)]))
    # a metadata table reads from the resolved checkpoint itself: it keeps it
    res = resolve({"path": str(sp), "table": "operators"})
    reader = FlinkStatePushdownReader(res, spark_schema(output_columns(res)))
    assert pickle.loads(pickle.dumps(reader)).res is not None
    # the data source resolved the read for schema(); once it has made the reader, it ships without it
    source = FlinkStateDataSource({"path": str(sp), "operator": "long-keyed", "state": "count"})
    source.schema()
    full = len(pickle.dumps(source))
    source.reader(source.schema())
    assert len(pickle.dumps(source)) < full / 2
