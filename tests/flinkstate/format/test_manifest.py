"""The manifest and the checkpoint log (format.manifest): standard Delta tables."""

from __future__ import annotations

import os

import pyarrow as pa

import flinkstate as fs


def test_manifest_and_log_are_standard_delta_tables(job_root: str) -> None:
    from deltalake import DeltaTable

    store = fs.open(job_root)
    d = fs.ValueStateDescriptor(name="v", value_type=pa.int64())
    for i in range(3):
        with store.begin() as w:
            w.put_state("op", d, pa.table({"key": [f"k{i}"], "value": [i], "tombstone": [False]}), mode="delta" if i else "full")
    log = DeltaTable(os.path.join(job_root, "_flinkstate", "log"))
    manifest = DeltaTable(os.path.join(job_root, "_flinkstate", "manifest"))
    rows = log.to_pyarrow_table().to_pylist()
    assert sorted(r["checkpoint_id"] for r in rows if r["event"] == "COMPLETED") == [1, 2, 3]
    assert log.version() == 3  # table creation + one commit per checkpoint
    m = manifest.to_pyarrow_table()
    assert set(m.column("checkpoint_id").to_pylist()) == {1, 2, 3}
    assert m.filter(pa.compute.equal(m.column("checkpoint_id"), 3)).num_rows == 3  # one full + two deltas
