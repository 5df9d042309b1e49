"""Fixtures shared by the core tests of several modules."""

from __future__ import annotations

import pyarrow as pa
import pytest

import flinkstate as fs


@pytest.fixture()
def populated(job_root: str) -> fs.CheckpointStore:
    store = fs.open(job_root)
    with store.begin(max_parallelism=32) as w:
        w.put_state("sessions", fs.ValueStateDescriptor(name="count", value_type=pa.int64()), pa.table({"key": ["a", "b"], "value": [1, 2]}))
        w.put_timers("sessions", fs.TimerServiceDescriptor(name="gap"), pa.table({"key": ["a"], "timestamp": [5]}))
    with store.begin() as w:
        w.put_state("sessions", fs.ValueStateDescriptor(name="count", value_type=pa.int64()), pa.table({"key": ["c"], "value": [3], "tombstone": [False]}), mode="delta")
    return store
