"""Real Flink restores a SQL job's savepoint whole: the agg fixture (flink-<line>-sql/agg-hashmap, stopped with a
savepoint after its first changelog rows) resumed by the same Flink from its own compiled plan ends with exactly the
aggregates of the whole input, so the savepoint's state held every group's count, sum, max and average so far. The job:
flinkjobs/sql/SqlJob.java."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fsc_helpers import flink_harness

pytestmark = [pytest.mark.flink]
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def _expected(rows: int) -> list[tuple[str, int, int, int, float]]:
    """GROUP BY k over ids 0..rows-1 (k = 'k' || id % 10, v = id % 7): COUNT(*), SUM(v), MAX(v), AVG(CAST(v AS DOUBLE))."""
    groups: dict[str, list[int]] = {}
    for i in range(rows):
        groups.setdefault(f"k{i % 10}", []).append(i % 7)
    return sorted((k, len(vs), sum(vs), max(vs), float(sum(vs)) / len(vs)) for k, vs in groups.items())


def _parse(lines: list[str]) -> list[tuple[str, int, int, int, float]]:
    """emitted.txt rows "k2, 200, 600, 6, 3.0" as typed tuples."""
    out = []
    for line in lines:
        k, cnt, total, mx, av = line.split(", ")
        out.append((k, int(cnt), int(total), int(mx), float(av)))
    return sorted(out)


@pytest.mark.parametrize("line", ["2.3", "1.20"])
def test_flink_restores_the_agg_savepoint_whole_and_finishes_the_input(line: str, tmp_path: Path) -> None:
    agg = FIXTURES / f"flink-{line}-sql" / "agg-hashmap"
    fixture = json.loads((agg / "fixture.json").read_text(encoding="utf-8"))
    before = (agg / "emitted.txt").read_text(encoding="utf-8").splitlines()
    assert sum(int(line.split(", ")[1]) for line in before) < fixture["rows"]  # the savepoint was taken mid-input
    out = flink_harness().sql_restore("agg", agg / "savepoint", agg / "plan.json", tmp_path / "restored", version=line,
                                      initial=agg / "emitted.txt")
    changelog = (out / "changelog.txt").read_text(encoding="utf-8").splitlines()
    # the restored groups' first change retracts exactly the row each had emitted before the savepoint
    first_retractions = {}
    for row in changelog:
        if row.startswith("-U["):
            first_retractions.setdefault(row[3:].split(", ")[0], row[3:-1])
    assert sorted(first_retractions.values()) == before
    # the emitted rows folded onto the savepoint's: the aggregates of every input row, each counted once
    got = _parse((out / "emitted.txt").read_text(encoding="utf-8").splitlines())
    assert got == _expected(fixture["rows"])
