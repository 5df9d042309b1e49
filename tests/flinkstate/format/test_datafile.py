"""Format v1 data files (format.datafile): a damaged, missing or future-version file is named."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import flinkstate as fs
from flinkstate.format import constants as C


def test_corrupt_and_missing_files_name_the_file(populated: fs.CheckpointStore) -> None:
    entry = next(e for e in populated.files() if e.kind == "full")
    path = populated.io.fs_path(entry.path)
    data = Path(path).read_bytes()
    Path(path).write_bytes(data[: len(data) // 2])
    with pytest.raises(fs.CorruptFileError, match=r"data file .*count/0000000001-full.* is unreadable"):
        populated.read_state("sessions", "count")
    os.remove(path)
    with pytest.raises(fs.CorruptFileError, match=r"count/0000000001-full.*(missing|unreadable)"):
        populated.read_state("sessions", "count")
    Path(path).write_bytes(data)
    assert populated.read_state("sessions", "count").num_rows == 3


def test_unknown_format_version_is_refused(populated: fs.CheckpointStore) -> None:
    import pyarrow.parquet as pq

    entry = next(e for e in populated.files() if e.kind == "full")
    path = populated.io.fs_path(entry.path)
    t = pq.read_table(path)
    meta = dict(t.schema.metadata)
    meta[C.META_FORMAT_VERSION.encode()] = b"99"
    pq.write_table(t.replace_schema_metadata(meta), path)
    with pytest.raises(fs.CorruptFileError, match="format version 99"):
        populated.read_state("sessions", "count")
