"""The Spark reader gets the core's checks on read: a damaged data file fails the query naming the file."""

from __future__ import annotations

import pyarrow as pa
import pytest

import flinkstate as fs
from fsc_helpers import error_text, fmt

pytestmark = pytest.mark.spark

COUNT = fs.ValueStateDescriptor(name="count", value_type=pa.int64())
OTHER = fs.ValueStateDescriptor(name="other", value_type=pa.int64())


def test_spark_read_of_a_swapped_in_file_names_it(spark, tmp_path):
    root = str(tmp_path / "job")
    store = fs.open(root)
    keys = [f"k{i}" for i in range(50)]
    with store.begin(max_parallelism=16) as w:
        w.put_state("op", COUNT, pa.table({"key": keys, "value": list(range(50))}))
        w.put_state("op", OTHER, pa.table({"key": keys, "value": list(range(100, 150))}))
    assert fmt(spark, root, operator="op", state="count").count() == 50
    victim, other = (next(e for e in store.files() if e.state == s) for s in ("count", "other"))
    with open(store.io.fs_path(other.path), "rb") as src, open(store.io.fs_path(victim.path), "wb") as dst:
        dst.write(src.read())  # a valid file of another state, same row count: read back as 'count' before
    with pytest.raises(Exception) as ei:
        fmt(spark, root, operator="op", state="count").collect()
    text = error_text(ei)
    assert "CorruptFileError" in text and victim.path.rsplit("/", 1)[1] in text and "flinkstate.state='other'" in text, text[:2000]
