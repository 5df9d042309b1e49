"""The one scan path: a pinned checkpoint, its scans and tasks, and what every reader goes through."""

from __future__ import annotations

import pickle
from pathlib import Path

import pyarrow as pa

import flinkstate as fs
from flinkstate.format import constants as C

from fsc_helpers import TTL_1S as TTL, ttl_store as _store


def test_checkpoint_is_pinned_and_pickles(tmp_path: Path) -> None:
    store = _store(tmp_path)
    ck = store.checkpoint()
    with store.begin() as w:  # a newer checkpoint does not move a pinned one
        w.put_state("op", fs.ValueStateDescriptor(name="v", value_type=pa.int64(), ttl=TTL),
                    pa.table({"key": ["z"], "value": [9], "ttl_timestamp": [1]}))
    again = pickle.loads(pickle.dumps(ck))
    assert again.checkpoint_id == ck.checkpoint_id == 1 and store.checkpoint().checkpoint_id == 2
    rows = again.scan("op", "v", ttl_reference=0).to_arrow()
    assert sorted(rows.column("key").to_pylist()) == ["a", "b", "c"]
    tasks = ck.scan("op", "l").plan(target_rows=1)
    assert tasks and all(pickle.loads(pickle.dumps(t)).to_arrow().num_rows == t.to_arrow().num_rows for t in tasks)


def test_keys_and_key_groups_restrict_the_files_read(tmp_path: Path) -> None:
    store = fs.open(str(tmp_path / "job"))
    d = fs.ValueStateDescriptor(name="v", value_type=pa.int64())
    with store.begin(max_parallelism=128) as w:
        for i in range(4):  # four full files over four key-group ranges
            lo, hi = 32 * i, 32 * i + 31
            keys = [k for k in (f"k{j}" for j in range(400)) if lo <= fs.assign_key_group(k, 128) <= hi]
            w.put_state("op", d, pa.table({"key": keys, "value": list(range(len(keys)))}), key_group_range=(lo, hi))
    ck = store.checkpoint()
    scan = ck.scan("op", "v", keys=["k7"])
    tasks = scan.plan()
    assert len(tasks) == 1 and len(tasks[0].entries) == 1
    assert scan.to_arrow().column("key").to_pylist() == ["k7"]
    assert sum(len(t.entries) for t in ck.scan("op", "v").plan(target_rows=10**9)) == 4


def test_read_state_loads_the_log_once(tmp_path: Path) -> None:
    store = _store(tmp_path)
    before = store.catalog.table_opens[C.LOG_TABLE]
    store.read_state("op", "v", ttl_reference=0)
    assert store.catalog.table_opens[C.LOG_TABLE] - before == 1
    before = store.catalog.table_opens[C.LOG_TABLE]
    store.read_timers("op", "t")
    assert store.catalog.table_opens[C.LOG_TABLE] - before == 1
