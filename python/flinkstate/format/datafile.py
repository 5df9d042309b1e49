"""Format v1 data files: the one writer and reader of v1 (the schemas per file kind are in `schemas`, re-exported here).

A data file is an immutable Parquet file with typed columns, sorted by key group then key
(timers: key group then timestamp), carrying the format version and its identity in the
Parquet key-value metadata.
"""

from __future__ import annotations

import functools
import zlib
from dataclasses import asdict, dataclass, replace
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from flinkstate.core.errors import CorruptFileError
from flinkstate.core.io import FileIO
from flinkstate.format import constants as C
from flinkstate.format.checks import (
    bytes_problems,
    checksum_of_crc,
    file_checksum,
    footer_problems,
    key_group_problems,
)
from flinkstate.format.schemas import (  # the schemas, re-exported where the v1 file API is
    as_table,
    castable,
    conform,
    coordinator_schema,
    operator_state_schema,
    primary_key_columns,
    sort_for_kind,
    state_schema,
    timer_schema,
)

__all__ = [
    "castable",
    "FileEntry",
    "state_schema",
    "timer_schema",
    "operator_state_schema",
    "coordinator_schema",
    "primary_key_columns",
    "conform",
    "as_table",
    "write_data_file",
    "DataFileSink",
    "read_data_file",
    "damaged_message",
]


@dataclass(frozen=True)
class FileEntry:
    """One data file as the manifest records it (path relative to the job root)."""

    path: str
    operator: str
    state: str | None
    kind: str
    key_group_start: int
    key_group_end: int
    created_by_checkpoint_id: int
    rows: int
    bytes: int
    seq: int = 0
    checksum: str | None = None  # 'crc32:<8 hex>' of the file's bytes; None in manifests written before it

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (JSON-able)."""
        return asdict(self)


@functools.cache
def _parquet_format() -> Any:
    """Parquet as a dataset format (filtered reads), imported on first use: pyarrow.dataset imports pandas (0.4 s)."""
    import pyarrow.dataset as pads

    return pads.ParquetFileFormat()

_NO_DICTIONARY = frozenset({C.COL_KEY, C.COL_USER_KEY, C.COL_TIMESTAMP, C.COL_TTL, C.COL_SEQ, C.COL_PAYLOAD})


def _file_metadata(kind: str, operator: str, state: str | None, key_group_start: int, key_group_end: int, checkpoint_id: int,
                   extra_metadata: dict[str, str] | None) -> dict[bytes, bytes]:
    """The Parquet key-value metadata of a v1 data file: format version, kind, identity, key-group range."""
    meta = {
        C.META_FORMAT_VERSION: str(C.FORMAT_VERSION),
        C.META_FILE_KIND: kind,
        C.META_OPERATOR: operator,
        C.META_STATE: state or "",
        C.META_KG_START: str(key_group_start),
        C.META_KG_END: str(key_group_end),
        C.META_CHECKPOINT_ID: str(checkpoint_id),
    }
    meta.update(extra_metadata or {})
    return {k.encode(): v.encode() for k, v in meta.items()}


def _parquet_options(names: list[str]) -> dict[str, Any]:
    """The Parquet writer options of every v1 data file."""
    # dictionary pages pay off for repetitive columns only; on unique keys and
    # timestamps they cost a second encoding pass before Parquet falls back to plain
    return {"use_dictionary": [n for n in names if n not in _NO_DICTIONARY], "compression": "zstd", "write_statistics": True,
            "store_schema": True}


def write_data_file(
    io: FileIO,
    rel_path: str,
    table: pa.Table,
    *,
    kind: str,
    operator: str,
    state: str | None,
    key_group_start: int,
    key_group_end: int,
    checkpoint_id: int,
    seq: int = 0,
    extra_metadata: dict[str, str] | None = None,
    row_group_size: int = C.DEFAULT_ROW_GROUP_SIZE,
    sort: bool = True,
) -> FileEntry:
    """Write one immutable data file (format v1) and return its manifest entry."""
    if sort:
        table = sort_for_kind(table, kind)
    meta = _file_metadata(kind, operator, state, key_group_start, key_group_end, checkpoint_id, extra_metadata)
    table = table.replace_schema_metadata({**(table.schema.metadata or {}), **meta})
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, row_group_size=row_group_size, **_parquet_options(table.column_names))
    data = sink.getvalue()  # written in one piece, and checksummed for the manifest
    with io.open(rel_path, "wb") as f:
        f.write(memoryview(data))
    size = data.size
    return FileEntry(
        path=rel_path,
        operator=operator,
        state=state,
        kind=kind,
        key_group_start=key_group_start,
        key_group_end=key_group_end,
        created_by_checkpoint_id=checkpoint_id,
        rows=table.num_rows,
        bytes=size,
        seq=seq,
        checksum=file_checksum(data),
    )


class _Checksummed:
    """A binary file being written that counts and checksums (CRC-32, as `file_checksum`) the bytes through it."""

    def __init__(self, f: Any) -> None:
        self.f = f
        self.size = 0
        self.crc = 0
        self.closed = False

    def write(self, data: Any) -> int:
        view = memoryview(data)
        self.crc = zlib.crc32(view, self.crc)
        self.size += view.nbytes
        self.f.write(view)
        return view.nbytes

    def tell(self) -> int:
        return self.size

    def flush(self) -> None:
        self.f.flush()

    def close(self) -> None:
        self.closed = True  # the caller closes the file itself (after the footer)


class DataFileSink:
    """One data file (format v1) written row group by row group: rows come in `write` calls, already in the file's
    order, and are cut into the row groups one `write_data_file` of all of them makes (unless `flush` cuts one short);
    `close` writes the footer and returns the manifest entry. Memory: at most one row group of pending rows, not the
    file; `abort` deletes a partial file."""

    def __init__(self, io: FileIO, rel_path: str, schema: pa.Schema, *, kind: str, operator: str, state: str | None,
                 key_group_start: int, key_group_end: int, checkpoint_id: int, seq: int = 0,
                 extra_metadata: dict[str, str] | None = None, row_group_size: int = C.DEFAULT_ROW_GROUP_SIZE) -> None:
        self.io, self.path, self.row_group_size = io, rel_path, row_group_size
        meta = _file_metadata(kind, operator, state, key_group_start, key_group_end, checkpoint_id, extra_metadata)
        self.schema = schema.with_metadata({**(schema.metadata or {}), **meta})
        self.entry = FileEntry(rel_path, operator, state, kind, key_group_start, key_group_end, checkpoint_id, 0, 0, seq)
        self.rows = 0
        self._pending: list[pa.Table] = []
        self._pending_rows = 0
        self._file = io.open(rel_path, "wb")
        self._out = _Checksummed(self._file)
        try:
            self._writer = pq.ParquetWriter(self._out, self.schema, **_parquet_options(schema.names))
        except BaseException:
            self.abort()
            raise

    def write(self, table: pa.Table) -> None:
        """Append rows (the file's schema, in the file's sort order after every row written before)."""
        if table.num_rows == 0:
            return
        self._pending.append(table.replace_schema_metadata(self.schema.metadata))
        self._pending_rows += table.num_rows
        if self._pending_rows >= self.row_group_size:
            self._drain(final=False)

    @property
    def pending_bytes(self) -> int:
        """The Arrow bytes of the rows held for the next row group."""
        return sum(t.nbytes for t in self._pending)

    def flush(self) -> None:
        """Write the rows held as a row group now (a shorter one): what bounds memory when many files are written at once."""
        if self._pending:
            self._drain(final=True)

    def _drain(self, final: bool) -> None:
        rows = pa.concat_tables(self._pending) if len(self._pending) > 1 else self._pending[0]
        full = rows.num_rows if final else rows.num_rows - rows.num_rows % self.row_group_size
        for at in range(0, full, self.row_group_size):
            self._writer.write_table(rows.slice(at, min(self.row_group_size, full - at)), row_group_size=self.row_group_size)
        self.rows += full
        rest = rows.slice(full)
        self._pending = [rest] if rest.num_rows else []
        self._pending_rows = rest.num_rows

    def close(self) -> FileEntry:
        """Write the last row group and the footer; the file's manifest entry (rows, size, checksum)."""
        try:
            if self._pending:
                self._drain(final=True)
            elif self.rows == 0:
                self._writer.write_table(self.schema.empty_table())  # an empty file still holds its schema's row group
            self._writer.close()
            self._file.close()
        except BaseException:
            self.abort()
            raise
        return replace(self.entry, rows=self.rows, bytes=self._out.size, checksum=checksum_of_crc(self._out.crc))

    def abort(self) -> None:
        """Drop the file (a failed write: nothing references it)."""
        writer = getattr(self, "_writer", None)
        if writer is not None and writer.is_open:
            try:
                writer.close()  # else its finalizer writes a footer into the closed file
            except (OSError, ValueError, pa.ArrowException):
                self._writer = None  # a broken file: dropped below all the same
        try:
            self._file.close()
            self.io.delete(self.path)
        except OSError:
            pass  # left for collect_orphans: no checkpoint references it


def read_data_file(
    io: FileIO,
    entry: FileEntry,
    *,
    columns: list[str] | None = None,
    filter: Any = None,
    descriptor: Any = None,
    verify: bool = True,
    max_parallelism: int | None = None,
) -> pa.Table:
    """Read one data file; `filter` is a pyarrow expression; `max_parallelism` is the operator's (checked when given).

    With `verify` (the default) the file is fetched whole and checked against its manifest
    entry and `descriptor` (see format.checks): a damaged file raises CorruptFileError naming
    it and what is wrong, never a wrong table. `verify=False` checks the format version and
    the row count only (the benchmark's baseline).
    """
    if not verify:
        return _read_unverified(io, entry, columns, filter)
    try:
        data = io.fs.cat_file(io.fs_path(entry.path))
    except FileNotFoundError as e:
        raise CorruptFileError(f"data file {io.url(entry.path)} of operator {entry.operator!r} state {entry.state!r} is missing") from e
    except OSError as e:
        raise CorruptFileError(f"data file {io.url(entry.path)} of operator {entry.operator!r} state {entry.state!r} is unreadable: {e}") from e
    problems = bytes_problems(entry, data)
    table = None
    try:
        parquet = pq.ParquetFile(pa.BufferReader(data))
        schema = parquet.schema_arrow
        problems += footer_problems(entry, schema, parquet.metadata.num_rows, descriptor, max_parallelism)
        # even if damaged: name every problem. A whole read decodes fastest through ParquetFile;
        # a filtered one goes through a dataset fragment, which skips row groups by their statistics
        if filter is None:
            table = parquet.read(columns=columns)
        else:
            table = _parquet_format().make_fragment(pa.BufferReader(data)).to_table(schema=schema, columns=columns, filter=filter)
        problems += key_group_problems(entry, table)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError) as e:
        problems.append(f"it is unreadable as Parquet ({str(e).splitlines()[0][:200]})")
    if problems or table is None:
        raise CorruptFileError(damaged_message(io, entry, problems))
    return table.replace_schema_metadata(None)


def damaged_message(io: FileIO, entry: FileEntry, problems: list[str]) -> str:
    """One message naming a damaged data file, its state and every problem found."""
    return (
        f"data file {io.url(entry.path)} of operator {entry.operator!r} state {entry.state!r} "
        f"(written by checkpoint {entry.created_by_checkpoint_id}) is damaged: {'; '.join(problems)}"
    )


def _read_unverified(io: FileIO, entry: FileEntry, columns: list[str] | None, filter: Any) -> pa.Table:
    """The read without the checks of format.checks (format version and row count only)."""
    import pyarrow.dataset as ds

    try:
        dataset = ds.dataset(io.fs_path(entry.path), format="parquet", filesystem=io.arrow_fs)
        meta = dataset.schema.metadata or {}
        raw = meta.get(C.META_FORMAT_VERSION.encode(), b"0")
        version = int(raw) if raw.isdigit() else -1
        if version not in C.SUPPORTED_FORMAT_VERSIONS:
            raise CorruptFileError(
                f"data file {io.url(entry.path)} has format version {version}; this release reads {C.SUPPORTED_FORMAT_VERSIONS}"
            )
        table = dataset.to_table(columns=columns, filter=filter)
    except CorruptFileError:
        raise
    except FileNotFoundError as e:
        raise CorruptFileError(f"data file {io.url(entry.path)} of operator {entry.operator!r} state {entry.state!r} is missing") from e
    except (pa.ArrowInvalid, OSError) as e:
        raise CorruptFileError(f"data file {io.url(entry.path)} of operator {entry.operator!r} state {entry.state!r} is unreadable: {e}") from e
    if filter is None and table.num_rows != entry.rows:
        raise CorruptFileError(
            f"data file {io.url(entry.path)} has {table.num_rows} rows but the manifest records {entry.rows}"
        )
    return table.replace_schema_metadata(None)
