"""The entries of many SST blocks parsed at once with numpy and Arrow: no Python loop per entry.

Source: RocksDB `table/block_based/block_builder.cc`. A block holds prefix-compressed entries
(varint32 shared, varint32 non_shared, varint32 value_length, key delta, value; an index block
with delta-encoded values has no value_length, its value being a varint offset and size), then a
restart array (u32 offsets of the entries that share nothing) and its u32 length, whose top bit
flags a hash index. Every restart segment starts with a whole key, so all segments of all blocks are
parsed in lockstep: step j decodes the j-th entry of every segment that has one (about 16 steps with
RocksDB's default restart interval), and key j of a segment is key j-1's shared prefix plus its delta,
rebuilt for all segments at once in a byte matrix (one row per segment).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from flinkstate.flink.errors import CorruptFileError, UnsupportedFlinkFormatError
from flinkstate.flink.files.views import Views, gather, range_views, windows

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


def _entry_headers(buf: np.ndarray, pos: np.ndarray, where: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(shared, non_shared, value_length, positions after) of the data-entry headers at pos: three varint32s, read as one
    little-endian u32 when each is one byte (all of them under 128, as most entries' are), else one varint at a time."""
    word = windows(buf, 4)[pos].view("<u4")
    if not (word & 0x808080).any():
        return (word & 0x7F).astype(np.int64), (word >> 8 & 0x7F).astype(np.int64), (word >> 16 & 0x7F).astype(np.int64), pos + 3
    shared, pos = varints(buf, pos, where)
    non_shared, pos = varints(buf, pos, where)
    vlen, pos = varints(buf, pos, where)
    return shared, non_shared, vlen, pos


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


@dataclass
class _Step:
    """Step j of the lockstep: the segments with a j-th entry, its key (delta) and value bounds in the buffer."""

    segs: np.ndarray
    shared: np.ndarray
    kstart: np.ndarray
    vstart: np.ndarray
    vend: np.ndarray
    more: np.ndarray | None = None  # which of segs have a next entry (the next step's segs); None: all of them


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
    cur = seg_start.copy()
    segs = np.flatnonzero(cur < seg_end)
    steps: list[_Step] = []
    while len(segs):
        if delta_values and steps:
            raise UnsupportedFlinkFormatError(f"{where}: an index block with delta-encoded handles and a restart interval "
                                              "over 1 is not supported")
        p = cur[segs]
        end = seg_end[segs]
        if delta_values:
            shared, p = varints(buf, p, where)
            non_shared, p = varints(buf, p, where)
            vstart = p + non_shared
            _check(vstart > end, segs, seg_block, names, where)
            _, q = varints(buf, vstart, where)
            _, vend = varints(buf, q, where)
        else:
            shared, non_shared, vlen, p = _entry_headers(buf, p, where)
            vstart = p + non_shared
            vend = vstart + vlen
        _check(vend > end, segs, seg_block, names, where)
        if not steps and shared.any():
            _check(shared > 0, segs, seg_block, names, where, "a restart entry shares a prefix")
        more = vend < end
        steps.append(_Step(segs, shared, p, vstart, vend, None if more.all() else more))
        cur[segs] = vend
        segs = segs[more]
    return _assemble(buf, steps, len(seg_start), seg_block, names, where, data)


def _check(bad: np.ndarray, segs: np.ndarray, seg_block: np.ndarray, names: np.ndarray, where: str,
           what: str = "an entry overruns its restart array") -> None:
    if bad.any():
        at = int(names[seg_block[segs[np.argmax(bad)]]])
        raise CorruptFileError(f"{where}: {what} in the block at {at}")


def _assemble(buf: np.ndarray, steps: list[_Step], nseg: int, seg_block: np.ndarray, names: np.ndarray, where: str,
              data: bool) -> Entries:
    """The entries in block order: where each value starts and, for a data block, user keys, trailers and values."""
    count = np.zeros(nseg, np.int64)
    for s in steps:
        count[s.segs] += 1
    base = np.cumsum(count) - count
    n = int(count.sum())
    vstart, vend = np.empty(n, np.int64), np.empty(n, np.int64)
    kstart, shared = (np.empty(n, np.int64), np.empty(n, np.int64)) if not data else (None, None)
    for j, s in enumerate(steps):
        at = base[s.segs] + j
        vstart[at], vend[at] = s.vstart, s.vend
        if not data:
            kstart[at], shared[at] = s.kstart, s.shared
    blocks = np.repeat(seg_block, count)
    if not data:
        return Entries(None, None, None, vstart, buf, blocks, kstart, vstart - kstart if n else kstart, shared)
    if not n:
        empty = pa.array([], pa.large_binary())
        return Entries(empty, np.zeros(0, np.uint64), Views.of(buf, vstart, vstart), vstart, buf, blocks)
    values = Views.of(buf, vstart, vend - vstart)
    keys, trailers = _internal_keys(buf, steps, base, n, (seg_block, names, where))
    if trailers is None:  # every key's delta holds its whole trailer: the 8 bytes before its value
        trailers = windows(buf, 8)[vstart - 8].view("<u8")
    return Entries(keys, trailers, values, vstart, buf, blocks)


def _internal_keys(buf: np.ndarray, steps: list[_Step], base: np.ndarray, n: int,
                   blame: tuple[np.ndarray, np.ndarray, str]) -> tuple[pa.LargeBinaryArray, np.ndarray | None]:
    """(user keys, u64 trailers) of the data entries in block order; trailers None when every key's delta (the bytes
    it does not share) holds the whole 8-byte trailer, which then lies just before its value in the block. Keys are
    rebuilt in byte matrices, one row per segment, one step at a time (row = the previous row's shared columns + the
    delta read in place); segments are grouped by their longest key rounded up to a power of two, so a matrix is at
    most twice its keys' bytes."""
    lengths = [s.shared + s.vstart - s.kstart for s in steps]
    whole = all(bool((s.vstart - s.kstart >= 8).all()) for s in steps)  # each delta holds its trailer
    longest = np.zeros(len(base), np.int64)
    for s, length in zip(steps, lengths, strict=True):
        longest[s.segs] = np.maximum(longest[s.segs], length)
        _check(length < 8, s.segs, *blame, "an internal key is shorter than its 8-byte trailer")
    # a power of two (few classes: a batch of column families keeps one matrix), 16 bytes at least (3 words of a view's inline key)
    width = 1 << np.ceil(np.log2(np.maximum(longest, 16))).astype(np.int64)
    classes = np.unique(width[base < n][np.diff(base, append=n) > 0])
    out = [_width_class(buf, steps, lengths, base, n, width == w, int(w), blame, not whole) for w in classes]
    if len(out) == 1:
        return out[0][0], out[0][1]
    order = np.empty(n, np.int64)  # file index -> row of the classes' keys concatenated
    trailers = None if whole else np.empty(n, np.uint64)
    at = 0
    for keys, tr, fi in out:
        order[fi] = np.arange(at, at + len(fi))
        if trailers is not None:
            trailers[fi] = tr
        at += len(fi)
    return pa.concat_arrays([o[0] for o in out]).take(pa.array(order)), trailers


_FEW_LENGTHS = 4  # a class's keys of up to this many lengths are copied per length; more: by the views' gather
_LOW_BYTES = np.array([(1 << (8 * c)) - 1 for c in range(9)], np.uint64)  # c low bytes of a little-endian word set


def _items(rows: np.ndarray) -> np.ndarray:
    """A C-contiguous 2-D array as a 1-D array of whole rows (void items): a row gather or scatter is one copy per row."""
    return rows.view(np.dtype((np.void, rows.shape[1] * rows.itemsize))).ravel()


def _width_class(buf: np.ndarray, steps: list[_Step], lengths: list[np.ndarray], base: np.ndarray, n: int, member: np.ndarray,
                 w: int, blame: tuple[np.ndarray, np.ndarray, str], trailers: bool = True
                 ) -> tuple[pa.LargeBinaryArray, np.ndarray | None, np.ndarray]:
    """(user keys, trailers (None unless asked), file indices, ascending) of the entries of the segments in member,
    whose keys are at most w bytes.

    A key is a row of w / 8 little-endian words: the step's delta is read as the w bytes from kstart - shared (so
    column `shared` on is the delta) and its first `shared` bytes are replaced by the previous row's, word by word.
    The rows are laid out step by step (each step's keys after the last step's: no scatter of whole rows); block order
    is restored when the user keys and trailers are gathered out of them, which copies each key's bytes once."""
    words = w // 8
    keep_of = _items(_LOW_BYTES[np.clip(np.arange(w + 1)[:, None] - 8 * np.arange(words), 0, 8)])  # shared -> words to keep
    lo = min(int((s.kstart - s.shared).min()) for s in steps)
    hi = max(int((s.kstart - s.shared).max()) for s in steps) + w
    front = w if lo < 0 else 0
    padded = np.concatenate([np.zeros(front, np.uint8), buf, np.zeros(w, np.uint8)]) if front or hi > len(buf) else buf
    wins = windows(padded, w)
    mine = np.repeat(member, np.diff(base, append=n))  # which entries (in block order) are this class's
    m = int(mine.sum())
    rank = None if m == n else np.cumsum(mine) - 1  # an entry's index among this class's (None: the same)
    rows = np.empty(m, keep_of.dtype)  # the internal keys in w bytes, step by step
    row_of = np.empty(m, np.int64)  # per entry of the class (in block order), its row
    klen = np.empty(m, np.int64)
    prev, prev_len = keep_of[:0], np.zeros(0, np.int64)  # the last step's keys and their lengths
    every = m == n  # one class: every step's segments are all this class's, as they are
    done = 0
    for j, (s, length) in enumerate(zip(steps, lengths, strict=True)):
        if every:
            segs, shared, kstart = s.segs, s.shared, s.kstart
        else:
            pick = member[s.segs]
            segs, shared, kstart, length = s.segs[pick], s.shared[pick], s.kstart[pick], length[pick]
        if not len(segs):
            break
        keys = wins[kstart - shared + front]
        if j:
            same = len(segs) == len(prev)
            # the rows of the previous step's segments that go on: its `more` (of this class's segments)
            last = steps[j - 1]  # (fewer segments go on, so its `more` is set)
            row = None if same else last.more if every else last.more[member[last.segs]]
            before = prev if same else prev[row]
            _check(shared > (prev_len if same else prev_len[row]), segs, *blame, "a key shares more than the previous key holds")
            k, b, keep = (a.view("<u8") for a in (keys, before, keep_of[shared]))
            k ^= (k ^ b) & keep
        at = base[segs] + j if rank is None else rank[base[segs] + j]
        rows[done : done + len(segs)] = keys
        row_of[at], klen[at] = np.arange(done, done + len(segs)), length
        prev, prev_len = keys, length
        done += len(segs)
    flat, starts = rows.view(np.uint8), row_of * w
    tr = windows(flat, 8)[starts + klen - 8].view("<u8") if trailers else None
    files_sorted = np.arange(n) if m == n else np.flatnonzero(mine)
    return _user_keys(flat, starts, klen - 8, w), tr, files_sorted


def _user_keys(flat: np.ndarray, starts: np.ndarray, lengths: np.ndarray, w: int) -> pa.LargeBinaryArray:
    """The first lengths[i] bytes from each start (a row of w bytes) as a large_binary array. Keys of one length (a
    fixed-width key class: long keys, key groups, timers) are gathered as items of that many bytes (one copy each, with
    arithmetic offsets); others by the views' gather."""
    m = len(lengths)
    if m and int(lengths.min()) == int(lengths.max()):
        k = int(lengths[0])
        offsets = np.arange(0, (m + 1) * k, k, dtype=np.int64) if k else np.zeros(m + 1, np.int64)
        items = np.ndarray((len(flat) // w,), np.dtype((np.void, k)), flat, 0, (w,)) if k else None
        data = items[starts // w].view(np.uint8) if items is not None else np.zeros(0, np.uint8)
        return pa.Array.from_buffers(pa.large_binary(), m, [None, pa.py_buffer(offsets), pa.py_buffer(data)])
    sizes = np.flatnonzero(np.bincount(lengths, minlength=w + 1)) if m else lengths
    if not m or len(sizes) > _FEW_LENGTHS:
        return gather(*range_views(flat, starts, lengths))
    # a few key lengths (column families of different key widths in one class): per length, its keys' bytes copied
    # as items of that many bytes from their rows to their places in the array's data
    offsets = np.zeros(m + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    data = np.zeros(int(offsets[-1]) + w, np.uint8)  # room for the widest item at the last place
    for k in sizes.tolist():
        if k:
            sel = np.flatnonzero(lengths == k)
            kind = np.dtype((np.void, k))
            np.ndarray((len(data) - k + 1,), kind, data, 0, (1,))[offsets[sel]] = np.ndarray((len(flat) // w,), kind, flat, 0, (w,))[starts[sel] // w]
    return pa.Array.from_buffers(pa.large_binary(), m, [None, pa.py_buffer(offsets), pa.py_buffer(data[: int(offsets[-1])])])
