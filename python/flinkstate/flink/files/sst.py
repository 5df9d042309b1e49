"""Read RocksDB block-based table (SST) files with numpy and Arrow: the records of a Flink RocksDB checkpoint as columns.

Sources: RocksDB `table/block_based/block_based_table_builder.cc`, `table/format.cc` (footer,
block trailer), `table/block_based/block_builder.cc` (prefix-compressed entries and restarts),
`db/dbformat.h` (internal key = user key + little-endian u64 of sequence << 8 | type),
`meta_blocks.cc` (properties: the column family name). Supported: format_version 2 to 5 with the
legacy footer, uncompressed and Snappy blocks, binary-search data blocks and a binary-search or two-level
(partitioned, as the ForSt backend writes) index
(delta-encoded handles with restart interval 1, RocksDB's default). Block checksums (XXH3/CRC32C)
are not verified; lengths are. Anything else is an UnsupportedFlinkFormatError naming the file.
The blocks' entries are parsed all at once (`sst_blocks`): no Python loop per record.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from flinkstate.flink.errors import CorruptFileError, UnsupportedFlinkFormatError
from flinkstate.flink.files.sst_blocks import PAD, Entries, parse_blocks, varints

__all__ = ["RECORDS", "SstFile", "TYPE_DELETION", "TYPE_MERGE", "TYPE_SINGLE_DELETION", "TYPE_VALUE", "read_sst"]

_MAGIC = 0x88E241B785F4CFF7
_LEGACY_MAGIC = 0xDB4775248B80FB57
_FOOTER = 53
TYPE_DELETION, TYPE_VALUE, TYPE_MERGE, TYPE_SINGLE_DELETION = 0, 1, 2, 7
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
RECORDS = pa.schema([("key", pa.large_binary()), ("seq", pa.int64()), ("kind", pa.uint8()), ("value", pa.large_binary())])
_SNAPPY = pa.Codec("snappy")


@dataclass
class SstFile:
    """One SST's column family and its records as columns (RECORDS: user key, sequence, type, value) in file order.

    The counts are the table properties the writer recorded (`rocksdb.num.entries` counts point
    records and range deletions); `read_sst` checks the records it read against them.
    """

    column_family: str
    records: pa.Table
    range_deletions: int
    entries: int | None = None
    deletions: int | None = None
    merges: int | None = None


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7


class _Reader:
    """An SST's bytes and name: its blocks, checked against the file's length and decompressed."""

    def __init__(self, data: bytes, where: str) -> None:
        self.data, self.where = data, where
        self.array = np.frombuffer(data, np.uint8)

    def blocks(self, offsets: np.ndarray, sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The blocks at offsets (a 5-byte trailer after each gives its compression) as (buffer padded by PAD, starts, ends)."""
        offsets, sizes = np.asarray(offsets, np.int64), np.asarray(sizes, np.int64)
        past = (offsets < 0) | (sizes < 0) | (offsets + sizes + 5 > len(self.data))
        if past.any():
            i = int(np.argmax(past))
            raise CorruptFileError(f"{self.where}: block at {int(offsets[i])} of {int(sizes[i])} bytes runs past the end of the file")
        kinds = self.array[offsets + sizes]
        if ((kinds != 0) & (kinds != 1)).any():
            kind = int(kinds[(kinds != 0) & (kinds != 1)][0])
            raise UnsupportedFlinkFormatError(f"{self.where}: SST block compression type {kind} is not supported (none, snappy are)")
        if not kinds.any():
            return np.frombuffer(self.data + bytes(PAD), np.uint8), offsets, offsets + sizes
        view = memoryview(self.data)
        lengths, _ = varints(self.array, offsets, self.where)  # the snappy preamble; within the file: the 5-byte trailer follows
        lengths[kinds == 0] = sizes[kinds == 0]
        chunks = []
        for off, size, kind, n in zip(offsets.tolist(), sizes.tolist(), kinds.tolist(), lengths.tolist(), strict=True):
            raw = view[off : off + size]
            if kind == 0:
                chunks.append(raw)
                continue
            try:
                chunks.append(_SNAPPY.decompress(raw, decompressed_size=n))
            except (OSError, ValueError, pa.ArrowException) as e:
                raise CorruptFileError(f"{self.where}: bad snappy block at {off}: {e}") from e
        chunks.append(bytes(PAD))
        ends = np.cumsum(lengths)
        return np.frombuffer(b"".join(chunks), np.uint8), ends - lengths, ends

    def entries(self, offsets: np.ndarray, sizes: np.ndarray, *, data: bool, delta_values: bool = False) -> Entries:
        """Every entry of the (index or data) blocks at offsets, in order, parsed at once."""
        offsets = np.asarray(offsets, np.int64)
        buf, starts, ends = self.blocks(offsets, np.asarray(sizes, np.int64))
        return parse_blocks(buf, starts, ends, offsets, self.where, data=data, delta_values=delta_values)

    def block(self, offset: int, size: int) -> bytes:
        """The contents of one block (metaindex, properties, range deletions: a few entries each)."""
        buf, starts, ends = self.blocks(np.array([offset]), np.array([size]))
        return buf[int(starts[0]) : int(ends[0])].tobytes()


def _entries(block: bytes) -> list[tuple[bytes, bytes]]:
    """The (key, value) entries of a block of a few entries (metaindex, properties: one restart segment each, so
    parsing them in lockstep would take one numpy step per entry): prefix-compressed keys, restart array at the end."""
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
        shared, pos = _varint(block, pos)
        non_shared, pos = _varint(block, pos)
        vlen, pos = _varint(block, pos)
        key = key[:shared] + block[pos : pos + non_shared]
        pos += non_shared
        out.append((key, block[pos : pos + vlen]))
        pos += vlen
    if pos != end:
        raise ValueError("a block's entries overrun its restart array")
    return out


def _handle(value: bytes) -> tuple[int, int]:
    offset, pos = _varint(value, 0)
    size, _ = _varint(value, pos)
    return offset, size


def read_sst(data: bytes, where: str) -> SstFile:
    """Parse one SST file: its column family and every record of its data blocks, checked against its properties."""
    try:
        sst = _read_sst(data, where)
    except (IndexError, ValueError, struct.error) as e:
        raise CorruptFileError(f"{where}: corrupt SST file: {e}") from e
    kinds = sst.records.column("kind").to_numpy()
    merges = int(np.count_nonzero(kinds == TYPE_MERGE))
    deletions = int(np.count_nonzero((kinds == TYPE_DELETION) | (kinds == TYPE_SINGLE_DELETION))) + sst.range_deletions
    got = (sst.records.num_rows + sst.range_deletions, deletions, merges)
    said = (sst.entries, sst.deletions, sst.merges)
    if any(s is not None and s != g for s, g in zip(said, got, strict=True)):
        raise CorruptFileError(f"{where}: the SST's properties count {sst.entries} entries ({sst.deletions} deletions, {sst.merges} merge "
                               f"operands) but its blocks hold {got[0]} ({got[1]} deletions, {got[2]} merge operands)")
    return sst


def _count(props: dict[bytes, bytes], name: bytes) -> int | None:
    """A numeric table property (a varint); None when the writer did not record it."""
    raw = props.get(name)
    return None if raw is None else _varint(raw, 0)[0]


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
    meta_off, pos = _varint(footer, 1)
    meta_size, pos = _varint(footer, pos)
    index_off, pos = _varint(footer, pos)
    index_size, pos = _varint(footer, pos)
    return (meta_off, meta_size), (index_off, index_size)


def _properties(r: _Reader, where: str) -> tuple[dict[bytes, bytes], dict[bytes, bytes]]:
    """(properties, metaindex) of the SST r reads."""
    metaindex, _ = _footer(r.data, where)
    meta = dict(_entries(r.block(*metaindex)))
    props_handle = meta.get(b"rocksdb.properties")
    if props_handle is None:
        raise CorruptFileError(f"{where}: SST file without a properties block")
    return dict(_entries(r.block(*_handle(props_handle)))), meta


def _read_sst(data: bytes, where: str) -> SstFile:
    r = _Reader(data, where)
    props, meta = _properties(r, where)
    _, (index_off, index_size) = _footer(data, where)
    cf = props.get(b"rocksdb.column.family.name", b"").decode("utf-8")
    raw_type = props.get(b"rocksdb.block.based.table.index.type", b"\x00\x00\x00\x00")
    index_type = _U32.unpack_from(raw_type.ljust(4, b"\x00"), 0)[0]
    if index_type not in (0, 2):  # binary search, or two-level (partitioned: ForSt's default, RocksDB's option)
        raise UnsupportedFlinkFormatError(f"{where}: SST index type {index_type} is not supported (binary search and two-level are)")
    delta = _varint(props.get(b"rocksdb.index.value.is.delta.encoded", b"\x00"), 0)[0] != 0
    range_dels = 0
    if b"rocksdb.range_del" in meta:
        range_dels = len(_entries(r.block(*_handle(meta[b"rocksdb.range_del"]))))
    index = r.entries(np.array([index_off]), np.array([index_size]), data=False, delta_values=delta)
    if index_type == 2:  # the top-level index points to index partitions, which point to data blocks
        index = r.entries(*index.handles(where), data=False, delta_values=delta)
    e = r.entries(*index.handles(where), data=True)
    assert e.keys is not None and e.trailers is not None and e.values is not None
    records = pa.table([e.keys, pa.array((e.trailers >> 8).astype(np.int64)), pa.array((e.trailers & 0xFF).astype(np.uint8)), e.values],
                       schema=RECORDS)
    return SstFile(cf, records, range_dels, _count(props, b"rocksdb.num.entries"), _count(props, b"rocksdb.deleted.keys"),
                   _count(props, b"rocksdb.merge.operands"))
