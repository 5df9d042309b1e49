"""A state's view over a key-group range read chunk by chunk: one streaming pass over its files' Parquet row groups.

`read_range` (format.merge) reads every file of a range whole before merging; `RangeStream` yields the same merged rows
for consecutive sub-ranges (chunks) of the range, reading each row group of each file once, when the first chunk
that needs it comes: a data file is sorted by key group, so its row groups follow the chunks and the rows read
and not yet yielded are those of the row group a chunk ended in. Memory: the rows of about one chunk, plus each
open file's footer (and, on an object store, the bytes of files up to `HOLD_BYTES`); a local or larger file is read
twice instead (its checksum as a stream of blocks, then its row groups by range).
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from flinkstate.core.errors import CorruptFileError, InvalidArgumentError
from flinkstate.core.io import FileIO
from flinkstate.format import constants as C
from flinkstate.format.checks import (
    footer_problems,
    key_group_problems,
    stream_problems,
)
from flinkstate.format.datafile import FileEntry, damaged_message
from flinkstate.format.merge import (
    elementary_ranges,
    live_positions,
    merge_tables,
    newest_full_order,
    order_entries,
    overlaps,
)

__all__ = ["HOLD_BYTES", "FileRows", "RangeStream"]

HOLD_BYTES = 8 << 20  # an object store's file up to this size is fetched once and held while it is read (a larger one twice)
_BLOCK = 8 << 20  # the block a checksum is computed over, read by read


def _open(io: FileIO, entry: FileEntry, hold_bytes: int) -> tuple[Any, list[str]]:
    """A random-access source of the file's bytes, and the problems of its size and checksum (read whole first)."""
    path = io.fs_path(entry.path)
    if io.scheme != "file" and entry.bytes <= hold_bytes:
        data = io.fs.cat_file(path)
        return pa.BufferReader(data), stream_problems(entry, len(data), zlib.crc32(data))
    crc, size = 0, 0
    with io.fs.open(path, "rb") as f:
        while block := f.read(_BLOCK):
            crc, size = zlib.crc32(block, crc), size + len(block)
    if io.scheme == "file":
        return pa.OSFile(path, "r"), stream_problems(entry, size, crc)
    return io.fs.open(path, "rb"), stream_problems(entry, size, crc)


class FileRows:
    """One data file's rows of a key-group range, taken in ascending sub-ranges (`take`), each row group read once.

    The file is checked as `read_data_file` checks it (size and checksum, footer against the manifest entry and
    descriptor, the key groups of every row group read); a damaged one is CorruptFileError naming it."""

    def __init__(self, io: FileIO, entry: FileEntry, *, descriptor: Any = None, max_parallelism: int | None = None,
                 hold_bytes: int = HOLD_BYTES) -> None:
        self.io, self.entry = io, entry
        try:
            self._source, problems = _open(io, entry, hold_bytes)
        except FileNotFoundError as e:
            raise CorruptFileError(f"data file {io.url(entry.path)} of operator {entry.operator!r} state {entry.state!r} is missing") from e
        except OSError as e:
            raise CorruptFileError(f"data file {io.url(entry.path)} of operator {entry.operator!r} state {entry.state!r} is unreadable: {e}") from e
        try:
            self._file = pq.ParquetFile(self._source)
            meta = self._file.metadata
            problems += footer_problems(entry, self._file.schema_arrow, meta.num_rows, descriptor, max_parallelism)
            if problems:  # damaged: every problem named, as a whole read names them
                problems += key_group_problems(entry, self._file.read())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError) as e:
            problems.append(f"it is unreadable as Parquet ({str(e).splitlines()[0][:200]})")
        if problems:
            self.close()
            raise CorruptFileError(damaged_message(io, entry, problems))
        self._bounds = self._row_group_bounds(meta)
        self._unread = sorted(range(meta.num_row_groups), key=lambda i: self._bounds[i][0])
        self._pending: pa.Table | None = None  # rows read, of key groups after the last range taken

    def _row_group_bounds(self, meta: pq.FileMetaData) -> list[tuple[int, int]]:
        """Each row group's key groups (min, max) from its statistics (the file's range when it has none)."""
        lo, hi = self.entry.key_group_start, self.entry.key_group_end
        col = meta.schema.to_arrow_schema().get_field_index(C.COL_KEY_GROUP)
        out = []
        for i in range(meta.num_row_groups):
            st = meta.row_group(i).column(col).statistics if col >= 0 else None
            out.append((st.min, st.max) if st is not None and st.has_min_max else (lo, hi))
        return out

    def uncompressed_bytes(self, lo: int, hi: int) -> int:
        """The Parquet-encoded bytes of the row groups holding key groups lo..hi (an estimate of their rows' size)."""
        meta = self._file.metadata
        return sum(meta.row_group(i).total_byte_size for i, (a, b) in enumerate(self._bounds) if a <= hi and b >= lo)

    def _read(self, i: int) -> pa.Table:
        try:
            t = self._file.read_row_group(i)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError) as e:
            raise CorruptFileError(damaged_message(self.io, self.entry, [f"it is unreadable as Parquet ({str(e).splitlines()[0][:200]})"])) from e
        problems = key_group_problems(self.entry, t)
        if problems:
            raise CorruptFileError(damaged_message(self.io, self.entry, problems))
        return t.replace_schema_metadata(None)

    def take(self, lo: int, hi: int) -> pa.Table:
        """The file's rows of key groups lo..hi (maybe none); ranges are taken in ascending order, rows of key groups
        before lo that are still held (a range skipped) are dropped."""
        parts = [] if self._pending is None else [self._pending]
        while self._unread and self._bounds[self._unread[0]][0] <= hi:
            parts.append(self._read(self._unread.pop(0)))
        self._pending = None
        if not parts:
            return self._file.schema_arrow.remove_metadata().empty_table()
        t = parts[0] if len(parts) == 1 else pa.concat_tables(parts)
        kg = t.column(C.COL_KEY_GROUP).to_numpy()
        if len(kg) and (kg[1:] >= kg[:-1]).all():  # sorted, as written: zero-copy slices
            a, b = (int(x) for x in np.searchsorted(kg, [lo, hi + 1]))
            out, rest = t.slice(a, b - a), t.slice(b)
        else:
            out, rest = t.filter(pa.array((kg >= lo) & (kg <= hi))), t.filter(pa.array(kg > hi))
        self._pending = rest if rest.num_rows else None
        return out

    def close(self) -> None:
        """Release the file."""
        close = getattr(self._source, "close", None)
        if close is not None:
            close()


class RangeStream:
    """The merged stored rows of one state (its file entries) in a key-group range, a sub-range at a time: `take(lo, hi)`
    for ascending sub-ranges gives what `merge.read_range` gives for each (newest full file plus later deltas, newest
    wins, tombstones dropped), merged per range of one full file as it does."""

    def __init__(self, io: FileIO, entries: Sequence[FileEntry], pk: list[str], max_parallelism: int,
                 key_group_range: tuple[int, int], *, descriptor: Any = None, hold_bytes: int = HOLD_BYTES) -> None:
        lo, hi = self.range = key_group_range
        self.pk, self.max_parallelism = pk, max_parallelism
        self._files = order_entries([e for e in entries if overlaps(e, lo, hi)])
        self._pieces = elementary_ranges(self._files, lo, hi)
        live: set[str] = set()
        for a, b in self._pieces:
            ordered = [e for e in self._files if overlaps(e, a, b)]
            live.update(ordered[p].path for p in live_positions(ordered, newest_full_order(ordered, max_parallelism)))
        self._rows: dict[str, FileRows] = {}
        try:
            for e in self._files:
                if e.path in live:
                    self._rows[e.path] = FileRows(io, e, descriptor=descriptor, max_parallelism=max_parallelism, hold_bytes=hold_bytes)
        except BaseException:
            self.close()
            raise
        self._next = lo

    def uncompressed_bytes(self) -> int:
        """The Parquet-encoded bytes of the row groups this range reads (an estimate of its rows' size)."""
        return sum(r.uncompressed_bytes(*self.range) for r in self._rows.values())

    def take(self, lo: int, hi: int) -> pa.Table | None:
        """The merged rows of key groups lo..hi (None: none); sub-ranges come in ascending order, inside the range."""
        if lo < self._next or hi > self.range[1] or lo > hi:
            raise InvalidArgumentError(f"key groups {lo}..{hi} do not follow {self._next - 1} inside {self.range[0]}..{self.range[1]}")
        self._next = hi + 1
        out = []
        for a, b in self._pieces:
            a, b = max(a, lo), min(b, hi)
            if a > b:
                continue
            ordered = [e for e in self._files if overlaps(e, a, b)]
            full_order = newest_full_order(ordered, self.max_parallelism)
            tables, positions = [], []
            for pos in live_positions(ordered, full_order):  # empty ones too: with two tables, older rows are masked
                tables.append(self._rows[ordered[pos].path].take(a, b))
                positions.append(pos)
            if tables:
                v = merge_tables(tables, positions, full_order, self.pk)
                if v.num_rows:
                    out.append(v)
        if not out:
            return None
        return out[0] if len(out) == 1 else pa.concat_tables(out)

    def close(self) -> None:
        """Release every file."""
        for r in self._rows.values():
            r.close()
        self._rows = {}
