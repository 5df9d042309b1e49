"""Writing one checkpoint (CheckpointWriter): atomic commits, conflicts, structure edits and what a put accepts."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import flinkstate as fs
from flinkstate.core.errors import InvalidArgumentError, SchemaMismatchError
from flinkstate.format.manifest import DeltaCatalog
from flinkstate.format.writer import write_operator_state_file

from fsc_helpers import snapshot as _snapshot


def test_crash_between_data_files_and_commit_leaves_nothing_visible(job_root: str, tmp_path: Path) -> None:
    store = fs.open(job_root)
    d = fs.ValueStateDescriptor(name="v", value_type=pa.int64())
    with store.begin() as w:
        w.put_state("op", d, pa.table({"key": ["a"], "value": [1]}))
    before = _snapshot(store)
    # a real crash: another process writes its data files and its manifest rows, then dies
    script = textwrap.dedent(f"""
        import os, pyarrow as pa, flinkstate as fs
        from flinkstate.format.manifest import DeltaCatalog
        store = fs.open({job_root!r})
        w = store.begin()
        w.put_state("op", fs.ValueStateDescriptor(name="v", value_type=pa.int64()), pa.table({{"key": ["a", "b"], "value": [2, 3]}}))
        DeltaCatalog.commit_log = lambda *a, **k: os._exit(17)
        w.commit()
    """)
    r = subprocess.run([sys.executable, "-c", script], env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert r.returncode == 17
    orphans = [p for p in store.io.list_files("shared") if "/0000000002-" in p]
    assert orphans, "the crashed writer should have left data files behind"
    assert _snapshot(store) == before
    assert store.read_state("op", "v").to_pylist() == [{"key_group": fs.assign_key_group("a", 128), "key": "a", "value": 1}]
    # the id was never committed, so the next writer takes it; once it completes, the
    # registry deletes the crashed attempt's files (they stayed tracked until then)
    assert store.retain(5) == []
    with store.begin() as w:
        w.put_state("op", d, pa.table({"key": ["c"], "value": [4], "tombstone": [False]}), mode="delta")
    assert store.checkpoints()[-1].checkpoint_id == 2
    deleted = store.retain(5)
    assert sorted(deleted) == sorted(orphans)
    assert {r["key"] for r in store.read_state("op", "v").to_pylist()} == {"a", "c"}


def test_failure_during_commit_deletes_the_attempt_files(job_root: str, monkeypatch: pytest.MonkeyPatch) -> None:
    store = fs.open(job_root)
    d = fs.ValueStateDescriptor(name="v", value_type=pa.int64())
    with store.begin() as w:
        w.put_state("op", d, pa.table({"key": ["a"], "value": [1]}))
    before = _snapshot(store)

    def boom(*a: Any, **k: Any) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(DeltaCatalog, "commit_log", boom)
    w = store.begin()
    entries = w.put_state("op", d, pa.table({"key": ["z"], "value": [9]}))
    with pytest.raises(OSError, match="disk full"):
        w.commit()
    monkeypatch.undo()
    assert _snapshot(store) == before
    assert not any(store.io.exists(e.path) for e in entries)


def test_two_writers_same_checkpoint_exactly_one_wins(job_root: str) -> None:
    store = fs.open(job_root)
    d = fs.ValueStateDescriptor(name="v", value_type=pa.int64())
    with store.begin() as w:
        w.put_state("op", d, pa.table({"key": ["a"], "value": [1]}))
    w1, w2 = store.begin(), store.begin()
    assert w1.checkpoint_id == w2.checkpoint_id == 2
    e1 = w1.put_state("op", d, pa.table({"key": ["a"], "value": [100]}))
    e2 = w2.put_state("op", d, pa.table({"key": ["a"], "value": [200]}))
    w1.commit()
    with pytest.raises(fs.CommitConflictError, match="checkpoint 2"):
        w2.commit()
    assert [c.checkpoint_id for c in store.checkpoints()] == [1, 2]
    assert store.read_state("op", "v").column("value").to_pylist() == [100]
    assert all(store.io.exists(e.path) for e in e1)
    assert not any(store.io.exists(e.path) for e in e2)
    # asking for an id that is already committed is refused up front
    with pytest.raises(fs.CommitConflictError, match="checkpoint 2 is already committed"):
        store.begin(checkpoint_id=2)


def test_savepoint_is_self_contained(job_root: str) -> None:
    import shutil

    store = fs.open(job_root)
    d = fs.ValueStateDescriptor(name="v", value_type=pa.int64())
    with store.begin() as w:
        w.put_state("op", d, pa.table({"key": ["a", "b"], "value": [1, 2]}))
    with store.begin() as w:
        w.put_state("op", d, pa.table({"key": ["b"], "value": [None], "tombstone": [True]}), mode="delta")
    with store.begin(kind="savepoint") as w:
        w.put_state("op", d, pa.table({"key": ["c"], "value": [3], "tombstone": [False]}), mode="delta")
    sp = store.checkpoints()[-1]
    assert sp.kind == "savepoint"
    assert all(e.path.startswith(f"savepoints/sp-{sp.checkpoint_id:010d}/") for e in store.files(sp.checkpoint_id))
    # discarding every checkpoint and deleting shared/ leaves the savepoint readable
    store.discard([1, 2])
    shutil.rmtree(os.path.join(job_root, "shared"), ignore_errors=True)
    assert {r["key"]: r["value"] for r in store.read_state("op", "v", sp.checkpoint_id).to_pylist()} == {"a": 1, "c": 3}
    with pytest.raises(fs.InvalidArgumentError, match="savepoint"):
        store.discard([sp.checkpoint_id])


def test_max_parallelism_change_requires_every_state_rewritten(job_root: str) -> None:
    store = fs.open(job_root)
    d = fs.ValueStateDescriptor(name="v", value_type=pa.int64(), key_type=pa.int64())
    t = fs.TimerServiceDescriptor(name="t", key_type=pa.int64())
    keys = list(range(1000))
    with store.begin(max_parallelism=128) as w:
        w.put_state("op", d, pa.table({"key": keys, "value": keys}))
        w.put_timers("op", t, pa.table({"key": keys[:10], "timestamp": keys[:10]}))
    before = _snapshot(store)
    w = store.begin(max_parallelism=256)
    w.put_state("op", d, store.read_state("op", "v").drop_columns(["key_group"]))
    with pytest.raises(fs.InvalidArgumentError, match=r"op/t \(timers\)"):
        w.commit()
    assert _snapshot(store) == before
    with store.begin(max_parallelism=256) as w:
        w.put_state("op", d, store.read_state("op", "v").drop_columns(["key_group"]))
        w.put_timers("op", t, store.read_timers("op", "t").drop_columns(["key_group"]))
    got = store.read_state("op", "v")
    assert store.checkpoint().max_parallelism == 256
    assert got.num_rows == 1000
    assert all(r["key_group"] == fs.assign_key_group(r["key"], 256, pa.int64()) for r in got.to_pylist())


def test_schema_mismatch_names_the_column_and_changes_nothing(populated: fs.CheckpointStore) -> None:
    before = _snapshot(populated)
    d = fs.ValueStateDescriptor(name="count", value_type=pa.int64())
    w = populated.begin()
    with pytest.raises(fs.SchemaMismatchError, match="column 'value' has type string"):
        w.put_state("sessions", d, pa.table({"key": ["x"], "value": ["not a number"]}))
    with pytest.raises(fs.SchemaMismatchError, match="missing column 'value'"):
        w.put_state("sessions", d, pa.table({"key": ["x"], "val": [1]}))
    with pytest.raises(fs.SchemaMismatchError, match="column 'key' has 1 null values"):
        w.put_state("sessions", d, pa.table({"key": pa.array([None], pa.string()), "value": [1]}))
    with pytest.raises(fs.SchemaMismatchError, match="'key_group' does not match"):
        w.put_state("sessions", d, pa.table({"key_group": [0], "key": ["a"], "value": [1]}) if fs.assign_key_group("a", 32) != 0 else pa.table({"key_group": [1], "key": ["a"], "value": [1]}))
    with pytest.raises(fs.SchemaMismatchError, match=r"state 'count': declared as value key string value int64, got value key string value double"):
        w.put_state("sessions", fs.ValueStateDescriptor(name="count", value_type=pa.float64()), pa.table({"key": ["x"], "value": [1.0], "tombstone": [False]}), mode="delta")
    with pytest.raises(fs.KeyGroupOutOfRangeError, match="outside the range"):
        w.put_state("sessions", d, pa.table({"key": ["a", "b", "c", "d"], "value": [1, 2, 3, 4]}), key_group_range=(0, 0))
    w.abort()
    assert _snapshot(populated) == before


def test_structure_edits_remove_and_rename(populated: fs.CheckpointStore) -> None:
    with populated.begin() as w:
        w.rename_operator("sessions", "sessions-v2")
        w.remove_state("sessions-v2", "gap")
    meta = populated.metadata()
    assert list(meta.operators) == ["sessions-v2"]
    assert list(meta.operators["sessions-v2"].timer_services) == []
    assert {r["key"] for r in populated.read_state("sessions-v2", "count").to_pylist()} == {"a", "b", "c"}
    with populated.begin() as w:
        w.remove_operator("sessions-v2")
    assert populated.metadata().operators == {}
    assert populated.files() == []


def test_checkpoint_ids_must_increase(populated: fs.CheckpointStore) -> None:
    with pytest.raises(fs.InvalidArgumentError, match="must be greater than the newest committed id 2"):
        populated.begin(checkpoint_id=0)
    with populated.begin(checkpoint_id=10) as w:
        w.put_state("sessions", fs.ValueStateDescriptor(name="count", value_type=pa.int64()), pa.table({"key": ["a"], "value": [99], "tombstone": [False]}), mode="delta")
    assert {r["key"]: r["value"] for r in populated.read_state("sessions", "count").to_pylist()}["a"] == 99


def test_full_file_replaced_by_two_half_range_files_is_dropped_and_collected(job_root: str) -> None:
    """The shape of a rescale to more subtasks: a full file over key groups 0-7, then each half rewritten by its own put."""
    import os

    store = fs.open(job_root)
    d = fs.ValueStateDescriptor(name="v", value_type=pa.int64(), key_type=pa.int64())
    keys = list(range(200))
    with store.begin(max_parallelism=8) as w:
        w.put_state("op", d, pa.table({"key": keys, "value": keys}))
    (old,) = store.files()
    assert (old.key_group_start, old.key_group_end) == (0, 7)
    low = [k for k in keys if fs.assign_key_group(k, 8, pa.int64()) <= 3]
    high = [k for k in keys if k not in set(low)]
    with store.begin() as w:  # neither put replaces [0, 7] by itself; together they shadow every key group of it
        w.put_state("op", d, pa.table({"key": low, "value": [-k for k in low]}), key_group_range=(0, 3))
        w.put_state("op", d, pa.table({"key": high, "value": [-k for k in high]}), key_group_range=(4, 7))
    assert {(e.key_group_start, e.key_group_end, e.created_by_checkpoint_id) for e in store.files()} == {(0, 3, 2), (4, 7, 2)}
    assert {r["key"]: r["value"] for r in store.read_state("op", "v").to_pylist()} == {k: -k for k in keys}
    assert os.path.exists(store.io.fs_path(old.path))
    store.retain(1)  # checkpoint 1 discarded: nothing references the 0-7 file any more
    assert not os.path.exists(store.io.fs_path(old.path))
    assert {r["key"]: r["value"] for r in store.read_state("op", "v").to_pylist()} == {k: -k for k in keys}


def test_full_put_of_a_range_replaces_the_older_full_file_of_that_range(job_root: str) -> None:
    store = fs.open(job_root)
    d = fs.ValueStateDescriptor(name="v", value_type=pa.int64(), key_type=pa.int64())
    keys = list(range(200))
    with store.begin(max_parallelism=8) as w:  # two files: [0, 3] and [4, 7]
        w.put_state("op", d, pa.table({"key": keys, "value": keys}), ranges=[(0, 3), (4, 7)])
    with store.begin() as w:  # a delta over everything, then a full file for [0, 3] only
        w.put_state("op", d, pa.table({"key": keys, "value": [k + 1 for k in keys], "tombstone": [False] * 200}), mode="delta", ranges=[(0, 7)])
    inside = [k for k in keys if fs.assign_key_group(k, 8, pa.int64()) <= 3]
    with store.begin() as w:
        w.put_state("op", d, pa.table({"key": inside, "value": [-k for k in inside]}), key_group_range=(0, 3))
    files = {(e.kind, e.key_group_start, e.key_group_end, e.created_by_checkpoint_id) for e in store.files()}
    # the old [0, 3] full file is gone; the delta straddles both halves and stays
    assert files == {("full", 4, 7, 1), ("delta", 0, 7, 2), ("full", 0, 3, 3)}
    got = {r["key"]: r["value"] for r in store.read_state("op", "v").to_pylist()}
    assert got == {k: (-k if k in set(inside) else k + 1) for k in keys}


# --------------------------------------------------- what a put accepts


MP = 128


def _store(tmp_path: Path) -> fs.CheckpointStore:
    return fs.open(str(tmp_path / "root"))


def _stored(store: fs.CheckpointStore, op: str, name: str, key_type: pa.DataType, *, timers: bool = False) -> None:
    """Every stored key is of the declared type and in the key group Flink gives it."""
    t = store.read_timers(op, name) if timers else store.read_state(op, name)
    assert t.schema.field("key").type == key_type
    keys = t.column("key").to_pylist()
    assert t.column("key_group").to_pylist() == [fs.assign_key_group(k, MP, key_type) for k in keys]


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


# ------------------------------------------------- operator state files


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
