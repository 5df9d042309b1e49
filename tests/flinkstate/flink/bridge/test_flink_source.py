"""`flinkstate.open` on a real Flink savepoint or checkpoint folder: the store's read API through the same scan."""

from __future__ import annotations

import pickle
import re
from pathlib import Path

import pyarrow as pa
import pytest
from flink_dump import KEYED_OPERATORS, OPERATOR_STATES

import flinkstate as fs
from flinkstate.core.errors import CheckpointNotFoundError
from flinkstate.flink import read_keyed_state, read_metadata, read_operator_state
from flinkstate.flink.bridge.source import FlinkSource

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
SAVEPOINTS = {
    "canonical": FIXTURES / "flink-2.3-canonical" / "files" / "savepoint",
    "snappy": FIXTURES / "flink-2.3-canonical" / "snappy" / "savepoint",
    "heap-native": FIXTURES / "flink-2.3-native" / "native" / "savepoint",
    "heap-checkpoint": FIXTURES / "flink-2.3-native" / "checkpoint" / "checkpoint" / "chk-3",
    "rocksdb-native": FIXTURES / "flink-2.3-rocksdb" / "rocksdb" / "savepoint",
    "rocksdb-incremental": FIXTURES / "flink-2.3-rocksdb" / "rocksdb-checkpoint" / "checkpoint" / "chk-3",
}


def _norm(v):
    if isinstance(v, dict):
        return tuple(sorted((k, _norm(x)) for k, x in v.items()))
    if isinstance(v, list):
        return tuple(_norm(x) for x in v)
    return v.hex() if isinstance(v, bytes) else v


@pytest.mark.parametrize("variant", sorted(SAVEPOINTS))
def test_open_reads_what_the_flink_decoder_reads(variant: str) -> None:
    src = fs.open(str(SAVEPOINTS[variant]))
    assert isinstance(src, FlinkSource)
    meta = read_metadata(str(SAVEPOINTS[variant]))
    for uid in KEYED_OPERATORS:
        ks = read_keyed_state(meta, uid)
        for name, t in ks.states.items():
            got = src.read_state(uid, name, include_expired=True, ttl_reference=0)
            want_cols = [c for c in ("key_group", "key", "namespace", "user_key", "value") if c in t.column_names]
            want = sorted(tuple(_norm(r[c]) for c in want_cols) for r in t.to_pylist())
            assert sorted(tuple(_norm(r[c]) for c in want_cols) for r in got.to_pylist()) == want, (uid, name)
        for name, t in ks.timers.items():
            got = src.read_timers(uid, name)
            assert sorted(zip(got.column("key").to_pylist(), got.column("timestamp").to_pylist())) == \
                sorted(zip(t.column("key").to_pylist(), t.column("timestamp").to_pylist()))
    for uid, names in OPERATOR_STATES.items():
        for name in names:
            assert sorted(src.read_operator_state(uid, name).to_pylist(), key=str) == sorted(read_operator_state(meta, uid, name).to_pylist(), key=str)


def test_ttl_hiding_uses_the_savepoint_time_and_a_given_ttl(tmp_path: Path) -> None:
    src = FlinkSource(SAVEPOINTS["canonical"], ttl={"long-keyed/ttl": 60_000})
    ck = src.checkpoint()
    t = src.read_state("long-keyed", "ttl", include_expired=True)
    assert t.num_rows == 37 and "ttl_expires_at" in t.column_names
    last = read_keyed_state(read_metadata(str(SAVEPOINTS["canonical"])), "long-keyed").states["ttl"].column("ttl_last_access").to_pylist()
    cut = sorted(last)[len(last) // 2] + 60_000  # about half expire at this reference time
    visible = src.read_state("long-keyed", "ttl", ttl_reference=cut)
    assert visible.num_rows == sum(1 for x in last if x + 60_000 > cut)
    assert ck.created_at_ms > max(last)  # the savepoint's own time (its _metadata file) is after every access


def test_job_checkpoint_folder_lists_and_pins_checkpoints(tmp_path: Path) -> None:
    import shutil

    job = tmp_path / "job"
    shutil.copytree(SAVEPOINTS["heap-checkpoint"], job / "chk-3")
    shutil.copytree(SAVEPOINTS["heap-checkpoint"], job / "chk-5")
    src = fs.open(str(job))
    assert [c.checkpoint_id for c in src.checkpoints()] == [3, 3]  # both folders hold checkpoint 3's _metadata
    ck = src.checkpoint()
    assert pickle.loads(pickle.dumps(ck)).scan("long-keyed", "count").to_arrow().num_rows == 37
    with pytest.raises(CheckpointNotFoundError, match="retained"):
        src.checkpoint(4)


def test_point_lookup_reads_only_the_subtask_handle_of_its_key_group() -> None:
    ck = fs.open(str(SAVEPOINTS["canonical"])).checkpoint()
    scan = ck.scan("long-keyed", "count", keys=[7])
    tasks = scan.plan()
    assert len(tasks) == 1 and tasks[0].key_group_range[0] <= fs.assign_key_group(7, 128, pa.int64()) <= tasks[0].key_group_range[1]
    assert scan.to_arrow().column("key").to_pylist() == [7]


@pytest.mark.parametrize("kind", ["canonical", "rocksdb-native"])
def test_a_task_carries_only_its_own_operator_and_subtask(kind: str) -> None:
    """Spark pickles every task to its executor: it must not hold every operator's handles (a savepoint of many operators
    and subtasks would ship all of them with each task), and it reads the same rows after the round trip."""
    ck = fs.open(str(SAVEPOINTS[kind])).checkpoint()
    assert len(ck.meta.operators) > 1
    for scan in (ck.scan("long-keyed", "count"), ck.scan_timers("long-keyed")):
        tasks = scan.plan()
        assert len(tasks) == 2
        for task in tasks:
            assert [op.label for op in task.meta.operators] == [task.uid] or [op.operator_id for op in task.meta.operators] == [task.uid]
            assert [s.index for s in task.meta.operators[0].subtasks] == [task.subtask]
            assert task.meta.master_states == []
        shipped = [pickle.loads(pickle.dumps(t)) for t in tasks]
        assert pa.concat_tables(pa.Table.from_batches(list(t.to_batches()), t.schema) for t in shipped).equals(scan.to_arrow())


def test_cli_describe_and_checkpoints_of_a_flink_savepoint() -> None:
    import io

    from flinkstate.cli import main

    out = io.StringIO()
    assert main(["describe", str(SAVEPOINTS["rocksdb-native"])], out=out) == 0
    text = out.getvalue()
    assert re.search(r"operator long-keyed \(id e96676d2a3621a713f8229ed21cc08b2, parallelism 2, max parallelism 128, \d+ files, "
                     r"[\d.]+ KiB\)", text)
    assert re.search(r"\nttl +value +unknown +- +2 +[\d.]+ KiB +TtlSerializer\n", text)  # TTL state: duration not held, rows not told, its SSTs
    assert "count" in text and "operator-union" in text and "event_user-timers" in text
    out = io.StringIO()
    assert main(["checkpoints", str(SAVEPOINTS["rocksdb-incremental"].parent)], out=out) == 0
    assert "checkpoint" in out.getvalue()
