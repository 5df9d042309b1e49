"""The decoded stream the vector readers read (`Source`) and their primitive reads: fixed-width values at many offsets
(`gather`), byte offsets of many segments (`segments`) and the bytes of many slices as one Arrow array (`byte_slices`).

`byte_slices` is the hot one (strings, byte[], raw values): when the slices come in stream order (as a state's records
do), the stream itself is seen as an Arrow binary array of alternating slices and the gaps between them, and Arrow's
take copies the slices out (one memcpy each), instead of gathering every byte through an index array.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

__all__ = ["Source", "binary_parts", "byte_slices", "gather", "segments"]

_I32_MAX = 2**31 - 1


class Source:
    """A decoded stream: the same bytes as a numpy uint8 array, as bytes (for the one-by-one fallbacks) and, once
    asked for, as an Arrow buffer (zero-copy)."""

    __slots__ = ("_pbuf", "arr", "buf")

    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.arr = np.frombuffer(buf, dtype=np.uint8)
        self._pbuf: pa.Buffer | None = None

    @property
    def pbuf(self) -> pa.Buffer:
        """The stream as an Arrow buffer over the same memory."""
        if self._pbuf is None:
            self._pbuf = pa.py_buffer(self.buf)
        return self._pbuf


def gather(arr: np.ndarray, pos: np.ndarray, dtype: str) -> np.ndarray:
    """The big-endian fixed-width values at byte offsets pos, as a native-endian numpy array."""
    dt = np.dtype(dtype)
    w = dt.itemsize
    if w == 1:
        return arr[pos].view(dt)
    if len(arr) < w:
        if len(pos):
            raise IndexError("a value runs past the end of the stream")
        return np.zeros(0, dt.newbyteorder("="))
    # Overlapping values, one starting at every byte (a view of stride 1): one typed element gathered per offset.
    values = np.ndarray((len(arr) - w + 1,), dtype=dt, buffer=arr, offset=0, strides=(1,))
    return values[pos].astype(dt.newbyteorder("="))


def segments(starts: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """The byte offsets of the concatenated segments [start, start + len)."""
    total = int(lens.sum())
    if total == 0:
        return np.zeros(0, np.int64)
    offsets = np.cumsum(lens) - lens
    return np.repeat(starts - offsets, lens) + np.arange(total)


def byte_slices(src: Source, starts: np.ndarray, lens: np.ndarray) -> pa.BinaryArray:
    """The bytes [starts[i], starts[i] + lens[i]) of the stream, one binary value each (no nulls).

    IndexError when a slice runs past the end of the stream, ValueError when they hold 2 GiB or more."""
    n = len(starts)
    if n == 0:
        return pa.array([], pa.binary())
    starts = np.minimum(starts, len(src.arr))  # empty slices of absent values may sit just past the end
    stops = starts + lens
    if int(stops.max()) > len(src.arr) or int(lens.min()) < 0 or int(starts.min()) < 0:
        raise IndexError("a value runs past the end of the stream")
    if int(lens.sum()) > _I32_MAX:
        raise ValueError("more than 2 GiB of string data in one chunk")
    bounds = np.empty(2 * n, np.int64)
    bounds[0::2] = starts
    bounds[1::2] = stops
    if len(src.arr) <= _I32_MAX and bool((bounds[1:] >= bounds[:-1]).all()):
        # the stream as slice, gap, slice, gap ..., slice: the even values are the slices
        spans = pa.Array.from_buffers(pa.binary(), 2 * n - 1, [None, pa.py_buffer(bounds.astype(np.int32)), src.pbuf])
        return spans.take(pa.array(np.arange(0, 2 * n - 1, 2, dtype=np.int32)))
    offsets = np.zeros(n + 1, np.int32)
    np.cumsum(lens, out=offsets[1:])
    data = src.arr[segments(starts, lens)]
    return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def binary_parts(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(int32 offsets, data bytes up to the last offset) of a binary or string array, as views of its buffers."""
    bufs = arr.buffers()
    offsets = np.frombuffer(bufs[1], np.int32, len(arr) + 1, arr.offset * 4)
    if bufs[2] is None:
        return offsets, np.zeros(0, np.uint8)
    return offsets, np.frombuffer(bufs[2], np.uint8, int(offsets[-1]))
