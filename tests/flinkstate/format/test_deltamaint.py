"""Housekeeping of the manifest and log Delta tables: a long history keeps the catalog bounded, reads stay whole."""

from __future__ import annotations

import datetime as dt
import os
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable

import flinkstate as fs
from flinkstate.format import constants as C
from flinkstate.format.deltamaint import (
    COMPACT_MIN_FILES,
    DEFAULT_LOG_RETENTION,
    DELETED_FILE_RETENTION_KEY,
    HOUSEKEEPING_INTERVAL,
    LOG_RETENTION_KEY,
)

V = fs.ValueStateDescriptor(name="v", value_type=pa.int64())
TABLES = (C.LOG_TABLE, C.MANIFEST_TABLE)


def _table(store: fs.CheckpointStore, rel: str) -> DeltaTable:
    return DeltaTable(store.io.delta_uri(rel))


def _folder(store: fs.CheckpointStore, rel: str) -> tuple[list[str], list[str]]:
    """(data files in the table folder, `_delta_log` entries)."""
    d = store.io.delta_uri(rel)
    return sorted(f for f in os.listdir(d) if f.endswith(".parquet")), sorted(os.listdir(os.path.join(d, "_delta_log")))


def _grow(store: fs.CheckpointStore, n: int, retained: int = 2, deleted: list[str] | None = None) -> dict[str, int]:
    """n checkpoints, each a delta on one of 5 keys, keeping the newest `retained` (what GC deleted goes to `deleted`);
    returns the expected state."""
    model: dict[str, int] = {}
    for i in range(n):
        key = f"k{i % 5}"
        with store.begin(max_parallelism=16) as w:
            w.put_state("op", V, pa.table({"key": [key], "value": [i], "tombstone": [False]}), mode="delta")
        model[key] = i
        gone = store.retain(retained)
        if deleted is not None:
            deleted += gone
    return model


def _state(store: fs.CheckpointStore, checkpoint_id: int | None = None) -> dict[str, int]:
    return {r["key"]: r["value"] for r in store.read_state("op", "v", checkpoint_id).to_pylist()}


def _expire_at_once(store: fs.CheckpointStore) -> None:
    """Retention 0 for log entries and removed files: the steady state of a job that runs longer than both."""
    for rel in TABLES:
        _table(store, rel).alter.set_table_properties({LOG_RETENTION_KEY: "interval 0 seconds",
                                                       DELETED_FILE_RETENTION_KEY: "interval 0 seconds"})


@pytest.fixture()
def store(tmp_path: Path) -> fs.CheckpointStore:
    return fs.open(tmp_path / "job")


def test_new_tables_carry_the_log_retention(store: fs.CheckpointStore) -> None:
    _grow(store, 1)
    for rel in TABLES:
        assert _table(store, rel).metadata().configuration == {LOG_RETENTION_KEY: DEFAULT_LOG_RETENTION}


def test_the_log_is_compacted_and_checkpointed_and_reads_stay_whole(store: fs.CheckpointStore) -> None:
    model = _grow(store, 60)
    log = _table(store, C.LOG_TABLE)
    # one data file per commit without housekeeping (60 completions + 58 discards); compaction bounds it
    assert log.version() > 100
    assert log.get_add_actions().num_rows < COMPACT_MIN_FILES + HOUSEKEEPING_INTERVAL
    assert any(n.endswith(".checkpoint.parquet") for n in _folder(store, C.LOG_TABLE)[1])
    fresh = fs.open(store.root)
    for s in (store, fresh):  # the warm catalog and a new one read the same history and state
        history = s.checkpoints(include_discarded=True)
        assert [c.checkpoint_id for c in history] == list(range(1, 61))
        assert [c.status for c in history] == ["discarded"] * 58 + ["completed"] * 2
        assert _state(s) == model
    # removed data files wait for deletedFileRetentionDuration (7 days): nothing referenced is gone meanwhile
    files, _ = _folder(store, C.LOG_TABLE)
    assert len(files) > log.get_add_actions().num_rows


def test_expired_log_entries_and_removed_files_go_and_reads_stay_whole(store: fs.CheckpointStore) -> None:
    _grow(store, 1)
    _expire_at_once(store)
    deleted: list[str] = []
    model = _grow(store, 60, deleted=deleted)
    assert any(p.startswith(C.MANIFEST_TABLE + "/part-") for p in deleted)  # GC reports the table files it vacuumed
    time.sleep(0.01)  # the newest removes expire (Delta's clock is in ms)
    store.retain(2)
    for rel in TABLES:
        files, log = _folder(store, rel)
        table = _table(store, rel)
        live = {p for p in table.get_add_actions(flatten=True).column("path").to_pylist()}
        assert set(files) == live, f"{rel}: removed files are vacuumed"
        commits = [n for n in log if n.endswith(".json")]
        assert len(commits) <= 2 * HOUSEKEEPING_INTERVAL, f"{rel}: entries before the newest checkpoint are cleaned"
        assert f"{0:020d}.json" not in log
    fresh = fs.open(store.root)
    for s in (store, fresh):
        assert len(s.checkpoints(include_discarded=True)) == 61
        assert _state(s) == model
        assert [c.checkpoint_id for c in s.checkpoints()] == [60, 61]


def test_a_write_planned_on_a_version_no_longer_kept_conflicts(store: fs.CheckpointStore) -> None:
    _grow(store, 1)
    _expire_at_once(store)
    planned = store.catalog.log_version()
    _grow(store, 45)
    before = _state(store)
    with pytest.raises(fs.CommitConflictError, match=rf"version {planned} of .*_flinkstate/log is no longer kept.*plan it again"):
        store.begin(at_log_version=planned)
    assert _state(store) == before and store.latest_checkpoint_id() == 46


def test_a_write_planned_before_housekeeping_rebases_over_it(store: fs.CheckpointStore) -> None:
    _grow(store, 3, retained=100)
    catalog = store.catalog
    while (catalog.log_version() or 0) % HOUSEKEEPING_INTERVAL != HOUSEKEEPING_INTERVAL - 1:  # one commit before it
        with store.begin(kind="savepoint") as w:
            w.put_state("op", V, pa.table({"key": ["s"], "value": [1], "tombstone": [False]}), mode="delta")
    files_before = _table(store, C.LOG_TABLE).get_add_actions().num_rows
    assert files_before >= COMPACT_MIN_FILES
    writer = store.begin(at_log_version=catalog.log_version())
    writer.put_state("op", V, pa.table({"key": ["w"], "value": [7], "tombstone": [False]}), mode="delta")
    store.discard([1])  # the commit that reaches the interval: compaction is one more commit on top
    assert _table(store, C.LOG_TABLE).get_add_actions().num_rows == 1
    info = writer.commit()  # planned two versions back: a discard and a compaction conflict with nothing
    assert _state(store, info.checkpoint_id)["w"] == 7
    assert fs.open(store.root).checkpoints(include_discarded=True)[0].status == "discarded"


@pytest.mark.parametrize("rel", TABLES)
def test_a_table_upgraded_to_reader_features_is_refused_by_name(store: fs.CheckpointStore, rel: str) -> None:
    from deltalake import TableFeatures

    _grow(store, 2)
    _table(store, rel).alter.add_feature(TableFeatures.DeletionVectors, allow_protocol_versions_increase=True)
    versions = [_table(store, r).version() for r in TABLES]
    for s in (store, fs.open(store.root)):  # the warm catalog and a new one
        with pytest.raises(fs.CorruptFileError, match=rf"{rel} needs Delta reader version 3 \(features \['deletionVectors'\]\)"):
            s.read_state("op", "v")
        with pytest.raises(fs.CorruptFileError, match="deletionVectors"):
            s.retain(1)
    assert [_table(store, r).version() for r in TABLES] == versions  # nothing committed


@pytest.mark.s3
def test_housekeeping_and_vacuum_on_s3(s3: dict[str, Any]) -> None:
    store = fs.open(s3["root"], s3["storage_options"])
    model = _grow(store, 21)  # both tables pass versions 20 and 40

    def keys() -> list[str]:
        pages = s3["client"].get_paginator("list_objects_v2").paginate(Bucket=s3["bucket"])
        return [o["Key"] for page in pages for o in page.get("Contents", [])]

    def live(rel: str) -> set[str]:
        table = DeltaTable(store.io.delta_uri(rel), storage_options=store.io.delta_storage_options())
        return {f"job/{rel}/{p}" for p in table.get_add_actions(flatten=True).column("path").to_pylist()}

    assert len(live(C.LOG_TABLE)) < COMPACT_MIN_FILES + HOUSEKEEPING_INTERVAL  # compacted
    for rel in TABLES:
        assert any(k.startswith(f"job/{rel}/_delta_log/") and k.endswith(".checkpoint.parquet") for k in keys())
    before = {rel: {k for k in keys() if k.startswith(f"job/{rel}/part-")} for rel in TABLES}
    assert len(before[C.LOG_TABLE]) > len(live(C.LOG_TABLE))  # removed files wait for their retention
    deleted = store.collect_orphans(dt.timedelta(0))  # Delta's VACUUM, full mode, through delta-rs on S3
    for rel in TABLES:
        assert {k for k in keys() if k.startswith(f"job/{rel}/part-")} == live(rel)
        assert {f"job/{p}" for p in deleted if p.startswith(rel)} == before[rel] - live(rel)
    fresh = fs.open(s3["root"], s3["storage_options"])
    for s in (store, fresh):
        assert len(s.checkpoints(include_discarded=True)) == 21 and _state(s) == model
