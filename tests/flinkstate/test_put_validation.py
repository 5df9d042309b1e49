"""Puts refuse or fix what would corrupt a checkpoint: key types, duplicate keys, bad arguments (issue 7 items 2, 3, 5)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import flinkstate as fs

MP = 128


def _store(tmp_path: Path) -> fs.CheckpointStore:
    return fs.open(str(tmp_path / "root"))


def _stored(store: fs.CheckpointStore, op: str, name: str, key_type: pa.DataType, *, timers: bool = False) -> None:
    """Every stored key is of the declared type and in the key group Flink gives it."""
    t = store.read_timers(op, name) if timers else store.read_state(op, name)
    assert t.schema.field("key").type == key_type
    keys = t.column("key").to_pylist()
    assert t.column("key_group").to_pylist() == [fs.assign_key_group(k, MP, key_type) for k in keys]


# ------------------------------------------------------------------ item 2: key types
@pytest.mark.parametrize(
    ("declared", "given", "keys"),
    [
        (pa.int32(), pa.int64(), [-5, -1, 0, 7, 2**31 - 1, -(2**31)]),
        (pa.int64(), pa.int16(), [-300, -1, 0, 3, 32767]),
        (pa.float64(), pa.float32(), [-2.5, -0.75, 0.0, 0.5, 1e10]),
    ],
)
def test_keys_of_another_type_land_in_flinks_key_group_of_the_declared_type(tmp_path, declared, given, keys):
    store = _store(tmp_path)
    desc = fs.ValueStateDescriptor(name="v", key_type=declared, value_type=pa.int64())
    tdesc = fs.TimerServiceDescriptor(name="t", domain="event", key_type=declared)
    with store.begin(max_parallelism=MP) as w:
        w.put_state("op", desc, pa.table({"key": pa.array(keys, given), "value": pa.array(range(len(keys)), pa.int64())}))
        w.put_timers("op", tdesc, pa.table({"key": pa.array(keys, given), "timestamp": pa.array(range(len(keys)), pa.int64())}))
    _stored(store, "op", "v", declared)
    _stored(store, "op", "t", declared, timers=True)
    with store.begin() as w:  # a delta goes through the same cast
        w.put_state("op", desc, pa.table({"key": pa.array(keys[:2], given), "value": pa.array([9, 9], pa.int64()),
                                          "tombstone": [False, False]}), mode="delta")
    _stored(store, "op", "v", declared)
    assert store.read_state("op", "v").num_rows == len(keys)


@pytest.mark.parametrize(
    ("declared", "given", "keys"),
    [
        (pa.int32(), pa.int64(), [1, 2**40]),
        (pa.float32(), pa.float64(), [0.5, 0.1]),
        (pa.int64(), pa.float64(), [1.0, 2.5]),
        (pa.string(), pa.int64(), [1, 2]),
    ],
)
def test_keys_that_do_not_cast_losslessly_are_refused_naming_column_and_types(tmp_path, declared, given, keys):
    store = _store(tmp_path)
    with store.begin(max_parallelism=MP) as w:
        w.put_state("op", fs.ValueStateDescriptor(name="v", key_type=pa.string(), value_type=pa.int64()),
                    pa.table({"key": ["x"], "value": pa.array([1], pa.int64())}))
    desc = fs.ValueStateDescriptor(name="w", key_type=declared, value_type=pa.int64())
    with pytest.raises(fs.SchemaMismatchError) as ei:
        with store.begin() as w:
            w.put_state("op", desc, pa.table({"key": pa.array(keys, given), "value": pa.array(range(len(keys)), pa.int64())}))
    msg = str(ei.value)
    assert "'key'" in msg and str(declared) in msg and str(given) in msg and "'w'" in msg
    assert [c.checkpoint_id for c in store.checkpoints()] == [1]
    assert store.read_state("op", "v").num_rows == 1
