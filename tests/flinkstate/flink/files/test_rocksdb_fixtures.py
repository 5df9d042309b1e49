"""The checked-in RocksDB NATIVE savepoint and incremental checkpoints decode to exactly what the job held (fast tier)."""

from __future__ import annotations

import dataclasses
import os
import shutil
from pathlib import Path

import pytest
from flink_dump import FIXTURE, check_savepoint

from flinkstate.flink import read_keyed_state, read_metadata
from flinkstate.flink.errors import CorruptFileError
from flinkstate.flink.files import rocksdb
from flinkstate.flink.files.sst import TYPE_MERGE, read_sst

ROCKSDB = FIXTURE.parent / "flink-2.3-rocksdb"


def rocksdb_dir(variant: str) -> Path:
    """The savepoint directory, or the newest retained checkpoint's chk-N directory."""
    if variant == "rocksdb":
        return ROCKSDB / "rocksdb" / "savepoint"
    return sorted((ROCKSDB / "rocksdb-checkpoint" / "checkpoint").glob("chk-*"))[-1]


@pytest.mark.parametrize("variant", ["rocksdb", "rocksdb-checkpoint"])
def test_rocksdb_fixture_matches_dump(variant: str) -> None:
    """Every value, list element (merge operands), map entry, TTL timestamp, timer and operator-state element equals the dump."""
    n = check_savepoint(rocksdb_dir(variant), ROCKSDB / variant / "expected.jsonl")
    assert n > 500


def test_list_state_is_stored_as_merge_operands() -> None:
    """The fixture really holds RocksDB MERGE records for list state, and they decode to whole lists."""
    meta = read_metadata(str(rocksdb_dir("rocksdb")))
    handle = meta.operator("long-keyed").subtasks[0].managed_keyed
    kinds = set()
    for name, stream in handle.shared:
        sst = read_sst(stream.read(meta.directory), name)
        if sst.column_family == "list":
            kinds |= set(sst.records.column("kind").to_pylist())
    assert TYPE_MERGE in kinds


def test_incremental_checkpoints_share_ssts_copied_away() -> None:
    """Two retained incremental checkpoints reference the same shared SSTs by absolute paths that no longer exist."""
    base = ROCKSDB / "rocksdb-checkpoint" / "checkpoint"
    shared = []
    for chk in sorted(base.glob("chk-*")):
        h = read_metadata(str(chk)).operator("long-keyed").subtasks[0].managed_keyed
        paths = {s.path for _, s in h.shared}
        assert all(p.startswith("file:") and not os.path.exists(p[5:]) for p in paths)
        assert all(Path(s.location(str(chk))).parent == base / "shared" for _, s in h.shared)
        shared.append(paths)
    assert len(shared) >= 2 and shared[-1] & shared[-2]


def test_keys_outside_the_key_group_range_are_dropped() -> None:
    """After rescaling, SSTs can hold keys of other subtasks' key groups: only the handle's range is read."""
    meta = read_metadata(str(rocksdb_dir("rocksdb")))
    op = meta.operator("long-keyed")
    full = read_keyed_state(meta, "long-keyed").states["count"]
    sub = op.subtasks[0]
    narrowed = dataclasses.replace(sub.managed_keyed, count=20)  # subtask 0 now owns key groups 0..19 only
    op.subtasks[:] = [dataclasses.replace(sub, managed_keyed=narrowed)]
    got = read_keyed_state(meta, "long-keyed").states["count"]
    kgs = full.column("key_group").to_pylist()
    assert sorted(got.column("key_group").to_pylist()) == sorted(k for k in kgs if k < 20)
    assert 0 < got.num_rows < sum(1 for k in kgs if k < 64)


def test_truncated_sst_names_the_file(tmp_path: Path) -> None:
    """A truncated SST file is a CorruptFileError naming it."""
    dst = tmp_path / "savepoint"
    shutil.copytree(rocksdb_dir("rocksdb"), dst)
    meta = read_metadata(str(dst))
    name, stream = meta.operator("string-keyed").subtasks[0].managed_keyed.shared[0]
    path = Path(stream.location(meta.directory))
    path.write_bytes(path.read_bytes()[:-20])
    with pytest.raises(CorruptFileError, match=rf"{path.name}.*{name}"):
        read_keyed_state(read_metadata(str(dst)), "string-keyed")


def test_ssts_parsed_one_batch_or_one_file_at_a_time_give_the_same_state(monkeypatch: pytest.MonkeyPatch) -> None:
    """A handle's SSTs are parsed in batches of about _BATCH_BYTES: a batch per file reads exactly what one batch does."""
    meta = read_metadata(str(rocksdb_dir("rocksdb")))
    together = read_keyed_state(meta, "long-keyed").states
    monkeypatch.setattr(rocksdb, "_BATCH_BYTES", 1)
    alone = read_keyed_state(meta, "long-keyed").states
    assert together.keys() == alone.keys() and sum(t.num_rows for t in together.values()) > 500
    assert all(together[k].equals(alone[k]) for k in together)
