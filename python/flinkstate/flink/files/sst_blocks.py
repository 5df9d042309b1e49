"""The entries of many SST blocks parsed at once by a compiled loop (numba, flink/_jit.py): no Python loop per entry.

Source: RocksDB `table/block_based/block_builder.cc`. A block holds prefix-compressed entries
(varint32 shared, varint32 non_shared, varint32 value_length, key delta, value; an index block
with delta-encoded values has no value_length, its value being a varint offset and size), then a
restart array (u32 offsets of the entries that share nothing) and its u32 length, whose top bit
flags a hash index. The restart arrays are checked with numpy (every segment within its block, in
order); then one compiled pass counts and checks each segment's entries, and a second writes where
each value lies and rebuilds each key as the previous key's shared prefix plus its delta.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from flinkstate.flink._jit import kernel
from flinkstate.flink.errors import CorruptFileError, UnsupportedFlinkFormatError
from flinkstate.flink.files.views import Views, windows

__all__ = ["PAD", "Entries", "parse_blocks", "varints"]

PAD = 16  # zero bytes after a parsed buffer: a varint or u32 read at a valid position never reads past it


def varints(buf: np.ndarray, pos: np.ndarray, where: str) -> tuple[np.ndarray, np.ndarray]:
    """(values, positions after) of the varint32 at each position of buf (padded by PAD bytes)."""
    b = buf[pos]
    val = (b & 0x7F).astype(np.int64)
    more = np.flatnonzero(b >= 0x80)
    if not len(more):
        return val, pos + 1
    width = np.ones(len(pos), np.int64)
    shift = 7
    while len(more):
        if shift > 28:
            raise CorruptFileError(f"{where}: a varint32 runs over 5 bytes at byte {int(pos[more[0]])} of a block")
        b = buf[pos[more] + width[more]]
        val[more] |= (b & 0x7F).astype(np.int64) << shift
        width[more] += 1
        more = more[b >= 0x80]
        shift += 7
    return val, pos + width


def _u32(buf: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """The little-endian u32 at each position."""
    return windows(buf, 4)[pos].view("<u4").astype(np.int64)


@dataclass(frozen=True)
class Entries:
    """The entries of the parsed blocks in block order: each one's block (its index in the blocks parsed), where its
    value starts in the buffer and, for data blocks, the user keys, the internal keys' trailers (u64 sequence << 8 |
    type) and the values (views of the buffer, not copies); for index blocks, where each key's delta starts, its
    length and how many bytes it shares with the key before."""

    keys: pa.LargeBinaryArray | None
    trailers: np.ndarray | None
    values: Views | None
    value_starts: np.ndarray
    buf: np.ndarray
    blocks: np.ndarray
    key_starts: np.ndarray | None = None
    key_deltas: np.ndarray | None = None
    key_shared: np.ndarray | None = None

    def handles(self, where: str) -> tuple[np.ndarray, np.ndarray]:
        """(offsets, sizes) of the block handles the values encode (an index block's)."""
        offsets, pos = varints(self.buf, self.value_starts, where)
        sizes, _ = varints(self.buf, pos, where)
        return offsets, sizes


def _segments(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, names: np.ndarray,
              where: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(start, end, block) of every restart segment of the blocks buf[starts:ends], checked against the restart arrays."""
    if (ends - starts < 4).any():
        at = int(names[np.argmax(ends - starts < 4)])
        raise CorruptFileError(f"{where}: the block at {at} is shorter than its restart count")
    packed = _u32(buf, ends - 4)
    if (packed >> 31).any():
        raise UnsupportedFlinkFormatError(f"{where}: SST data blocks with a hash index are not supported")
    num = packed
    limit = ends - 4 - 4 * num  # where a block's entries end: its restart array
    bad = (limit < starts) | ((num == 0) & (limit > starts))
    if bad.any():
        at = int(np.argmax(bad))
        raise CorruptFileError(f"{where}: the block at {int(names[at])} has a restart array of {int(num[at])} entries that does not fit")
    total = int(num.sum())
    first = np.cumsum(num) - num
    k = np.arange(total) - np.repeat(first, num)
    seg_start = np.repeat(starts, num) + _u32(buf, np.repeat(limit, num) + 4 * k)
    seg_end = np.empty(total, np.int64)
    seg_end[:-1] = seg_start[1:]
    has = num > 0
    seg_end[(first + num - 1)[has]] = limit[has]
    bad_seg = (seg_end < seg_start) | (seg_start > np.repeat(limit, num))
    bad_seg[first[has]] |= seg_start[first[has]] != starts[has]
    if bad_seg.any():
        at = int(np.repeat(names, num)[np.argmax(bad_seg)])
        raise CorruptFileError(f"{where}: the block at {at} has restart points out of order or outside its entries")
    return seg_start, seg_end, np.repeat(np.arange(len(starts)), num)


def parse_blocks(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, names: np.ndarray, where: str, *,
                 data: bool, delta_values: bool = False) -> Entries:
    """Every entry of the blocks buf[starts[i]:ends[i]] (buf padded by PAD zero bytes), in block order.

    names: each block's offset in the file, for messages. data: data blocks (keys, trailers and values are
    returned; of index blocks only where their values start, the block handles). delta_values: an index block's delta-encoded handles
    (every entry a restart point, as RocksDB writes them with its default index restart interval 1).
    An entry that overruns its restart segment, a key sharing more than the previous key holds, a restart entry
    that shares anything: a CorruptFileError naming the file and the block.
    """
    seg_start, seg_end, seg_block = _segments(buf, starts, ends, names, where)
    err = np.zeros(3, np.int64)
    count, longest, key_bytes = _scan(buf, seg_start, seg_end, delta_values, data, err)
    if err[0]:
        at = int(names[seg_block[err[1]]])
        if err[0] == _VARINT:
            raise CorruptFileError(f"{where}: a varint32 runs over 5 bytes at byte {int(err[2])} of a block")
        if err[0] == _DELTA:
            raise UnsupportedFlinkFormatError(f"{where}: an index block with delta-encoded handles and a restart interval "
                                              "over 1 is not supported")
        raise CorruptFileError(f"{where}: {_ERRORS[int(err[0])]} in the block at {at}")
    base = np.cumsum(count) - count
    n = int(count.sum())
    vstart, vend = np.empty(n, np.int64), np.empty(n, np.int64)
    blocks = np.repeat(seg_block, count)
    if not data:
        kstart, shared = np.empty(n, np.int64), np.empty(n, np.int64)
        _fill(buf, seg_start, seg_end, base, False, delta_values, vstart, vend, kstart, shared, np.empty(1, np.int64),
              np.empty(0, np.uint64), np.empty(0, np.uint8), np.empty(0, np.uint8))
        return Entries(None, None, None, vstart, buf, blocks, kstart, vstart - kstart, shared)
    offsets, trailers = np.empty(n + 1, np.int64), np.empty(n, np.uint64)
    keys = np.empty(key_bytes, np.uint8)
    _fill(buf, seg_start, seg_end, base, True, False, vstart, vend, np.empty(0, np.int64), np.empty(0, np.int64), offsets, trailers,
          keys, np.empty(longest, np.uint8))
    user = pa.Array.from_buffers(pa.large_binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(keys)])
    return Entries(user, trailers, Views.of(buf, vstart, vend - vstart), vstart, buf, blocks)


# Sequential parsing, compiled by numba (flink/_jit.py): one pass counts each restart segment's entries and checks
# them, the next writes where each value lies and rebuilds each key as its shared prefix of the previous key plus its
# delta. Error codes of the count pass, and the messages naming the block they raise:
_OVERRUN, _RESTART_SHARES, _SHARES_MORE, _SHORT_KEY, _VARINT, _DELTA = 1, 2, 3, 4, 5, 6
_ERRORS = {_OVERRUN: "an entry overruns its restart array", _RESTART_SHARES: "a restart entry shares a prefix",
           _SHARES_MORE: "a key shares more than the previous key holds",
           _SHORT_KEY: "an internal key is shorter than its 8-byte trailer"}


@kernel
def _scan(buf: np.ndarray, seg_start: np.ndarray, seg_end: np.ndarray, delta_values: bool, data: bool,
          err: np.ndarray) -> tuple[np.ndarray, int, int]:
    """(entries of each segment, the longest internal key, the user keys' bytes); err = (code, segment, byte) of the
    first error found. Reads at most 15 bytes past a segment's end (buffers have PAD more)."""
    count = np.zeros(len(seg_start), np.int64)
    hdr = np.zeros(5, np.int64)
    fields = 2 if delta_values else 3
    longest, key_bytes = 0, 0
    for s in range(len(seg_start)):
        pos, end, klen, j = seg_start[s], seg_end[s], 0, 0
        while pos < end:
            if delta_values and j:
                err[0], err[1] = _DELTA, s
                return count, longest, key_bytes
            for f in range(fields + 2 if delta_values else fields):  # an index's delta value: a handle's 2 varints
                if f == fields:
                    pos += hdr[1]  # over the key delta, to the value
                    if pos > end:
                        break
                v, shift, first = 0, 0, pos
                while True:
                    b = np.int64(buf[pos])
                    pos += 1
                    v |= (b & 0x7F) << shift
                    if b < 0x80:
                        break
                    shift += 7
                    if shift > 28:
                        err[0], err[1], err[2] = _VARINT, s, first
                        return count, longest, key_bytes
                hdr[f] = v
            shared, non_shared = hdr[0], hdr[1]
            vend = pos if delta_values else pos + non_shared + hdr[2]
            code = 0
            if vend > end:
                code = _OVERRUN
            elif j == 0 and shared > 0:
                code = _RESTART_SHARES
            elif shared > klen:
                code = _SHARES_MORE
            elif data and shared + non_shared < 8:
                code = _SHORT_KEY
            if code:
                err[0], err[1] = code, s
                return count, longest, key_bytes
            klen = shared + non_shared
            longest = max(longest, klen)
            key_bytes += klen - 8 if data else 0
            count[s] += 1
            pos, j = vend, j + 1
    return count, longest, key_bytes


@kernel
def _fill(buf: np.ndarray, seg_start: np.ndarray, seg_end: np.ndarray, base: np.ndarray, data: bool, delta_values: bool,
          vstart: np.ndarray, vend: np.ndarray, kstart: np.ndarray, shared_of: np.ndarray, offsets: np.ndarray,
          trailers: np.ndarray, keys: np.ndarray, key: np.ndarray) -> None:
    """Where each entry's value lies (entries checked by _scan); of a data entry its user key (offsets and bytes) and
    trailer (u64 sequence << 8 | type), key being room for the longest internal key; of an index entry where its key
    delta starts and the bytes it shares. Positions are unsigned: numba then indexes without wrapping negative ones,
    which makes the byte copies 3x faster."""
    one, seven, low7, high = np.uint64(1), np.uint64(7), np.uint64(0x7F), np.uint64(0x80)
    offsets[0] = 0
    at = np.uint64(0)
    hdr = np.zeros(3, np.uint64)
    fields = 2 if delta_values else 3
    for s in range(len(seg_start)):
        pos, end, i = np.uint64(seg_start[s]), np.uint64(seg_end[s]), base[s]
        while pos < end:
            for f in range(fields):
                v, shift = np.uint64(0), np.uint64(0)
                while True:
                    c = np.uint64(buf[pos])
                    pos += one
                    v |= (c & low7) << shift
                    shift += seven
                    if c < high:
                        break
                hdr[f] = v
            shared, delta = hdr[0], hdr[1]
            vstart[i], vend[i] = pos + delta, pos + delta + hdr[2]
            if delta_values:  # the value: a block handle's two varints
                q = pos + delta
                for f in range(2):
                    while buf[q] >= high:
                        q += one
                    q += one
                vend[i] = q
            if not data:
                kstart[i], shared_of[i] = pos, shared
            else:
                q = np.uint64(0)
                while q < delta:  # the key: the previous key's shared bytes, then the delta
                    key[shared + q] = buf[pos + q]
                    q += one
                user = shared + delta - np.uint64(8)
                q = np.uint64(0)
                while q < user:
                    keys[at + q] = key[q]
                    q += one
                t = np.uint64(0)
                for b in range(8):
                    t |= np.uint64(key[user + np.uint64(b)]) << np.uint64(8 * b)
                trailers[i] = t
                at += user
                offsets[i + 1] = at
            pos = np.uint64(vend[i])
            i += 1
