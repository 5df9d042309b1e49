"""Vectorised Java strings: `StringValue` strings (UTF-16 units as 7-bit varints) and chars, as Arrow UTF-8 strings.

A string is varint(length + 1) (0 = null), then its UTF-16 units, each a little-endian 7-bit varint (1 to 3 bytes).
Its first `length` bytes are copied out of the stream by Arrow (`byte_slices`); when none of a column's bytes has the
high bit, every string is ASCII and these bytes are its UTF-8 (checked once per column). Otherwise only the strings
with a high byte (a non-ASCII unit starts with one, within the first `length` bytes) have their unit varints decoded
and transcoded to UTF-8 (one codec call for the column); Arrow puts them back among the ASCII ones.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from flinkstate.flink.serde._vbuf import (
    Source,
    binary_parts,
    byte_slices,
    gather,
    segments,
)

__all__ = ["char_reader", "string_reader"]


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
    past their real bytes. High bytes are few (mostly-ASCII text) or the strings are all wide: either way the work
    below is per high byte or per wide string, not per byte of the column."""
    row = np.searchsorted(offsets, np.flatnonzero(data >= 0x80), side="right") - 1
    wide = row[np.flatnonzero(np.append(True, row[1:] != row[:-1]))] if len(row) else row
    w_chars = chars[wide]
    units, length, multi = _unit_varints(src, data_start[wide], w_chars)
    utf8, w_off = _to_utf8(units, w_chars, multi)
    end[wide] = data_start[wide] + length
    if w_off[-1] + offsets[-1] >= 2**31:
        raise ValueError("more than 2 GiB of string data in one chunk")
    transcoded = pa.Array.from_buffers(pa.binary(), len(wide), [None, pa.py_buffer(w_off.astype(np.int32)), pa.py_buffer(utf8)])
    take = np.arange(len(chars), dtype=np.int64)
    take[wide] = len(chars) + np.arange(len(wide))
    return pa.concat_arrays([raw, transcoded]).take(pa.array(take))


def _unit_varints(src: Source, starts: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(the UTF-16 units, each run's byte length, the indexes of the units of 2 or 3 bytes) of `counts` consecutive
    7-bit little-endian varints at each start.

    Each run is read from the 3 * count bytes that may hold it (and, when runs come in stream order, that end before
    the next run): a unit ends at a byte below 0x80, and at the last byte of each of these regions, so bytes past one
    run never join the next run's first unit. A run's units are then the first `count` units of its region, found for
    all runs at once; its last one must end at a byte below 0x80 (else the run does not fit its region)."""
    n = len(starts)
    limit = np.full(n, len(src.arr), np.int64)
    if n > 1 and bool((starts[1:] > starts[:-1]).all()):
        limit[:-1] = starts[1:]  # a run cannot reach into the next one
    region = byte_slices(src, starts, np.clip(np.minimum(3 * counts, limit - starts), 0, None))
    r_off, r = binary_parts(region)
    stop = np.less(r, 0x80)
    stop[r_off[1:][r_off[1:] > r_off[:-1]] - 1] = True
    unit_ends = np.flatnonzero(stop)
    first = np.searchsorted(unit_ends, r_off[:-1])  # each region's first unit
    after = first + counts
    if (after > np.append(first[1:], len(unit_ends))).any():
        raise IndexError("a string runs past the end of its record")
    last_end = unit_ends[after - 1]
    if (r[last_end] >= 0x80).any():
        raise IndexError("a string runs past the end of its record")
    end = unit_ends[segments(first, counts)]
    units = r[end].astype(np.int32)
    # a unit of 2 or 3 bytes: the byte before its last is no unit end (index -1 is the last region's end, a unit end)
    multi = np.flatnonzero(~stop[end - 1])
    low = end[multi]
    value = (units[multi] << 7) | (r[low - 1] & 0x7F)
    three = np.flatnonzero(~stop[low - 2])
    if not stop[low[three] - 3].all():
        raise ValueError("a UTF-16 unit varint is longer than 3 bytes")
    value[three] = (value[three] << 7) | (r[low[three] - 2] & 0x7F)
    if len(value) and value.max() > 0xFFFF:
        raise ValueError("a UTF-16 unit is larger than 0xFFFF")
    units[multi] = value
    return units, last_end + 1 - r_off[:-1], multi


def _utf16_bytes_to_utf8(units: np.ndarray, lasts: np.ndarray) -> bytes:
    """UTF-8 of all the units at once (lasts: each string's last unit). A high surrogate ending a string would pair
    with the next string's first unit in the one codec call, so it is refused first, like any unpaired surrogate."""
    if ((units[lasts] & 0xFC00) == 0xD800).any():
        raise ValueError("a string holds an unpaired UTF-16 surrogate, which an Arrow string cannot hold")
    try:
        return units.astype("<u2").tobytes().decode("utf-16-le").encode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError("a string holds an unpaired UTF-16 surrogate, which an Arrow string cannot hold") from e


def _to_utf8(units: np.ndarray, counts: np.ndarray, multi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """UTF-8 bytes of runs of UTF-16 units (counts per run; multi: the indexes of the units >= 0x80) and the runs' UTF-8
    offsets. One call of Python's codec transcodes them all (C speed); a high surrogate ending a run would pair with
    the next run's first unit there, so it is refused first, like any unpaired surrogate."""
    bounds = np.zeros(len(counts) + 1, np.int64)
    np.cumsum(counts, out=bounds[1:])
    utf8 = _utf16_bytes_to_utf8(units, bounds[1:][counts > 0] - 1)
    # UTF-8 bytes per unit: 1 below 0x80, 2 below 0x800, 2 for each half of a surrogate pair (4 per character), else 3
    u = units[multi]
    extra = 1 + ((u >= 0x800) & ((u & 0xF800) != 0xD800))
    lens = counts + np.bincount(np.searchsorted(bounds, multi, side="right") - 1, weights=extra, minlength=len(counts)).astype(np.int64)
    offsets = np.zeros(len(counts) + 1, np.int64)
    np.cumsum(lens, out=offsets[1:])
    return np.frombuffer(utf8, np.uint8), offsets


def _utf16_to_utf8(units: np.ndarray, row: np.ndarray, n_rows: int) -> tuple[np.ndarray, np.ndarray]:
    """UTF-8 bytes of UTF-16 units (row: each unit's row, ascending; surrogate pairs joined within a row) and each
    row's UTF-8 length. One call of Python's codec transcodes them all (C speed); a high surrogate ending a row
    would pair with the next row's first unit there, so it is refused first, like any unpaired surrogate."""
    utf8 = _utf16_bytes_to_utf8(units, np.flatnonzero(np.append(row[1:] != row[:-1], True)) if len(row) else row)
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
