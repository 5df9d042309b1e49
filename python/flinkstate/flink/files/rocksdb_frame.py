"""A RocksDB column family's resolved records laid out for the canonical decoders: keys and values apart (`records_apart`,
for the vector decoders, which read each where it is) or framed as canonical records (i32 klen, key, i32 vlen, value;
`records_buffer`, for the one-by-one decoders). The values come as views of the SSTs' decompressed blocks
(`views.Views`, a list state's put and merge operands as parts joined with ','), copied once.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from flinkstate.flink.files.views import Views, binary_parts

__all__ = ["joined", "records_apart", "records_buffer"]


def records_buffer(keys: pa.Array, parts: Views, counts: np.ndarray | None = None) -> tuple[pa.Buffer, np.ndarray]:
    """Keys and values framed as canonical records (i32 klen, key, i32 vlen, value) and each record's offset: the values
    gathered from their views (counts[i] parts for key i joined with ',', None: one each), the big-endian lengths as
    4-byte binaries, joined with each key and value by Arrow's element-wise join in one pass (faster than a gather of
    views of every piece: a record's four views outweigh its bytes)."""
    keys = keys if pa.types.is_large_binary(keys.type) else keys.cast(pa.large_binary())
    fixed = _fixed_records(keys, parts) if counts is None else None
    if fixed is not None:
        return fixed
    values = joined(parts, counts)
    framed = pc.binary_join_element_wise(_lengths(keys), keys, _lengths(values), values, pa.scalar(b"", pa.large_binary()))
    offsets, _ = binary_parts(framed)
    data = framed.buffers()[2]
    body = data.slice(int(offsets[0]), int(offsets[-1] - offsets[0])) if data is not None else pa.py_buffer(b"")
    return body, offsets[:-1] - offsets[0]


def records_apart(keys: pa.Array, parts: Views, counts: np.ndarray | None = None
                  ) -> tuple[tuple[pa.Buffer, np.ndarray, np.ndarray], tuple[pa.Buffer, np.ndarray, np.ndarray]]:
    """Keys and values as (bytes, offsets, lengths) each, for decoders that read them apart (`records_buffer` without
    the framing copy): the keys' own data buffer; the values where they lie when one decompressed buffer holds them
    (or a few that hold little else, joined: `Views.in_place`), else, when all have one width, their bytes laid out as
    the rows of a matrix, else gathered from their views (joined as records_buffer joins them)."""
    koffs, kdata = binary_parts(keys)
    n = len(keys)
    klen = np.diff(koffs)
    key_part = (pa.py_buffer(kdata), koffs[:-1], klen)
    where = parts.in_place() if counts is None else None
    if where is not None:  # the values' decompressed buffer (or a few joined): read there
        data, starts, lengths = where
        return key_part, (pa.py_buffer(data), starts, lengths)
    vw = int(parts.lengths()[0]) if n else 0
    rows = parts.fixed(vw) if counts is None and n else None
    if rows is not None:
        return key_part, (pa.py_buffer(rows.reshape(-1)), np.arange(n, dtype=np.int64) * vw, np.full(n, vw, np.int64))
    values = joined(parts, counts)
    voffs, vdata = binary_parts(values)
    return key_part, (pa.py_buffer(vdata), voffs[:-1], np.diff(voffs))


def _fixed_records(keys: pa.Array, parts: Views) -> tuple[pa.Buffer, np.ndarray] | None:
    """Records of one key width and one value width (most of Flink's states: fixed-width keys and values), framed as
    rows of a byte matrix: four column copies, the values' bytes from `Views.fixed`; None when the widths vary or the
    values' bytes are not to be had as one matrix."""
    n = len(keys)
    koffs, kdata = binary_parts(keys)
    if not n or not len(kdata):
        return None
    kw, vw = int(koffs[1] - koffs[0]), int(parts.lengths()[0])
    if int(koffs[-1] - koffs[0]) != n * kw or (np.diff(koffs) != kw).any():
        return None
    values = parts.fixed(vw)
    if values is None:
        return None
    stride = 8 + kw + vw
    rows = np.empty((n, stride), np.uint8)
    rows[:, :4] = np.frombuffer(kw.to_bytes(4, "big"), np.uint8)
    rows[:, 4 : 4 + kw] = kdata[int(koffs[0]) : int(koffs[-1])].reshape(n, kw)
    rows[:, 4 + kw : 8 + kw] = np.frombuffer(vw.to_bytes(4, "big"), np.uint8)
    rows[:, 8 + kw :] = values
    return pa.py_buffer(rows.reshape(-1)), np.arange(n, dtype=np.int64) * stride


def joined(parts: Views, counts: np.ndarray | None) -> pa.LargeBinaryArray:
    """The values the parts make: copied out of their blocks, counts[i] parts of value i joined with ',' (None: one each)."""
    values = parts.array()
    if counts is None:
        return values
    lists = pa.LargeListArray.from_arrays(pa.array(np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)), values)
    return pc.binary_join(lists, pa.scalar(b",", pa.large_binary())).cast(pa.large_binary())


def _lengths(arr: pa.Array) -> pa.LargeBinaryArray:
    """Each binary's length as a 4-byte big-endian binary (Flink's i32 length prefix)."""
    offsets, _ = binary_parts(arr)
    n = len(arr)
    return pa.Array.from_buffers(pa.large_binary(), n, [None, pa.py_buffer(np.arange(0, 4 * n + 1, 4, dtype=np.int64)),
                                                        pa.py_buffer(np.diff(offsets).astype(">i4"))])
