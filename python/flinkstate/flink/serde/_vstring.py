"""Vectorised Java strings: `StringValue` strings (UTF-16 units as 7-bit varints) and chars, as Arrow UTF-8 strings.

A string is varint(length + 1) (0 = null), then its UTF-16 units, each a little-endian 7-bit varint (1 to 3 bytes).
Its first `length` bytes are copied out of the stream by Arrow (`byte_slices`); when none of a column's bytes has the
high bit, every string is ASCII and these bytes are its UTF-8 (checked once per column). Otherwise only the strings
with a high byte (a non-ASCII unit starts with one, within the first `length` bytes) are decoded (`_vrun`: their exact
ends, then their UTF-8 for the column at once, or one by one when there are only a few); Arrow puts them back among
the ASCII ones.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from flinkstate.flink.serde._vbuf import Source, binary_parts, byte_slices, gather
from flinkstate.flink.serde._vrun import (
    few_runs_to_utf8,
    high_bytes,
    run_ends,
    runs_to_utf8,
    utf16_to_utf8,
)

__all__ = ["char_reader", "string_reader"]

_FEW = 8  # up to this many non-ASCII strings (of 16 units on average) are decoded one by one

def _safe(pos: np.ndarray, present: np.ndarray | None) -> np.ndarray:
    return pos if present is None else np.where(present, pos, 0)


def _advance(pos: np.ndarray, end: np.ndarray, present: np.ndarray | None) -> np.ndarray:
    return end if present is None else np.where(present, end, pos)


def varints(arr: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Little-endian base-128 varints at pos: (values, byte lengths)."""
    b = arr[pos]
    more = b >= 0x80
    if not more.any():  # the common case: one byte each (strings shorter than 127 units)
        return b.astype(np.int64), np.ones(len(pos), np.int64)
    value = (b & 0x7F).astype(np.int64)
    length = np.ones(len(pos), np.int64)
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


def _validity(valid: np.ndarray) -> tuple[pa.Buffer | None, int]:
    """(Arrow validity bitmap or None when all are valid, null count)."""
    nulls = int(len(valid) - np.count_nonzero(valid))
    return (None if nulls == 0 else pa.py_buffer(np.packbits(valid, bitorder="little"))), nulls


def string_reader(src: Source, pos: np.ndarray, present: np.ndarray | None) -> tuple[pa.Array, np.ndarray]:
    """StringValue.readString at each position (absent ones take no bytes): the strings and the offsets after them."""
    arr = src.arr
    if present is None:
        n, hdr = varints(arr, pos)
        valid = n > 0
    else:  # absent values read no header (0 units, not null: masked by present)
        n, hdr = np.zeros(len(pos), np.int64), np.zeros(len(pos), np.int64)
        n[present], hdr[present] = varints(arr, pos[present])
        valid = present & (n > 0)
    chars = np.where(valid, n - 1, 0)
    data_start = pos + hdr
    raw = byte_slices(src, data_start, chars)  # each string's first `chars` bytes: all of it when it is ASCII
    end = data_start + chars
    offsets, data = binary_parts(raw)
    if len(data) and data.max() >= 0x80:
        raw = _transcode(src, raw, offsets, data, data_start, chars, end)
    bitmap, nulls = _validity(valid)
    bufs = raw.buffers()
    out = pa.Array.from_buffers(pa.string(), len(pos), [bitmap, bufs[1], bufs[2]], nulls, raw.offset)
    return out, _advance(pos, end, present)


def _transcode(src: Source, raw: pa.BinaryArray, offsets: np.ndarray, data: np.ndarray, data_start: np.ndarray,
               chars: np.ndarray, end: np.ndarray) -> pa.BinaryArray:
    """raw with the strings that have a high byte (non-ASCII units) re-encoded from unit varints to UTF-8; end moved
    past their real bytes. The work is per high byte and per wide string, bar one copy of the wide strings' bytes."""
    highs = high_bytes(offsets, data)  # among each string's first `chars` bytes
    wide = np.flatnonzero(highs)
    starts, counts = data_start[wide], chars[wide]
    if len(wide) <= _FEW and int(counts.sum()) <= 16 * _FEW:
        ends, utf8, lens = few_runs_to_utf8(src.buf, starts, counts)
        end[wide] = ends
    else:
        ends = run_ends(src, starts, counts, highs[wide])
        end[wide] = ends
        r_off, r = binary_parts(byte_slices(src, starts, ends - starts))  # each wide string's exact bytes
        utf8, lens = runs_to_utf8(r, r_off, counts)
    w_off = np.zeros(len(wide) + 1, np.int64)
    np.cumsum(lens, out=w_off[1:])
    if w_off[-1] + offsets[-1] >= 2**31:
        raise ValueError("more than 2 GiB of string data in one chunk")
    transcoded = pa.Array.from_buffers(pa.binary(), len(wide), [None, pa.py_buffer(w_off.astype(np.int32)), pa.py_buffer(utf8)])
    if len(wide) == len(chars):
        return transcoded
    take = np.arange(len(chars), dtype=np.int32)
    take[wide] = len(chars) + np.arange(len(wide), dtype=np.int32)
    return pa.concat_arrays([raw, transcoded]).take(pa.array(take))


def _utf16_to_utf8(units: np.ndarray, row: np.ndarray, n_rows: int) -> tuple[np.ndarray, np.ndarray]:
    """UTF-8 bytes of UTF-16 units (row: each unit's row, ascending; surrogate pairs joined within a row) and each
    row's UTF-8 length. One call of Python's codec transcodes them all (C speed); a high surrogate ending a row
    would pair with the next row's first unit there, so it is refused first, like any unpaired surrogate."""
    utf8 = utf16_to_utf8(units, np.flatnonzero(np.append(row[1:] != row[:-1], True)) if len(row) else row)
    # UTF-8 bytes per unit: 1 below 0x80, 2 below 0x800, 2 for each half of a surrogate pair (4 per character), else 3
    nb = 1 + (units >= 0x80) + ((units >= 0x800) & ((units & 0xF800) != 0xD800))
    return np.frombuffer(utf8, np.uint8), np.bincount(row, weights=nb, minlength=n_rows).astype(np.int64)


def char_reader(src: Source, pos: np.ndarray, present: np.ndarray | None) -> tuple[pa.Array, np.ndarray]:
    """CharSerializer: one big-endian UTF-16 unit, as a one-character string."""
    units = gather(src.arr, _safe(pos, present), ">u2").astype(np.int64)
    valid = np.ones(len(pos), bool) if present is None else present
    utf8, lens = _utf16_to_utf8(units[valid], np.arange(int(valid.sum())), int(valid.sum()))
    all_lens = np.zeros(len(pos), np.int64)
    all_lens[valid] = lens
    offsets = np.zeros(len(pos) + 1, np.int64)
    np.cumsum(all_lens, out=offsets[1:])
    bitmap, nulls = _validity(valid)
    out = pa.Array.from_buffers(pa.string(), len(pos), [bitmap, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(utf8)], nulls)
    return out, _advance(pos, pos + 2, present)
