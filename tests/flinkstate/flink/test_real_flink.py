"""The slow `flink` tier: real Flink 2.3 writes fresh savepoints and the decoder must read exactly its dump."""

from __future__ import annotations

from pathlib import Path

import pytest
from fsc_helpers import flink_harness as _harness, latest_checkpoint
from flink_dump import check_savepoint

pytestmark = [pytest.mark.flink, pytest.mark.slow]


@pytest.mark.parametrize("variant", ["files", "inline", "snappy"])
def test_fresh_savepoint_matches_dump(flink_fresh: Path, variant: str) -> None:
    """A savepoint real Flink just wrote (150 records, separate files / inlined / snappy) equals the job's dump."""
    n = check_savepoint(flink_fresh / variant / "savepoint", flink_fresh / variant / "expected.jsonl")
    assert n > 800


def test_max_parallelism_above_128(flink_fresh_maxp300: Path) -> None:
    """maxParallelism 300: two-byte key-group prefixes, key groups up to 299, same values as the dump."""
    from flinkstate.flink import read_keyed_state, read_metadata

    sp = flink_fresh_maxp300 / "files" / "savepoint"
    n = check_savepoint(sp, flink_fresh_maxp300 / "files" / "expected.jsonl")
    assert n > 5000
    meta = read_metadata(str(sp))
    assert meta.operator("long-keyed").max_parallelism == 300
    kgs = read_keyed_state(meta, "long-keyed").states["count"].column("key_group").to_pylist()
    assert max(kgs) >= 256 and min(kgs) < 150  # prefixes with a non-zero high byte too


def test_fresh_native_savepoint_and_checkpoint(flink_fresh_native: Path) -> None:
    """HashMap NATIVE savepoint and retained checkpoint real Flink just wrote equal the job's dump."""
    sp = flink_fresh_native / "native" / "savepoint"
    assert check_savepoint(sp, flink_fresh_native / "native" / "expected.jsonl") > 800
    chk = latest_checkpoint(flink_fresh_native / "checkpoint" / "checkpoint")
    assert check_savepoint(chk, flink_fresh_native / "checkpoint" / "expected.jsonl") > 800


def test_fresh_rocksdb_savepoint_and_incremental_checkpoint(flink_fresh_rocksdb: Path) -> None:
    """RocksDB NATIVE savepoint and incremental checkpoint (SSTs, list merge operands) real Flink just wrote equal the dump."""
    sp = flink_fresh_rocksdb / "rocksdb" / "savepoint"
    assert check_savepoint(sp, flink_fresh_rocksdb / "rocksdb" / "expected.jsonl") > 800
    chk = latest_checkpoint(flink_fresh_rocksdb / "rocksdb-checkpoint" / "checkpoint")
    assert check_savepoint(chk, flink_fresh_rocksdb / "rocksdb-checkpoint" / "expected.jsonl") > 800


def test_forst_backend_savepoint_and_checkpoint_match_dump(tmp_path: Path) -> None:
    """The ForSt state backend (Flink 2.x, `state.backend.type: forst`): its SSTs use a two-level (partitioned) index;
    its native savepoint and incremental checkpoint read back exactly what the job held."""
    _harness().run_job(tmp_path, 60, ("rocksdb", "rocksdb-checkpoint"), props={"conf": "state.backend.type=forst"})
    assert check_savepoint(tmp_path / "rocksdb" / "savepoint", tmp_path / "rocksdb" / "expected.jsonl") > 800
    chk = latest_checkpoint(tmp_path / "rocksdb-checkpoint" / "checkpoint")
    assert check_savepoint(chk, tmp_path / "rocksdb-checkpoint" / "expected.jsonl") > 800


@pytest.mark.parametrize("backend", ["rocksdb", "forst"])
def test_fresh_non_incremental_snapshots_match_dump(tmp_path: Path, backend: str) -> None:
    """RocksDB and ForSt without incremental snapshots (Flink's default: every SST in the handle's private list), the
    window operator with its own max parallelism 256: native savepoint and retained checkpoint equal the job's dump."""
    _harness().run_job(tmp_path, 60, ("rocksdb-full", "rocksdb-full-checkpoint"),
                       props={"window_maxp": 256, "conf": f"state.backend.type={backend}"})
    assert check_savepoint(tmp_path / "rocksdb-full" / "savepoint", tmp_path / "rocksdb-full" / "expected.jsonl") > 1300
    chk = latest_checkpoint(tmp_path / "rocksdb-full-checkpoint" / "checkpoint")
    assert check_savepoint(chk, tmp_path / "rocksdb-full-checkpoint" / "expected.jsonl") > 1300


def test_fresh_non_incremental_savepoint_imports_every_entry(tmp_path: Path) -> None:
    """`flinkstate import` of a RocksDB savepoint without incremental snapshots commits every entry (it committed
    empty states when the private SSTs were not read)."""
    from flink_dump import flink_entries as _flink_entries
    from flink_dump import store_entries as _store_entries

    import flinkstate as fs
    from flinkstate.flink import read_metadata
    from flinkstate.flink.bridge.importer import import_savepoint

    _harness().run_job(tmp_path, 60, ("rocksdb-full",))
    sp = tmp_path / "rocksdb-full" / "savepoint"
    import_savepoint(sp, tmp_path / "root", raw_values=True)
    meta, store = read_metadata(str(sp)), fs.open(str(tmp_path / "root"))
    total = 0
    for uid in ("long-keyed", "string-keyed", "window"):
        want = _flink_entries(meta, uid)
        assert _store_entries(store, uid) == want, uid
        total += sum(len(v) for v in want.values())
    assert total > 1000
