"""Sizes and honest metadata of Flink savepoints: operators/states tables, describe and checkpoints (fast tier).

Real savepoints of real Flink: the checked-in fixtures (tests/fixtures/flink-2.3-*, flink-rocksdb-full).
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from fsc_helpers import latest_checkpoint

import flinkstate as fs
from flinkstate.flink import read_keyed_state, read_metadata, read_operator_state
from flinkstate.flink.files.rocksdb import handle_files
from flinkstate.flink.files.sst import read_sst

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
CANONICAL = FIXTURES / "flink-2.3-canonical" / "files" / "savepoint"
NATIVE = FIXTURES / "flink-2.3-native" / "native" / "savepoint"


def _full(rocksdb_full: Path, variant: str = "rocksdb-full", line: str = "2.3") -> Path:
    folder = rocksdb_full / line / variant
    return latest_checkpoint(folder / "checkpoint") if variant.endswith("checkpoint") else folder / "savepoint"


def _disk(folder: Path) -> tuple[int, int]:
    """(files, bytes) of the state files in a savepoint / chk-N folder (all but _metadata)."""
    files = [p for p in folder.iterdir() if p.is_file() and p.name != "_metadata"]
    return len(files), sum(p.stat().st_size for p in files)


@pytest.mark.parametrize("variant", ["rocksdb-full", "rocksdb-full-checkpoint", "forst-full"])
def test_operator_bytes_are_the_files_on_disk(rocksdb_full: Path, variant: str) -> None:
    """Every state file in the folder belongs to exactly one operator: their files and bytes add up to the folder's
    (plus the coordinator state held in _metadata); per subtask, keyed and operator bytes add up to the operator's."""
    path = _full(rocksdb_full, variant)
    src = fs.open(str(path))
    ck = src.checkpoint()
    ops = ck.inspect.operators()
    coordinator = sum(len(op.coordinator_state or b"") for op in ck.meta.operators)
    assert (sum(ops.column("files").to_pylist()), sum(ops.column("bytes").to_pylist()) - coordinator) == _disk(path)
    assert ops.column("rows").null_count == ops.num_rows  # not told without decoding: NULL, not 0
    assert (ck.info.files, ck.info.bytes - coordinator) == _disk(path) and ck.info.rows is None
    doc = src.describe()
    for op in doc["operators"]:
        flink_op = ck.meta.operator(ck.uids[op["uid"]])
        subtasks = sum(t["keyed_bytes"] + t["operator_bytes"] for t in op["subtasks"])
        assert subtasks + len(flink_op.coordinator_state or b"") == op["bytes"] > 0
        assert len(op["subtasks"]) == flink_op.parallelism


def test_rocksdb_state_bytes_are_its_column_family_ssts(rocksdb_full: Path) -> None:
    """A RocksDB state's files and bytes are the SSTs whose properties name its column family (read here independently)."""
    path = _full(rocksdb_full, "rocksdb-full")
    meta = read_metadata(str(path))
    want: dict[str, list[int]] = {}
    for sub in meta.operator("long-keyed").subtasks:
        for _, stream in handle_files(sub.managed_keyed, meta.directory, "test").ssts.values():
            data = stream.read(meta.directory)
            w = want.setdefault(read_sst(data, "test").column_family, [0, 0])
            w[0] += 1
            w[1] += len(data)
    states = fs.open(str(path)).checkpoint().inspect.states("long-keyed").to_pylist()
    got = {("_timer_state/" + r["state"] if r["state_kind"].startswith("timers") else r["state"]): [r["files"], r["bytes"]]
           for r in states if r["files"]}
    assert got == want and len(got) == 26
    assert all(r["rows"] is None for r in states)
    empty = next(r for r in states if r["state"] == "processing_user-timers")
    assert (empty["files"], empty["bytes"]) == (0, 0)  # declared, no SST: the format tells it is empty


def test_operator_state_rows_and_bytes_from_offsets() -> None:
    """Split/union state: rows are the elements the handles' offsets count (as read), bytes their spans; broadcast rows
    (a count inside the data) are NULL, its bytes told."""
    ck = fs.open(str(CANONICAL)).checkpoint()
    rows = {(r["operator"], r["state"]): r for r in ck.inspect.states().to_pylist()}
    for op, state in (("opstate", "split"), ("opstate", "union"), ("source", "SourceReaderState")):
        assert rows[(op, state)]["rows"] == read_operator_state(ck.meta, op, state).num_rows > 0
        assert rows[(op, state)]["bytes"] > 0 and rows[(op, state)]["files"] == ck.meta.operator(op).parallelism
    assert rows[("opstate", "split")]["bytes"] == 60 * 8  # 60 longs
    assert rows[("bcast", "bcast")]["rows"] is None and rows[("bcast", "bcast")]["bytes"] > 0


@pytest.mark.parametrize("path", [CANONICAL, NATIVE], ids=["canonical", "heap-native"])
def test_interleaved_keyed_state_bytes_are_null_not_zero(path: Path) -> None:
    """Canonical and HashMap files interleave every state of a key group: per-state rows and bytes are NULL, files counted."""
    ck = fs.open(str(path)).checkpoint()
    keyed = [r for r in ck.inspect.states("long-keyed").to_pylist() if not r["state_kind"].startswith("operator")]
    assert keyed and all(r["rows"] is None and r["bytes"] is None and r["files"] == 2 for r in keyed)
    ops = {r["operator"]: r for r in ck.inspect.operators().to_pylist()}
    assert ops["long-keyed"]["bytes"] == sum(s.managed_keyed.stream.size for s in ck.meta.operator("long-keyed").subtasks)


def test_ttl_duration_not_held_is_null_and_flagged() -> None:
    """A TTL state of a savepoint (which does not hold durations) has ttl NULL and ttl_unknown true, not Long.MAX_VALUE;
    a duration given at open is shown; a state without TTL has neither."""
    def row(src: fs.FlinkSource, state: str) -> dict[str, object]:  # type: ignore[name-defined]
        return next(r for r in src.checkpoint().inspect.states("long-keyed").to_pylist() if r["state"] == state)

    src = fs.open(str(CANONICAL))
    assert {k: row(src, "ttl")[k] for k in ("ttl", "ttl_unknown")} == {"ttl": None, "ttl_unknown": True}
    assert {k: row(src, "count")[k] for k in ("ttl", "ttl_unknown")} == {"ttl": None, "ttl_unknown": False}
    given = fs.open(str(CANONICAL), ttl={"long-keyed/ttl": 60_000})
    assert {k: row(given, "ttl")[k] for k in ("ttl", "ttl_unknown")} == {"ttl": 60_000, "ttl_unknown": False}
    doc = src.describe()
    states = {s["state"]: s for op in doc["operators"] if op["uid"] == "long-keyed" for s in op["states"]}
    assert states["ttl_list"]["ttl"] is None and states["ttl_list"]["ttl_unknown"] is True


def test_max_parallelism_is_per_operator(rocksdb_full: Path) -> None:
    """The window operator has max parallelism 256, the others 128: each table and lookup uses the operator's own."""
    for line in ("1.20", "2.3"):
        src = fs.open(str(_full(rocksdb_full, "rocksdb-full", line)), uids=["long-keyed", "window"])
        ops = {r["operator"]: r["max_parallelism"] for r in src.checkpoint().inspect.operators().to_pylist()}
        assert ops["window"] == 256 and ops["long-keyed"] == 128, line
        # a key lookup hashes with the operator's own max parallelism (128 here, though the checkpoint's largest is 256)
        assert src.read_state("long-keyed", "count", keys=[7]).to_pylist() == \
            [{"key_group": fs.assign_key_group(7, 128, pa.int64()), "key": 7, "value": 51}]
        whole = read_keyed_state(read_metadata(str(_full(rocksdb_full, "rocksdb-full", line))), "window").states["window-contents"]
        key3 = [r for r in whole.to_pylist() if r["key"] == 3]
        assert len(src.read_state("window", "window-contents", keys=[3])) == len(key3) > 0
        assert {r["key_group"] for r in key3} == {fs.assign_key_group(3, 256, pa.int64())}


def test_store_checkpoint_tables_keep_their_figures(tmp_path: Path) -> None:
    """A flinkstate checkpoint's tables: rows counted, ttl_unknown false, max parallelism the checkpoint's."""
    from fsc_helpers import ttl_store

    ck = ttl_store(tmp_path).checkpoint()
    states = ck.inspect.states().to_pylist()
    assert all(r["ttl_unknown"] is False and r["rows"] is not None for r in states)
    assert [r["max_parallelism"] for r in ck.inspect.operators().to_pylist()] == [ck.max_parallelism]
