"""CheckpointWriter.add_operator_state_files: operator-state files written elsewhere (Spark tasks) registered in full or appended."""

from __future__ import annotations

import pyarrow as pa
import pytest

import flinkstate as fs
from flinkstate.errors import InvalidArgumentError, SchemaMismatchError
from flinkstate.format.writer import write_operator_state_file

LIST = fs.OperatorStateDescriptor(name="offsets", value_type=pa.int64())


def _rows(*values: int, subtask: int = 0) -> pa.Table:
    return pa.table({"subtask": pa.array([subtask] * len(values), pa.int32()), "value": pa.array(values, pa.int64())})


def _file(w, desc, table, seq):
    return write_operator_state_file(w.io, "src", desc, table, checkpoint_id=w.checkpoint_id, checkpoint_kind=w.kind, seq=seq)


def test_append_adds_files_and_full_replaces(tmp_path):
    store = fs.open(str(tmp_path))
    with store.begin() as w:
        w.put_operator_state("src", LIST, _rows(1, 2))
    with store.begin() as w:
        w.add_operator_state_files("src", LIST, [_file(w, LIST, _rows(3), 1), _file(w, LIST, _rows(4, subtask=1), 2)], mode="append")
    t = store.read_operator_state("src", "offsets")
    assert sorted(zip(t.column("subtask").to_pylist(), t.column("value").to_pylist())) == [(0, 1), (0, 2), (0, 3), (1, 4)]
    assert len([f for f in store.files() if f.state == "offsets"]) == 3
    with store.begin() as w:
        w.add_operator_state_files("src", LIST, [_file(w, LIST, _rows(9), 1)])
    assert store.read_operator_state("src", "offsets").column("value").to_pylist() == [9]
    assert store.read_operator_state("src", "offsets", 2).num_rows == 4  # the earlier checkpoint is unchanged


def test_append_with_other_types_or_foreign_files_is_refused(tmp_path):
    store = fs.open(str(tmp_path))
    with store.begin() as w:
        w.put_operator_state("src", LIST, _rows(1))
    union = fs.OperatorStateDescriptor(name="offsets", value_type=pa.int64(), mode="union")
    w = store.begin()
    f = _file(w, union, _rows(2), 1)
    with pytest.raises(SchemaMismatchError, match="offsets"):
        w.add_operator_state_files("src", union, [f], mode="append")
    other = fs.OperatorStateDescriptor(name="other", value_type=pa.int64())
    with pytest.raises(InvalidArgumentError, match="not its operator-state files"):
        w.add_operator_state_files("src", other, [f], mode="append")
    with pytest.raises(InvalidArgumentError, match="mode"):
        w.add_operator_state_files("src", LIST, [f], mode="delta")  # type: ignore[arg-type]
    w.adopt([f])
    w.abort()
    assert [c.checkpoint_id for c in store.checkpoints()] == [1]
    assert store.read_operator_state("src", "offsets").column("value").to_pylist() == [1]
