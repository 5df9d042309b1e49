"""Option parsing and type mapping (no Spark session needed)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from flinkstate.core.errors import InvalidArgumentError
from pyspark_flinkstate.options import parse_read_options, parse_write_options, storage_options_from
from pyspark_flinkstate.schema import spark_schema, storage_type, to_spark_arrow


def test_read_options_defaults_and_case():
    o = parse_read_options({"path": "/x", "OPERATOR": "a", "state": "s", "checkpointid": "3", "flattencollections": "FALSE"})
    assert (o.operator, o.state, o.checkpoint_id, o.flatten, o.table) == ("a", "s", 3, False, "state")
    assert parse_read_options({"path": "/x", "table": "OPERATORSTATE"}).table == "operatorState"


@pytest.mark.parametrize(("opts", "words"), [
    ({"table": "nope"}, ["nope", "state, timers, operatorState, checkpoints, files, states, operators, changes"]),
    ({"checkpointId": "1.5"}, ["checkpointId", "1.5"]),
    ({"checkpointId": "-1"}, ["checkpointId", "-1"]),
    ({"includeExpired": "sometimes"}, ["includeExpired"]),
    ({"color": "red"}, ["color", "ttlReferenceTime"]),
    ({"storageOptions": "{bad json"}, ["storageOptions"]),
])
def test_read_option_errors_name_what_exists(opts, words):
    with pytest.raises(InvalidArgumentError) as ei:
        parse_read_options({"path": "/x", **opts})
    for w in words:
        assert w in str(ei.value)


def test_missing_path():
    with pytest.raises(InvalidArgumentError, match="load\\(path\\)"):
        parse_read_options({"operator": "a"})


def test_write_options():
    o = parse_write_options({"path": "/x", "operator": "a", "state": "s", "maxParallelism": "256", "stateKind": "LIST",
                             "savepoint": "true", "operation": "delete"})
    assert (o.max_parallelism, o.state_kind, o.savepoint, o.operation) == (256, "list", True, "delete")
    for bad, word in [({"maxParallelism": "0"}, "maxParallelism"), ({"maxParallelism": "40000"}, "maxParallelism"),
                      ({"operation": "merge"}, "upsert, delete"), ({"operator": "../x"}, "operator uid"), ({"state": ""}, "state")]:
        with pytest.raises(InvalidArgumentError, match=word.replace(".", "\\.")):
            parse_write_options({"path": "/x", "operator": "a", "state": "s", **bad})


def test_storage_options():
    got = storage_options_from({"storage.endpoint_url": "http://h:1", "storageOptions": '{"key": "k", "secret": "s"}'})
    assert got == {"endpoint_url": "http://h:1", "key": "k", "secret": "s"}


def test_type_mapping_roundtrip_to_spark_arrow():
    t = pa.table({
        "u8": pa.array([1], pa.uint8()), "u64": pa.array([2**64 - 1], pa.uint64()), "d": pa.array([1], pa.decimal128(5, 1)),
        "ts": pa.array([0], pa.timestamp("ms", tz="UTC")), "ntz": pa.array([0], pa.timestamp("s")),
        "m": pa.array([[("a", 1)]], pa.map_(pa.string(), pa.int32())), "l": pa.array([[1]], pa.large_list(pa.int16())),
        "s": pa.array([{"x": 1}], pa.struct([("x", pa.int8())])), "t": pa.array([1], pa.time32("s")),
    })
    sch = spark_schema([(f.name, f.type) for f in t.schema])
    assert [f.dataType.simpleString() for f in sch.fields] == [
        "smallint", "decimal(20,0)", "decimal(5,1)", "timestamp", "timestamp_ntz", "map<string,int>", "array<smallint>",
        "struct<x:tinyint>", "string"]
    from pyspark_flinkstate.schema import arrow_schema_for

    out = to_spark_arrow(t, arrow_schema_for(sch))
    assert out.schema.equals(arrow_schema_for(sch))
    assert out.column("u64").to_pylist()[0] == 2**64 - 1
    assert storage_type(pa.large_string()) == pa.string()
    assert storage_type(pa.struct([("a", pa.large_list(pa.large_string()))])) == pa.struct([("a", pa.list_(pa.string()))])


def test_non_null_columns_are_declared_and_enforced():
    from flinkstate.core.errors import SchemaMismatchError
    from pyspark_flinkstate.schema import arrow_schema_for

    sch = spark_schema([("key", pa.string()), ("value", pa.int64()), ("key_group", pa.int32())], {"key", "key_group"})
    assert [(f.name, f.nullable) for f in sch.fields] == [("key", False), ("value", True), ("key_group", False)]
    target = arrow_schema_for(sch)
    assert [f.nullable for f in target] == [False, True, False]
    ok = pa.table({"key_group": pa.array([3], pa.int32()), "key": ["a"], "value": pa.array([None], pa.int64())})
    assert to_spark_arrow(ok, target).schema.equals(target)
    with pytest.raises(SchemaMismatchError, match="'key' is declared NOT NULL but 1 of the rows"):
        to_spark_arrow(ok.set_column(1, "key", pa.array([None], pa.string())), target)
    with pytest.raises(SchemaMismatchError, match="'key_group' is declared NOT NULL"):
        to_spark_arrow(ok.drop_columns(["key_group"]), target)
