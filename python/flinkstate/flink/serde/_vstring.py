"""Vectorised Java strings: `StringValue` strings (UTF-16 units as 7-bit varints) and chars, as Arrow UTF-8 strings.

A string is varint(length + 1) (0 = null), then its UTF-16 units, each a little-endian 7-bit varint (1 to 3 bytes).
A compiled loop (numba, flink/_jit.py) reads every string of a column in two passes: where each ends and how many
UTF-8 bytes it takes (checking its units), then its UTF-8 into the column's buffer. Surrogate pairs become one 4-byte
character; an unpaired surrogate (which an Arrow string cannot hold) is a ValueError, as are malformed units; bytes
running out an IndexError.
"""

from __future__ import annotations

import codecs

import numpy as np
import pyarrow as pa

from flinkstate.flink._jit import kernel
from flinkstate.flink.serde._vbuf import Source, gather

__all__ = ["char_reader", "string_reader"]

_UNPAIRED = "a string holds an unpaired UTF-16 surrogate, which an Arrow string cannot hold"
_ERRORS = {1: (IndexError, "a value runs past the end of the stream"), 2: (ValueError, "a string length varint is longer than 5 bytes"),
           3: (IndexError, "a string runs past the end of its record"), 4: (ValueError, "a UTF-16 unit varint is longer than 3 bytes"),
           5: (ValueError, "a UTF-16 unit is larger than 0xFFFF"), 6: (ValueError, _UNPAIRED)}


@kernel
def _strings(arr: np.ndarray, pos: np.ndarray, present: np.ndarray, bound: np.ndarray, ends: np.ndarray, offsets: np.ndarray,
             out: np.ndarray, err: np.ndarray) -> None:
    """Each present string at pos, its units before bound: the first pass (out empty) checks them (err = code, string)
    and writes its end and UTF-8 length (offsets[k + 1]); the second writes its UTF-8 at offsets[k]."""
    write = len(out) > 0
    size = len(arr)
    for k in range(len(pos)):
        p, at = pos[k], offsets[k] if write else 0
        if not present[k]:
            ends[k] = p
            continue
        n, shift = 0, 0
        while True:  # varint(length + 1)
            if p >= size:
                err[0], err[1] = 1, k
                return
            b = np.int64(arr[p])
            p += 1
            n |= (b & 0x7F) << shift
            if b < 0x80:
                break
            shift += 7
            if shift > 28:
                err[0], err[1] = 2, k
                return
        high = 0  # a high surrogate waiting for its low half
        limit = bound[k]
        for _ in range(n - 1):
            if p >= limit:
                err[0], err[1] = 3, k
                return
            u = np.int64(arr[p])
            p += 1
            if u >= 0x80:  # a unit of 2 or 3 bytes
                u &= 0x7F
                for shift in (7, 14):
                    if p >= limit:
                        err[0], err[1] = 3, k
                        return
                    b = np.int64(arr[p])
                    p += 1
                    u |= (b & 0x7F) << shift
                    if b < 0x80:
                        break
                    if shift == 14:
                        err[0], err[1] = 4, k
                        return
                if u > 0xFFFF:
                    err[0], err[1] = 5, k
                    return
            if (u & 0xFC00) == 0xDC00:  # a low surrogate: the pair's character, 4 bytes
                if not high:
                    err[0], err[1] = 6, k
                    return
                c = 0x10000 + ((high - 0xD800) << 10) + (u - 0xDC00)
                if write:
                    out[at], out[at + 1] = 0xF0 | (c >> 18), 0x80 | ((c >> 12) & 0x3F)
                    out[at + 2], out[at + 3] = 0x80 | ((c >> 6) & 0x3F), 0x80 | (c & 0x3F)
                at, high = at + 4, 0
                continue
            if high or (u & 0xFC00) == 0xD800:
                if high:
                    err[0], err[1] = 6, k
                    return
                high = u
                continue
            if u < 0x80:
                if write:
                    out[at] = u
                at += 1
            elif u < 0x800:
                if write:
                    out[at], out[at + 1] = 0xC0 | (u >> 6), 0x80 | (u & 0x3F)
                at += 2
            else:
                if write:
                    out[at], out[at + 1], out[at + 2] = 0xE0 | (u >> 12), 0x80 | ((u >> 6) & 0x3F), 0x80 | (u & 0x3F)
                at += 3
        if high:
            err[0], err[1] = 6, k
            return
        ends[k] = p
        if not write:
            offsets[k + 1] = at


def _validity(valid: np.ndarray) -> tuple[pa.Buffer | None, int]:
    """(Arrow validity bitmap or None when all are valid, null count)."""
    nulls = int(len(valid) - np.count_nonzero(valid))
    return (None if nulls == 0 else pa.py_buffer(np.packbits(valid, bitorder="little"))), nulls


def string_reader(src: Source, pos: np.ndarray, present: np.ndarray | None) -> tuple[pa.Array, np.ndarray]:
    """StringValue.readString at each position (absent ones take no bytes): the strings and the offsets after them."""
    n = len(pos)
    here = np.ones(n, bool) if present is None else present
    pos = pos.astype(np.int64, copy=False)
    ends, lengths, err = np.empty(n, np.int64), np.zeros(n + 1, np.int64), np.zeros(2, np.int64)
    bound = np.full(n, len(src.arr), np.int64)  # in stream order, a string ends before the next one starts
    starts = pos[here]
    if len(starts) > 1 and bool((starts[1:] > starts[:-1]).all()):
        bound[np.flatnonzero(here)[:-1]] = starts[1:]
    _strings(src.arr, pos, here, bound, ends, lengths, np.zeros(0, np.uint8), err)
    if err[0]:
        kind, message = _ERRORS[int(err[0])]
        raise kind(message)
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(lengths[1:], out=offsets[1:])
    if offsets[-1] >= 2**31:
        raise ValueError("more than 2 GiB of string data in one chunk")
    data = np.empty(max(int(offsets[-1]), 1), np.uint8)
    _strings(src.arr, pos, here, bound, ends, offsets, data, err)
    valid = here.copy()  # a null string: its length varint is 0
    valid[here] = src.arr[pos[here]] != 0
    bitmap, nulls = _validity(valid)
    return pa.Array.from_buffers(pa.string(), n, [bitmap, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data)], nulls), ends


def char_reader(src: Source, pos: np.ndarray, present: np.ndarray | None) -> tuple[pa.Array, np.ndarray]:
    """CharSerializer: one big-endian UTF-16 unit, as a one-character string (a surrogate alone is a ValueError)."""
    valid = np.ones(len(pos), bool) if present is None else present
    units = gather(src.arr, np.where(valid, pos, 0), ">u2").astype(np.int64)[valid]
    if ((units & 0xF800) == 0xD800).any():
        raise ValueError(_UNPAIRED)
    utf8 = np.frombuffer(codecs.utf_16_le_decode(units.astype("<u2"), "strict", True)[0].encode("utf-8"), np.uint8)
    lens = np.zeros(len(pos), np.int64)
    lens[valid] = 1 + (units >= 0x80) + (units >= 0x800)
    offsets = np.zeros(len(pos) + 1, np.int64)
    np.cumsum(lens, out=offsets[1:])
    bitmap, nulls = _validity(valid)
    out = pa.Array.from_buffers(pa.string(), len(pos), [bitmap, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(utf8)], nulls)
    return out, np.where(valid, pos + 2, pos)
