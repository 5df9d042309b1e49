"""Keyed state objects: Flink's method semantics, key-group range checks, timers, TTL."""

from __future__ import annotations

import pyarrow as pa
import pytest

from flinkstate import (
    AggregateFunction,
    AggregatingStateDescriptor,
    KeyGroupOutOfRangeError,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    StateTtlConfig,
    TimerServiceDescriptor,
    ValueStateDescriptor,
    assign_key_group,
)
from flinkstate.backend import KeyedStateBackend
from flinkstate.core.errors import InvalidArgumentError, SchemaMismatchError
from flinkstate.core.ttl import MAX_TIMESTAMP, IncrementalCleanup


class Clock:
    def __init__(self, t: int = 1_000) -> None:
        self.t = t

    def __call__(self) -> int:
        return self.t


def backend(**kw: object) -> KeyedStateBackend:
    kw.setdefault("max_parallelism", 128)
    return KeyedStateBackend(**kw)  # type: ignore[arg-type]


def test_value_state() -> None:
    be = backend()
    s = be.get_state(ValueStateDescriptor(name="v", value_type=pa.int64()))
    be.set_current_key("a")
    assert s.value() is None
    s.update(1)
    be.set_current_key("b")
    assert s.value() is None
    s.update(2)
    be.set_current_key("a")
    assert s.value() == 1
    s.update(None)  # update(null) clears, as in Flink's heap backend
    assert s.value() is None
    be.set_current_key("b")
    s.clear()
    assert s.value() is None
    assert be.num_entries("v") == 0


def test_list_state() -> None:
    be = backend()
    s = be.get_state(ListStateDescriptor(name="l", value_type=pa.int64()))
    be.set_current_key("k")
    assert s.get() == []
    s.add(1)
    s.add_all([2, 3])
    s.add_all([])
    assert s.get() == [1, 2, 3]
    got = s.get()
    got.append(99)  # the caller's copy
    assert s.get() == [1, 2, 3]
    s.update([7])
    assert s.get() == [7]
    s.update([])
    assert s.get() == []
    assert be.num_entries("l") == 0
    with pytest.raises(InvalidArgumentError):
        s.add(None)
    with pytest.raises(InvalidArgumentError):
        s.add_all([1, None])


def test_map_state() -> None:
    be = backend()
    s = be.get_state(MapStateDescriptor(name="m", user_key_type=pa.string(), user_value_type=pa.int64()))
    be.set_current_key("k")
    assert s.is_empty()
    s.put("x", 1)
    s.put_all({"y": 2, "z": 3})
    assert s.get("x") == 1 and s.get("nope") is None
    assert s.contains("y") and not s.contains("nope")
    assert sorted(s.keys()) == ["x", "y", "z"]
    assert sorted(s.values()) == [1, 2, 3]
    assert dict(s.items()) == {"x": 1, "y": 2, "z": 3}
    s.remove("x")
    s.remove("absent")
    assert dict(s.items()) == {"y": 2, "z": 3}
    assert not s.is_empty()
    s.remove("y")
    s.remove("z")
    assert s.is_empty() and be.num_entries("m") == 0  # empty maps are dropped
    s.put("a", 1)
    s.clear()
    assert s.is_empty()


def test_reducing_and_aggregating_state() -> None:
    be = backend()
    r = be.get_state(ReducingStateDescriptor(name="r", value_type=pa.int64(), reduce_function=lambda a, b: a + b))
    avg = AggregateFunction(create_accumulator=lambda: {"sum": 0, "n": 0},
                            add=lambda v, acc: {"sum": acc["sum"] + v, "n": acc["n"] + 1},
                            get_result=lambda acc: acc["sum"] / acc["n"])
    a = be.get_state(AggregatingStateDescriptor(
        name="a", value_type=pa.struct([("sum", pa.int64()), ("n", pa.int64())]), aggregate_function=avg))
    be.set_current_key("k")
    assert r.get() is None and a.get() is None
    for v in (1, 2, 3, 6):
        r.add(v)
        a.add(v)
    assert r.get() == 12
    assert a.get() == 3.0
    r.clear()
    a.clear()
    assert r.get() is None and a.get() is None
    with pytest.raises(InvalidArgumentError):
        be.get_state(ReducingStateDescriptor(name="r2", value_type=pa.int64()))


def test_namespaces() -> None:
    be = backend()
    s = be.get_state(ValueStateDescriptor(name="w", value_type=pa.int64(), namespace_type=pa.int64()))
    plain = be.get_state(ValueStateDescriptor(name="p", value_type=pa.int64()))
    be.set_current_key("k")
    be.set_current_namespace(1)
    s.update(10)
    plain.update(5)
    be.set_current_namespace(2)
    assert s.value() is None
    s.update(20)
    assert plain.value() == 5  # states without namespace ignore it
    s.set_current_namespace(1)  # per-state namespace override
    assert s.value() == 10
    with pytest.raises(InvalidArgumentError):
        plain.set_current_namespace(3)


def test_key_group_range_is_enforced() -> None:
    mp = 128
    lo, hi = 0, 31
    be = backend(max_parallelism=mp, key_group_range=(lo, hi))
    s = be.get_state(ValueStateDescriptor(name="v", value_type=pa.int64()))
    inside = next(f"k{i}" for i in range(1000) if lo <= assign_key_group(f"k{i}", mp) <= hi)
    outside = next(f"k{i}" for i in range(1000) if assign_key_group(f"k{i}", mp) > hi)
    be.set_current_key(inside)
    s.update(1)
    with pytest.raises(KeyGroupOutOfRangeError, match="outside this backend's key-group range"):
        be.set_current_key(outside)
    # the failed set_current_key did not switch the key: nothing is written for `outside`
    assert be.get_current_key() == inside
    with pytest.raises(KeyGroupOutOfRangeError):
        be.set_current_key(outside)  # also when asked again (cache must not let it through)


def test_state_needs_a_key_and_matching_types() -> None:
    be = backend(key_type=pa.int64())
    with pytest.raises(SchemaMismatchError):
        be.get_state(ValueStateDescriptor(name="v", value_type=pa.int64()))  # default key_type string
    s = be.get_state(ValueStateDescriptor(name="v", value_type=pa.int64(), key_type=pa.int64()))
    with pytest.raises(InvalidArgumentError, match="current key"):
        s.value()
    with pytest.raises(SchemaMismatchError):
        be.get_state(ValueStateDescriptor(name="v", value_type=pa.string(), key_type=pa.int64()))
    be.set_current_key(-5)  # Long.hashCode semantics for int64 keys
    s.update(1)
    assert s.value() == 1


# ------------------------------------------------------------------------------------ timers


def test_timers_fire_in_order_dedup_and_delete() -> None:
    be = backend()
    ts = be.timer_service(TimerServiceDescriptor(name="t"))
    for key, t in [("a", 30), ("b", 10), ("a", 10), ("c", 20), ("a", 30), ("b", 40)]:
        be.set_current_key(key)
        ts.register(t)
    assert len(ts) == 5  # ("a", 30) registered twice: deduplicated
    be.set_current_key("c")
    ts.delete(20)
    ts.delete(999)  # absent: no-op
    fired: list[tuple[int, str]] = []

    def on_timer(timer: object) -> None:
        fired.append((timer.timestamp, be.get_current_key()))  # type: ignore[attr-defined]

    assert be.advance_watermark(30, on_timer) == 3
    assert [f[0] for f in fired] == [10, 10, 30]
    assert sorted(fired[:2]) == [(10, "a"), (10, "b")] and fired[2] == (30, "a")
    assert be.advance_watermark(29, on_timer) == 0  # watermarks do not go back
    assert [t.timestamp for t in ts.timers()] == [40]


def test_timer_callback_registers_more_timers() -> None:
    be = backend()
    ts = be.timer_service(TimerServiceDescriptor(name="t"))
    fired: list[int] = []

    def on_timer(timer: object) -> None:
        t = timer.timestamp  # type: ignore[attr-defined]
        fired.append(t)
        if t < 50:
            ts.register(t + 10)  # due within this advance: fires in the same call
        ts.register(1000)

    ts.on_timer = on_timer
    be.set_current_key("k")
    ts.register(10)
    be.advance_watermark(100)
    assert fired == [10, 20, 30, 40, 50]
    assert [t.timestamp for t in ts.timers()] == [1000]


def test_processing_time_timers_and_namespaces() -> None:
    be = backend()
    ev = be.timer_service(TimerServiceDescriptor(name="ev", domain="event"))
    pt = be.timer_service(TimerServiceDescriptor(name="pt", domain="processing", namespace_type=pa.string()))
    be.set_current_key("k")
    ev.register(5)
    pt.register(5, "w1")
    pt.register(5, "w2")
    pt.register(7, "w1")
    got: list[tuple[int, object]] = []
    assert be.advance_processing_time(6, lambda t: got.append((t.timestamp, be.get_current_namespace()))) == 2
    assert sorted(got, key=str) == [(5, "w1"), (5, "w2")]
    assert len(ev) == 1  # event-time timers untouched by processing time
    with pytest.raises(InvalidArgumentError):
        ev.register(1, "ns")  # no namespace type


def test_many_deletes_compact_the_heap() -> None:
    be = backend()
    ts = be.timer_service(TimerServiceDescriptor(name="t"))
    be.set_current_key("k")
    for t in range(5000):
        ts.register(t)
    for t in range(0, 5000, 2):
        ts.delete(t)
    assert len(ts._heap) < 5000  # compacted
    fired: list[int] = []
    be.advance_watermark(10**9, lambda t: fired.append(t.timestamp))
    assert fired == list(range(1, 5000, 2))


# ------------------------------------------------------------------------------------ TTL


def ttl_backend(clock: Clock, **ttl_kw: object) -> tuple[KeyedStateBackend, StateTtlConfig]:
    ttl_kw.setdefault("incremental_cleanup", None)
    cfg = StateTtlConfig(ttl_ms=100, **ttl_kw)  # type: ignore[arg-type]
    return backend(clock=clock), cfg


def test_ttl_value_never_return_expired() -> None:
    clock = Clock()
    be, cfg = ttl_backend(clock)
    s = be.get_state(ValueStateDescriptor(name="v", value_type=pa.int64(), ttl=cfg))
    be.set_current_key("k")
    s.update(1)
    clock.t += 99
    assert s.value() == 1  # OnCreateAndWrite: reading does not extend
    clock.t += 1  # last access + ttl <= now: expired
    assert s.value() is None
    assert be.num_entries("v") == 0  # cleared on read


def test_ttl_value_on_read_and_write_and_return_expired() -> None:
    clock = Clock()
    be, cfg = ttl_backend(clock, update_type="OnReadAndWrite", state_visibility="ReturnExpiredIfNotCleanedUp")
    s = be.get_state(ValueStateDescriptor(name="v", value_type=pa.int64(), ttl=cfg))
    be.set_current_key("k")
    s.update(1)
    clock.t += 90
    assert s.value() == 1  # refreshes the timestamp
    clock.t += 90
    assert s.value() == 1
    clock.t += 100
    assert s.value() == 1  # expired, returned once because not cleaned up yet ...
    assert s.value() is None  # ... and cleared by that read


def test_ttl_saturating_expiry() -> None:
    clock = Clock(MAX_TIMESTAMP - 10)
    be = backend(clock=clock)
    s = be.get_state(ValueStateDescriptor(name="v", value_type=pa.int64(), ttl=StateTtlConfig(ttl_ms=1000, incremental_cleanup=None)))
    be.set_current_key("k")
    s.update(1)
    clock.t = MAX_TIMESTAMP - 1
    assert s.value() == 1  # ts + ttl saturates at MAX, not yet <= now
    clock.t = MAX_TIMESTAMP
    assert s.value() is None


def test_ttl_list_state() -> None:
    clock = Clock()
    be, cfg = ttl_backend(clock)
    s = be.get_state(ListStateDescriptor(name="l", value_type=pa.int64(), ttl=cfg))
    be.set_current_key("k")
    s.add(1)
    clock.t += 50
    s.add(2)
    clock.t += 50  # element 1 expired, 2 not
    assert s.get() == [2]
    clock.t += 50
    assert s.get() == []  # all expired: cleared
    assert be.num_entries("l") == 0
    # OnReadAndWrite refreshes unexpired elements and drops the expired ones
    be2, cfg2 = ttl_backend(clock, update_type="OnReadAndWrite")
    s2 = be2.get_state(ListStateDescriptor(name="l", value_type=pa.int64(), ttl=cfg2))
    be2.set_current_key("k")
    s2.add_all([1, 2])
    clock.t += 80
    s2.add(3)
    clock.t += 80
    assert s2.get() == [3]
    clock.t += 80
    assert s2.get() == [3]  # refreshed by the previous read


def test_ttl_map_state() -> None:
    clock = Clock()
    be, cfg = ttl_backend(clock)
    s = be.get_state(MapStateDescriptor(name="m", user_key_type=pa.string(), user_value_type=pa.int64(), ttl=cfg))
    be.set_current_key("k")
    s.put("old", 1)
    clock.t += 60
    s.put("new", 2)
    clock.t += 40
    assert not s.is_empty()
    assert s.get("old") is None
    assert not s.contains("old")
    assert dict(s.items()) == {"new": 2}
    clock.t += 100
    assert not s.is_empty()  # as Flink: entries not cleaned up yet still count
    assert s.items() == []
    assert s.is_empty()


def test_ttl_reducing_resets_expired_accumulator() -> None:
    clock = Clock()
    be, cfg = ttl_backend(clock)
    s = be.get_state(ReducingStateDescriptor(name="r", value_type=pa.int64(), reduce_function=lambda a, b: a + b, ttl=cfg))
    be.set_current_key("k")
    s.add(1)
    s.add(2)
    clock.t += 100
    s.add(5)
    assert s.get() == 5


def test_ttl_incremental_cleanup() -> None:
    clock = Clock()
    cfg = StateTtlConfig(ttl_ms=100, incremental_cleanup=IncrementalCleanup(cleanup_size=10))
    be = backend(clock=clock, num_buckets=16)
    s = be.get_state(ValueStateDescriptor(name="v", value_type=pa.int64(), ttl=cfg))
    for i in range(200):
        be.set_current_key(f"k{i}")
        s.update(i)
    clock.t += 100
    be.set_current_key("fresh")
    for _ in range(200):
        s.update(1)  # every access checks 10 more entries
    assert be.num_entries("v") == 1
    # run_cleanup_for_every_record: cleaned by set_current_key alone
    cfg2 = StateTtlConfig(ttl_ms=100, incremental_cleanup=IncrementalCleanup(cleanup_size=10, run_cleanup_for_every_record=True))
    be2 = backend(clock=clock, num_buckets=16)
    s2 = be2.get_state(MapStateDescriptor(name="m", user_key_type=pa.int64(), user_value_type=pa.int64(), ttl=cfg2))
    for i in range(100):
        be2.set_current_key(f"k{i}")
        s2.put(i, i)
    clock.t += 100
    for i in range(100):
        be2.set_current_key("other")
    assert be2.num_entries("m") == 0
