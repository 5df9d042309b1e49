"""Descriptors and TTL config: validation and exact round trips of every kind and type."""

from __future__ import annotations

import datetime as dt
import decimal

import pyarrow as pa
import pytest

import flinkstate as fs
from flinkstate.core.descriptors import descriptor_from_dict, validate_name
from flinkstate.core.types import infer_type, type_from_json, type_to_json

NESTED = [
    pa.int32(),
    pa.string(),
    pa.struct([("a", pa.int64()), ("b", pa.list_(pa.string())), ("c", pa.map_(pa.string(), pa.float64()))]),
    pa.list_(pa.struct([("x", pa.decimal128(20, 4)), ("t", pa.timestamp("us", tz="Europe/Paris"))])),
    pa.map_(pa.int32(), pa.list_(pa.null())),
    pa.decimal256(50, 10),
    pa.timestamp("ns"),
    pa.null(),
    pa.large_binary(),
    pa.dictionary(pa.int16(), pa.string()),
]


@pytest.mark.parametrize("t", NESTED, ids=str)
def test_type_json_round_trip(t: pa.DataType) -> None:
    assert type_from_json(type_to_json(t)) == t


def test_every_keyed_kind_round_trips_exactly() -> None:
    ttl = fs.StateTtlConfig(ttl_ms=60_000, update_type="OnReadAndWrite", state_visibility="ReturnExpiredIfNotCleanedUp",
                            cleanup_full_snapshot=True, incremental_cleanup=fs.IncrementalCleanup(10, True), compaction_cleanup=None)
    descs = [
        fs.ValueStateDescriptor(name="v", value_type=NESTED[2], key_type=pa.int64(), namespace_type=pa.string(), ttl=ttl),
        fs.ListStateDescriptor(name="l", value_type=NESTED[3]),
        fs.MapStateDescriptor(name="m", user_key_type=pa.string(), user_value_type=NESTED[4], key_type=pa.struct([("f0", pa.string()), ("f1", pa.int32())])),
        fs.ReducingStateDescriptor(name="r", value_type=pa.float64(), reduce_function=lambda a, b: a + b),
        fs.AggregatingStateDescriptor(name="a", value_type=pa.struct([("sum", pa.int64()), ("n", pa.int64())]),
                                      aggregate_function=fs.AggregateFunction(lambda: None, lambda a, v: a, lambda a: a)),
    ]
    for d in descs:
        back = descriptor_from_dict(d.to_dict())
        assert back == d
        assert back.kind == d.kind
        assert back.to_dict() == d.to_dict()


def test_timer_and_operator_state_descriptors_round_trip() -> None:
    t = fs.TimerServiceDescriptor(name="windows", domain="processing", key_type=pa.int32(), namespace_type=pa.int64())
    assert fs.TimerServiceDescriptor.from_dict(t.to_dict()) == t
    for o in (
        fs.OperatorStateDescriptor(name="offsets", value_type=pa.int64()),
        fs.OperatorStateDescriptor(name="all", value_type=pa.string(), mode="union"),
        fs.OperatorStateDescriptor(name="rules", value_type=NESTED[2], mode="broadcast", key_type=pa.string()),
    ):
        assert fs.OperatorStateDescriptor.from_dict(o.to_dict()) == o


@pytest.mark.parametrize("bad", ["", "../x", "a/b", "..", "_hidden", "x" * 201, "a\\b", "a..b", 5, None])
def test_names_that_could_escape_the_root_are_refused(bad: object) -> None:
    with pytest.raises(fs.InvalidArgumentError, match="invalid state name"):
        validate_name(bad, "state name")
    with pytest.raises(fs.InvalidArgumentError):
        fs.ValueStateDescriptor(name=bad, value_type=pa.int64())  # type: ignore[arg-type]


def test_bad_types_are_typed_errors() -> None:
    with pytest.raises(fs.InvalidArgumentError, match="value_type of state 'v'"):
        fs.ValueStateDescriptor(name="v", value_type=int)  # type: ignore[arg-type]
    with pytest.raises(fs.InvalidArgumentError, match="broadcast state 'b' needs a key_type"):
        fs.OperatorStateDescriptor(name="b", value_type=pa.int64(), mode="broadcast")
    with pytest.raises(fs.InvalidArgumentError, match="domain"):
        fs.TimerServiceDescriptor(name="t", domain="wall")  # type: ignore[arg-type]


def test_infer_type() -> None:
    assert infer_type("x") == pa.string()
    assert infer_type(True) == pa.bool_()
    assert infer_type(3) == pa.int64()
    assert infer_type(1.5) == pa.float64()
    assert infer_type(("a", 1)) == pa.struct([("f0", pa.string()), ("f1", pa.int64())])
    assert infer_type(dt.date(2020, 1, 1)) == pa.date32()
    assert pa.types.is_decimal(infer_type(decimal.Decimal("1.25")))
    with pytest.raises(fs.InvalidArgumentError, match="cannot infer"):
        infer_type(object())
