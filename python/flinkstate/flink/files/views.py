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


_JOIN_SLACK = 4  # Views.in_place joins its data arrays when they hold at most this many times its ranges' bytes


class Views:
    """Byte ranges of a few data arrays, not copied: taken, sliced and concatenated as (array, start, length) triples,
    and copied only where their bytes are laid out: as one binary array (Arrow binary views, see `range_views`, built
    then and gathered in C++) or, when all have one width, as the rows of a byte matrix (`fixed`). The RocksDB reader
    keeps SST values this way from the decompressed blocks to the decoders. Views made of explicit view rows
    ((n, 4) u32, over their buffers) stay in that form."""

    __slots__ = ("_buffers", "_datas", "_ids", "_lengths", "_starts", "_views")

    def __init__(self, views: np.ndarray, buffers: list[pa.Buffer]) -> None:
        self._views: np.ndarray | None = views
        self._buffers: list[pa.Buffer] = buffers
        self._datas: list[np.ndarray] = []
        self._ids: np.ndarray | None = None
        self._starts = self._lengths = np.zeros(0, np.int64)

    @classmethod
    def _ranges(cls, datas: list[np.ndarray], ids: np.ndarray | None, starts: np.ndarray, lengths: np.ndarray) -> Views:
        """Ranges data[ids[i]][starts[i] : starts[i] + lengths[i]] (ids None: all of datas[0]), not yet as views."""
        out = cls.__new__(cls)
        out._views, out._buffers = None, []
        out._datas, out._ids, out._starts, out._lengths = datas, ids, starts, lengths
        return out

    def __len__(self) -> int:
        return len(self._views) if self._views is not None else len(self._starts)

    @classmethod
    def of(cls, data: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> Views:
        """Views of data[starts[i] : starts[i] + lengths[i]] (data is referenced, not copied)."""
        return cls._ranges([data], None, np.asarray(starts, np.int64), np.asarray(lengths, np.int64))

    @classmethod
    def of_array(cls, arr: pa.Array) -> Views:
        """Views of the values of a binary or large_binary array (its data buffer referenced)."""
        offs, data = binary_parts(arr)
        if len(offs) != len(arr) + 1:  # no offsets buffer (an empty array)
            offs = np.zeros(len(arr) + 1, np.int64)
        return cls.of(data, offs[:-1], np.diff(offs))

    @property
    def views(self) -> np.ndarray:
        """The ranges as Arrow binary views ((n, 4) u32 rows over `buffers`), built on first use."""
        if self._views is None:
            self._build()
        assert self._views is not None
        return self._views

    @property
    def buffers(self) -> list[pa.Buffer]:
        """The data buffers the views number."""
        if self._views is None:
            self._build()
        return self._buffers

    def _build(self) -> None:
        if self._ids is None:
            self._views, self._buffers = range_views(self._datas[0], self._starts, self._lengths)
            return
        views, buffers = np.empty((len(self._starts), 4), "<u4"), []
        for k, data in enumerate(self._datas):
            sel = np.flatnonzero(self._ids == k)
            views[sel], more = range_views(data, self._starts[sel], self._lengths[sel], len(buffers))
            buffers.extend(more)
        self._views, self._buffers = views, buffers

    @classmethod
    def concat(cls, parts: list[Views]) -> Views:
        """The ranges of parts one after the other (as views: each part's buffer numbers shifted past those before it)."""
        if len(parts) == 1:
            return parts[0]
        if parts and all(p._views is None for p in parts):
            datas: list[np.ndarray] = []
            ids = []
            for p in parts:
                at = {id(d): i for i, d in enumerate(datas)}
                mine = []
                for d in p._datas:
                    if id(d) not in at:
                        at[id(d)] = len(datas)
                        datas.append(d)
                    mine.append(at[id(d)])
                ids.append(np.asarray(mine, np.int32)[p._ids] if p._ids is not None else np.full(len(p), mine[0], np.int32))
            all_ids = np.concatenate(ids)
            return cls._ranges(datas, None if len(datas) == 1 else all_ids, np.concatenate([p._starts for p in parts]),
                               np.concatenate([p._lengths for p in parts]))
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
        """The ranges start..stop (no copy)."""
        if self._views is not None:
            return Views(self._views[start:stop], self._buffers)
        ids = None if self._ids is None else self._ids[start:stop]
        return Views._ranges(self._datas, ids, self._starts[start:stop], self._lengths[start:stop])

    def take(self, idx: np.ndarray) -> Views:
        """The ranges at these positions (their bounds copied; the data shared)."""
        if self._views is not None:
            return Views(self._views[idx], self._buffers)
        ids = None if self._ids is None else self._ids[idx]
        return Views._ranges(self._datas, ids, self._starts[idx], self._lengths[idx])

    def lengths(self) -> np.ndarray:
        """Each range's length."""
        return self._lengths if self._views is None else self._views[:, 0].astype(np.int64)

    def in_place(self) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """(data, starts, lengths) of ranges not yet laid out as views, for a reader that reads them where they are: their
        one data array (no copy), or their few joined (one copy of each, when they hold little besides these ranges,
        which is cheaper than copying range by range). None otherwise."""
        if self._views is not None or not self._datas:
            return None
        if self._ids is None:
            return self._datas[0], self._starts, self._lengths
        size = sum(len(d) for d in self._datas)
        if size > _JOIN_SLACK * int(self._lengths.sum()) + (1 << 16):
            return None
        bases = np.cumsum([0] + [len(d) for d in self._datas[:-1]])
        return np.concatenate(self._datas), self._starts + bases[self._ids], self._lengths

    def fixed(self, width: int) -> np.ndarray | None:
        """The ranges' bytes as an (n, width) matrix when every range is width bytes long (else None): one row gather
        from the data, not views."""
        n = len(self)
        lengths = self.lengths()
        if not n or (lengths != width).any():
            return None
        if not width:
            return np.zeros((n, 0), np.uint8)
        if self._views is not None:
            if width > 12:
                return None  # the views hold no more than 12 bytes inline
            return np.ascontiguousarray(np.ascontiguousarray(self._views).view(np.uint8).reshape(n, 16)[:, 4 : 4 + width])
        out = np.empty(n, np.dtype((np.void, width)))
        for k, data in enumerate(self._datas):
            sel = slice(None) if self._ids is None else np.flatnonzero(self._ids == k)
            out[sel] = windows(data, width)[self._starts[sel]]
        return out.view(np.uint8).reshape(n, width)

    def array(self) -> pa.LargeBinaryArray:
        """The ranges copied into a large_binary array."""
        return gather(self.views, self.buffers)
