"""Helpers shared by the core and connector tests: checkpoints written with the flinkstate store API."""

from __future__ import annotations

import datetime as dt
import decimal
import importlib.util
import time
from pathlib import Path
from collections.abc import Iterable
from typing import Any

import pyarrow as pa

import flinkstate as fs

PROFILE = pa.struct([("name", pa.string()), ("tags", pa.list_(pa.string())), ("score", pa.decimal128(10, 2)),
                     ("seen", pa.timestamp("us", tz="UTC"))])
ITEM = pa.struct([("sku", pa.string()), ("qty", pa.int32())])


def profile(i: int) -> dict[str, Any]:
    return {"name": f"n{i}", "tags": [f"t{i % 3}", "x"], "score": decimal.Decimal(f"{i}.25"),
            "seen": dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(seconds=i)}


VALUE = fs.ValueStateDescriptor(name="profile", key_type=pa.string(), value_type=PROFILE)
LIST = fs.ListStateDescriptor(name="items", key_type=pa.int64(), value_type=ITEM)
MAP = fs.MapStateDescriptor(name="attrs", key_type=pa.string(), user_key_type=pa.string(), user_value_type=pa.map_(pa.string(), pa.float64()))
COUNT = fs.ValueStateDescriptor(name="count", key_type=pa.string(), value_type=pa.int64())
TIMERS = fs.TimerServiceDescriptor(name="expiry", domain="event", key_type=pa.string())
N = 200


def value_rows(n: int = N) -> pa.Table:
    return pa.table({"key": [f"u{i}" for i in range(n)], "value": pa.array([profile(i) for i in range(n)], PROFILE)})


def list_rows(n: int = 50) -> pa.Table:
    vals = [[{"sku": f"s{i}-{j}", "qty": j} for j in range(i % 4 + 1)] for i in range(n)]
    return pa.table({"key": pa.array(range(n), pa.int64()), "value": pa.array(vals, pa.list_(ITEM))})


def map_rows(n: int = 30) -> pa.Table:
    keys, uks, vals = [], [], []
    for i in range(n):
        for j in range(i % 3 + 1):
            keys.append(f"u{i}")
            uks.append(f"a{j}")
            vals.append([("w", float(i)), ("h", float(j))])
    return pa.table({"key": keys, "user_key": uks, "value": pa.array(vals, pa.map_(pa.string(), pa.float64()))})


def build_job(root: str, storage_options: dict[str, Any] | None = None) -> fs.CheckpointStore:
    """Checkpoint 1: sessions/{profile,count,items,attrs} + timers; 2: a delta on count; 3: a full rewrite of count."""
    store = fs.open(root, storage_options)
    with store.begin() as w:
        w.put_state("sessions", VALUE, value_rows())
        w.put_state("sessions", COUNT, pa.table({"key": [f"u{i}" for i in range(N)], "value": pa.array(range(N), pa.int64())}))
        w.put_state("carts", LIST, list_rows())
        w.put_state("carts", MAP, map_rows())
        w.put_timers("sessions", TIMERS, pa.table({"key": [f"u{i}" for i in range(N)], "timestamp": pa.array([1000 * i for i in range(N)], pa.int64())}))
    with store.begin() as w:
        w.put_state("sessions", COUNT, pa.table({"key": ["u1", "u2", "new"], "value": pa.array([100, 200, 7], pa.int64()),
                                                 "tombstone": [False, False, False]}), mode="delta")
        w.put_state("sessions", COUNT, pa.table({"key": ["u3"], "value": pa.array([None], pa.int64()), "tombstone": [True]}), mode="delta")
    return store


def fmt(spark: Any, root: str, **opts: Any) -> Any:
    """spark.read.format('flinkstate') with options."""
    r = spark.read.format("flinkstate")
    for k, v in opts.items():
        r = r.option(k, v)
    return r.load(root)


def error_text(excinfo: Any) -> str:
    """The whole text of an exception (Spark wraps the Python error of the planner)."""
    e = excinfo.value
    parts = [str(e)]
    for attr in ("desc", "stackTrace"):
        v = getattr(e, attr, None)
        if v:
            parts.append(str(v))
    return "\n".join(parts)


def flink_harness() -> Any:
    """flinkjobs/harness.py as a module: runs the project's Java jobs on real Flink (tests marked `flink`)."""
    spec = importlib.util.spec_from_file_location("flinkjobs_harness", Path(__file__).resolve().parents[1] / "flinkjobs" / "harness.py")
    assert spec is not None and spec.loader is not None
    harness = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(harness)
    return harness


def state_per_kind(root: str, operator: str) -> set[str]:
    """One keyed state of an operator for each kind (value, list, map, ...) with and without TTL: the first by name."""
    first: dict[tuple[str, bool], str] = {}
    for state, desc in sorted(fs.open(root).metadata().operators[operator].keyed_states.items()):
        first.setdefault((desc.kind, getattr(desc, "ttl", None) is not None), state)
    return set(first.values())


def delete_keys(spark: Any, root: str, operator: str, keys: Iterable[int], states: Iterable[str] | None = None) -> None:
    """Delete Long keys from keyed states of an operator with Spark (a map state's entries by key and user key): from
    these states, or every one (None); one Spark write and checkpoint each."""
    store = fs.open(root)
    doomed = spark.createDataFrame([(k,) for k in keys], "key long")
    chosen = None if states is None else set(states)
    for state, desc in store.metadata().operators[operator].keyed_states.items():
        if chosen is not None and state not in chosen:
            continue
        rows = doomed
        if desc.kind == "map":  # a map entry is deleted by key and user key: all of these keys' entries
            rows = (spark.read.format("flinkstate").options(operator=operator, state=state).load(root)
                    .join(doomed, "key", "left_semi").select("key", "user_key"))
        rows.write.format("flinkstate").options(operator=operator, state=state, operation="delete").mode("append").save(root)


def snapshot(store: fs.CheckpointStore) -> list[Any]:
    """What a user sees: checkpoints and the content of every keyed state of each."""
    out: list[Any] = []
    for c in store.checkpoints():
        out.append(c)
        meta = store.metadata(c.checkpoint_id)
        for uid, op in sorted(meta.operators.items()):
            for name in sorted(op.keyed_states):
                out.append((uid, name, store.read_state(uid, name, c.checkpoint_id).to_pylist()))
    return out


TTL_1S = fs.StateTtlConfig(ttl_ms=1_000)


def ttl_store(tmp_path: Path) -> fs.CheckpointStore:
    """One checkpoint of a value state with a 1 s TTL, a list state and a timer service (the scan tests)."""
    store = fs.open(str(tmp_path / "job"))
    with store.begin(max_parallelism=128) as w:
        w.put_state("op", fs.ValueStateDescriptor(name="v", value_type=pa.int64(), ttl=TTL_1S),
                    pa.table({"key": ["a", "b", "c"], "value": [1, 2, 3], "ttl_timestamp": [10_000, 20_000, 30_000]}))
        w.put_state("op", fs.ListStateDescriptor(name="l", value_type=pa.int64()),
                    pa.table({"key": ["a", "b"], "value": [[1, 2], [3]]}))
        w.put_timers("op", fs.TimerServiceDescriptor(name="t"), pa.table({"key": ["a", "b"], "timestamp": [5, 6]}))
    return store


def check_key_groups(t: pa.Table, mp: int, key_type: pa.DataType) -> None:
    """Every row's key_group is Flink's key group of its key at max parallelism `mp`."""
    keys = t.column("key").to_pylist()
    kgs = t.column("key_group").to_pylist()
    assert all(fs.assign_key_group(k, mp, key_type) == g for k, g in zip(keys, kgs))


def latest_checkpoint(job_dir: Path) -> Path:
    """The newest completed chk-N of a Flink job's checkpoint folder (one in progress when the job was cancelled has no _metadata)."""
    from flinkstate.flink.bridge.source import chk_folders

    done = chk_folders(str(job_dir))
    assert done, f"no completed checkpoint in {job_dir}"
    return Path(done[max(done)])


SKEW_SAVEPOINT = Path(__file__).resolve().parent / "fixtures" / "flink-2.3-skew" / "savepoint"  # SkewJob (make_flink_fixture.py skew)
HOT = ["hot0", "hot1", "hot2"]
TTL_2H = 2 * 3_600_000


def skewed_root(root: Path) -> fs.CheckpointStore:
    """A job where three hot keys hold most entries: checkpoint 1 (full), then checkpoint 2 (a delta adding to them)."""
    store = fs.open(str(root))
    t0 = int(time.time() * 1000)  # just before the checkpoint's time
    cold = [f"k{i}" for i in range(200)]
    events = fs.ListStateDescriptor(name="events", value_type=pa.int64())
    seen = fs.MapStateDescriptor(name="seen", user_key_type=pa.string(), user_value_type=pa.int64())
    last = fs.ValueStateDescriptor(name="last", value_type=pa.int64(), ttl=fs.StateTtlConfig(ttl_ms=TTL_2H))
    with store.begin(max_parallelism=128) as w:
        keys = HOT + cold
        w.put_state("skewed", events, pa.table({"key": keys, "value": [list(range(1000))] * 3 + [[1]] * 200}))
        mk = [k for k in HOT for _ in range(300)] + cold
        w.put_state("skewed", seen, pa.table({"key": mk, "user_key": [f"r{i % 300}" for i in range(900)] + ["r0"] * 200,
                                              "value": list(range(1100))}))
        # last access spread over the hours before the checkpoint: expiry spreads over the next hours
        w.put_state("skewed", last, pa.table({"key": keys, "value": list(range(203)),
                                              "ttl_timestamp": [t0 - (i % 3) * 3_600_000 for i in range(203)]}))
    with store.begin() as w:
        w.put_state("skewed", events, pa.table({"key": HOT, "value": [list(range(500))] * 3}), mode="delta")
    return store
