"""The shared-state registry and the commit protocol (FLINK-24611): which commits conflict,
what pending checkpoints pin, where the collection line is, and what savepoints own."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

import flinkstate as fs
from flinkstate.format import constants as C

D = fs.ValueStateDescriptor(name="v", value_type=pa.int64())


def _full(w: object, keys: list[str], base: int = 0) -> None:
    w.put_state("op", D, pa.table({"key": keys, "value": [base + i for i in range(len(keys))]}))  # type: ignore[attr-defined]


def _delta(w: object, key: str, value: int) -> None:
    w.put_state("op", D, pa.table({"key": [key], "value": [value], "tombstone": [False]}), mode="delta")  # type: ignore[attr-defined]


def _values(store: fs.CheckpointStore, cid: int | None = None) -> dict[str, int]:
    return {r["key"]: r["value"] for r in store.read_state("op", "v", cid).to_pylist()}


def _two_checkpoints(root: str) -> fs.CheckpointStore:
    store = fs.open(root)
    with store.begin() as w:
        _full(w, ["a", "b"])
    with store.begin() as w:
        _delta(w, "c", 3)
    return store


# ---------------------------------------------------------------------- item 3: commit protocol
def test_savepoint_begun_before_a_checkpoint_completes_still_commits(tmp_path: object) -> None:
    store = _two_checkpoints(str(tmp_path))
    w3 = store.begin(checkpoint_id=3)
    sp = store.begin(kind="savepoint", checkpoint_id=4)
    _delta(w3, "d", 4)
    _delta(sp, "e", 5)
    w3.commit()
    sp.commit()  # a commit of another id does not conflict
    assert [(c.checkpoint_id, c.kind) for c in store.checkpoints()] == [(1, "checkpoint"), (2, "checkpoint"), (3, "checkpoint"), (4, "savepoint")]
    assert _values(store, 3) == {"a": 0, "b": 1, "c": 3, "d": 4}
    assert _values(store, 4) == {"a": 0, "b": 1, "c": 3, "e": 5}  # the savepoint's own base (2) plus its change


def test_checkpoint_commits_while_retain_runs(tmp_path: object) -> None:
    store = _two_checkpoints(str(tmp_path))
    w3 = store.begin()
    _delta(w3, "d", 4)
    store.retain(1)  # a discard commit lands between begin and commit
    info = w3.commit()
    assert info.checkpoint_id == 3
    assert [c.checkpoint_id for c in store.checkpoints()] == [2, 3]
    assert _values(store) == {"a": 0, "b": 1, "c": 3, "d": 4}


def test_completed_checkpoint_aborts_earlier_pending_checkpoint_not_savepoint(tmp_path: object) -> None:
    store = _two_checkpoints(str(tmp_path))
    w3 = store.begin(checkpoint_id=3)
    sp3 = store.begin(kind="savepoint", checkpoint_id=3)
    w4 = store.begin(checkpoint_id=4)
    entries3 = [*w3.put_state("op", D, pa.table({"key": ["x"], "value": [9], "tombstone": [False]}), mode="delta")]
    _delta(w4, "y", 8)
    w4.commit()
    with pytest.raises(fs.CommitConflictError, match="checkpoint 3: checkpoint 4 completed first"):
        w3.commit()
    assert not any(store.io.exists(e.path) for e in entries3)
    _delta(sp3, "z", 7)
    sp3.commit()  # savepoints are not subsumed
    assert [c.checkpoint_id for c in store.checkpoints()] == [1, 2, 3, 4]
    assert store.checkpoint(3).kind == "savepoint"


def test_two_writers_of_one_id_still_conflict_after_an_unrelated_commit(tmp_path: object) -> None:
    store = _two_checkpoints(str(tmp_path))
    w1, w2 = store.begin(checkpoint_id=3), store.begin(checkpoint_id=3)
    _delta(w1, "p", 1)
    _delta(w2, "q", 2)
    store.retain(1)
    w1.commit()
    with pytest.raises(fs.CommitConflictError, match="checkpoint 3 was committed by another writer"):
        w2.commit()
    assert _values(store) == {"a": 0, "b": 1, "c": 3, "p": 1}


# ---------------------------------------------------------------------- item 4: pending snapshots pin their base
def test_pending_snapshot_pins_its_base_through_retain(tmp_path: object) -> None:
    from flinkstate.store.registry import pin

    store = _two_checkpoints(str(tmp_path))
    held = pin(store, 2)  # a snapshot taken on top of 2 is still being written
    with store.begin() as w:
        _full(w, ["a", "b"], 10)  # 3 replaces everything 1 and 2 used
    assert store.retain(1) == []  # 1 and 2 are discarded, their files stay for the pending snapshot
    assert [c.checkpoint_id for c in store.checkpoints()] == [3]
    w = store.begin(checkpoint_id=4, base=2)  # the pending snapshot's checkpoint builds on 2
    _delta(w, "d", 4)
    w.commit()
    held.release()
    assert _values(store, 4) == {"a": 0, "b": 1, "c": 3, "d": 4}
    store.retain(1)  # 4 still uses 1's and 2's files
    assert _values(store, 4) == {"a": 0, "b": 1, "c": 3, "d": 4}


def test_open_savepoint_writer_keeps_its_base_files_while_retain_runs(tmp_path: object) -> None:
    store = _two_checkpoints(str(tmp_path))
    sp = store.begin(kind="savepoint", checkpoint_id=3)  # on top of 2, copies its files at commit
    with store.begin(checkpoint_id=4) as w:
        _full(w, ["z"])
    store.retain(1)  # discards 1 and 2 while the savepoint still carries their files
    sp.commit()
    assert _values(store, 3) == {"a": 0, "b": 1, "c": 3}
    assert _values(store, 4) == {"z": 0}
    assert store.retain(1)  # now 1's and 2's files go


def _abandon(store: fs.CheckpointStore, cid: int) -> list[str]:
    """An attempt that wrote its files and died before its commit (the process crashed)."""
    import gc

    w = store.begin(checkpoint_id=cid)
    paths = [e.path for e in w.put_state("op", D, pa.table({"key": ["q"], "value": [99], "tombstone": [False]}), mode="delta")]
    del w
    gc.collect()
    return paths


# ---------------------------------------------------------------------- item 2: savepoints do not move the line
def test_savepoint_does_not_make_an_abandoned_attempt_collectable(tmp_path: object) -> None:
    store = _two_checkpoints(str(tmp_path))
    orphans = _abandon(store, 3)
    with store.begin(kind="savepoint", checkpoint_id=4) as w:
        _delta(w, "s", 1)
    assert store.retain(1) == []  # 1 stays used by 2; the attempt's files wait for a later checkpoint
    assert all(store.io.exists(p) for p in orphans)
    with store.begin(checkpoint_id=5, base=2) as w:
        _delta(w, "d", 4)
    assert set(orphans) <= set(store.retain(1))
    assert _values(store, 4) == {"a": 0, "b": 1, "c": 3, "s": 1}
    assert _values(store, 5) == {"a": 0, "b": 1, "c": 3, "d": 4}


# ---------------------------------------------------------------------- item 5: savepoints own their files
def test_crash_abandoned_newest_attempt_is_collected_once_its_id_completes(tmp_path: object) -> None:
    store = _two_checkpoints(str(tmp_path))
    orphans = _abandon(store, 3)
    assert store.retain(5) == []
    with store.begin() as w:  # the restarted job takes id 3 again
        _delta(w, "d", 4)
    assert store.checkpoints()[-1].checkpoint_id == 3
    assert sorted(store.retain(5)) == sorted(orphans)
    assert _values(store) == {"a": 0, "b": 1, "c": 3, "d": 4}


def test_first_checkpoint_after_savepoint_restore_owns_everything(tmp_path: object) -> None:
    import shutil

    from flinkstate.backend import KeyedStateBackend
    from flinkstate.runtime.coordinator import coordinator_table

    root = str(tmp_path)
    store = fs.open(root)
    offsets = fs.OperatorStateDescriptor(name="offsets", value_type=pa.int64())
    keys = [f"k{i}" for i in range(40)]
    with store.begin(kind="savepoint", max_parallelism=128) as w:
        _full(w, keys)
        w.put_operator_state("op", offsets, pa.table({"subtask": pa.array([0], pa.int32()), "value": [7]}))
        w.put_coordinator("op", coordinator_table(b"coord-state", [(0, b"pending-event")]))
    sp = store.checkpoints()[-1].checkpoint_id
    lower = KeyedStateBackend.restore(store, "op", checkpoint_id=sp, key_group_range=(0, 63))
    v = lower.get_state(D)
    lower.set_current_key(next(k for k in keys if fs.assign_key_group(k, 128) <= 63))
    v.update(1000)
    info = lower.checkpoint(store, "op").result()
    assert not [e.path for e in store.files(info.checkpoint_id) if e.path.startswith("savepoints/")]
    expected = _values(store, info.checkpoint_id)
    coord = store.read_coordinator("op", info.checkpoint_id).to_pylist()
    shutil.rmtree(os.path.join(root, "savepoints"))  # the user deletes the savepoint they own
    assert _values(store, info.checkpoint_id) == expected and len(expected) == len(keys)
    assert store.read_operator_state("op", "offsets", info.checkpoint_id).column("value").to_pylist() == [7]
    assert store.read_coordinator("op", info.checkpoint_id).to_pylist() == coord


# ---------------------------------------------------------------------- item 1: backends reuse aborted uploads
def _backend_with_aborted_checkpoint(root: str) -> tuple[fs.CheckpointStore, object, object, list[object]]:
    from flinkstate.backend import KeyedStateBackend

    store = fs.open(root)
    be = KeyedStateBackend(max_parallelism=128, key_group_range=(0, 127))
    v = be.get_state(D)
    for i in range(1000):
        be.set_current_key(f"k{i}")
        v.update(i)
    be.checkpoint(store, "op").result()
    for i in range(100):  # changes of the checkpoint that will be aborted
        be.set_current_key(f"k{i}")
        v.update(-i)
    snap = be.snapshot(2)
    w = store.begin(checkpoint_id=2, base=snap.base_checkpoint_id)
    aborted = snap.write(w, "op")
    w.abort()  # e.g. the commit failed
    be.notify_checkpoint_aborted(2)
    for i in range(990, 1000):  # changes after the aborted checkpoint
        be.set_current_key(f"k{i}")
        v.update(0)
    return store, be, v, aborted


def _expected() -> dict[str, int]:
    exp = {f"k{i}": i for i in range(1000)}
    exp.update({f"k{i}": -i for i in range(100)})
    exp.update({f"k{i}": 0 for i in range(990, 1000)})
    return exp


def test_checkpoint_after_an_aborted_one_uploads_only_what_changed_since(tmp_path: object) -> None:
    store, be, _, aborted = _backend_with_aborted_checkpoint(str(tmp_path))
    assert aborted and all(store.io.exists(e.path) for e in aborted)  # kept for reuse
    info = be.checkpoint(store, "op").result()  # type: ignore[attr-defined]
    files = store.files(info.checkpoint_id)
    new = [e for e in files if e.created_by_checkpoint_id == info.checkpoint_id]
    assert sum(e.rows for e in new) == 10  # not 110: the aborted attempt's 100 changes are referenced
    assert {e.path for e in aborted} <= {e.path for e in files}
    assert _values(store) == _expected()
    store.retain(1)
    assert _values(store) == _expected()
    assert all(store.io.exists(e.path) for e in aborted)


def test_reused_file_gone_falls_back_to_writing_the_changes(tmp_path: object) -> None:
    store, be, _, aborted = _backend_with_aborted_checkpoint(str(tmp_path))
    store.io.delete(aborted[0].path)  # type: ignore[attr-defined]
    info = be.checkpoint(store, "op").result()  # type: ignore[attr-defined]
    new = [e for e in store.files(info.checkpoint_id) if e.created_by_checkpoint_id == info.checkpoint_id]
    assert sum(e.rows for e in new) == 110
    assert _values(store) == _expected()


def test_aborted_files_nobody_reused_are_collected_after_a_later_checkpoint(tmp_path: object) -> None:
    store, be, _, aborted = _backend_with_aborted_checkpoint(str(tmp_path))
    assert store.retain(1) == []  # no checkpoint after 2 yet: the aborted files stay
    with store.begin(checkpoint_id=3) as w:  # another writer's checkpoint that does not use them
        _delta(w, "zz", 1)
    assert {e.path for e in aborted} <= set(store.retain(5))  # type: ignore[attr-defined]


# ---------------------------------------------------------------------- the catalog at scale (issue 8 item 6)
def test_gc_prunes_the_manifest_rows_of_discarded_checkpoints(tmp_path: object) -> None:
    """The manifest holds the retained checkpoints only: it stops growing with history, reads stay whole."""

    store = fs.open(str(tmp_path))
    with store.begin() as w:
        _full(w, ["a", "b"])
    for i in range(5):
        with store.begin() as w:
            _delta(w, f"k{i}", i)
    store.retain(2)
    manifest = store.catalog.manifest_table()
    assert sorted(set(manifest.column("checkpoint_id").to_pylist())) == [5, 6]
    retained = {c.checkpoint_id: c.files for c in store.checkpoints()}
    assert {cid: len(store.files(cid)) for cid in retained} == retained
    assert _values(store) == {"a": 0, "b": 1, **{f"k{i}": i for i in range(5)}}
    assert store.retain(2) == [] and store.checkpoints(include_discarded=True)[0].status == C.STATUS_DISCARDED
    with store.begin() as w:  # a new checkpoint carries the retained files over in full
        _delta(w, "z", 9)
    assert _values(store)["z"] == 9 and len(store.files()) == store.info().files


def test_registry_deletes_only_files_no_retained_checkpoint_uses(job_root: str) -> None:
    store = fs.open(job_root)
    d = fs.ValueStateDescriptor(name="v", value_type=pa.int64())
    with store.begin() as w:
        w.put_state("op", d, pa.table({"key": ["a"], "value": [1]}))
    with store.begin() as w:
        w.put_state("op", d, pa.table({"key": ["b"], "value": [2], "tombstone": [False]}), mode="delta")
    with store.begin() as w:  # a new full file: 1's full and 2's delta are no longer used by 3
        w.put_state("op", d, pa.table({"key": ["a", "b"], "value": [1, 2]}))
    f1, f2, f3 = (set(e.path for e in store.files(i)) for i in (1, 2, 3))
    assert store.retain(2) == []  # 2 still uses 1's full file
    assert [c.checkpoint_id for c in store.checkpoints()] == [2, 3]
    assert [c.status for c in store.checkpoints(include_discarded=True)] == ["discarded", "completed", "completed"]
    deleted = store.retain(1)
    assert set(deleted) == (f1 | f2) - f3
    assert all(store.io.exists(p) for p in f3)
    with pytest.raises(fs.CheckpointNotFoundError, match=r"checkpoint 1 is not committed.*retained checkpoints: \[3\]"):
        store.read_state("op", "v", 1)
