"""File IO over fsspec URLs (io): memory:// and s3:// roots round trip."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import flinkstate as fs
from flinkstate.core.io import DELTA_LOCATION


def test_memory_filesystem_round_trip(tmp_path: Path) -> None:
    import uuid

    root = f"memory://flinkstate-test-{uuid.uuid4().hex}/job"
    with pytest.raises(fs.InvalidArgumentError, match=r"memory://flinkstate-test-.*delta_location"):
        fs.open(root).begin()  # delta-rs cannot see fsspec's memory filesystem: its tables need a local folder
    store = fs.open(root, {DELTA_LOCATION: str(tmp_path / "delta")})
    d = fs.ListStateDescriptor(name="l", value_type=pa.string())
    with store.begin() as w:
        w.put_state("op", d, pa.table({"key": ["a", "b"], "value": [["x", "y"], []]}))
    with store.begin() as w:
        w.put_state("op", d, pa.table({"key": ["b"], "value": [["z"]], "tombstone": [False]}), mode="delta")
    assert {r["key"]: r["value"] for r in store.read_state("op", "l", flatten=False).to_pylist()} == {"a": ["x", "y"], "b": ["z"]}
    assert store.io.list_files("shared")


@pytest.mark.s3
def test_s3_round_trip_against_moto(s3: dict[str, Any]) -> None:
    store = fs.open(s3["root"], s3["storage_options"])
    d = fs.ValueStateDescriptor(name="v", value_type=pa.struct([("n", pa.int64())]))
    with store.begin(max_parallelism=256) as w:
        w.put_state("op", d, pa.table({"key": ["a", "b"], "value": [{"n": 1}, {"n": 2}]}))
    with store.begin() as w:
        w.put_state("op", d, pa.table({"key": ["a"], "value": [None], "tombstone": [True]}), mode="delta")
    reopened = fs.open(s3["root"], s3["storage_options"])
    assert [c.checkpoint_id for c in reopened.checkpoints()] == [1, 2]
    assert reopened.read_state("op", "v").to_pylist() == [{"key_group": fs.assign_key_group("b", 256), "key": "b", "value": {"n": 2}}]
    keys = [o["Key"] for o in s3["client"].list_objects_v2(Bucket=s3["bucket"])["Contents"]]
    assert any(k.startswith("job/_flinkstate/log/_delta_log/") for k in keys)
    assert any(k.startswith("job/shared/op/v/") for k in keys)
    # conflicting commit on S3: exactly one wins
    w1, w2 = reopened.begin(), reopened.begin()
    w1.put_state("op", d, pa.table({"key": ["z"], "value": [{"n": 9}]}))
    w2.put_state("op", d, pa.table({"key": ["y"], "value": [{"n": 8}]}))
    w1.commit()
    with pytest.raises(fs.CommitConflictError):
        w2.commit()
    assert [r["key"] for r in reopened.read_state("op", "v").to_pylist()] == ["z"]
