"""Export and import keep every operator's own max parallelism (Flink checks it per operator on restore).

A flinkstate root with operators of max parallelism 128, 256 and 4096 (and one with operator state only)
is exported as a canonical Flink savepoint: its `_metadata` records each operator's own value, Flink's
reader here decodes every key in its key group, and importing the savepoint gives the same operators,
values and key groups back. Real Flink restoring such a savepoint is in test_production_restore.py.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

import flinkstate as fs
from flinkstate.flink.bridge.importer import import_savepoint
from flinkstate.flink.meta.metadata import read_metadata
from flinkstate.flink.bridge.store_export import export_savepoint
from flinkstate.core.keygroups import assign_key_groups

OPS = {"small": 128, "medium": 256, "wide": 4096}
COUNT = fs.ValueStateDescriptor(name="count", key_type=pa.int64(), value_type=pa.int64())
TIMERS = fs.TimerServiceDescriptor(name="user-timers", key_type=pa.int64())
KEYS = list(range(500))


def _root(path: Path) -> fs.CheckpointStore:
    store = fs.open(str(path))
    with store.begin() as w:
        for i, (uid, mp) in enumerate(OPS.items()):
            w.set_max_parallelism(mp, uid)
            w.put_state(uid, COUNT, pa.table({"key": KEYS, "value": [k + i for k in KEYS]}))
            w.put_timers(uid, TIMERS, pa.table({"key": KEYS[:50], "timestamp": [k * 2 for k in KEYS[:50]]}))
            w.set_parallelism(uid, 2 + i)
        w.set_max_parallelism(32, "ops-only")
        w.put_operator_state("ops-only", fs.OperatorStateDescriptor(name="splits", value_type=pa.string()),
                             pa.table({"subtask": pa.array([0, 1], pa.int32()), "value": ["a", "b"]}))
    return store


def test_export_writes_each_operators_max_parallelism_and_import_keeps_it(tmp_path: Path) -> None:
    _root(tmp_path / "job")
    dest = export_savepoint(str(tmp_path / "job"), str(tmp_path / "sp"))
    meta = read_metadata(dest)
    assert {op.uid: op.max_parallelism for op in meta.operators} == {**OPS, "ops-only": 32}
    flink = fs.open(dest)  # Flink's format, read as Flink lays it out: key groups per subtask range
    for uid, mp in OPS.items():
        t = flink.read_state(uid, "count")
        assert t.num_rows == len(KEYS)
        assert assign_key_groups(t.column("key"), mp).equals(t.column("key_group").combine_chunks())
        assert flink.read_state(uid, "count", keys=[499]).column("key").to_pylist() == [499]
    report = import_savepoint(dest, tmp_path / "back")
    back = fs.open(str(tmp_path / "back")).checkpoint(report.checkpoint_id)
    assert {u: back.max_parallelism_of(u) for u in back.operators} == {**OPS, "ops-only": 32}
    assert back.max_parallelism == 4096  # the default of an imported savepoint: the largest of its keyed operators'
    for i, uid in enumerate(OPS):
        t = fs.open(str(tmp_path / "back")).read_state(uid, "count", keys=[3, 499])
        assert sorted(t.column("value").to_pylist()) == [3 + i, 499 + i]
        assert fs.open(str(tmp_path / "back")).read_timers(uid, "event_user-timers").num_rows == 50  # Flink's service name
