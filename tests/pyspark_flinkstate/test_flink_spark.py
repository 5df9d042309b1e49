"""Spark SQL over a real Flink savepoint: `spark.read.format("flinkstate").load(savepoint_dir)`, the same tables and options."""

from __future__ import annotations

from pathlib import Path

import pytest

import flinkstate as fs

pytestmark = pytest.mark.spark

SP = Path(__file__).resolve().parents[1] / "fixtures" / "flink-2.3-canonical" / "files" / "savepoint"
RDB = Path(__file__).resolve().parents[1] / "fixtures" / "flink-2.3-rocksdb" / "rocksdb-checkpoint" / "checkpoint"


def _read(spark, path, **opts):
    return spark.read.format("flinkstate").options(**opts).load(str(path))


def test_state_tables_equal_the_library(spark):
    src = fs.open(str(SP))
    for op, state in (("long-keyed", "count"), ("long-keyed", "row"), ("long-keyed", "list"), ("string-keyed", "map")):
        df = _read(spark, SP, operator=op, state=state)
        lib = src.read_state(op, state)
        assert sorted(map(str, (r.asDict(recursive=True) for r in df.collect()))) == \
            sorted(map(str, ({c: r[c] for c in df.columns} for r in lib.to_pylist()))), (op, state)
    rows = _read(spark, SP, operator="long-keyed", state="count").where("key = 7").collect()
    assert [(r.key, r.key_group) for r in rows] == [(7, fs.assign_key_group(7, 128, __import__("pyarrow").int64()))]


def test_sql_timers_operator_state_and_metadata(spark):
    _read(spark, SP, operator="long-keyed", state="count").createOrReplaceTempView("flink_counts")
    _read(spark, SP, operator="long-keyed", table="timers").createOrReplaceTempView("flink_timers")
    n = spark.sql("SELECT count(*) AS n FROM flink_counts c JOIN flink_timers t ON c.key = t.key").collect()[0].n
    assert n == 60
    split = _read(spark, SP, operator="opstate", state="split", table="operatorState").collect()
    assert len(split) == 60
    states = {(r.operator, r.state, r.state_kind) for r in _read(spark, SP, table="states").collect()}
    assert ("long-keyed", "count", "value") in states and ("opstate", "union", "operator-union") in states
    ops = {r.operator: r.parallelism for r in _read(spark, SP, table="operators").collect()}
    assert ops["long-keyed"] == 2


def test_job_checkpoint_folder_and_checkpoint_id(spark):
    ids = [r.checkpoint_id for r in _read(spark, RDB, table="checkpoints").collect()]
    assert 3 in ids
    assert _read(spark, RDB, operator="long-keyed", state="count", checkpointId=3).count() == 37


def test_spark_import_per_state_equals_flinkstate_import(spark, tmp_path):
    """Large state the Spark way (issue 9 item 7): each Flink state read as a DataFrame and written with df.write gives
    the rows `flinkstate import` gives (keys, key groups, values)."""
    from flinkstate.flink.bridge.importer import import_savepoint

    imported = str(tmp_path / "imported")
    import_savepoint(SP, imported, raw_values=True)  # the job's Kryo state as bytes
    root = str(tmp_path / "spark")
    cases = [("long-keyed", "count", "value", "overwrite"), ("long-keyed", "row", "value", "overwrite"),
             ("long-keyed", "list", "list", "overwrite"), ("string-keyed", "map", "map", "overwrite")]
    for i, (op, state, kind, mode) in enumerate(cases):
        df = _read(spark, SP, operator=op, state=state, flattenCollections="false")
        cols = ["key", "value"] if kind != "map" else ["key", "user_key", "value"]
        if kind == "map":
            df = _read(spark, SP, operator=op, state=state)
        (df.select(*cols).write.format("flinkstate").options(operator=op, state=state, stateKind=kind)
         .mode("append" if i else "overwrite").save(root))
    a, b = fs.open(imported), fs.open(root)
    for op, state, *_ in cases:
        want = a.read_state(op, state).select(["key_group", "key", "value"] + (["user_key"] if state == "map" else []))
        got = b.read_state(op, state).select(want.column_names)
        key = [(c, "ascending") for c in want.column_names if c != "value"]
        assert got.sort_by(key).to_pylist() == want.sort_by(key).to_pylist(), (op, state)


def test_row_fields_and_raw_values_options(spark):
    """`.option("rowFields", "op/state=a,b")` names a Row's fields; `.option("rawValues", "true")` reads Kryo values as bytes."""
    from fsc_helpers import error_text

    df = _read(spark, SP, operator="long-keyed", state="row", rowFields="long-keyed/row=id,label")
    assert df.schema["value"].dataType.simpleString() == "struct<id:bigint,label:string>"
    lib = {r["key"]: r["value"] for r in fs.open(str(SP)).read_state("long-keyed", "row").to_pylist()}
    assert {r.key: (r.value.id, r.value.label) for r in df.collect()} == {k: (v["f0"], v["f1"]) for k, v in lib.items()}
    with pytest.raises(Exception) as ei:
        _read(spark, SP, operator="kryo", state="opaque").collect()
    text = error_text(ei)
    assert "UnsupportedSerializerError" in text and "operator kryo, state 'opaque'" in text and "KryoSerializerSnapshot" in text, text[:2000]
    raw = _read(spark, SP, operator="kryo", state="opaque", rawValues="true")
    assert raw.schema["value"].dataType.simpleString() == "binary"
    assert sorted(r.value for r in raw.collect()) == sorted(fs.open(str(SP), raw_values=True).read_state("kryo", "opaque").column("value").to_pylist())


V1 = SP.parents[2] / "flink-1.20" / "canonical" / "savepoint"  # Flink 1.20: _metadata records operator ids, not uids
OP_ID = "e96676d2a3621a713f8229ed21cc08b2"  # Flink's id of uid "long-keyed" (murmur3_128 of it)
WEEK, DAY = 7 * 86_400_000, 86_400_000


@pytest.mark.parametrize("path", [V1, SP], ids=["flink-1.20", "flink-2.3"])
def test_ttl_option_by_uid_or_operator_id_hides_expired_entries(spark, path):
    """`.option("ttl", "OP/ttl=MS")` with OP the uid or the operator id, the operator read by either: 8 days after the
    last access a 7-day TTL leaves nothing live; unknown operators and states in ttl, rowFields and operator are refused by name."""
    from fsc_helpers import error_text

    last = fs.open(str(path)).read_state("long-keyed", "ttl", raw=True).column("ttl_timestamp").to_pylist()
    for by, read_by in (("long-keyed", OP_ID), (OP_ID, "long-keyed")):
        opts = {"operator": read_by, "state": "ttl", "ttl": f"{by}/ttl={WEEK}"}
        assert _read(spark, path, **opts, ttlReferenceTime=max(last) + 8 * DAY).count() == 0
        assert _read(spark, path, **opts, ttlReferenceTime=min(last) + WEEK - 1).count() == 37
    every = _read(spark, path, **opts, ttlReferenceTime=max(last) + 8 * DAY, includeExpired="true").collect()
    assert len(every) == 37 and all(r.expired for r in every)
    assert _read(spark, path, operator="long-keyed", state="ttl", ttlReferenceTime=max(last) + 8 * DAY).count() == 37  # none given
    ops = _read(spark, path, table="operators", operator="long-keyed").collect()
    assert len(ops) == 1 and ops[0].keyed_states > 10
    for opts, said in (({"ttl": f"nope/ttl={WEEK}"}, "ttl 'nope/ttl': 'nope' names no operator"),
                       ({"ttl": f"long-keyed/count_ttl={WEEK}"}, "has no TTL state 'count_ttl'"),
                       ({"ttl": f"{OP_ID}/count={WEEK}"}, "state 'count' of operator"),
                       ({"rowFields": "nope/row=a,b"}, "row_fields 'nope/row': 'nope' names no operator"),
                       ({"rowFields": "long-keyed/nope=a,b"}, "has no keyed state 'nope'"),
                       ({"operator": "nope"}, "operator 'nope' is not in")):
        with pytest.raises(Exception) as ei:
            _read(spark, path, **{"operator": "long-keyed", "state": "count", **opts}).collect()
        text = error_text(ei)
        assert said in text and OP_ID in text, text[:2000]


def test_non_incremental_rocksdb_checkpoint_and_its_metadata_tables(spark, rocksdb_full):
    """A RocksDB checkpoint without incremental snapshots (SSTs in the private list) reads in full; the metadata tables
    give bytes from the handles, NULL where the format does not tell, TTL durations not held flagged, and each operator's
    own max parallelism (the window's 256 while long-keyed's 128: a key filter hashes with 128)."""
    from fsc_helpers import latest_checkpoint

    chk = latest_checkpoint(rocksdb_full / "2.3" / "rocksdb-full-checkpoint" / "checkpoint")
    lib = fs.open(str(chk))
    for op, state in (("long-keyed", "count"), ("long-keyed", "list"), ("string-keyed", "map"), ("window", "window-contents")):
        assert _read(spark, chk, operator=op, state=state).count() == lib.read_state(op, state).num_rows > 0, (op, state)
    rows = _read(spark, chk, operator="long-keyed", state="count").where("key = 7").collect()
    assert [(r.key, r.key_group) for r in rows] == [(7, fs.assign_key_group(7, 128, __import__("pyarrow").int64()))]
    ops = {r.operator: r for r in _read(spark, chk, table="operators").collect()}
    assert (ops["window"].max_parallelism, ops["long-keyed"].max_parallelism) == (256, 128)
    assert all(r.bytes > 0 and r.files > 0 and r.rows is None for r in ops.values())
    states = {(r.operator, r.state): r for r in _read(spark, chk, table="states").collect()}
    ttl = states[("long-keyed", "ttl")]
    assert (ttl.ttl, ttl.ttl_unknown, ttl.rows) == (None, True, None) and ttl.bytes > 0 and ttl.files == 2
    assert states[("opstate", "split")].rows == 60


DATASTREAM = Path(__file__).resolve().parents[1] / "fixtures" / "flink-datastream" / "2.3" / "hashmap-canonical"


def test_datastream_operator_states_read_through_spark(spark, tmp_path):
    """Interval-join buffers, evicting windows' stream records, CEP's NFA state, Either, Tuple0 (a null column) and a
    Tuple3 read through Spark as the library reads them; a state refused by name is the same typed error."""
    import tarfile

    with tarfile.open(DATASTREAM / "savepoint.tar.gz") as t:
        t.extractall(tmp_path, filter="data")
    sp = tmp_path / "savepoint"
    src = fs.open(str(sp))
    for op, state in (("interval-join", "LEFT_BUFFER"), ("win-tumble-evict", "window-contents"), ("cep", "nfaStateName"),
                      ("values", "either"), ("values", "tuple0"), ("values", "tuple3")):
        df = _read(spark, sp, operator=op, state=state)
        lib = src.read_state(op, state)
        assert df.count() == lib.num_rows > 0, (op, state)
        assert sorted(map(repr, (r.asDict(recursive=True) for r in df.collect()))) == \
            sorted(map(repr, ({c: r[c] for c in df.columns} for r in lib.to_pylist()))), (op, state)
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import PySparkException

    with pytest.raises((Py4JJavaError, PySparkException, fs.FlinkStateError), match="state 'optional'.*KryoSerializerSnapshot"):
        _read(spark, sp, operator="values", state="optional").collect()
