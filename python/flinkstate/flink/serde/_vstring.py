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
import pyarrow.compute as pc

from flinkstate.flink.serde._vbuf import (
    Source,
    binary_parts,
    byte_slices,
    gather,
    segments,
)

__all__ = ["char_reader", "string_reader"]

# Over the 256 patterns of 8 bits (the first byte's lowest): how many are set, and (row d) 1 + the index of the d-th
# set one (0 when fewer are set)
_RANKS = np.cumsum(np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1, bitorder="little"), axis=1)
_STOPS = _RANKS[:, -1].astype(np.int64)
_NTH_STOP = np.array([np.where((_RANKS == d).any(axis=1), 1 + (_RANKS == d).argmax(axis=1), 0) for d in range(9)], np.int64)


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
    past their real bytes."""
    highs = chars - _stops(offsets, data)  # high bytes among each string's first `chars` bytes
    wide = np.flatnonzero(highs)
    starts, counts = data_start[wide], chars[wide]
    ends = _run_ends(src, starts, counts, highs[wide])
    end[wide] = ends
    run = byte_slices(src, starts, ends - starts)  # each wide string's exact bytes
    r_off, r = binary_parts(run)
    units, multi, multi_at = _unit_values(r)
    utf8 = np.frombuffer(_utf16_bytes_to_utf8(units, np.cumsum(counts) - 1), np.uint8)
    w_off = np.zeros(len(counts) + 1, np.int64)
    np.cumsum(_utf8_lengths(r_off, len(r), units[multi], multi_at), out=w_off[1:])
    if w_off[-1] + offsets[-1] >= 2**31:
        raise ValueError("more than 2 GiB of string data in one chunk")
    transcoded = pa.Array.from_buffers(pa.binary(), len(wide), [None, pa.py_buffer(w_off.astype(np.int32)), pa.py_buffer(utf8)])
    if len(wide) == len(chars):
        return transcoded
    take = np.arange(len(chars), dtype=np.int32)
    take[wide] = len(chars) + np.arange(len(wide), dtype=np.int32)
    return pa.concat_arrays([raw, transcoded]).take(pa.array(take))


def _stops(offsets: np.ndarray, data: np.ndarray) -> np.ndarray:
    """The bytes below 0x80 in each of the binary values (offsets, data), counted by Arrow's utf8_length: it counts the
    bytes that are not UTF-8 continuation bytes (0x80 to 0xBF), and clearing bit 6 makes every high byte one."""
    return _not_continuation(offsets, data & 0xBF)


def _not_continuation(offsets: np.ndarray, data: np.ndarray) -> np.ndarray:
    """Per binary value (offsets, data): its bytes that are not UTF-8 continuation bytes (0x80 to 0xBF), as int64.
    Arrow's utf8_length counts exactly these (it does not validate), one C loop per value."""
    values = pa.Array.from_buffers(pa.string(), len(offsets) - 1, [None, pa.py_buffer(offsets), pa.py_buffer(data)])
    return pc.utf8_length(values).to_numpy().astype(np.int64)


def _utf8_lengths(r_off: np.ndarray, size: int, multi: np.ndarray, multi_at: np.ndarray) -> np.ndarray:
    """The UTF-8 length of each run of unit varints (r_off: the runs' offsets in their `size` bytes; multi: the values
    of the units of 2 or 3 bytes, multi_at: the offset of their first byte). A unit takes as many UTF-8 bytes as
    varint bytes but from 0x800 to 0x3FFF (2 -> 3) and for a surrogate half (3 -> 2, 4 for the pair). Counted in one
    Arrow call over two marks per byte: the first counts, the second counts only for the first byte of a unit from
    0x800 to 0x3FFF; neither counts for the first byte of a surrogate."""
    if 2 * size >= 2**31:
        raise ValueError("more than 1 GiB of string data in one chunk")
    marks = np.full(size, 0x8000, "<u2")  # bytes 0x00 (counted) and 0x80 (not)
    marks[multi_at[(multi >= 0x800) & (multi < 0x4000)]] = 0x0000
    marks[multi_at[(multi & 0xF800) == 0xD800]] = 0x8080
    return _not_continuation(2 * r_off, marks.view(np.uint8))


def _run_ends(src: Source, starts: np.ndarray, counts: np.ndarray, highs: np.ndarray) -> np.ndarray:
    """Where each run of `counts` unit varints ends, given the high bytes among its first `counts` bytes (at least
    one). A run is its units' last bytes (below 0x80) plus one byte per high byte in it: past its first `counts` bytes
    it still needs as many bytes below 0x80 as it had high bytes. When few, the next 8 bytes of each run (one 64-bit
    read) show where it gets them; else it takes the bytes it needs at least, and needs one more per high byte there.

    A run must end within 3 * count bytes and, when runs come in stream order, before the next one starts."""
    n, arr = len(starts), src.arr
    bound = np.full(n, len(arr), np.int64)
    if n > 1 and bool((starts[1:] > starts[:-1]).all()):
        bound[:-1] = starts[1:]  # a run cannot reach into the next one
    np.minimum(bound, starts + 3 * counts, out=bound)
    at, need, ends, rows = starts + counts, highs.astype(np.int64), None, None
    while True:
        if (at + need > bound).any():
            raise IndexError("a string runs past the end of its record")
        if int(need.max()) <= 8:
            window = _window_stops(arr, at)
            step = _NTH_STOP[need, window]
            found = step > 0
            at = at + np.where(found, step, 8)
            need = need - _STOPS[window]
        else:
            gained = byte_slices(src, at, need)
            g_off, g = binary_parts(gained)
            at = at + need
            need = need - _stops(g_off, g)
            found = need == 0
        if (at > bound).any():
            raise IndexError("a string runs past the end of its record")
        if ends is None:
            ends = at
        else:
            ends[rows] = at
        if bool(found.all()):
            return ends
        left = np.flatnonzero(~found)
        rows = left if rows is None else rows[left]
        at, need, bound = at[left], need[left], bound[left]


def _window_stops(arr: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Which of the 8 bytes from each offset (below len(arr)) are below 0x80, as the bits of a byte (the first byte's
    lowest); bytes past the stream count as below 0x80 (a run ending there is past its bound)."""
    w = _words(arr, at, 8)
    stops = (~w >> np.uint64(7)) & np.uint64(0x0101010101010101)
    return ((stops * np.uint64(0x0102040810204080)) >> np.uint64(56)).astype(np.intp)


def _unit_values(r: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(the UTF-16 units, the indexes of those of 2 or 3 bytes, the offset of their first byte in r) of r, whole runs
    of 7-bit little-endian unit varints: a unit is its high bytes (>= 0x80) and the byte below 0x80 that ends it.
    A unit of 2 or 3 bytes starts at a high byte after a byte below 0x80 (or at r's start) and is read from the 32
    bits there (one read each): before it, as many units as bytes below 0x80, less one per unit of 3 bytes."""
    stop = r < 0x80
    units = r[stop].astype("<u2")
    starts = ~stop
    starts[1:] &= stop[:-1]
    at = np.flatnonzero(starts)
    w = _words(r, at, 4).astype(np.int64)
    three = (w & 0x8000) != 0
    if bool((three & ((w & 0x800000) != 0)).any()):
        raise ValueError("a UTF-16 unit varint is longer than 3 bytes")
    value = (w & 0x7F) | ((w >> 1) & 0x3F80) | np.where(three, (w >> 2) & 0x1FC000, 0)
    if len(value) and value.max() > 0xFFFF:
        raise ValueError("a UTF-16 unit is larger than 0xFFFF")
    earlier = np.cumsum(three) - three  # units of 3 bytes before each
    multi = at - np.arange(len(at)) - earlier
    units[multi] = value
    return units, multi, at


def _words(arr: np.ndarray, at: np.ndarray, width: int) -> np.ndarray:
    """The little-endian unsigned `width`-byte words (4 or 8) at each offset below len(arr); bytes past the end of arr
    read as 0."""
    if len(arr) < width:
        arr = np.concatenate([arr, np.zeros(width - len(arr), np.uint8)])
    dt = np.dtype(f"<u{width}")
    words = np.ndarray((len(arr) - width + 1,), dtype=dt, buffer=arr, offset=0, strides=(1,))
    base = np.minimum(at, len(arr) - width)
    return words[base] >> ((at - base) * 8).astype(dt)


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
