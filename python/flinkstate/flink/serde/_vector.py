"""Vectorised value decoding: one serializer applied to many records at once, with numpy over the buffer.

A vector reader takes the buffer (as a uint8 array and as bytes), one start offset per value and
an optional mask of the values that are present (absent ones, e.g. null map values or null Row
fields, take no bytes), and returns an Arrow array and the offsets just after each value.
Base types, chars, `StringValue` strings (UTF-16 unit varints re-encoded as UTF-8 with numpy,
a shortcut when all are ASCII), byte[], Row (null mask), Tuple and POJO (null flags), primitive, String[] and
generic arrays (`_vseq`: element j of every array at once) are vectorised; other serializers have no
vector reader (`vector_reader` returns None) and their states are decoded record by record.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa

from flinkstate.flink.errors import UnsupportedSerializerError
from flinkstate.flink.serde._vseq import lockstep
from flinkstate.flink.serde.serializers import TypeNode, arrow_type

__all__ = ["Source", "VReader", "gather", "segments", "vector_reader"]

_DTYPES = {"long": ">i8", "int": ">i4", "short": ">i2", "byte": "i1", "double": ">f8", "float": ">f4", "bool": "u1"}


class Source:
    """A decoded stream: the same bytes as a numpy uint8 array and as bytes (for the one-by-one fallbacks)."""

    __slots__ = ("arr", "buf")

    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.arr = np.frombuffer(buf, dtype=np.uint8)


VReader = Callable[[Source, np.ndarray, "np.ndarray | None"], tuple[pa.Array, np.ndarray]]


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


def _safe(pos: np.ndarray, present: np.ndarray | None) -> np.ndarray:
    return pos if present is None else np.where(present, pos, 0)


def _advance(pos: np.ndarray, end: np.ndarray, present: np.ndarray | None) -> np.ndarray:
    return end if present is None else np.where(present, end, pos)


def _mask(present: np.ndarray | None) -> np.ndarray | None:
    return None if present is None or present.all() else ~present


def _fixed(node: TypeNode) -> VReader:
    dtype = _DTYPES[node.kind]
    width = np.dtype(dtype).itemsize
    typ = arrow_type(node)

    def read(src: Source, pos: np.ndarray, present: np.ndarray | None) -> tuple[pa.Array, np.ndarray]:
        values = gather(src.arr, _safe(pos, present), dtype)
        if node.kind == "bool":
            values = values != 0
        return pa.array(values, type=typ, mask=_mask(present)), _advance(pos, pos + width, present)

    return read


def _varint(arr: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Little-endian base-128 varints at pos: (values, byte lengths)."""
    b = arr[pos].astype(np.int64)
    value = b & 0x7F
    length = np.ones(len(pos), np.int64)
    more = b >= 0x80
    shift = 7
    while more.any():
        if shift > 28:
            raise ValueError("a string length varint is longer than 5 bytes")
        b = arr[np.where(more, pos + length, 0)].astype(np.int64)
        value |= np.where(more, (b & 0x7F) << shift, 0)
        length += more
        more &= b >= 0x80
        shift += 7
    return value, length


def segments(starts: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """The byte offsets of the concatenated segments [start, start + len)."""
    total = int(lens.sum())
    if total == 0:
        return np.zeros(0, np.int64)
    offsets = np.cumsum(lens) - lens
    return np.repeat(starts - offsets, lens) + np.arange(total)


def _string(src: Source, pos: np.ndarray, present: np.ndarray | None) -> tuple[pa.Array, np.ndarray]:
    """StringValue.readString: varint(length + 1) (0 = null), then UTF-16 units as 7-bit varints."""
    arr = src.arr
    n, hdr = _varint(arr, _safe(pos, present))
    valid = n > 0 if present is None else present & (n > 0)
    chars = np.where(valid, n - 1, 0)
    data_start = pos + hdr
    idx = segments(data_start, chars)
    data = arr[idx]
    end = np.where(valid, data_start + chars, pos + hdr)
    # A non-ASCII unit's first varint byte has its high bit set and comes within the first `chars`
    # bytes, so if none of these bytes has it, every string is ASCII and its bytes are its UTF-8.
    if not len(data) or data.max() < 0x80:
        return _string_array(chars, valid, data), _advance(pos, end, present)
    # The strings with a non-ASCII unit: their UTF-16 unit varints decoded and re-encoded as UTF-8, vectorised; the
    # ASCII ones keep their bytes, which are their UTF-8.
    first = np.cumsum(chars) - chars
    counts = np.concatenate(([0], np.cumsum(data >= 0x80)))
    wide = np.flatnonzero(counts[first + chars] > counts[first])
    units, length = _unit_varints(arr, data_start[wide], chars[wide])
    utf8, utf8_lens = _utf16_to_utf8(units, np.repeat(np.arange(len(wide)), chars[wide]), len(wide))
    lens = chars.copy()
    lens[wide] = utf8_lens
    end[wide] = data_start[wide] + length
    out = np.empty(int(lens.sum()), np.uint8)
    at = np.cumsum(lens) - lens
    narrow = np.ones(len(pos), bool)
    narrow[wide] = False
    out[segments(at[narrow], chars[narrow])] = data[segments(first[narrow], chars[narrow])]
    out[segments(at[wide], utf8_lens)] = utf8
    return _string_array(lens, valid, out), _advance(pos, end, present)


def _string_array(lens: np.ndarray, valid: np.ndarray, data: np.ndarray) -> pa.Array:
    """An Arrow string array from per-row UTF-8 byte lengths (0 for nulls), validity and the bytes."""
    offsets = np.zeros(len(lens) + 1, np.int64)
    np.cumsum(lens, out=offsets[1:])
    if offsets[-1] >= 2**31:
        raise ValueError("more than 2 GiB of string data in one chunk")
    validity = None if valid.all() else pa.array(valid).buffers()[1]
    nulls = int(len(lens) - valid.sum())
    return pa.Array.from_buffers(pa.string(), len(lens), [validity, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data)], nulls)


def _unit_varints(arr: np.ndarray, starts: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the UTF-16 units, each run's byte length) of `counts` consecutive 7-bit little-endian varints (1 to 3 bytes
    each) at each start. A unit ends at a byte below 0x80: the k-th unit of a run ends at the k-th such byte of the
    3 * count bytes that may hold it, found for all units at once."""
    cand = np.minimum(3 * counts, len(arr) - starts).clip(0)
    region = arr[segments(starts, cand)]
    first = np.cumsum(cand) - cand
    ends = np.flatnonzero(region < 0x80)  # every unit's last byte, and false ones past each run's end
    total = int(counts.sum())
    rank = np.repeat(np.searchsorted(ends, first) - (np.cumsum(counts) - counts), counts) + np.arange(total)
    if total and rank[-1] >= len(ends):
        raise IndexError("a string runs past the end of its record")
    unit_end = ends[rank]
    run_stop = np.repeat(first + cand, counts)
    if (unit_end >= run_stop).any():
        raise IndexError("a string runs past the end of its record")
    unit_start = np.empty(total, np.int64)
    if total:
        unit_start[1:] = unit_end[:-1] + 1
        unit_start[np.cumsum(counts)[counts > 0] - counts[counts > 0]] = first[counts > 0]
    width = unit_end - unit_start + 1
    if total and width.max() > 3:
        raise ValueError("a UTF-16 unit varint is longer than 3 bytes")
    units = (region[unit_start] & 0x7F).astype(np.int64)
    for k in (1, 2):
        more = np.flatnonzero(width > k)
        units[more] |= (region[unit_start[more] + k] & 0x7F).astype(np.int64) << (7 * k)
    if total and units.max() > 0xFFFF:
        raise ValueError("a UTF-16 unit is larger than 0xFFFF")
    length = np.zeros(len(counts), np.int64)
    some = counts > 0
    length[some] = unit_end[np.cumsum(counts)[some] - 1] - first[some] + 1
    return units, length


def _utf16_to_utf8(units: np.ndarray, row: np.ndarray, n_rows: int) -> tuple[np.ndarray, np.ndarray]:
    """UTF-8 bytes of UTF-16 units (row: each unit's row, ascending; surrogate pairs joined within a row) and each
    row's UTF-8 length. One call of Python's codec transcodes them all (C speed); a high surrogate ending a row
    would pair with the next row's first unit there, so it is refused first, like any unpaired surrogate."""
    ends = np.flatnonzero(np.append(row[1:] != row[:-1], True)) if len(row) else row
    if ((units[ends] & 0xFC00) == 0xD800).any():
        raise ValueError("a string holds an unpaired UTF-16 surrogate, which an Arrow string cannot hold")
    try:
        utf8 = units.astype("<u2").tobytes().decode("utf-16-le").encode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError("a string holds an unpaired UTF-16 surrogate, which an Arrow string cannot hold") from e
    # UTF-8 bytes per unit: 1 below 0x80, 2 below 0x800, 2 for each half of a surrogate pair (4 per character), else 3
    nb = 1 + (units >= 0x80) + ((units >= 0x800) & ((units & 0xF800) != 0xD800))
    return np.frombuffer(utf8, np.uint8), np.bincount(row, weights=nb, minlength=n_rows).astype(np.int64)


def _char(src: Source, pos: np.ndarray, present: np.ndarray | None) -> tuple[pa.Array, np.ndarray]:
    """CharSerializer: one big-endian UTF-16 unit, as a one-character string."""
    units = gather(src.arr, _safe(pos, present), ">u2").astype(np.int64)
    valid = np.ones(len(pos), bool) if present is None else present
    utf8, lens = _utf16_to_utf8(units[valid], np.arange(int(valid.sum())), int(valid.sum()))
    all_lens = np.zeros(len(pos), np.int64)
    all_lens[valid] = lens
    return _string_array(all_lens, valid, utf8), _advance(pos, pos + 2, present)


def _lengths(src: Source, pos: np.ndarray, present: np.ndarray | None, what: str) -> np.ndarray:
    """The i32 length prefix at each position (0 where the value is absent); a negative one is a ValueError."""
    n = gather(src.arr, _safe(pos, present), ">i4").astype(np.int64)
    if present is not None:
        n = np.where(present, n, 0)
    if (n < 0).any():
        raise ValueError(f"{what} has a negative length")
    return n


def _bytes(src: Source, pos: np.ndarray, present: np.ndarray | None) -> tuple[pa.Array, np.ndarray]:
    """BytePrimitiveArraySerializer: i32 length then the bytes."""
    n = _lengths(src, pos, present, "a byte[]")
    data = src.arr[segments(pos + 4, n)]
    offsets = np.zeros(len(pos) + 1, np.int32)
    np.cumsum(n, out=offsets[1:])
    valid = np.ones(len(pos), bool) if present is None else present
    validity = None if valid.all() else pa.array(valid).buffers()[1]
    out = pa.Array.from_buffers(pa.binary(), len(pos), [validity, pa.py_buffer(offsets), pa.py_buffer(data)], int(len(pos) - valid.sum()))
    return out, _advance(pos, pos + 4 + n, present)


def _struct(node: TypeNode, fields: list[VReader]) -> Callable[[list[pa.Array], np.ndarray | None], pa.Array]:
    typ = arrow_type(node)

    def build(children: list[pa.Array], present: np.ndarray | None) -> pa.Array:
        mask = _mask(present)
        return pa.StructArray.from_arrays(children, fields=list(typ), mask=None if mask is None else pa.array(mask))

    return build


def _row(node: TypeNode, ctx: str) -> VReader | None:
    fields = [vector_reader(c, ctx) for c in node.children]
    if any(f is None for f in fields):
        return None
    offset = 0 if node.legacy_row else 2
    mask_bytes = (len(fields) + offset + 7) // 8
    top = 8 * mask_bytes - 1 - offset
    build = _struct(node, fields)

    def read(src: Source, pos: np.ndarray, present: np.ndarray | None) -> tuple[pa.Array, np.ndarray]:
        p = _safe(pos, present)
        mask = np.zeros(len(pos), np.int64)
        for i in range(mask_bytes):
            mask = (mask << 8) | src.arr[p + i]
        cur = pos + mask_bytes
        children = []
        for i, rd in enumerate(fields):
            here = ((mask >> (top - i)) & 1) == 0
            if present is not None:
                here &= present
            child, cur = rd(src, cur, here)
            children.append(child)
        return build(children, present), _advance(pos, cur, present)

    return read


def _tuple(node: TypeNode, ctx: str) -> VReader | None:
    fields = [vector_reader(c, ctx) for c in node.children]
    if any(f is None for f in fields):
        return None
    build = _struct(node, fields)

    def read(src: Source, pos: np.ndarray, present: np.ndarray | None) -> tuple[pa.Array, np.ndarray]:
        cur = pos
        children = []
        for rd in fields:
            child, cur = rd(src, cur, present)
            children.append(child)
        return build(children, present), cur

    return read


def _pojo(node: TypeNode, ctx: str) -> VReader | None:
    fields = [vector_reader(c, ctx) for c in node.children]
    if any(f is None for f in fields):
        return None
    build = _struct(node, fields)

    def read(src: Source, pos: np.ndarray, present: np.ndarray | None) -> tuple[pa.Array, np.ndarray]:
        arr = src.arr
        flags = arr[_safe(pos, present)]
        here = (flags & 1) == 0 if present is None else present & ((flags & 1) == 0)
        if (here & ((flags & 2) == 0)).any():
            raise UnsupportedSerializerError(f"{ctx}: a value is a subclass of POJO {node.cls}; subclasses are not supported")
        cur = np.where(present, pos + 1, pos) if present is not None else pos + 1
        children = []
        for rd in fields:
            isnull = arr[np.where(here, cur, 0)] != 0
            cur = np.where(here, cur + 1, cur)
            child, cur = rd(src, cur, here & ~isnull)
            children.append(child)
        return build(children, here), cur

    return read


def _enum(node: TypeNode, ctx: str) -> VReader:
    """EnumSerializer: an i32 ordinal, read as the constant's name (from the snapshot)."""
    names = pa.array(list(node.names), pa.string())

    def read(src: Source, pos: np.ndarray, present: np.ndarray | None) -> tuple[pa.Array, np.ndarray]:
        ords = gather(src.arr, _safe(pos, present), ">i4").astype(np.int64)
        if present is not None:
            ords = np.where(present, ords, 0)
        bad = (ords < 0) | (ords >= len(names))
        if bad.any():
            raise ValueError(f"{ctx}: enum ordinal {int(ords[np.flatnonzero(bad)[0]])} of {node.cls} is not one of its {len(names)} constants")
        return names.take(pa.array(ords, mask=_mask(present))), _advance(pos, pos + 4, present)

    return read


def _time_window(src: Source, pos: np.ndarray, present: np.ndarray | None) -> tuple[pa.Array, np.ndarray]:
    """TimeWindow$Serializer: i64 start, i64 end, as struct<start, end>."""
    p = _safe(pos, present)
    start = pa.array(gather(src.arr, p, ">i8"))
    end = pa.array(gather(src.arr, p + 8, ">i8"))
    mask = _mask(present)
    out = pa.StructArray.from_arrays([start, end], names=["start", "end"], mask=None if mask is None else pa.array(mask))
    return out, _advance(pos, pos + 16, present)


def _primitive_array(node: TypeNode) -> VReader | None:
    """The primitive array serializers (long[], int[], double[]...): i32 length, then fixed-width elements."""
    elem = node.children[0]
    if elem.kind not in _DTYPES:
        return None
    dtype = _DTYPES[elem.kind]
    w = np.dtype(dtype).itemsize
    typ = arrow_type(node)

    def read(src: Source, pos: np.ndarray, present: np.ndarray | None) -> tuple[pa.Array, np.ndarray]:
        n = _lengths(src, pos, present, "an array")
        rows = np.repeat(np.arange(len(pos)), n)
        first = np.cumsum(n) - n
        at = (pos + 4)[rows] + (np.arange(len(rows)) - first[rows]) * w
        values = gather(src.arr, at, dtype)
        if elem.kind == "bool":
            values = values != 0
        offsets = np.zeros(len(pos) + 1, np.int32)
        np.cumsum(n, out=offsets[1:])
        mask = _mask(present)
        out = pa.ListArray.from_arrays(pa.array(offsets), pa.array(values, type=typ.value_type),
                                       mask=None if mask is None else pa.array(mask))
        return out, _advance(pos, pos + 4 + n * w, present)

    return read


def _object_array(node: TypeNode, ctx: str, flagged: bool) -> VReader | None:
    """StringArraySerializer (i32 length, then each string) and GenericArraySerializer (each element led by a presence
    byte): the elements decoded in lockstep across the arrays (`_vseq`)."""
    elem = vector_reader(node.children[0], ctx)
    if elem is None:
        return None
    typ = arrow_type(node)

    def read(src: Source, pos: np.ndarray, present: np.ndarray | None) -> tuple[pa.Array, np.ndarray]:
        n = _lengths(src, pos, present, "an array")
        values, end = lockstep(src, src.arr, elem, pos + 4, n, flagged, typ.value_type)
        offsets = np.zeros(len(pos) + 1, np.int64)
        np.cumsum(n, out=offsets[1:])
        mask = _mask(present)
        out = pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), values, type=typ,
                                       mask=None if mask is None else pa.array(mask))
        return out, _advance(pos, end, present)

    return read


def vector_reader(node: TypeNode, ctx: str) -> VReader | None:
    """The vector reader of this serializer, or None when its values are decoded one by one."""
    kind = node.kind
    if kind in _DTYPES:
        return _fixed(node)
    if kind == "string":
        return _string
    if kind == "char":
        return _char
    if kind == "bytes":
        return _bytes
    if kind == "row":
        return _row(node, ctx)
    if kind == "tuple":
        return _tuple(node, ctx)
    if kind == "pojo":
        return _pojo(node, ctx)
    if kind == "enum":
        return _enum(node, ctx)
    if kind == "timewindow":
        return _time_window
    if kind == "parray":
        return _primitive_array(node)
    if kind in ("sarray", "garray"):
        return _object_array(node, ctx, kind == "garray")
    return None
