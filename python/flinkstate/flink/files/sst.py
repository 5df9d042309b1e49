"""Read RocksDB block-based table (SST) files in pure Python: the records of a Flink RocksDB checkpoint.

Sources: RocksDB `table/block_based/block_based_table_builder.cc`, `table/format.cc` (footer,
block trailer), `table/block_based/block_builder.cc` (prefix-compressed entries and restarts),
`db/dbformat.h` (internal key = user key + little-endian u64 of sequence << 8 | type),
`meta_blocks.cc` (properties: the column family name). Supported: format_version 2 to 5 with the
legacy footer, uncompressed and Snappy blocks, binary-search data blocks and a binary-search or two-level
(partitioned, as the ForSt backend writes) index
(delta-encoded handles with restart interval 1, RocksDB's default). Block checksums (XXH3/CRC32C)
are not verified; lengths are. Anything else is an UnsupportedFlinkFormatError naming the file.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import pyarrow as pa

from flinkstate.flink.errors import CorruptFileError, UnsupportedFlinkFormatError

__all__ = ["SstFile", "TYPE_DELETION", "TYPE_MERGE", "TYPE_SINGLE_DELETION", "TYPE_VALUE", "read_sst"]

_MAGIC = 0x88E241B785F4CFF7
_LEGACY_MAGIC = 0xDB4775248B80FB57
_FOOTER = 53
TYPE_DELETION, TYPE_VALUE, TYPE_MERGE, TYPE_SINGLE_DELETION = 0, 1, 2, 7
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")


@dataclass
class SstFile:
    """One SST's column family and its records: (user key, sequence, type, value) in file order.

    The counts are the table properties the writer recorded (`rocksdb.num.entries` counts point
    records and range deletions); `read_sst` checks the records it read against them.
    """

    column_family: str
    records: list[tuple[bytes, int, int, bytes]]
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
    def __init__(self, data: bytes, where: str) -> None:
        self.data, self.where = data, where

    def block(self, offset: int, size: int) -> bytes:
        """The contents of the block at offset (its 5-byte trailer gives the compression)."""
        data = self.data
        if offset < 0 or offset + size + 5 > len(data):
            raise CorruptFileError(f"{self.where}: block at {offset} of {size} bytes runs past the end of the file")
        raw = data[offset : offset + size]
        kind = data[offset + size]
        if kind == 0:
            return raw
        if kind == 1:
            n, _ = _varint(raw, 0)
            try:
                return pa.decompress(raw, decompressed_size=n, codec="snappy").to_pybytes()
            except (OSError, ValueError, pa.ArrowException) as e:
                raise CorruptFileError(f"{self.where}: bad snappy block at {offset}: {e}") from e
        raise UnsupportedFlinkFormatError(f"{self.where}: SST block compression type {kind} is not supported (none, snappy are)")


def _entries(block: bytes, delta_values: bool = False) -> list[tuple[bytes, bytes]]:
    """The (key, value) entries of a block: prefix-compressed keys, restart array at the end."""
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
        if delta_values:
            key = key[:shared] + block[pos : pos + non_shared]
            pos += non_shared
            vstart = pos
            _, pos = _varint(block, pos)  # offset
            _, pos = _varint(block, pos)  # size
            out.append((key, block[vstart:pos]))
            continue
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
    kinds = [r[2] for r in sst.records]
    deletions = kinds.count(TYPE_DELETION) + kinds.count(TYPE_SINGLE_DELETION) + sst.range_deletions
    got = (len(sst.records) + sst.range_deletions, deletions, kinds.count(TYPE_MERGE))
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
    records = []
    index = _entries(r.block(index_off, index_size), delta)
    if index_type == 2:  # the top-level index points to index partitions, which point to data blocks
        index = [e for _, part in index for e in _entries(r.block(*_handle(part)), delta)]
    for _, value in index:
        for ikey, v in _entries(r.block(*_handle(value))):
            if len(ikey) < 8:
                raise ValueError("an internal key is shorter than its 8-byte trailer")
            trailer = _U64.unpack_from(ikey, len(ikey) - 8)[0]
            records.append((ikey[:-8], trailer >> 8, trailer & 0xFF, v))
    return SstFile(cf, records, range_dels, _count(props, b"rocksdb.num.entries"), _count(props, b"rocksdb.deleted.keys"),
                   _count(props, b"rocksdb.merge.operands"))
