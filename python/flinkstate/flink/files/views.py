"""Many byte ranges gathered into one binary array by Arrow: numpy builds Arrow binary views (16 bytes each, a range
of up to 12 bytes inline, else its first 4 bytes, a buffer number and an offset) and Arrow's cast to large_binary
copies every range once, in C++. The RocksDB reader's hot paths (SST keys and values, canonical record framing) use it
instead of per-byte numpy index arithmetic."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

__all__ = ["Views", "binary_parts", "gather", "range_views", "windows"]

_SPAN = 1 << 30  # each data buffer a view points into starts at a multiple of this and spans two (offsets are int32)
# length -> the 3 little-endian u32 masks keeping a range's first min(length, 12) bytes
_KEEP = np.array([[(1 << (8 * min(max(c - 4 * k, 0), 4))) - 1 for k in range(3)] for c in range(13)], "<u4").view(
    np.dtype((np.void, 12))).ravel()


def windows(data: np.ndarray, w: int) -> np.ndarray:
    """Every w-byte window of data as one item (void of w bytes, stride 1): a fancy index copies whole windows at once."""
    return np.ndarray(shape=(len(data) - w + 1,), dtype=np.dtype((np.void, w)), buffer=data, strides=(1,))


def _heads(data: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """The first 12 bytes of each range (m, 3 little-endian u32), zero past the end of data."""
    n = len(data)
    if not len(starts):
        return np.zeros((0, 3), "<u4")
    if n >= 12 and int(starts.max()) <= n - 12:  # the common case: no range starts in the last 12 bytes
        return windows(data, 12)[starts].view("<u4").reshape(-1, 3)
    late = starts > n - 12
    head = windows(data, 12)[np.minimum(starts, n - 12)] if n >= 12 else np.zeros(len(starts), _KEEP.dtype)
    if late.any():  # ranges starting in the last 12 bytes: read from a zero-padded copy of the tail
        tail_at = max(0, n - 12)
        tail = np.concatenate([data[tail_at:], np.zeros(12, np.uint8)])
        head[late] = windows(tail, 12)[starts[late] - tail_at]
    return head.view("<u4").reshape(-1, 3)


def range_views(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray, first_buffer: int = 0) -> tuple[np.ndarray, list[pa.Buffer]]:
    """Views of data[starts[i] : starts[i] + lengths[i]] ((m, 4) u32) and the data buffers they number from first_buffer.

    A range must be under 1 GiB (Arrow's int32 view offsets; data itself may be larger: it is split in 1 GiB steps).
    An inline range (up to 12 bytes) holds its bytes, zero after its length; a longer one its first 4 bytes, a buffer
    number and an offset. All inline or none (a state's fixed-width values, its longer keys) skips the other's work."""
    if len(lengths) and int(lengths.max()) >= _SPAN:
        raise ValueError(f"a binary value of {int(lengths.max())} bytes is over 1 GiB")
    views = np.empty((len(starts), 4), "<u4")
    views[:, 0] = lengths
    views[:, 1:] = _heads(data, starts)
    inline = lengths <= 12
    if inline.any():  # zero past the length (a longer range's mask keeps all: its words 2 and 3 are set below)
        views[:, 1:] &= _KEEP[np.minimum(lengths, 12)].view("<u4").reshape(-1, 3)
    if not inline.all():
        far = slice(None) if not inline.any() else np.flatnonzero(~inline)
        views[far, 2] = first_buffer + (starts[far] >> 30)
        views[far, 3] = starts[far] & (_SPAN - 1)
    buffers = [pa.py_buffer(data[b * _SPAN : (b + 2) * _SPAN]) for b in range(max(1, -(-len(data) // _SPAN)))]
    return views, buffers


def gather(views: np.ndarray, buffers: list[pa.Buffer]) -> pa.LargeBinaryArray:
    """The ranges the views name, copied once into a large_binary array (Arrow's cast)."""
    arr = pa.Array.from_buffers(pa.binary_view(), len(views), [None, pa.py_buffer(np.ascontiguousarray(views)), *buffers])
    return arr.cast(pa.large_binary())


def binary_parts(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(offsets into the data, data bytes) of a binary or large_binary array."""
    bufs = arr.buffers()
    width = 8 if pa.types.is_large_binary(arr.type) else 4
    offs = (np.frombuffer(bufs[1], np.int64 if width == 8 else np.int32, len(arr) + 1, arr.offset * width).astype(np.int64)
            if bufs[1] is not None else np.zeros(1, np.int64))
    data = np.frombuffer(bufs[2], np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    return offs, data


class Views:
    """Byte ranges as Arrow binary views ((n, 4) u32 rows, see `range_views`) over a list of buffers, not copied: taken,
    concatenated and reordered as 16-byte rows, and gathered (one copy, in C++) only where their bytes are laid out.
    The RocksDB reader keeps SST values this way from the decompressed blocks to the canonical record framing."""

    __slots__ = ("buffers", "views")

    def __init__(self, views: np.ndarray, buffers: list[pa.Buffer]) -> None:
        self.views, self.buffers = views, buffers

    def __len__(self) -> int:
        return len(self.views)

    @classmethod
    def of(cls, data: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> Views:
        """Views of data[starts[i] : starts[i] + lengths[i]] (data is referenced, not copied)."""
        return cls(*range_views(data, starts, lengths))

    @classmethod
    def of_array(cls, arr: pa.Array) -> Views:
        """Views of the values of a binary or large_binary array (its data buffer referenced)."""
        offs, data = binary_parts(arr)
        if len(offs) != len(arr) + 1:  # no offsets buffer (an empty array)
            offs = np.zeros(len(arr) + 1, np.int64)
        return cls.of(data, offs[:-1], np.diff(offs))

    @classmethod
    def concat(cls, parts: list[Views]) -> Views:
        """The views of parts one after the other, each part's buffer numbers shifted past the buffers before it."""
        if len(parts) == 1:
            return parts[0]
        rows, buffers = [], []
        for p in parts:
            v = p.views
            if buffers and len(v):
                v = v.copy()
                far = v[:, 0] > 12
                v[far, 2] += len(buffers)
            rows.append(v)
            buffers.extend(p.buffers)
        return cls(np.concatenate(rows) if rows else np.zeros((0, 4), "<u4"), buffers)

    def slice(self, start: int, stop: int) -> Views:
        """The views start..stop (no copy)."""
        return Views(self.views[start:stop], self.buffers)

    def take(self, idx: np.ndarray) -> Views:
        """The views at these positions (16 bytes copied each; the buffers shared)."""
        return Views(self.views[idx], self.buffers)

    def lengths(self) -> np.ndarray:
        """Each range's length."""
        return self.views[:, 0].astype(np.int64)

    def array(self) -> pa.LargeBinaryArray:
        """The ranges copied into a large_binary array."""
        return gather(self.views, self.buffers)

