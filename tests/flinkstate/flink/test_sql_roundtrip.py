"""Real Flink restores what flinkstate imported and exported of Flink's own savepoints whose states the decoders keep as
bytes: SQL jobs (RowData keys, accumulators, window state and timers) resumed by the same SQL, and a Kryo-typed state
imported with no flag. The jobs: flinkjobs/sql/SqlJob.java and flinkjobs/src/RestoreDumpJob.java (`+kryo`)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from fsc_helpers import flink_harness

from flinkstate.flink.bridge.importer import import_savepoint
from flinkstate.flink.bridge.store_export import export_savepoint

pytestmark = [pytest.mark.flink, pytest.mark.slow]
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def _resume(harness, query: str, savepoint: Path, out: Path, backend: str) -> list[str]:
    """The SQL job restored from savepoint with its fixture's plan, run to the end of its input: its rows then (the
    fixture's emitted rows with the restored job's changelog folded on)."""
    cell = FIXTURES / "flink-2.3-sql" / f"{query}-hashmap"
    done = harness.sql_restore(query, savepoint, cell / "plan.json", out, backend=backend, initial=cell / "emitted.txt")
    return (done / "emitted.txt").read_text(encoding="utf-8").splitlines()


def _ts(seconds: int) -> str:
    """A window bound as the job prints it (Java's LocalDateTime.toString: seconds left out when zero)."""
    t = dt.datetime(1970, 1, 1) + dt.timedelta(seconds=seconds)
    return t.isoformat(timespec="minutes" if t.second == 0 else "seconds")


def _whole_input(query: str, rows: int = 2000) -> list[str]:
    """What the job emits over every input row when each is counted once (ids 0..rows-1, k = id % 10, v = id % 7)."""
    if query == "agg":
        groups: dict[str, list[int]] = {}
        for i in range(rows):
            groups.setdefault(f"k{i % 10}", []).append(i % 7)
        return sorted(f"{k}, {len(vs)}, {sum(vs)}, {max(vs)}, {sum(vs) / len(vs)}" for k, vs in groups.items())
    # a 10 s TUMBLE window holds one id per key
    return sorted(f"{_ts(i // 10 * 10)}, {_ts(i // 10 * 10 + 10)}, k{i % 10}, 1, {i % 7}" for i in range(rows))


@pytest.mark.parametrize("query", ["agg", "window"])
def test_flink_resumes_a_sql_job_from_the_exported_savepoint(query: str, tmp_path: Path) -> None:
    """What the state carried over the savepoint is what the original did: the resumed job ends with the rows of the
    whole input, each counted once (test_sql_jobs.py shows the original savepoint resumes the same way)."""
    harness = flink_harness()
    sp = FIXTURES / "flink-2.3-sql" / f"{query}-hashmap" / "savepoint"
    report = import_savepoint(sp, tmp_path / "root")
    assert report.as_bytes  # its RowData states, kept as BinaryRowData bytes
    dest = export_savepoint(str(tmp_path / "root"), tmp_path / "exported")
    got = _resume(harness, query, Path(dest), tmp_path / "from-export", "rocksdb")
    assert got == _whole_input(query)


def test_a_kryo_state_imported_without_a_flag_is_restored_by_flink(tmp_path: Path) -> None:
    harness = flink_harness()
    sp = FIXTURES / "flink-2.3-canonical" / "files" / "savepoint"
    report = import_savepoint(sp, tmp_path / "root")
    assert "kryo/opaque" in report.as_bytes
    dest = export_savepoint(str(tmp_path / "root"), tmp_path / "exported")
    uids = ("long-keyed", "string-keyed", "+kryo")
    want = harness.restore_and_dump(sp, tmp_path / "orig.txt", "hashmap", 1, uids)
    got = harness.restore_and_dump(Path(dest), tmp_path / "restored.txt", "rocksdb", 2, uids)
    kryo = [line for line in want if line.startswith("kryo opaque ")]
    assert len(kryo) == 7 and all("Opaque(" in line for line in kryo)
    assert got == want
