"""Format v1 data files: the one writer and reader of v1 (the schemas per file kind are in `schemas`, re-exported here).

A data file is an immutable Parquet file with typed columns, sorted by key group then key
(timers: key group then timestamp), carrying the format version and its identity in the
Parquet key-value metadata.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq

from flinkstate.core.errors import CorruptFileError
from flinkstate.core.io import FileIO
from flinkstate.format import constants as C
from flinkstate.format.checks import (
    bytes_problems,
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
    "read_data_file",
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


_PARQUET = pads.ParquetFileFormat()

_NO_DICTIONARY = frozenset({C.COL_KEY, C.COL_USER_KEY, C.COL_TIMESTAMP, C.COL_TTL, C.COL_SEQ, C.COL_PAYLOAD})


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
    schema = table.schema.with_metadata({**(table.schema.metadata or {}), **{k.encode(): v.encode() for k, v in meta.items()}})
    table = table.replace_schema_metadata(schema.metadata)
    sink = pa.BufferOutputStream()
    pq.write_table(
        table,
        sink,
        # dictionary pages pay off for repetitive columns only; on unique keys and
        # timestamps they cost a second encoding pass before Parquet falls back to plain
        use_dictionary=[n for n in table.column_names if n not in _NO_DICTIONARY],
        row_group_size=row_group_size,
        compression="zstd",
        write_statistics=True,
        store_schema=True,
    )
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
            table = _PARQUET.make_fragment(pa.BufferReader(data)).to_table(schema=schema, columns=columns, filter=filter)
        problems += key_group_problems(entry, table)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError) as e:
        problems.append(f"it is unreadable as Parquet ({str(e).splitlines()[0][:200]})")
    if problems or table is None:
        raise CorruptFileError(_damaged(io, entry, problems))
    return table.replace_schema_metadata(None)


def _damaged(io: FileIO, entry: FileEntry, problems: list[str]) -> str:
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
