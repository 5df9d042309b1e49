"""State maintenance: retention from the CLI, compaction and TTL expiry, checked against a model."""

from __future__ import annotations

import io
from typing import Any
import json
import os
import sys

import pyarrow as pa
import pytest

import flinkstate as fs
from flinkstate.cli import main

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))  # tests/: shared helpers
from maintenance_model import TTL_MS, everything, model_rows, rows_of, stored, random_history  # noqa: E402


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


# ------------------------------------------------------------------ items 1, 2: compaction and expiry against a model
@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_compaction_leaves_every_read_unchanged_against_a_model(job_root: str, seed: int) -> None:
    store, m = random_history(job_root, seed)
    for st in ("val", "lst", "map"):
        assert stored(store, st) == model_rows(m, st)  # the history reads as the model says
    before = everything(store, 2_500)
    files_before = len(store.files())
    full_ranges = {(e.key_group_start, e.key_group_end) for e in store.state_files("op", "val") if e.kind == "full"}
    lines: list[str] = []
    res = store.compact(progress=lines.append)
    # one full file per range of the full files before: the key-group layout (Flink's subtask ranges) is kept
    assert {(e.key_group_start, e.key_group_end) for e in store.state_files("op", "val")} == full_ranges
    files_after = len(store.files())
    print(f"seed {seed}: files {files_before} -> {files_after}")
    assert everything(store, 2_500) == before
    for st in ("val", "lst", "map"):
        assert stored(store, st) == model_rows(m, st)
    deltas = [e for e in store.files() if e.kind in ("delta", "timers-delta")]
    assert deltas == [] and files_after <= files_before
    if res.checkpoint_id is not None:  # a history with deltas: they are gone, fewer files
        assert files_after < files_before and res.files_before == files_before and res.files_after == files_after
        assert any(line.startswith("compact op/val (keyed):") and "files" in line for line in lines)
        # the earlier checkpoints read as before (nothing of theirs was touched)
        prev = store.read_state("op", "val", res.base_checkpoint_id, raw=True)
        assert rows_of(prev) == before["val/raw"]
    assert store.compact().checkpoint_id is None  # nothing left to compact: no checkpoint


@pytest.mark.parametrize("seed", [5, 6, 7])
def test_expiry_drops_exactly_the_expired_entries_against_a_model(job_root: str, seed: int) -> None:
    store, m = random_history(job_root, seed)
    at = 3_000
    plain, timers = store.read_state("op", "plain", raw=True), store.read_timers("op", "tim")
    res = store.expire(at=at)
    for st in ("val", "lst", "map"):
        assert stored(store, st) == model_rows(m, st, at)
    want = {"op/val": sum(1 for _, ts in m.val.values() if ts + TTL_MS <= at),
            "op/lst": sum(1 for els in m.lst.values() for _, ts in els if ts + TTL_MS <= at),
            "op2/map": sum(1 for _, ts in m.map.values() if ts + TTL_MS <= at)}
    assert res.dropped == want
    assert store.read_state("op", "plain", raw=True).equals(plain)  # no TTL: untouched
    assert store.read_timers("op", "tim").equals(timers)
    # what a reader at `at` sees is what it saw before
    assert rows_of(store.read_state("op", "val", ttl_reference=at)) == rows_of(store.read_state("op", "val", res.base_checkpoint_id, ttl_reference=at))
    again = store.expire(at=at)
    assert again.checkpoint_id is None and set(again.dropped.values()) == {0}


def test_expire_one_state_and_typed_errors(job_root: str) -> None:
    store, m = random_history(job_root, 9, checkpoints=3)
    res = store.expire("op", "val", at=10_000)
    assert res.dropped == {"op/val": len(m.val)} and store.read_state("op", "val", raw=True).num_rows == 0
    assert stored(store, "lst") == model_rows(m, "lst")
    latest = store.latest_checkpoint_id()
    with pytest.raises(fs.InvalidArgumentError, match="'plain' of operator 'op' has no TTL"):
        store.expire("op", "plain")
    with pytest.raises(fs.StateNotFoundError, match="'nope'"):
        store.compact("op", "nope")
    with pytest.raises(fs.OperatorNotFoundError, match="'ghost'"):
        store.expire("ghost")
    with pytest.raises(fs.InvalidArgumentError, match="at must be"):
        store.expire(at=-1)
    with pytest.raises(fs.CheckpointNotFoundError):
        fs.open(job_root + "-empty").compact()
    assert store.latest_checkpoint_id() == latest  # refused runs wrote nothing


def test_cli_compact_and_expire_print_one_line_per_state(job_root: str, capsys: pytest.CaptureFixture[str]) -> None:
    store, m = random_history(job_root, 2)
    before = everything(store, 2_500)
    files_before = len(store.files())
    capsys.readouterr()
    rc, out = run("compact", job_root, "--operator", "op", "--state", "val")
    err = capsys.readouterr().err
    assert rc == 0 and f"files {files_before} -> " in out and "checkpoint" in out
    lines = err.strip().splitlines()
    assert lines[0].startswith("compact: checkpoint") and "key-group ranges of 1 states" in lines[0]
    assert lines[1].startswith("compact op/val (keyed): ") and "ranges rewritten" in lines[1] and "rows, files " in lines[1]
    assert everything(store, 2_500) == before
    assert not [e for e in store.state_files("op", "val") if e.kind == "delta"]
    assert [e for e in store.state_files("op", "lst") if e.kind == "delta"]  # only the state asked for
    rc, out = run("compact", job_root, "--json")
    doc = json.loads(out)
    assert rc == 0 and doc["files_after"] == len(store.files()) < doc["files_before"]
    assert {s["state"] for s in doc["steps"]} == {"val", "lst", "map", "plain", "tim"}
    assert everything(store, 2_500) == before
    capsys.readouterr()
    rc, out = run("expire", job_root, "--at", "3000")
    err = capsys.readouterr().err
    assert rc == 0
    want = sum(1 for _, ts in m.val.values() if ts + TTL_MS <= 3000)
    assert any(line.split() == ["op/val", str(want)] for line in out.splitlines())
    assert sum(1 for line in err.splitlines() if line.startswith("expire op")) == 3 and "expire op2/map (keyed)" in err
    assert stored(store, "val") == model_rows(m, "val", 3000)
    rc, _ = run("expire", job_root, "--state", "plain")
    assert rc == 2 and "has no TTL" in capsys.readouterr().err


def test_a_checkpoint_committed_meanwhile_wins_and_nothing_is_lost(job_root: str) -> None:
    """Compaction commits against the log version it planned on: a checkpoint completed while its ranges were
    being rewritten makes it fail with CommitConflictError, deleting its files; the other checkpoint stays intact."""
    from flinkstate.store.maintenance import run_local

    store, m = random_history(job_root, 3, checkpoints=4)
    written: list[str] = []

    def run_while_a_job_checkpoints(jobs: list[Any]) -> list[Any]:
        results = run_local(jobs)
        written.extend(e.path for r in results for e in r.entries)
        with store.begin() as w:  # the job's own next checkpoint completes first
            w.put_state("op", fs.ValueStateDescriptor(name="plain", key_type=pa.string(), value_type=pa.int64()),
                        pa.table({"key": ["late"], "value": pa.array([1], pa.int64()), "tombstone": [False]}), mode="delta")
        return results

    latest = store.latest_checkpoint_id()
    with pytest.raises(fs.CommitConflictError, match=f"checkpoint {latest + 1}"):
        store.compact(run=run_while_a_job_checkpoints)
    assert store.latest_checkpoint_id() == latest + 1
    assert "late" in store.read_state("op", "plain").column("key").to_pylist()
    assert stored(store, "val") == model_rows(m, "val")
    assert written and not any(os.path.exists(os.path.join(job_root, p)) for p in written)
