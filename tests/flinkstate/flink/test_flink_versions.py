"""Savepoints of every Flink line users run (1.18 to 2.3) read back exactly what the job held.

Fast tier: the checked-in savepoints of tests/fixtures/flink-<line>/ (canonical snappy, HashMap native,
RocksDB native) and of the 2.3 fixtures. Slow tier (`flink`): each selected version writes all seven
formats now; FLINKSTATE_FLINK_VERSIONS picks the versions (default the oldest and the newest,
`all` or a comma list such as `1.19,2.0` for others).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from fsc_helpers import flink_harness as _harness, latest_checkpoint
from flink_dump import check_savepoint

from flinkstate.flink import read_keyed_state, read_metadata

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
KNOWN_VERSIONS = ("1.18", "1.19", "1.20", "2.0", "2.1", "2.2", "2.3")
FORMATS = ("canonical", "native", "rocksdb")
_FIXTURE_2_3 = {"canonical": ("flink-2.3-canonical", "snappy"), "native": ("flink-2.3-native", "native"),
                "rocksdb": ("flink-2.3-rocksdb", "rocksdb")}
ALL_VARIANTS = ("files", "inline", "snappy", "native", "checkpoint", "rocksdb", "rocksdb-checkpoint")


def fixture(line: str, fmt: str) -> tuple[Path, Path]:
    """(savepoint directory, expected dump) of the checked-in savepoint Flink <line> wrote in format fmt."""
    if line == "2.3":
        folder, variant = _FIXTURE_2_3[fmt]
        return FIXTURES / folder / variant / "savepoint", FIXTURES / folder / variant / "expected.jsonl"
    return FIXTURES / f"flink-{line}" / fmt / "savepoint", FIXTURES / f"flink-{line}" / fmt / "expected.jsonl.gz"


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("line", KNOWN_VERSIONS)
def test_savepoint_of_each_version_matches_dump(line: str, fmt: str) -> None:
    """Every value, list element, map entry, TTL timestamp, timer and operator-state element equals the job's dump."""
    savepoint, expected = fixture(line, fmt)
    assert check_savepoint(savepoint, expected) > 800


# What the bytes tell: _metadata v4 (1.x) / v5 (2.0) / v6 (2.1+); the RocksDB OPTIONS file (6.20 vs 8.10,
# avoid_flush_during_shutdown); compressed operator state with shared offsets (1.18) or not (1.19+).
GUESS = {
    "1.18": {"canonical": "1.18", "native": "1.18-1.20", "rocksdb": "1.18"},
    "1.19": {"canonical": "1.19-1.20", "native": "1.18-1.20", "rocksdb": "1.19-1.20"},
    "1.20": {"canonical": "1.19-1.20", "native": "1.18-1.20", "rocksdb": "1.19-1.20"},
    "2.0": dict.fromkeys(FORMATS, "2.0"),
    "2.1": dict.fromkeys(FORMATS, "2.1-2.3"),
    "2.2": dict.fromkeys(FORMATS, "2.1-2.3"),
    "2.3": dict.fromkeys(FORMATS, "2.1-2.3"),
}


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("line", KNOWN_VERSIONS)
def test_flink_version_is_told_from_the_bytes(line: str, fmt: str) -> None:
    """CheckpointMetadata.flink_version names the releases that write what the savepoint holds, and why."""
    guess = read_metadata(str(fixture(line, fmt)[0])).flink_version
    assert guess.label == GUESS[line][fmt], str(guess)
    assert line in guess.versions
    assert guess.evidence[0].startswith("_metadata version ")


@pytest.mark.parametrize("line", ["1.18", "1.19", "1.20"])
def test_flink_1x_operators_are_found_by_uid(line: str) -> None:
    """Metadata v4 records no uids: an operator is found by the id Flink derives from its uid (murmur3_128)."""
    meta = read_metadata(str(fixture(line, "canonical")[0]))
    assert meta.version == 4
    op = meta.operator("long-keyed")
    assert op.uid is None and op.operator_id == "e96676d2a3621a713f8229ed21cc08b2"
    assert read_keyed_state(meta, "string-keyed").states["last"].num_rows > 10


def _selected_versions() -> tuple[str, ...]:
    """FLINKSTATE_FLINK_VERSIONS: unset -> the oldest and newest line, 'all' -> every line, else a comma list."""
    env = os.environ.get("FLINKSTATE_FLINK_VERSIONS", "").strip()
    if not env:
        return (KNOWN_VERSIONS[0], KNOWN_VERSIONS[-1])
    if env == "all":
        return KNOWN_VERSIONS
    return tuple(v.strip() for v in env.split(","))


@pytest.mark.flink
@pytest.mark.slow
@pytest.mark.parametrize("line", KNOWN_VERSIONS)
def test_fresh_savepoints_of_version_match_dump(line: str, tmp_path: Path) -> None:
    """Flink <line> writes canonical (files, inline, snappy), HashMap native and checkpoint, RocksDB native and incremental: each equals the dump."""
    if line not in _selected_versions():
        pytest.skip(f"Flink {line} runs on demand: FLINKSTATE_FLINK_VERSIONS=all or ={line}")
    _harness().run_job(tmp_path, 100, ALL_VARIANTS, version=line)
    for variant in ALL_VARIANTS:
        d = tmp_path / variant
        sp = d / "savepoint" if variant not in ("checkpoint", "rocksdb-checkpoint") else latest_checkpoint(d / "checkpoint")
        assert check_savepoint(sp, d / "expected.jsonl") > 800, variant
        assert line in read_metadata(str(sp)).flink_version.versions, variant
