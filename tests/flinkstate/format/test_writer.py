"""Writing the data files of one state (format.writer): key-group ranges and layout."""

from __future__ import annotations

import pyarrow as pa
import pytest

import flinkstate as fs


def test_rows_outside_non_contiguous_ranges_are_refused_not_dropped(job_root: str) -> None:
    store = fs.open(job_root)
    d = fs.ValueStateDescriptor(name="v", value_type=pa.int64(), key_type=pa.int64())
    keys = list(range(50))
    w = store.begin(max_parallelism=16)
    with pytest.raises(fs.KeyGroupOutOfRangeError, match=r"rows fall in key groups \[4"):
        w.put_state("op", d, pa.table({"key": keys, "value": keys}), ranges=[(0, 3), (8, 15)])
    with pytest.raises(fs.KeyGroupOutOfRangeError, match="overlap"):
        w.put_state("op", d, pa.table({"key": keys, "value": keys}), ranges=[(0, 9), (8, 15)])
    entries = w.put_state("op", d, pa.table({"key": keys, "value": keys}), ranges=[(0, 3), (4, 7), (8, 15)])
    assert sum(e.rows for e in entries) == 50
    w.commit()
    assert store.read_state("op", "v").num_rows == 50
