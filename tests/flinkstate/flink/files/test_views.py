"""Byte ranges gathered through Arrow binary views equal the slices they name: inline (up to 12 bytes) and pointing
ranges, empty ones, ranges in the last 12 bytes of the data, several data arrays numbered after one another."""

from __future__ import annotations

import numpy as np
import pytest

from flinkstate.flink.files.views import Views, gather, range_views


def test_ranges_equal_their_slices() -> None:
    rng = np.random.default_rng(7)
    data = rng.integers(0, 256, 1000, dtype=np.uint8)
    starts = np.array([0, 3, 990, 999, 1000, 500, 100, 988, 0])
    lengths = np.array([0, 12, 10, 1, 0, 13, 200, 12, 1000])
    views, buffers = range_views(data, starts, lengths)
    got = gather(views, buffers).to_pylist()
    assert got == [data[s : s + n].tobytes() for s, n in zip(starts, lengths, strict=True)]


@pytest.mark.parametrize(("low", "high"), [(0, 13), (13, 40), (0, 40)])
def test_ranges_all_inline_all_pointing_or_mixed(low: int, high: int) -> None:
    """Ranges all of 12 bytes or fewer (a state's fixed-width values), all longer (its keys), or both: the slices."""
    rng = np.random.default_rng(high)
    data = rng.integers(0, 256, 5000, dtype=np.uint8)
    lengths = rng.integers(low, high, 400)
    starts = rng.integers(0, 5000 - lengths)
    got = gather(*range_views(data, starts, lengths)).to_pylist()
    assert got == [data[s : s + n].tobytes() for s, n in zip(starts, lengths, strict=True)]


def test_views_of_two_arrays_number_their_buffers() -> None:
    a, b = np.frombuffer(b"first array, long enough to point into", np.uint8), np.frombuffer(b"second: also pointed into", np.uint8)
    va, ba = range_views(a, np.array([0, 6]), np.array([20, 5]))
    vb, bb = range_views(b, np.array([0, 8]), np.array([17, 4]), first_buffer=len(ba))
    got = gather(np.concatenate([va, vb]), ba + bb).to_pylist()
    assert got == [b"first array, long en", b"array", b"second: also poin", b"also"]


def test_a_range_over_one_gib_is_refused() -> None:
    with pytest.raises(ValueError, match="over 1 GiB"):
        range_views(np.zeros(16, np.uint8), np.array([0]), np.array([1 << 30]))


def test_ranges_taken_sliced_and_concatenated_equal_their_slices() -> None:
    """Views of ranges (not yet views) of two data arrays, taken, sliced and concatenated, among them views made of
    explicit rows: their bytes as one binary array and, when of one width, as a matrix, are the slices they name."""
    rng = np.random.default_rng(11)
    a, b = rng.integers(0, 256, 3000, dtype=np.uint8), rng.integers(0, 256, 2000, dtype=np.uint8)

    def ranges(data: np.ndarray, n: int, width: int | None = None) -> tuple[Views, list[bytes]]:
        lengths = rng.integers(0, 40, n) if width is None else np.full(n, width)
        starts = rng.integers(0, len(data) - lengths + 1)
        return Views.of(data, starts, lengths), [data[s : s + k].tobytes() for s, k in zip(starts, lengths, strict=True)]

    va, want_a = ranges(a, 50)
    vb, want_b = ranges(b, 30)
    idx = rng.permutation(50)[:20]
    parts = [va.take(idx), va.slice(5, 25), vb, va.slice(0, 0)]
    want = [want_a[i] for i in idx] + want_a[5:25] + want_b
    joined = Views.concat(parts)
    assert joined.array().to_pylist() == want
    assert joined.lengths().tolist() == [len(x) for x in want]
    eager = Views(*range_views(b, np.array([0, 7]), np.array([3, 20])))  # explicit rows: concatenated as views
    assert Views.concat([joined, eager]).array().to_pylist() == [*want, b[:3].tobytes(), b[7:27].tobytes()]

    for width in (0, 4, 12, 19):
        fa, fwant_a = ranges(a, 40, width)
        fb, fwant_b = ranges(b, 25, width)
        both = Views.concat([fa.slice(3, 30), fb.take(np.array([4, 0, 9]))])
        rows = both.fixed(width)
        assert rows is not None and rows.shape == (30, width)
        assert [r.tobytes() for r in rows] == fwant_a[3:30] + [fwant_b[i] for i in (4, 0, 9)]
        eager_rows = Views(both.views, both.buffers).fixed(width)  # from the views' inline bytes, up to 12
        assert eager_rows is None if width > 12 else np.array_equal(eager_rows, rows)
    assert joined.fixed(5) is None  # several widths


def test_ranges_in_place_are_read_where_they_lie() -> None:
    """Ranges of one array are that array; of several, the arrays joined when they hold little besides the ranges
    (their starts moved to the joined bytes); none once laid out as views or when the arrays hold mostly other bytes."""
    a, b = np.frombuffer(b"0123456789abcdef", np.uint8), np.frombuffer(b"ghijklmnopqrstuv", np.uint8)
    one = Views.of(a, np.array([2, 10]), np.array([3, 6]))
    data, starts, lengths = one.in_place()
    assert data is a and [data[s : s + n].tobytes() for s, n in zip(starts, lengths, strict=True)] == [b"234", b"abcdef"]
    two = Views.concat([one, Views.of(b, np.array([1, 0]), np.array([15, 4]))]).take(np.array([3, 0, 2, 1]))
    data, starts, lengths = two.in_place()
    assert [data[s : s + n].tobytes() for s, n in zip(starts, lengths, strict=True)] == [b"ghij", b"234", b"hijklmnopqrstuv", b"abcdef"]
    assert Views(two.views, two.buffers).in_place() is None
    big = np.zeros(1 << 20, np.uint8)
    sparse = Views.concat([Views.of(big, np.array([5]), np.array([3])), Views.of(a, np.array([0]), np.array([1]))])
    assert sparse.in_place() is None  # a MiB of other bytes: not worth joining
