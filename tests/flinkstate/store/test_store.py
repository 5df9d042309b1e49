"""The checkpoint store: round trips, delta merging, atomic commits, conflicts and typed errors."""

from __future__ import annotations

import datetime as dt
import io
import decimal
from typing import Any

import pyarrow as pa
import pytest

import flinkstate as fs

from fsc_helpers import LIST, MAP, TIMERS, VALUE
from fsc_helpers import snapshot as _snapshot

from flinkstate.cli import main
from flinkstate.store.verify import verify_store

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
                         "value": pa.array([_value(k) for k in keys for _ in range(2)], VALUE_T), "ttl_timestamp": [(k + 50) * 10 for k in keys for _ in range(2)]}),
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


# ---------------------------------------------------------------------- bad input


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


def test_checkpoint_written_by_an_unknown_format_version_is_refused(populated: fs.CheckpointStore) -> None:
    import json as _json

    rec = populated.record()
    future = fs.FORMAT_VERSION + 1
    row = {
        "checkpoint_id": 3, "attempt_id": "future", "event": "COMPLETED", "kind": "checkpoint",
        "event_time": rec.created_at, "created_at": rec.created_at, "max_parallelism": 32, "format_version": future,
        "base_checkpoint_id": 2, "files": 0, "rows": 0, "bytes": 0, "metadata": _json.dumps({"format_version": future, "operators": {}}),
    }
    populated.catalog.commit_log(row, populated.catalog.log_version())  # type: ignore[arg-type]
    with pytest.raises(fs.CorruptFileError, match=f"checkpoint 3 was written in format version {future}"):
        populated.read_state("sessions", "count")
    with pytest.raises(fs.CorruptFileError, match=f"checkpoint 3 was written in format version {future}; this release reads"):
        populated.checkpoints()  # not listed like any other
    assert populated.read_state("sessions", "count", 2).num_rows == 3
    # garbage collection refuses: it cannot know which files a newer format uses (retain(1) kept only 3 and deleted 1's
    # and 2's files before), and verify checks what it can and names what it cannot
    files = sorted(populated.io.list_files(""))
    for gc in (lambda: populated.retain(1), lambda: populated.discard([1]), populated.collect_orphans):
        with pytest.raises(fs.CorruptFileError, match=rf"garbage collection refused .*nothing deleted: checkpoints \[3\] were "
                                                      rf"written in format versions \[{future}\], newer than this release reads"):
            gc()
    assert sorted(populated.io.list_files("")) == files
    assert [r.status for r in populated.catalog.records()] == ["completed"] * 3
    report = verify_store(populated)
    assert report.ok and report.checkpoints == [1, 2] and report.files_checked > 0
    assert report.not_checked == {3: f"written in format version {future}; this release reads [1, 2]: check it with a release that does"}
    out = io.StringIO()
    assert main(["verify", populated.root], out=out) == 0
    assert "NOT CHECKED checkpoint 3: written in format version" in out.getvalue()
    assert f"files of checkpoints [1, 2] at {populated.root}, 0 damaged" in out.getvalue()


def test_loose_ends_are_typed_errors_and_change_nothing(populated: fs.CheckpointStore) -> None:
    """Bad arguments found by probing: each a typed error naming the culprit, nothing committed."""
    before = _snapshot(populated)
    with pytest.raises(fs.InvalidArgumentError, match=r"path must be a local path or URL .* got None \(NoneType\)"):
        fs.open(None)  # type: ignore[arg-type]
    with pytest.raises(fs.InvalidArgumentError, match="checkpoint_ids must be a list of checkpoint ids"):
        populated.discard(5)  # type: ignore[arg-type]
    for base in ("3", "2", True, 2.0):
        with pytest.raises(fs.InvalidArgumentError, match=f"base must be a checkpoint id \\(an int\\), 'latest' or None, got {base!r}"):
            populated.begin(base=base)  # type: ignore[arg-type]
    with populated.begin() as w:
        with pytest.raises(fs.InvalidArgumentError, match="operator 'sessions': the descriptor must be a KeyedStateDescriptor, got 'count' \\(str\\)"):
            w.put_state("sessions", "count", pa.table({"key": ["a"], "value": [1]}))  # type: ignore[arg-type]
        with pytest.raises(fs.InvalidArgumentError, match="the descriptor must be a TimerServiceDescriptor"):
            w.put_timers("sessions", VALUE, pa.table({"key": ["a"], "timestamp": [1]}))  # type: ignore[arg-type]
        with pytest.raises(fs.InvalidArgumentError, match="the descriptor must be an OperatorStateDescriptor"):
            w.put_operator_state("src", VALUE, pa.table({"subtask": pa.array([0], pa.int32()), "value": [1]}))  # type: ignore[arg-type]
        ttl = fs.ValueStateDescriptor(name="ttl_count", value_type=pa.int64(), ttl=fs.StateTtlConfig(ttl_ms=1000))
        for ts in (-(2**63), -1):
            with pytest.raises(fs.InvalidArgumentError, match=f"state 'ttl_count'.*'ttl_timestamp' holds the last-access time {ts}"):
                w.put_state("sessions", ttl, pa.table({"key": ["a", "b"], "value": [1, 2], "ttl_timestamp": [5, ts]}))
        w.abort()
    assert _snapshot(populated) == before


def test_state_descriptors_used(job):
    store = fs.open(job)
    assert store.state_descriptor("sessions", "profile") == VALUE
    assert store.state_descriptor("carts", "items") == LIST
    assert store.state_descriptor("carts", "attrs") == MAP
    assert store.timer_service("sessions", "expiry") == TIMERS
