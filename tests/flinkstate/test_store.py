"""The checkpoint store: round trips, delta merging, atomic commits, conflicts and typed errors."""

from __future__ import annotations

import datetime as dt
import decimal
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import flinkstate as fs
from flinkstate.format import constants as C
from flinkstate.format.manifest import DeltaCatalog
from flinkstate.io import DELTA_LOCATION

VALUE_T = pa.struct(
    [
        ("count", pa.int64()),
        ("tags", pa.list_(pa.string())),
        ("attrs", pa.map_(pa.string(), pa.int32())),
        ("amount", pa.decimal128(18, 4)),
        ("seen", pa.timestamp("us", tz="UTC")),
        ("nothing", pa.null()),
    ]
)


def _value(i: int) -> dict[str, Any]:
    return {
        "count": i,
        "tags": [f"t{i}", "x"] if i % 3 else [],
        "attrs": [("a", i), ("b", -i)],
        "amount": (decimal.Decimal(i) / 7).quantize(decimal.Decimal("0.0001")),
        "seen": dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(seconds=i),
        "nothing": None,
    }


def _snapshot(store: fs.CheckpointStore) -> list[Any]:
    """What a user sees: checkpoints and the content of every keyed state of each."""
    out: list[Any] = []
    for c in store.checkpoints():
        out.append(c)
        meta = store.metadata(c.checkpoint_id)
        for uid, op in sorted(meta.operators.items()):
            for name in sorted(op.keyed_states):
                out.append((uid, name, store.read_state(uid, name, c.checkpoint_id).to_pylist()))
    return out


def test_every_state_kind_round_trips_with_nested_types(job_root: str) -> None:
    store = fs.open(job_root)
    ns = pa.struct([("window_start", pa.int64()), ("window_end", pa.int64())])
    descs = {
        "value": fs.ValueStateDescriptor(name="value", value_type=VALUE_T, key_type=pa.int64(), namespace_type=ns),
        "list": fs.ListStateDescriptor(name="list", value_type=VALUE_T, key_type=pa.int64()),
        "map": fs.MapStateDescriptor(name="map", user_key_type=pa.string(), user_value_type=VALUE_T, key_type=pa.int64(),
                                     ttl=fs.StateTtlConfig(ttl_ms=1000)),
        "reducing": fs.ReducingStateDescriptor(name="reducing", value_type=pa.float64(), key_type=pa.int64()),
        "aggregating": fs.AggregatingStateDescriptor(name="aggregating", value_type=pa.struct([("sum", pa.int64()), ("n", pa.int32())]), key_type=pa.int64()),
    }
    keys = list(range(-50, 50))
    tables = {
        "value": pa.table({"key": keys, "namespace": [{"window_start": k, "window_end": k + 10} for k in keys],
                           "value": pa.array([_value(k) for k in keys], VALUE_T)}),
        "list": pa.table({"key": keys, "value": pa.array([[_value(k), _value(k + 1)] for k in keys], pa.list_(VALUE_T))}),
        "map": pa.table({"key": [k for k in keys for _ in range(2)], "user_key": [u for _ in keys for u in ("x", "ü日本")],
                         "value": pa.array([_value(k) for k in keys for _ in range(2)], VALUE_T), "ttl_timestamp": [k * 10 for k in keys for _ in range(2)]}),
        "reducing": pa.table({"key": keys, "value": [k / 3 for k in keys]}),
        "aggregating": pa.table({"key": keys, "value": [{"sum": k, "n": 1} for k in keys]}),
    }
    tdesc = fs.TimerServiceDescriptor(name="windows", domain="event", key_type=pa.int64(), namespace_type=ns)
    timers = pa.table({"key": keys, "namespace": [{"window_start": k, "window_end": k + 10} for k in keys], "timestamp": [k + 10 for k in keys]})
    ostates = {
        "offsets": (fs.OperatorStateDescriptor(name="offsets", value_type=pa.int64()), pa.table({"subtask": pa.array([0, 0, 1], pa.int32()), "value": [1, 2, 3]})),
        "everyone": (fs.OperatorStateDescriptor(name="everyone", value_type=VALUE_T, mode="union"), pa.table({"subtask": pa.array([0], pa.int32()), "value": pa.array([_value(1)], VALUE_T)})),
        "rules": (fs.OperatorStateDescriptor(name="rules", value_type=pa.string(), mode="broadcast", key_type=pa.string()),
                  pa.table({"subtask": pa.array([0, 0], pa.int32()), "key": ["r1", "r2"], "value": ["a > 1", None]})),
    }
    coord = pa.table({"record_type": ["state", "event"], "subtask": pa.array([None, 3], pa.int32()), "seq": [0, 1], "payload": [b"\x00state", b"evt"]})
    with store.begin(max_parallelism=64) as w:
        for name, d in descs.items():
            w.put_state("op", d, tables[name])
        w.put_timers("op", tdesc, timers)
        for d, t in ostates.values():
            w.put_operator_state("op", d, t)
        w.put_coordinator("op", coord)
        w.set_parallelism("op", 3)

    meta = store.metadata()
    assert meta.operators["op"].parallelism == 3
    for name, d in descs.items():
        assert meta.operators["op"].keyed_states[name] == d
        got = store.read_state("op", name, raw=True)  # the stored rows: what was put, with key groups
        want = tables[name]
        kgs = [fs.assign_key_group(k, 64, pa.int64()) for k in want.column("key").to_pylist()]
        assert got.column("key_group").to_pylist() == sorted(got.column("key_group").to_pylist())
        expect = sorted(({"key_group": kg, **row} for kg, row in zip(kgs, want.to_pylist())), key=lambda r: (r["key_group"], r["key"], str(r.get("user_key"))))
        assert sorted(got.to_pylist(), key=lambda r: (r["key_group"], r["key"], str(r.get("user_key")))) == expect
        assert got.schema.field("value").type == want.schema.field("value").type or name in ("aggregating",)
    assert meta.operators["op"].timer_services["windows"] == tdesc
    assert sorted(store.read_timers("op", "windows").column("timestamp").to_pylist()) == sorted(timers.column("timestamp").to_pylist())
    for name, (d, t) in ostates.items():
        assert meta.operators["op"].operator_states[name] == d
        assert store.read_operator_state("op", name).to_pylist() == t.to_pylist()
    assert store.read_coordinator("op").to_pylist() == coord.to_pylist()


def test_deltas_with_tombstones_merge_newest_wins(job_root: str) -> None:
    store = fs.open(job_root)
    d = fs.MapStateDescriptor(name="m", user_key_type=pa.string(), user_value_type=pa.int64())
    with store.begin(max_parallelism=16) as w:
        w.put_state("op", d, pa.table({"key": ["a", "a", "b"], "user_key": ["x", "y", "x"], "value": [1, 2, 3]}))
    with store.begin() as w:
        w.put_state("op", d, pa.table({"key": ["a", "b", "c"], "user_key": ["x", "x", "z"], "value": [10, None, 7],
                                       "tombstone": [False, True, False]}), mode="delta")
    with store.begin() as w:
        w.put_state("op", d, pa.table({"key": ["c", "b"], "user_key": ["z", "x"], "value": [None, 33], "tombstone": [True, False]}), mode="delta")

    def view(cid: int) -> set[tuple[str, str, int]]:
        return {(r["key"], r["user_key"], r["value"]) for r in store.read_state("op", "m", cid).to_pylist()}

    assert view(1) == {("a", "x", 1), ("a", "y", 2), ("b", "x", 3)}
    assert view(2) == {("a", "x", 10), ("a", "y", 2), ("c", "z", 7)}
    assert view(3) == {("a", "x", 10), ("a", "y", 2), ("b", "x", 33)}
    kinds = [e.kind for e in store.files(3)]
    assert kinds.count("delta") == 2 and kinds.count("full") >= 1


ops = st.lists(
    st.tuples(
        st.sampled_from(["put", "delete", "full", "full_range", "checkpoint"]),
        st.lists(st.tuples(st.integers(0, 40), st.integers(-5, 5)), min_size=0, max_size=8),
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=ops)
def test_random_deltas_and_full_rewrites_agree_with_a_dict(tmp_path_factory: pytest.TempPathFactory, ops: list) -> None:
    store = fs.open(str(tmp_path_factory.mktemp("prop")))
    d = fs.ValueStateDescriptor(name="v", value_type=pa.int64(), key_type=pa.int32())
    mp = 8
    model: dict[int, int] = {}
    history: dict[int, dict[int, int]] = {}
    w = store.begin(max_parallelism=mp)
    w.put_state("op", d, pa.table({"key": pa.array([], pa.int32()), "value": pa.array([], pa.int64())}))
    history[w.commit().checkpoint_id] = {}
    w = store.begin()
    for op, rows in ops:
        rows = list(dict(rows).items())
        if op == "put" and rows:
            w.put_state("op", d, pa.table({"key": pa.array([k for k, _ in rows], pa.int32()), "value": [v for _, v in rows], "tombstone": [False] * len(rows)}), mode="delta")
            model.update(rows)
        elif op == "delete" and rows:
            w.put_state("op", d, pa.table({"key": pa.array([k for k, _ in rows], pa.int32()), "value": pa.array([None] * len(rows), pa.int64()), "tombstone": [True] * len(rows)}), mode="delta")
            for k, _ in rows:
                model.pop(k, None)
        elif op == "full":
            w.put_state("op", d, pa.table({"key": pa.array([k for k, _ in rows], pa.int32()), "value": [v for _, v in rows]}))
            model = dict(rows)
        elif op == "full_range":
            # replace only key groups [2, 5]: keys elsewhere keep their values
            rng = (2, 5)
            inside = [(k, v) for k, v in rows if rng[0] <= fs.assign_key_group(k, mp, pa.int32()) <= rng[1]]
            w.put_state("op", d, pa.table({"key": pa.array([k for k, _ in inside], pa.int32()), "value": pa.array([v for _, v in inside], pa.int64())}), key_group_range=rng)
            model = {k: v for k, v in model.items() if not rng[0] <= fs.assign_key_group(k, mp, pa.int32()) <= rng[1]}
            model.update(inside)
        elif op == "checkpoint":
            history[w.commit().checkpoint_id] = dict(model)
            w = store.begin()
    history[w.commit().checkpoint_id] = dict(model)
    for cid, want in history.items():
        got = {r["key"]: r["value"] for r in store.read_state("op", "v", cid).to_pylist()}
        assert got == want, f"checkpoint {cid}"


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


def test_manifest_and_log_are_standard_delta_tables(job_root: str) -> None:
    from deltalake import DeltaTable

    store = fs.open(job_root)
    d = fs.ValueStateDescriptor(name="v", value_type=pa.int64())
    for i in range(3):
        with store.begin() as w:
            w.put_state("op", d, pa.table({"key": [f"k{i}"], "value": [i], "tombstone": [False]}), mode="delta" if i else "full")
    log = DeltaTable(os.path.join(job_root, "_flinkstate", "log"))
    manifest = DeltaTable(os.path.join(job_root, "_flinkstate", "manifest"))
    rows = log.to_pyarrow_table().to_pylist()
    assert sorted(r["checkpoint_id"] for r in rows if r["event"] == "COMPLETED") == [1, 2, 3]
    assert log.version() == 3  # table creation + one commit per checkpoint
    m = manifest.to_pyarrow_table()
    assert set(m.column("checkpoint_id").to_pylist()) == {1, 2, 3}
    assert m.filter(pa.compute.equal(m.column("checkpoint_id"), 3)).num_rows == 3  # one full + two deltas


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


# ---------------------------------------------------------------------- bad input


@pytest.fixture()
def populated(job_root: str) -> fs.CheckpointStore:
    store = fs.open(job_root)
    with store.begin(max_parallelism=32) as w:
        w.put_state("sessions", fs.ValueStateDescriptor(name="count", value_type=pa.int64()), pa.table({"key": ["a", "b"], "value": [1, 2]}))
        w.put_timers("sessions", fs.TimerServiceDescriptor(name="gap"), pa.table({"key": ["a"], "timestamp": [5]}))
    with store.begin() as w:
        w.put_state("sessions", fs.ValueStateDescriptor(name="count", value_type=pa.int64()), pa.table({"key": ["c"], "value": [3], "tombstone": [False]}), mode="delta")
    return store


def test_unknown_checkpoint_operator_and_state_name_what_exists(populated: fs.CheckpointStore) -> None:
    before = _snapshot(populated)
    with pytest.raises(fs.CheckpointNotFoundError, match=r"checkpoint 7 .*\[1, 2\]"):
        populated.read_state("sessions", "count", 7)
    with pytest.raises(fs.InvalidArgumentError, match="checkpoint id must be an integer"):
        populated.read_state("sessions", "count", "2")  # type: ignore[arg-type]
    with pytest.raises(fs.OperatorNotFoundError, match=r"operator 'session' .*\['sessions'\]"):
        populated.read_state("session", "count")
    with pytest.raises(fs.StateNotFoundError, match=r"no keyed state 'counts'; keyed states: \['count'\]"):
        populated.read_state("sessions", "counts")
    with pytest.raises(fs.StateNotFoundError, match=r"timer services: \['gap'\]"):
        populated.read_timers("sessions", "gaps")
    with pytest.raises(fs.StateNotFoundError, match="no coordinator state"):
        populated.read_coordinator("sessions")
    with pytest.raises(fs.CheckpointNotFoundError, match="no committed checkpoint"):
        fs.open(populated.root + "-empty").read_state("sessions", "count")
    assert _snapshot(populated) == before


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


def test_bad_names_and_arguments(populated: fs.CheckpointStore) -> None:
    before = _snapshot(populated)
    w = populated.begin()
    with pytest.raises(fs.InvalidArgumentError, match="invalid operator uid '../escape'"):
        w.put_state("../escape", fs.ValueStateDescriptor(name="count", value_type=pa.int64()), pa.table({"key": ["a"], "value": [1]}))
    with pytest.raises(fs.InvalidArgumentError, match="mode must be 'full' or 'delta'"):
        w.put_state("sessions", fs.ValueStateDescriptor(name="count", value_type=pa.int64()), pa.table({"key": ["a"], "value": [1]}), mode="upsert")  # type: ignore[arg-type]
    with pytest.raises(fs.OperatorNotFoundError, match="operator 'nope'"):
        w.remove_operator("nope")
    with pytest.raises(fs.InvalidArgumentError, match="already exists"):
        w.put_state("other", fs.ValueStateDescriptor(name="x", value_type=pa.int64()), pa.table({"key": ["a"], "value": [1]}))
        w.rename_operator("sessions", "other")
    w.abort()
    with pytest.raises(fs.InvalidArgumentError, match="max_parallelism must be an integer in"):
        populated.begin(max_parallelism=40000)
    with pytest.raises(fs.InvalidArgumentError, match="escapes the checkpoint root"):
        populated.io.url("../../etc/passwd")
    with pytest.raises(fs.InvalidArgumentError, match="unsupported URL scheme 'ftp'"):
        fs.open("ftp://host/x")
    assert _snapshot(populated) == before


def test_corrupt_and_missing_files_name_the_file(populated: fs.CheckpointStore) -> None:
    entry = next(e for e in populated.files() if e.kind == "full")
    path = populated.io.fs_path(entry.path)
    data = Path(path).read_bytes()
    Path(path).write_bytes(data[: len(data) // 2])
    with pytest.raises(fs.CorruptFileError, match=r"data file .*count/0000000001-full.* is unreadable"):
        populated.read_state("sessions", "count")
    os.remove(path)
    with pytest.raises(fs.CorruptFileError, match=r"count/0000000001-full.*(missing|unreadable)"):
        populated.read_state("sessions", "count")
    Path(path).write_bytes(data)
    assert populated.read_state("sessions", "count").num_rows == 3


def test_unknown_format_version_is_refused(populated: fs.CheckpointStore) -> None:
    import pyarrow.parquet as pq

    entry = next(e for e in populated.files() if e.kind == "full")
    path = populated.io.fs_path(entry.path)
    t = pq.read_table(path)
    meta = dict(t.schema.metadata)
    meta[C.META_FORMAT_VERSION.encode()] = b"99"
    pq.write_table(t.replace_schema_metadata(meta), path)
    with pytest.raises(fs.CorruptFileError, match="format version 99"):
        populated.read_state("sessions", "count")


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


def test_memory_filesystem_round_trip(tmp_path: Path) -> None:
    import uuid

    root = f"memory://flinkstate-test-{uuid.uuid4().hex}/job"
    with pytest.raises(fs.InvalidArgumentError, match=r"memory://flinkstate-test-.*delta_location"):
        fs.open(root).begin()  # delta-rs cannot see fsspec's memory filesystem: its tables need a local folder
    store = fs.open(root, {DELTA_LOCATION: str(tmp_path / "delta")})
    d = fs.ListStateDescriptor(name="l", value_type=pa.string())
    with store.begin() as w:
        w.put_state("op", d, pa.table({"key": ["a", "b"], "value": [["x", "y"], []]}))
    with store.begin() as w:
        w.put_state("op", d, pa.table({"key": ["b"], "value": [["z"]], "tombstone": [False]}), mode="delta")
    assert {r["key"]: r["value"] for r in store.read_state("op", "l", flatten=False).to_pylist()} == {"a": ["x", "y"], "b": ["z"]}
    assert store.io.list_files("shared")


@pytest.mark.s3
def test_s3_round_trip_against_moto(s3: dict[str, Any]) -> None:
    store = fs.open(s3["root"], s3["storage_options"])
    d = fs.ValueStateDescriptor(name="v", value_type=pa.struct([("n", pa.int64())]))
    with store.begin(max_parallelism=256) as w:
        w.put_state("op", d, pa.table({"key": ["a", "b"], "value": [{"n": 1}, {"n": 2}]}))
    with store.begin() as w:
        w.put_state("op", d, pa.table({"key": ["a"], "value": [None], "tombstone": [True]}), mode="delta")
    reopened = fs.open(s3["root"], s3["storage_options"])
    assert [c.checkpoint_id for c in reopened.checkpoints()] == [1, 2]
    assert reopened.read_state("op", "v").to_pylist() == [{"key_group": fs.assign_key_group("b", 256), "key": "b", "value": {"n": 2}}]
    keys = [o["Key"] for o in s3["client"].list_objects_v2(Bucket=s3["bucket"])["Contents"]]
    assert any(k.startswith("job/_flinkstate/log/_delta_log/") for k in keys)
    assert any(k.startswith("job/shared/op/v/") for k in keys)
    # conflicting commit on S3: exactly one wins
    w1, w2 = reopened.begin(), reopened.begin()
    w1.put_state("op", d, pa.table({"key": ["z"], "value": [{"n": 9}]}))
    w2.put_state("op", d, pa.table({"key": ["y"], "value": [{"n": 8}]}))
    w1.commit()
    with pytest.raises(fs.CommitConflictError):
        w2.commit()
    assert [r["key"] for r in reopened.read_state("op", "v").to_pylist()] == ["z"]


def test_rows_outside_non_contiguous_ranges_are_refused_not_dropped(job_root: str) -> None:
    store = fs.open(job_root)
    d = fs.ValueStateDescriptor(name="v", value_type=pa.int64(), key_type=pa.int64())
    keys = list(range(50))
    w = store.begin(max_parallelism=16)
    with pytest.raises(fs.KeyGroupOutOfRangeError, match=r"rows fall in key groups \[4"):
        w.put_state("op", d, pa.table({"key": keys, "value": keys}), ranges=[(0, 3), (8, 15)])
    with pytest.raises(fs.KeyGroupOutOfRangeError, match="overlap"):
        w.put_state("op", d, pa.table({"key": keys, "value": keys}), ranges=[(0, 9), (8, 15)])
    entries = w.put_state("op", d, pa.table({"key": keys, "value": keys}), ranges=[(0, 3), (4, 7), (8, 15)])
    assert sum(e.rows for e in entries) == 50
    w.commit()
    assert store.read_state("op", "v").num_rows == 50


def test_checkpoint_ids_must_increase(populated: fs.CheckpointStore) -> None:
    with pytest.raises(fs.InvalidArgumentError, match="must be greater than the newest committed id 2"):
        populated.begin(checkpoint_id=0)
    with populated.begin(checkpoint_id=10) as w:
        w.put_state("sessions", fs.ValueStateDescriptor(name="count", value_type=pa.int64()), pa.table({"key": ["a"], "value": [99], "tombstone": [False]}), mode="delta")
    assert {r["key"]: r["value"] for r in populated.read_state("sessions", "count").to_pylist()}["a"] == 99


def test_checkpoint_written_by_an_unknown_format_version_is_refused(populated: fs.CheckpointStore) -> None:
    import json as _json

    rec = populated.record()
    row = {
        "checkpoint_id": 3, "attempt_id": "future", "event": "COMPLETED", "kind": "checkpoint",
        "event_time": rec.created_at, "created_at": rec.created_at, "max_parallelism": 32, "format_version": 2,
        "base_checkpoint_id": 2, "files": 0, "rows": 0, "bytes": 0, "metadata": _json.dumps({"format_version": 2, "operators": {}}),
    }
    populated.catalog.commit_log(row, populated.catalog.log_version())  # type: ignore[arg-type]
    with pytest.raises(fs.CorruptFileError, match="checkpoint 3 was written in format version 2"):
        populated.read_state("sessions", "count")
    assert populated.read_state("sessions", "count", 2).num_rows == 3


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
