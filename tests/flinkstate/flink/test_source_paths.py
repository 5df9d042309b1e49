"""Flink savepoints and checkpoints at s3:// and memory:// URLs, and copied away from where Flink wrote them."""

from __future__ import annotations

import logging
import os
import shutil
import uuid
from pathlib import Path
from typing import Any

import pytest
from flink_dump import KEYED_OPERATORS, OPERATOR_STATES

import flinkstate as fs
from flinkstate.flink.source import FlinkSource

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
CANONICAL = FIXTURES / "flink-2.3-canonical" / "files" / "savepoint"
ROCKS_SP = FIXTURES / "flink-2.3-rocksdb" / "rocksdb" / "savepoint"
ROCKS_JOB = FIXTURES / "flink-2.3-rocksdb" / "rocksdb-checkpoint" / "checkpoint"
HEAP_JOB = FIXTURES / "flink-2.3-native" / "checkpoint" / "checkpoint"


def _norm(v: Any) -> Any:
    if isinstance(v, dict):
        return tuple(sorted((k, _norm(x)) for k, x in v.items()))
    if isinstance(v, list):
        return tuple(_norm(x) for x in v)
    return v.hex() if isinstance(v, bytes) else v


def _rows(src: Any, checkpoint_id: int | None = None) -> dict[str, list]:
    """Every keyed state, timer service and operator state of the generated job, as sorted rows."""
    out: dict[str, list] = {}
    ck = src.checkpoint(checkpoint_id)
    for uid in KEYED_OPERATORS:
        om = ck.operator(uid)
        for name in om.keyed_states:
            t = src.read_state(uid, name, include_expired=True, ttl_reference=0, checkpoint_id=checkpoint_id)
            out[f"{uid}/{name}"] = sorted((tuple(_norm(v) for v in r.values()) for r in t.to_pylist()), key=repr)
        for name in om.timer_services:
            t = src.read_timers(uid, name, checkpoint_id=checkpoint_id)
            out[f"{uid}/timers/{name}"] = sorted((tuple(_norm(v) for v in r.values()) for r in t.to_pylist()), key=repr)
    for uid, names in OPERATOR_STATES.items():
        for name in names:
            t = src.read_operator_state(uid, name, checkpoint_id=checkpoint_id)
            out[f"{uid}/op/{name}"] = sorted((tuple(_norm(v) for v in r.values()) for r in t.to_pylist()), key=repr)
    assert any(out.values())
    return out


def _upload(client: Any, bucket: str, local: Path, prefix: str) -> None:
    for dirpath, _, names in os.walk(local):
        for n in names:
            p = os.path.join(dirpath, n)
            client.upload_file(p, bucket, f"{prefix}/{os.path.relpath(p, local)}")


def _to_memory(local: Path, url: str) -> None:
    import fsspec

    mem = fsspec.filesystem("memory")
    for dirpath, _, names in os.walk(local):
        for n in names:
            p = os.path.join(dirpath, n)
            with open(p, "rb") as f:
                mem.pipe(f"{url}/{os.path.relpath(p, local)}", f.read())


@pytest.mark.s3
@pytest.mark.parametrize("fixture", [CANONICAL, ROCKS_SP], ids=["canonical", "rocksdb-native"])
def test_s3_savepoint_reads_the_same_rows_as_the_local_copy(s3: dict[str, Any], fixture: Path) -> None:
    _upload(s3["client"], s3["bucket"], fixture, "sp")
    src = fs.open(f"s3://{s3['bucket']}/sp", s3["storage_options"])
    assert isinstance(src, FlinkSource)
    assert _rows(src) == _rows(fs.open(str(fixture)))
    assert src.files.bytes_read > 0  # the files came through FileIO
    assert src.describe()["path"] == f"s3://{s3['bucket']}/sp/_metadata"


@pytest.mark.s3
def test_s3_job_folder_lists_its_checkpoints_and_reads_each(s3: dict[str, Any]) -> None:
    _upload(s3["client"], s3["bucket"], ROCKS_JOB, "job")
    src = fs.open(f"s3a://{s3['bucket']}/job/", s3["storage_options"])
    local = fs.open(str(ROCKS_JOB))
    assert [c.checkpoint_id for c in src.checkpoints()] == [c.checkpoint_id for c in local.checkpoints()] == [2, 3]
    assert _rows(src, 3) == _rows(local, 3)  # chk-2 is checked in without its operator-state files


def test_memory_savepoint_and_job_folder() -> None:
    base = f"memory://flink-{uuid.uuid4().hex[:8]}"
    _to_memory(CANONICAL, f"{base}/sp")
    _to_memory(HEAP_JOB, f"{base}/job")
    assert _rows(fs.open(f"{base}/sp")) == _rows(fs.open(str(CANONICAL)))
    src = fs.open(f"{base}/job")
    assert isinstance(src, FlinkSource)
    assert _rows(src) == _rows(fs.open(str(HEAP_JOB)))
    assert fs.open(f"{base}/sp/_metadata").checkpoint().checkpoint_id == fs.open(str(CANONICAL)).checkpoint().checkpoint_id
