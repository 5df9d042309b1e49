"""`flinkstate demo` end to end, as a user runs it: the job, then Spark SQL over its checkpoints."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import flinkstate as fs


@pytest.mark.slow
@pytest.mark.spark
def test_demo_runs_the_job_and_answers_with_spark_sql(tmp_path: Path) -> None:
    pytest.importorskip("pyspark")
    path = tmp_path / "demo"
    # its own process: the demo starts (and stops) its own SparkSession
    r = subprocess.run(
        [sys.executable, "-m", "flinkstate", "demo", "--path", str(path)],
        capture_output=True, text=True, timeout=600, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert r.returncode == 0, r.stderr[-3000:]
    out = r.stdout
    assert "phase 1: 4 subtasks" in out and "phase 2: restore checkpoint" in out
    assert "SQL over checkpoint" in out and "spark.read.format('flinkstate')" in out
    for title in ("open sessions per country", "keys with a timer due", "state size per checkpoint",
                  "users with the most finished sessions", "what changed in the open sessions"):
        assert f"-- {title}" in out
    store = fs.open(path)
    latest = store.checkpoints()[-1]
    assert f"SQL over checkpoint {latest.checkpoint_id} " in out
    assert store.metadata().operators["sessions"].parallelism == 3
    # the answer to the first question, recomputed with the library
    sessions = store.read_state("sessions", "session").column("value").to_pylist()
    assert str(len([s for s in sessions if s is not None])) in out
