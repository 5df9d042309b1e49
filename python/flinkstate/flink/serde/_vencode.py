"""Vectorised value encoding: one serializer applied to a whole Arrow column at once (the mirror of `_vector`).

`column_encoder(node, ctx)` gives a function from an Arrow array to a `Bin` whose row i is exactly the
bytes the per-value writer (`encode.make_writer`) appends for value i. Vectorised: Long, Int, Short,
Byte, Boolean, Double, Float, Char (ASCII), String (`StringValue`: varint(UTF-16 length + 1), 0 for null, then
each UTF-16 unit as a varint, from the UTF-8 bytes with numpy; ASCII bytes as they are), byte[], raw serialized
bytes (Kryo/Avro/unknown classes, BinaryRowData/ArrayData, StringData), VoidNamespace, TimeWindow,
enum, Row (null mask), Tuple and POJO (null flags) of these, and arrays and List values of these (all
elements at once). Any other serializer, or a column whose
Arrow type is not the natural one (e.g. floats for a Long), goes through the per-value writer, so the
bytes are always the same; values that do not fit raise ValueError/TypeError like the per-value writer.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from flinkstate.flink.serde._bin import Bin, binary_parts, concat, varint
from flinkstate.flink.serde.encode import make_writer, plain_values
from flinkstate.flink.serde.serializers import TypeNode, whole_bytes

__all__ = ["VEncoder", "column_encoder", "per_value_encoder"]

VEncoder = Callable[[pa.Array], Bin]

_NUMERIC = {"long": (">i8", pa.int64()), "int": (">i4", pa.int32()), "short": (">i2", pa.int16()), "byte": ("i1", pa.int8()),
            "double": (">f8", pa.float64()), "float": (">f4", pa.float32()), "bool": ("u1", pa.bool_())}
_INTEGER = ("long", "int", "short", "byte")


def per_value_encoder(node: TypeNode, ctx: str) -> VEncoder:
    """The reference: each value through the per-value writer into one buffer."""
    write = make_writer(node, ctx)

    def enc(arr: pa.Array) -> Bin:
        out = bytearray()
        offsets = np.zeros(len(arr) + 1, np.int64)
        for i, v in enumerate(plain_values(arr)):
            write(out, v)
            offsets[i + 1] = len(out)
        return Bin.var(offsets, np.frombuffer(bytes(out), np.uint8))

    return enc


def _no_nulls(arr: pa.Array, what: str) -> None:
    if arr.null_count:
        raise ValueError(f"a null {what} value at row {_first_null(arr)}")


def _first_null(arr: pa.Array) -> int:
    return int(np.flatnonzero(~_valid(arr))[0])


def _valid(arr: pa.Array) -> np.ndarray:
    """The validity of each row as a numpy bool array."""
    if arr.null_count == 0:
        return np.ones(len(arr), bool)
    return arr.is_valid().to_numpy(zero_copy_only=False)


def _natural(kind: str, t: pa.DataType) -> bool:
    if kind in _INTEGER:
        return pa.types.is_integer(t)
    return t == _NUMERIC[kind][1]


def _numeric(node: TypeNode, fallback: VEncoder) -> VEncoder:
    kind = node.kind
    dtype, target = _NUMERIC[kind]
    width = np.dtype(dtype).itemsize

    def enc(arr: pa.Array) -> Bin:
        if not _natural(kind, arr.type):
            return fallback(arr)
        _no_nulls(arr, kind)
        if arr.type != target:
            arr = arr.cast(target, safe=True)  # out of range: ArrowInvalid (a ValueError)
        values = arr.to_numpy(zero_copy_only=False)
        return Bin.fixed(values.astype(dtype).view(np.uint8).reshape(len(arr), width))

    return enc


def _is_str(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t)


def _is_bin(t: pa.DataType) -> bool:
    return pa.types.is_binary(t) or pa.types.is_large_binary(t)


def _char(fallback: VEncoder) -> VEncoder:
    """CharSerializer: one big-endian UTF-16 unit per value (each string one character of the Basic Multilingual Plane)."""

    def enc(arr: pa.Array) -> Bin:
        if not _is_str(arr.type) or arr.null_count:
            return fallback(arr)
        found = _utf16_units(Bin.from_arrow(arr))
        if found is None or (found[1] != 1).any():
            return fallback(arr)  # not one BMP character per value: the per-value writer says what is wrong
        return Bin.fixed(found[0].astype(">u2").view(np.uint8).reshape(len(arr), 2))

    return enc


def _string(fallback: VEncoder) -> VEncoder:
    """StringValue: varint(UTF-16 length + 1) (0 for null), then each UTF-16 unit as a varint (ASCII: its byte)."""

    def enc(arr: pa.Array) -> Bin:
        if not _is_str(arr.type):
            return fallback(arr)
        offsets, data = binary_parts(arr)
        lens = np.diff(offsets)
        valid = _valid(arr)
        body = Bin.var(offsets, data)
        if not valid.all():
            lens = np.where(valid, lens, 0)
            if lens.sum() != len(data):  # null slots holding bytes
                body = body.keep(valid)
        if not len(body.data) or body.data.max() < 0x80:  # ASCII: units are the bytes
            return concat([varint(np.where(valid, lens + 1, 0)), body])
        try:
            arr.validate(full=True)  # well-formed UTF-8 in every row
        except pa.ArrowInvalid:
            return fallback(arr)  # the per-value writer says what is wrong
        units, chars = _utf16_varints(body)
        return concat([varint(np.where(valid, units + 1, 0)), chars])

    return enc


def _utf16_units(body: Bin) -> tuple[np.ndarray, np.ndarray] | None:
    """(UTF-16 units, units per row) of rows of UTF-8 bytes, or None when a row is not well-formed UTF-8.

    The rows are transcoded in one call of Python's codec (C speed); a row's units are its characters plus one
    more for each supplementary one (a 4-byte UTF-8 sequence, a surrogate pair in UTF-16). A row starting with a
    continuation byte is refused, so no character spans two rows."""
    offsets, data = body.as_var()
    try:
        units = np.frombuffer(data.tobytes().decode("utf-8").encode("utf-16-le"), "<u2")
    except UnicodeDecodeError:
        return None
    lens = np.diff(offsets)
    starts = offsets[:-1][lens > 0]
    if len(starts) and ((data[starts] & 0xC0) == 0x80).any():
        return None
    per_byte = ((data & 0xC0) != 0x80).astype(np.int64) + (data >= 0xF0)
    counted = np.zeros(len(data) + 1, np.int64)
    np.cumsum(per_byte, out=counted[1:])
    return units, counted[offsets[1:]] - counted[offsets[:-1]]


def _utf16_varints(body: Bin) -> tuple[np.ndarray, Bin]:
    """Per row of well-formed UTF-8 bytes: its number of UTF-16 units and those units as 7-bit varints.

    Computed from the bytes: an ASCII byte is its own varint and is copied in bulk; only the non-ASCII sequences
    (their first bytes are >= 0xC0) are decoded, vectorised: a 2-byte sequence, or a 3-byte one of a unit below 0x4000,
    becomes 2 varint bytes, a 3-byte one from 0x4000 3 bytes, a 4-byte one (a supplementary character, a surrogate
    pair in UTF-16) 3 + 3 bytes."""
    offsets, data = body.as_var()
    lens = np.diff(offsets)
    lead = np.flatnonzero(data >= 0xC0)
    if not len(lead):
        return lens, body
    last = len(data) - 1
    b0 = data[lead].astype(np.int32)
    b1, b2, b3 = (data[np.minimum(lead + k, last)].astype(np.int32) & 0x3F for k in (1, 2, 3))
    seq = np.where(b0 >= 0xF0, 4, np.where(b0 >= 0xE0, 3, 2))
    cp = np.where(seq == 2, ((b0 & 0x1F) << 6) | b1,
                  np.where(seq == 3, ((b0 & 0x0F) << 12) | (b1 << 6) | b2, ((b0 & 0x07) << 18) | (b1 << 12) | (b2 << 6) | b3))
    pair = seq == 4
    high = np.where(pair, 0xD800 + ((cp - 0x10000) >> 10), cp)  # the (first) unit
    low = 0xDC00 + ((cp - 0x10000) & 0x3FF)  # a pair's second unit
    width = np.where(pair, 6, np.where(cp >= 0x4000, 3, 2))  # varint bytes of the sequence
    vb = np.empty((len(lead), 6), np.uint8)
    vb[:, 0] = (high & 0x7F) | 0x80
    vb[:, 1] = ((high >> 7) & 0x7F) | np.where(high >= 0x4000, 0x80, 0)
    vb[:, 2] = (high >> 14) & 0xFF
    vb[:, 3] = (low & 0x7F) | 0x80
    vb[:, 4] = ((low >> 7) & 0x7F) | 0x80
    vb[:, 5] = (low >> 14) & 0xFF
    grow = width - seq
    shift = np.cumsum(grow) - grow  # output bytes gained before each sequence
    ascii = np.ones(len(data), bool)
    ascii[(lead[:, None] + np.arange(4))[np.arange(4) < seq[:, None]]] = False
    out = np.empty(len(data) + int(grow.sum()), np.uint8)
    written = (lead + shift)[:, None] + np.arange(6)
    used = np.arange(6) < width[:, None]
    copied = np.ones(len(out), bool)
    copied[written[used]] = False
    out[copied] = data[ascii]
    out[written[used]] = vb[used]
    row = np.searchsorted(offsets, lead, side="right") - 1
    n = body.n
    row_grow = np.bincount(row, weights=grow, minlength=n).astype(np.int64)
    out_offsets = offsets.copy()
    out_offsets[1:] += np.cumsum(row_grow)
    units = lens - np.bincount(row, weights=seq - 1 - pair, minlength=n).astype(np.int64)
    return units, Bin.var(out_offsets, out)


def _framed(arrow_ok: Callable[[pa.DataType], bool], length: bool, what: str, fallback: VEncoder) -> VEncoder:
    """Bytes (or UTF-8) values, with an i32 length first when length is set."""

    def enc(arr: pa.Array) -> Bin:
        if not arrow_ok(arr.type):
            return fallback(arr)
        _no_nulls(arr, what)
        body = Bin.from_arrow(arr)
        if not length:
            return body
        return concat([Bin.fixed(body.lens().astype(">i4").view(np.uint8).reshape(-1, 4)), body])

    return enc


def _void(arr: pa.Array) -> Bin:
    return Bin.fixed(np.zeros((len(arr), 1), np.uint8))


def _struct_field(arr: pa.Array, name: str) -> pa.Array | None:
    i = arr.type.get_field_index(name)
    return arr.field(i) if i >= 0 else None


def _time_window(fallback: VEncoder) -> VEncoder:
    """TimeWindow: i64 start, i64 end."""
    long = _numeric(TypeNode("long", ""), fallback)

    def enc(arr: pa.Array) -> Bin:
        if not pa.types.is_struct(arr.type) or _struct_field(arr, "start") is None or _struct_field(arr, "end") is None:
            return fallback(arr)
        _no_nulls(arr, "TimeWindow")
        return concat([long(_struct_field(arr, "start")), long(_struct_field(arr, "end"))])

    return enc


def _enum(node: TypeNode, fallback: VEncoder) -> VEncoder:
    """EnumSerializer: the i32 ordinal of the constant's name."""
    names = pa.array(list(node.names), pa.string())

    def enc(arr: pa.Array) -> Bin:
        if not _is_str(arr.type):
            return fallback(arr)
        ords = pc.index_in(arr, value_set=names)
        if ords.null_count:
            raise ValueError(f"{arr[_first_null(ords)].as_py()!r} is not a constant of enum {node.cls}")
        return Bin.fixed(ords.to_numpy(zero_copy_only=False).astype(">i4").view(np.uint8).reshape(-1, 4))

    return enc


def _present_part(enc: VEncoder, child: pa.Array | None, present: np.ndarray) -> Bin:
    """The child's values where present (others take no bytes)."""
    if child is None or not present.any():
        return Bin.from_lens(np.zeros(len(present), np.int64), np.zeros(0, np.uint8))
    sub = child if present.all() else child.filter(pa.array(present))
    return enc(sub).expand(present)


def _row(node: TypeNode, ctx: str, fallback: VEncoder) -> VEncoder:
    """Row: a null mask (2 bits of RowKind first unless legacy) and the present fields."""
    fields = [(n, column_encoder(c, ctx)) for n, c in zip(node.names, node.children, strict=True)]
    offset = 0 if node.legacy_row else 2
    mask_bytes = (len(fields) + offset + 7) // 8
    top = 8 * mask_bytes - 1 - offset

    def enc(arr: pa.Array) -> Bin:
        if not pa.types.is_struct(arr.type) or mask_bytes > 8:
            return fallback(arr)
        _no_nulls(arr, "Row")
        mask = np.zeros(len(arr), np.uint64)
        parts = []
        for i, (name, fe) in enumerate(fields):
            child = _struct_field(arr, name)
            here = _valid(child) if child is not None else np.zeros(len(arr), bool)
            mask |= np.where(here, np.uint64(0), np.uint64(1 << (top - i)))
            parts.append(_present_part(fe, child, here))
        head = mask.astype(">u8").view(np.uint8).reshape(-1, 8)[:, 8 - mask_bytes :]
        return concat([Bin.fixed(head), *parts])

    return enc


def _tuple(node: TypeNode, ctx: str, fallback: VEncoder) -> VEncoder:
    """Tuple: the fields one after the other (each as its serializer writes a null)."""
    fields = [(n, column_encoder(c, ctx)) for n, c in zip(node.names, node.children, strict=True)]

    def enc(arr: pa.Array) -> Bin:
        if not pa.types.is_struct(arr.type) or any(_struct_field(arr, n) is None for n, _ in fields):
            return fallback(arr)
        _no_nulls(arr, "Tuple")
        return concat([fe(_struct_field(arr, n)) for n, fe in fields])

    return enc


def _pojo(node: TypeNode, ctx: str, fallback: VEncoder) -> VEncoder:
    """POJO: 1 for null, else 2 then per field a null flag (1 = null) and the present value."""
    fields = [(n, column_encoder(c, ctx)) for n, c in zip(node.names, node.children, strict=True)]

    def enc(arr: pa.Array) -> Bin:
        if not pa.types.is_struct(arr.type):
            return fallback(arr)
        valid = _valid(arr)
        parts = [Bin.fixed(np.where(valid, 2, 1).astype(np.uint8).reshape(-1, 1))]
        for name, fe in fields:
            child = _struct_field(arr, name)
            here = valid & _valid(child) if child is not None else np.zeros(len(arr), bool)
            flags = (~here[valid]).astype(np.uint8)
            parts.append(Bin.fixed(flags.reshape(-1, 1)).expand(valid))
            parts.append(_present_part(fe, child, here))
        return concat(parts)

    return enc


def _array(node: TypeNode, ctx: str, fallback: VEncoder, flagged: bool) -> VEncoder:
    """long[]..., String[], List values (i32 length, then the elements) and Integer[]... (GenericArraySerializer: a
    presence byte before each element): every row's elements encoded at once, cut back into rows by the list offsets."""
    elem = column_encoder(node.children[0], ctx)

    def enc(arr: pa.Array) -> Bin:
        if not (pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type)) or arr.null_count:
            return fallback(arr)
        offs = np.asarray(arr.offsets.to_numpy(zero_copy_only=False), np.int64)
        child = arr.values.slice(int(offs[0]), int(offs[-1] - offs[0]))
        offs = offs - offs[0]
        head = Bin.fixed(np.diff(offs).astype(">i4").view(np.uint8).reshape(-1, 4))
        if flagged:
            present = _valid(child)
            elems = concat([Bin.fixed(present.astype(np.uint8).reshape(-1, 1)), _present_part(elem, child, present)])
        else:
            elems = elem(child)
        eo, data = elems.as_var()
        return concat([head, Bin.var(eo[offs], data)])

    return enc


def column_encoder(node: TypeNode, ctx: str) -> VEncoder:
    """The column encoder of this serializer: vectorised where listed above, else the per-value writer."""
    kind = node.kind
    if kind == "transparent":  # its nested serializer's bytes
        return column_encoder(node.children[0], ctx)
    fallback = per_value_encoder(node, ctx)
    if kind in _NUMERIC:
        return _numeric(node, fallback)
    if kind == "char":
        return _char(fallback)
    if kind == "string":
        return _string(fallback)
    if kind in ("bytes", "rowdata", "arraydata"):
        return _framed(_is_bin, True, kind, fallback)
    if kind in ("opaque", "unknown") or whole_bytes(node):  # values kept as their bytes: written as they were read
        return _framed(_is_bin, False, kind, fallback)
    if kind == "stringdata":
        return _framed(_is_str, True, kind, fallback)
    if kind == "void":
        return _void
    if kind == "timewindow":
        return _time_window(fallback)
    if kind == "enum":
        return _enum(node, fallback)
    if kind == "row":
        return _row(node, ctx, fallback)
    if kind == "tuple":
        return _tuple(node, ctx, fallback)
    if kind == "pojo":
        return _pojo(node, ctx, fallback)
    if kind in ("list", "parray", "sarray", "garray"):
        return _array(node, ctx, fallback, kind == "garray")
    return fallback
