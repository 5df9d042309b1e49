"""The table runtime's binary formats (BinaryRowData, BinaryArrayData, BinaryMapData) to Arrow and back.

A BinaryRowData (the keys and values of SQL and Table API operators' state) is: a null-bit set of
`((arity + 63 + 8) // 64) * 8` bytes whose first byte is the RowKind and whose bit `i + 8` marks field i null; one
8-byte little-endian slot per field; then a variable-length part. A slot holds a fixed-size value (BOOLEAN..BIGINT,
FLOAT, DOUBLE, DATE, TIME, intervals, a compact DECIMAL's unscaled long, a compact TIMESTAMP's milliseconds), or a
string/binary of at most 7 bytes inline (the top bit set, the length in the next 7 bits), or `offset << 32 | size` of
bytes in the variable part (offsets from the row's start; 8-byte aligned, zero padded). A BinaryArrayData is an i32
count, a null-bit set of `((n + 31) // 32) * 4` bytes, elements of 1, 2, 4 or 8 bytes, then its own variable part; a
BinaryMapData an i32 key-array size, the key array, then the value array. Decoding is vectorised with numpy over all
rows of a column (one pass per field, not per row); encoding writes rows as Flink's BinaryRowWriter does, so a row
decoded and encoded again is byte for byte the row Flink wrote (its key group, a hash of those bytes, included).
"""

from __future__ import annotations

import struct
from decimal import Context, Decimal
from typing import Any, Literal

import numpy as np
import pyarrow as pa
from numpy.lib.stride_tricks import as_strided

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
    total = int(size.sum())
    if total:
        ends = start + size
        if int(start.min()) < 0 or int(ends.max()) > len(buf.arr):
            raise CorruptFileError(f"{buf.where}: a BinaryRowData string or binary runs outside its row's bytes")
        idx = np.repeat(start - (np.cumsum(size) - size), size) + np.arange(total)
        data = buf.arr[idx]
    else:
        data = np.zeros(0, np.uint8)
    offsets = np.zeros(len(size) + 1, np.int64)
    np.cumsum(size, out=offsets[1:])
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
# Encoding: as BinaryRowWriter / BinaryArrayWriter write (zeroed slots for nulls, 8-byte aligned variable part).

_PACK = {"BOOLEAN": "<?", "TINYINT": "<b", "SMALLINT": "<h", "INTEGER": "<i", "BIGINT": "<q", "FLOAT": "<f", "DOUBLE": "<d",
         "DATE": "<i", "TIME_WITHOUT_TIME_ZONE": "<i", "INTERVAL_YEAR_MONTH": "<i", "INTERVAL_DAY_TIME": "<q"}


def _round8(n: int) -> int:
    return (n + 7) & ~7


class _Writer:
    """One binary section being written: a fixed part of known size, then the variable part appended (8-aligned)."""

    def __init__(self, fixed: int) -> None:
        self.out = bytearray(fixed)

    def put_slot(self, slot: int, word: int) -> None:
        self.out[slot : slot + 8] = struct.pack("<Q", word & 0xFFFFFFFFFFFFFFFF)

    def var(self, data: bytes, reserve: int | None = None) -> tuple[int, int]:
        """Append data in the variable part (padded to 8 bytes, or `reserve` zeroed bytes): (offset, size)."""
        offset = len(self.out)
        self.out += data
        self.out += bytes((reserve if reserve is not None else _round8(len(data))) - len(data))
        return offset, len(data)


def _set_slot(w: _Writer, slot: int, width: int, t: SqlType, v: Any) -> None:
    """Write value v (its raw form: see `_raw`) of type t into the slot of `width` bytes at slot."""
    root = t.root
    if root in _PACK:
        w.out[slot : slot + struct.calcsize(_PACK[root])] = struct.pack(_PACK[root], v)
    elif root == "DECIMAL" and t.compact:
        w.out[slot : slot + 8] = struct.pack("<q", v)
    elif root == "DECIMAL":
        data = v.to_bytes(max(1, (v.bit_length() + 8) // 8), "big", signed=True)
        offset, size = w.var(data, 16)
        w.put_slot(slot, offset << 32 | size)
    elif root in ("TIMESTAMP_WITHOUT_TIME_ZONE", "TIMESTAMP_WITH_LOCAL_TIME_ZONE"):
        if t.compact:
            w.out[slot : slot + 8] = struct.pack("<q", v)
        else:
            millis, nanos = divmod(v, 1_000_000)
            offset, _ = w.var(struct.pack("<q", millis))
            w.put_slot(slot, offset << 32 | nanos)
    elif root in _BYTES:
        if len(v) <= 7:
            w.put_slot(slot, (0x80 | len(v)) << 56 | int.from_bytes(v, "little"))
        else:
            offset, size = w.var(v)
            w.put_slot(slot, offset << 32 | size)
    elif root == "RAW":
        offset, size = w.var(v)
        w.put_slot(slot, offset << 32 | size)
    elif root == "ROW":
        offset, size = w.var(_encode_row(t, v))
        w.put_slot(slot, offset << 32 | size)
    elif root == "ARRAY":
        offset, size = w.var(_encode_array(t.children[0], v))
        w.put_slot(slot, offset << 32 | size)
    elif root in ("MAP", "MULTISET"):
        value_type = SqlType("INTEGER", False) if root == "MULTISET" else t.children[1]
        keys = _encode_array(t.children[0], [k for k, _ in v])
        values = _encode_array(value_type, [x for _, x in v])
        offset, size = w.var(struct.pack("<i", len(keys)) + keys + values)
        w.put_slot(slot, offset << 32 | size)
    else:
        raise UnsupportedSerializerError(f"SQL type {t} cannot be encoded as BinaryRowData")


def _set_null(w: _Writer, slot: int, t: SqlType) -> None:
    """A null: zeroed slot, except a non-compact DECIMAL or TIMESTAMP keeps its reserved bytes (as Flink's null setters do)."""
    if t.root == "DECIMAL" and not t.compact:
        offset, _ = w.var(b"", 16)
        w.put_slot(slot, offset << 32)
    elif t.root in ("TIMESTAMP_WITHOUT_TIME_ZONE", "TIMESTAMP_WITH_LOCAL_TIME_ZONE") and not t.compact:
        offset, _ = w.var(b"", 8)
        w.put_slot(slot, offset << 32)


def _encode_row(t: SqlType, values: list[Any] | tuple[Any, ...], kind: int = 0) -> bytes:
    nb = _row_null_bytes(len(t.children))
    w = _Writer(nb + 8 * len(t.children))
    w.out[0] = kind
    for i, (ft, v) in enumerate(zip(t.children, values, strict=True)):
        slot = nb + 8 * i
        if v is None:
            w.out[(i + 8) >> 3] |= 1 << ((i + 8) & 7)
            _set_null(w, slot, ft)
        else:
            _set_slot(w, slot, 8, ft, v)
    return bytes(w.out)


def _encode_array(element: SqlType, values: list[Any]) -> bytes:
    n = len(values)
    width = FIXED_SIZE.get(element.root, 8)
    header = _array_header(n)
    w = _Writer(header + _round8(width * n))
    w.out[0:4] = struct.pack("<i", n)
    for j, v in enumerate(values):
        slot = header + j * width
        if v is None:
            w.out[4 + (j >> 3)] |= 1 << (j & 7)
            _set_null(w, slot, element)
        else:
            _set_slot(w, slot, width, element, v)
    return bytes(w.out)


def _raw(array: pa.Array, t: SqlType) -> list[Any]:
    """Each value of an Arrow column in the raw form the writer takes: ints for temporal and decimal values (unscaled),
    UTF-8 bytes for strings, lists of raw fields for rows, (key, value) lists for maps."""
    root = t.root
    if root in ("TIMESTAMP_WITHOUT_TIME_ZONE", "TIMESTAMP_WITH_LOCAL_TIME_ZONE"):
        unit = "ms" if t.compact else "ns"
        return array.cast(pa.timestamp(unit, tz=getattr(array.type, "tz", None))).cast(pa.int64()).to_pylist()
    if root in ("DATE", "TIME_WITHOUT_TIME_ZONE"):
        return array.cast(pa.int32()).to_pylist()
    if root == "DECIMAL":
        scale = t.scale or 0
        return [None if d is None else int(d.scaleb(scale, _EXACT)) for d in array.cast(pa.decimal128(t.precision or 10, scale)).to_pylist()]
    if root in ("CHAR", "VARCHAR"):
        return array.cast(pa.binary()).to_pylist()
    if root == "ROW":
        cols = [_raw(array.field(i), ft) for i, ft in enumerate(t.children)]
        valid = array.is_valid().to_pylist()
        return [list(vals) if ok else None for ok, *vals in zip(valid, *cols, strict=True)] if cols else [[] if ok else None for ok in valid]
    if root == "ARRAY":
        flat = _raw(array.flatten(), t.children[0])
        offsets = array.offsets.to_pylist()
        valid = array.is_valid().to_pylist()
        return [flat[offsets[i] - offsets[0] : offsets[i + 1] - offsets[0]] if valid[i] else None for i in range(len(array))]
    if root in ("MAP", "MULTISET"):
        keys = _raw(array.keys, t.children[0])
        items = _raw(array.items, SqlType("INTEGER", False) if root == "MULTISET" else t.children[1])
        offsets = array.offsets.to_pylist()
        valid = array.is_valid().to_pylist()
        return [list(zip(keys[offsets[i] - offsets[0] : offsets[i + 1] - offsets[0]], items[offsets[i] - offsets[0] : offsets[i + 1] - offsets[0]],
                         strict=True)) if valid[i] else None for i in range(len(array))]
    return array.to_pylist()


def encode_rows(column: pa.Array | pa.ChunkedArray, row: SqlType) -> pa.Array:
    """A struct column (as `decode_rows` gives) as BinaryRowData bytes, one row each, nulls kept; the RowKind from a
    last `_row_kind` field when there is one (null: INSERT), else INSERT."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    kinds: list[int] = []
    if pa.types.is_struct(column.type) and column.type.num_fields == len(row.children) + 1 \
            and column.type.field(column.type.num_fields - 1).name == ROW_KIND:
        named = column.flatten()[-1].to_pylist()
        bad = sorted({k for k in named if k is not None and k not in ROW_KINDS})
        if bad:
            raise UnsupportedSerializerError(f"{ROW_KIND} {bad[0]!r} is not a RowKind ({', '.join(ROW_KINDS)})")
        kinds = [0 if k is None else ROW_KINDS.index(k) for k in named]
        mask = column.is_null() if column.null_count else None
        column = pa.StructArray.from_arrays(column.flatten()[:-1], fields=list(column.type)[:-1], mask=mask)
    if not pa.types.is_struct(column.type) or column.type.num_fields != len(row.children):
        raise UnsupportedSerializerError(f"a {column.type} column cannot be encoded as {row}")
    raw = _raw(column, row)
    return pa.array([None if r is None else _encode_row(row, r, kinds[i] if kinds else 0) for i, r in enumerate(raw)], pa.binary())
