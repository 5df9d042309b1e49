"""`flinkstate demo` end to end, as a user runs it: the job, then Spark SQL over its checkpoints."""

from __future__ import annotations

import io
import os
import re
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
    assert "phase 1: 4 subtasks" in out and "phase 2: a simulated failure stops the job" in out
    # no long silence: Spark's start and every query say what they are doing and how long it took
    assert re.search(r"Spark \S+ started in \d+ s", out) and len(re.findall(r"\n  \(\d+\.\d s\)\n", out)) == 5
    assert "SQL over checkpoint" in out and "spark.read.format('flinkstate')" in out
    for title in ("open sessions per country", "keys with a timer due", "state size per checkpoint",
                  "users with the most finished sessions", "what changed in the open sessions"):
        assert f"-- {title}" in out
    store = fs.open(path)
    latest = store.checkpoints()[-1]
    assert f"SQL over checkpoint {latest.checkpoint_id} " in out
    assert store.metadata().operators["sessions"].parallelism == 3
    # the answer to the first question, recomputed with the library
    sessions = store.read_state("sessions", "session", raw=True).column("value").to_pylist()  # the demo clock is not wall time
    assert str(len([s for s in sessions if s is not None])) in out


def _demo(path: Path, **kw: object) -> str:
    from flinkstate.demo import run_demo

    out = io.StringIO()
    assert run_demo(str(path), out=out, events=14_000, users=300, **kw) == 0  # type: ignore[arg-type]
    return out.getvalue()


@pytest.fixture(scope="module")
def small_demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """One small demo run without Spark: its root and what it printed."""
    path = tmp_path_factory.mktemp("demo") / "root"
    return path, _demo(path, sql=False)


def test_demo_refuses_a_non_empty_folder_it_did_not_create(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from flinkstate.cli import main

    (tmp_path / "_flinkstate").mkdir()
    (tmp_path / "notes.txt").write_text("mine")
    assert main(["demo", "--path", str(tmp_path), "--no-sql"], out=io.StringIO()) == 2
    err = capsys.readouterr().err
    assert "InvalidArgumentError" in err and str(tmp_path) in err and "not a demo root" in err
    assert (tmp_path / "notes.txt").read_text() == "mine" and (tmp_path / "_flinkstate").is_dir()
    r = subprocess.run([sys.executable, "-m", "flinkstate", "demo", "--help"], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert "non-empty folder is refused" in " ".join(r.stdout.split())


def test_demo_answers_name_retention_failure_utc_times_and_a_real_change(small_demo: tuple[Path, str]) -> None:
    path, out = small_demo
    store = fs.open(path)
    kept = [c.checkpoint_id for c in store.checkpoints()]
    gone = [c.checkpoint_id for c in store.checkpoints(include_discarded=True) if c.checkpoint_id not in kept]
    if gone:  # how many checkpoints a run takes depends on the machine's speed (one at a time)
        span = f"{gone[0]}–{gone[-1]}" if len(gone) > 1 else f"{gone[0]}"
        assert f"checkpoints {span} were discarded by retention (the job keeps its latest 5)" in out
    else:
        assert "discarded by retention" not in out
    assert "simulated failure" in out and " UTC" in out
    assert not re.search(r"\b1\d{12}\b", out), "raw epoch ms in the output"
    section = out.split("-- what changed in the open sessions between checkpoints ")[1].split("\n\n")[0]
    header, rule, *rows = section.splitlines()[1:]
    assert header.split() == ["change_type", "entries"] and rows and int(rows[0].split()[1]) > 0, section
    # every answer prints its header, then a rule and rows or "(no rows)", never blank lines
    for answer in out.split("\n-- ")[1:]:
        lines = answer.split("\n\n")[0].splitlines()
        assert len(lines) >= 3 and lines[1].strip() and (set(lines[2].replace(" ", "")) == {"-"} or lines[2].strip() == "(no rows)"), answer


def test_demo_rerun_replaces_only_what_the_demo_wrote(small_demo: tuple[Path, str]) -> None:
    path, _ = small_demo
    (path / "notes.txt").write_text("mine")
    out = _demo(path, sql=False)
    assert "removing the previous demo's checkpoints" in out
    assert (path / "notes.txt").read_text() == "mine"
    assert sorted(p.name for p in path.iterdir()) == [".flinkstate-demo", "_flinkstate", "notes.txt", "shared"]


def test_demo_without_java_says_so_in_one_line_and_still_answers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("pyspark")
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-java"))
    out = _demo(tmp_path / "root", sql=True)
    skipped = [line for line in out.splitlines() if "Java" in line]
    assert len(skipped) == 1 and "no Java found" in skipped[0] and "Java 17" in skipped[0], out
    assert "-- open sessions per country" in out and "-- users with the most finished sessions" in out
    assert "Traceback" not in out
