"""State maintenance: retention from the CLI, compaction and TTL expiry, checked against a model."""

from __future__ import annotations

import io
import json
import os

import pyarrow as pa
import pytest

import flinkstate as fs
from flinkstate.cli import main


def run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    rc = main(list(argv), out=out)
    return rc, out.getvalue()


COUNT = fs.ValueStateDescriptor(name="count", key_type=pa.string(), value_type=pa.int64())


def _history(root: str, n: int, *, full: bool = False) -> fs.CheckpointStore:
    """n checkpoints: a full put, then one delta per checkpoint (each adds a file), or a full put each (`full`)."""
    store = fs.open(root)
    with store.begin(max_parallelism=8) as w:
        w.put_state("op", COUNT, pa.table({"key": [f"k{i}" for i in range(20)], "value": pa.array(range(20), pa.int64())}), ranges=[(0, 7)])
    for c in range(1, n):
        with store.begin() as w:
            if full:
                w.put_state("op", COUNT, pa.table({"key": [f"k{i}" for i in range(20)], "value": pa.array([c] * 20, pa.int64())}))
                continue
            w.put_state("op", COUNT, pa.table({"key": [f"k{c}"], "value": pa.array([100 + c], pa.int64()), "tombstone": [False]}),
                        mode="delta")
    return store


# ------------------------------------------------------------------ item 3: retain / discard from the CLI
def test_cli_retain_prints_what_the_registry_deleted(job_root: str) -> None:
    store = _history(job_root, 5, full=True)
    all_files = {e.path for c in store.checkpoints() for e in store.files(c.checkpoint_id)}
    rc, out = run("retain", job_root, "2", "--json")
    assert rc == 0
    doc = json.loads(out)
    assert doc["discarded"] == [1, 2, 3]
    assert [c.checkpoint_id for c in store.checkpoints()] == [4, 5]
    live = {e.path for c in store.checkpoints() for e in store.files(c.checkpoint_id)}
    gone = all_files - live
    assert gone and gone <= set(doc["paths"]) and doc["deleted"] == len(doc["paths"])
    assert doc["bytes"] > 0
    assert not any(os.path.exists(os.path.join(job_root, p)) for p in doc["paths"])
    assert all(os.path.exists(os.path.join(job_root, p)) for p in live)
    rc, out = run("retain", job_root, "1", "--verbose")
    assert rc == 0 and "discarded checkpoints [4]" in out and "deleted" in out
    assert [c.checkpoint_id for c in store.checkpoints()] == [5]
    assert store.read_state("op", "count").num_rows == 20


def test_cli_discard_by_id_and_typed_errors(job_root: str, capsys: pytest.CaptureFixture[str]) -> None:
    store = _history(job_root, 3, full=True)
    rc, out = run("discard", job_root, "1", "2", "-v")
    assert rc == 0 and "discarded checkpoints [1, 2]" in out
    assert "shared/op/count/" in out  # the paths of the deleted files
    assert [c.checkpoint_id for c in store.checkpoints()] == [3]
    capsys.readouterr()
    rc, _ = run("discard", job_root, "7")
    err = capsys.readouterr().err
    assert rc == 2 and "CheckpointNotFoundError" in err and "checkpoint 7" in err and "[3]" in err
    rc, _ = run("retain", job_root, "0")
    err = capsys.readouterr().err
    assert rc == 2 and "InvalidArgumentError" in err and "N must be >= 1" in err
    assert [c.checkpoint_id for c in store.checkpoints()] == [3]  # nothing changed by the refused commands
    rc, _ = run("retain", os.path.join(job_root, "nothing-here"), "1")
    assert rc == 2 and "CheckpointNotFoundError" in capsys.readouterr().err
