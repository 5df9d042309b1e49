"""A production-size savepoint (about 10.6 M entries real Flink 2.3 writes) through import and export: real Flink
restores the exported one to exactly the dump it restores the original to. And its RocksDB forms (StateGenJob resave:
Flink restores it on RocksDB and snapshots it at once) hold exactly its state, table by table.

On demand (FLINKSTATE_LARGE=1): writing the savepoint takes minutes the first time (it is cached in
~/.cache/flinkstate/bench, shared with bench/flink_large_savepoint.py) and each real Flink restore of it minutes more,
beyond what CI's 30 minutes leave.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from fsc_helpers import flink_harness as _harness

pytestmark = [
    pytest.mark.flink,
    pytest.mark.slow,
    pytest.mark.skipif(os.environ.get("FLINKSTATE_LARGE") != "1",
                       reason="production size, on demand: FLINKSTATE_LARGE=1 (about 10.6 M entries, minutes per Flink run)"),
]

KEYS = int(os.environ.get("FLINKSTATE_LARGE_KEYS", "300000"))
CACHE = Path(os.environ.get("FLINKSTATE_BENCH_CACHE", Path.home() / ".cache" / "flinkstate" / "bench"))


@pytest.fixture(scope="module")
def large() -> Path:
    """The cached canonical savepoint of KEYS keys, written by real Flink the first time."""
    out = CACHE / f"large-{KEYS}"
    sp = out / "files" / "savepoint"
    if not (sp / "_metadata").exists():
        _harness().run_job(out, 8 * KEYS // 3, ("files",), timeout=3600, props={"keys": KEYS, "skeys": KEYS // 2, "rate": 200_000})
    return sp


@pytest.fixture(scope="module")
def original_dump(large: Path, tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    return _harness().restore_and_dump(large, tmp_path_factory.mktemp("orig") / "dump.txt", "hashmap", 2, timeout=3600)


@pytest.mark.parametrize("spark", [(), ("--spark=local[2]",)], ids=["one-process", "spark-jobs"])
def test_import_export_restores_to_the_same_dump(large: Path, original_dump: list[str], tmp_path: Path,
                                                 spark: tuple[str, ...]) -> None:
    """`flinkstate import` then `flinkstate export`, in one process or as Spark jobs (one task per Flink subtask)."""
    from flinkstate.cli import main

    assert main(["import", str(large), str(tmp_path / "root"), "--raw-values", *spark]) == 0
    assert main(["export", str(tmp_path / "root"), str(tmp_path / "sp"), *spark]) == 0
    got = _harness().restore_and_dump(tmp_path / "sp", tmp_path / "dump.txt", "hashmap", 2, timeout=3600)
    assert len(got) > 1_000_000
    assert got == original_dump


def _digest(t: pa.Table) -> tuple[int, int]:
    """(rows, order-free checksum): the sum mod 2**64 of each row's hash, so RocksDB's key order and the heap's agree."""
    total = 0
    for b in t.to_batches(max_chunksize=65_536):
        cols = b.to_pydict()
        for row in zip(*cols.values()):
            total += int.from_bytes(hashlib.blake2b(repr(row).encode(), digest_size=8).digest(), "little")
    return t.num_rows, total % 2**64


def _digests(path: Path) -> dict[tuple[str, str, str], tuple[int, int]]:
    """Every keyed state (stored rows, TTL timestamps and expired entries included), timer service, operator state and
    coordinator of a snapshot, read by flinkstate: (operator, kind, name) -> _digest."""
    import flinkstate

    src = flinkstate.open(str(path), raw_values=True)
    out: dict[tuple[str, str, str], tuple[int, int]] = {}
    for uid, op in src.checkpoint().operators.items():
        reads: list[tuple[str, str, Any]] = [("state", n, lambda n=n: src.read_state(uid, n, include_expired=True, raw=True))
                                             for n in op.keyed_states]
        reads += [("timers", n, lambda n=n: src.read_timers(uid, n)) for n in op.timer_services]
        reads += [("operator", n, lambda n=n: src.read_operator_state(uid, n)) for n in op.operator_states]
        reads += [("coordinator", "", lambda: src.read_coordinator(uid))] if op.has_coordinator else []
        out.update({(uid, kind, name): _digest(read()) for kind, name, read in reads})
    return out


@pytest.fixture(scope="module")
def large_digests(large: Path) -> dict[tuple[str, str, str], tuple[int, int]]:
    return _digests(large)


@pytest.mark.parametrize("variant", ["rocksdb", "rocksdb-checkpoint"])
def test_rocksdb_resave_holds_the_canonical_state(large: Path, large_digests: dict[tuple[str, str, str], tuple[int, int]],
                                                  variant: str, tmp_path: Path) -> None:
    """Flink's RocksDB NATIVE savepoint (cached, bench/flink_large_savepoint.py's) and retained incremental checkpoint of
    the canonical savepoint: every table's rows and content equal the canonical one's, timers and operator state too."""
    sp = large.parent.parent / "rocksdb" / "savepoint"
    if variant != "rocksdb" or not (sp / "_metadata").exists():
        sp = _harness().resave(large, large.parent.parent if variant == "rocksdb" else tmp_path, (variant,))[variant]
    if variant.endswith("checkpoint"):
        sp = max(sp.glob("chk-*"), key=lambda p: int(p.name[4:]))
    assert sum(r for r, _ in large_digests.values()) > 10_000_000 * KEYS // 300_000
    assert _digests(sp) == large_digests
