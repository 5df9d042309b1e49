"""The production-shaped job's snapshots round trip: import, a change through Spark, export, and real Flink restores
the export (the other backend, other parallelisms) with exactly that change and every other line of the job's dump,
the Kryo state's values included.

Cells from tests/production_matrix.py: the checked-in CI cells in CI (each restored on the other backend than its
job's), every cell restored on both HashMap and RocksDB with FLINKSTATE_MATRIX=all.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from fsc_helpers import flink_harness
from production_matrix import CELLS, CI_ROUND_TRIPS, cell_id, snapshot

import flinkstate as fs
from flinkstate.cli import main

pytestmark = [pytest.mark.flink, pytest.mark.slow, pytest.mark.spark]
OPERATORS = ("sessions", "wide", "explicit", "rules", "window", "parse")


def _params() -> list:
    every = os.environ.get("FLINKSTATE_MATRIX") == "all"
    return [pytest.param(c, id=cell_id(c), marks=[] if c in CI_ROUND_TRIPS else [pytest.mark.skipif(
        not every, reason="every cell on demand: FLINKSTATE_MATRIX=all")]) for c in CELLS]


def with_change(dump: list[str]) -> list[str]:
    """The job's dump after the Spark change: explicit/first k5 changed and k999 added, sessions/total of (u3,1) set to 7."""
    out = [line for line in dump if not line.startswith(("explicit first k5 ", "sessions total (u3,1) "))]
    assert len(out) == len(dump) - 2
    return sorted(out + ["explicit first k5 changed", "explicit first k999 new", "sessions total (u3,1) 7"])


@pytest.mark.parametrize("cell", _params())
def test_import_change_export_restore(cell: tuple[str, str, str], spark, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    line, run, _ = cell
    path, dump = snapshot(cell, tmp_path / "cells")
    root = tmp_path / "root"
    # Flink 1.x records operator ids only: name the operators by uid (on 2.x the savepoint names them)
    uids = [a for u in OPERATORS for a in ("--uid", u)] if line.startswith("1.") else []
    if run.startswith("hashmap") and cell[2] != "canonical":
        # HashMap native snapshots do not length-frame Kryo values: that state is left out and named, the others imported
        assert main(["import", str(path), str(root), *uids]) == 0
        assert re.search(r"not imported: sessions/profile: operator sessions, state 'profile'.*Kryo", capsys.readouterr().out)
        sessions = fs.open(str(root)).checkpoint().operator("sessions").keyed_states
        assert "profile" not in sessions and {"last", "recent", "by_mod", "total", "avg"} <= set(sessions)
        return
    assert main(["import", str(path), str(root), *uids]) == 0
    (spark.createDataFrame([("k5", "changed"), ("k999", "new")], "key string, value string").write.format("flinkstate")
     .options(operator="explicit", state="first").mode("append").save(str(root)))
    (spark.createDataFrame([(("u3", 1), 7)], "key struct<f0:string,f1:int>, value long").write.format("flinkstate")
     .options(operator="sessions", state="total").mode("append").save(str(root)))
    store = fs.open(str(root))
    assert store.checkpoint().max_parallelism_of("explicit") == 4096 and store.checkpoint().max_parallelism_of("wide") == 256
    dest = tmp_path / "export"
    assert main(["export", str(root), str(dest), "--flink-version", line]) == 0  # what that release restores
    # the other backend than the job's at other parallelisms (in CI); every cell on demand restores on both
    restores = [("rocksdb", 4, 3), ("hashmap", 3, 5)]
    if os.environ.get("FLINKSTATE_MATRIX") != "all":
        restores = restores[:1] if run.startswith("hashmap") else restores[1:]
    for backend, p, p_wide in restores:
        restored = flink_harness().production_restore(dest, tmp_path / f"restored-{backend}.txt", backend, p, p_wide, version=line)
        assert restored == with_change(dump), backend
