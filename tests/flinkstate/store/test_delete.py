"""`CheckpointWriter.delete`: a key alone removes its whole entry (a map's every user key, a list, in every namespace);
namespace and user_key narrow it."""

from __future__ import annotations

import pyarrow as pa
import pytest

import flinkstate as fs
from flinkstate.core.errors import SchemaMismatchError, StateNotFoundError

MAP = fs.MapStateDescriptor(name="m", key_type=pa.string(), user_key_type=pa.string(), user_value_type=pa.int64())
LIST = fs.ListStateDescriptor(name="l", key_type=pa.int64(), value_type=pa.int64())
WINDOWS = fs.MapStateDescriptor(name="w", key_type=pa.string(), namespace_type=pa.int64(), user_key_type=pa.string(),
                                user_value_type=pa.int64())
PAIR = pa.struct([("f0", pa.string()), ("f1", pa.int32())])
TUPLE_KEYED = fs.MapStateDescriptor(name="t", key_type=PAIR, user_key_type=pa.string(), user_value_type=pa.int64(),
                                    ttl=fs.StateTtlConfig(ttl_ms=3_600_000))


@pytest.fixture
def store(tmp_path) -> fs.CheckpointStore:
    s = fs.open(str(tmp_path / "root"))
    with s.begin(max_parallelism=128) as w:
        w.put_state("op", MAP, pa.table({"key": ["a", "a", "b", "b", "c"], "user_key": ["x", "y", "x", "z", "x"], "value": [1, 2, 3, 4, 5]}))
        w.put_state("op", LIST, pa.table({"key": [1, 2, 3], "value": [[1, 2], [3], [4, 5, 6]]}))
        w.put_state("op", WINDOWS, pa.table({"key": ["a", "a", "a", "b"], "namespace": [10, 10, 20, 10], "user_key": ["x", "y", "x", "x"],
                                             "value": [1, 2, 3, 4]}))
        keys = pa.array([{"f0": "u", "f1": 1}, {"f0": "u", "f1": 1}, {"f0": "u", "f1": 2}], PAIR)
        w.put_state("op", TUPLE_KEYED, pa.table({"key": keys, "user_key": ["p", "q", "p"], "value": [1, 2, 3],
                                                 "ttl_timestamp": [1_700_000_000_000] * 3}))
    return s


def rows(store: fs.CheckpointStore, state: str, *cols: str) -> list[tuple]:
    t = store.read_state("op", state)
    return sorted(tuple(r[c] for c in cols) for r in t.to_pylist())


def test_key_alone_removes_a_maps_every_user_key_and_user_key_narrows(store: fs.CheckpointStore) -> None:
    with store.begin() as w:
        w.put_state("op", MAP, pa.table({"key": ["a"], "user_key": ["new"], "value": [9], "tombstone": [False]}), mode="delta")
        w.delete("op", "m", pa.table({"key": ["a", "no-such-key"]}))  # also what this writer wrote before
        w.delete("op", "m", pa.table({"key": ["b"], "user_key": ["z"]}))
    assert rows(store, "m", "key", "user_key", "value") == [("b", "x", 3), ("c", "x", 5)]
    assert store.read_state("op", "m", checkpoint_id=1).num_rows == 5  # the base checkpoint is unchanged


def test_key_alone_removes_a_list_and_every_namespace(store: fs.CheckpointStore) -> None:
    with store.begin() as w:
        w.delete("op", "l", pa.table({"key": pa.array([2], pa.int32())}))  # cast to the state's key type
        w.delete("op", "w", pa.table({"key": ["a"]}))
    assert rows(store, "l", "key", "value") == [(1, 1), (1, 2), (3, 4), (3, 5), (3, 6)]
    assert rows(store, "w", "key", "namespace", "user_key") == [("b", 10, "x")]
    with store.begin() as w:
        w.delete("op", "w", pa.table({"key": ["b"], "namespace": [20]}))  # nothing there in window 20
    assert rows(store, "w", "key", "namespace", "user_key") == [("b", 10, "x")]


def test_tuple_keys_and_ttl_map(store: fs.CheckpointStore) -> None:
    with store.begin() as w:
        w.delete("op", "t", pa.table({"key": pa.array([{"f0": "u", "f1": 1}], PAIR)}))
    assert [r["key"] for r in store.read_state("op", "t", include_expired=True).to_pylist()] == [{"f0": "u", "f1": 2}]


def test_deletes_that_name_no_entry_or_a_column_the_state_lacks(store: fs.CheckpointStore) -> None:
    with store.begin() as w:
        with pytest.raises(SchemaMismatchError, match="a delete needs a 'key' column"):
            w.delete("op", "m", pa.table({"user_key": ["x"]}))
        with pytest.raises(SchemaMismatchError, match="a delete of a list state has no 'user_key' column"):
            w.delete("op", "l", pa.table({"key": [1], "user_key": ["x"]}))
        with pytest.raises(StateNotFoundError, match="state 'nope'"):
            w.delete("op", "nope", pa.table({"key": ["a"]}))
        w.abort()
