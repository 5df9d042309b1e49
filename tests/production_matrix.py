"""The configuration matrix of real Flink snapshots of a production-shaped job (flinkjobs/src/ProductionJob.java).

A cell is (Flink line, run, snapshot): a run is one execution of the job with one backend configuration, a
snapshot one of what it took (a CANONICAL or NATIVE savepoint, or its retained checkpoint folder). The CI cells are
checked in under tests/fixtures/flink-production/ (archived; `python tests/fixtures/make_flink_fixture.py production`
regenerates them); every other cell is generated with real Flink on demand (FLINKSTATE_MATRIX=all) into the cache.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import shutil
import tarfile
from pathlib import Path

from fsc_helpers import flink_harness

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "flink-production"
JOB = Path(__file__).resolve().parents[1] / "flinkjobs" / "src" / "ProductionJob.java"
RECORDS = 600
# run -> (backend, incremental checkpoints, snapshot compression, snapshots taken)
RUNS: dict[str, tuple[str, bool, bool, tuple[str, ...]]] = {
    "hashmap": ("hashmap", False, False, ("canonical", "native", "checkpoint")),
    "hashmap-snappy": ("hashmap", False, True, ("canonical", "native", "checkpoint")),
    "rocksdb-incremental": ("rocksdb", True, False, ("canonical", "native", "checkpoint")),
    "rocksdb-full": ("rocksdb", False, False, ("native", "checkpoint")),
    "forst": ("forst", True, False, ("native", "checkpoint")),
}
LINES = ("2.3", "1.20")
CELLS = [(line, run, snap) for line in LINES for run, (backend, _, _, snaps) in RUNS.items() for snap in snaps
         if not (backend == "forst" and line.startswith("1."))]
# Checked in and read in CI (no Flink needed); their round trips (real Flink restores, ~7 s each) run in CI too.
CI_CELLS = (("2.3", "hashmap", "canonical"), ("2.3", "rocksdb-full", "native"), ("2.3", "hashmap-snappy", "checkpoint"),
            ("2.3", "rocksdb-incremental", "checkpoint"), ("2.3", "forst", "checkpoint"), ("1.20", "rocksdb-full", "checkpoint"),
            ("1.20", "hashmap", "native"))
CI_ROUND_TRIPS = CI_CELLS


def cell_id(cell: tuple[str, str, str]) -> str:
    return "-".join(cell)


def _extract(archive: Path, into: Path) -> Path:
    """A snapshot archive (savepoint/ or checkpoint/ under its own name) extracted once into `into`."""
    target = into / archive.name.removesuffix(".tar.gz")
    if not target.exists():
        tmp = into / f".{target.name}.{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        with tarfile.open(archive) as tar:
            tar.extractall(tmp, filter="data")
        (tmp / target.name).rename(target)
        shutil.rmtree(tmp)
    return target


def _cache() -> Path:
    digest = hashlib.sha256(JOB.read_bytes()).hexdigest()[:12]
    return flink_harness().cache_dir().parent / f"production-{digest}"


def generate(line: str, run: str) -> Path:
    """Run the job for one (line, run) with real Flink into the cache (once per job source); the run's folder."""
    out = _cache() / line / run
    if not (out / "dump.txt").exists():
        backend, incremental, snappy, snaps = RUNS[run]
        tmp = out.with_name(f".{run}.{os.getpid()}")
        flink_harness().production_run(tmp, RECORDS, backend, incremental, snappy, snaps, version=line)
        shutil.rmtree(out, ignore_errors=True)
        tmp.rename(out)
    return out


def snapshot(cell: tuple[str, str, str], work: Path) -> tuple[Path, list[str]]:
    """The cell's snapshot folder (a savepoint, or the job's checkpoint folder) and the job's dump lines."""
    line, run, snap = cell
    fixture = FIXTURES / line / run
    if (fixture / f"{snap}.tar.gz").exists():
        path = _extract(fixture / f"{snap}.tar.gz", work / line / run)
        dump = gzip.decompress((fixture / "dump.txt.gz").read_bytes()).decode()
    else:
        folder = generate(line, run)
        path = folder / snap / "savepoint" if snap != "checkpoint" else folder / "checkpoint"
        dump = (folder / "dump.txt").read_text()
    return path, dump.splitlines()
