"""SavepointWriter: every combination of with_state / rename / remove / rescale keeps every entry (issue 7 item 1)."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import combo_model as M  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning")]


def _run(spark: Any, steps: list[tuple[Any, ...]], mp: int | None, savepoint: bool) -> None:
    from pyspark_flinkstate import SavepointWriter

    with tempfile.TemporaryDirectory() as root:
        store, model = M.build_base(root)
        sw = SavepointWriter(spark, root)
        for s in M.applicable(steps, model):
            if s[0] == "put":
                sw.with_state(s[1], s[2], spark.createDataFrame(list(s[3].items()), "key string, value bigint"))
            elif s[0] == "rename":
                sw.rename_operator(s[1], s[2])
            elif s[0] == "remove_operator":
                sw.remove_operator(s[1])
            else:
                sw.remove_state(s[1], s[2])
        if mp is not None:
            sw.set_max_parallelism(mp)
        sw.write(savepoint=savepoint)
        M.check(store, model, mp or M.BASE_MP)


def test_with_state_rename_rescale_keeps_the_new_rows(spark: Any) -> None:
    # the reported case: with_state on an operator, rename it, change max parallelism
    _run(spark, [("put", "a", "s1", 12), ("rename", "a", "c")], 256, True)
    # a new state of an operator that is then renamed (not in the base at all)
    _run(spark, [("put", "b", "s2", 9), ("rename", "b", "c")], 256, True)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(plan=M.PLAN)
def test_every_combination_keeps_every_entry(spark: Any, plan: tuple[list[tuple[Any, ...]], int | None, bool]) -> None:
    steps, mp, savepoint = plan
    _run(spark, steps, mp, savepoint)


def test_with_state_casts_bigint_keys_to_the_declared_int_key_type(spark: Any, tmp_path: Path) -> None:
    """Issue 7 item 2 through Spark: negative bigint keys into an INT-keyed state land in Flink's Integer key groups."""
    import pyarrow as pa

    import flinkstate as fs
    from pyspark_flinkstate import SavepointWriter

    root = str(tmp_path / "r")
    store = fs.open(root)
    desc = fs.ValueStateDescriptor(name="n", key_type=pa.int32(), value_type=pa.int64())
    with store.begin(max_parallelism=128) as w:
        w.put_state("op", desc, pa.table({"key": pa.array([1], pa.int32()), "value": pa.array([1], pa.int64())}))
    keys = [-7, -1, 0, 5, 2**31 - 1, -(2**31)]
    df = spark.createDataFrame([(k, k * 2) for k in keys], "key bigint, value bigint")
    SavepointWriter(spark, root).with_state("op", "n", df).write()
    t = store.read_state("op", "n")
    assert t.schema.field("key").type == pa.int32()
    assert sorted(t.column("key").to_pylist()) == sorted(keys)
    assert t.column("key_group").to_pylist() == [fs.assign_key_group(k, 128, pa.int32()) for k in t.column("key").to_pylist()]
    too_big = spark.createDataFrame([(2**40, 1)], "key bigint, value bigint")
    with pytest.raises(Exception) as ei:
        SavepointWriter(spark, root).with_state("op", "n", too_big).write()
    assert "SchemaMismatchError" in str(ei.value) and "int32" in str(ei.value)
    assert [c.checkpoint_id for c in store.checkpoints()] == [1, 2]
