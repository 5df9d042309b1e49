"""A MANIFEST's edits parsed in lockstep (`manifest_scan`) leave exactly the live files RocksDB's one-by-one replay
does: on every fixture MANIFEST, and on MANIFESTs written here (every new-file tag, custom and skippable fields, a
record fragmented over log blocks, a file deleted and added again); what the scan does not model falls back to the
replay, whose errors name the MANIFEST."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from flink_dump import FIXTURE

from flinkstate.flink import read_metadata
from flinkstate.flink.errors import CorruptFileError, UnsupportedFlinkFormatError
from flinkstate.flink.files.manifest import LiveFile, _records, _replay, _replay_each, live_files
from flinkstate.flink.files.manifest_scan import Irregular, scan
from flinkstate.flink.files.rocksdb import handle_files
from flinkstate.flink.meta.metadata import UnsupportedKeyedHandle
from flink_bytes import varint7 as _v  # RocksDB's varint is the same LEB128

# -- a small MANIFEST writer: VersionEdits (db/version_edit.cc) in RocksDB's log format (db/log_writer.cc) ------------


def _s(b: bytes) -> bytes:
    return _v(len(b)) + b


def cf(i: int) -> bytes:
    return _v(200) + _v(i)


def cf_add(name: str) -> bytes:
    return _v(201) + _s(name.encode())


def deleted(number: int) -> bytes:
    return _v(6) + _v(0) + _v(number)


def new_file(tag: int, number: int, size: int, customs: bytes = b"") -> bytes:
    out = _v(tag) + _v(1) + _v(number) + (_v(0) if tag == 102 else b"") + _v(size) + _s(b"a" * 9) + _s(b"z" * 9)
    if tag != 7:
        out += _v(5) + _v(1 << 40)
    return out + (customs + _v(1) if tag == 103 else b"")


def log(records: list[bytes]) -> bytes:
    """The records as a log file: 7-byte headers, fragments split at 32 KB block ends, short trailers zeroed."""
    out = bytearray()
    for rec in records:
        first = True
        while True:
            left = 32768 - len(out) % 32768
            if left < 7:
                out += bytes(left)
                continue
            part, rec = rec[: left - 7], rec[left - 7 :]
            kind = (1 if not rec else 2) if first else (4 if not rec else 3)
            out += struct.pack("<IHB", 0, len(part), kind) + part
            first = False
            if not rec:
                break
    return bytes(out)


def replays(data: bytes) -> tuple[list[LiveFile], list[LiveFile]]:
    """(the reader's live files, the one-by-one replay's)."""
    return _replay(data, "M"), _replay_each(_records(data, "M"), "M")


def test_written_manifest_reads_as_the_replay_does() -> None:
    customs = _v(65) + _s(b"\x00") + _v(2) + _s(b"checksum") + _v(1 << 13 | 3) + _s(b"x")
    edits = [
        _v(1) + _s(b"leveldb.BytewiseComparator") + _v(2) + _v(7) + _v(3) + _v(40) + _v(4) + _v(1 << 50),
        cf(1) + cf_add("count") + _v(2) + _v(8),
        cf(2) + cf_add("list"),
        new_file(103, 10, 1000, customs) + new_file(7, 11, 1100) + new_file(100, 12, 1200) + new_file(102, 13, 1300),
        cf(1) + new_file(103, 14, 1400) + new_file(103, 15, 1500, customs),
        cf(2) + new_file(100, 16, 1600) + new_file(100, 17, 1700),
        deleted(10) + deleted(11) + new_file(103, 18, 1800) + _v(1 << 13 | 9) + _s(b"ignored"),
        cf(1) + deleted(14) + new_file(103, 14, 1401),  # deleted and added again in one edit: the addition stands
        cf(2) + deleted(16) + _v(5) + _v(1) + _s(b"cursor"),
        deleted(12) + new_file(103, 19, 1900, customs) + new_file(103, 19, 1901),  # the later size of one number stands
        cf(1) + deleted(999) + deleted(13),  # files the family does not hold: nothing happens
        _v(1) + _s(b"c" * 70000),  # a record over two log blocks
    ]
    data = log(edits)
    got, replayed = replays(data)
    assert got == replayed == [LiveFile(13, 1300, "default"), LiveFile(14, 1401, "count"), LiveFile(15, 1500, "count"),
                               LiveFile(17, 1700, "list"), LiveFile(18, 1800, "default"), LiveFile(19, 1901, "default")]
    scan(_records(data, "M"))  # read by the lockstep scan, not the fallback


@pytest.mark.parametrize(("edits", "why"), [
    ([cf(1) + cf_add("a"), cf(1) + new_file(103, 5, 50), cf(1) + _v(202)], "dropped"),
    ([cf(1) + cf_add("a"), cf(1) + cf_add("b") + new_file(7, 5, 50)], "added twice"),
    ([new_file(103, 5, 50), cf(3) + new_file(7, 6, 50)], "not yet added"),
    ([new_file(103, 5, 50), _v(150) + _v(1)], "unknown tag"),
    ([new_file(103, 5, 50, _v(66) + _s(b"?"))], "must be understood"),
    ([new_file(103, 5, 50)[:-3]], "past its record|ends inside"),
])
def test_what_the_scan_does_not_model_is_replayed(edits: list[bytes], why: str) -> None:
    data = log(edits)
    with pytest.raises(Irregular, match=why):
        scan(_records(data, "M"))
    try:
        want = _replay_each(_records(data, "M"), "M")
    except (CorruptFileError, UnsupportedFlinkFormatError) as e:
        with pytest.raises(type(e), match=r"^M: "):
            _replay(data, "M")
    else:
        assert _replay(data, "M") == want


def test_every_fixture_manifest_reads_as_the_replay_does(rocksdb_full: Path) -> None:
    """The checked-in native savepoints and checkpoints (RocksDB and ForSt, Flink 1.20 and 2.3): read by the scan."""
    dirs = [d.parent for d in rocksdb_full.glob("*/*/savepoint/_metadata")]
    dirs += [max(c.glob("chk-*"), key=lambda p: int(p.name[4:])) for c in rocksdb_full.glob("*/*/checkpoint")]
    dirs += [FIXTURE.parent / "flink-2.3-rocksdb" / "rocksdb" / "savepoint"]
    seen = 0
    for d in dirs:
        meta = read_metadata(str(d))
        for op in meta.operators:
            for sub in op.subtasks:
                if isinstance(sub.managed_keyed, UnsupportedKeyedHandle):
                    _, stream = handle_files(sub.managed_keyed, meta.directory, "test").manifest
                    data = stream.read(meta.directory)
                    got, replayed = replays(data)
                    assert got == replayed and got, d
                    scan(_records(data, "M"))
                    seen += 1
    assert seen >= 40


def test_the_replay_cache_tells_manifests_of_one_length_and_tail_apart() -> None:
    """Two MANIFESTs of the same length ending in the same bytes (an early edit differs): each its own live files."""
    tail = [new_file(103, 20 + i, 2000 + i) for i in range(5)]
    a, b = log([new_file(103, 10, 1000), *tail]), log([new_file(103, 11, 1000), *tail])
    assert len(a) == len(b) and a[-64:] == b[-64:] and a != b
    assert live_files(a, "A")[0] == LiveFile(10, 1000, "default")
    assert live_files(b, "B")[0] == LiveFile(11, 1000, "default")
    assert live_files(a, "A")[0] == LiveFile(10, 1000, "default")
