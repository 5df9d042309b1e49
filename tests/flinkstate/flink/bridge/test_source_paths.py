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
from flinkstate.flink.bridge.source import FlinkSource

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
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


def _absolutize(meta_path: Path, folder: str) -> None:
    """Rewrite a `_metadata`'s relative file handles as absolute FileStateHandles under folder (as older Flink writes them).

    RelativeFileStateHandle is `6, utf(name), i64 size`; FileStateHandle is `2, i64 size, utf(path)`
    (MetadataV2V3SerializerBase). The names are UUIDs, so each is found exactly once.
    """
    import struct

    from flinkstate.flink.meta.metadata import read_metadata

    data = meta_path.read_bytes()
    meta = read_metadata(str(meta_path))
    rel = {(s.stream.path, s.stream.size) for op in meta.operators for sub in op.subtasks
           for s in (sub.managed_keyed, sub.managed_operator) if s is not None and s.stream.kind == "relative"}
    assert rel
    for name, size in rel:
        old = b"\x06" + struct.pack(">H", len(name)) + name.encode() + struct.pack(">q", size)
        path = f"file:{folder}/{name}".encode()
        assert data.count(old) == 1
        data = data.replace(old, b"\x02" + struct.pack(">q", size) + struct.pack(">H", len(path)) + path)
    meta_path.write_bytes(data)


def _warnings(caplog: pytest.LogCaptureFixture, path: Path) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.levelno >= logging.WARNING and "copied" in r.getMessage() and r.getMessage().startswith(str(path))]


def test_copied_rocksdb_job_folder_resolves_shared_files_and_says_so_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    copy = tmp_path / "elsewhere" / "job-copy"
    shutil.copytree(ROCKS_JOB, copy)
    caplog.set_level(logging.INFO)
    src = fs.open(str(copy))
    assert [c.checkpoint_id for c in src.checkpoints()] == [2, 3]
    rows = _rows(src, 3)
    assert rows == _rows(fs.open(str(ROCKS_JOB)), 3)
    described = src.describe(3)["relocated"]
    assert list(described.values()) == [str(copy / "shared")] and all(k.endswith("/shared") for k in described)
    assert len(_warnings(caplog, copy)) == 1 and str(copy / "shared") in _warnings(caplog, copy)[0]  # one message for the whole open
    caplog.clear()
    again = fs.open(str(copy))
    again.read_state("long-keyed", "count")
    assert len(_warnings(caplog, copy)) == 1  # each open says it once


def test_copied_heap_checkpoint_with_absolute_paths_reads_from_its_chk_folder(tmp_path: Path,
                                                                              caplog: pytest.LogCaptureFixture) -> None:
    want = _rows(fs.open(str(HEAP_JOB)))
    copy = tmp_path / "copied-job"
    shutil.copytree(HEAP_JOB, copy)
    assert _rows(fs.open(str(copy))) == want  # relative handles (Flink 2.x): nothing to resolve
    _absolutize(copy / "chk-3" / "_metadata", "/flink/gone/checkpoints/4f2a/chk-3")
    caplog.set_level(logging.INFO)
    src = fs.open(str(copy))
    assert _rows(src) == want
    assert src.describe()["relocated"] == {"/flink/gone/checkpoints/4f2a/chk-3": str(copy / "chk-3")}
    assert len(_warnings(caplog, copy)) == 1
    single = fs.open(str(copy / "chk-3"))  # the chk-N folder alone, too
    assert _rows(single) == want


def test_missing_state_file_of_a_copied_checkpoint_names_the_handle(tmp_path: Path) -> None:
    copy = tmp_path / "job"
    shutil.copytree(HEAP_JOB, copy)
    _absolutize(copy / "chk-3" / "_metadata", "/flink/gone/chk-3")
    victim = next(p for p in (copy / "chk-3").iterdir() if p.name != "_metadata")
    victim.unlink()
    from flinkstate.core.errors import CorruptFileError

    src = fs.open(str(copy))
    ck = src.checkpoint()  # opens: the operator whose file is gone is the one refused, named with the file
    ((op, err),) = ck.broken.items()
    assert isinstance(err, CorruptFileError) and victim.name in str(err)
    with pytest.raises(CorruptFileError, match=f"handle '{victim.name}'|{victim.name}"):
        src.read_state(op, "any")  # a state of that operator: why it cannot be read, not "no such state"
    for other in set(KEYED_OPERATORS) - {op}:  # every other operator reads
        for name in ck.operator(other).keyed_states:
            src.read_state(other, name)
