"""flinkstate.read.changes: the difference between two checkpoints equals the actual difference."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pyarrow as pa
import pytest

import flinkstate as fs
from flinkstate.read.changes import diff_tables, state_changes

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from fsc_helpers import MAP, build_job  # noqa: E402


def _as_dict(t: pa.Table, pk: list[str]) -> dict:
    return {tuple(r[c] for c in pk): {k: v for k, v in r.items() if k not in pk and k != "key_group"} for r in t.to_pylist()}


def test_diff_tables_nested_values_and_nulls():
    s = pa.struct([("a", pa.int64()), ("b", pa.list_(pa.string()))])
    old = pa.table({"key": ["x", "y", "z", None], "value": pa.array([{"a": 1, "b": ["p"]}, {"a": 2, "b": []}, None, {"a": 0, "b": None}], s)})
    new = pa.table({"key": ["x", "y", "w", None], "value": pa.array([{"a": 1, "b": ["p"]}, {"a": 2, "b": ["q"]}, {"a": 3, "b": None}, {"a": 0, "b": None}], s)})
    out = diff_tables(old, new, ["key"])
    assert sorted((r["change_type"], r["key"]) for r in out.to_pylist()) == [("delete", "z"), ("upsert", "w"), ("upsert", "y")]


def test_state_changes_random_against_model(tmp_path):
    rng = random.Random(7)
    store = fs.open(str(tmp_path / "r"))
    d = fs.ValueStateDescriptor(name="v", key_type=pa.int64(), value_type=pa.int64())
    model = {i: rng.randrange(5) for i in range(500)}
    with store.begin() as w:
        w.put_state("op", d, pa.table({"key": pa.array(list(model), pa.int64()), "value": pa.array(list(model.values()), pa.int64())}),
                    ranges=[fs.key_group_range(128, 4, i) for i in range(4)])
    snapshots = {1: dict(model)}
    for cid in (2, 3):
        ups = {rng.randrange(700): rng.randrange(5) for _ in range(60)}
        dels = [k for k in rng.sample(sorted(model), 20)]
        rows = {"key": [], "value": [], "tombstone": []}
        for k, v in ups.items():
            rows["key"].append(k), rows["value"].append(v), rows["tombstone"].append(False)
            model[k] = v
        for k in dels:
            if k in ups:
                continue
            rows["key"].append(k), rows["value"].append(None), rows["tombstone"].append(True)
            model.pop(k, None)
        with store.begin() as w:
            w.put_state("op", d, pa.table({"key": pa.array(rows["key"], pa.int64()), "value": pa.array(rows["value"], pa.int64()),
                                           "tombstone": rows["tombstone"]}), mode="delta")
        snapshots[cid] = dict(model)
    for a, b in [(1, 2), (2, 3), (1, 3)]:
        out = state_changes(store, "op", "v", a, b).to_pylist()
        old, new = snapshots[a], snapshots[b]
        expect_up = {k: v for k, v in new.items() if old.get(k, object()) != v}
        expect_del = {k: old[k] for k in old if k not in new}
        assert {r["key"]: r["value"] for r in out if r["change_type"] == "upsert"} == expect_up
        assert {r["key"]: r["value"] for r in out if r["change_type"] == "delete"} == expect_del


def test_map_state_changes(tmp_path):
    root = str(tmp_path / "m")
    store = build_job(root)
    with store.begin() as w:
        w.put_state("carts", MAP, pa.table({"key": ["u1", "u2"], "user_key": ["a0", "zz"], "value": pa.array([None, [("k", 1.0)]], MAP.user_value_type),
                                            "tombstone": [True, False]}), mode="delta")
    out = state_changes(store, "carts", "attrs", 2, 3).to_pylist()
    assert sorted((r["change_type"], r["key"], r["user_key"]) for r in out) == [("delete", "u1", "a0"), ("upsert", "u2", "zz")]


def test_state_changes_refuses_from_after_to(tmp_path):
    store = build_job(str(tmp_path / "r"))
    with pytest.raises(fs.InvalidArgumentError, match=r"'sessions' state 'count'.*from checkpoint 2 is after to checkpoint 1"):
        state_changes(store, "sessions", "count", 2, 1)
