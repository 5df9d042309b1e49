"""backend.checkpoint keeps what the backend does not own: other operators, other states (issue 7 item 4)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import flinkstate as fs
from flinkstate.backend import KeyedStateBackend

MP = 128
COUNT = fs.ValueStateDescriptor(name="count", key_type=pa.string(), value_type=pa.int64())
OTHER = fs.ValueStateDescriptor(name="other", key_type=pa.string(), value_type=pa.int64())
TIMERS = fs.TimerServiceDescriptor(name="t", domain="event", key_type=pa.string())


def _root(tmp_path: Path) -> fs.CheckpointStore:
    """Checkpoint 1: sessions/{count, other, timers t}, carts/{count}."""
    store = fs.open(str(tmp_path / "root"))
    with store.begin(max_parallelism=MP) as w:
        w.put_state("sessions", COUNT, pa.table({"key": ["a", "b"], "value": pa.array([1, 2], pa.int64())}))
        w.put_state("sessions", OTHER, pa.table({"key": ["x"], "value": pa.array([9], pa.int64())}))
        w.put_timers("sessions", TIMERS, pa.table({"key": ["a"], "timestamp": pa.array([5], pa.int64())}))
        w.put_state("carts", COUNT, pa.table({"key": ["c"], "value": pa.array([3], pa.int64())}))
    return store


def _values(store: fs.CheckpointStore, op: str, name: str) -> dict[str, int]:
    t = store.read_state(op, name)
    return dict(zip(t.column("key").to_pylist(), t.column("value").to_pylist()))


def test_fresh_backend_checkpoint_keeps_other_operators_and_states(tmp_path):
    store = _root(tmp_path)
    be = KeyedStateBackend(max_parallelism=MP, key_type=pa.string())
    count = be.get_state(COUNT)
    be.set_current_key("z")
    count.update(26)
    info = be.checkpoint(store, "sessions").result(timeout=60)
    assert info.checkpoint_id == 2
    assert _values(store, "sessions", "count") == {"z": 26}  # what the backend owns: replaced
    assert _values(store, "sessions", "other") == {"x": 9}  # same operator, another state: kept
    assert store.read_timers("sessions", "t").column("key").to_pylist() == ["a"]
    assert _values(store, "carts", "count") == {"c": 3}  # another operator: kept
    # by reference: the carried files are the ones of checkpoint 1
    assert {e.path for e in store.files(1) if e.operator == "carts"} == {e.path for e in store.files(2) if e.operator == "carts"}


def test_restored_backend_checkpoints_keep_operators_added_since(tmp_path):
    store = _root(tmp_path)
    be = KeyedStateBackend.restore(store, "sessions")
    with store.begin() as w:  # another writer adds an operator after the restore
        w.put_state("late", COUNT, pa.table({"key": ["l"], "value": pa.array([7], pa.int64())}))
    be.set_current_key("a")
    be.get_state(COUNT).update(100)
    be.checkpoint(store, "sessions").result(timeout=60)
    assert _values(store, "late", "count") == {"l": 7}
    assert _values(store, "sessions", "count") == {"a": 100, "b": 2}
    assert _values(store, "carts", "count") == {"c": 3}


def test_a_delta_on_a_base_whose_key_groups_changed_since_is_refused(tmp_path):
    store = _root(tmp_path)
    be = KeyedStateBackend.restore(store, "sessions")
    with store.begin() as w:  # another writer rewrites the backend's own state after the restore
        w.put_state("sessions", COUNT, pa.table({"key": ["q"], "value": pa.array([1], pa.int64())}))
    be.set_current_key("a")
    be.get_state(COUNT).update(100)
    with pytest.raises(fs.CommitConflictError, match=r"'sessions'.*base checkpoint 1"):
        be.checkpoint(store, "sessions").result(timeout=60)
    assert [c.checkpoint_id for c in store.checkpoints()] == [1, 2]
    assert _values(store, "sessions", "count") == {"q": 1}
