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
