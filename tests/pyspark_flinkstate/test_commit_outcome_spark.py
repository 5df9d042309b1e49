"""The Spark writer's driver commit when the commit outcome is unknown: Spark calls abort() after a failed commit,
and abort must not delete files a landed checkpoint may use (issue 41). The writer's methods run here as Spark's
driver runs them (no session needed: write() of one partition, then commit() or abort() with its message)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import flinkstate as fs
from pyspark_flinkstate.writer import FlinkStateWriter

COUNT = fs.ValueStateDescriptor(name="count", value_type=pa.int64())


def _written(root: str) -> tuple[FlinkStateWriter, Any]:
    schema = pa.schema([("key", pa.string()), ("value", pa.int64())])
    writer = FlinkStateWriter({"path": root, "operator": "op", "state": "count"}, schema, False)
    message = writer.write(iter([pa.record_batch({"key": ["c"], "value": [3]}, schema=schema)]))
    return writer, message


@pytest.mark.parametrize("landed", [True, False], ids=["landed", "not-landed"])
def test_an_unknown_commit_outcome_keeps_the_files_spark_would_abort(tmp_path: Path, failing_log_write: Any, landed: bool) -> None:
    root = str(tmp_path / "job")
    store = fs.open(root)
    with store.begin(max_parallelism=8) as w:
        w.put_state("op", COUNT, pa.table({"key": ["a", "b"], "value": [1, 2]}))
    writer, message = _written(root)
    failing_log_write(landed=landed, unreadable=True)
    with pytest.raises(fs.CommitOutcomeUnknownError):
        writer.commit([message])
    writer.abort([message])  # what Spark does after a failed commit
    failing_log_write.heal()
    assert all(store.io.exists(e.path) for e in message.entries), "abort deleted files a landed checkpoint may use"
    ids = [c.checkpoint_id for c in store.checkpoints()]
    assert ids == ([1, 2] if landed else [1])
    if landed:
        assert sorted(store.read_state("op", "count").column("key").to_pylist()) == ["a", "b", "c"]


def test_a_failed_commit_that_did_not_land_is_aborted_as_before(tmp_path: Path, failing_log_write: Any) -> None:
    root = str(tmp_path / "job")
    with fs.open(root).begin(max_parallelism=8) as w:
        w.put_state("op", COUNT, pa.table({"key": ["a"], "value": [1]}))
    writer, message = _written(root)
    failing_log_write(landed=False)
    with pytest.raises(fs.StorageError):
        writer.commit([message])
    writer.abort([message])
    assert not any(fs.open(root).io.exists(e.path) for e in message.entries)
