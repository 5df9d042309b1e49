"""Per-operator max parallelism (format v2): every operator has its own number of key groups, as in Flink.

Three operators with max parallelism 128 (Flink's default up to parallelism 85), 256 (Flink's default for
parallelism 86-170) and 4096 (set explicitly) in one checkpoint: reads, key lookups, timers, rescaling one
operator, maintenance, changes, the metadata tables and `describe`; a format-v1 root (one max parallelism per
checkpoint) is read and carried forward; a file written for another max parallelism is refused on read.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import flinkstate as fs
from flinkstate.core.errors import CorruptFileError, InvalidArgumentError, OperatorNotFoundError
from flinkstate.format import constants as C
from flinkstate.format.writer import write_state_files
from flinkstate.core.keygroups import assign_key_groups, default_max_parallelism
from flinkstate.store.rewrite import rescale

OPS = {"small": 128, "medium": 256, "wide": 4096}  # Flink-derived (p <= 85, p = 100) and explicit
COUNT = fs.ValueStateDescriptor(name="count", key_type=pa.int64(), value_type=pa.int64())
SEEN = fs.MapStateDescriptor(name="seen", key_type=pa.string(), user_key_type=pa.string(), user_value_type=pa.int64(),
                             ttl=fs.StateTtlConfig(ttl_ms=1_000))
TIMERS = fs.TimerServiceDescriptor(name="user-timers", key_type=pa.int64())
SPLITS = fs.OperatorStateDescriptor(name="splits", value_type=pa.string())
KEYS = list(range(600))
FIXTURE_V1 = Path(__file__).resolve().parents[2] / "fixtures" / "backend-v1"


def _build(root: Path) -> fs.CheckpointStore:
    """Checkpoint 1: three keyed operators (own max parallelism each) and one with operator state only."""
    assert default_max_parallelism(100) == 256 and default_max_parallelism(85) == 128
    store = fs.open(str(root))
    with store.begin() as w:
        for uid, mp in OPS.items():
            w.set_max_parallelism(mp, uid)
            w.put_state(uid, COUNT, pa.table({"key": KEYS, "value": [k * 10 for k in KEYS]}))
            w.put_state(uid, SEEN, pa.table({"key": [f"u{k}" for k in KEYS], "user_key": ["a"] * len(KEYS), "value": KEYS,
                                             "ttl_timestamp": [1_000] * len(KEYS)}))
            w.put_timers(uid, TIMERS, pa.table({"key": KEYS, "timestamp": [k + 1 for k in KEYS]}))
        w.set_parallelism("medium", 100)
        w.put_operator_state("source", SPLITS, pa.table({"subtask": pa.array([0], pa.int32()), "value": ["s0"]}))
        w.set_max_parallelism(32, "source")
    return store


@pytest.fixture()
def store(tmp_path: Path) -> fs.CheckpointStore:
    return _build(tmp_path / "job")


def _footers(root: Path, operator: str) -> set[str]:
    """The flinkstate.max_parallelism of every keyed and timer file of an operator."""
    out = set()
    for p in (root / "shared" / operator).rglob("*.parquet"):
        meta = pq.read_schema(p).metadata or {}
        if C.META_MAX_PARALLELISM.encode() in meta:
            out.add(meta[C.META_MAX_PARALLELISM.encode()].decode())
    return out


def test_each_operator_reads_and_looks_up_keys_with_its_own_max_parallelism(store: fs.CheckpointStore, tmp_path: Path) -> None:
    ck = store.checkpoint()
    assert ck.format_version == C.FORMAT_VERSION == 2
    assert {u: ck.max_parallelism_of(u) for u in ck.operators} == {**OPS, "source": 32}
    assert ck.max_parallelism == 128  # the checkpoint's default (no begin(max_parallelism=...), no base)
    for uid, mp in OPS.items():
        assert _footers(tmp_path / "job", uid) == {str(mp)}
        t = store.read_state(uid, "count")
        assert t.num_rows == len(KEYS)
        assert t.column("key_group").to_pylist() == sorted(assign_key_groups(t.column("key"), mp).to_pylist())
        assert assign_key_groups(t.column("key"), mp).equals(t.column("key_group").combine_chunks())
        assert max(e.key_group_end for e in ck.state_files(uid, "count")) == mp - 1
        # key lookups hash with the operator's max parallelism: every asked key is found
        probe = [7, 123, 599]
        got = store.read_state(uid, "count", keys=probe)
        assert sorted(got.column("key").to_pylist()) == probe and sorted(got.column("value").to_pylist()) == [70, 1230, 5990]
        got = store.read_state(uid, "seen", keys=["u5", "u77"], include_expired=True)
        assert sorted(got.column("key").to_pylist()) == ["u5", "u77"]
        timers = ck.scan_timers(uid, "user-timers", keys=[42, 43]).to_arrow()
        assert sorted(timers.column("timestamp").to_pylist()) == [43, 44]
        kg = assign_key_groups(pa.array([599], pa.int64()), mp)[0].as_py()
        one = store.read_state(uid, "count", key_group_range=(kg, kg))
        assert 599 in one.column("key").to_pylist()
    ops = ck.inspect.operators()
    assert dict(zip(ops.column("operator").to_pylist(), ops.column("max_parallelism").to_pylist())) == {**OPS, "source": 32}


def test_describe_and_the_stored_document_name_each_operators_max_parallelism(store: fs.CheckpointStore, tmp_path: Path) -> None:
    import io

    from flinkstate.cli import describe, main

    doc = describe(store, None)
    assert {o["uid"]: o["max_parallelism"] for o in doc["operators"]} == {**OPS, "source": 32}
    out = io.StringIO()
    assert main(["describe", str(tmp_path / "job")], out=out) == 0
    assert "operator medium (parallelism 100, max parallelism 256)" in out.getvalue()
    assert "operator wide (max parallelism 4096)" in out.getvalue()
    stored = store.record().metadata
    assert stored["format_version"] == 2
    assert {u: o["max_parallelism"] for u, o in stored["operators"].items()} == {**OPS, "source": 32}


def test_a_v1_root_is_read_and_carried_forward(tmp_path: Path) -> None:
    """Format v1 records one max parallelism per checkpoint (the log row's): every operator has it; a checkpoint written
    on top is v2 and records it per operator, next to a new operator with its own."""
    shutil.copytree(FIXTURE_V1, tmp_path / "v1")
    store = fs.open(str(tmp_path / "v1"))
    old = store.checkpoint(2)
    assert old.format_version == 1 and "max_parallelism" not in json.dumps(old.record.metadata["operators"])
    assert old.max_parallelism_of("fixture-op") == old.max_parallelism == 32
    before = {n: store.read_state("fixture-op", n, 2, raw=True) for n in old.operator("fixture-op").keyed_states}
    with store.begin() as w:
        w.set_max_parallelism(256, "added")
        w.put_state("added", COUNT, pa.table({"key": [1, 2], "value": [10, 20]}))
    new = store.checkpoint()
    assert new.format_version == 2 and new.base_checkpoint_id == 2
    assert {u: new.max_parallelism_of(u) for u in new.operators} == {"fixture-op": 32, "added": 256}
    assert new.record.metadata["operators"]["fixture-op"]["max_parallelism"] == 32
    assert new.max_parallelism == 32  # the default carried from the v1 checkpoint
    for n, t in before.items():  # the v1 files are carried over by reference and read as before
        assert store.read_state("fixture-op", n, raw=True).equals(t)
    assert {e.path for e in new.state_files("fixture-op", "profile")} == {e.path for e in old.state_files("fixture-op", "profile")}
    assert store.read_state("added", "count", keys=[2]).column("value").to_pylist() == [20]


def test_rescale_one_operator_keeps_the_others_files(store: fs.CheckpointStore) -> None:
    before = store.checkpoint()
    info = rescale(store, 512, operators=["wide"])
    after = store.checkpoint(info.checkpoint_id)
    assert {u: after.max_parallelism_of(u) for u in OPS} == {"small": 128, "medium": 256, "wide": 512}
    for uid in ("small", "medium"):
        assert {e.path for e in after.entries if e.operator == uid} == {e.path for e in before.entries if e.operator == uid}
    assert all(e.created_by_checkpoint_id == info.checkpoint_id for e in after.entries if e.operator == "wide")
    for name in ("count", "seen"):
        a = store.read_state("wide", name, before.checkpoint_id, include_expired=True)
        b = store.read_state("wide", name, include_expired=True)
        assert sorted(b.drop_columns(["key_group"]).to_pylist(), key=str) == sorted(a.drop_columns(["key_group"]).to_pylist(), key=str)
        assert assign_key_groups(b.column("key"), 512).equals(b.column("key_group").combine_chunks())
    assert store.read_state("wide", "count", keys=[599]).column("value").to_pylist() == [5990]
    assert store.read_timers("wide", "user-timers").num_rows == len(KEYS)
    info = rescale(store, 64)  # every operator, and the default
    assert info.max_parallelism == 64
    assert {store.checkpoint().max_parallelism_of(u) for u in [*OPS, "source"]} == {64}
    with pytest.raises(OperatorNotFoundError, match="nope"):
        rescale(store, 64, operators=["nope"])


def test_changing_an_operators_max_parallelism_needs_its_states_rewritten(store: fs.CheckpointStore) -> None:
    w = store.begin()
    w.put_state("small", COUNT, pa.table({"key": [1], "value": [1], "tombstone": [False]}), mode="delta")
    with pytest.raises(InvalidArgumentError, match="operator 'small' already has keyed state or timers written for max parallelism 128"):
        w.set_max_parallelism(1024, "small")
    w.abort()
    w = store.begin()
    w.set_max_parallelism(1024, "medium")
    w.put_state("medium", COUNT, pa.table({"key": [1], "value": [1]}))  # one state rewritten, the others not
    with pytest.raises(InvalidArgumentError, match=r"medium: 256 -> 1024.*\['medium/seen', 'medium/user-timers \(timers\)'\]"):
        w.commit()
    assert [c.checkpoint_id for c in store.checkpoints()] == [1]
    with store.begin() as w:  # renamed, then rescaled: its states are rewritten under the new uid
        w.rename_operator("medium", "renamed")
        w.set_max_parallelism(1024, "renamed")
        from flinkstate.store.rewrite import rescale_into

        rescale_into(w)
    ck = store.checkpoint()
    assert ck.max_parallelism_of("renamed") == 1024 and "medium" not in ck.operators
    assert store.read_state("renamed", "count", keys=[300]).column("value").to_pylist() == [3000]
    with store.begin() as w:  # an operator removed and added again under its uid is new: nothing to rescale
        w.remove_operator("small")
        w.set_max_parallelism(2048, "small")
        w.put_state("small", COUNT, pa.table({"key": [5], "value": [6]}))
        assert not w.rescaled
    assert store.checkpoint().max_parallelism_of("small") == 2048


def test_a_file_written_for_another_max_parallelism_is_refused(store: fs.CheckpointStore) -> None:
    """Files registered for an operator (as Spark executors' are) must have been written for its max parallelism."""
    keys = [k for k in range(100) if assign_key_groups(pa.array([k], pa.int64()), 256)[0].as_py() < 128][:2]
    with store.begin() as w:
        entries = write_state_files(w.io, "small", COUNT, pa.table({"key": keys, "value": [5, 6]}), checkpoint_id=w.checkpoint_id,
                                    checkpoint_kind=w.kind, max_parallelism=256, delta=False, ranges=[(0, 127)], seq=1)
        w.add_state_files("small", COUNT, entries, mode="full", key_group_range=(0, 127))
    with pytest.raises(CorruptFileError, match="its key groups are for max parallelism 256, the operator's is 128"):
        store.read_state("small", "count")
    from flinkstate.store.verify import verify_store

    report = verify_store(store)
    assert any("max parallelism 256" in d.problem for d in report.damaged)


def test_compact_and_expire_keep_each_operators_key_groups(store: fs.CheckpointStore, tmp_path: Path) -> None:
    with store.begin() as w:
        for uid in OPS:
            w.put_state(uid, COUNT, pa.table({"key": [1, 599], "value": [-1, -2], "tombstone": [False, False]}), mode="delta")
    res = store.compact()
    assert res.checkpoint_id is not None
    for uid, mp in OPS.items():
        assert _footers(tmp_path / "job", uid) == {str(mp)}
        t = store.read_state(uid, "count", keys=[1, 599])
        assert sorted(t.column("value").to_pylist()) == [-2, -1]
    res = store.expire(at=10_000)
    assert res.dropped == {f"{u}/seen": len(KEYS) for u in OPS}
    assert all(store.read_state(u, "seen", include_expired=True).num_rows == 0 for u in OPS)


def test_changes_use_each_operators_max_parallelism(store: fs.CheckpointStore) -> None:
    from flinkstate.read.changes import state_changes

    with store.begin() as w:
        w.put_state("wide", COUNT, pa.table({"key": [3, 1000], "value": [33, 1], "tombstone": [False, False]}), mode="delta")
    ch = state_changes(store, "wide", "count", 1, 2)
    assert sorted(zip(ch.column("key").to_pylist(), ch.column("value").to_pylist())) == [(3, 33), (1000, 1)]
    info = rescale(store, 300, operators=["wide"])
    assert state_changes(store, "wide", "count", 2, info.checkpoint_id).num_rows == 0  # re-keyed, same content


def test_the_embedded_backend_writes_its_operator_next_to_others(store: fs.CheckpointStore) -> None:
    """A backend of max parallelism 32 checkpoints its operator into a root whose other operators keep theirs."""
    from flinkstate.backend import KeyedStateBackend

    be = KeyedStateBackend(max_parallelism=32, key_type=pa.string())
    st = be.get_state(fs.ValueStateDescriptor(name="v", value_type=pa.int64()))
    for k in ("a", "b"):
        be.set_current_key(k)
        st.update(len(k))
    info = be.checkpoint(store, "backend-op").result(timeout=60)
    ck = store.checkpoint(info.checkpoint_id)
    assert {u: ck.max_parallelism_of(u) for u in ck.operators} == {**OPS, "source": 32, "backend-op": 32}
    (back,) = KeyedStateBackend.restore_all(store, "backend-op", 1)
    assert back.max_parallelism == 32
    fresh = fs.open(str(Path(store.root.removeprefix("file://")).parent / "fresh"))
    be.checkpoint(fresh, "backend-op").result(timeout=60)
    assert fresh.checkpoint().max_parallelism == 32  # a new root: the backend's is also the default


def test_a_v2_document_without_an_operators_max_parallelism_is_damaged(store: fs.CheckpointStore) -> None:
    """From v2 on the value is required: a document missing it is refused by name, never read with a guessed one."""
    rec = store.record()
    doc = json.loads(json.dumps(rec.metadata))
    del doc["operators"]["wide"]["max_parallelism"]
    row = {"checkpoint_id": 2, "attempt_id": rec.attempt_id, "event": "COMPLETED", "kind": "checkpoint", "event_time": rec.created_at,
           "created_at": rec.created_at, "max_parallelism": 128, "format_version": 2, "base_checkpoint_id": 1, "files": 0, "rows": 0,
           "bytes": 0, "metadata": json.dumps(doc)}
    store.catalog.commit_log(row, store.catalog.log_version())  # type: ignore[arg-type]
    with pytest.raises(CorruptFileError, match=r"checkpoint 2 is damaged.*operator 'wide' records no max parallelism"):
        store.read_state("small", "count")
    with pytest.raises(CorruptFileError, match="checkpoint 2 is damaged"):
        store.begin()
    assert store.read_state("wide", "count", 1, keys=[599]).column("value").to_pylist() == [5990]
