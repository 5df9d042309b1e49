"""The records of a RocksDB (or ForSt) native savepoint or checkpoint (IncrementalRemoteKeyedStateHandle).

Sources: `RocksIncrementalSnapshotStrategy`, `RocksNativeFullSnapshotStrategy`, `RocksDBListState`
(list `add()` is a MERGE with `StringAppendTESTOperator`, delimiter ','), `RocksDBKeyedStateBackend`.
The handle's metadata stream is the KeyedBackendSerializationProxy header. Its SST files hold one
column family per state (named after it): an incremental snapshot lists them as shared files, a
full one (Flink's default, `execution.checkpointing.incremental: false`) as private files, so both
lists are read. The MANIFEST that CURRENT names says which SSTs are live, in which column family and
of what size (`manifest`): the SSTs the handle lists must be exactly those, or a StateAccountingError
names the file. Every other file is named as not needed (OPTIONS, an empty write-ahead log) or
refused by name: nothing a handle lists is skipped unseen. The SSTs are parsed in batches (`read_ssts`).
Keys and values are in the canonical formats, so each column family's records are resolved (newest
put/delete per key, merge operands appended with ',' in sequence order) and handed to the canonical
decoders (`rocksdb_frame` lays keys and values out apart for the vector decoders, or frames them as canonical
records for the one-by-one ones; values stay views of the decompressed blocks until then). Keys outside the
subtask's key-group range (left by rescaling) are dropped; range tombstones are not applied (Flink writes them only
to clip such ranges). Each column family's `FamilyAccount` says what its SSTs held and where each record went, for
the reader's checks. Keys start with their key group, and the MANIFEST records each SST's smallest and largest key:
a subtask is read a run of key groups at a time (`rocksdb_chunks`, about CHUNK_BYTES of SSTs each), from the SSTs
whose key span meets the run and, of those, the data blocks whose index keys may hold it (`read_ssts`).
"""

from __future__ import annotations

import re
import struct
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from flinkstate.flink.errors import (
    CorruptFileError,
    StateAccountingError,
    UnsupportedFlinkFormatError,
)
from flinkstate.flink.files.chunks import runs
from flinkstate.flink.files.manifest import LiveFile, live_files, sst_number
from flinkstate.flink.files.sst import (
    TYPE_DELETION,
    TYPE_MERGE,
    TYPE_SINGLE_DELETION,
    TYPE_VALUE,
    SstFile,
    read_ssts,
)
from flinkstate.flink.files.rocksdb_frame import joined
from flinkstate.flink.files.sst_ranges import Fetch, SstIndex, read_indexes, read_key_groups
from flinkstate.flink.files.views import Views, binary_parts
from flinkstate.flink.meta.metadata import StreamHandle, UnsupportedKeyedHandle

__all__ = ["CHUNK_BYTES", "FamilyAccount", "HandleFiles", "column_families", "family_sizes", "handle_files", "key_groups_of_keys",
           "rocksdb_chunks"]

_I32 = struct.Struct(">i")
_MANIFEST = re.compile(r"MANIFEST-\d+")
_OPTIONS = re.compile(r"OPTIONS-\d+")
_WAL = re.compile(r"\d+\.log")
_BATCH_BYTES = 1 << 20  # SSTs parsed together up to about this many bytes: the parser's cost per call shared by small
# files, while the arrays of a batch stay in the caches (measured with the lockstep parser before issue 46 on a 1.7 M-entry
# savepoint: 1 MB best, 32 MB and 64 KB slower)
CHUNK_BYTES = 4 << 20  # a subtask is read a run of key groups holding about this many SST bytes at a time (`rocksdb_chunks`):
# snappy blocks, about half the canonical file's 8 MiB chunks; measured on the 10.6 M-entry savepoint's largest subtask
# (114 MiB decoded): peak RSS over the decoded rows 1.9x at 4 MiB, 2.2x at 8 MiB, at about the same CPU


@dataclass
class FamilyAccount:
    """One column family of a handle: its SSTs, what they held, and where each key went (live, deleted, other range)."""

    files: list[str] = field(default_factory=list)
    entries: int = 0
    keys: int = 0
    deleted: int = 0
    out_of_range: int = 0
    live_keys: pa.Array = field(default_factory=lambda: pa.array([], pa.large_binary()))  # live keys, in key order
    live_parts: Views = field(default_factory=lambda: Views(np.zeros((0, 4), "<u4"), []))  # their values' parts, oldest first
    live_counts: np.ndarray | None = None  # parts of each key's value (a put and merge operands), None: one each

    @property
    def live(self) -> int:
        """How many keys of the subtask's key groups are live (one canonical record each)."""
        return len(self.live_keys)

    @property
    def live_values(self) -> pa.LargeBinaryArray:
        """The live keys' values, merge operands joined with ',' (a copy: the read frames them from the parts)."""
        return joined(self.live_parts, self.live_counts)

    def summary(self) -> str:
        """Where the column family's records went, for messages."""
        return (f"{self.entries} records in {len(self.files)} SSTs ({', '.join(self.files)}): {self.keys} keys, {self.deleted} deleted, "
                f"{self.out_of_range} in other subtasks' key groups, {self.live} live")


def _where(stream: StreamHandle, base_dir: str, name: str) -> str:
    """A handle file for messages: its path (or 'inline') and the name RocksDB gave it."""
    return f"{stream.location(base_dir) if stream.kind != 'inline' else 'inline'} ({name})"


@dataclass(frozen=True)
class HandleFiles:
    """Every file a RocksDB handle lists, sorted out: SSTs (by file number), the MANIFEST in use, and the rest with why it is not needed."""

    ssts: dict[int, tuple[str, StreamHandle]]
    manifest: tuple[str, StreamHandle]
    not_needed: list[tuple[str, str]]

    def live(self, base_dir: str, where: str) -> list[LiveFile]:
        """The live SSTs the MANIFEST records (number, size, column family)."""
        name, stream = self.manifest
        return live_files(stream.read(base_dir), f"{where}: {_where(stream, base_dir, name)}")


def handle_files(handle: UnsupportedKeyedHandle, base_dir: str, where: str) -> HandleFiles:
    """Sort every file the handle lists, shared and private: SSTs, the MANIFEST (the one CURRENT names), the others.

    A file of another kind (a write-ahead log with records, a blob file...) could hold state the
    SSTs do not: it is an UnsupportedFlinkFormatError naming it, as is a file listed without a handle.
    """
    ssts: dict[int, tuple[str, StreamHandle]] = {}
    others: dict[str, StreamHandle] = {}
    for name, stream in (*handle.shared, *handle.private):
        if stream is None:
            raise CorruptFileError(f"{where}: RocksDB file {name!r} is listed without a state handle")
        number = sst_number(name)
        if number is not None:
            ssts[number] = (name, stream)
        else:
            others[name] = stream
    current = others.pop("CURRENT", None)
    if current is None:
        raise CorruptFileError(f"{where}: the RocksDB handle lists no CURRENT file (its files: {sorted(others)})")
    manifest = current.read(base_dir).decode("utf-8", "replace").strip()
    if not _MANIFEST.fullmatch(manifest) or manifest not in others:
        raise CorruptFileError(f"{where}: CURRENT names {manifest!r}, which the RocksDB handle does not list (its files: {sorted(others)})")
    used = (manifest, others.pop(manifest))
    skipped = [("CURRENT", f"names {manifest}")]
    for name, stream in sorted(others.items()):
        if _OPTIONS.fullmatch(name):
            skipped.append((name, "RocksDB's options, no records (read only to tell the Flink release: flink.version)"))
        elif _MANIFEST.fullmatch(name):
            skipped.append((name, f"an older MANIFEST (CURRENT names {manifest})"))
        elif _WAL.fullmatch(name) and stream.size == 0:
            skipped.append((name, "an empty write-ahead log"))
        else:
            raise UnsupportedFlinkFormatError(f"{where}: RocksDB file {name!r} ({stream.size} bytes) is of a kind this reader "
                                              "does not read (SST, MANIFEST, CURRENT, OPTIONS and empty logs are known)")
    return HandleFiles(ssts, used, skipped)


def _check_live(files: HandleFiles, live: list[LiveFile], base_dir: str, where: str) -> dict[int, LiveFile]:
    """The live SSTs by number, which must be exactly the SSTs the handle lists: else the read would miss or add records."""
    by_number = {f.number: f for f in live}
    manifest = files.manifest[0]
    for f in live:
        if f.number not in files.ssts:
            raise StateAccountingError(f"{where}: {manifest} records {f.name} ({f.size} bytes) of column family "
                                       f"{f.column_family!r}, which the RocksDB handle does not list")
    for number, (name, stream) in sorted(files.ssts.items()):
        if number not in by_number:
            raise StateAccountingError(f"{where}: the RocksDB handle lists {_where(stream, base_dir, name)}, which {manifest} "
                                       "does not record as live")
    return by_number


def column_families(handle: UnsupportedKeyedHandle, base_dir: str, prefix: int, where: str,
                    skip: frozenset[str] = frozenset(), key_groups: tuple[int, int] | None = None,
                    indexes: dict[int, SstIndex] | None = None) -> dict[str, FamilyAccount]:
    """Per column family, its accounting and live (key, value) pairs in key order, in the handle's key-group range.

    skip: column families not to read (a read of other states): their SSTs, which the MANIFEST assigns to them, are
    not opened; every file is still checked against the MANIFEST.
    key_groups (first, last): only these key groups (a run of `rocksdb_chunks`): only the SSTs whose key span in the
    MANIFEST meets them are opened, and of those only the data blocks their index says may hold them, by ranged reads
    (`sst_ranges`); indexes: the SSTs' indexes read so far (by file number), kept by a caller reading several runs.

    where (the header's file and the operator) starts the message of a missing or corrupt file, which names it.
    """
    by_cf: dict[str, list[SstFile]] = defaultdict(list)
    accounts: dict[str, FamilyAccount] = defaultdict(FamilyAccount)
    files = handle_files(handle, base_dir, where)
    live = _check_live(files, files.live(base_dir, where), base_dir, where)
    outer = (handle.start, handle.start + handle.count - 1)
    lo, hi = key_groups or outer
    ranged = (prefix, lo, hi) if key_groups is not None and key_groups != outer else None
    if ranged is not None:
        _add_ranged(files, live, base_dir, where, ranged, skip, {} if indexes is None else indexes, accounts, by_cf)
    batch: list[tuple[int, bytes, str]] = []  # (number, bytes, name for messages) of SSTs read whole, parsed together
    size = 0
    for i, (number, (name, stream)) in enumerate(sorted(files.ssts.items()) if ranged is None else ()):
        f = live[number]
        if f.column_family not in skip:
            try:
                data = stream.read(base_dir)
            except CorruptFileError as e:
                raise CorruptFileError(f"{where}: SST {name} of key groups {outer[0]}..{outer[1]}: {e}") from e
            batch.append((number, data, _where(stream, base_dir, name)))
            size += len(data)
        if batch and (i == len(files.ssts) - 1 or size >= _BATCH_BYTES):
            _add_ssts(batch, live, files.manifest[0], accounts, by_cf, where)
            batch, size = [], 0
    for cf, ssts in by_cf.items():
        ssts.sort(key=lambda t: t.keys.column("key")[0].as_py() if t.keys.num_rows else b"")  # a level's SSTs in key order
        _resolve(cf, pa.concat_tables([t.keys for t in ssts]), accounts[cf], prefix, lo, hi, Views.concat([t.values for t in ssts]),
                 outer)
    return dict(accounts)


def _add_ssts(batch: list[tuple[int, bytes, str]], live: dict[int, LiveFile], manifest: str, accounts: dict[str, FamilyAccount],
              by_cf: dict[str, list[SstFile]], where: str) -> None:
    """Parse a batch of SSTs at once, check each against the MANIFEST and add its records to its column family."""
    for (number, data, file), sst in zip(batch, read_ssts([(data, file) for _, data, file in batch]), strict=True):
        want = live[number]
        if (sst.column_family, len(data)) != (want.column_family, want.size):
            raise StateAccountingError(f"{where}: {file} holds column family {sst.column_family!r} in {len(data)} bytes, but "
                                       f"{manifest} records {want.column_family!r} in {want.size} bytes")
        accounts[sst.column_family].files.append(file)
        by_cf[sst.column_family].append(sst)


def _add_ranged(files: HandleFiles, live: dict[int, LiveFile], base_dir: str, where: str, ranged: tuple[int, int, int],
                skip: frozenset[str], indexes: dict[int, SstIndex], accounts: dict[str, FamilyAccount],
                by_cf: dict[str, list[SstFile]]) -> None:
    """The records of the SSTs that meet the key groups of ranged (prefix, first, last), from their indexes (read once:
    kept in indexes) and the data blocks that may hold those key groups, by ranged reads; each SST's column family and
    size checked against the MANIFEST."""
    prefix, lo, hi = ranged
    manifest = files.manifest[0]
    todo = []
    for number, (name, stream) in sorted(files.ssts.items()):
        f = live[number]
        if f.column_family in skip or not _meets(f, prefix, lo, hi):
            continue
        file = _where(stream, base_dir, name)
        if stream.data is not None or stream.size > 0:
            size = len(stream.data) if stream.data is not None else stream.size
            if size != f.size:
                raise StateAccountingError(f"{where}: {file} holds {size} bytes, but {manifest} records {f.size} bytes")
        todo.append((number, (_fetch(stream, base_dir, f"{where}: SST {name} of key groups {lo}..{hi}"), f.size, file)))
    new = [(n, t) for n, t in todo if n not in indexes]
    for (number, (_, _, file)), ix in zip(new, read_indexes([t for _, t in new], prefix), strict=True):
        if ix.layout.column_family != live[number].column_family:
            raise StateAccountingError(f"{where}: {file} holds column family {ix.layout.column_family!r}, but {manifest} records "
                                       f"{live[number].column_family!r}")
        indexes[number] = ix
    batch: list[tuple[int, tuple[Fetch, int, str]]] = []
    held = 0.0
    for i, (number, t) in enumerate(todo):
        batch.append((number, t))
        held += live[number].size * _share(live[number], prefix, lo, hi)  # about the part of it read
        if i == len(todo) - 1 or held >= _BATCH_BYTES:
            ssts = read_key_groups([t for _, t in batch], [indexes[n] for n, _ in batch], ranged)
            for (_, (_, _, file)), sst in zip(batch, ssts, strict=True):
                accounts[sst.column_family].files.append(file)
                by_cf[sst.column_family].append(sst)
            batch, held = [], 0.0


def _fetch(stream: StreamHandle, base_dir: str, what: str) -> Fetch:
    """A ranged reader of a handle's file; a missing file is a CorruptFileError naming it."""

    def fetch(offset: int, length: int) -> bytes:
        try:
            return stream.read(base_dir, offset, length)
        except CorruptFileError as e:
            raise CorruptFileError(f"{what}: {e}") from e

    return fetch


def _key_group(key: bytes, prefix: int) -> int:
    """The key group of a key's prefix, zero bytes past a shorter key (its least key group: a bound either way)."""
    return int.from_bytes(key[:prefix].ljust(prefix, b"\0"), "big")


def _span(f: LiveFile, prefix: int) -> tuple[int, int] | None:
    """The key groups an SST's keys may be in, from its smallest and largest keys in the MANIFEST (None: not recorded)."""
    if not f.smallest or not f.largest:
        return None
    return _key_group(f.smallest, prefix), _key_group(f.largest, prefix)


def _share(f: LiveFile, prefix: int, lo: int, hi: int) -> float:
    """About which part of an SST's records are in key groups lo..hi: the part of its key span they cover."""
    span = _span(f, prefix)
    if span is None:
        return 1.0
    return max(0, min(hi, span[1]) - max(lo, span[0]) + 1) / max(1, span[1] - span[0] + 1)


def _meets(f: LiveFile, prefix: int, lo: int, hi: int) -> bool:
    span = _span(f, prefix)
    return span is None or (span[0] <= hi and span[1] >= lo)


def rocksdb_chunks(handle: UnsupportedKeyedHandle, base_dir: str, prefix: int, where: str, max_bytes: int | None = None,
                   skip: frozenset[str] = frozenset()) -> list[tuple[int, int]]:
    """The handle's key-group range cut into runs (first, last) of about max_bytes of SST bytes each (`chunks.runs`):
    each live SST's bytes spread evenly over the key groups its MANIFEST key span covers (an SST without a recorded
    span over all). No SST is opened."""
    lo, hi = handle.start, handle.start + handle.count - 1
    if hi < lo:
        return []
    max_bytes = CHUNK_BYTES if max_bytes is None else max_bytes
    if max_bytes <= 0:
        return [(lo, hi)]
    size = np.zeros(hi - lo + 1, np.float64)
    for f in handle_files(handle, base_dir, where).live(base_dir, where):
        if f.column_family in skip:
            continue
        a, b = _span(f, prefix) or (lo, hi)
        a, b = max(a, lo), min(b, hi)
        if a <= b:
            size[a - lo : b - lo + 1] += f.size / (b - a + 1)
    return runs(size, lo, max_bytes)


def _resolve(cf: str, records: pa.Table, acc: FamilyAccount, prefix: int, lo: int, hi: int, values: Views | None = None,
             outer: tuple[int, int] | None = None) -> None:
    """A column family's records (sst.KEYS columns, values: their views; None: RECORDS' value column) resolved per key,
    with Arrow and numpy: records sorted by key and newest first; a key's newest put or delete ends it, the merge
    operands newer than that are its list elements, after the put's value, oldest first (their parts kept, joined
    where the records are framed); keys outside the key-group range lo..hi are not kept.

    outer: the subtask's key-group range when lo..hi is a run of it: a key of another run is not counted at all (that
    run counts it), one outside the subtask's range only by the first or last run."""
    n = records.num_rows
    if not n:
        return
    records = records.combine_chunks()  # large_binary keys: a family may exceed 2 GiB
    keys = records.column("key").chunk(0)
    if values is None:
        values = Views.of_array(records.column("value").chunk(0))
    outer = outer or (lo, hi)
    rec_kg = rec_mine = None
    if outer != (lo, hi):
        rec_kg = key_groups_of_keys(keys, prefix)
        rec_mine = _mine(rec_kg, lo, hi, outer)
        acc.entries += int(rec_mine.sum())
    else:
        acc.entries += n
    kinds = records.column("kind").chunk(0).to_numpy().astype(np.int64)
    less, same = _adjacent(keys)
    seqs = records.column("seq").chunk(0).to_numpy()
    perm = None  # record i of the order by key ascending, sequence descending, when it is not the records' own (one SST's)
    if less.any() or (same & (seqs[1:] > seqs[:-1])).any():
        perm, same = _key_order(keys, seqs)
        kinds = kinds[perm]
    if perm is None and not same.any():  # one record per key, in order (a savepoint's SSTs): each decides its key
        starts, count, kg = _single_records(cf, kinds, keys, prefix, rec_kg)
    else:
        starts, count, kg = _runs_of_keys(cf, kinds, same, keys, prefix, perm)
    in_range = (kg >= lo) & (kg <= hi)
    mine = rec_mine if starts is None and rec_mine is not None else _mine(kg, lo, hi, outer)  # (a key per record: the same)
    acc.keys += int(mine.sum())
    acc.deleted += int(((count == 0) & mine).sum())
    acc.out_of_range += int(((count > 0) & ~in_range & mine).sum())
    keep = (count > 0) & in_range
    assert not acc.live, "a column family is resolved once per read"
    g_start, g_count = (np.flatnonzero(keep) if starts is None else starts[keep]), count[keep]
    if not len(g_start):
        return
    a, b = int(g_start[0]), int(g_start[-1]) + 1
    if perm is None and b - a == len(g_start) and int(g_count.max()) == 1:
        # in order, one record per key, the kept ones consecutive (a key-group range of sorted keys): slices, no copy
        acc.live_parts, acc.live_counts, acc.live_keys = values.slice(a, b), None, keys.slice(a, b - a)
        return
    # each kept key's records, oldest first: the put's value, then the merge operands
    idx = np.repeat(g_start + g_count - 1, g_count) - (np.arange(int(g_count.sum())) - np.repeat(np.cumsum(g_count) - g_count, g_count))
    if perm is not None:
        idx, g_start = perm[idx], perm[g_start]
    acc.live_parts = values.take(idx)
    acc.live_counts = None if (g_count == 1).all() else g_count  # else keys with merge operands, joined when framed
    acc.live_keys = keys.take(pa.array(g_start))


def _single_records(cf: str, kinds: np.ndarray, keys: pa.Array, prefix: int, kg: np.ndarray | None
                    ) -> tuple[None, np.ndarray, np.ndarray]:
    """(None: every record starts its key, records that make each key's value, its key group) when each key has one
    record: a put or a merge operand is its value, a delete none."""
    bad = ~np.isin(kinds, (TYPE_VALUE, TYPE_MERGE, TYPE_DELETION, TYPE_SINGLE_DELETION))
    if bad.any():
        raise ValueError(f"column family {cf!r}: record type {int(kinds[bad][0])} is not supported")
    count = ((kinds == TYPE_VALUE) | (kinds == TYPE_MERGE)).astype(np.int64)
    return None, count, key_groups_of_keys(keys, prefix) if kg is None else kg


def _runs_of_keys(cf: str, kinds: np.ndarray, same: np.ndarray, keys: pa.Array, prefix: int, perm: np.ndarray | None
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(where each key's records start, how many make its value, its key group) of records in key order, newest first
    (perm: their order, None: as they are; same: whether each equals the one before in that order)."""
    n = len(kinds)
    is_merge = kinds == TYPE_MERGE
    first = np.ones(n, bool)
    first[1:] = ~same
    starts = np.flatnonzero(first)
    ends = np.append(starts[1:], n)
    if is_merge.any():
        stops = np.append(np.flatnonzero(~is_merge), n)  # a key's first non-merge record (newest put or delete) ends what counts
        stop = np.minimum(stops[np.searchsorted(stops, starts)], ends)
    else:
        stop = starts
    decisive = kinds[stop[stop < ends]]
    bad = ~np.isin(decisive, (TYPE_VALUE, TYPE_DELETION, TYPE_SINGLE_DELETION))  # only a record that decides a key matters,
    if bad.any():  # as Flink's merge would read it (a merge operand never decides one)
        raise ValueError(f"column family {cf!r}: record type {int(decisive[bad][0])} is not supported")
    has_base = (stop < ends) & (kinds[np.minimum(stop, n - 1)] == TYPE_VALUE)
    count = (stop - starts) + has_base  # records that make the key's value
    offs, data = binary_parts(keys)
    at = offs[starts if perm is None else perm[starts]]
    kg = data[at].astype(np.int64)
    if prefix == 2:
        kg = (kg << 8) | data[at + 1]
    return starts, count, kg


def _mine(kg: np.ndarray, lo: int, hi: int, outer: tuple[int, int]) -> np.ndarray:
    """Which key groups a run lo..hi of the range outer accounts for: its own, and those outside outer at its ends."""
    return ((kg >= lo) & (kg <= hi)) | ((kg < outer[0]) & (lo == outer[0])) | ((kg > outer[1]) & (hi == outer[1]))


def _key_order(keys: pa.Array, seqs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The order of the records by key ascending, sequence descending, and whether each key equals the one before in it.

    Keys of one width (Flink's, for fixed-width types): a stable numpy sort of fixed-size byte strings, the key then the
    sequence inverted big-endian (numpy compares them as bytes do, NULs included), near-linear on the few sorted runs,
    one per SST, the records come in; keys of several widths: Arrow's sort."""
    offsets, data = binary_parts(keys)
    n = len(keys)
    width = int(offsets[1] - offsets[0])
    if width and (np.diff(offsets) == width).all():
        rows = np.empty((n, width + 8), np.uint8)
        rows[:, :width] = data[int(offsets[0]) : int(offsets[-1])].reshape(n, width)
        rows[:, width:] = (~seqs.astype(np.uint64)).astype(">u8").view(np.uint8).reshape(n, 8)
        perm = np.argsort(rows.view(f"S{width + 8}").ravel(), kind="stable")
        ordered = np.ascontiguousarray(rows[perm, :width]).view(f"S{width}").ravel()
        return perm, ordered[1:] == ordered[:-1]
    perm = pc.sort_indices(pa.table({"key": keys, "seq": seqs}), sort_keys=[("key", "ascending"), ("seq", "descending")]).to_numpy()
    return perm, _adjacent(keys.take(pa.array(perm)))[1]


def _adjacent(keys: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(key i+1 < key i, key i+1 == key i) for each pair of neighbours, bytewise (Arrow's compare: faster than numpy's
    on fixed-size byte strings), computed once for the order check and the runs of one key."""
    n = len(keys)
    if n < 2:
        return np.zeros(0, bool), np.zeros(0, bool)
    later, earlier = keys.slice(1), keys.slice(0, n - 1)
    return pc.less(later, earlier).to_numpy(zero_copy_only=False), pc.equal(later, earlier).to_numpy(zero_copy_only=False)


def key_groups_of_keys(keys: pa.Array, prefix: int) -> np.ndarray:
    """The big-endian key-group prefix of each binary key (1 or 2 bytes)."""
    offs, data = binary_parts(keys)
    kg = data[offs[:-1]].astype(np.int64)
    if prefix == 2:
        kg = (kg << 8) | data[offs[:-1] + 1]
    return kg


def family_sizes(handle: UnsupportedKeyedHandle, base_dir: str, where: str) -> dict[str, tuple[int, int]]:
    """Per column family, (live SSTs, their bytes) as the handle's MANIFEST records them: no SST is opened."""
    out: dict[str, tuple[int, int]] = {}
    for f in handle_files(handle, base_dir, where).live(base_dir, where):
        n, size = out.get(f.column_family, (0, 0))
        out[f.column_family] = (n + 1, size + f.size)
    return out
