"""Rows come back in key-group (timers: key-group, timestamp) order: sorted when they are not, returned as they are
(no copy) when the scan already gave them in order, ties in their scan order either way."""

from __future__ import annotations

import pyarrow as pa

from flinkstate.read.reads import _sorted


def table(kgs: list[int], ts: list[int]) -> pa.Table:
    return pa.table({"key_group": pa.array(kgs, pa.int32()), "timestamp": pa.array(ts, pa.int64()),
                     "row": pa.array(range(len(kgs)))})


def test_rows_in_order_are_returned_as_they_are() -> None:
    t = pa.concat_tables([table([0, 0, 1], [5, 2, 0]), table([1, 3], [0, 1])])  # two chunks; ties by key group
    assert _sorted(t, ["key_group"]) is t
    assert _sorted(t, ["key_group", "timestamp"]) is not t  # 5 before 2 in key group 0


def test_rows_out_of_order_are_sorted_stably() -> None:
    t = table([2, 0, 2, 1, 0], [9, 8, 1, 7, 3])
    assert _sorted(t, ["key_group"]).column("row").to_pylist() == [1, 4, 3, 0, 2]
    assert _sorted(t, ["key_group", "timestamp"]).column("row").to_pylist() == [4, 1, 3, 2, 0]
    assert _sorted(table([0, 0, 1], [5, 2, 0]), ["key_group", "timestamp"]).column("row").to_pylist() == [1, 0, 2]


def test_a_non_integer_order_column_is_sorted() -> None:
    t = pa.table({"key_group": pa.array(["b", "a"]), "row": [0, 1]})
    assert _sorted(t, ["key_group"]).column("row").to_pylist() == [1, 0]
