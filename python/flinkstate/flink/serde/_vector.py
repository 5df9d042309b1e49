"""Vectorised value decoding: one serializer applied to many records at once, with numpy over the buffer.

A vector reader takes the buffer (`_vbuf.Source`: a uint8 array, bytes and an Arrow buffer), one start offset per
value and an optional mask of the values that are present (absent ones, e.g. null map values or null Row
fields, take no bytes), and returns an Arrow array and the offsets just after each value.
Base types, chars and `StringValue` strings (`_vstring`: copied out by Arrow, only non-ASCII ones transcoded),
byte[], Row (null mask), Tuple and POJO (null flags), primitive, String[] and
generic arrays (`_vseq`: element j of every array at once) are vectorised; other serializers have no
vector reader (`vector_reader` returns None) and their states are decoded record by record."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa

from flinkstate.flink.errors import UnsupportedSerializerError
from flinkstate.flink.serde._vbuf import Source, byte_slices, gather, segments
from flinkstate.flink.serde._vseq import lockstep
from flinkstate.flink.serde._vstring import char_reader, string_reader
from flinkstate.flink.serde.serializers import TypeNode, arrow_type

__all__ = ["Source", "VReader", "gather", "segments", "vector_reader"]

VReader = Callable[[Source, np.ndarray, "np.ndarray | None"], tuple[pa.Array, np.ndarray]]

_DTYPES = {"long": ">i8", "int": ">i4", "short": ">i2", "byte": "i1", "double": ">f8", "float": ">f4", "bool": "u1"}


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
    raw = byte_slices(src, pos + 4, n)
    valid = np.ones(len(pos), bool) if present is None else present
    validity = None if valid.all() else pa.array(valid).buffers()[1]
    bufs = raw.buffers()
    out = pa.Array.from_buffers(pa.binary(), len(pos), [validity, bufs[1], bufs[2]], int(len(pos) - valid.sum()), raw.offset)
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
        return string_reader
    if kind == "char":
        return char_reader
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
