"""Vectorized decoding of PyFlink coder bytes (numpy over a binary column's buffers, no per-value Python loop).

Each blob of the column holds one or more values back to back (one Beam bag append). Fixed-width
types (LONG, INT, SHORT, BYTE, DOUBLE, FLOAT, BOOLEAN, DATE, TIMESTAMP(3)) are the blobs' bytes
reinterpreted; length-prefixed types (STRING, byte arrays, pickles left as bytes) are walked one
value per blob per step (as many steps as the longest blob has values), then gathered at once.
ROW, arrays, maps and unpickling stay on the per-value path of `pyflink.coder_reader`.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

__all__ = ["vector_values"]

_FIXED: dict[pa.DataType, str] = {
    pa.int64(): ">i8", pa.int32(): ">i4", pa.int16(): ">i2", pa.int8(): ">i1", pa.float64(): ">f8", pa.float32(): ">f4",
    pa.bool_(): "u1", pa.date32(): ">i4", pa.timestamp("ms"): ">i8",
}


def _buffers(blobs: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(offsets as int64, data bytes) of a binary array."""
    bufs = blobs.buffers()
    offsets = np.frombuffer(bufs[1], dtype=np.int32)[blobs.offset : blobs.offset + len(blobs) + 1].astype(np.int64)
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    return offsets, data


def _fixed(blobs: pa.Array, t: pa.DataType) -> tuple[np.ndarray, pa.Array]:
    dtype = np.dtype(_FIXED[t])
    offsets, data = _buffers(blobs)
    lens = np.diff(offsets)
    if np.any(lens % dtype.itemsize):
        bad = int(np.flatnonzero(lens % dtype.itemsize)[0])
        raise ValueError(f"a value of {lens[bad]} bytes is not a whole number of {t} ({dtype.itemsize} bytes each)")
    idx = np.repeat(np.arange(len(blobs), dtype=np.int64), lens // dtype.itemsize)
    raw = np.frombuffer(data[offsets[0] : offsets[-1]].tobytes(), dtype=dtype)
    if pa.types.is_boolean(t):
        return idx, pa.array(raw != 0, pa.bool_())
    return idx, pa.array(raw.astype(dtype.newbyteorder("=")), t)


def _sized(blobs: pa.Array, t: pa.DataType) -> tuple[np.ndarray, pa.Array]:
    """Values of i32 length + bytes each: walk every blob one value per step, then gather the bytes at once."""
    offsets, data = _buffers(blobs)
    starts, ends = offsets[:-1], offsets[1:]
    pos = starts.copy()
    active = np.flatnonzero(pos < ends)
    blob_ids, value_starts, value_lens = [], [], []
    while active.size:
        p = pos[active]
        if np.any(p + 4 > ends[active]):
            raise ValueError("a length prefix runs past the end of its value")
        n = (data[p].astype(np.int64) << 24) | (data[p + 1].astype(np.int64) << 16) | (data[p + 2].astype(np.int64) << 8) \
            | data[p + 3].astype(np.int64)
        n = np.where(n >= 1 << 31, n - (1 << 32), n)
        if np.any(n < 0) or np.any(p + 4 + n > ends[active]):
            raise ValueError("a length prefix is negative or runs past the end of its value")
        blob_ids.append(active)
        value_starts.append(p + 4)
        value_lens.append(n)
        pos[active] = p + 4 + n
        active = active[pos[active] < ends[active]]
    if not blob_ids:
        return np.zeros(0, np.int64), pa.array([], t)
    ids = np.concatenate(blob_ids)
    order = np.argsort(ids, kind="stable")  # blob first, then the order within the blob
    ids, vstarts, vlens = ids[order], np.concatenate(value_starts)[order], np.concatenate(value_lens)[order]
    out_offsets = np.zeros(len(vlens) + 1, np.int64)
    np.cumsum(vlens, out=out_offsets[1:])
    gather = np.repeat(vstarts - out_offsets[:-1], vlens) + np.arange(out_offsets[-1], dtype=np.int64)
    arr = pa.Array.from_buffers(t, len(vlens), [None, pa.py_buffer(out_offsets.astype(np.int32)), pa.py_buffer(data[gather])])
    if pa.types.is_string(t):
        arr.validate(full=True)  # UTF-8 checked (ArrowInvalid otherwise)
    return ids, arr


def vector_values(blobs: pa.Array, t: pa.DataType) -> tuple[np.ndarray, pa.Array] | None:
    """(blob index of each value, the values) of a null-free binary column of coder bytes; None: no vector path for t."""
    if blobs.null_count or not pa.types.is_binary(blobs.type):
        return None
    if t in _FIXED:
        return _fixed(blobs, t)
    if pa.types.is_string(t) or pa.types.is_binary(t):
        return _sized(blobs, t)
    return None
