"""The table runtime's binary formats (BinaryRowData, BinaryArrayData, BinaryMapData) to Arrow and back.

A BinaryRowData (the keys and values of SQL and Table API operators' state) is: a null-bit set of
`((arity + 63 + 8) // 64) * 8` bytes whose first byte is the RowKind and whose bit `i + 8` marks field i null; one
8-byte little-endian slot per field; then a variable-length part. A slot holds a fixed-size value (BOOLEAN..BIGINT,
FLOAT, DOUBLE, DATE, TIME, intervals, a compact DECIMAL's unscaled long, a compact TIMESTAMP's milliseconds), or a
string/binary of at most 7 bytes inline (the top bit set, the length in the next 7 bits), or `offset << 32 | size` of
bytes in the variable part (offsets from the row's start; 8-byte aligned, zero padded). A BinaryArrayData is an i32
count, a null-bit set of `((n + 31) // 32) * 4` bytes, elements of 1, 2, 4 or 8 bytes, then its own variable part; a
BinaryMapData an i32 key-array size, the key array, then the value array. Decoding is vectorised with numpy over all
rows of a column (one pass per field, not per row), and so is encoding (numba kernels copy the bytes), which lays rows
out as Flink's BinaryRowWriter does, so a row decoded and encoded again is byte for byte the row Flink wrote (its key
group, a hash of those bytes, included).
"""

from __future__ import annotations

from decimal import Context, Decimal
from typing import Any, Literal, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numpy.lib.stride_tricks import as_strided

from flinkstate.flink._jit import kernel
from flinkstate.flink.errors import CorruptFileError, UnsupportedSerializerError
from flinkstate.flink.serde.sqltypes import FIXED_SIZE, SqlType, sql_arrow_type

__all__ = ["decode_rows", "encode_rows", "row_type", "ROW_KIND", "ROW_KINDS"]

# the field a decoded value row carries its RowKind in (the header's first byte: Flink keeps it in state, e.g. the
# last row of a deduplication is often an UPDATE_AFTER), by RowKind.shortString
ROW_KIND = "_row_kind"
ROW_KINDS = ("+I", "-U", "+U", "-D")

_LE = {"BOOLEAN": "u1", "TINYINT": "i1", "SMALLINT": "<i2", "INTEGER": "<i4", "BIGINT": "<i8", "FLOAT": "<f4",
       "DOUBLE": "<f8", "DATE": "<i4", "TIME_WITHOUT_TIME_ZONE": "<i4", "INTERVAL_YEAR_MONTH": "<i4", "INTERVAL_DAY_TIME": "<i8"}
_BYTES = ("CHAR", "VARCHAR", "BINARY", "VARBINARY")
_EXACT = Context(prec=40)  # DECIMAL(38) and its scaling, without the default context's rounding to 28 digits


def row_type(fields: tuple[SqlType, ...], names: tuple[str, ...] | None = None) -> SqlType:
    """The ROW type of a RowData with these field types (named f0..fn unless names are given)."""
    return SqlType("ROW", children=fields, names=names or tuple(f"f{i}" for i in range(len(fields))))


def _row_null_bytes(arity: int) -> int:
    return ((arity + 63 + 8) // 64) * 8


def _array_header(n: np.ndarray | int) -> Any:
    return 4 + ((n + 31) // 32) * 4


class _Buf:
    """The bytes every offset points into, as uint8, with bounds checked reads of little-endian values."""

    def __init__(self, data: np.ndarray, where: str) -> None:
        self.arr = data
        self.where = where

    def read(self, pos: np.ndarray, dtype: str) -> np.ndarray:
        dt = np.dtype(dtype)
        w = dt.itemsize
        if len(pos) == 0:
            return np.zeros(0, dt.newbyteorder("="))
        if int(pos.min()) < 0 or int(pos.max()) + w > len(self.arr):
            raise CorruptFileError(f"{self.where}: a BinaryRowData field points outside its row's bytes")
        if w == 1:
            return self.arr[pos].view(dt)
        rows = as_strided(self.arr, shape=(len(self.arr) - w + 1, w), strides=(1, 1), writeable=False)
        return rows[pos].view(dt).ravel().astype(dt.newbyteorder("="))

    def bit(self, base: np.ndarray, index: np.ndarray | int) -> np.ndarray:
        """Bit `index` of the bit set at base (byte index >> 3, bit index & 7)."""
        byte = self.read(base + (np.asarray(index) >> 3), "u1")
        return ((byte >> (np.asarray(index) & 7)) & 1).astype(bool)


def decode_rows(column: pa.Array | pa.ChunkedArray, row: SqlType, where: str = "", *,
                row_kind: Literal["insert", "any", "field"] = "insert") -> pa.Array:
    """A binary column of BinaryRowData bytes (one row each, nulls allowed) as a struct column of the row's fields.

    row_kind: "insert" requires every row to be an INSERT (keys are); "any" accepts every RowKind (values: a
    deduplication keeps the last row as it came, often an UPDATE_AFTER); "field" adds a last string field `_row_kind`
    with each row's kind, so that the rows encode back byte for byte."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    column = column.cast(pa.large_binary())
    n = len(column)
    offsets = np.frombuffer(column.buffers()[1], dtype=np.int64, count=n + 1, offset=column.offset * 8)
    data = column.buffers()[2]
    buf = _Buf(np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(0, np.uint8), where)
    valid = ~np.asarray(column.is_null(), dtype=bool) if column.null_count else np.ones(n, bool)
    base = offsets[:-1].copy()
    lengths = np.diff(offsets)
    short = valid & (lengths < _row_null_bytes(len(row.children)) + 8 * len(row.children))
    if short.any():
        raise CorruptFileError(f"{where}: a BinaryRowData of {int(lengths[short][0])} bytes is shorter than the fixed part of a "
                               f"row of {len(row.children)} fields ({row})")
    out = _row(buf, base, valid, row)
    kinds = buf.read(np.where(valid, base, 0), "u1") if n else np.zeros(0, np.uint8)
    if row_kind == "insert":
        if (kinds[valid] != 0).any():
            raise CorruptFileError(f"{where}: a BinaryRowData key has RowKind {int(kinds[valid].max())}, not INSERT")
        return out
    if (kinds[valid] > 3).any():
        raise CorruptFileError(f"{where}: a BinaryRowData has RowKind byte {int(kinds[valid].max())} (Flink knows 0..3)")
    if row_kind == "any":
        return out
    names = pa.array(ROW_KINDS).take(pa.array(kinds.astype(np.int32)))
    return pa.StructArray.from_arrays([*out.flatten(), names], fields=[*out.type, pa.field(ROW_KIND, pa.string())],
                                      mask=out.is_null() if out.null_count else None)


def _row(buf: _Buf, base: np.ndarray, valid: np.ndarray, row: SqlType) -> pa.Array:
    nb = _row_null_bytes(len(row.children))
    safe = np.where(valid, base, 0)
    children = []
    for i, t in enumerate(row.children):
        present = valid & ~buf.bit(safe, i + 8) if valid.any() else valid
        children.append(_value(buf, t, safe + nb + 8 * i, safe, present))
    mask = None if valid.all() else pa.array(~valid)
    if not children:  # a row of no fields (the key of a Top-N or sort without PARTITION BY): Arrow needs the length
        return pa.array([None if m else {} for m in ~valid], pa.struct([]))
    return pa.StructArray.from_arrays(children, fields=list(sql_arrow_type(row)), mask=mask)


def _validity(present: np.ndarray) -> tuple[pa.Buffer | None, int]:
    if present.all():
        return None, 0
    return pa.array(present).buffers()[1], int(len(present) - present.sum())


def _value(buf: _Buf, t: SqlType, slot: np.ndarray, base: np.ndarray, present: np.ndarray) -> pa.Array:
    """The values of type t whose slots are at slot (var-part offsets from base); absent ones null."""
    typ = sql_arrow_type(t)
    n = len(slot)
    slot = np.where(present, slot, 0) if n else slot
    validity, nulls = _validity(present)
    if t.root == "NULL":
        return pa.nulls(n)
    if t.root in _LE:
        values = buf.read(slot, _LE[t.root]) if present.any() else np.zeros(n, np.dtype(_LE[t.root]).newbyteorder("="))
        values = np.where(present, values, 0).astype(values.dtype)
        if t.root == "BOOLEAN":
            return pa.array(values != 0, pa.bool_(), mask=~present)
        return pa.Array.from_buffers(typ, n, [validity, pa.py_buffer(np.ascontiguousarray(values))], nulls)
    if t.root == "DECIMAL" and t.compact:
        unscaled = np.where(present, buf.read(slot, "<i8"), 0) if present.any() else np.zeros(n, np.int64)
        words = np.empty((n, 2), np.int64)
        words[:, 0] = unscaled
        words[:, 1] = unscaled >> 63  # sign extension to 128 bits
        return pa.Array.from_buffers(typ, n, [validity, pa.py_buffer(words)], nulls)
    if t.root in ("TIMESTAMP_WITHOUT_TIME_ZONE", "TIMESTAMP_WITH_LOCAL_TIME_ZONE"):
        word = buf.read(slot, "<i8") if present.any() else np.zeros(n, np.int64)
        if t.compact:
            millis = word
            values = millis
        else:
            millis = buf.read(np.where(present, base + (word >> 32), 0), "<i8") if present.any() else np.zeros(n, np.int64)
            values = millis * 1_000_000 + (word & 0xFFFFFFFF)
        values = np.where(present, values, 0).astype(np.int64)
        return pa.Array.from_buffers(typ, n, [validity, pa.py_buffer(values)], nulls)
    word = buf.read(slot, "<u8") if present.any() else np.zeros(n, np.uint64)
    inline = (word >> np.uint64(63)).astype(bool) & present
    size = np.where(inline, (word >> np.uint64(56)) & np.uint64(0x7F), word & np.uint64(0xFFFFFFFF)).astype(np.int64)
    start = np.where(inline, slot, base + (word >> np.uint64(32)).astype(np.int64))
    size = np.where(present, size, 0)
    start = np.where(present, start, 0)
    if t.root in _BYTES or t.root == "RAW":
        if t.root == "RAW":  # BinaryRawValueData: always in the variable part
            size = np.where(present, (word & np.uint64(0xFFFFFFFF)).astype(np.int64), 0)
            start = np.where(present, base + (word >> np.uint64(32)).astype(np.int64), 0)
        return _bytes_array(buf, start, size, validity, nulls, typ)
    if t.root == "DECIMAL":  # BigInteger.toByteArray: big-endian two's complement, at most 16 bytes
        raw = _bytes_array(buf, start, size, validity, nulls, pa.binary())
        unscaled = [None if b is None else int.from_bytes(b, "big", signed=True) for b in raw.to_pylist()]
        scale = t.scale or 0
        return pa.array([None if u is None else Decimal(u).scaleb(-scale, _EXACT) for u in unscaled], typ)
    if t.root == "ROW":
        return _row(buf, start, present, t)
    if t.root in ("ARRAY", "MULTISET", "MAP"):
        return _collection(buf, t, start, present, validity, nulls)
    raise UnsupportedSerializerError(f"{buf.where}: SQL type {t} cannot be decoded from a BinaryRowData")


def _bytes_array(buf: _Buf, start: np.ndarray, size: np.ndarray, validity: pa.Buffer | None, nulls: int,
                 typ: pa.DataType) -> pa.Array:
    offsets = _layout(size)
    total = int(offsets[-1])
    if total and (int(start.min()) < 0 or int((start + size).max()) > len(buf.arr)):
        raise CorruptFileError(f"{buf.where}: a BinaryRowData string or binary runs outside its row's bytes")
    data = np.empty(total, np.uint8)
    _copy(data, offsets[:-1], buf.arr, start, size, size > 0)
    large = pa.large_string() if pa.types.is_string(typ) else pa.large_binary()
    out = pa.Array.from_buffers(large, len(size), [validity, pa.py_buffer(offsets), pa.py_buffer(data)], nulls)
    return out.cast(typ) if total < 2**31 else out


def _array(buf: _Buf, element: SqlType, abase: np.ndarray, present: np.ndarray) -> tuple[np.ndarray, pa.Array]:
    """BinaryArrayData at abase: (list offsets, the flattened elements)."""
    count = np.where(present, buf.read(np.where(present, abase, 0), "<i4"), 0).astype(np.int64) if present.any() else np.zeros(len(abase), np.int64)
    if (count < 0).any():
        raise CorruptFileError(f"{buf.where}: a BinaryArrayData has a negative size")
    offsets = np.zeros(len(abase) + 1, np.int64)
    np.cumsum(count, out=offsets[1:])
    width = FIXED_SIZE.get(element.root, 8)
    ebase = np.repeat(abase, count)
    j = np.arange(int(offsets[-1]), dtype=np.int64) - np.repeat(offsets[:-1], count)
    eslot = ebase + np.repeat(_array_header(count), count) + j * width
    epresent = ~buf.bit(ebase + 4, j) if len(j) else np.zeros(0, bool)
    return offsets, _value(buf, element, eslot, ebase, epresent)


def _collection(buf: _Buf, t: SqlType, start: np.ndarray, present: np.ndarray, validity: pa.Buffer | None, nulls: int) -> pa.Array:
    if t.root == "ARRAY":
        offsets, values = _array(buf, t.children[0], start, present)
        return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), values, mask=None if present.all() else pa.array(~present))
    key_bytes = np.where(present, buf.read(np.where(present, start, 0), "<i4"), 0).astype(np.int64) if present.any() else np.zeros(len(start), np.int64)
    key_type = t.children[0]
    value_type = SqlType("INTEGER", False) if t.root == "MULTISET" else t.children[1]
    koffsets, keys = _array(buf, key_type, start + 4, present)
    voffsets, values = _array(buf, value_type, start + 4 + key_bytes, present)
    if not np.array_equal(koffsets, voffsets):
        raise CorruptFileError(f"{buf.where}: a BinaryMapData has a different number of keys and values")
    return pa.MapArray.from_arrays(pa.array(koffsets.astype(np.int32)), keys, values, type=sql_arrow_type(t),
                                   mask=None if present.all() else pa.array(~present))


# ---------------------------------------------------------------------------------------------------------------
# Encoding: vectorised like the decoder (one pass per field over all rows, numba kernels for the byte copies), laid
# out as BinaryRowWriter / BinaryArrayWriter write: zeroed slots for nulls, a non-compact DECIMAL's 16 and TIMESTAMP's
# 8 bytes reserved even when null, the variable part 8-byte aligned in field order, BigInteger.toByteArray's minimal
# bytes, an array's fixed part rounded to 8 bytes as a whole (BinaryArrayWriter.fixedSize).


@kernel
def _scatter(out: np.ndarray, pos: np.ndarray, src: np.ndarray, width: int, mask: np.ndarray) -> None:
    """The `width` bytes of value k of src at out[pos[k]], where mask[k]."""
    for k in range(len(pos)):
        if mask[k]:
            p, s = pos[k], k * width
            for b in range(width):
                out[p + b] = src[s + b]


@kernel
def _copy(out: np.ndarray, dst: np.ndarray, data: np.ndarray, start: np.ndarray, size: np.ndarray, mask: np.ndarray) -> None:
    """Bytes start[k]:start[k] + size[k] of data at out[dst[k]], where mask[k]."""
    for k in range(len(dst)):
        if mask[k]:
            out[dst[k] : dst[k] + size[k]] = data[start[k] : start[k] + size[k]]


@kernel
def _set_bits(out: np.ndarray, base: np.ndarray, index: np.ndarray, mask: np.ndarray) -> None:
    """Bit index[k] of the bit set at base[k], where mask[k]."""
    for k in range(len(base)):
        if mask[k]:
            out[base[k] + (index[k] >> 3)] |= 1 << (index[k] & 7)


@kernel
def _put_strings(out: np.ndarray, slot: np.ndarray, var: np.ndarray, base: np.ndarray, data: np.ndarray, offs: np.ndarray,
                 mask: np.ndarray) -> None:
    """Strings and binaries: at most 7 bytes in the slot (length | 0x80 in its last byte), longer ones at var."""
    for k in range(len(slot)):
        if mask[k]:
            a, n, s = offs[k], offs[k + 1] - offs[k], slot[k]
            if n <= 7:
                out[s : s + n] = data[a : a + n]
                out[s + 7] = 0x80 | n
            else:
                v = var[k]
                out[v : v + n] = data[a : a + n]
                word = (v - base[k]) << 32 | n
                for b in range(8):
                    out[s + b] = (word >> (8 * b)) & 0xFF


def _round8(n: Any) -> Any:
    return (n + 7) & ~7


def _mask(array: pa.Array) -> np.ndarray:
    return np.ones(len(array), bool) if array.null_count == 0 else np.asarray(array.is_valid(), dtype=bool)


def _words(values: np.ndarray) -> np.ndarray:
    """Values as the flat little-endian bytes `_scatter` reads."""
    return np.ascontiguousarray(values, dtype=values.dtype.newbyteorder("<")).view(np.uint8)


def _binary(array: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """A string or binary column's (int64 offsets of its n + 1 bounds, data bytes)."""
    array = array.cast(pa.large_binary())
    offs = np.frombuffer(array.buffers()[1], np.int64, count=len(array) + 1, offset=array.offset * 8)
    data = array.buffers()[2]
    return offs, np.frombuffer(data, np.uint8) if data is not None else np.zeros(1, np.uint8)


class _Field(NamedTuple):
    """One field's (or array element's) values ready to write: where they are non-null, the bytes each adds to the
    variable part (8-aligned), and the writer taking (out, slot, var, base): positions in the output per value."""

    present: np.ndarray
    var: np.ndarray
    write: Any


def _prepare(t: SqlType, array: pa.Array, live: np.ndarray) -> _Field:
    """Values of type t, live where their row or array exists (a null non-compact DECIMAL or TIMESTAMP reserves bytes)."""
    root, n = t.root, len(array)
    present = live & _mask(array)
    zero = np.zeros(n, np.int64)
    if root in _LE:
        if root == "BOOLEAN":
            values = np.asarray(array.fill_null(False), dtype=bool).view(np.uint8)
        else:
            dt = np.dtype(_LE[root]).newbyteorder("=")
            values = np.asarray(array.cast(pa.from_numpy_dtype(dt)).fill_null(0), dtype=dt)
        src = _words(values)
        return _Field(present, zero, lambda out, slot, var, base: _scatter(out, slot, src, values.itemsize, present))
    if root == "DECIMAL":
        dec = array.cast(pa.decimal128(t.precision or 10, t.scale or 0))
        words = np.frombuffer(dec.buffers()[1], np.int64, count=2 * n, offset=dec.offset * 16) if n else zero
        if t.compact:
            low = _words(words[0::2])
            return _Field(present, zero, lambda out, slot, var, base: _scatter(out, slot, low, 8, present))
        # BigInteger.toByteArray: the big-endian 16 bytes less the leading ones that only repeat the sign
        be = words.reshape(n, 2)[:, ::-1].astype(">i8").view(np.uint8).reshape(n, 16)
        sign = np.where(be[:, :1] >= 0x80, 0xFF, 0)
        redundant = (be[:, :15] == sign) & ((be[:, 1:] >= 0x80) == (sign == 0xFF))
        first = np.cumprod(redundant, axis=1).sum(axis=1)
        return _Field(present, np.where(live, 16, 0), _var_part(be.ravel(), np.arange(n) * 16 + first, np.where(present, 16 - first, 0),
                                                                 present, live))
    if root in ("TIMESTAMP_WITHOUT_TIME_ZONE", "TIMESTAMP_WITH_LOCAL_TIME_ZONE"):
        unit = "ms" if t.compact else "ns"
        ticks = np.asarray(array.cast(pa.timestamp(unit, tz=getattr(array.type, "tz", None))).cast(pa.int64()).fill_null(0), np.int64)
        if t.compact:
            return _Field(present, zero, lambda out, slot, var, base: _scatter(out, slot, _words(ticks), 8, present))
        millis, nanos = np.divmod(ticks, 1_000_000)

        def timestamps(out: np.ndarray, slot: np.ndarray, var: np.ndarray, base: np.ndarray) -> None:
            _scatter(out, var, _words(millis), 8, present)
            _scatter(out, slot, _words((var - base) << 32 | np.where(present, nanos, 0)), 8, live)
        return _Field(present, np.where(live, 8, 0), timestamps)
    if root in _BYTES:
        offs, data = _binary(array)
        size = np.diff(offs)
        return _Field(present, np.where(present & (size > 7), _round8(size), 0),
                      lambda out, slot, var, base: _put_strings(out, slot, var, base, data, offs, present))
    if root in ("MAP", "MULTISET"):  # an i32 size of the key array, the key array, the value array
        counts, (keys, items) = _elements(array, present, array.keys, array.items)
        koffs, kdata = _arrays(counts, keys, t.children[0])
        voffs, vdata = _arrays(counts, items, SqlType("INTEGER", False) if root == "MULTISET" else t.children[1])
        ksize, vsize = np.diff(koffs), np.diff(voffs)

        offs = _layout(4 + ksize + vsize)
        data = np.zeros(int(offs[-1]), np.uint8)
        every = np.ones(n, bool)
        _scatter(data, offs[:-1], _words(ksize.astype(np.int32)), 4, every)
        _copy(data, offs[:-1] + 4, kdata, koffs[:-1], ksize, every)
        _copy(data, offs[:-1] + 4 + ksize, vdata, voffs[:-1], vsize, every)
    elif root == "RAW":
        offs, data = _binary(array)
    elif root == "ROW":
        offs, data = _rows(array, t, None, present)
    elif root == "ARRAY":
        counts, (values,) = _elements(array, present, array.values)
        offs, data = _arrays(counts, values, t.children[0])
    elif root == "NULL":
        return _Field(present, zero, lambda out, slot, var, base: None)
    else:
        raise UnsupportedSerializerError(f"SQL type {t} cannot be encoded as BinaryRowData")
    size = np.diff(offs)  # RAW, ROW, ARRAY, MAP: always in the variable part
    return _Field(present, np.where(present, _round8(size), 0), _var_part(data, offs[:-1], size, present, present))


def _var_part(data: np.ndarray, start: np.ndarray, size: np.ndarray, present: np.ndarray, live: np.ndarray) -> Any:
    """The writer of values kept in the variable part: data[start:start + size] where present, the slot's offset and
    size where live."""
    def write(out: np.ndarray, slot: np.ndarray, var: np.ndarray, base: np.ndarray) -> None:
        _copy(out, var, data, start, size, present)
        _scatter(out, slot, _words((var - base) << 32 | size), 8, live)
    return write


def _elements(array: pa.Array, present: np.ndarray, *children: pa.Array) -> tuple[np.ndarray, list[pa.Array]]:
    """Elements of each present list or map (0 where absent), and the children's elements of those, in order."""
    offs = np.asarray(array.offsets, np.int64)
    counts = np.where(present, np.diff(offs), 0)
    total = int(counts.sum())
    if total == int(offs[-1] - offs[0]):  # no absent list holds elements: one slice
        return counts, [c.slice(int(offs[0]), total) for c in children]
    index = np.repeat(offs[:-1] - (np.cumsum(counts) - counts), counts) + np.arange(total)
    return counts, [c.take(pa.array(index)) for c in children]


def _layout(sizes: np.ndarray) -> np.ndarray:
    """The n + 1 int64 offsets of sections of these sizes laid end to end."""
    offsets = np.zeros(len(sizes) + 1, np.int64)
    np.cumsum(sizes, out=offsets[1:])
    return offsets


def _rows(column: pa.Array, row: SqlType, kinds: np.ndarray | None, valid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The rows of a struct column where valid, as (int64 offsets, bytes): a row's RowKind byte (kinds, else INSERT),
    its null bits, its fields' slots, then their variable parts in field order."""
    arity = len(row.children)
    nb = _row_null_bytes(arity)
    fixed = nb + 8 * arity
    fields = [_prepare(ft, child, valid) for ft, child in zip(row.children, column.flatten() if arity else [], strict=True)]
    offsets = _layout(sum((f.var for f in fields), np.where(valid, fixed, 0)))
    start = offsets[:-1]
    out = np.zeros(int(offsets[-1]), np.uint8)
    if kinds is not None:
        _scatter(out, start, kinds, 1, valid)
    cursor = start + fixed
    for i, f in enumerate(fields):
        _set_bits(out, start, np.full(len(start), i + 8, np.int64), valid & ~f.present)
        f.write(out, start + (nb + 8 * i), cursor, start)
        cursor = cursor + f.var
    return offsets, out


def _arrays(counts: np.ndarray, elements: pa.Array, element: SqlType) -> tuple[np.ndarray, np.ndarray]:
    """BinaryArrayData of the elements, counts[r] of them for array r, as (int64 offsets, bytes): an i32 count, null
    bits, elements of FIXED_SIZE bytes (8 by default) with the header rounded to 8 bytes, then their variable parts."""
    width = FIXED_SIZE.get(element.root, 8)
    header = _array_header(counts)
    fixed = _round8(header + width * counts)
    f = _prepare(element, elements, _mask(elements))  # a null element reserves nothing (BinaryArrayWriter's setNullLong)
    owner = np.repeat(np.arange(len(counts)), counts)
    first = _layout(counts)  # index of each array's first element
    var_before = _layout(f.var)  # variable bytes of the elements before each element
    offsets = _layout(fixed + var_before[first[1:]] - var_before[first[:-1]])
    start = offsets[:-1]
    out = np.zeros(int(offsets[-1]), np.uint8)
    _scatter(out, start, _words(counts.astype(np.int32)), 4, np.ones(len(counts), bool))
    base = start[owner]
    j = np.arange(len(elements), dtype=np.int64) - first[:-1][owner]
    _set_bits(out, base + 4, j, ~f.present)
    f.write(out, base + header[owner] + width * j, base + fixed[owner] + var_before[:-1] - var_before[first[:-1]][owner], base)
    return offsets, out


def encode_rows(column: pa.Array | pa.ChunkedArray, row: SqlType) -> pa.Array:
    """A struct column (as `decode_rows` gives) as BinaryRowData bytes, one row each, nulls kept; the RowKind from a
    last `_row_kind` field when there is one (null: INSERT), else INSERT."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    kinds = None
    if pa.types.is_struct(column.type) and column.type.num_fields == len(row.children) + 1 \
            and column.type.field(column.type.num_fields - 1).name == ROW_KIND:
        named = column.flatten()[-1]
        index = pc.index_in(named, value_set=pa.array(ROW_KINDS))
        if index.null_count > named.null_count:
            bad = pc.filter(named, pc.and_(pc.is_null(index), pc.is_valid(named)))
            raise UnsupportedSerializerError(f"{ROW_KIND} {bad[0].as_py()!r} is not a RowKind ({', '.join(ROW_KINDS)})")
        kinds = np.asarray(index.fill_null(0), np.uint8)
        column = pa.StructArray.from_arrays(column.flatten()[:-1], fields=list(column.type)[:-1],
                                            mask=column.is_null() if column.null_count else None)
    if not pa.types.is_struct(column.type) or column.type.num_fields != len(row.children):
        raise UnsupportedSerializerError(f"a {column.type} column cannot be encoded as {row}")
    valid = _mask(column)
    offsets, data = _rows(column, row, kinds, valid)
    validity = None if valid.all() else pa.array(valid).buffers()[1]
    nulls = len(column) - int(valid.sum())
    if offsets[-1] < 2**31:
        return pa.Array.from_buffers(pa.binary(), len(column), [validity, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data)], nulls)
    return pa.Array.from_buffers(pa.large_binary(), len(column), [validity, pa.py_buffer(offsets), pa.py_buffer(data)], nulls)
