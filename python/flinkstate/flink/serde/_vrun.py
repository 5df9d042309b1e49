"""Runs of `StringValue` unit varints (UTF-16 units, each a little-endian 7-bit varint of 1 to 3 bytes): where each
run ends in the stream (`run_ends`) and the UTF-8 of whole runs (`runs_to_utf8`), with work per high byte and per run
rather than per byte wherever numpy allows; `few_runs_to_utf8` does both one byte at a time for a handful of runs.

A run's bytes below 0x80 end its units, so a run of n units is n such bytes plus its high bytes, and a unit of 2 or 3
bytes starts at a high byte that follows a byte below 0x80. When every unit takes as many bytes in UTF-8 as in its
varint (ASCII; 0x80 to 0x7FF in 2 bytes; 0x800 up but surrogates in 3: Latin, Greek, Cyrillic, CJK...) the UTF-8 is
written over a copy of the runs; else the units go through Python's codec in one call. Per-run counts come from
Arrow's utf8_length over marked bytes (it counts the bytes that are no UTF-8 continuation byte, without validating).
"""

from __future__ import annotations

import codecs

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from flinkstate.flink.serde._vbuf import Source, binary_parts, byte_slices

__all__ = ["few_runs_to_utf8", "high_bytes", "run_bounds", "run_ends", "runs_to_utf8", "utf16_to_utf8"]

_UNPAIRED = "a string holds an unpaired UTF-16 surrogate, which an Arrow string cannot hold"

# Over the 256 patterns of 8 bits (the first byte's lowest): how many are set, and (row d) 1 + the index of the d-th
# set one (0 when fewer are set)
_RANKS = np.cumsum(np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1, bitorder="little"), axis=1)
_SET = _RANKS[:, -1].astype(np.int64)
_NTH_SET = np.array([np.where((_RANKS == d).any(axis=1), 1 + (_RANKS == d).argmax(axis=1), 0) for d in range(9)],
                    np.int64).ravel()  # row d at d << 8


def high_bytes(offsets: np.ndarray, data: np.ndarray) -> np.ndarray:
    """The bytes >= 0x80 in each binary value (int32 offsets into data), as int64. Arrow's utf8_length counts the bytes
    that are not UTF-8 continuation bytes (0x80 to 0xBF; it does not validate), one C loop per value: with bit 6
    cleared, every high byte is one and every other byte is not."""
    return (offsets[1:] - offsets[:-1]) - _count(offsets, data & 0xBF)


def run_ends(src: Source, starts: np.ndarray, counts: np.ndarray, highs: np.ndarray) -> np.ndarray:
    """Where each run of `counts` unit varints ends, given the high bytes among its first `counts` bytes (at least one).

    Past these it still needs one byte below 0x80 per high byte. When it needs at most 8, the next 8 bytes (one 64-bit
    read) show where it finds them, if there; else it takes the bytes it needs at least and needs one more per high
    byte among them. A run must end within 3 * count bytes and, when runs come in stream order, before the next one
    starts (IndexError)."""
    arr = src.arr
    bound = run_bounds(starts, counts, len(arr))
    at, need, ends, rows = starts + counts, highs.astype(np.int64), None, None
    while True:
        if int(need.max()) <= 8:  # bytes past the bound (or the stream) may be read, but a run ending there fails
            window = _stop_bits(arr, at)
            step = _NTH_SET.take((need << 8) | window)
            found = step > 0
            at = at + np.where(found, step, 8)
            need = need - _SET.take(window)
        else:
            if bool((at + need > bound).any()):
                raise IndexError("a string runs past the end of its record")
            g_off, g = binary_parts(byte_slices(src, at, need))
            at = at + need
            need = high_bytes(g_off, g)
            found = need == 0
        if bool((at > bound).any()):
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


def run_bounds(starts: np.ndarray, counts: np.ndarray, size: int) -> np.ndarray:
    """How far each run may reach: 3 bytes a unit and, when runs come in stream order, the next run's start."""
    bound = np.full(len(starts), size, np.int64)
    if len(starts) > 1 and bool((starts[1:] > starts[:-1]).all()):
        bound[:-1] = starts[1:]
    return np.minimum(bound, starts + 3 * counts)


def few_runs_to_utf8(buf: bytes, starts: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, bytes, np.ndarray]:
    """`run_ends` and `runs_to_utf8` one byte at a time, for a few short runs (a column's fixed costs dominate
    there): (ends, UTF-8 bytes, UTF-8 lengths), with the same errors raised first."""
    ends = []
    for s, c, b in zip(starts.tolist(), counts.tolist(), run_bounds(starts, counts, len(buf)).tolist(), strict=True):
        p, k = s, 0
        while k < c:
            if p >= b:
                raise IndexError("a string runs past the end of its record")
            k += buf[p] < 0x80
            p += 1
        ends.append(p)
    runs, too_long, too_big = [], False, False
    for s, e in zip(starts.tolist(), ends, strict=True):
        units, acc, shift = [], 0, 0
        for b in buf[s:e]:
            acc |= (b & 0x7F) << shift
            if b < 0x80:
                too_big |= acc > 0xFFFF
                units.append(acc & 0xFFFF)
                acc = shift = 0
            else:
                shift += 7
                too_long |= shift > 14
        runs.append(units)
    if too_long:
        raise ValueError("a UTF-16 unit varint is longer than 3 bytes")
    if too_big:
        raise ValueError("a UTF-16 unit is larger than 0xFFFF")
    try:
        utf8 = [np.array(u, "<u2").tobytes().decode("utf-16-le").encode("utf-8") for u in runs]
    except UnicodeDecodeError as e:
        raise ValueError(_UNPAIRED) from e
    return np.array(ends, np.int64), b"".join(utf8), np.array([len(u) for u in utf8], np.int64)


def _stop_bits(arr: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Which of the 8 bytes from each offset (below len(arr)) are below 0x80, as the bits of a byte (the first byte's
    lowest); bytes past the stream count as below 0x80 (a run ending there is past its bound anyway)."""
    stops = (~_words(arr, at, 8) >> np.uint64(7)) & np.uint64(0x0101010101010101)
    return ((stops * np.uint64(0x0102040810204080)) >> np.uint64(56)).astype(np.intp)


def _words(arr: np.ndarray, at: np.ndarray, width: int) -> np.ndarray:
    """The little-endian unsigned `width`-byte words (4 or 8) at each offset below len(arr), bytes past arr as 0."""
    if len(arr) < width:
        arr = np.concatenate([arr, np.zeros(width - len(arr), np.uint8)])
    dt = np.dtype(f"<u{width}")
    words = np.ndarray((len(arr) - width + 1,), dtype=dt, buffer=arr, offset=0, strides=(1,))
    last = len(arr) - width
    if len(at) == 0 or int(at.max()) <= last:
        return words[at]
    base = np.minimum(at, last)
    return words[base] >> ((at - base) * 8).astype(dt)


def runs_to_utf8(r: np.ndarray, r_off: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray | bytes, np.ndarray]:
    """(the UTF-8 bytes, each run's UTF-8 length) of whole runs of unit varints r (r_off: the runs' int32 offsets,
    counts: their units).

    A unit of 2 or 3 bytes starts at a high byte after a byte below 0x80 (or at r's start): each is read from the 32
    bits there. When each takes as many bytes in UTF-8, their UTF-8 is written over a copy of r; else the units go
    through Python's codec (C speed, one call). Errors as Java's units allow no Arrow string: a varint over 3 bytes,
    a unit over 0xFFFF, an unpaired surrogate (ValueError)."""
    stop = r < 0x80
    first = ~stop
    first[1:] &= stop[:-1]
    at = np.flatnonzero(first)
    w = _words(r, at, 4)
    three = (w & 0x8000) != 0
    if bool((three & ((w & 0x800000) != 0)).any()):
        raise ValueError("a UTF-16 unit varint is longer than 3 bytes")
    v = (w & 0x7F) | ((w >> 1) & 0x3F80) | ((w >> 2) & 0x1FC000) * three
    if len(v) and int(v.max()) > 0xFFFF:
        raise ValueError("a UTF-16 unit is larger than 0xFFFF")
    surrogate = (v & 0xF800) == 0xD800
    # UTF-8 bytes (1 below 0x80, 2 below 0x800 and per surrogate half, else 3) less varint bytes (2 or 3)
    grow = (v >= 0x80).astype(np.int8) + ((v >= 0x800) & ~surrogate) - three - 1
    lens = (r_off[1:] - r_off[:-1]).astype(np.int64)
    if not bool(grow.any() or surrogate.any()):
        out = r.copy()
        _encode_in_place(out, at, v, three)
        return out, lens
    units = _compress(r, stop).astype("<u2")
    index = at - np.arange(len(at))  # the unit of each: as many units before it as bytes below 0x80
    if bool(three.any()):
        index -= np.cumsum(three, dtype=np.int64) - three
    units[index] = v
    utf8 = utf16_to_utf8(units, np.cumsum(counts) - 1)  # each run has a unit (a high byte)
    # units of 2 or 3 bytes before each run: as many as its high bytes, less one per unit of 3 bytes
    multi = (lens - counts) if not bool(three.any()) else _count(r_off, (~first).view(np.uint8) << 7)
    before = np.zeros(len(r_off), np.int64)
    np.cumsum(multi, out=before[1:])
    grown = np.zeros(len(v) + 1, np.int64)
    np.cumsum(grow, dtype=np.int64, out=grown[1:])
    lens += grown[before[1:]] - grown[before[:-1]]
    return utf8, lens


def _compress(data: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """data[keep] by Arrow's filter: it copies the runs of kept bytes 64 at a time, where numpy tests each."""
    mask = pa.Array.from_buffers(pa.bool_(), len(keep), [None, pa.py_buffer(np.packbits(keep, bitorder="little"))])
    values = pa.Array.from_buffers(pa.uint8(), len(data), [None, pa.py_buffer(data)])
    return pc.filter(values, mask).to_numpy()


def _count(offsets: np.ndarray, marks: np.ndarray) -> np.ndarray:
    """Per binary value (int32 offsets into marks): its bytes that are no UTF-8 continuation byte (0x80 to 0xBF), as
    int64: Arrow's utf8_length counts exactly these (it does not validate), one C loop per value."""
    values = pa.Array.from_buffers(pa.string(), len(offsets) - 1, [None, pa.py_buffer(offsets), pa.py_buffer(marks)])
    return pc.utf8_length(values).to_numpy().astype(np.int64)


def utf16_to_utf8(units: np.ndarray, lasts: np.ndarray) -> bytes:
    """UTF-8 of all the units at once (lasts: each string's last unit). A high surrogate ending a string would pair
    with the next string's first unit in the one codec call, so it is refused first, like any unpaired surrogate."""
    if bool(((units[lasts] & 0xFC00) == 0xD800).any()):
        raise ValueError(_UNPAIRED)
    try:
        return codecs.utf_16_le_decode(units.astype("<u2", copy=False), "strict", True)[0].encode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(_UNPAIRED) from e


def _encode_in_place(out: np.ndarray, at: np.ndarray, v: np.ndarray, three: np.ndarray) -> None:
    """Write the UTF-8 of units of 2 bytes (0x80 to 0x7FF) and 3 bytes (0x800 up, no surrogate) over their bytes."""
    out[at] = np.where(three, 0xE0 | (v >> 12), 0xC0 | (v >> 6)).astype(np.uint8)
    out[at + 1] = (0x80 | (np.where(three, v >> 6, v) & 0x3F)).astype(np.uint8)
    out[at[three] + 2] = (0x80 | (v[three] & 0x3F)).astype(np.uint8)
