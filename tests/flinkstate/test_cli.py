"""The `flinkstate` command: help, checkpoints, describe, JSON output and error exits."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys

import pyarrow as pa
import pytest

import flinkstate as fs
from flinkstate.cli import main


@pytest.fixture()
def root(job_root: str) -> str:
    store = fs.open(job_root)
    ttl = fs.StateTtlConfig(ttl_ms=3_600_000)
    with store.begin(max_parallelism=128) as w:
        w.put_state("sessions", fs.ValueStateDescriptor(name="count", value_type=pa.int64(), ttl=ttl),
                    pa.table({"key": ["a", "b"], "value": [1, 2], "ttl_timestamp": [0, 0]}))
        w.put_state("sessions", fs.MapStateDescriptor(name="pages", user_key_type=pa.string(), user_value_type=pa.int32()),
                    pa.table({"key": ["a"], "user_key": ["/"], "value": pa.array([3], pa.int32())}))
        w.put_timers("sessions", fs.TimerServiceDescriptor(name="gap"), pa.table({"key": ["a"], "timestamp": [10]}))
        w.put_operator_state("source", fs.OperatorStateDescriptor(name="offsets", value_type=pa.int64()), pa.table({"subtask": pa.array([0], pa.int32()), "value": [42]}))
        w.set_parallelism("sessions", 2)
    with store.begin() as w:
        w.put_state("sessions", fs.ValueStateDescriptor(name="count", value_type=pa.int64(), ttl=ttl),
                    pa.table({"key": ["c"], "value": [3], "ttl_timestamp": [5], "tombstone": [False]}), mode="delta")
    return job_root


def run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    rc = main(list(argv), out=out)
    return rc, out.getvalue()


def test_help_lists_the_commands() -> None:
    r = subprocess.run([sys.executable, "-m", "flinkstate", "--help"], capture_output=True, text=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert r.returncode == 0
    for cmd in ("checkpoints", "describe", "demo"):
        assert cmd in r.stdout


def test_checkpoints_table_and_json(root: str) -> None:
    rc, text = run("checkpoints", root)
    assert rc == 0
    lines = text.splitlines()
    assert lines[0].split()[:3] == ["id", "kind", "status"]
    assert lines[2].split()[:3] == ["1", "checkpoint", "completed"]
    assert lines[3].split()[:3] == ["2", "checkpoint", "completed"]
    rc, text = run("checkpoints", root, "--json")
    doc = json.loads(text)
    assert [c["checkpoint_id"] for c in doc] == [1, 2]
    assert doc[1]["max_parallelism"] == 128 and doc[1]["base_checkpoint_id"] == 1


def test_describe_shows_operators_states_types_ttl_and_sizes(root: str) -> None:
    rc, text = run("describe", root)
    assert rc == 0
    assert "checkpoint 2" in text and "max parallelism 128" in text
    assert "operator sessions (parallelism 2, max parallelism 128)" in text
    count_line = next(l for l in text.splitlines() if l.startswith("count"))
    assert count_line.split()[:4] == ["count", "value", "string", "int64"]
    assert "3600000 ms OnCreateAndWrite" in count_line
    assert "map<string, int32>" in text and "event-time timers" in text and "list operator state" in text
    rc, text = run("describe", root, "--checkpoint", "1", "--json")
    doc = json.loads(text)
    assert doc["checkpoint"]["checkpoint_id"] == 1
    states = {s["name"]: s for op in doc["operators"] for s in op["states"]}
    assert states["count"]["rows"] == 2 and states["count"]["ttl"]["ttl_ms"] == 3_600_000
    assert states["gap"]["type"] == "timers" and states["offsets"]["type"] == "operator"
    doc2 = json.loads(run("describe", root, "--json")[1])
    states2 = {s["name"]: s for op in doc2["operators"] for s in op["states"]}
    assert states2["count"]["deltas"] == 1 and states2["count"]["files"] == 2


def test_errors_exit_2_with_a_message_naming_the_thing(root: str, tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, _ = run("describe", root, "--checkpoint", "9")
    assert rc == 2
    assert "checkpoint 9 is not committed" in capsys.readouterr().err
    rc, _ = run("checkpoints", str(tmp_path / "nothing-here"))
    assert rc == 2
    assert "is not a flinkstate job root" in capsys.readouterr().err


def _cli(*argv: str, **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "flinkstate", *argv], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}, **kw)  # type: ignore[call-overload]


def test_version() -> None:
    r = _cli("--version")
    assert r.returncode == 0 and r.stdout.strip() == f"flinkstate {fs.__version__}"


@pytest.mark.parametrize("argv", [["checkpoints"], ["describe", "--json"]])
def test_output_into_a_closed_pipe_ends_quietly(root: str, argv: list[str]) -> None:
    # `flinkstate ... | head` once head has exited: the reader is gone before anything is written
    p = subprocess.Popen([sys.executable, "-m", "flinkstate", argv[0], root, *argv[1:]], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert p.stdout is not None and p.stderr is not None
    p.stdout.close()
    err = p.stderr.read().decode()
    p.wait(timeout=120)
    p.stderr.close()
    assert err == "", err


def test_rows_columns_count_delta_files_too(root: str) -> None:
    # checkpoint 2 adds key "c" in a delta file only (as a Spark append does)
    rc, text = run("checkpoints", root)
    head = text.splitlines()[0]
    assert "full rows" in head and "delta rows" in head
    cp2 = text.splitlines()[3].split()
    assert cp2[0] == "2" and cp2[-4:-2] == ["5", "1"], text  # 5 full rows over all states
    rc, text = run("describe", root)
    count_line = next(line for line in text.splitlines() if line.startswith("count"))
    assert count_line.split()[-6:-2] == ["2", "1", "2", "1"], count_line
    doc = json.loads(run("describe", root, "--json")[1])
    count = next(s for op in doc["operators"] for s in op["states"] if s["name"] == "count")
    assert (count["rows"], count["delta_rows"]) == (2, 1)
