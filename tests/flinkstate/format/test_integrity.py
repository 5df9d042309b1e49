"""Damage suite: a damaged or missing part is named in a typed error and nothing is deleted or overwritten.

Every scenario runs on a local root and on s3:// (a moto server); each damages a real store
the way object stores, partial copies and operators' mistakes do, then checks that reads,
writes and garbage collection refuse with a typed error naming the culprit, and that no
file of the store was deleted or changed.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import io
import json
import os
import re
import subprocess
import uuid
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest
from deltalake import CommitProperties, DeltaTable, write_deltalake
from deltalake.exceptions import CommitFailedError

import flinkstate as fs
from flinkstate.format import constants as C

COUNT = fs.ValueStateDescriptor(name="count", value_type=pa.int64())
GAP = fs.TimerServiceDescriptor(name="gap")


def _open(where: dict[str, Any]) -> fs.CheckpointStore:
    return fs.open(where["root"], where["storage_options"])


@pytest.fixture()
def store(where: dict[str, Any]) -> fs.CheckpointStore:
    """Checkpoint 1 (full state + timers), checkpoint 2 (a delta on top)."""
    s = _open(where)
    with s.begin(max_parallelism=32) as w:
        w.put_state("sessions", COUNT, pa.table({"key": ["a", "b"], "value": [1, 2]}))
        w.put_timers("sessions", GAP, pa.table({"key": ["a"], "timestamp": [5]}))
    with s.begin() as w:
        w.put_state("sessions", COUNT, pa.table({"key": ["c"], "value": [3], "tombstone": [False]}), mode="delta")
    return s


def _fs(store: fs.CheckpointStore) -> Any:
    return store.io.fs


def files_of(store: fs.CheckpointStore) -> dict[str, str]:
    """Every file below the root (relative path -> sha256 of its bytes)."""
    fsys, base = _fs(store), store.io.fs_path("x")[:-1]
    if store.io.scheme == "s3":
        fsys.invalidate_cache()
        base = base[len("s3://"):]
    out = {}
    for p in fsys.find(base):
        out[str(p)[len(base):]] = hashlib.sha256(fsys.cat_file(p)).hexdigest()
    return out


def remove(store: fs.CheckpointStore, rel: str) -> None:
    """Delete a file or a whole folder below the root (the damage)."""
    _fs(store).rm(store.io.fs_path(rel), recursive=True)
    if store.io.scheme == "s3":
        _fs(store).invalidate_cache()


def write(store: fs.CheckpointStore, rel: str, data: bytes) -> None:
    """Overwrite a file below the root (the damage)."""
    with store.io.open(rel, "wb") as f:
        f.write(data)


def log_commits(store: fs.CheckpointStore) -> list[str]:
    return sorted(p for p in store.io.list_files(C.LOG_TABLE + "/_delta_log") if p.endswith(".json"))


@pytest.fixture()
def unchanged(store: fs.CheckpointStore) -> Iterator[Any]:
    """Call it after damaging the store: the test then checks no file was deleted or changed."""
    holder: dict[str, Any] = {}

    def mark() -> None:
        holder["before"] = files_of(store)

    yield mark
    if "before" in holder:
        after = files_of(store)
        lost = {p for p in holder["before"] if p not in after}
        changed = {p for p in holder["before"] if p in after and after[p] != holder["before"][p]}
        assert not lost, f"files deleted: {sorted(lost)}"
        assert not changed, f"files changed: {sorted(changed)}"


def refuses_everything(store: fs.CheckpointStore, err: type[Exception], culprit: str) -> None:
    """Writes and GC (and a fresh handle's writes and GC) refuse with `err` naming `culprit`."""
    for s in (store, fs.open(store.root, store.io.storage_options or None)):
        with pytest.raises(err, match=culprit):
            with s.begin() as w:
                w.put_state("sessions", COUNT, pa.table({"key": ["z"], "value": [9]}))
        with pytest.raises(err, match=culprit):
            s.retain(1)


# ---------------------------------------------------------------------- 1. log missing


def test_deleted_log_is_not_an_empty_root(store: fs.CheckpointStore, unchanged: Any) -> None:
    remove(store, C.LOG_TABLE + "/_delta_log")
    unchanged()
    with pytest.raises(fs.CorruptFileError, match=r"_flinkstate/log/_delta_log.*missing"):
        store.checkpoints()
    refuses_everything(store, fs.CorruptFileError, r"_flinkstate/log/_delta_log.*missing")


def test_cli_names_a_deleted_log_in_one_line(store: fs.CheckpointStore, capsys: pytest.CaptureFixture[str]) -> None:
    from flinkstate.cli import main

    remove(store, C.LOG_TABLE + "/_delta_log")
    opts = [f"--storage-option={k}={v}" for k, v in (store.io.storage_options or {}).items()]
    assert main(["checkpoints", store.root, *opts], out=io.StringIO()) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and re.search(r"CorruptFileError: .*_flinkstate/log/_delta_log is missing", err), err


def test_deleted_log_folder_is_not_an_empty_root(store: fs.CheckpointStore, unchanged: Any) -> None:
    remove(store, C.LOG_TABLE)
    unchanged()
    refuses_everything(store, fs.CorruptFileError, r"_flinkstate/log.*missing")


def test_an_empty_root_and_a_fresh_root_still_work(where: dict[str, Any]) -> None:
    s = _open(where)
    assert s.checkpoints() == []
    assert s.retain(1) == [] if s.catalog.exists() else True
    with s.begin(max_parallelism=8) as w:
        w.put_state("sessions", COUNT, pa.table({"key": ["a"], "value": [1]}))
    assert [c.checkpoint_id for c in _open(where).checkpoints()] == [1]


# ---------------------------------------------------------------------- 2. manifest missing


def test_deleted_manifest_is_not_recreated(store: fs.CheckpointStore, unchanged: Any) -> None:
    remove(store, C.MANIFEST_TABLE)
    unchanged()
    refuses_everything(store, fs.CorruptFileError, r"_flinkstate/manifest.*missing")
    assert [c.checkpoint_id for c in store.checkpoints()] == [1, 2]


def test_deleted_manifest_delta_log_is_not_recreated(store: fs.CheckpointStore, unchanged: Any) -> None:
    remove(store, C.MANIFEST_TABLE + "/_delta_log")
    unchanged()
    refuses_everything(store, fs.CorruptFileError, r"_flinkstate/manifest.*missing")


# ---------------------------------------------------------------------- 3. zero-byte commit


@pytest.mark.parametrize("table", [C.LOG_TABLE, C.MANIFEST_TABLE])
def test_zero_byte_latest_commit_is_named_not_skipped(store: fs.CheckpointStore, unchanged: Any, table: str) -> None:
    latest = sorted(p for p in store.io.list_files(table + "/_delta_log") if p.endswith(".json"))[-1]
    write(store, latest, b"")
    unchanged()
    culprit = re.escape(store.io.url(latest)) + r".*(empty|zero)"
    if table == C.LOG_TABLE:
        with pytest.raises(fs.CorruptFileError, match=culprit):
            store.checkpoints()
        with pytest.raises(fs.CorruptFileError, match=culprit):
            fs.open(store.root, store.io.storage_options or None).latest_checkpoint_id()
    else:
        with pytest.raises(fs.CorruptFileError, match=culprit):
            store.read_state("sessions", "count")
    refuses_everything(store, fs.CorruptFileError, culprit)


# ---------------------------------------------------------------------- 10. bad store paths


def test_store_path_that_is_a_regular_file_is_refused(where: dict[str, Any]) -> None:
    s = _open(where)
    with s.io.fs.open(s.io.fs_path("x")[:-2], "wb") as f:  # the root itself becomes a file
        f.write(b"not a folder")
    for call in (lambda: _open(where).checkpoints(), lambda: _open(where).begin()):
        with pytest.raises(fs.InvalidArgumentError, match=where["root"].rsplit("/", 1)[1] + " is a regular file"):
            call()


def test_store_path_with_nul_is_refused(where: dict[str, Any]) -> None:
    with pytest.raises(fs.InvalidArgumentError, match="NUL"):
        fs.open(where["root"] + "\0x", where["storage_options"]).checkpoints()


# ---------------------------------------------------------------------- 4. GC refuses on partial metadata


def manifest_commits(store: fs.CheckpointStore) -> list[str]:
    return sorted(p for p in store.io.list_files(C.MANIFEST_TABLE + "/_delta_log") if p.endswith(".json"))


def test_gc_refuses_when_the_manifest_lost_a_retained_checkpoints_rows(store: fs.CheckpointStore, unchanged: Any) -> None:
    remove(store, manifest_commits(store)[-1])  # the manifest rolls back to before checkpoint 2
    unchanged()
    with pytest.raises(fs.CorruptFileError, match=r"garbage collection refused.*checkpoint 2: the log records \d+ files.*manifest"):
        store.retain(1)
    with pytest.raises(fs.CorruptFileError, match=r"garbage collection refused"):
        store.discard([1])
    assert [c.checkpoint_id for c in store.checkpoints()] == [1, 2]


def test_gc_refuses_when_a_manifest_data_file_is_gone(store: fs.CheckpointStore, unchanged: Any) -> None:
    part = next(p for p in store.io.list_files(C.MANIFEST_TABLE) if p.endswith(".parquet"))
    store.checkpoints(), store.files(1)  # this process has read (and cached) it
    remove(store, part)
    unchanged()
    with pytest.raises(fs.CorruptFileError, match=r"garbage collection refused.*" + part.rsplit("/", 1)[1]):
        store.retain(1)
    with pytest.raises(fs.CorruptFileError, match=r"garbage collection refused"):
        fs.open(store.root, store.io.storage_options or None).retain(1)


def test_gc_refuses_when_the_log_lost_a_data_file(store: fs.CheckpointStore, unchanged: Any) -> None:
    part = next(p for p in store.io.list_files(C.LOG_TABLE) if p.endswith(".parquet"))
    store.checkpoints()
    remove(store, part)
    unchanged()
    with pytest.raises(fs.CorruptFileError, match=r"(garbage collection refused|is damaged).*" + part.rsplit("/", 1)[1]):
        store.retain(1)


def test_gc_keeps_every_file_retained_checkpoints_and_savepoints_use(store: fs.CheckpointStore) -> None:
    with store.begin(kind="savepoint") as w:
        w.put_state("sessions", COUNT, pa.table({"key": ["d"], "value": [4], "tombstone": [False]}), mode="delta")
    with store.begin() as w:
        w.put_state("sessions", COUNT, pa.table({"key": ["e"], "value": [5], "tombstone": [False]}), mode="delta")
    before = [(c.checkpoint_id, store.read_state("sessions", "count", c.checkpoint_id).to_pylist()) for c in store.checkpoints() if c.checkpoint_id >= 3]
    deleted = store.retain(1)
    used = {e.path for c in store.checkpoints() for e in store.files(c.checkpoint_id)}
    assert used and not used & set(deleted)
    assert all(store.io.exists(p) for p in used)
    assert [(c.checkpoint_id, store.read_state("sessions", "count", c.checkpoint_id).to_pylist()) for c in store.checkpoints()] == before


# ---------------------------------------------------------------------- 5. carried-over files checked before commit


@pytest.mark.parametrize("damage", ["deleted", "truncated"])
@pytest.mark.parametrize("kind", ["checkpoint", "savepoint"])
def test_commit_on_a_base_with_a_damaged_file_is_refused(store: fs.CheckpointStore, unchanged: Any, damage: str, kind: str) -> None:
    victim = next(e for e in store.files() if e.kind == "timers-full")
    if damage == "deleted":
        remove(store, victim.path)
    else:
        with store.io.open(victim.path) as f:
            data = f.read()
        write(store, victim.path, data[: len(data) // 2])
    unchanged()
    with pytest.raises(fs.CorruptFileError, match=r"checkpoint 3 would carry over .*" + victim.path.rsplit("/", 1)[1]
                       + r".*(missing|bytes, recorded \d+)"):
        with store.begin(kind=kind) as w:  # the damaged file belongs to a state this checkpoint does not touch
            w.put_state("sessions", COUNT, pa.table({"key": ["z"], "value": [9], "tombstone": [False]}), mode="delta")
    assert [c.checkpoint_id for c in store.checkpoints()] == [1, 2]


# ---------------------------------------------------------------------- 9. read-only store


@contextlib.contextmanager
def read_only(where: dict[str, Any], store: fs.CheckpointStore) -> Iterator[dict[str, Any] | None]:
    """Make the store really read-only; yields the storage options a reader opens it with.

    Local: the folder tree becomes immutable (`chattr +i`, which stops root too; plain
    `chmod a-w` when not root). S3: moto enforces IAM, and the reader's key only has a
    policy allowing s3:GetObject and s3:ListBucket.
    """
    if store.io.scheme == "file":
        path = store.io.fs_path("x")[:-2]
        cmd = ["chattr", "-R", "+i", path] if os.geteuid() == 0 else ["chmod", "-R", "a-w", path]
        undo = ["chattr", "-R", "-i", path] if os.geteuid() == 0 else ["chmod", "-R", "u+w", path]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            subprocess.run(undo, capture_output=True)
            pytest.skip(f"cannot make a read-only folder here: {done.stderr.strip()}")
        try:
            yield None
        finally:
            subprocess.run(undo, check=True)
        return
    import boto3
    import requests

    opts = dict(where["storage_options"])
    iam = boto3.client("iam", endpoint_url=opts["endpoint_url"], aws_access_key_id="testing", aws_secret_access_key="testing", region_name="us-east-1")
    user = f"reader-{uuid.uuid4().hex[:8]}"
    iam.create_user(UserName=user)
    policy = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": ["s3:GetObject", "s3:ListBucket"], "Resource": "*"}]}
    iam.put_user_policy(UserName=user, PolicyName="read-only", PolicyDocument=json.dumps(policy))
    key = iam.create_access_key(UserName=user)["AccessKey"]
    requests.post(opts["endpoint_url"] + "/moto-api/reset-auth", data=b"0", timeout=10)
    try:
        yield dict(opts, key=key["AccessKeyId"], secret=key["SecretAccessKey"])
    finally:
        requests.post(opts["endpoint_url"] + "/moto-api/reset-auth", data=b"inf", timeout=10)


def test_read_only_store_says_so_and_names_the_path(where: dict[str, Any], store: fs.CheckpointStore, unchanged: Any,
                                                     capfd: pytest.CaptureFixture[str]) -> None:
    unchanged()
    expected = [c.checkpoint_id for c in store.checkpoints()]
    with read_only(where, store) as opts:
        ro = fs.open(store.root, opts)
        assert [c.checkpoint_id for c in ro.checkpoints()] == expected  # reading still works
        assert ro.read_state("sessions", "count").num_rows == 3
        with pytest.raises(fs.ReadOnlyStoreError, match=re.escape(store.root) + r" is read-only"):
            ro.retain(1)
        with pytest.raises(fs.ReadOnlyStoreError, match=re.escape(store.root) + r" is read-only"):
            ro.discard([1])
        with pytest.raises(fs.ReadOnlyStoreError, match=re.escape(store.root) + r" is read-only"):
            with ro.begin() as w:
                w.put_state("sessions", COUNT, pa.table({"key": ["z"], "value": [9]}))
    assert "panicked" not in capfd.readouterr().err
    assert [c.checkpoint_id for c in store.checkpoints()] == expected


# ---------------------------------------------------------------------- 11. backend whose base is gone


@pytest.mark.parametrize("full", [False, True])
def test_backend_falls_back_to_full_when_its_base_is_discarded(where: dict[str, Any], full: bool) -> None:
    from flinkstate.backend import KeyedStateBackend

    s = _open(where)
    be = KeyedStateBackend(max_parallelism=32)
    v = be.get_state(COUNT)
    for i, k in enumerate("abcd"):
        be.set_current_key(k)
        v.update(i)
    be.checkpoint(s, "sessions").result()
    be.set_current_key("a")
    v.update(10)
    assert be.checkpoint(s, "sessions").result().base_checkpoint_id == 1
    s.discard([2])  # the backend's base is gone (an operator, or retain on another handle)
    be.set_current_key("b")
    v.update(20)
    info = be.checkpoint(s, "sessions", full=full).result()
    # full files of the backend's own state; the checkpoint builds on the latest retained one (1),
    # whose other state (none here) it would carry over by reference
    assert info.checkpoint_id == 3 and info.base_checkpoint_id == 1
    assert {e.kind for e in s.files(3)} == {"full"} and all(e.created_by_checkpoint_id == 3 for e in s.files(3))
    got = {r["key"]: r["value"] for r in s.read_state("sessions", "count", 3).to_pylist()}
    assert got == {"a": 10, "b": 20, "c": 2, "d": 3}
    be.set_current_key("c")
    v.update(30)
    assert be.checkpoint(s, "sessions").result().base_checkpoint_id == 3  # incremental again
    assert {r["key"]: r["value"] for r in s.read_state("sessions", "count").to_pylist()}["c"] == 30


# ---------------------------------------------------------------------- 12. orphans are collected


def test_orphans_of_killed_attempts_are_collected(store: fs.CheckpointStore) -> None:
    with store.begin(kind="savepoint") as w:  # a real savepoint: its folder is never touched
        w.put_state("sessions", COUNT, pa.table({"key": ["s"], "value": [7], "tombstone": [False]}), mode="delta")
    killed = store.begin(kind="savepoint")  # a savepoint attempt killed after writing its files
    killed.put_state("sessions", COUNT, pa.table({"key": ["k"], "value": [8], "tombstone": [False]}), mode="delta")
    killed_dir = f"savepoints/sp-{killed.checkpoint_id:010d}/"
    assert store.io.list_files(killed_dir)
    w1, w2 = store.begin(), store.begin()  # two writers: the loser commits nothing
    w1.put_state("sessions", COUNT, pa.table({"key": ["x"], "value": [1], "tombstone": [False]}), mode="delta")
    w2.put_state("sessions", COUNT, pa.table({"key": ["y"], "value": [2], "tombstone": [False]}), mode="delta")
    w1.commit()
    with pytest.raises(fs.CommitConflictError):
        w2.commit()
    # a writer of another process that lost the race inside delta-rs leaves a log data file no version references
    stale = DeltaTable(store.io.delta_uri(C.LOG_TABLE), version=0, storage_options=store.io.delta_storage_options())
    row = DeltaTable(store.io.delta_uri(C.LOG_TABLE), storage_options=store.io.delta_storage_options()).to_pyarrow_table().slice(0, 1)
    with pytest.raises(CommitFailedError):
        write_deltalake(stale, row, mode="append", commit_properties=CommitProperties(max_commit_retries=0))
    referenced = {p for rel in (C.LOG_TABLE, C.MANIFEST_TABLE) for p in store.io.list_files(rel) if "_delta_log" not in p}
    log = DeltaTable(store.io.delta_uri(C.LOG_TABLE), storage_options=store.io.delta_storage_options())
    in_log = {f"{C.LOG_TABLE}/{p}" for p in pa.table(log.get_add_actions(flatten=True)).column("path").to_pylist()}
    log_orphans = [p for p in store.io.list_files(C.LOG_TABLE) if "_delta_log" not in p and p not in in_log]
    assert len(log_orphans) == 1
    views = {c.checkpoint_id: store.read_state("sessions", "count", c.checkpoint_id).to_pylist() for c in store.checkpoints()}

    deleted = store.retain(10)  # nothing to discard: GC still collects the killed savepoint's folder
    assert deleted and all(p.startswith(killed_dir) for p in deleted)
    assert not store.io.list_files(killed_dir)
    assert store.io.exists(log_orphans[0])  # younger than Delta's 7-day retention: kept
    assert store.collect_orphans() == []
    assert store.collect_orphans(dt.timedelta(0)) == log_orphans
    assert not store.io.exists(log_orphans[0])
    after = {p for rel in (C.LOG_TABLE, C.MANIFEST_TABLE) for p in store.io.list_files(rel) if "_delta_log" not in p}
    log = DeltaTable(store.io.delta_uri(C.LOG_TABLE), storage_options=store.io.delta_storage_options())
    now_in_log = {f"{C.LOG_TABLE}/{p}" for p in pa.table(log.get_add_actions(flatten=True)).column("path").to_pylist()}
    assert referenced - after == set(log_orphans)  # exactly the orphan went
    assert after - referenced <= now_in_log  # what is new: the log commit announcing the collection of the killed savepoint
    assert [e["event"] for e in store.catalog.log_events().to_pylist()].count(C.EVENT_COLLECTING) == 1
    assert {c.checkpoint_id: store.read_state("sessions", "count", c.checkpoint_id).to_pylist() for c in store.checkpoints()} == views
    assert store.checkpoint(3).kind == "savepoint" and store.files(3)


def test_orphan_collection_refuses_on_damage(store: fs.CheckpointStore, unchanged: Any) -> None:
    remove(store, manifest_commits(store)[-1])
    unchanged()
    with pytest.raises(fs.CorruptFileError, match=r"garbage collection refused"):
        store.collect_orphans(dt.timedelta(0))


def test_gc_refuses_when_a_log_row_cannot_be_parsed(store: fs.CheckpointStore, unchanged: Any) -> None:
    import dataclasses

    r = dataclasses.asdict(store.catalog.records()[-1])
    row = {k: r[k] for k in ("checkpoint_id", "attempt_id", "kind", "created_at", "max_parallelism", "format_version",
                             "base_checkpoint_id", "files", "rows", "bytes")}
    row.update(checkpoint_id=3, attempt_id=uuid.uuid4().hex, event=C.EVENT_COMPLETED, event_time=r["created_at"], metadata="{not json")
    store.catalog.commit_log(row, store.catalog.log_version())  # a damaged COMPLETED row (no manifest rows either)
    unchanged()
    with pytest.raises(fs.CorruptFileError, match=r"checkpoint 3"):
        store.retain(1)
    with pytest.raises(fs.CorruptFileError, match=r"garbage collection refused.*checkpoint 3"):
        store.discard([1])


@pytest.mark.s3
def test_integrity_listings_do_not_hide_files_written_later_by_others(s3: dict[str, Any]) -> None:
    s = fs.open(s3["root"], s3["storage_options"])
    with s.begin(max_parallelism=8) as w:
        w.put_state("sessions", COUNT, pa.table({"key": ["a"], "value": [1]}))
    with s.begin() as w:  # the commit lists the carried files' folder
        w.put_state("sessions", COUNT, pa.table({"key": ["b"], "value": [2], "tombstone": [False]}), mode="delta")
    s.retain(1)  # and GC lists the tables and shared/
    entry = s.files()[0]
    other = entry.path.rsplit("/", 1)[0] + "/written-by-an-executor.parquet"
    s3["client"].put_object(Bucket=s3["bucket"], Key="job/" + other, Body=b"x")  # another process writes
    assert s.io.exists(other)
    assert other in s.io.list_files(C.SHARED_DIR)
