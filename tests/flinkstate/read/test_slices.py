"""`ScanTask.file_slices`: the files of a task, the key groups where each counts and the order they win in, are exactly
what the task's own merge reads (an engine that reads them itself gets the same rows); `Checkpoint.tables` lists every
table."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import flinkstate as fs
from flinkstate.read.scan import TableRef
from flinkstate.read.slices import key_group_runs, key_groups_held

DESC = fs.ValueStateDescriptor(name="v", value_type=pa.int64())
TIMERS = fs.TimerServiceDescriptor(name="event-timers")


@pytest.fixture()
def store(tmp_path: Path) -> fs.CheckpointStore:
    """A full file of 64 key groups, a full rewrite of key groups 0-20, and deltas before and after it."""
    st = fs.open(tmp_path / "job")
    keys = [f"k{i}" for i in range(200)]
    with st.begin(max_parallelism=64) as w:
        w.put_state("op", DESC, pa.table({"key": keys, "value": list(range(200))}))
        w.put_timers("op", TIMERS, pa.table({"key": keys[:50], "timestamp": list(range(50))}))
        w.put_operator_state("op", fs.OperatorStateDescriptor(name="offsets", value_type=pa.int64()),
                             pa.table({"subtask": pa.array([0], pa.int32()), "value": [1]}))
    with st.begin() as w:
        w.put_state("op", DESC, pa.table({"key": ["k1", "k2", "k2"], "value": [10, 20, 21], "tombstone": [True, False, False]}), mode="delta")
    with st.begin() as w:
        low = [k for k in keys if fs.assign_key_group(k, 64) <= 20]
        w.put_state("op", DESC, pa.table({"key": low, "value": [1000] * len(low)}), key_group_range=(0, 20))
        w.put_state("op", DESC, pa.table({"key": ["k3", "k4"], "value": [30, 40], "tombstone": [False, True]}), mode="delta")
        w.put_timers("op", TIMERS, pa.table({"key": ["k0"], "timestamp": [0], "tombstone": [True]}), mode="delta")
    return st


def _rows_of(slices: list, pk: list[str]) -> pa.Table:
    """The slices' rows merged newest-wins by (order, row in file), tombstones dropped: what Spark's native path does."""
    parts = []
    for rank, s in enumerate(sorted(slices, key=lambda s: s.order)):
        t = pq.read_table(s.url.removeprefix("file://"))
        kg = t.column("key_group").to_numpy()
        keep = np.zeros(len(kg), dtype=bool)
        for a, b in s.key_group_ranges:
            keep |= (kg >= a) & (kg <= b)
        t = t.filter(pa.array(keep))
        if "tombstone" not in t.column_names:
            t = t.append_column("tombstone", pa.array(np.zeros(t.num_rows, dtype=bool)))
        parts.append(t.append_column("__o", pa.array(np.full(t.num_rows, rank) * (1 << 32) + np.arange(t.num_rows))))
    t = pa.concat_tables(parts, promote_options="permissive")
    last = t.group_by(["key_group", *pk]).aggregate([("__o", "max")]).column("__o_max")
    t = t.filter(pc.is_in(t.column("__o"), last))
    return t.filter(pc.invert(t.column("tombstone"))).drop_columns(["tombstone", "__o"])


def _sorted(t: pa.Table, by: list[str]) -> list[dict]:
    return t.sort_by([(c, "ascending") for c in by]).to_pylist()


@pytest.mark.parametrize("cid", [1, 2, 3])
def test_slices_read_and_merged_give_the_tasks_rows(store: fs.CheckpointStore, cid: int) -> None:
    ck = store.checkpoint(cid)
    for target in (1 << 62, 40):  # one task, and tasks of a few dozen rows
        tasks = ck.scan("op", "v", raw=True).plan(target)
        for task in tasks:
            got = _rows_of(task.file_slices(), ["key"])  # type: ignore[attr-defined]
            assert _sorted(got.select(["key_group", "key", "value"]), ["key"]) == _sorted(task.to_arrow(), ["key"])
    slices = [s for t in ck.scan("op", "v").plan(1 << 62) for s in t.file_slices()]  # type: ignore[attr-defined]
    if cid == 3:  # the old full file counts only above the rewritten key groups; the delta before the rewrite only there too
        old = [s for s in slices if not s.delta and s.entry.created_by_checkpoint_id == 1]
        assert all(a > 20 for s in old for a, _ in s.key_group_ranges) and not any(s.whole for s in old)
        assert all(s.delta for s in slices if s.entry.created_by_checkpoint_id == 2)


def test_slices_keep_to_the_key_groups_of_a_lookup(store: fs.CheckpointStore) -> None:
    ck = store.checkpoint()
    scan = ck.scan("op", "v", keys=["k3"], raw=True)
    kg = fs.assign_key_group("k3", 64)
    slices = [s for t in scan.plan() for s in t.file_slices()]  # type: ignore[attr-defined]
    assert slices and all(s.key_group_ranges == ((kg, kg),) for s in slices)
    assert _rows_of(slices, ["key"]).filter(pc.equal(pc.field("key"), "k3")).column("value").to_pylist() == [30]


def test_timers_and_operator_state_slices(store: fs.CheckpointStore) -> None:
    ck = store.checkpoint()
    task = ck.scan_timers("op", "event-timers").plan()[0]
    got = _rows_of(task.file_slices(), ["key", "timestamp"])  # type: ignore[attr-defined]
    assert _sorted(got, ["key", "timestamp"]) == _sorted(task.to_arrow(), ["key", "timestamp"])
    (op_task,) = ck.scan_operator_state("op", "offsets").plan()
    (s,) = op_task.file_slices()  # type: ignore[attr-defined]
    assert s.whole and not s.delta and pq.read_table(s.url.removeprefix("file://")).column("value").to_pylist() == [1]


def test_key_groups_held_reads_what_a_delta_holds(store: fs.CheckpointStore) -> None:
    ck = store.checkpoint(2)
    (delta,) = [s for t in ck.scan("op", "v").plan() for s in t.file_slices() if s.delta]  # type: ignore[attr-defined]
    assert delta.key_group_ranges == ((0, 63),)
    assert key_groups_held(ck.io, delta).tolist() == sorted({fs.assign_key_group(k, 64) for k in ("k1", "k2")})
    assert key_group_runs(np.array([True, True, False, True])) == ((0, 1), (3, 3))
    assert key_group_runs(np.array([False, True]), 10) == ((11, 11),)


def test_tables_lists_every_state_then_the_metadata_tables(store: fs.CheckpointStore) -> None:
    assert store.checkpoint().tables() == [
        TableRef("state", "op", "v", "value"), TableRef("timers", "op", "event-timers", "timers-event"),
        TableRef("operatorState", "op", "offsets", "operator-list"),
        TableRef("checkpoints"), TableRef("files"), TableRef("states"), TableRef("operators"),
    ]
