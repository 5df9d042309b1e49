"""The entries of many SST blocks parsed at once with numpy and Arrow: no Python loop per entry.

Source: RocksDB `table/block_based/block_builder.cc`. A block holds prefix-compressed entries
(varint32 shared, varint32 non_shared, varint32 value_length, key delta, value; an index block
with delta-encoded values has no value_length, its value being a varint offset and size), then a
restart array (u32 offsets of the entries that share nothing) and its u32 length, whose top bit
flags a hash index. Every restart segment starts with a whole key, so all segments of all blocks are
parsed in lockstep: step j decodes the j-th entry of every segment that has one (about 16 steps with
RocksDB's default restart interval), and key j of a segment is key j-1's shared prefix plus its delta,
rebuilt for all segments at once by Arrow's `take` and `binary_join_element_wise`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numpy.lib.stride_tricks import sliding_window_view

from flinkstate.flink.errors import CorruptFileError, UnsupportedFlinkFormatError

__all__ = ["PAD", "Entries", "parse_blocks", "varints"]

PAD = 16  # zero bytes after a parsed buffer: a varint or u32 read at a valid position never reads past it
_EMPTY = b""


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
    return np.ascontiguousarray(sliding_window_view(buf, 4)[pos]).view("<u4").ravel().astype(np.int64)


def _binary(offsets: np.ndarray, data: pa.Buffer | np.ndarray) -> pa.LargeBinaryArray:
    """A large_binary array over data whose item i is data[offsets[i]:offsets[i + 1]] (offsets ascending)."""
    buf = data if isinstance(data, pa.Buffer) else pa.py_buffer(data)
    return pa.LargeBinaryArray.from_buffers(pa.large_binary(), len(offsets) - 1, [None, pa.py_buffer(offsets), buf])


def _offsets(arr: pa.Array) -> np.ndarray:
    return np.frombuffer(arr.buffers()[1], np.int64, len(arr) + 1, arr.offset)


@dataclass(frozen=True)
class Entries:
    """The entries of the parsed blocks in block order: whole keys, values, and where each value starts in the buffer."""

    keys: pa.LargeBinaryArray
    values: pa.LargeBinaryArray
    value_starts: np.ndarray
    buf: np.ndarray

    def handles(self, where: str) -> tuple[np.ndarray, np.ndarray]:
        """(offsets, sizes) of the block handles the values encode (an index block's)."""
        offsets, pos = varints(self.buf, self.value_starts, where)
        sizes, _ = varints(self.buf, pos, where)
        return offsets, sizes


@dataclass
class _Step:
    """Step j of the lockstep: the segments with a j-th entry, its key (delta) and value bounds in the buffer."""

    segs: np.ndarray
    shared: np.ndarray
    kstart: np.ndarray
    vstart: np.ndarray
    vend: np.ndarray


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


def parse_blocks(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, names: np.ndarray, where: str,
                 delta_values: bool = False) -> Entries:
    """Every entry of the blocks buf[starts[i]:ends[i]] (buf padded by PAD zero bytes), in block order.

    names: each block's offset in the file, for messages. delta_values: an index block's delta-encoded handles
    (every entry a restart point, as RocksDB writes them with its default index restart interval 1).
    An entry that overruns its restart segment, a key sharing more than the previous key holds, a restart entry
    that shares anything: a CorruptFileError naming the file and the block.
    """
    seg_start, seg_end, seg_block = _segments(buf, starts, ends, names, where)
    cur = seg_start.copy()
    segs = np.flatnonzero(cur < seg_end)
    steps: list[_Step] = []
    while len(segs):
        if delta_values and steps:
            raise UnsupportedFlinkFormatError(f"{where}: an index block with delta-encoded handles and a restart interval "
                                              "over 1 is not supported")
        p = cur[segs]
        shared, p = varints(buf, p, where)
        non_shared, p = varints(buf, p, where)
        end = seg_end[segs]
        if delta_values:
            vstart = p + non_shared
            _check(vstart > end, segs, seg_block, names, where)
            _, q = varints(buf, vstart, where)
            _, vend = varints(buf, q, where)
        else:
            vlen, p = varints(buf, p, where)
            vstart = p + non_shared
            vend = vstart + vlen
        _check(vend > end, segs, seg_block, names, where)
        if not steps and shared.any():
            _check(shared > 0, segs, seg_block, names, where, "a restart entry shares a prefix")
        steps.append(_Step(segs, shared, p, vstart, vend))
        cur[segs] = vend
        segs = segs[vend < end]
    return _assemble(buf, steps, len(seg_start), seg_block, names, where)


def _check(bad: np.ndarray, segs: np.ndarray, seg_block: np.ndarray, names: np.ndarray, where: str,
           what: str = "an entry overruns its restart array") -> None:
    if bad.any():
        at = int(names[seg_block[segs[np.argmax(bad)]]])
        raise CorruptFileError(f"{where}: {what} in the block at {at}")


def _assemble(buf: np.ndarray, steps: list[_Step], nseg: int, seg_block: np.ndarray, names: np.ndarray, where: str) -> Entries:
    """Keys rebuilt step by step (key j = key j-1's shared prefix + delta j) and values, in block order."""
    count = np.zeros(nseg, np.int64)
    for s in steps:
        count[s.segs] += 1
    base = np.cumsum(count) - count
    n = int(count.sum())
    if not n:
        empty = pa.array([], pa.large_binary())
        return Entries(empty, empty, np.zeros(0, np.int64), buf)
    order = np.concatenate([base[s.segs] + j for j, s in enumerate(steps)])
    bounds = np.empty((n, 3), np.int64)  # per entry in block order: key delta start, value start, value end
    for j, s in enumerate(steps):
        at = base[s.segs] + j
        bounds[at, 0], bounds[at, 1], bounds[at, 2] = s.kstart, s.vstart, s.vend
    data = pa.py_buffer(buf)
    pieces = _binary(bounds.ravel(), data)  # piece 3i: entry i's key delta, 3i + 1: its value, 3i + 2: the gap to the next
    values = pieces.take(pa.array(3 * np.arange(n) + 1))
    sep = pa.scalar(_EMPTY, pa.large_binary())
    per_step: list[pa.Array] = []
    prev: pa.Array | None = None
    prev_segs = np.zeros(0, np.int64)
    for j, s in enumerate(steps):
        delta = pieces.take(pa.array(3 * (base[s.segs] + j)))
        if prev is None:
            keys = delta
        else:
            row = np.searchsorted(prev_segs, s.segs)  # the segment's previous key in the last step's keys
            po = _offsets(prev)
            cut = np.zeros(len(prev), np.int64)
            cut[row] = s.shared
            if (cut > np.diff(po)).any():
                _check(cut[row] > np.diff(po)[row], s.segs, seg_block, names, where, "a key shares more than the previous key holds")
            prefix_bounds = np.empty((len(prev), 2), np.int64)
            prefix_bounds[:, 0], prefix_bounds[:, 1] = po[:-1], po[:-1] + cut
            halves = _binary(np.append(prefix_bounds.ravel(), po[-1]), prev.buffers()[2])
            keys = pc.binary_join_element_wise(halves.take(pa.array(2 * row)), delta, sep)
        per_step.append(keys)
        prev, prev_segs = keys, s.segs
    inverse = np.empty(n, np.int64)
    inverse[order] = np.arange(n)
    all_keys = pa.concat_arrays(per_step).take(pa.array(inverse))
    return Entries(all_keys, values, bounds[:, 1].copy(), buf)
