"""A decoded Flink list state (one row per element, each list's elements one after another, as a record decodes them)
regrouped into flinkstate's stored layout: one row per key and namespace, its elements in order."""

from __future__ import annotations

import pyarrow as pa

from flinkstate.core.descriptors import ListStateDescriptor
from flinkstate.flink.bridge.mapping import stored_rows


def test_each_run_of_a_key_is_one_list_in_element_order() -> None:
    """Runs of equal keys (struct keys, null namespaces equal to each other, equal keys under other namespaces) become
    lists, elements and their TTL timestamps in decoded order; a key's run split by another key stays two runs."""
    key = pa.array([{"a": 1, "b": "x"}] * 3 + [{"a": 1, "b": "y"}] * 2 + [{"a": 2, "b": "x"}] * 2)
    table = pa.table({
        "key_group": pa.array([5, 5, 5, 5, 5, 9, 9], pa.int32()),
        "key": key,
        "namespace": pa.array([None, None, 7, 7, 7, None, 3], pa.int64()),
        "value": pa.array(["c", "a", "b", "z", "y", "q", "r"]),
        "ttl_last_access": pa.array([1, 2, 3, 4, 5, 6, 7], pa.int64()),
    })
    desc = ListStateDescriptor(name="l", value_type=pa.string())
    got = stored_rows(table, desc).to_pylist()
    assert got == [
        {"key_group": 5, "key": {"a": 1, "b": "x"}, "namespace": None, "value": ["c", "a"], "ttl_timestamp": [1, 2]},
        {"key_group": 5, "key": {"a": 1, "b": "x"}, "namespace": 7, "value": ["b"], "ttl_timestamp": [3]},
        {"key_group": 5, "key": {"a": 1, "b": "y"}, "namespace": 7, "value": ["z", "y"], "ttl_timestamp": [4, 5]},
        {"key_group": 9, "key": {"a": 2, "b": "x"}, "namespace": None, "value": ["q"], "ttl_timestamp": [6]},
        {"key_group": 9, "key": {"a": 2, "b": "x"}, "namespace": 3, "value": ["r"], "ttl_timestamp": [7]},
    ]
    assert stored_rows(table.slice(0, 0), desc).num_rows == 0


def test_a_list_of_chunked_columns_keeps_its_elements() -> None:
    """Rows that come in several chunks (a subtask's key-group runs) regroup across the chunk bounds."""
    part = pa.table({"key_group": pa.array([1, 1], pa.int32()), "key": pa.array([4, 4], pa.int64()), "value": pa.array([10, 11], pa.int64())})
    more = pa.table({"key_group": pa.array([1, 2], pa.int32()), "key": pa.array([4, 8], pa.int64()), "value": pa.array([12, 13], pa.int64())})
    got = stored_rows(pa.concat_tables([part, more]), ListStateDescriptor(name="l", value_type=pa.int64())).to_pylist()
    assert got == [{"key_group": 1, "key": 4, "value": [10, 11, 12]}, {"key_group": 2, "key": 8, "value": [13]}]
