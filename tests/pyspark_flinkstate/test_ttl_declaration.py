"""A TTL declaration changed without a data change (issue: restore with a longer TTL), seen through Spark: reads of
the backend's checkpoint, a `df.write` with `ttlMs`, and `SavepointWriter.with_ttl` record the new declaration."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import flinkstate as fs
from flinkstate.backend import KeyedStateBackend
from fsc_helpers import fmt

pytestmark = [pytest.mark.spark, pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning")]


def _v(ttl_ms: int) -> fs.ValueStateDescriptor:
    return fs.ValueStateDescriptor(name="v", value_type=pa.int64(), ttl=fs.StateTtlConfig(ttl_ms=ttl_ms))


def _root(tmp_path: Path) -> tuple[str, fs.CheckpointStore]:
    """Checkpoint 1: key u1 = 1 last accessed at t=0 with ttl 1000 (the backend's own clock)."""
    root = str(tmp_path / "job")
    store = fs.open(root)
    be = KeyedStateBackend(max_parallelism=128, clock=lambda: 0)
    s = be.get_state(_v(1_000))
    be.set_current_key("u1")
    s.update(1)
    be.checkpoint(store, "op").result()
    return root, store


def test_spark_reads_the_restored_jobs_ttl_of_an_unchanged_state(spark, tmp_path: Path) -> None:
    root, store = _root(tmp_path)
    be = KeyedStateBackend.restore(store, "op", clock=lambda: 1_500)
    be.get_state(_v(2_000))
    cid = be.checkpoint(store, "op").result().checkpoint_id
    rows = fmt(spark, root, operator="op", state="v", checkpointId=cid, ttlReferenceTime=1_500).collect()
    assert [(r.key, r.value) for r in rows] == [("u1", 1)]


def test_a_spark_write_with_ttl_ms_records_the_new_duration_even_with_no_rows(spark, tmp_path: Path) -> None:
    root, store = _root(tmp_path)
    empty = spark.createDataFrame([], "key string, value bigint")
    empty.write.format("flinkstate").option("operator", "op").option("state", "v").option("ttlMs", 2_000).mode("append").save(root)
    assert store.state_descriptor("op", "v").ttl == fs.StateTtlConfig(ttl_ms=2_000)
    assert store.read_state("op", "v", ttl_reference=1_500).column("value").to_pylist() == [1]
    assert store.expire(at=1_500).dropped.get("op/v", 0) == 0


def test_savepoint_writer_with_ttl_changes_the_declaration_without_rewriting_data(spark, tmp_path: Path) -> None:
    from pyspark_flinkstate import SavepointWriter

    root, store = _root(tmp_path)
    before = store.files()
    info = SavepointWriter(spark, root).with_ttl("op", "v", 2_000).write()
    assert store.state_descriptor("op", "v", info.checkpoint_id).ttl == fs.StateTtlConfig(ttl_ms=2_000)
    assert [e.path for e in store.files(info.checkpoint_id)] == [e.path for e in before]  # no data rewritten
    assert store.read_state("op", "v", ttl_reference=1_500).column("value").to_pylist() == [1]
    with pytest.raises(fs.StateNotFoundError, match="'nope'"):
        SavepointWriter(spark, root).with_ttl("op", "nope", 5).write()
    plain = fs.open(str(tmp_path / "plain"))
    with plain.begin() as w:
        w.put_state("op", fs.ValueStateDescriptor(name="n", value_type=pa.int64()), pa.table({"key": ["a"], "value": [1]}))
    with pytest.raises(fs.SchemaMismatchError, match="without TTL"):
        SavepointWriter(spark, str(tmp_path / "plain")).with_ttl("op", "n", 5).write()
    assert plain.latest_checkpoint_id() == 1
