"""Writing the data files of one state (format.writer): key-group ranges and layout."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import flinkstate as fs
from flinkstate.core.io import FileIO
from flinkstate.format.datafile import read_data_file
from flinkstate.format.writer import RangeFileWriter, with_key_groups, write_state_files


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



def test_a_range_file_written_part_by_part_is_the_file_written_at_once(tmp_path: Path) -> None:
    """RangeFileWriter (an import's chunks of key groups) writes what write_state_files writes of all the rows: the same
    bytes when no flush cuts a row group short, the same rows when flushes do; parts out of key-group order are refused
    and an aborted file is gone."""
    io = FileIO(str(tmp_path))
    d = fs.MapStateDescriptor(name="m", key_type=pa.int64(), user_key_type=pa.string(), user_value_type=pa.int64())
    n = 5000
    rows = with_key_groups(pa.table({"key": [i % 700 for i in range(n)], "user_key": [str(i) for i in range(n)],
                                     "value": list(range(n))}), 32, "m")
    kg = rows.column("key_group").to_numpy()
    kw: dict[str, Any] = {"checkpoint_id": 1, "checkpoint_kind": "savepoint", "max_parallelism": 32}
    (whole,) = write_state_files(io, "op", d, rows.drop_columns(["key_group"]), ranges=[(0, 31)], **kw)
    expected = read_data_file(io, whole)
    for flush in (False, True):
        w = RangeFileWriter(io, "op", d, key_group_range=(0, 31), **kw)
        for lo in range(0, 32, 5):  # key groups [lo, lo + 5): a chunk, its rows in any order
            part = rows.filter(pa.array((kg >= lo) & (kg < lo + 5))).drop_columns(["key_group"])
            w.write(part.take(pa.array(range(part.num_rows - 1, -1, -1))))
            if flush:
                w.flush()
        (entry,) = w.close()
        assert entry.rows == n and read_data_file(io, entry).equals(expected)
        assert (entry.checksum == whole.checksum) is not flush  # flushed: shorter row groups, other bytes
    w = RangeFileWriter(io, "op", d, key_group_range=(0, 31), **kw)
    w.write(rows.filter(pa.array(kg >= 10)).drop_columns(["key_group"]))
    with pytest.raises(fs.KeyGroupOutOfRangeError, match="key-group order"):
        w.write(rows.filter(pa.array(kg < 10)).drop_columns(["key_group"]))
    w.abort()
    assert not io.fs.exists(io.fs_path(w.sink.path))
    w = RangeFileWriter(io, "op", d, key_group_range=(0, 3), **kw)
    with pytest.raises(fs.KeyGroupOutOfRangeError, match="outside the ranges"):
        w.write(rows.drop_columns(["key_group"]))
    w.abort()
