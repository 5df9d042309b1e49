"""Spark `operation=delete` by key alone: a map state's whole entry (every user key), a list, every namespace; user_key
and namespace narrow it (issue 42: a delete without user_key was refused with `missing column 'user_key'`)."""

from __future__ import annotations

import pyarrow as pa
import pytest

import flinkstate as fs

pytestmark = pytest.mark.spark

MAP = fs.MapStateDescriptor(name="m", key_type=pa.string(), user_key_type=pa.string(), user_value_type=pa.int64())
WINDOWS = fs.MapStateDescriptor(name="w", key_type=pa.string(), namespace_type=pa.int64(), user_key_type=pa.string(),
                                user_value_type=pa.int64(), ttl=fs.StateTtlConfig(ttl_ms=3_600_000))


def test_spark_delete_by_key_alone(spark, tmp_path) -> None:
    root = str(tmp_path / "root")
    with fs.open(root).begin(max_parallelism=128) as w:
        w.put_state("op", MAP, pa.table({"key": [f"k{i % 20}" for i in range(60)], "user_key": [f"u{i}" for i in range(60)],
                                         "value": list(range(60))}))
        w.put_state("op", WINDOWS, pa.table({"key": ["a", "a", "a", "b"], "namespace": [10, 10, 20, 10], "user_key": ["x", "y", "x", "x"],
                                             "value": [1, 2, 3, 4], "ttl_timestamp": [1_700_000_000_000] * 4}))

    def delete(state: str, rows: list, schema: str) -> None:
        (spark.createDataFrame(rows, schema).write.format("flinkstate").options(operator="op", state=state, operation="delete")
         .mode("append").save(root))

    delete("m", [("k1",), ("k2",), ("nope",)], "key string")  # every user key of k1 and k2
    delete("m", [("k3", "u3")], "key string, user_key string")  # only u3 of k3
    delete("w", [("a",)], "key string")  # every window of a
    store = fs.open(root)
    m = store.read_state("op", "m")
    assert m.num_rows == 60 - 3 - 3 - 1
    assert not {"k1", "k2"} & set(m.column("key").to_pylist())
    assert sorted(u for k, u in zip(m.column("key").to_pylist(), m.column("user_key").to_pylist()) if k == "k3") == ["u23", "u43"]
    w = store.read_state("op", "w", include_expired=True)
    assert list(zip(w.column("key").to_pylist(), w.column("namespace").to_pylist())) == [("b", 10)]
    assert len(store.checkpoints()) == 4  # one checkpoint per delete
    # (a list state's whole list by key: tests/flinkstate/store/test_delete.py and test_flink_export_shapes.py)
