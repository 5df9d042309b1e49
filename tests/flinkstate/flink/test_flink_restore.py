"""The judge: real Flink 2.3 restores savepoints flinkstate wrote and its dump after restore is the expected one."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from conftest import _harness

from flinkstate.flink.export import load_flink_savepoint, rewrite_flink_savepoint
from flinkstate.flink.savepoint_writer import write_savepoint

pytestmark = [pytest.mark.flink, pytest.mark.slow]

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "flink-2.3-canonical"


@pytest.fixture(scope="module")
def original_dump(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """What Flink holds after restoring the checked-in savepoint Flink itself wrote (HashMap backend, parallelism 1)."""
    out = tmp_path_factory.mktemp("orig") / "dump.txt"
    return _harness().restore_and_dump(FIXTURE / "files" / "savepoint", out, "hashmap", 1)


@pytest.mark.parametrize(("variant", "backend", "parallelism", "compression"),
                         [("files", "hashmap", 1, False), ("snappy", "rocksdb", 3, True)])
def test_round_trip_restores_to_same_dump(tmp_path, original_dump, variant, backend, parallelism, compression):
    """decode -> export (no change) -> Flink restores every key's state, timers and operator state as the original."""
    dest = rewrite_flink_savepoint(str(FIXTURE / variant / "savepoint"), str(tmp_path / "sp"), compression=compression)
    moved = tmp_path / "moved"
    os.rename(dest, moved)  # relative file handles: the savepoint can be moved
    got = _harness().restore_and_dump(moved, tmp_path / "dump.txt", backend, parallelism)
    assert len(got) > 700
    assert got == original_dump


def test_changed_savepoint_restores_to_changed_dump(tmp_path, original_dump):
    """Delete keys 0-4 of long-keyed, upsert count of key 5, rename string-keyed's uid, max parallelism 300 -> RocksDB p=3."""
    ops = load_flink_savepoint(str(FIXTURE / "files" / "savepoint"))
    by_uid = {o.uid: o for o in ops}
    lk = by_uid["long-keyed"]
    for name, t in list(lk.keyed.states.items()):
        t = t.filter(pc.invert(pc.is_in(t.column("key"), pa.array([0, 1, 2, 3, 4], pa.int64()))))
        if name == "count":
            t = t.set_column(t.schema.get_field_index("value"), "value",
                             pc.if_else(pc.equal(t.column("key"), 5), pa.scalar(424242, pa.int64()), t.column("value")))
        lk.keyed.states[name] = t
    for name, t in list(lk.keyed.timers.items()):
        lk.keyed.timers[name] = t.filter(pc.invert(pc.is_in(t.column("key"), pa.array([0, 1, 2, 3, 4], pa.int64()))))
    lk.max_parallelism = 300
    by_uid["string-keyed"].uid = "sk2"
    write_savepoint(str(tmp_path / "sp"), ops)
    got = _harness().restore_and_dump(tmp_path / "sp", tmp_path / "dump.txt", "rocksdb", 3, ("long-keyed", "sk2"))
    expected = []
    for line in original_dump:
        parts = line.split(" ")
        if parts[0] == "long-keyed":
            key = parts[3] if parts[1] == "timer" else parts[2]
            if key in {"0", "1", "2", "3", "4"}:
                continue
            if parts[1] == "count" and key == "5":
                line = "long-keyed count 5 424242"
        if parts[0] == "string-keyed":
            line = "sk2" + line[len("string-keyed"):]
        expected.append(line)
    assert len(expected) < len(original_dump)
    assert got == sorted(expected)
