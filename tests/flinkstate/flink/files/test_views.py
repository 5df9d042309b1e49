"""Byte ranges gathered through Arrow binary views equal the slices they name: inline (up to 12 bytes) and pointing
ranges, empty ones, ranges in the last 12 bytes of the data, several data arrays numbered after one another."""

from __future__ import annotations

import numpy as np
import pytest

from flinkstate.flink.files.views import gather, range_views


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
