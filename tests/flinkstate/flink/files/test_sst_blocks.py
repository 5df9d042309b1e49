"""SST blocks parsed in lockstep with numpy give exactly the records a per-record parser reads, on every SST of every
RocksDB/ForSt fixture and on SSTs written here (long keys, shared prefixes past the user key, restart intervals 1 to
all-in-one, snappy and plain blocks, two-level indexes); corrupt blocks are CorruptFileErrors naming the file."""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest

from flinkstate.flink.errors import CorruptFileError, UnsupportedFlinkFormatError
from flinkstate.flink.files.sst import TYPE_DELETION, TYPE_MERGE, TYPE_VALUE, read_sst, read_ssts
from flinkstate.flink.serde._jstring import read_varint as _varint
from flink_bytes import varint7 as _v  # RocksDB's varint is the same LEB128

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
_MAGIC = 0x88E241B785F4CFF7
_U32, _U64 = struct.Struct("<I"), struct.Struct("<Q")
Record = tuple[bytes, int, int, bytes]


# -- the reference: RocksDB's block format read one entry at a time (the reader's parser before issue 29) --------------

def _block(data: bytes, offset: int, size: int) -> bytes:
    raw = data[offset : offset + size]
    if data[offset + size] == 0:
        return raw
    return pa.decompress(raw, decompressed_size=_varint(raw, 0)[0], codec="snappy").to_pybytes()


def _entries(block: bytes, delta: bool = False) -> list[tuple[bytes, bytes]]:
    end = len(block) - 4 - 4 * _U32.unpack_from(block, len(block) - 4)[0]
    out, pos, key = [], 0, b""
    while pos < end:
        shared, pos = _varint(block, pos)
        non_shared, pos = _varint(block, pos)
        if delta:
            key = key[:shared] + block[pos : pos + non_shared]
            start = pos = pos + non_shared
            pos = _varint(block, _varint(block, pos)[1])[1]
            out.append((key, block[start:pos]))
            continue
        vlen, pos = _varint(block, pos)
        key = key[:shared] + block[pos : pos + non_shared]
        pos += non_shared
        out.append((key, block[pos : pos + vlen]))
        pos += vlen
    assert pos == end
    return out


def _handle(value: bytes) -> tuple[int, int]:
    offset, pos = _varint(value, 0)
    return offset, _varint(value, pos)[0]


def reference_records(data: bytes) -> list[Record]:
    footer = data[-53:]
    pos = 1
    handles = []
    for _ in range(4):
        v, pos = _varint(footer, pos)
        handles.append(v)
    meta = dict(_entries(_block(data, handles[0], handles[1])))
    props = dict(_entries(_block(data, *_handle(meta[b"rocksdb.properties"]))))
    two_level = props.get(b"rocksdb.block.based.table.index.type", b"\0")[0] == 2
    delta = props.get(b"rocksdb.index.value.is.delta.encoded", b"\0") != b"\0"
    index = _entries(_block(data, handles[2], handles[3]), delta)
    if two_level:
        index = [e for _, part in index for e in _entries(_block(data, *_handle(part)), delta)]
    out = []
    for _, handle in index:
        for ikey, value in _entries(_block(data, *_handle(handle))):
            trailer = _U64.unpack_from(ikey, len(ikey) - 8)[0]
            out.append((ikey[:-8], trailer >> 8, trailer & 0xFF, value))
    return out


def records_of(data: bytes, where: str = "test.sst") -> list[Record]:
    t = read_sst(data, where).records
    assert t.schema.field("key").type == pa.large_binary() and t.schema.field("value").type == pa.large_binary()
    return list(zip(*(t.column(c).to_pylist() for c in ("key", "seq", "kind", "value")), strict=True))


# -- a small SST writer: RocksDB's block-based table layout, format_version 5 -----------------------------------------

def _build_block(entries: list[tuple[bytes, bytes]], interval: int, delta: bool = False) -> bytes:
    out, restarts, prev = bytearray(), [], b""
    for i, (key, value) in enumerate(entries):
        shared = 0
        if i % interval:
            while shared < min(len(prev), len(key)) and prev[shared] == key[shared]:
                shared += 1
        else:
            restarts.append(len(out))
        out += _v(shared) + _v(len(key) - shared) + (b"" if delta else _v(len(value))) + key[shared:] + value
        prev = key
    return bytes(out) + b"".join(_U32.pack(r) for r in restarts or [0]) + _U32.pack(len(restarts or [0]))


def write_sst(records: list[Record], *, per_block: int = 40, interval: int = 16, snappy: bool = True, two_level: bool = False,
              delta_index: bool = True, edit: Callable[[int, bytes], bytes] = lambda i, b: b) -> bytes:
    """An SST of records (already in internal-key order); edit(i, block) may corrupt data block i before it is written."""
    out = bytearray()

    def put(block: bytes, compress: bool) -> bytes:
        at = len(out)
        if compress:
            block = pa.compress(block, codec="snappy", asbytes=True)
        out.extend(block + bytes([int(compress)]) + bytes(4))
        return _v(at) + _v(len(block))

    index = []
    for i in range(0, len(records), per_block):
        chunk = records[i : i + per_block]
        block = _build_block([(k + _U64.pack(s << 8 | t), v) for k, s, t, v in chunk], interval)
        index.append((chunk[-1][0], put(edit(i // per_block, block), snappy)))
    if two_level:
        index = [(part[-1][0], put(_build_block(part, 1, delta=delta_index), False)) for part in (index[:3], index[3:]) if part]
    index_handle = put(_build_block(index, 1, delta=delta_index), False)
    props = {b"rocksdb.column.family.name": b"cf", b"rocksdb.num.entries": _v(len(records)),
             b"rocksdb.deleted.keys": _v(sum(r[2] == TYPE_DELETION for r in records)),
             b"rocksdb.merge.operands": _v(sum(r[2] == TYPE_MERGE for r in records)),
             b"rocksdb.block.based.table.index.type": _U32.pack(2 if two_level else 0),
             b"rocksdb.index.value.is.delta.encoded": _v(int(delta_index)), b"rocksdb.index.key.is.user.key": _v(1)}
    props_handle = put(_build_block(sorted(props.items()), 1 << 30), False)
    meta_handle = put(_build_block([(b"rocksdb.properties", props_handle)], 1), False)
    footer = (bytes([1]) + meta_handle + index_handle).ljust(41, b"\0") + _U32.pack(5) + _U64.pack(_MAGIC)
    return bytes(out + footer)


def sample(n: int) -> list[Record]:
    """Records in internal-key order: short and long (varint > 1 byte) keys and values, a user key written three
    times (shared prefixes reaching into the trailer), deletes and merges."""
    out: list[Record] = []
    for i in range(n):
        key = bytes([i % 7]) + (b"k%06d" % i) + (b"x" * 300 if i % 23 == 0 else b"")
        value = b"" if i % 11 == 0 else (b"v" * (200 if i % 13 == 0 else 1 + i % 5))
        if i % 17 == 0:
            out += [(key, 9000 + i, TYPE_MERGE, b"m"), (key, 5000 + i, TYPE_VALUE, value), (key, 300 + i, TYPE_DELETION, b"")]
        else:
            out.append((key, 1000 + i, TYPE_VALUE if i % 19 else TYPE_MERGE, value))
    return sorted(out, key=lambda r: (r[0], -r[1]))


# -- exactness -------------------------------------------------------------------------------------------------------

def _ssts(root: Path) -> list[Path]:
    out = []
    for folder, _, names in os.walk(root):
        for name in names:
            p = Path(folder) / name
            if p.stat().st_size >= 53:
                with p.open("rb") as f:
                    f.seek(-8, os.SEEK_END)
                    if _U64.unpack(f.read(8))[0] == _MAGIC:
                        out.append(p)
    return sorted(out)


def _rows(t: pa.Table) -> list[Record]:
    return list(zip(*(t.column(c).to_pylist() for c in ("key", "seq", "kind", "value")), strict=True))


def test_every_fixture_sst_reads_as_the_reference_parser_reads_it(rocksdb_full: Path) -> None:
    """Each SST of the checked-in savepoints and checkpoints (RocksDB 1.18 to 2.3, ForSt's two-level indexes), all
    parsed in one batch (files of every layout side by side), and the first one alone."""
    paths = _ssts(FIXTURES) + _ssts(rocksdb_full)
    assert len(paths) > 900
    files = [(p.read_bytes(), str(p)) for p in paths]
    batch = read_ssts(files)
    total = 0
    for (data, where), sst in zip(files, batch, strict=True):
        want = reference_records(data)
        assert _rows(sst.records) == want, where
        total += len(want)
    assert records_of(*files[0]) == reference_records(files[0][0])
    assert total > 15000


def test_a_batch_of_written_ssts_of_every_layout() -> None:
    """SSTs with delta and whole index handles, one- and two-level indexes, snappy and plain blocks and no records,
    parsed together: each file gets exactly its own records."""
    layouts = [dict(snappy=True), dict(snappy=False, delta_index=False), dict(two_level=True), dict(two_level=True, delta_index=False),
               dict(interval=1, per_block=7)]
    records = [sample(120 + 40 * i) for i in range(len(layouts))]
    files = [(write_sst(r, **kw), f"{i}.sst") for i, (r, kw) in enumerate(zip(records, layouts, strict=True))]
    files.insert(2, (write_sst([]), "empty.sst"))
    records.insert(2, [])
    got = read_ssts(files)
    assert [_rows(s.records) for s in got] == records


def test_a_corrupt_sst_in_a_batch_is_named() -> None:
    """A batch with one broken file: the error names it, not the batch or another file."""
    good = write_sst(sample(100))
    broken = write_sst(sample(200), edit=lambda i, b: b[:3] if i == 2 else b)
    with pytest.raises(CorruptFileError, match=r"^broken\.sst: .*shorter than its restart count"):
        read_ssts([(good, "good.sst"), (broken, "broken.sst"), (good, "good2.sst")])


@pytest.mark.parametrize("interval", [1, 2, 16, 1000])
@pytest.mark.parametrize(("snappy", "two_level", "delta_index"), [(True, False, True), (False, False, True), (True, True, True),
                                                                  (True, True, False)])
def test_written_ssts_read_exactly(interval: int, snappy: bool, two_level: bool, delta_index: bool) -> None:
    """Block handles delta-encoded (format_version 4+) or whole (value lengths, as format_version 2 and 3 write them)."""
    records = sample(500)
    data = write_sst(records, interval=interval, snappy=snappy, two_level=two_level, delta_index=delta_index)
    assert reference_records(data) == records
    assert records_of(data) == records


def test_an_sst_without_records() -> None:
    got = read_sst(write_sst([]), "empty.sst").records
    assert got.num_rows == 0 and got.schema.names == ["key", "seq", "kind", "value"]


# -- corruption ------------------------------------------------------------------------------------------------------

def _corrupt(block_edit: Callable[[bytes], bytes], message: str) -> None:
    data = write_sst(sample(200), edit=lambda i, b: block_edit(b) if i == 2 else b)
    with pytest.raises(CorruptFileError, match=rf"broken\.sst.*{message}"):
        read_sst(data, "broken.sst")


def test_entries_overrunning_the_restart_array() -> None:
    """The last entry's value cut short: it runs into the restart array."""
    def cut(block: bytes) -> bytes:
        n = _U32.unpack_from(block, len(block) - 4)[0]
        entries_end = len(block) - 4 - 4 * n
        return block[: entries_end - 3] + block[entries_end:]
    _corrupt(cut, "an entry overruns its restart array in the block at")


def test_truncated_block() -> None:
    """A block missing its tail: its restart count is read from entry bytes and the restart array does not fit."""
    _corrupt(lambda b: b[:-9], "block at .* restart")


def test_a_corrupt_snappy_block_is_named() -> None:
    """Snappy data whose copies point before the block's start (tag 0xFF: a copy with a 4-byte offset past anything
    decompressed yet): a CorruptFileError naming the file and the block, in a batch as alone."""
    data = bytearray(write_sst(sample(200), snappy=True))
    at = _varint(bytes(data), 0)[1]  # the first data block (at 0), just after its length preamble
    assert data[at] != 0xFF
    data[at : at + 32] = b"\xff" * 32
    for read in (lambda: read_sst(bytes(data), "broken.sst"), lambda: read_ssts([(write_sst(sample(10)), "good.sst"), (bytes(data), "broken.sst")])):
        with pytest.raises(CorruptFileError, match=r"^broken\.sst: bad snappy block at 0: "):
            read()


def test_a_snappy_preamble_claiming_more_than_its_block_can_hold_is_refused() -> None:
    """The first block's length preamble (2 bytes: 1,641) rewritten to the most its bytes say (16,383) for a block of 484
    compressed bytes, which no snappy stream expands 32-fold: refused by size before the blocks' buffer is allocated."""
    data = bytearray(write_sst(sample(200), snappy=True))
    at = _varint(bytes(data), 0)[1]
    assert at == 2
    data[:at] = b"\xff\x7f"
    with pytest.raises(CorruptFileError, match=r"^broken\.sst: bad snappy block at 0: its preamble says 16383 bytes, more than 484"):
        read_ssts([(bytes(data), "broken.sst"), (write_sst(sample(10)), "good.sst")])


def test_block_shorter_than_its_restart_count() -> None:
    _corrupt(lambda b: b[:3], "shorter than its restart count")


def test_restart_point_inside_an_entry() -> None:
    """A restart offset moved one byte forward: the entry before it crosses it (and the restart entry is misread)."""
    def shift(block: bytes) -> bytes:
        n = _U32.unpack_from(block, len(block) - 4)[0]
        at = len(block) - 4 - 4 * n + 4  # the second restart offset
        return block[:at] + _U32.pack(_U32.unpack_from(block, at)[0] + 1) + block[at + 4 :]
    _corrupt(shift, "in the block at")


def test_key_sharing_more_than_the_previous_key() -> None:
    """The second entry of a block claims a shared prefix longer than the first key."""
    def share(block: bytes) -> bytes:
        shared, pos = _varint(block, 0)
        non_shared, pos = _varint(block, pos)
        vlen, pos = _varint(block, pos)
        second = pos + non_shared + vlen
        assert block[second] < 0x7F and non_shared + 8 < 0x7F
        return block[:second] + bytes([non_shared + 8]) + block[second + 1 :]
    _corrupt(share, "shares more than the previous key holds")


def test_hash_indexed_data_block_is_refused() -> None:
    def hashed(block: bytes) -> bytes:
        return block[:-4] + _U32.pack(_U32.unpack_from(block, len(block) - 4)[0] | 1 << 31)
    with pytest.raises(UnsupportedFlinkFormatError, match="hash index"):
        read_sst(write_sst(sample(100), edit=lambda i, b: hashed(b)), "hashed.sst")


@pytest.mark.parametrize(("two_level", "delta"), [(False, True), (True, True), (True, False)])
def test_a_run_reads_only_the_blocks_that_may_hold_it(two_level: bool, delta: bool) -> None:
    """Of an SST of many blocks, key groups 2..3 come from the blocks their index keys bound: every record of those
    key groups, fewer records than the file holds, and the file marked as read in part (its counts not checked)."""
    records = sample(3000)
    data = write_sst(records, per_block=20, two_level=two_level, delta_index=delta)
    whole = read_ssts([(data, "x.sst")])[0]
    part = read_ssts([(data, "x.sst")], (1, 2, 3))[0]
    got = list(zip(*(part.records.column(c).to_pylist() for c in ("key", "seq", "kind", "value")), strict=True))
    want = [r for r in reference_records(data) if 2 <= r[0][0] <= 3]
    assert [r for r in got if 2 <= r[0][0] <= 3] == want and want
    assert whole.whole and not part.whole and len(got) < whole.keys.num_rows
