"""The one scan path: a pinned checkpoint, its scans and tasks, and what every reader goes through."""

from __future__ import annotations

import ast
import pickle
from pathlib import Path

import pyarrow as pa
import pytest

import flinkstate as fs
from flinkstate.format import constants as C

ROOT = Path(__file__).resolve().parents[2]
TTL = fs.StateTtlConfig(ttl_ms=1_000)


def _store(tmp_path: Path) -> fs.CheckpointStore:
    store = fs.open(str(tmp_path / "job"))
    with store.begin(max_parallelism=128) as w:
        w.put_state("op", fs.ValueStateDescriptor(name="v", value_type=pa.int64(), ttl=TTL),
                    pa.table({"key": ["a", "b", "c"], "value": [1, 2, 3], "ttl_timestamp": [10_000, 20_000, 30_000]}))
        w.put_state("op", fs.ListStateDescriptor(name="l", value_type=pa.int64()),
                    pa.table({"key": ["a", "b"], "value": [[1, 2], [3]]}))
        w.put_timers("op", fs.TimerServiceDescriptor(name="t"), pa.table({"key": ["a", "b"], "timestamp": [5, 6]}))
    return store


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


def test_ttl_visibility_and_flattening_in_the_library(tmp_path: Path) -> None:
    store = _store(tmp_path)
    ck = store.checkpoint()
    # expiry = last access + 1 s: at 15 s only b and c are visible
    assert sorted(ck.scan("op", "v", ttl_reference=15_000).to_arrow().column("key").to_pylist()) == ["b", "c"]
    t = store.read_state("op", "v", ttl_reference=15_000, include_expired=True)
    assert dict(zip(t.column("key").to_pylist(), t.column("expired").to_pylist())) == {"a": True, "b": False, "c": False}
    assert t.column("ttl_expires_at").type == pa.timestamp("ms", tz="UTC")
    assert store.read_state("op", "v").num_rows == 0  # judged at the checkpoint's own time: all expired long ago
    raw = store.read_state("op", "v", raw=True)
    assert raw.column(C.COL_TTL).to_pylist() == [10_000, 20_000, 30_000] or sorted(raw.column(C.COL_TTL).to_pylist()) == [10_000, 20_000, 30_000]
    flat = store.read_state("op", "l")
    assert sorted(zip(flat.column("key").to_pylist(), flat.column("value").to_pylist())) == [("a", 1), ("a", 2), ("b", 3)]
    lists = store.read_state("op", "l", flatten=False)
    assert dict(zip(lists.column("key").to_pylist(), lists.column("value").to_pylist())) == {"a": [1, 2], "b": [3]}


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


def test_inspect_tables(tmp_path: Path) -> None:
    ck = _store(tmp_path).checkpoint()
    files = ck.inspect.files()
    assert set(files.column("state").to_pylist()) == {"v", "l", "t"} and all(p.startswith("file://") or p.startswith("/") for p in files.column("path").to_pylist())
    states = ck.inspect.states()
    assert dict(zip(states.column("state").to_pylist(), states.column("state_kind").to_pylist())) == {"l": "list", "v": "value", "t": "timers-event"}
    ops = ck.inspect.operators().to_pylist()
    assert ops[0]["operator"] == "op" and ops[0]["keyed_states"] == 2 and ops[0]["timer_services"] == 1


def _imports(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
    return out


def test_the_core_never_imports_spark_or_the_connector() -> None:
    bad = {str(p.relative_to(ROOT)): sorted(m for m in _imports(p) if m.split(".")[0] in ("pyspark", "pyspark_flinkstate"))
           for p in (ROOT / "python" / "flinkstate").rglob("*.py")}
    assert {k: v for k, v in bad.items() if v} == {}


def test_the_connector_uses_no_private_name_of_the_core() -> None:
    found = []
    for p in (ROOT / "connector" / "pyspark_flinkstate").rglob("*.py"):
        tree = ast.parse(p.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("flinkstate"):
                found += [f"{p.name}: from {node.module} import {a.name}" for a in node.names if a.name.startswith("_")]
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
                owner = node.value.id if isinstance(node.value, ast.Name) else None
                if owner in ("self", "cls") or (owner, node.attr) == ("sys", "_getframe"):
                    continue
                found.append(f"{p.name}:{node.lineno}: {ast.unparse(node)}")
    assert found == []


def test_one_merge_function() -> None:
    """Only the scan task (format.merge.read_range) calls the merge; nothing else reads views its own way."""
    callers = []
    for p in list((ROOT / "python").rglob("*.py")) + list((ROOT / "connector").rglob("*.py")):
        text = p.read_text(encoding="utf-8")
        for name in ("read_range(", "_read_view(", "merge_tables("):
            if name in text and p.name != "merge.py":
                callers.append(f"{p.relative_to(ROOT)}: {name}")
    assert callers == ["python/flinkstate/checkpoint.py: read_range("]
