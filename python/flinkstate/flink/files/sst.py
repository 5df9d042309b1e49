"""Read RocksDB block-based table (SST) files with numpy and Arrow: the records of a Flink RocksDB checkpoint as columns.

Sources: RocksDB `table/block_based/block_based_table_builder.cc`, `table/format.cc` (footer,
block trailer), `table/block_based/block_builder.cc` (prefix-compressed entries and restarts),
`db/dbformat.h` (internal key = user key + little-endian u64 of sequence << 8 | type),
`meta_blocks.cc` (properties: the column family name). Supported: format_version 2 to 5 with the
legacy footer, uncompressed and Snappy blocks, binary-search data blocks and a binary-search or two-level
(partitioned, as the ForSt backend writes) index
(delta-encoded handles with restart interval 1, RocksDB's default). Block checksums (XXH3/CRC32C)
are not verified; lengths are. Anything else is an UnsupportedFlinkFormatError naming the file.
The blocks' entries are parsed all at once (`sst_blocks`): no Python loop per record; `read_ssts` parses several
files' blocks in one pass (a state's column family is often hundreds of small SSTs).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from flinkstate.flink._io import snappy_block, snappy_block_into, snappy_fits
from flinkstate.flink.errors import CorruptFileError, UnsupportedFlinkFormatError
from flinkstate.flink.files.sst_blocks import PAD, Entries, parse_blocks, varints
from flinkstate.flink.files.views import Views
from flinkstate.flink.serde._jstring import read_varint

__all__ = ["RECORDS", "SstFile", "TYPE_DELETION", "TYPE_MERGE", "TYPE_SINGLE_DELETION", "TYPE_VALUE", "read_sst", "read_ssts"]

_MAGIC = 0x88E241B785F4CFF7
_LEGACY_MAGIC = 0xDB4775248B80FB57
_FOOTER = 53
TYPE_DELETION, TYPE_VALUE, TYPE_MERGE, TYPE_SINGLE_DELETION = 0, 1, 2, 7
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
RECORDS = pa.schema([("key", pa.large_binary()), ("seq", pa.int64()), ("kind", pa.uint8()), ("value", pa.large_binary())])
KEYS = pa.schema(list(RECORDS)[:3])  # what SstFile.keys holds: its values are views (SstFile.values)


@dataclass
class SstFile:
    """One SST's column family and its records as columns in file order: KEYS (user key, sequence, type) and their
    values as views of the decompressed blocks (`records` has them copied, as RECORDS).

    The counts are the table properties the writer recorded (`rocksdb.num.entries` counts point
    records and range deletions); `read_sst` checks the records it read against them when it read every data
    block (`whole`; a read of some key groups reads only the blocks its index says may hold them).
    """

    column_family: str
    keys: pa.Table
    values: Views
    range_deletions: int
    entries: int | None = None
    deletions: int | None = None
    merges: int | None = None
    whole: bool = True

    @property
    def records(self) -> pa.Table:
        """The records as RECORDS columns, values copied out of the blocks."""
        return self.keys.append_column("value", self.values.array())


class _Batch:
    """Several SSTs' bytes joined (then PAD zero bytes): their blocks checked against their own file's length,
    decompressed and parsed together, so the parser's fixed cost per call is paid once for all of them."""

    def __init__(self, datas: Sequence[bytes], wheres: Sequence[str]) -> None:
        self.data = b"".join([*datas, bytes(PAD)])
        self.array = np.frombuffer(self.data, np.uint8)
        self.lengths = np.array([len(d) for d in datas], np.int64)
        self.bases = np.cumsum(self.lengths) - self.lengths
        self.where = wheres[0] if len(wheres) == 1 else f"{len(wheres)} SSTs ({wheres[0]} ...)"

    def blocks(self, files: np.ndarray, offsets: np.ndarray, sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The blocks at offsets of files (a 5-byte trailer after each gives its compression) as (buffer padded by PAD,
        starts, ends)."""
        past = (offsets < 0) | (sizes < 0) | (offsets + sizes + 5 > self.lengths[files])
        if past.any():
            i = int(np.argmax(past))
            raise CorruptFileError(f"{self.where}: block at {int(offsets[i])} of {int(sizes[i])} bytes runs past the end of the file")
        at = self.bases[files] + offsets
        kinds = self.array[at + sizes]
        if ((kinds != 0) & (kinds != 1)).any():
            kind = int(kinds[(kinds != 0) & (kinds != 1)][0])
            raise UnsupportedFlinkFormatError(f"{self.where}: SST block compression type {kind} is not supported (none, snappy are)")
        if not kinds.any():
            return self.array, at, at + sizes
        lengths, _ = varints(self.array, at, self.where)  # the snappy preamble; within the file: the 5-byte trailer follows
        lengths[kinds == 0] = sizes[kinds == 0]
        over = ~snappy_fits(lengths, sizes)  # a corrupt preamble: refused before the buffer is allocated
        if over.any():
            i = int(np.argmax(over))
            raise CorruptFileError(f"{self.where}: bad snappy block at {int(offsets[i])}: its preamble says {int(lengths[i])} "
                                   f"bytes, more than {int(sizes[i])} compressed bytes can hold")
        ends = np.cumsum(lengths)
        out = np.zeros(int(ends[-1]) + PAD, np.uint8)  # every block decompressed in place: no buffer per block, no join
        src, dst = memoryview(self.data), memoryview(out)
        for off, size, kind, end, n in zip(at.tolist(), sizes.tolist(), kinds.tolist(), ends.tolist(), lengths.tolist(), strict=True):
            if kind == 0:
                dst[end - n : end] = src[off : off + size]
            else:
                snappy_block_into(src[off : off + size], dst[end - n : end], f"{self.where}: bad snappy block at {off}")
        return out, ends - lengths, ends

    def entries(self, files: np.ndarray, offsets: np.ndarray, sizes: np.ndarray, *, data: bool,
                delta_values: bool = False) -> Entries:
        """Every entry of the (index or data) blocks at offsets of files, in order, parsed at once."""
        buf, starts, ends = self.blocks(files, offsets, sizes)
        return parse_blocks(buf, starts, ends, offsets, self.where, data=data, delta_values=delta_values)


def _block(data: bytes, offset: int, size: int, where: str) -> bytes:
    """The contents of one block of an SST (metaindex, properties, range deletions: a few entries each)."""
    if offset < 0 or size < 0 or offset + size + 5 > len(data):
        raise CorruptFileError(f"{where}: block at {offset} of {size} bytes runs past the end of the file")
    kind, raw = data[offset + size], data[offset : offset + size]
    if kind == 0:
        return raw
    if kind != 1:
        raise UnsupportedFlinkFormatError(f"{where}: SST block compression type {kind} is not supported (none, snappy are)")
    return bytes(snappy_block(raw, f"{where}: bad snappy block at {offset}"))


def _entries(block: bytes) -> list[tuple[bytes, bytes]]:
    """The (key, value) entries of a block of a few entries (metaindex, properties: one restart segment each, read
    one by one here): prefix-compressed keys, restart array at the end."""
    if len(block) < 4:
        raise ValueError("a block is shorter than its restart count")
    packed = _U32.unpack_from(block, len(block) - 4)[0]
    if packed >> 31:
        raise UnsupportedFlinkFormatError("SST data blocks with a hash index are not supported")
    end = len(block) - 4 - 4 * packed
    out = []
    pos = 0
    key = b""
    while pos < end:
        shared, pos = read_varint(block, pos)
        non_shared, pos = read_varint(block, pos)
        vlen, pos = read_varint(block, pos)
        key = key[:shared] + block[pos : pos + non_shared]
        pos += non_shared
        out.append((key, block[pos : pos + vlen]))
        pos += vlen
    if pos != end:
        raise ValueError("a block's entries overrun its restart array")
    return out


def _handle(value: bytes) -> tuple[int, int]:
    offset, pos = read_varint(value, 0)
    size, _ = read_varint(value, pos)
    return offset, size


def read_sst(data: bytes, where: str) -> SstFile:
    """Parse one SST file: its column family and every record of its data blocks, checked against its properties."""
    return read_ssts([(data, where)])[0]


def read_ssts(files: Sequence[tuple[bytes, str]], key_groups: tuple[int, int, int] | None = None) -> list[SstFile]:
    """Parse SST files ((bytes, name) each) as `read_sst` does, their blocks all at once: a Flink state's column family
    is often hundreds of small SSTs, and a parsing pass per file would cost more than their records.

    key_groups (prefix bytes, first, last): only the data blocks whose index keys say they may hold keys of these key
    groups are read (other records of those blocks come too: the caller drops them).
    A file that cannot be read is an error naming it: the batch is read again one file at a time to find it."""
    if not files:
        return []
    try:
        return _read_ssts(files, key_groups)
    except (CorruptFileError, UnsupportedFlinkFormatError, IndexError, ValueError, struct.error) as e:
        if len(files) > 1:
            for one in files:
                read_ssts([one], key_groups)  # raises the error of the file at fault, named
        if isinstance(e, (CorruptFileError, UnsupportedFlinkFormatError)):
            raise
        raise CorruptFileError(f"{files[0][1] if len(files) == 1 else 'SSTs'}: corrupt SST file: {e}") from e


@dataclass(frozen=True)
class _Layout:
    """What an SST's footer and meta blocks say: column family, index block and kind, counts of its properties."""

    column_family: str
    index: tuple[int, int]
    two_level: bool
    delta: bool
    user_key_index: bool
    range_deletions: int
    entries: int | None
    deletions: int | None
    merges: int | None


def _layout(data: bytes, where: str, shift: int = 0) -> _Layout:
    """The layout of an SST from its bytes, or from its tail when shift (the tail's offset in the file) is set: the
    block handles are then relative to the tail (a block before it: IndexError, which `sst_ranges` reads whole for)."""
    (meta_off, meta_size), (index_off, index_size) = _footer(data, where)
    index = (index_off - shift, index_size)
    meta = dict(_entries(_block(data, meta_off - shift, meta_size, where)))
    props_handle = meta.get(b"rocksdb.properties")
    if props_handle is None:
        raise CorruptFileError(f"{where}: SST file without a properties block")
    props_off, props_size = _handle(props_handle)
    if min(index[0], props_off - shift) < 0:
        raise IndexError("a meta block before the tail")
    props = dict(_entries(_block(data, props_off - shift, props_size, where)))
    cf = props.get(b"rocksdb.column.family.name", b"").decode("utf-8")
    raw_type = props.get(b"rocksdb.block.based.table.index.type", b"\x00\x00\x00\x00")
    index_type = _U32.unpack_from(raw_type.ljust(4, b"\x00"), 0)[0]
    if index_type not in (0, 2):  # binary search, or two-level (partitioned: ForSt's default, RocksDB's option)
        raise UnsupportedFlinkFormatError(f"{where}: SST index type {index_type} is not supported (binary search and two-level are)")
    delta = read_varint(props.get(b"rocksdb.index.value.is.delta.encoded", b"\x00"), 0)[0] != 0
    user_key_index = read_varint(props.get(b"rocksdb.index.key.is.user.key", b"\x00"), 0)[0] != 0
    range_dels = 0
    if b"rocksdb.range_del" in meta:
        off, size = _handle(meta[b"rocksdb.range_del"])
        if off < shift:
            raise IndexError("a meta block before the tail")
        range_dels = len(_entries(_block(data, off - shift, size, where)))
    return _Layout(cf, index, index_type == 2, delta, user_key_index, range_dels, _count(props, b"rocksdb.num.entries"),
                   _count(props, b"rocksdb.deleted.keys"), _count(props, b"rocksdb.merge.operands"))


def _data_blocks(b: _Batch, layouts: list[_Layout], prefix: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(file, offset, size, key-group bound) of every data block of the batch, by file and in each file's index order:
    the index blocks of all files with the same handle encoding parsed at once, then the partitions of two-level ones.

    A block's bound is the key group of its index key (the user key's prefix: the key, or the key less its 8-byte
    trailer where the properties do not say the index holds user keys), which is at least its last key's and at most
    the next block's first key's; -1 where the index key shares bytes with the one before (not read here) or is
    shorter than the prefix. prefix 0: no bounds (all -1)."""
    parts = []
    for delta in sorted({lay.delta for lay in layouts}):
        fs = np.array([i for i, lay in enumerate(layouts) if lay.delta == delta], np.int64)
        index = np.array([layouts[i].index for i in fs], np.int64).reshape(-1, 2)
        e = b.entries(fs, index[:, 0], index[:, 1], data=False, delta_values=delta)
        files, (offsets, sizes) = fs[e.blocks], e.handles(b.where)
        bound = _bounds(e, layouts, files, prefix)
        two = np.array([lay.two_level for lay in layouts])[files]
        if two.any():  # the top-level index points to index partitions, which point to data blocks
            p = b.entries(files[two], offsets[two], sizes[two], data=False, delta_values=delta)
            in_parts = files[two][p.blocks]
            files = np.concatenate([files[~two], in_parts])
            bound = np.concatenate([bound[~two], _bounds(p, layouts, in_parts, prefix)])
            offsets, sizes = (np.concatenate([a[~two], h]) for a, h in zip((offsets, sizes), p.handles(b.where), strict=True))
        parts.append((files, offsets, sizes, bound))
    files, offsets, sizes, bound = (np.concatenate(a) for a in zip(*parts, strict=True))
    order = np.argsort(files, kind="stable")
    return files[order], offsets[order], sizes[order], bound[order]


def _bounds(e: Entries, layouts: list[_Layout], files: np.ndarray, prefix: int) -> np.ndarray:
    """The key group of each index entry's key (see `_data_blocks`), -1 where unknown."""
    n = len(e.value_starts)
    if not prefix or not n:
        return np.full(n, -1, np.int64)
    assert e.key_starts is not None and e.key_deltas is not None and e.key_shared is not None
    trailer = np.array([0 if lay.user_key_index else 8 for lay in layouts], np.int64)[files]
    user = e.key_deltas - trailer  # user key bytes (the key's delta: it shares nothing)
    kg = e.buf[e.key_starts].astype(np.int64)
    if prefix == 2:
        kg = (kg << 8) | e.buf[e.key_starts + 1]
    kg[(e.key_shared > 0) | (user < prefix)] = -1  # a key shortened below the prefix: not used, though it would bound too
    return kg


def _read_ssts(files: Sequence[tuple[bytes, str]], key_groups: tuple[int, int, int] | None) -> list[SstFile]:
    wheres = [w for _, w in files]
    layouts = [_layout(data, where) for data, where in files]
    b = _Batch([data for data, _ in files], wheres)
    blocks, offsets, sizes, bound = _data_blocks(b, layouts, key_groups[0] if key_groups else 0)
    keep = _keep(blocks, bound, key_groups)
    whole = np.bincount(blocks[~keep], minlength=len(files)) == 0
    return _files(b, layouts, wheres, blocks[keep], offsets[keep], sizes[keep], whole)


def _keep(blocks: np.ndarray, bound: np.ndarray, key_groups: tuple[int, int, int] | None) -> np.ndarray:
    """Which data blocks (by file, in index order, with their key-group bounds) may hold keys of the key groups."""
    if key_groups is None:
        return np.ones(len(blocks), bool)
    _, lo, hi = key_groups
    first = np.ones(len(blocks), bool)
    first[1:] = blocks[1:] != blocks[:-1]
    lower = np.empty(len(blocks), np.int64)  # the bound of the block before in the file: at most this block's first key
    lower[1:] = bound[:-1]
    lower[first] = -1
    return ((lower < 0) | (lower <= hi)) & ((bound < 0) | (bound >= lo))


def _files(b: _Batch, layouts: list[_Layout], wheres: list[str], blocks: np.ndarray, offsets: np.ndarray, sizes: np.ndarray,
           whole: np.ndarray) -> list[SstFile]:
    """The records of these data blocks of the batch's files (offsets into b's files), per file, checked against the
    file's properties where every block was read (whole)."""
    n = len(layouts)
    if not len(blocks):
        empty = Views(np.zeros((0, 4), "<u4"), [])
        return [SstFile(lay.column_family, KEYS.empty_table(), empty, lay.range_deletions, lay.entries, lay.deletions, lay.merges,
                        bool(whole[i])) for i, lay in enumerate(layouts)]
    e = b.entries(blocks, offsets, sizes, data=True)
    assert e.keys is not None and e.trailers is not None and e.values is not None
    kinds = (e.trailers & 0xFF).astype(np.uint8)
    keys = pa.table([e.keys, pa.array((e.trailers >> 8).astype(np.int64)), pa.array(kinds)], schema=KEYS)
    of = blocks[e.blocks]  # each record's file
    counts = np.bincount(of, minlength=n)
    merges = np.bincount(of[kinds == TYPE_MERGE], minlength=n)
    deletions = np.bincount(of[(kinds == TYPE_DELETION) | (kinds == TYPE_SINGLE_DELETION)], minlength=n)
    out, at = [], 0
    for i, lay in enumerate(layouts):
        got = (int(counts[i]) + lay.range_deletions, int(deletions[i]) + lay.range_deletions, int(merges[i]))
        said = (lay.entries, lay.deletions, lay.merges)
        if whole[i] and any(s is not None and s != g for s, g in zip(said, got, strict=True)):
            raise CorruptFileError(f"{wheres[i]}: the SST's properties count {lay.entries} entries ({lay.deletions} deletions, "
                                   f"{lay.merges} merge operands) but its blocks hold {got[0]} ({got[1]} deletions, {got[2]} merge operands)")
        end = at + int(counts[i])
        out.append(SstFile(lay.column_family, keys.slice(at, end - at), e.values.slice(at, end), lay.range_deletions, lay.entries,
                           lay.deletions, lay.merges, bool(whole[i])))
        at = end
    return out


def _count(props: dict[bytes, bytes], name: bytes) -> int | None:
    """A numeric table property (a varint); None when the writer did not record it."""
    raw = props.get(name)
    return None if raw is None else read_varint(raw, 0)[0]


def _footer(data: bytes, where: str) -> tuple[tuple[int, int], tuple[int, int]]:
    """The metaindex and index block handles of an SST's footer (data ends with it)."""
    if len(data) < _FOOTER:
        raise CorruptFileError(f"{where}: too short for an SST file ({len(data)} bytes)")
    footer = data[-_FOOTER:]
    magic = _U64.unpack_from(footer, _FOOTER - 8)[0]
    if magic == _LEGACY_MAGIC:
        raise UnsupportedFlinkFormatError(f"{where}: legacy (format_version 0) SST files are not supported")
    if magic != _MAGIC:
        raise CorruptFileError(f"{where}: not an SST file (bad magic number)")
    version = _U32.unpack_from(footer, _FOOTER - 12)[0]
    if not 2 <= version <= 5:
        raise UnsupportedFlinkFormatError(f"{where}: SST format_version {version} is not supported (2 to 5 are)")
    meta_off, pos = read_varint(footer, 1)
    meta_size, pos = read_varint(footer, pos)
    index_off, pos = read_varint(footer, pos)
    index_size, pos = read_varint(footer, pos)
    return (meta_off, meta_size), (index_off, index_size)
