"""The view of a state at a checkpoint (format.merge): newest full file plus later deltas, newest wins."""

from __future__ import annotations

from pathlib import Path

import flinkstate as fs
import pyarrow as pa
import pytest
from flinkstate.format.datafile import primary_key_columns
from flinkstate.format.stream import HOLD_BYTES, FileRows, RangeStream
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st


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
        assert chunked_view(store, cid, 3, hold_bytes=0) == chunked_view(store, cid, 1) == want, f"checkpoint {cid} by chunks"


def chunked_view(store: fs.CheckpointStore, cid: int, width: int, hold_bytes: int = HOLD_BYTES) -> dict[int, int]:
    """The state read by RangeStream over the whole key-group range, width key groups at a time."""
    ck = store.checkpoint(cid)
    d = ck.state_descriptor("op", "v")
    mp = ck.max_parallelism_of("op")
    s = RangeStream(ck.io, ck.state_files("op", "v"), primary_key_columns(d), mp, (0, mp - 1), descriptor=d, hold_bytes=hold_bytes)
    out: dict[int, int] = {}
    for lo in range(0, mp, width):
        t = s.take(lo, min(mp, lo + width) - 1)
        if t is not None:
            kg = t.column("key_group").to_pylist()
            assert all(lo <= k < lo + width for k in kg)
            keys = t.column("key").to_pylist()
            assert len(set(keys)) == len(keys) and not set(keys) & set(out)
            out.update(zip(keys, t.column("value").to_pylist()))
    s.close()
    return out


def test_range_stream_reads_each_row_group_once_and_refuses_going_back(tmp_path: Path) -> None:
    """A file of several row groups read a key group at a time: every row group read once, rows in their key group
    only; a sub-range before one already taken is refused."""
    store = fs.open(str(tmp_path))
    d = fs.ValueStateDescriptor(name="v", value_type=pa.int64(), key_type=pa.int64())
    keys = list(range(140_000))  # three row groups
    with store.begin(max_parallelism=64) as w:
        w.put_state("op", d, pa.table({"key": keys, "value": [k * 3 for k in keys]}))
    ck = store.checkpoint()
    (e,) = ck.state_files("op", "v")
    reads: list[int] = []
    rows = FileRows(ck.io, e, descriptor=d, max_parallelism=64)
    real = rows._file.read_row_group
    rows._file = type("Counted", (), {"read_row_group": lambda _, i: reads.append(i) or real(i), "metadata": rows._file.metadata,
                                      "schema_arrow": rows._file.schema_arrow})()
    got = {}
    for kg in range(64):
        t = rows.take(kg, kg)
        assert set(t.column("key_group").to_pylist()) <= {kg}
        got.update(zip(t.column("key").to_pylist(), t.column("value").to_pylist()))
    rows.close()
    assert got == {k: k * 3 for k in keys}
    assert sorted(reads) == [0, 1, 2]
    s = RangeStream(ck.io, [e], primary_key_columns(d), 64, (0, 63), descriptor=d)
    s.take(0, 9)
    with pytest.raises(fs.InvalidArgumentError, match="do not follow"):
        s.take(5, 20)
    s.close()


@pytest.mark.parametrize("hold_bytes", [0, HOLD_BYTES])
def test_range_stream_on_an_object_store_holds_small_files_and_streams_large_ones(hold_bytes: int, tmp_path: Path) -> None:
    """On a non-local store a file up to hold_bytes is fetched once and held, a larger one checked as a stream of blocks
    and then read by ranges: the same rows either way, and a damaged byte is named either way."""
    import uuid

    store = fs.open(f"memory://stream-{uuid.uuid4().hex}", {"delta_location": str(tmp_path)})
    d = fs.ValueStateDescriptor(name="v", value_type=pa.int64(), key_type=pa.int64())
    with store.begin(max_parallelism=16) as w:
        w.put_state("op", d, pa.table({"key": list(range(2000)), "value": list(range(2000))}))
    assert chunked_view(store, 1, 5, hold_bytes=hold_bytes) == {k: k for k in range(2000)}
    (e,) = store.checkpoint(1).state_files("op", "v")
    data = bytearray(store.io.fs.cat_file(store.io.fs_path(e.path)))
    data[len(data) // 2] ^= 0xFF
    store.io.fs.pipe_file(store.io.fs_path(e.path), bytes(data))
    with pytest.raises(fs.CorruptFileError, match="checksum"):
        chunked_view(store, 1, 5, hold_bytes=hold_bytes)
