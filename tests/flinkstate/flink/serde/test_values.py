"""Serializer byte formats that the small fixture does not reach (long strings, nested lists/maps)."""

from __future__ import annotations

import struct

from flink_bytes import varint7
from flinkstate.flink.serde.serializers import TypeNode
from flinkstate.flink.serde.values import make_reader, read_java_string


def java_string(s: str) -> bytes:
    """StringValue.writeString of s, written independently of the decoder."""
    units = struct.unpack(f"<{len(s.encode('utf-16-le')) // 2}H", s.encode("utf-16-le"))
    return varint7(len(units) + 1) + b"".join(varint7(u) for u in units)


def test_long_and_non_ascii_strings() -> None:
    for s in ["", "a" * 300, "é€😀" * 100 + "x", "\x00nul"]:
        data = java_string(s) + b"tail"
        assert read_java_string(data, 0) == (s, len(data) - 4)
    assert read_java_string(b"\x00", 0) == (None, 1)


def test_list_and_map_serializers() -> None:
    long_ = TypeNode("long", "Long")
    string = TypeNode("string", "String")
    lst = make_reader(TypeNode("list", "List", (long_,)), "ctx")
    assert lst(struct.pack(">iqq", 2, -1, 7), 0) == ([-1, 7], 20)
    mp = make_reader(TypeNode("map", "Map", (string, long_)), "ctx")
    data = struct.pack(">i", 2) + java_string("a") + b"\x00" + struct.pack(">q", 5) + java_string("b") + b"\x01"
    assert mp(data, 0) == ([("a", 5), ("b", None)], len(data))


def write_mask(mask: list[bool]) -> bytes:
    """Flink's MaskUtils.writeMask: 8 flags a byte, first flag in the high bit, last byte left-aligned."""
    out = bytearray()
    for i in range(0, len(mask), 8):
        part = mask[i : i + 8]
        b = 0
        for flag in part:
            b = (b << 1) | int(flag)
        out.append(b << (8 - len(part)))
    return bytes(out)


def test_row_with_a_two_byte_null_mask() -> None:
    """A 7-field Row: RowKind (2 bits) + 7 null flags span two mask bytes."""
    long_ = TypeNode("long", "Long")
    names = tuple(f"f{i}" for i in range(7))
    row = make_reader(TypeNode("row", "Row", (long_,) * 7, names), "ctx")
    nulls = [False, True, False, False, True, False, True]
    data = write_mask([False, False, *nulls]) + b"".join(struct.pack(">q", i) for i, n in enumerate(nulls) if not n)
    assert row(data, 0) == ({f"f{i}": None if n else i for i, n in enumerate(nulls)}, len(data))
    legacy = make_reader(TypeNode("row", "Row", (long_,) * 7, names, legacy_row=True), "ctx")
    data = write_mask(nulls) + b"".join(struct.pack(">q", i) for i, n in enumerate(nulls) if not n)
    assert legacy(data, 0) == ({f"f{i}": None if n else i for i, n in enumerate(nulls)}, len(data))


def test_local_dates_before_year_one() -> None:
    """LocalDateSerializer (i32 year, month, day) of dates before year 1 read as java.time's epoch days: -0044-03-15 is
    day -735525 (LocalDate.toEpochDay, recorded by KryoWire.java in tests/fixtures/kryo-wire), and back."""
    from flinkstate.flink.serde._temporal import _civil_from_days

    read = make_reader(TypeNode("localdate", "x"), "ctx")
    for (y, m, d), day in (((-44, 3, 15), -735525), ((-1, 1, 1), -719893), ((0, 3, 1), -719468), ((2024, 2, 29), 19782)):
        assert read(struct.pack(">i", y) + bytes([m, d]), 0) == (day, 6)
        assert _civil_from_days(day) == (y, m, d)
