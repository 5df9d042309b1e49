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


# ------------------------------------------------------------------ item 3: duplicate entries in a full put
def test_full_put_with_a_key_twice_is_refused_naming_the_key(tmp_path):
    store = _store(tmp_path)
    desc = fs.ValueStateDescriptor(name="v", key_type=pa.string(), value_type=pa.int64())
    with store.begin(max_parallelism=MP) as w:
        w.put_state("op", desc, pa.table({"key": ["a", "b"], "value": pa.array([1, 2], pa.int64())}))
    with pytest.raises(fs.DuplicateKeyError, match=r"'op'.*'v'.*'dup-key'"):
        with store.begin() as w:
            w.put_state("op", desc, pa.table({"key": ["x", "dup-key", "y", "dup-key"], "value": pa.array([1, 2, 3, 4], pa.int64())}))
    assert [c.checkpoint_id for c in store.checkpoints()] == [1]
    assert store.read_state("op", "v").column("value").to_pylist() in ([1, 2], [2, 1])


def test_full_put_of_a_map_state_refuses_a_user_key_twice_but_not_a_key_twice(tmp_path):
    store = _store(tmp_path)
    desc = fs.MapStateDescriptor(name="m", key_type=pa.int64(), user_key_type=pa.string(), user_value_type=pa.int64())
    with store.begin(max_parallelism=MP) as w:  # one key, two user keys: two entries
        w.put_state("op", desc, pa.table({"key": pa.array([1, 1], pa.int64()), "user_key": ["a", "b"], "value": pa.array([1, 2], pa.int64())}))
    assert store.read_state("op", "m").num_rows == 2
    with pytest.raises(fs.DuplicateKeyError, match=r"'user_key': 'a'"):
        with store.begin() as w:
            w.put_state("op", desc, pa.table({"key": pa.array([1, 1], pa.int64()), "user_key": ["a", "a"], "value": pa.array([1, 2], pa.int64())}))


def test_full_put_of_namespaced_state_keys_entries_by_key_and_namespace(tmp_path):
    store = _store(tmp_path)
    desc = fs.ValueStateDescriptor(name="w", key_type=pa.string(), value_type=pa.int64(), namespace_type=pa.int64())
    with store.begin(max_parallelism=MP) as w:
        w.put_state("op", desc, pa.table({"key": ["a", "a"], "namespace": pa.array([1, 2], pa.int64()), "value": pa.array([1, 2], pa.int64())}))
    with pytest.raises(fs.DuplicateKeyError, match=r"'namespace': 2"):
        with store.begin() as w:
            w.put_state("op", desc, pa.table({"key": ["a", "a"], "namespace": pa.array([2, 2], pa.int64()), "value": pa.array([1, 2], pa.int64())}))


def test_full_timer_put_with_a_timer_twice_is_refused(tmp_path):
    store = _store(tmp_path)
    tdesc = fs.TimerServiceDescriptor(name="t", domain="event", key_type=pa.string())
    with store.begin(max_parallelism=MP) as w:  # one key, two timestamps: two timers
        w.put_timers("op", tdesc, pa.table({"key": ["k", "k"], "timestamp": pa.array([5, 6], pa.int64())}))
    with pytest.raises(fs.DuplicateKeyError, match=r"'t'.*'timestamp': 5"):
        with store.begin() as w:
            w.put_timers("op", tdesc, pa.table({"key": ["k", "j", "k"], "timestamp": pa.array([5, 5, 5], pa.int64())}))
    assert store.read_timers("op", "t").num_rows == 2


# ------------------------------------------------------------------ item 5: silently accepted before, typed errors now
VALUE = fs.ValueStateDescriptor(name="v", key_type=pa.string(), value_type=pa.int64())


def _one(tmp_path: Path) -> fs.CheckpointStore:
    store = _store(tmp_path)
    with store.begin(max_parallelism=MP) as w:
        w.put_state("op", VALUE, pa.table({"key": ["a"], "value": pa.array([1], pa.int64())}))
    return store


def _unchanged(store: fs.CheckpointStore) -> None:
    assert [c.checkpoint_id for c in store.checkpoints()] == [1]
    assert store.read_state("op", "v").column("value").to_pylist() == [1]


@pytest.mark.parametrize("mode", ["full", "delta"])
def test_unknown_extra_column_is_refused_naming_it(tmp_path, mode):
    store = _one(tmp_path)
    t = pa.table({"key": ["b"], "value": pa.array([2], pa.int64()), "valeu": [3], "tombstone": [False]})
    with pytest.raises(fs.SchemaMismatchError, match=r"'op' state 'v'.*unknown columns \['valeu'\]"):
        with store.begin() as w:
            w.put_state("op", VALUE, t, mode=mode)
    _unchanged(store)


def test_unknown_extra_column_on_timers_is_refused(tmp_path):
    store = _one(tmp_path)
    tdesc = fs.TimerServiceDescriptor(name="t", domain="event", key_type=pa.string())
    with pytest.raises(fs.SchemaMismatchError, match=r"timer service 't'.*unknown columns \['ts'\]"):
        with store.begin() as w:
            w.put_timers("op", tdesc, pa.table({"key": ["b"], "timestamp": pa.array([1], pa.int64()), "ts": [1]}))
    _unchanged(store)


def test_namespace_column_on_a_state_without_namespace_is_refused(tmp_path):
    store = _one(tmp_path)
    with pytest.raises(fs.SchemaMismatchError, match=r"'v'.*unknown columns \['namespace'\]; this state declares no namespace"):
        with store.begin() as w:
            w.put_state("op", VALUE, pa.table({"key": ["b"], "namespace": ["w1"], "value": pa.array([2], pa.int64())}))
    _unchanged(store)


def test_full_put_with_true_tombstones_is_refused(tmp_path):
    store = _one(tmp_path)
    with pytest.raises(fs.SchemaMismatchError, match=r"'v'.*tombstone"):
        with store.begin() as w:
            w.put_state("op", VALUE, pa.table({"key": ["a"], "value": pa.array([None], pa.int64()), "tombstone": [True]}))
    _unchanged(store)


@pytest.mark.parametrize("rng", [(0, 128), (64, 500), (-1, 10)])
def test_key_group_range_outside_max_parallelism_is_refused(tmp_path, rng):
    store = _one(tmp_path)
    with pytest.raises(fs.KeyGroupOutOfRangeError, match=r"'v'.*\[0, 127\]"):
        with store.begin() as w:
            w.put_state("op", VALUE, pa.table({"key": ["b"], "value": pa.array([2], pa.int64())}), key_group_range=rng)
    tdesc = fs.TimerServiceDescriptor(name="t", domain="event", key_type=pa.string())
    with pytest.raises(fs.KeyGroupOutOfRangeError, match=r"timer service 't'.*\[0, 127\]"):
        with store.begin() as w:
            w.put_timers("op", tdesc, pa.table({"key": ["b"], "timestamp": pa.array([2], pa.int64())}), key_group_range=rng)
    _unchanged(store)


def test_put_after_commit_is_refused(tmp_path):
    store = _one(tmp_path)
    w = store.begin()
    w.put_state("op", VALUE, pa.table({"key": ["a"], "value": pa.array([5], pa.int64())}))
    w.commit()
    files = {e.path for e in store.files(2)}
    t = pa.table({"key": ["z"], "value": pa.array([6], pa.int64())})
    tdesc = fs.TimerServiceDescriptor(name="t", domain="event", key_type=pa.string())
    for call in (lambda: w.put_state("op", VALUE, t), lambda: w.put_timers("op", tdesc, pa.table({"key": ["z"], "timestamp": pa.array([1], pa.int64())})),
                 lambda: w.remove_operator("op"), lambda: w.rename_operator("op", "op2")):
        with pytest.raises(fs.InvalidArgumentError, match=r"checkpoint 2.*already committed.*'op'"):
            call()
    assert {e.path for e in store.files(2)} == files
    assert store.read_state("op", "v").column("value").to_pylist() == [5]


@pytest.mark.parametrize("ttl_ms", [2**70, 2**63])
def test_ttl_beyond_int64_is_refused(ttl_ms):
    with pytest.raises(fs.InvalidArgumentError, match=str(ttl_ms)):
        fs.StateTtlConfig(ttl_ms=ttl_ms)
    assert fs.StateTtlConfig(ttl_ms=2**63 - 1).ttl_ms == 2**63 - 1


@pytest.mark.parametrize("bad", [None, {"key": ["a"], "value": [1]}, [1, 2]])
def test_a_non_table_is_refused_with_a_typed_error(tmp_path, bad):
    store = _one(tmp_path)
    tdesc = fs.TimerServiceDescriptor(name="t", domain="event", key_type=pa.string())
    odesc = fs.OperatorStateDescriptor(name="o", value_type=pa.int64())
    for call in (lambda w: w.put_state("op", VALUE, bad), lambda w: w.put_timers("op", tdesc, bad),
                 lambda w: w.put_operator_state("op", odesc, bad), lambda w: w.put_coordinator("op", bad)):
        with pytest.raises(fs.InvalidArgumentError, match=rf"'op'.*expected a pyarrow.Table, got {type(bad).__name__}"):
            with store.begin() as w:
                call(w)
    _unchanged(store)


def test_a_record_batch_is_accepted_as_a_table(tmp_path):
    store = _one(tmp_path)
    with store.begin() as w:
        w.put_state("op", VALUE, pa.record_batch({"key": ["b"], "value": pa.array([2], pa.int64())}))
    assert store.read_state("op", "v").num_rows == 1


@pytest.mark.parametrize("n", ["2", 2.0, True, None])
def test_retain_refuses_a_non_integer(tmp_path, n):
    store = _one(tmp_path)
    with store.begin() as w:
        w.put_state("op", VALUE, pa.table({"key": ["b"], "value": pa.array([2], pa.int64())}))
    with pytest.raises(fs.InvalidArgumentError, match=rf"num_retained.*{n!r}"):
        store.retain(n)
    assert [c.checkpoint_id for c in store.checkpoints()] == [1, 2]
