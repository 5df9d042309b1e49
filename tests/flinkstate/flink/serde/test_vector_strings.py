"""The vector string reader (`_vstring`) against Java's StringValue encoding of random text: ASCII, 2- and 3-byte
units, surrogate pairs, empty, null and absent values, in stream order (Arrow copies them) and out of it (numpy)."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from flink_bytes import varint7
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flinkstate.flink.serde._vbuf import Source, byte_slices
from flinkstate.flink.serde._vstring import string_reader

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
TEXT = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=40)
VALUE = st.one_of(st.none(), TEXT, st.sampled_from(["", "a" * 130, "é€😀" * 30, "\x00\x80"]))


def java_string(s: str | None) -> bytes:
    """StringValue.writeString: varint(length + 1) (0 = null), then each UTF-16 unit as a 7-bit varint."""
    if s is None:
        return b"\x00"
    raw = s.encode("utf-16-le", "surrogatepass")
    units = struct.unpack(f"<{len(raw) // 2}H", raw)
    return varint7(len(units) + 1) + b"".join(varint7(u) for u in units)


def layout(values: list[str | None], gaps: list[int], present: list[bool]) -> tuple[Source, np.ndarray, list[int]]:
    """The strings in a stream with bytes between them (absent values take none): source, positions, end offsets."""
    buf, pos, ends = bytearray(), [], []
    for v, gap, here in zip(values, gaps, present, strict=True):
        buf += bytes([0x80 | gap]) * gap  # high bytes, so a reader running over its string's end would be caught
        pos.append(len(buf))
        if here:
            buf += java_string(v)
        ends.append(len(buf))
    return Source(bytes(buf) + b"\x00"), np.array(pos, np.int64), ends  # a record follows


@SETTINGS
@given(st.lists(st.tuples(VALUE, st.integers(0, 5), st.booleans()), max_size=30), st.booleans(), st.randoms())
def test_strings_equal_the_java_encoding(rows: list[tuple[str | None, int, bool]], all_present: bool, rnd) -> None:
    values = [v for v, _, _ in rows]
    present = [True if all_present else p for _, _, p in rows]
    src, pos, ends = layout(values, [g for _, g, _ in rows], present)
    mask = None if all_present else np.array(present, bool)
    want = [v if here else None for v, here in zip(values, present, strict=True)]
    out, end = string_reader(src, pos, mask)
    out.validate(full=True)
    assert out.to_pylist() == want
    assert end.tolist() == ends
    order = list(range(len(rows)))  # out of stream order: the same values
    rnd.shuffle(order)
    out, end = string_reader(src, pos[order], None if mask is None else mask[order])
    assert out.to_pylist() == [want[i] for i in order]
    assert end.tolist() == [ends[i] for i in order]


def test_a_string_running_past_the_stream_is_an_index_error() -> None:
    src = Source(java_string("ab€c")[:-2])
    with pytest.raises(IndexError):
        string_reader(src, np.array([0]), None)


def test_byte_slices_in_and_out_of_stream_order() -> None:
    src = Source(bytes(range(50)))
    starts, lens = np.array([3, 10, 10, 40]), np.array([2, 0, 5, 10])
    assert byte_slices(src, starts, lens).to_pylist() == [bytes(range(s, s + n)) for s, n in zip(starts, lens, strict=True)]
    assert byte_slices(src, starts[::-1], lens[::-1]).to_pylist() == [bytes(range(s, s + n)) for s, n in zip(starts[::-1], lens[::-1], strict=True)]
    with pytest.raises(IndexError):
        byte_slices(src, np.array([45]), np.array([6]))


@pytest.mark.parametrize(("data", "error"), [
    (b"\x03a\x80\x80\x80\x01", "longer than 3 bytes"),  # a unit varint of 4 bytes
    (b"\x02\xff\xff\x7f", "larger than 0xFFFF"),  # 21 bits
    (b"\x02\x80\xb0\x03", "surrogate"),  # 0xD800 alone
])
def test_malformed_units_are_value_errors(data: bytes, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        string_reader(Source(data + b"\x00"), np.array([0]), None)


def padded_varint7(n: int, width: int) -> bytes:
    """n as a 7-bit varint of at least `width` bytes (over-long ones end in zero bits: Java reads them the same)."""
    out = bytearray(varint7(n))
    while len(out) < width:
        out[-1] |= 0x80
        out.append(0)
    return bytes(out)


def _varint(buf: bytes, p: int) -> tuple[int, int]:
    """A little-endian 7-bit varint at p: its value and the position after it."""
    value, shift = 0, 0
    while True:
        b = buf[p]
        value |= (b & 0x7F) << shift
        p += 1
        if b < 0x80:
            return value, p
        shift += 7


def reference(buf: bytes, pos: int) -> tuple[str | None, int]:
    """StringValue.readString record by record: varint(length + 1), then `length` unit varints; the text and its end."""
    n, p = _varint(buf, pos)
    if n == 0:
        return None, p
    units = []
    for _ in range(n - 1):
        u, p = _varint(buf, p)
        units.append(u)
    return struct.pack(f"<{len(units)}H", *units).decode("utf-16-le"), p


UNITS_TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=12)
ENCODED = st.tuples(st.one_of(st.none(), UNITS_TEXT, st.sampled_from(["", "€" * 5, "日本語テキスト", "😀", "\x00"])),
                    st.lists(st.integers(1, 3), min_size=12, max_size=12))


def column(rows: list[tuple[str | None, list[int]]], gap: bytes) -> tuple[Source, np.ndarray]:
    """Each string with each unit over at least its width (as long as it fits 3 bytes), `gap` between them."""
    buf, pos = bytearray(), []
    for text, widths in rows:
        buf += gap
        pos.append(len(buf))
        if text is None:
            buf += b"\x00"
            continue
        raw = text.encode("utf-16-le", "surrogatepass")
        units = struct.unpack(f"<{len(raw) // 2}H", raw)
        buf += varint7(len(units) + 1)
        buf += b"".join(padded_varint7(u, widths[i % len(widths)]) for i, u in enumerate(units))
    return Source(bytes(buf) + b"\x00"), np.array(pos, np.int64)


@SETTINGS
@given(st.lists(ENCODED, min_size=1, max_size=40), st.integers(1, 40), st.sampled_from([b"", b"\x00", b"\xff\x80\x00"]))
def test_columns_of_many_strings_equal_the_record_by_record_reader(rows, copies: int, gap: bytes) -> None:
    """Enough non-ASCII strings for the vector path (and, once, few enough for the one-by-one one), in stream order
    and not, with over-long unit varints, NULs, nulls, absent values: the same strings and ends as record by record."""
    rows = rows * copies
    src, pos = column(rows, gap)
    want = [reference(src.buf, p) for p in pos.tolist()]
    out, end = string_reader(src, pos, None)
    out.validate(full=True)
    assert out.to_pylist() == [t for t, _ in want]
    assert end.tolist() == [e for _, e in want]
    present = np.arange(len(pos)) % 3 != 1
    out, end = string_reader(src, pos, present)
    assert out.to_pylist() == [t if here else None for (t, _), here in zip(want, present, strict=True)]
    assert end.tolist() == [e if here else p for (_, e), p, here in zip(want, pos.tolist(), present, strict=True)]
    order = np.arange(len(pos))[::-1]
    out, end = string_reader(src, pos[order], None)
    assert out.to_pylist() == [want[i][0] for i in order]
    assert end.tolist() == [want[i][1] for i in order]


def test_a_unit_spelt_over_three_bytes_over_several_is_a_value_error() -> None:
    for extra in (0, 20):  # one by one, and among many others (vector path)
        good = java_string("é€") * extra
        data = good + b"\x03a\x80\x80\x80\x01"
        with pytest.raises(ValueError, match="longer than 3 bytes"):
            string_reader(Source(data + b"\x00"), np.arange(extra + 1) * len(java_string("é€")), None)


BAD = [
    (b"\x03a\x80\x80\x80\x01", ValueError, "longer than 3 bytes"),
    (b"\x02\xff\xff\x7f", ValueError, "larger than 0xFFFF"),
    (b"\x02\x80\xb0\x03", ValueError, "surrogate"),  # 0xD800 alone
    (b"\x03\x80\xb8\x03a", ValueError, "surrogate"),  # 0xDC00 first
    (b"\x03\x80\xb0\x03a", ValueError, "surrogate"),  # 0xD800 then 'a'
    (b"\x03\x80\xb0\x03\x80\xb0\x03", ValueError, "surrogate"),  # two high ones
    (b"\x04\x80\x01", IndexError, "runs past"),  # 3 units, 2 bytes left
]


@pytest.mark.parametrize(("data", "error", "match"), BAD)
@pytest.mark.parametrize("others", [0, 30])
def test_malformed_strings_fail_alike_alone_and_among_many(data: bytes, error: type, match: str, others: int) -> None:
    """The same error for a bad string whether it is decoded one by one or with many non-ASCII ones around it."""
    good = java_string("s€😀")
    src = Source(good * others + data)
    with pytest.raises(error, match=match):
        string_reader(src, np.append(np.arange(others) * len(good), others * len(good)), None)


def test_a_string_may_not_run_into_the_next_one_in_stream_order() -> None:
    """3 units but the next string starts after 2 of them: the run would take its bytes."""
    good = java_string("é") * 20
    data = good + b"\x04\x80\x01" + java_string("é")
    pos = np.append(np.arange(21) * 3, [63])
    with pytest.raises(IndexError, match="runs past"):
        string_reader(Source(data + b"\x00" * 8), pos, None)
