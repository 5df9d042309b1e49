"""Read a RocksDB MANIFEST: which SST files are live, in which column family, of what size.

Sources: RocksDB `db/log_format.h` and `db/log_reader.cc` (the file is a log of 32 KB blocks; each
record fragment has a 7-byte header: u32 crc, u16 length, u8 type FULL/FIRST/MIDDLE/LAST, and the
recyclable types carry 4 more bytes), `db/version_edit.cc` (each record is a VersionEdit: varint32
tags; kNewFile* adds a file to a level of the edit's column family, kDeletedFile removes one,
kColumnFamilyAdd/Drop name and drop column families; tags with bit 13 set are length-prefixed and
skippable). A RocksDB checkpoint (what Flink uploads per snapshot) copies the MANIFEST as it was:
replaying its edits gives exactly the live files, an account of the SSTs the snapshot must hold
that does not depend on the handle's own file lists. Checksums are not verified; lengths are.
The edits are parsed all at once (`manifest_scan`); what that does not model is replayed one edit at a time here.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from flinkstate.flink.errors import CorruptFileError, UnsupportedFlinkFormatError
from flinkstate.flink.files.manifest_scan import Irregular, scan

__all__ = ["LiveFile", "live_files", "sst_number"]

_BLOCK = 32768
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4
_RECYCLABLE = {5: _FULL, 6: _FIRST, 7: _MIDDLE, 8: _LAST}
_SAFE_IGNORE = 1 << 13
_CUSTOM_MUST_KNOW = 1 << 6
# VersionEdit tags (db/version_edit.h) this reader acts on or skips.
_COMPARATOR, _LOG_NUMBER, _NEXT_FILE, _LAST_SEQUENCE, _COMPACT_CURSOR, _DELETED_FILE, _NEW_FILE = 1, 2, 3, 4, 5, 6, 7
_PREV_LOG_NUMBER, _MIN_LOG_TO_KEEP = 9, 10
_NEW_FILE2, _NEW_FILE3, _NEW_FILE4 = 100, 102, 103
_COLUMN_FAMILY, _CF_ADD, _CF_DROP, _MAX_CF = 200, 201, 202, 203
_IN_ATOMIC_GROUP = 300
_PATH_ID = 65


@dataclass(frozen=True)
class LiveFile:
    """One live SST of a RocksDB snapshot, as its MANIFEST records it: also its smallest and largest user keys (their
    key-group prefixes say which key groups it may hold; empty when the edit's keys are shorter than a trailer)."""

    number: int
    size: int
    column_family: str
    smallest: bytes = field(default=b"", compare=False)
    largest: bytes = field(default=b"", compare=False)

    @property
    def name(self) -> str:
        """The SST's file name in the RocksDB directory (000087.sst)."""
        return f"{self.number:06d}.sst"


def sst_number(name: str) -> int | None:
    """The file number of an SST name (000087.sst -> 87); None for other names."""
    stem, dot, ext = name.rpartition(".")
    return int(stem) if dot and ext == "sst" and stem.isdigit() else None


def _records(data: bytes, where: str) -> list[bytes]:
    """The logical records of a RocksDB log file (fragments joined)."""
    out: list[bytes] = []
    pending: list[bytes] | None = None
    pos = 0
    n = len(data)
    while pos < n:
        left = _BLOCK - pos % _BLOCK
        if left < 7:  # a block's trailer too short for a header is zero padding
            pos += left
            continue
        length, kind = struct.unpack_from("<HB", data, pos + 4)
        if kind == 0 and length == 0:  # preallocated zeros (the end of what was written)
            pos += left
            continue
        head = 7
        if kind in _RECYCLABLE:
            kind = _RECYCLABLE[kind]
            head = 11
        if kind not in (_FULL, _FIRST, _MIDDLE, _LAST):
            raise UnsupportedFlinkFormatError(f"{where}: MANIFEST record type {kind} at {pos} is not supported")
        body = data[pos + head : pos + head + length]
        if len(body) != length or head + length > left:
            raise CorruptFileError(f"{where}: MANIFEST record at {pos} runs past its block or the file")
        pos += head + length
        if kind == _FULL:
            if pending is not None:
                raise CorruptFileError(f"{where}: MANIFEST record at {pos - head - length} interrupts a fragmented one")
            out.append(body)
        elif kind == _FIRST:
            pending = [body]
        else:
            if pending is None:
                raise CorruptFileError(f"{where}: MANIFEST record fragment at {pos - head - length} has no first part")
            pending.append(body)
            if kind == _LAST:
                out.append(b"".join(pending))
                pending = None
    if pending is not None:
        raise CorruptFileError(f"{where}: the MANIFEST ends inside a record")
    return out


class _Edit:
    """A VersionEdit's effect on the live files: its column family, files added and deleted."""

    def __init__(self, buf: bytes) -> None:
        self.buf, self.pos = buf, 0
        self.cf = 0
        self.cf_add: str | None = None
        self.cf_drop = False
        self.added: list[tuple[int, int, bytes, bytes]] = []  # (number, size, smallest and largest user keys)
        self.deleted: list[int] = []

    def varint(self) -> int:
        b = self.buf[self.pos]
        self.pos += 1
        if b < 0x80:
            return b
        value, shift = b & 0x7F, 7
        while True:
            b = self.buf[self.pos]
            self.pos += 1
            value |= (b & 0x7F) << shift
            if b < 0x80:
                return value
            shift += 7

    def skip(self) -> None:
        """Step over a length-prefixed field."""
        n = self.varint()
        if self.pos + n > len(self.buf):
            raise ValueError("a length-prefixed field runs past its record")
        self.pos += n

    def slice(self) -> bytes:
        n = self.varint()
        if self.pos + n > len(self.buf):
            raise ValueError("a length-prefixed field runs past its record")
        self.pos += n
        return self.buf[self.pos - n : self.pos]

    def new_file(self, tag: int) -> None:
        self.varint()  # level
        number = self.varint()
        if tag == _NEW_FILE3:
            self.varint()  # path id
        size = self.varint()
        smallest = self.slice()[:-8]  # internal keys: the user key and an 8-byte trailer
        largest = self.slice()[:-8]
        if tag != _NEW_FILE:
            self.varint()  # smallest sequence number
            self.varint()  # largest sequence number
        if tag == _NEW_FILE4:
            while (custom := self.varint()) != 1:  # custom fields up to kTerminate
                self.skip()
                if custom & _CUSTOM_MUST_KNOW and custom != _PATH_ID:
                    raise UnsupportedFlinkFormatError(f"new-file custom field {custom} (which must be understood) is not supported")
        self.added.append((number & 0x3FFFFFFFFFFFFFFF, size, smallest, largest))

    def parse(self) -> _Edit:
        while self.pos < len(self.buf):
            tag = self.varint()
            if tag in (_LOG_NUMBER, _NEXT_FILE, _LAST_SEQUENCE, _PREV_LOG_NUMBER, _MIN_LOG_TO_KEEP, _MAX_CF, _IN_ATOMIC_GROUP):
                self.varint()
            elif tag == _COMPARATOR:
                self.skip()
            elif tag == _COMPACT_CURSOR:
                self.varint()
                self.skip()
            elif tag == _DELETED_FILE:
                self.varint()  # level
                self.deleted.append(self.varint())
            elif tag in (_NEW_FILE, _NEW_FILE2, _NEW_FILE3, _NEW_FILE4):
                self.new_file(tag)
            elif tag == _COLUMN_FAMILY:
                self.cf = self.varint()
            elif tag == _CF_ADD:
                self.cf_add = self.slice().decode("utf-8")
            elif tag == _CF_DROP:
                self.cf_drop = True
            elif tag & _SAFE_IGNORE:
                self.skip()
            else:
                raise UnsupportedFlinkFormatError(f"MANIFEST tag {tag} (blob files?) is not supported")
        return self


def live_files(data: bytes, where: str) -> list[LiveFile]:
    """The live SSTs a MANIFEST's edits leave, in file-number order.

    A MANIFEST logs every edit of the database's life (a long-running job's holds thousands), and a read of every
    state opens each subtask's MANIFEST once per state: its replay is kept for the process with its bytes, found by
    its length and last bytes and used only when all its bytes are equal (a comparison several times faster than a
    digest of a MB-sized MANIFEST)."""
    key = (len(data), bytes(data[-64:]))
    hit = _REPLAYED.get(key)
    if hit is not None and hit[0] == data:
        return list(hit[1])
    live = tuple(_replay(data, where))
    if sum(len(d) for d, _ in _REPLAYED.values()) + len(data) > _REPLAYED_BYTES:
        _REPLAYED.clear()
    _REPLAYED[key] = (data, live)
    return list(live)


_REPLAYED: dict[tuple[int, bytes], tuple[bytes, tuple[LiveFile, ...]]] = {}  # (length, last bytes) -> (MANIFEST, live files)
_REPLAYED_BYTES = 256 << 20  # the MANIFESTs kept, at most


def _replay(data: bytes, where: str) -> list[LiveFile]:
    """The live files: the edits parsed at once (`manifest_scan`), or, when they hold what that does not model, one by one."""
    try:
        records = _records(data, where)
    except struct.error as e:
        raise CorruptFileError(f"{where}: corrupt MANIFEST: {e}") from e
    try:
        live = scan(records)
    except Irregular:
        return _replay_each(records, where)
    names = [live.names[cf] for cf in live.families.tolist()]
    buf = live.buf
    keys = [(buf[a : a + max(0, n - 8)].tobytes(), buf[b : b + max(0, m - 8)].tobytes()) for a, n, b, m in live.bounds.tolist()]
    return [LiveFile(n, s, c, *k) for n, s, c, k in zip(live.numbers.tolist(), live.sizes.tolist(), names, keys, strict=True)]


def _replay_each(records: list[bytes], where: str) -> list[LiveFile]:
    """The live files, each edit parsed and applied in turn (RocksDB's own replay)."""
    names: dict[int, str] = {0: "default"}
    files: dict[int, dict[int, tuple[int, bytes, bytes]]] = {0: {}}  # column family id -> file number -> size, key bounds
    try:
        for record in records:
            edit = _Edit(record).parse()
            if edit.cf_add is not None:
                names[edit.cf] = edit.cf_add
                files[edit.cf] = {}
            live = files.get(edit.cf)
            if live is None:
                raise CorruptFileError(f"{where}: a MANIFEST edit names column family {edit.cf}, which was never added")
            for number in edit.deleted:
                live.pop(number, None)
            live.update((a[0], a[1:]) for a in edit.added)
            if edit.cf_drop:
                del files[edit.cf]
    except UnsupportedFlinkFormatError as e:
        raise UnsupportedFlinkFormatError(f"{where}: {e}") from e
    except (IndexError, ValueError, UnicodeDecodeError, struct.error) as e:
        raise CorruptFileError(f"{where}: corrupt MANIFEST: {e}") from e
    out = [LiveFile(number, size, names[cf], lo, hi) for cf, live in files.items() for number, (size, lo, hi) in live.items()]
    return sorted(out, key=lambda f: f.number)
