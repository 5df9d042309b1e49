"""A model of with_state / rename / remove / rescale combinations, for the property tests of
CheckpointWriter + rescale_into (core) and SavepointWriter (Spark): every entry must survive."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from hypothesis import strategies as st

import flinkstate as fs

OPS = ["a", "b", "c"]
STATES = ["s1", "s2"]
TIMERS = fs.TimerServiceDescriptor(name="t", domain="event", key_type=pa.string())
BASE_MP = 128


def desc(name: str) -> fs.ValueStateDescriptor:
    return fs.ValueStateDescriptor(name=name, key_type=pa.string(), value_type=pa.int64())


def rows(tag: str, n: int) -> dict[str, int]:
    return {f"{tag}-{i}": i * 7 - 3 for i in range(n)}


def table(d: dict[str, int]) -> pa.Table:
    return pa.table({"key": pa.array(list(d), pa.string()), "value": pa.array(list(d.values()), pa.int64())})


STEP = st.one_of(
    st.tuples(st.just("put"), st.sampled_from(OPS), st.sampled_from(STATES), st.integers(1, 40)),
    st.tuples(st.just("rename"), st.sampled_from(OPS), st.sampled_from(OPS)),
    st.tuples(st.just("remove_operator"), st.sampled_from(OPS)),
    st.tuples(st.just("remove_state"), st.sampled_from(OPS), st.sampled_from([*STATES, "t"])),
)
PLAN = st.tuples(st.lists(STEP, max_size=5), st.sampled_from([None, BASE_MP, 64, 256, 300]), st.booleans())


def build_base(root: str) -> tuple[fs.CheckpointStore, dict[str, dict[str, Any]]]:
    """Checkpoint 1: a/{s1, s2, timers t}, b/{s1}; returns the store and the model of it."""
    store = fs.open(root)
    model: dict[str, dict[str, Any]] = {"a": {"s1": rows("a1", 30), "s2": rows("a2", 20), "t": "timers"}, "b": {"s1": rows("b1", 25)}}
    with store.begin(max_parallelism=BASE_MP) as w:
        for uid, states in model.items():
            for name, d in states.items():
                if name != "t":
                    w.put_state(uid, desc(name), table(d))
        w.put_timers("a", TIMERS, timer_table())
    return store, model


def timer_table() -> pa.Table:
    return pa.table({"key": [f"k{i}" for i in range(40)], "timestamp": pa.array(range(40), pa.int64())})


def applicable(steps: list[tuple[Any, ...]], model: dict[str, dict[str, Any]]) -> list[tuple[Any, ...]]:
    """Keep the steps that are valid in order, applying each to the model (mutated in place);
    a kept put carries its rows as its last element."""
    kept: list[tuple[Any, ...]] = []
    for s in steps:
        what = s[0]
        if what == "put":
            _, uid, name, n = s
            d = rows(f"p{len(kept)}{uid}{name}", n)
            model.setdefault(uid, {})[name] = d
            s = ("put", uid, name, d)
        elif what == "rename":
            _, old, new = s
            if old not in model or new in model:
                continue
            model[new] = model.pop(old)
        elif what == "remove_operator":
            if s[1] not in model:
                continue
            del model[s[1]]
        elif what == "remove_state":
            _, uid, name = s
            if uid not in model or name not in model[uid]:
                continue
            del model[uid][name]
        kept.append(s)
    return kept


def check(store: fs.CheckpointStore, model: dict[str, dict[str, Any]], mp: int) -> None:
    """Every entry of the model is in the latest checkpoint, in Flink's key group for `mp`; nothing else."""
    meta = store.metadata()
    assert sorted(meta.operators) == sorted(model), (meta.operators.keys(), model.keys())
    assert store.checkpoint().max_parallelism == mp
    for uid, states in model.items():
        op = meta.operators[uid]
        assert sorted([*op.keyed_states, *op.timer_services]) == sorted(states), (uid, states.keys())
        for name, expected in states.items():
            t = store.read_timers(uid, name) if name == "t" else store.read_state(uid, name)
            got = t.sort_by("key")
            if name == "t":
                assert got.select(["key", "timestamp"]).to_pylist() == timer_table().sort_by("key").to_pylist(), (uid, name)
            else:
                assert dict(zip(got.column("key").to_pylist(), got.column("value").to_pylist())) == expected, (uid, name)
                assert got.num_rows == len(expected), (uid, name)
            kg = fs.assign_key_groups(got.column("key"), mp)
            assert got.column("key_group").to_pylist() == kg.to_pylist(), (uid, name)
