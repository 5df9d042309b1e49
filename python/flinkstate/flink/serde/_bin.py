"""Columns of byte strings built with numpy: the output of the vectorised encoders (`_vencode`) and record assembly.

A `Bin` holds n byte strings, either all of one width (an (n, w) uint8 matrix, e.g. a Long key or a
key-group prefix) or of varying width (offsets n + 1 and the concatenated bytes). Serialized keys and
values are built by concatenating such parts row by row (`concat`: fixed-width parts copied into the
fields of one packed numpy row, others joined by Arrow's element-wise binary join), never value by
value; rows are gathered (`take`) as numpy void scalars or with Arrow's take; `Bin.arrow` gives the
Arrow binary array without copying.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["Bin", "binary_parts", "concat", "varint"]


def binary_parts(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(offsets from 0, data bytes) of a binary or string array (either offset width); null slots keep their bytes."""
    bufs = arr.buffers()
    wide = pa.types.is_large_binary(arr.type) or pa.types.is_large_string(arr.type)
    n = len(arr)
    if bufs[1] is None:
        return np.zeros(n + 1, np.int64), np.zeros(0, np.uint8)
    offs = np.frombuffer(bufs[1], np.int64 if wide else np.int32, n + 1, arr.offset * (8 if wide else 4)).astype(np.int64)
    data = np.frombuffer(bufs[2], np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    return offs - offs[0], data[offs[0] : offs[-1]]


class Bin:
    """n byte strings: fixed-width rows (`mat`, an (n, w) uint8 matrix) or variable ones (`offsets`, `data`)."""

    __slots__ = ("n", "mat", "offsets", "data")

    def __init__(self, n: int, mat: np.ndarray | None = None, offsets: np.ndarray | None = None, data: np.ndarray | None = None) -> None:
        self.n, self.mat, self.offsets, self.data = n, mat, offsets, data

    @staticmethod
    def fixed(mat: np.ndarray) -> Bin:
        """Rows of one width from an (n, w) uint8 matrix."""
        return Bin(mat.shape[0], mat=np.ascontiguousarray(mat, np.uint8))

    @staticmethod
    def var(offsets: np.ndarray, data: np.ndarray) -> Bin:
        """Rows data[offsets[i]:offsets[i + 1]] (offsets start at 0)."""
        return Bin(len(offsets) - 1, offsets=offsets.astype(np.int64, copy=False), data=data)

    @staticmethod
    def from_lens(lens: np.ndarray, data: np.ndarray) -> Bin:
        """Rows of these lengths cut from data in order."""
        offsets = np.zeros(len(lens) + 1, np.int64)
        np.cumsum(lens, out=offsets[1:])
        return Bin.var(offsets, data)

    @staticmethod
    def from_arrow(arr: pa.Array) -> Bin:
        """The bytes of a binary or string array (null slots as their stored bytes, usually none)."""
        return Bin.var(*binary_parts(arr))

    @property
    def width(self) -> int:
        """The width of every row, or -1 when they vary."""
        return self.mat.shape[1] if self.mat is not None else -1

    def lens(self) -> np.ndarray:
        """The byte length of each row."""
        if self.mat is not None:
            return np.full(self.n, self.mat.shape[1], np.int64)
        return np.diff(self.offsets)

    def as_var(self) -> tuple[np.ndarray, np.ndarray]:
        """(offsets, data) of the rows."""
        if self.mat is not None:
            return np.arange(self.n + 1, dtype=np.int64) * self.mat.shape[1], self.mat.reshape(-1)
        return self.offsets, self.data

    def take(self, idx: np.ndarray) -> Bin:
        """The rows at idx, in that order."""
        if self.width == 0:
            return Bin.fixed(np.zeros((len(idx), 0), np.uint8))
        if self.mat is not None:
            return Bin.fixed(self.rows()[idx].view(np.uint8).reshape(len(idx), self.width))
        return Bin.from_arrow(self.arrow().take(pa.array(idx)))

    def rows(self) -> np.ndarray:
        """Fixed-width rows (width > 0) as one numpy void scalar each: gathered and compared whole, fast."""
        return np.ascontiguousarray(self.mat).view(np.dtype((np.void, self.width))).reshape(self.n)

    def slice(self, start: int, stop: int) -> Bin:
        """Rows start..stop-1 (views, no copy)."""
        if self.mat is not None:
            return Bin.fixed(self.mat[start:stop])
        offs = self.offsets[start : stop + 1]
        return Bin.var(offs - offs[0], self.data[offs[0] : offs[-1]])

    def expand(self, present: np.ndarray) -> Bin:
        """len(present) rows: these rows where present is set (in order), empty ones elsewhere."""
        if present.all():
            return self
        lens = np.zeros(len(present), np.int64)
        lens[present] = self.lens()
        return Bin.from_lens(lens, self.as_var()[1])

    def keep(self, mask: np.ndarray) -> Bin:
        """The same rows, emptied where mask is not set."""
        return self.take(np.flatnonzero(mask)).expand(mask)

    def arrow(self) -> pa.Array:
        """A binary array of the rows (large_binary beyond 2 GiB)."""
        offsets, data = self.as_var()
        big = len(data) >= 2**31
        offs = offsets.astype(np.int64 if big else np.int32)
        return pa.Array.from_buffers(pa.large_binary() if big else pa.binary(), self.n,
                                     [None, pa.py_buffer(offs), pa.py_buffer(np.ascontiguousarray(data))])


def _side_by_side(parts: list[Bin]) -> Bin:
    """Fixed-width parts as one: each copied into its field of a packed structured row (faster than hstack)."""
    n = parts[0].n
    parts = [p for p in parts if p.width > 0]
    if not parts:
        return Bin.fixed(np.zeros((n, 0), np.uint8))
    widths = [p.width for p in parts]
    offsets = np.cumsum([0, *widths[:-1]]).tolist()
    dt = np.dtype({"names": [f"f{i}" for i in range(len(parts))], "formats": [np.dtype((np.void, w)) for w in widths],
                   "offsets": offsets, "itemsize": sum(widths)})
    out = np.empty(n, dt)
    for i, p in enumerate(parts):
        out[f"f{i}"] = p.rows()
    return Bin.fixed(out.view(np.uint8).reshape(n, sum(widths)))


def _merge_fixed(parts: list[Bin]) -> list[Bin]:
    """Adjacent fixed-width parts as one (a Long key and a VoidNamespace byte: one 9-byte part)."""
    out: list[Bin] = []
    run: list[Bin] = []
    for p in parts + [None]:  # type: ignore[list-item]
        if p is not None and p.mat is not None:
            run.append(p)
            continue
        if run:
            out.append(run[0] if len(run) == 1 else _side_by_side(run))
            run = []
        if p is not None:
            out.append(p)
    return out


def concat(parts: list[Bin]) -> Bin:
    """Row by row concatenation of parts with the same number of rows: fixed-width parts side by side (numpy),
    else Arrow's element-wise binary join (one pass in C++)."""
    parts = _merge_fixed(parts)
    if len(parts) == 1:
        return parts[0]
    n = parts[0].n
    arrays = [p.arrow() for p in parts]
    if sum(len(p.as_var()[1]) for p in parts) >= 2**31:
        arrays = [a.cast(pa.large_binary()) for a in arrays]
    joined = Bin.from_arrow(pc.binary_join_element_wise(*arrays, b""))
    lens = joined.lens()
    if n and (lens == lens[0]).all():  # one width after all (a string user key of one length): fixed rows
        return Bin.fixed(joined.data.reshape(n, int(lens[0])))
    return joined


def varint(values: np.ndarray) -> Bin:
    """Little-endian base-128 varints of non-negative values (StringValue's length header)."""
    v = values.astype(np.int64)
    nb = 1 + (v >= 1 << 7) + (v >= 1 << 14) + (v >= 1 << 21) + (v >= 1 << 28)
    if (nb == 1).all():
        return Bin.fixed(v.astype(np.uint8).reshape(-1, 1))
    b = Bin.from_lens(nb, np.empty(int(nb.sum()), np.uint8))
    at = b.offsets[:-1]
    for j in range(5):
        sel = nb > j
        if not sel.any():
            break
        byte = (v[sel] >> (7 * j)) & 0x7F
        b.data[at[sel] + j] = byte | np.where(nb[sel] > j + 1, 0x80, 0)
    return b
