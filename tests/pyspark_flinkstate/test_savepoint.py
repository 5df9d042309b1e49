"""SavepointWriter: atomic multi-state rewrites, rename/remove, max-parallelism changes."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import flinkstate as fs
from fsc_helpers import N, build_job, fmt
from fsc_helpers import check_key_groups as _check_key_groups

pytestmark = [pytest.mark.spark, pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning")]


def test_change_max_parallelism_keeps_every_entry(spark, tmp_path):
    from pyspark_flinkstate import SavepointWriter

    root = str(tmp_path / "rescale")
    store = build_job(root)
    before = {(op, st): store.read_state(op, st) for op, st in [("sessions", "profile"), ("sessions", "count"), ("carts", "items"), ("carts", "attrs")]}
    timers_before = store.read_timers("sessions", "expiry")
    info = SavepointWriter(spark, root).set_max_parallelism(300).write(savepoint=True)
    assert info.kind == "savepoint" and info.max_parallelism == 300
    for (op, st), old in before.items():
        new = store.read_state(op, st)
        desc = store.state_descriptor(op, st)
        assert new.num_rows == old.num_rows
        _check_key_groups(new, 300, desc.key_type)
        sort = [("key", "ascending")] + ([("user_key", "ascending")] if "user_key" in new.column_names else [])
        a = old.drop_columns(["key_group"]).sort_by(sort)
        b = new.drop_columns(["key_group"]).sort_by(sort)
        assert a.equals(b), (op, st)
        files = store.state_files(op, st)
        assert all(e.kind == "full" for e in files)
        # each file holds only keys of its key-group range
        for e in files:
            t = store.read_state(op, st, key_group_range=(e.key_group_start, e.key_group_end))
            assert pc.all(pc.less_equal(t.column("key_group"), e.key_group_end)).as_py() in (True, None)
    timers = store.read_timers("sessions", "expiry")
    assert timers.num_rows == timers_before.num_rows == N
    _check_key_groups(timers, 300, pa.string())
    df = fmt(spark, root, operator="sessions", state="count")
    assert df.where("key = 'u1'").collect()[0].key_group == fs.assign_key_group("u1", 300)


def test_multi_state_rewrite_is_atomic(spark, tmp_path):
    from pyspark_flinkstate import SavepointWriter

    root = str(tmp_path / "multi")
    store = build_job(root)
    df = spark.createDataFrame([(f"z{i}", i) for i in range(100)], "key string, value bigint")
    info = (SavepointWriter(spark, root)
            .with_state("fresh", "numbers", df)
            .with_state("sessions", "count", spark.createDataFrame([("only", 1)], "key string, value bigint"))
            .rename_operator("carts", "baskets")
            .remove_state("sessions", "profile")
            .write())
    assert info.checkpoint_id == 3 and info.kind == "checkpoint"
    meta = store.metadata(3)
    assert set(meta.operators) == {"sessions", "baskets", "fresh"}
    assert "profile" not in meta.operators["sessions"].keyed_states
    assert store.read_state("fresh", "numbers").num_rows == 100
    assert store.read_state("sessions", "count").column("key").to_pylist() == ["only"]
    assert store.read_state("baskets", "items").num_rows == store.read_state("carts", "items", 2).num_rows
    assert all(e.kind == "full" for e in store.state_files("fresh", "numbers"))


def test_failed_rewrite_commits_nothing(spark, tmp_path):
    from pyspark_flinkstate import SavepointWriter

    root = str(tmp_path / "fail")
    store = build_job(root)
    sw = SavepointWriter(spark, root).with_state("fresh", "numbers", spark.createDataFrame([("a", 1)], "key string, value bigint"))
    sw.remove_operator("does-not-exist")
    with pytest.raises(fs.OperatorNotFoundError, match="carts"):
        sw.write()
    assert [c.checkpoint_id for c in store.checkpoints()] == [1, 2]
