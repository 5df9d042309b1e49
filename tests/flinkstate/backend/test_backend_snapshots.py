"""Snapshots: flat synchronous pause, isolation from concurrent mutation, incremental deltas,
failed checkpoints, compaction with TTL cleanup, restore into other key-group ranges."""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import flinkstate
from flinkstate import (
    ListStateDescriptor,
    MapStateDescriptor,
    StateTtlConfig,
    TimerServiceDescriptor,
    ValueStateDescriptor,
    key_group_range,
)
from flinkstate.backend import CompactionPolicy, KeyedStateBackend
from flinkstate.core.errors import InvalidArgumentError, KeyGroupOutOfRangeError

OP = "op"
VALUE = ValueStateDescriptor(name="value", value_type=pa.string())
LIST = ListStateDescriptor(name="list", value_type=pa.int64())
MAP = MapStateDescriptor(name="map", user_key_type=pa.int64(), user_value_type=pa.string(), namespace_type=pa.string())
TIMERS = TimerServiceDescriptor(name="timers")


def commit(store: Any, backends: list[KeyedStateBackend], cid: int, *, full: bool = False) -> Any:
    """One checkpoint of several backends (one commit), as the job runner does."""
    snaps = [b.snapshot(cid, full=full) for b in backends]
    base = snaps[0].base_checkpoint_id
    with store.begin(checkpoint_id=cid, base=base, max_parallelism=backends[0].max_parallelism) as w:
        for s in snaps:
            s.write(w, OP)
    for b in backends:
        b.notify_checkpoint_complete(cid)
    return snaps


def populate(be: KeyedStateBackend, keys: list[str]) -> None:
    v, lst, m = be.get_state(VALUE), be.get_state(LIST), be.get_state(MAP)
    t = be.timer_service(TIMERS)
    for i, k in enumerate(keys):
        be.set_current_key(k)
        v.update(f"v{i}")
        lst.add_all([i, i + 1])
        be.set_current_namespace("ns")
        m.put(i, f"m{i}")
        t.register(1000 + i)


def dump(be: KeyedStateBackend) -> dict[str, dict[Any, Any]]:
    """Everything a backend holds, as plain dicts."""
    out: dict[str, dict[Any, Any]] = {}
    for name, t in be._tables.items():
        out[name] = {pk: (dict(v) if isinstance(v, dict) else list(v) if isinstance(v, list) else v) for pk, v in t.items()}
    for name, t in be._timer_tables.items():
        out["timers:" + name] = {pk: None for pk, _ in t.items()}
    return out


def merged(dumps: list[dict[str, dict[Any, Any]]]) -> dict[str, dict[Any, Any]]:
    out: dict[str, dict[Any, Any]] = {}
    for d in dumps:
        for name, entries in d.items():
            out.setdefault(name, {}).update(entries)
    return out


def test_sync_pause_is_flat_and_small() -> None:
    pauses = {}
    for n in (2_000, 200_000):
        be = KeyedStateBackend(max_parallelism=128)
        v = be.get_state(ValueStateDescriptor(name="v", value_type=pa.int64()))
        t = be.timer_service(TIMERS)
        tbl = v._t
        for i in range(n):  # bulk fill through the table (the state API is exercised elsewhere)
            tbl.put(f"key-{i}", i)
        for i in range(n // 4):
            be.set_current_key(f"key-{i}")
            t.register(i)
        best = 1.0
        for cid in range(1, 4):
            s = be.snapshot(cid)
            best = min(best, s.sync_seconds)
            s.release()
            be.notify_checkpoint_aborted(cid)
        pauses[n] = best
    assert pauses[200_000] < 0.005, pauses
    assert pauses[200_000] < pauses[2_000] * 10 + 0.001, pauses  # no growth with the number of entries


def test_snapshot_isolation_under_concurrent_mutation(tmp_path: Path) -> None:
    store = flinkstate.open(tmp_path)
    be = KeyedStateBackend(max_parallelism=128, num_buckets=64)
    keys = [f"k{i}" for i in range(3000)]
    populate(be, keys)
    expected = dump(be)
    snap = be.snapshot(1)
    stop = threading.Event()
    errors: list[BaseException] = []

    def mutate() -> None:
        v, lst, m = be.get_state(VALUE), be.get_state(LIST), be.get_state(MAP)
        t = be.timer_service(TIMERS)
        rng = random.Random(1)
        rounds = 0
        while not stop.is_set() or rounds < 3:
            for k in rng.sample(keys, 500):
                be.set_current_key(k)
                v.update("changed")
                lst.add(-1)
                be.set_current_namespace("ns")
                m.put(10**6, "new")
                m.remove(int(k[1:]))
                t.register(5)
                t.delete(1000 + int(k[1:]))
                if rng.random() < 0.2:
                    v.clear()
                    lst.clear()
                    m.clear()
            for k in [f"new{rounds}-{i}" for i in range(100)]:
                try:
                    be.set_current_key(k)
                except KeyGroupOutOfRangeError:
                    continue
                v.update("x")
            rounds += 1

    # mutations before the asynchronous part starts, then during it
    mutate_thread = threading.Thread(target=lambda: _guard(mutate, errors))
    stop.clear()
    mutate_thread.start()
    time.sleep(0.05)
    with store.begin(checkpoint_id=1, base=None, max_parallelism=128) as w:
        snap.write(w, OP)
    stop.set()
    mutate_thread.join()
    assert not errors, errors
    be.notify_checkpoint_complete(1)
    assert dump(be) != expected  # it did mutate
    restored = KeyedStateBackend.restore(store, OP, checkpoint_id=1)
    assert dump(restored) == expected


def _guard(fn: Any, errors: list[BaseException]) -> None:
    try:
        fn()
    except BaseException as e:  # noqa: BLE001
        errors.append(e)


def test_incremental_checkpoint_writes_at_most_3_percent(tmp_path: Path) -> None:
    store = flinkstate.open(tmp_path)
    be = KeyedStateBackend(max_parallelism=128)
    v = be.get_state(ValueStateDescriptor(name="v", value_type=pa.string()))
    m = be.get_state(MapStateDescriptor(name="m", user_key_type=pa.int64(), user_value_type=pa.int64()))
    rng = random.Random(3)
    keys = [f"user-{i:07d}" for i in range(50_000)]
    for k in keys:
        be.set_current_key(k)
        v.update(f"{rng.getrandbits(64):x}-{rng.getrandbits(32):x}")
        m.put(rng.randrange(10**9), rng.randrange(10**9))
    commit(store, [be], 1)
    full = store.checkpoint(1).bytes
    changed = rng.sample(keys, len(keys) // 100)
    for i, k in enumerate(changed):
        be.set_current_key(k)
        if i % 10 == 0:
            v.clear()
            m.clear()
        else:
            v.update(f"{rng.getrandbits(64):x}")
            m.put(rng.randrange(10**9), 1)
    snaps = commit(store, [be], 2)
    assert all(p.mode == "delta" for p in snaps[0].parts)
    new_bytes = sum(f.bytes for f in store.files(2) if f.created_by_checkpoint_id == 2)
    assert new_bytes <= 0.03 * full, (new_bytes, full)
    restored = KeyedStateBackend.restore(store, OP)
    assert dump(restored) == dump(be)


def test_failed_checkpoint_keeps_its_changes(tmp_path: Path) -> None:
    store = flinkstate.open(tmp_path)
    be = KeyedStateBackend(max_parallelism=128)
    populate(be, [f"k{i}" for i in range(100)])
    commit(store, [be], 1)
    v = be.get_state(VALUE)
    t = be.timer_service(TIMERS)
    be.set_current_key("k1")
    v.update("lost?")
    t.delete(1001)
    snap = be.snapshot(2)
    w = store.begin(checkpoint_id=2, base=1, max_parallelism=128)
    snap.write(w, OP)
    w.abort()
    be.notify_checkpoint_aborted(2)
    be.set_current_key("k2")
    v.update("later")
    snaps = commit(store, [be], 3)
    assert snaps[0].incremental
    assert store.checkpoint(3).base_checkpoint_id == 1
    restored = KeyedStateBackend.restore(store, OP, checkpoint_id=3)
    assert dump(restored) == dump(be)
    be.set_current_key("k1")
    restored.set_current_key("k1")
    assert restored.get_state(VALUE).value() == "lost?"


def test_compaction_policy_and_ttl_cleanup_in_full_files(tmp_path: Path) -> None:
    store = flinkstate.open(tmp_path)
    now = [1_000]
    ttl = StateTtlConfig(ttl_ms=100, incremental_cleanup=None)  # compaction cleanup on by default
    ttl_full = StateTtlConfig(ttl_ms=100, incremental_cleanup=None, compaction_cleanup=None, cleanup_full_snapshot=True)
    be = KeyedStateBackend(max_parallelism=16, clock=lambda: now[0], compaction=CompactionPolicy(max_deltas=2, max_delta_ratio=100))
    a = be.get_state(ValueStateDescriptor(name="a", value_type=pa.int64(), ttl=ttl))
    b = be.get_state(ValueStateDescriptor(name="b", value_type=pa.int64(), ttl=ttl_full))
    for i in range(50):
        be.set_current_key(f"k{i}")
        a.update(i)
        b.update(i)
    modes = []
    for cid in range(1, 5):
        if cid == 3:
            now[0] += 200  # everything written so far expires
        be.set_current_key("fresh")
        a.update(cid)
        b.update(cid)
        snaps = commit(store, [be], cid)
        modes.append({p.name: (p.mode, p.reason) for p in snaps[0].parts})
    assert modes[0]["a"] == ("full", "first")
    assert modes[1]["a"][0] == modes[2]["a"][0] == "delta"
    assert modes[3]["a"] == ("full", "compaction")
    # stored rows (raw: the test clock is not the checkpoints' time): the compaction dropped the expired entries
    # of "a"; "b" drops them in every full file only
    assert store.read_state(OP, "a", 4, raw=True).column("key").to_pylist() == ["fresh"]
    assert sorted(store.read_state(OP, "a", 3, raw=True).column("key").to_pylist())[:2] == ["fresh", "k0"]
    assert store.read_state(OP, "b", 4, raw=True).column("key").to_pylist() == ["fresh"]
    commit(store, [be], 5, full=True)  # requested full: "a" keeps expired entries (no full-snapshot cleanup) -> none left here
    assert len(store.read_state(OP, "b", 5, raw=True)) == 1


def test_restore_rescales_up_and_down_with_timers(tmp_path: Path) -> None:
    store = flinkstate.open(tmp_path)
    mp = 64
    one = KeyedStateBackend(max_parallelism=mp)
    keys = [f"key-{i}" for i in range(600)]
    populate(one, keys)
    commit(store, [one], 1)
    # a delta on top, with deletes
    v, m = one.get_state(VALUE), one.get_state(MAP)
    t = one.timer_service(TIMERS)
    for i, k in enumerate(keys[:100]):
        one.set_current_key(k)
        v.update("delta")
        one.set_current_namespace("ns")
        m.remove(i)
        t.delete(1000 + i)
    commit(store, [one], 2)
    full_view = dump(one)

    three = [KeyedStateBackend.restore(store, OP, parallelism=3, subtask=i) for i in range(3)]
    for i, b in enumerate(three):
        assert b.key_group_range == key_group_range(mp, 3, i)
    assert merged([dump(b) for b in three]) == full_view
    # each backend holds only its keys; timers fire on the right subtask
    fired: list[tuple[str, int]] = []
    for b in three:
        b.timer_service(TIMERS, on_timer=lambda tm, b=b: fired.append((b.get_current_key(), tm.timestamp)))
    # one checkpoint of the three subtasks, then scale down to two
    for b in three:
        b.get_state(VALUE)
    commit(store, three, 3)
    files3 = [f for f in store.files(3) if f.created_by_checkpoint_id == 3]
    assert {(f.key_group_start, f.key_group_end) for f in files3} == {key_group_range(mp, 3, i) for i in range(3)}
    two = [KeyedStateBackend.restore(store, OP, parallelism=2, subtask=i) for i in range(2)]
    assert merged([dump(b) for b in two]) == full_view
    for b in three:
        b.advance_watermark(1000 + 150)
    assert sorted(fired) == sorted((keys[i], 1000 + i) for i in range(100, 151))


def test_restore_errors(tmp_path: Path) -> None:
    store = flinkstate.open(tmp_path)
    be = KeyedStateBackend(max_parallelism=32)
    populate(be, ["a", "b"])
    commit(store, [be], 1)
    with pytest.raises(flinkstate.OperatorNotFoundError):
        KeyedStateBackend.restore(store, "nope")
    with pytest.raises(flinkstate.CheckpointNotFoundError):
        KeyedStateBackend.restore(store, OP, checkpoint_id=7)
    r = KeyedStateBackend.restore(store, OP)
    with pytest.raises(flinkstate.SchemaMismatchError):
        r.get_state(ValueStateDescriptor(name="value", value_type=pa.int64()))  # stored as string
    other = KeyedStateBackend(max_parallelism=64)
    snap = other.snapshot(2)
    with pytest.raises(InvalidArgumentError, match="max parallelism"):
        with store.begin(checkpoint_id=2, base=1) as w:
            snap.write(w, OP)
