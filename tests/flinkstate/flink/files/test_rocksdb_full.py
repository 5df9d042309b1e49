"""RocksDB and ForSt without incremental snapshots (Flink's default): SSTs in the handle's private list (fast tier).

Fixtures: tests/fixtures/flink-rocksdb-full (real Flink 1.20.5 and 2.3.0 running flinkjobs/src/StateGenJob.java;
regenerate with `python tests/fixtures/make_flink_fixture.py rocksdb-full`).
"""

from __future__ import annotations

import dataclasses
import gzip
import shutil
from pathlib import Path

import pytest
from flink_dump import check_savepoint
from fsc_helpers import latest_checkpoint

import flinkstate as fs
from flinkstate.flink import read_keyed_state, read_metadata
from flinkstate.flink.files.canonical import _StateDecoder
from flinkstate.flink.errors import CorruptFileError, StateAccountingError, UnsupportedFlinkFormatError
from flinkstate.flink.meta.metadata import UnsupportedKeyedHandle
from flinkstate.flink.files.rocksdb import family_sizes, handle_files
from flinkstate.flink.files.sst import _block, _entries, _footer, _handle
from flinkstate.flink.serde._jstring import read_varint as _varint

FULL_FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "flink-rocksdb-full"
CASES = [("1.20", "rocksdb-full"), ("1.20", "rocksdb-full-checkpoint"), ("2.3", "rocksdb-full"), ("2.3", "rocksdb-full-checkpoint"),
         ("2.3", "forst-full"), ("2.3", "forst-full-checkpoint")]


def snapshot_dir(base: Path, line: str, variant: str) -> Path:
    """The savepoint folder, or the newest chk-N of the retained checkpoint folder."""
    folder = base / line / variant
    return latest_checkpoint(folder / "checkpoint") if variant.endswith("checkpoint") else folder / "savepoint"


def expected(line: str, variant: str, tmp_path: Path) -> Path:
    out = tmp_path / "expected.jsonl"
    out.write_bytes(gzip.decompress((FULL_FIXTURES / line / variant / "expected.jsonl.gz").read_bytes()))
    return out


def keyed_handles(path: Path) -> list[tuple[str, UnsupportedKeyedHandle]]:
    meta = read_metadata(str(path))
    return [(op.operator_id, sub.managed_keyed) for op in meta.operators for sub in op.subtasks
            if isinstance(sub.managed_keyed, UnsupportedKeyedHandle)]


@pytest.mark.parametrize(("line", "variant"), CASES)
def test_full_snapshot_matches_dump(rocksdb_full: Path, line: str, variant: str, tmp_path: Path) -> None:
    """Every value, list element (merges), map entry, TTL timestamp, timer and window (max parallelism 256: 2-byte
    key-group prefixes) of a non-incremental native savepoint / retained checkpoint equals the job's dump."""
    path = snapshot_dir(rocksdb_full, line, variant)
    handles = keyed_handles(path)
    assert len(handles) == 8 and all(not h.shared and any(n.endswith(".sst") for n, _ in h.private) for _, h in handles)
    assert check_savepoint(path, expected(line, variant, tmp_path)) > 1300


def test_forst_writes_two_level_indexes(rocksdb_full: Path) -> None:
    """The ForSt fixtures are ForSt's (partitioned index SSTs), the RocksDB ones RocksDB's (binary search index)."""
    def index_types(variant: str) -> set[bytes]:
        path = snapshot_dir(rocksdb_full, "2.3", variant)
        meta = read_metadata(str(path))
        h = meta.operator("long-keyed").subtasks[0].managed_keyed
        out = set()
        for name, stream in handle_files(h, meta.directory, "test").ssts.values():
            data = stream.read(meta.directory)
            meta_block = dict(_entries(_block(data, *_footer(data, name)[0], name)))
            props = dict(_entries(_block(data, *_handle(meta_block[b"rocksdb.properties"]), name)))
            out.add(props[b"rocksdb.block.based.table.index.type"])
        return out

    assert index_types("forst-full") == {b"\x02\x00\x00\x00"} and index_types("rocksdb-full") == {b"\x00\x00\x00\x00"}


@pytest.mark.parametrize("line", ["1.20", "2.3"])
def test_every_handle_file_is_read_or_named(rocksdb_full: Path, line: str) -> None:
    """Each file a handle lists is an SST (read), the MANIFEST (the account of the live SSTs) or named as not needed:
    CURRENT (names the MANIFEST) and OPTIONS; the MANIFEST's live SSTs are exactly the handle's, with their sizes."""
    path = snapshot_dir(rocksdb_full, line, "rocksdb-full-checkpoint")
    meta = read_metadata(str(path))
    for _, h in keyed_handles(path):
        files = handle_files(h, meta.directory, "test")
        assert len(files.ssts) + 1 + len(files.not_needed) == len(h.shared) + len(h.private)
        assert files.manifest[0].startswith("MANIFEST-")
        assert sorted(n.split("-")[0] for n, _ in files.not_needed) == ["CURRENT", "OPTIONS"]
        live = files.live(meta.directory, "test")
        assert {f.number: f.size for f in live} == {n: s.size for n, (_, s) in files.ssts.items()}
        assert sum(n for n, _ in family_sizes(h, meta.directory, "test").values()) == len(files.ssts)


def test_unknown_handle_file_is_refused_by_name(rocksdb_full: Path) -> None:
    """A file of a kind the reader does not know (it could hold records) is an error naming it, not skipped."""
    path = snapshot_dir(rocksdb_full, "2.3", "rocksdb-full")
    meta = read_metadata(str(path))
    op = meta.operator("long-keyed")
    sub = op.subtasks[0]
    h = sub.managed_keyed
    blob = ("000123.blob", h.private[0][1])
    op.subtasks[0] = dataclasses.replace(sub, managed_keyed=dataclasses.replace(h, private=(*h.private, blob)))
    with pytest.raises(UnsupportedFlinkFormatError, match=r"000123\.blob"):
        read_keyed_state(meta, "long-keyed")


@pytest.mark.parametrize("line", ["1.20", "2.3"])
def test_checkpoint_missing_an_sst_names_it(rocksdb_full: Path, line: str, tmp_path: Path) -> None:
    """A retained checkpoint with one SST removed from its folder: reading its state names the file, never fewer rows."""
    src_dir = rocksdb_full / line / "rocksdb-full-checkpoint" / "checkpoint"
    shutil.copytree(src_dir, tmp_path / "checkpoint")
    chk = latest_checkpoint(tmp_path / "checkpoint")
    meta = read_metadata(str(chk))
    h = meta.operator("long-keyed").subtasks[1].managed_keyed
    files = handle_files(h, meta.directory, "test")
    count = next(f for f in files.live(meta.directory, "test") if f.column_family == "count")
    name, stream = files.ssts[count.number]
    gone = Path(stream.location(meta.directory))
    gone.unlink()
    src = fs.open(str(tmp_path / "checkpoint"))
    with pytest.raises(CorruptFileError, match=rf"SST {name} of key groups 64..127: .*{gone.name}.* is missing"):
        src.read_state("long-keyed", "count")


def test_sst_whose_blocks_disagree_with_its_properties(rocksdb_full: Path, tmp_path: Path) -> None:
    """An SST whose properties count more entries than its blocks hold (records the reader would miss) names the file."""
    shutil.copytree(snapshot_dir(rocksdb_full, "2.3", "rocksdb-full"), tmp_path / "savepoint")
    meta = read_metadata(str(tmp_path / "savepoint"))
    h = meta.operator("string-keyed").subtasks[0].managed_keyed
    name, stream = next(iter(handle_files(h, meta.directory, "test").ssts.values()))
    path = Path(stream.location(meta.directory))
    data = bytearray(path.read_bytes())
    pos = _num_entries_offset(bytes(data), name)
    data[pos] += 1  # one more entry than the blocks hold (a one-byte varint below 127 in these small files)
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptFileError, match=rf"{path.name}.*{name}.*properties count"):
        read_keyed_state(read_metadata(str(tmp_path / "savepoint")), "string-keyed")


def _num_entries_offset(data: bytes, where: str) -> int:
    """The file offset of the varint value of `rocksdb.num.entries` in an SST's (uncompressed) properties block."""
    meta_block = dict(_entries(_block(data, *_footer(data, where)[0], where)))
    off, size = _handle(meta_block[b"rocksdb.properties"])
    assert data[off + size] == 0  # meta blocks are not compressed
    block = data[off : off + size]
    pos = 0
    key = b""
    while True:
        shared, pos = _varint(block, pos)
        non_shared, pos = _varint(block, pos)
        vlen, pos = _varint(block, pos)
        key = key[:shared] + block[pos : pos + non_shared]
        pos += non_shared
        if key == b"rocksdb.num.entries":
            assert vlen == 1 and block[pos] < 127
            return off + pos
        pos += vlen


def test_column_family_no_state_declares_is_an_error(rocksdb_full: Path) -> None:
    """SSTs holding a column family the handle's header does not declare (their records would be dropped) raise."""
    meta = read_metadata(str(snapshot_dir(rocksdb_full, "2.3", "rocksdb-full")))
    op = meta.operator("long-keyed")
    other = meta.operator("string-keyed").subtasks[0].managed_keyed
    sub = op.subtasks[0]
    op.subtasks[:] = [dataclasses.replace(sub, managed_keyed=dataclasses.replace(sub.managed_keyed, meta_stream=other.meta_stream))]
    with pytest.raises(StateAccountingError, match=r"operator long-keyed: column family .\w+. holds \d+ records in \d+ SSTs "
                                                   r".*\.sst.*live, but the keyed-state header declares no such state"):
        read_keyed_state(meta, "long-keyed")


def test_rows_lost_by_the_decoder_are_an_error(rocksdb_full: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A decoder that yields fewer rows than the live records it was handed (a decoding bug) raises, naming the state."""
    real = _StateDecoder.decode_split

    def lossy(self, keys, values, kgs):  # type: ignore[no-untyped-def]
        real(self, (keys[0], keys[1][:-1], keys[2][:-1]), (values[0], values[1][:-1], values[2][:-1]), kgs[:-1])

    monkeypatch.setattr(_StateDecoder, "decode_split", lossy)
    meta = read_metadata(str(snapshot_dir(rocksdb_full, "2.3", "rocksdb-full")))
    with pytest.raises(StateAccountingError, match=r"operator long-keyed: state '[^']+': its SSTs hold \d+ live entries in the "
                                                   r"subtask.s key groups but \d+ rows were decoded from them .*\.sst"):
        read_keyed_state(meta, "long-keyed")


def _edit_handle(meta, operator: str, subtask: int, edit) -> None:  # type: ignore[no-untyped-def]
    """Replace one subtask's RocksDB handle by edit(handle) in the parsed metadata (as a damaged _metadata would give it)."""
    op = meta.operator(operator)
    i = next(i for i, s in enumerate(op.subtasks) if s.index == subtask)
    op.subtasks[i] = dataclasses.replace(op.subtasks[i], managed_keyed=edit(op.subtasks[i].managed_keyed))


def test_handle_missing_a_live_sst_is_an_error(rocksdb_full: Path) -> None:
    """A handle that does not list an SST its MANIFEST records as live (the state would read short) names the SST."""
    meta = read_metadata(str(snapshot_dir(rocksdb_full, "2.3", "rocksdb-full")))
    h = meta.operator("long-keyed").subtasks[0].managed_keyed
    live = handle_files(h, meta.directory, "test").live(meta.directory, "test")
    dropped = next(f for f in live if f.column_family == "count")
    _edit_handle(meta, "long-keyed", 0, lambda h: dataclasses.replace(h, private=tuple(p for p in h.private if p[0] != dropped.name)))
    with pytest.raises(StateAccountingError, match=rf"MANIFEST-\d+ records {dropped.name} \(\d+ bytes\) of column family 'count', "
                                                   "which the RocksDB handle does not list"):
        read_keyed_state(meta, "long-keyed")


def test_handle_listing_an_sst_the_manifest_does_not_is_an_error(rocksdb_full: Path) -> None:
    """An SST the MANIFEST does not record as live (stale records) is refused by name, not read into the state."""
    meta = read_metadata(str(snapshot_dir(rocksdb_full, "2.3", "rocksdb-full")))
    extra = next(p for p in meta.operator("string-keyed").subtasks[0].managed_keyed.private if p[0].endswith(".sst"))
    _edit_handle(meta, "long-keyed", 0, lambda h: dataclasses.replace(h, private=(*h.private, ("000999.sst", extra[1]))))
    with pytest.raises(StateAccountingError, match=r"lists .*\(000999\.sst\), which MANIFEST-\d+ does not record as live"):
        read_keyed_state(meta, "long-keyed")
