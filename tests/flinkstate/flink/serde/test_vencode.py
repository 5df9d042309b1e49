"""Fast tier: the vectorised column encoders write exactly the bytes of the per-value writer (`encode.make_writer`)."""

from __future__ import annotations

import struct

import numpy as np
import pyarrow as pa
import pytest
from flinkstate.flink.serde._bin import Bin, concat, varint
from flinkstate.flink.serde._vencode import column_encoder, per_value_encoder
from flinkstate.flink.serde.encode import _CLS, _COMP_CLS
from flinkstate.flink.serde.serializers import TypeNode


def simple(kind: str) -> TypeNode:
    return TypeNode(kind, _CLS.get(kind, kind))


def composite(kind: str, children: list[TypeNode], names: list[str], **kw) -> TypeNode:
    return TypeNode(kind, _COMP_CLS.get(kind, "org.example.Pojo"), tuple(children), tuple(names), **kw)


def rows(b: Bin) -> list[bytes]:
    return b.arrow().to_pylist()


def assert_same(node: TypeNode, arr: pa.Array) -> None:
    got = rows(column_encoder(node, "ctx")(arr))
    want = rows(per_value_encoder(node, "ctx")(arr))
    assert got == want


_RNG = np.random.default_rng(7)
_TEXT = ["", "a", "hello", "x" * 130, "x" * 20000, "nul\x00byte", "é", "日本語", "😀 emoji", "mixed é😀 text", "\u07ff\u0800\uffff"]

CASES = [
    ("long", pa.array(_RNG.integers(-2**63, 2**63 - 1, 200, dtype=np.int64))),
    ("long", pa.array([1, -2, 3], pa.int8())),
    ("long", pa.array([0, 2**64 - 1 - 2**63], pa.uint64())),
    ("int", pa.array(_RNG.integers(-2**31, 2**31 - 1, 200), pa.int64())),
    ("short", pa.array([-32768, 0, 32767], pa.int16())),
    ("byte", pa.array([-128, 0, 127], pa.int32())),
    ("bool", pa.array([True, False, True])),
    ("double", pa.array([0.0, -0.0, 1.5, float("inf"), float("nan"), 1e300])),
    ("float", pa.array([0.0, -1.25, float("inf"), 3.4e38], pa.float32())),
    ("double", pa.array([1.5, 2.25], pa.float32())),  # not the natural type: the per-value writer
    ("char", pa.array(["a", "Z", "\x00"])),
    ("char", pa.array(["a", "é", "日"])),  # non-ASCII: UTF-8 decoded at once
    ("char", pa.array(["\x7f", "\x80", "\u07ff", "\u0800", "\ud7ff", "\ue000", "\uffff"]).slice(1)),
    ("string", pa.array(_TEXT)),
    ("string", pa.array(["a", None, "", None, "é"])),
    ("string", pa.array(_TEXT, pa.large_string()).slice(2)),
    ("string", pa.nulls(3)),
    ("bytes", pa.array([b"", b"\x00\xff", b"x" * 300])),
    ("void", pa.nulls(4)),
]


@pytest.mark.parametrize(("kind", "arr"), CASES, ids=[f"{k}-{i}" for i, (k, _) in enumerate(CASES)])
def test_base_types(kind, arr):
    assert_same(simple(kind), arr)


def test_strings_of_every_utf8_width_and_unit_varint_length():
    """Random strings over code points at every boundary (1-4 UTF-8 bytes, 1-3 byte unit varints, surrogate pairs)."""
    edges = [0, 1, 0x7F, 0x80, 0x7FF, 0x800, 0x3FFF, 0x4000, 0xD7FF, 0xE000, 0xFFFF, 0x10000, 0x1F600, 0x10FFFF]
    rng = np.random.default_rng(3)
    pool = edges + rng.integers(0, 0xD800, 50).tolist() + rng.integers(0x10000, 0x110000, 20).tolist()
    text = ["".join(chr(pool[i]) for i in rng.integers(0, len(pool), rng.integers(0, 12))) for _ in range(300)]
    arr = pa.array([None if i % 17 == 0 else t for i, t in enumerate(text)])
    assert_same(simple("string"), arr)
    assert_same(simple("string"), arr.slice(5, 100))


@pytest.mark.parametrize("kind", ["opaque", "unknown", "rowdata", "arraydata"])
def test_raw_bytes(kind):
    assert_same(TypeNode(kind, "org.example.Raw"), pa.array([b"", b"\x01\x02", b"abc" * 50]))


def test_string_data_and_enum_and_time_window():
    assert_same(TypeNode("stringdata", "sd"), pa.array(["", "abc", "é😀"]))
    assert_same(TypeNode("enum", "org.example.Color", (), ("RED", "GREEN", "BLUE")), pa.array(["BLUE", "RED", "GREEN"]))
    windows = pa.array([{"start": 0, "end": 10}, {"start": -5, "end": 2**62}])
    assert_same(simple("timewindow"), windows)


def _struct(fields: dict[str, pa.Array], mask: list[bool] | None = None) -> pa.Array:
    return pa.StructArray.from_arrays(list(fields.values()), names=list(fields), mask=None if mask is None else pa.array(mask))


@pytest.mark.parametrize("legacy", [False, True])
def test_row_with_null_fields_and_nesting(legacy):
    inner = composite("row", [simple("int"), simple("string")], ["i", "s"])
    node = composite("row", [simple("long"), simple("string"), inner, simple("double")], ["a", "b", "c", "d"], legacy_row=legacy)
    arr = _struct({
        "a": pa.array([1, None, 3, 4]),
        "b": pa.array(["x", "é", None, ""]),
        "c": _struct({"i": pa.array([1, 2, None, 4], pa.int32()), "s": pa.array(["p", None, "q", "日"])}, [False, False, False, True]),
        "d": pa.array([0.5, 1.5, None, None]),
    })
    assert_same(node, arr)


def test_row_with_many_fields_and_a_missing_one():
    node = composite("row", [simple("int")] * 10, [f"f{i}" for i in range(10)])
    arr = _struct({f"f{i}": pa.array([i, None, -i], pa.int32()) for i in range(9)})  # f9 missing: null
    assert_same(node, arr)


def test_tuple_and_pojo():
    tup = composite("tuple", [simple("long"), simple("string")], ["f0", "f1"])
    assert_same(tup, _struct({"f0": pa.array([1, 2, 3]), "f1": pa.array(["a", None, "é"])}))
    pojo = TypeNode("pojo", "org.example.Pojo", (simple("long"), simple("string"), tup), ("id", "name", "pair"))
    arr = _struct({
        "id": pa.array([1, None, 3]),
        "name": pa.array([None, "b", "é"]),
        "pair": _struct({"f0": pa.array([1, 2, 3]), "f1": pa.array(["a", "b", "c"])}, [False, True, False]),
    }, [False, False, True])
    assert_same(pojo, arr)


def test_values_that_do_not_fit_raise_like_the_per_value_writer():
    for node, arr in [
        (simple("int"), pa.array([2**40])),
        (simple("long"), pa.array([1, None])),
        (simple("long"), pa.array(["1"])),
        (simple("bytes"), pa.array([b"a", None])),
        (composite("row", [simple("long")], ["a"]), _struct({"a": pa.array([1])}, [True])),
    ]:
        with pytest.raises((ValueError, TypeError, AttributeError, struct.error)):
            per_value_encoder(node, "ctx")(arr)
        with pytest.raises((ValueError, TypeError, AttributeError, struct.error)):
            column_encoder(node, "ctx")(arr)


def test_bin_concat_take_and_varint():
    a = Bin.fixed(np.arange(6, dtype=np.uint8).reshape(3, 2))
    b = Bin.from_arrow(pa.array([b"x", b"", b"yz"]))
    assert rows(concat([a, b, a])) == [b"\x00\x01x\x00\x01", b"\x02\x03\x02\x03", b"\x04\x05yz\x04\x05"]
    assert rows(concat([b, b]).take(np.array([2, 0]))) == [b"yzyz", b"xx"]
    assert rows(b.expand(np.array([True, False, True, False, True]))) == [b"x", b"", b"", b"", b"yz"]
    values = np.array([0, 1, 127, 128, 16383, 16384, 2**21, 2**28, 2**31 - 1])
    want = []
    for v in values.tolist():
        out = bytearray()
        while v >= 0x80:
            out.append((v & 0x7F) | 0x80)
            v >>= 7
        out.append(v)
        want.append(bytes(out))
    assert rows(varint(values)) == want


def _array_node(kind: str, elem: str) -> TypeNode:
    cls = {"sarray": "org.apache.flink.api.common.typeutils.base.array.StringArraySerializer$StringArraySerializerSnapshot",
           "parray": "org.apache.flink.api.common.typeutils.base.array.LongPrimitiveArraySerializer$LongPrimitiveArraySerializerSnapshot",
           "garray": "org.apache.flink.api.common.typeutils.base.GenericArraySerializerSnapshot"}.get(kind, _COMP_CLS.get(kind, kind))
    return TypeNode(kind, cls, (simple(elem),))


ARRAYS = [
    ("sarray", "string", pa.array([["a", "é", None], [], ["x" * 200, "😀"], None][:3])),
    ("sarray", "string", pa.array([[t] * 3 for t in _TEXT], pa.large_list(pa.string())).slice(3)),
    ("parray", "long", pa.array([[1, 2, 3], [], [2**62, -1]], pa.list_(pa.int64()))),
    ("garray", "int", pa.array([[1, None, 3], [None], [], [7]], pa.list_(pa.int32()))),
    ("list", "string", pa.array([["a"], ["b", "c"], []])),
    ("parray", "long", pa.array([[1], None])),  # a null array: the per-value writer's error
]


@pytest.mark.parametrize(("kind", "elem", "arr"), ARRAYS, ids=[f"{k}-{i}" for i, (k, _, _) in enumerate(ARRAYS)])
def test_arrays(kind, elem, arr):
    node = _array_node(kind, elem)
    if arr.null_count:
        with pytest.raises(TypeError):
            column_encoder(node, "ctx")(arr)
        return
    assert_same(node, arr)
