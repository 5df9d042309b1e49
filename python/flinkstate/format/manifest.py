"""The shared-state manifest and the checkpoint log, both Delta Lake tables (delta-rs).

- `_flinkstate/manifest`: one row per file a checkpoint uses, tagged with the attempt that
  wrote it. Rows of attempts that never completed are invisible (the log names the attempt).
- `_flinkstate/log`: one row per event: COMPLETED (the commit point of a checkpoint, one Delta
  commit made against the log version the writer planned with, never retried) and
  DISCARDED (a checkpoint subsumed or removed). Checkpoint metadata travels as JSON.
"""

from __future__ import annotations

import datetime as dt
import os
from collections import Counter, OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from flinkstate.errors import CommitConflictError, CorruptFileError
from flinkstate.format import constants as C
from flinkstate.format.deltacheck import check_table_files, delta_log_error, table_file_error
from flinkstate.format.logrows import as_table_schema, conform_rows, parse_metadata
from flinkstate.format.datafile import FileEntry
from flinkstate.integrity import check_commit_file, missing_table_error, read_only_error
from flinkstate.io import FileIO

__all__ = ["MANIFEST_SCHEMA", "LOG_SCHEMA", "LogRecord", "DeltaCatalog"]

MANIFEST_SCHEMA = pa.schema(
    [
        pa.field("checkpoint_id", pa.int64(), nullable=False),
        pa.field("attempt_id", pa.string(), nullable=False),
        pa.field("operator", pa.string(), nullable=False),
        pa.field("state", pa.string()),
        pa.field("kind", pa.string(), nullable=False),
        pa.field("path", pa.string(), nullable=False),
        pa.field("key_group_start", pa.int32(), nullable=False),
        pa.field("key_group_end", pa.int32(), nullable=False),
        pa.field("created_by_checkpoint_id", pa.int64(), nullable=False),
        pa.field("seq", pa.int32(), nullable=False),
        pa.field("rows", pa.int64(), nullable=False),
        pa.field("bytes", pa.int64(), nullable=False),
        pa.field("checksum", pa.string()),  # added after v1's first release: older manifests lack it
    ]
)

LOG_SCHEMA = pa.schema(
    [
        pa.field("checkpoint_id", pa.int64(), nullable=False),
        pa.field("attempt_id", pa.string(), nullable=False),
        pa.field("event", pa.string(), nullable=False),
        pa.field("kind", pa.string(), nullable=False),
        pa.field("event_time", pa.timestamp("ms", tz="UTC"), nullable=False),
        pa.field("created_at", pa.timestamp("ms", tz="UTC"), nullable=False),
        pa.field("max_parallelism", pa.int32(), nullable=False),
        pa.field("format_version", pa.int32(), nullable=False),
        pa.field("base_checkpoint_id", pa.int64()),
        pa.field("files", pa.int64(), nullable=False),
        pa.field("rows", pa.int64(), nullable=False),
        pa.field("bytes", pa.int64(), nullable=False),
        pa.field("metadata", pa.string(), nullable=False),
    ]
)


@dataclass(frozen=True)
class LogRecord:
    """One COMPLETED checkpoint as the log records it (status folds in later events)."""

    checkpoint_id: int
    attempt_id: str
    kind: str
    status: str
    created_at: dt.datetime
    max_parallelism: int
    format_version: int
    base_checkpoint_id: int | None
    files: int
    rows: int
    bytes: int
    metadata: dict[str, Any]
    damage: str | None = None  # why this checkpoint cannot be read (its metadata is damaged); None when intact


# Delta data files are immutable: their parsed content is cached by (table, file path)
_FILE_CACHE: OrderedDict[tuple[str, str], pa.Table] = OrderedDict()
_FILE_CACHE_SIZE = 4096
# a Delta checkpoint every this many commits keeps log replay short
DELTA_CHECKPOINT_INTERVAL = 20
# a commit rebased on top of concurrent commits of other checkpoint ids gives up after this many tries
_MAX_REBASES = 50


def _delta_errors() -> tuple[type[BaseException], ...]:
    from deltalake.exceptions import CommitFailedError, DeltaError, TableNotFoundError

    return CommitFailedError, DeltaError, TableNotFoundError


def _read_s3(fs: Any, url: str) -> pa.Table:
    """One Delta data file from S3; delta-rs writes behind s3fs, so a stale listing is refreshed once."""
    import pyarrow.parquet as pq

    try:
        with fs.open(url, "rb") as f:
            return pq.read_table(f)
    except FileNotFoundError:
        fs.invalidate_cache(url.rsplit("/", 1)[0])
        with fs.open(url, "rb") as f:
            return pq.read_table(f)


class DeltaCatalog:
    """Reads and commits the manifest and log tables of one job root."""

    def __init__(self, io: FileIO) -> None:
        self.io = io
        self.table_opens: Counter[str] = Counter()  # DeltaTable loads per table (tests and benches read it)

    def _uri(self, rel: str) -> str:
        return self.io.delta_uri(rel)

    def _table(self, rel: str, version: int | None = None) -> Any:
        from deltalake import DeltaTable
        from deltalake.exceptions import DeltaError, TableNotFoundError

        self.table_opens[rel] += 1
        try:
            table = DeltaTable(self._uri(rel), version=version, storage_options=self.io.delta_storage_options())
        except TableNotFoundError:
            return None
        except DeltaError as e:  # a damaged _delta_log: name the file, never treat the table as empty
            raise delta_log_error(self.io, rel, e) from e
        if version is None:
            check_commit_file(self.io, rel, int(table.version()))
        return table

    def _existing(self, rel: str, version: int | None = None) -> Any:
        """A table that must exist in a root holding data (None only in a new, empty root)."""
        table = self._table(rel, version)
        if table is None:
            err = missing_table_error(self.io, rel)
            if err is not None:
                raise err
        return table

    def _read(self, table: Any, rel: str, checkpoint_id: int | None = None, columns: list[str] | None = None) -> pa.Table:
        """Rows of a Delta table (`_read_rows`); a table file gone, resized or unreadable raises CorruptFileError naming it."""
        from deltalake.exceptions import DeltaError

        try:
            return self._read_rows(table, rel, checkpoint_id, columns)
        except CorruptFileError:
            raise
        except DeltaError as e:
            raise delta_log_error(self.io, rel, e) from e
        except (OSError, pa.ArrowInvalid) as e:
            raise table_file_error(self.io, rel, pa.table(table.get_add_actions(flatten=True)).column("path").to_pylist(), e) from e

    def _read_rows(self, table: Any, rel: str, checkpoint_id: int | None = None, columns: list[str] | None = None) -> pa.Table:
        """Rows of a Delta table, reading only files whose stats may hold `checkpoint_id`.

        Uses the snapshot's add actions (paths and min/max stats) and a per-file cache, so
        the cost does not grow with the number of commits already read.
        """
        import pyarrow.parquet as pq

        actions = pa.table(table.get_add_actions(flatten=True))
        paths = actions.column("path").to_pylist()
        if checkpoint_id is not None and "min.checkpoint_id" in actions.column_names:
            lo = actions.column("min.checkpoint_id").to_pylist()
            hi = actions.column("max.checkpoint_id").to_pylist()
            paths = [p for p, a, b in zip(paths, lo, hi) if a is None or b is None or a <= checkpoint_id <= b]
        sizes = dict(zip(actions.column("path").to_pylist(), actions.column("size_bytes").to_pylist()))
        check_table_files(self.io, rel, paths, [sizes[p] for p in paths])  # the cache must not serve a file that is gone
        base = self._uri(rel)
        parts = []
        for p in paths:
            key = (base, p)
            t = _FILE_CACHE.get(key)
            if t is None:
                if self.io.scheme == "s3":
                    t = _read_s3(self.io.fs, f"{base.rstrip('/')}/{p}")
                else:
                    t = pq.read_table(os.path.join(base, p))
                _FILE_CACHE[key] = t
                if len(_FILE_CACHE) > _FILE_CACHE_SIZE:
                    _FILE_CACHE.popitem(last=False)
            else:
                _FILE_CACHE.move_to_end(key)
            parts.append(t)
        schema = LOG_SCHEMA if rel == C.LOG_TABLE else MANIFEST_SCHEMA
        out = pa.concat_tables([conform_rows(t, schema) for t in parts]) if parts else schema.empty_table()
        if checkpoint_id is not None:
            out = out.filter(pc.equal(out.column("checkpoint_id"), checkpoint_id))
        return out.select(columns) if columns else out

    @staticmethod
    def _maybe_checkpoint(table: Any) -> None:
        """Write a Delta checkpoint every DELTA_CHECKPOINT_INTERVAL commits (best effort).

        `table` is the DeltaTable the commit went through: it is already at the new version.
        """
        if table.version() % DELTA_CHECKPOINT_INTERVAL:
            return
        try:
            table.create_checkpoint()
        except _delta_errors():
            return  # an optimisation only: the log stays valid without it

    def exists(self) -> bool:
        """True when the job root has a checkpoint log."""
        return self._table(C.LOG_TABLE) is not None

    def log_table(self) -> Any:
        """The log DeltaTable (None when the root is empty)."""
        return self._table(C.LOG_TABLE)

    def log_version(self) -> int | None:
        """Current Delta version of the log (None when it doesn't exist)."""
        t = self._existing(C.LOG_TABLE)
        return None if t is None else int(t.version())

    def records(self, version: int | None = None) -> list[LogRecord]:
        """Every completed checkpoint in the log (at a log version), oldest first."""
        t = self._existing(C.LOG_TABLE, version)
        if t is None:
            return []
        rows = self._read(t, C.LOG_TABLE).to_pylist()
        discarded = {r["checkpoint_id"] for r in rows if r["event"] == C.EVENT_DISCARDED}
        out = []
        for r in rows:
            if r["event"] != C.EVENT_COMPLETED:
                continue
            meta, damage = parse_metadata(r, self.io.url(C.LOG_TABLE))  # one damaged row never hides the others
            out.append(
                LogRecord(
                    checkpoint_id=int(r["checkpoint_id"]),
                    attempt_id=r["attempt_id"],
                    kind=r["kind"],
                    status=C.STATUS_DISCARDED if r["checkpoint_id"] in discarded else C.STATUS_COMPLETED,
                    created_at=r["created_at"],
                    max_parallelism=int(r["max_parallelism"]),
                    format_version=int(r["format_version"]),
                    base_checkpoint_id=r["base_checkpoint_id"],
                    files=int(r["files"]),
                    rows=int(r["rows"]),
                    bytes=int(r["bytes"]),
                    metadata=meta,
                    damage=damage,
                )
            )
        out.sort(key=lambda r: r.checkpoint_id)
        return out

    def log_events(self) -> pa.Table:
        """The raw log rows (checkpoint_id, attempt_id, event, files, bytes), for checks that must not trust parsing."""
        t = self._existing(C.LOG_TABLE)
        cols = ["checkpoint_id", "attempt_id", "event", "files", "bytes"]
        return LOG_SCHEMA.empty_table().select(cols) if t is None else self._read(t, C.LOG_TABLE, columns=cols)

    def check_files(self, rel: str) -> None:
        """CorruptFileError naming every data file the current version of a Delta table references
        that storage no longer holds at its recorded size (a fresh listing, never a cache)."""
        t = self._existing(rel)
        if t is None:
            return
        actions = pa.table(t.get_add_actions(flatten=True))
        check_table_files(self.io, rel, actions.column("path").to_pylist(), actions.column("size_bytes").to_pylist())

    def unreferenced_files(self, rel: str, older_than: dt.datetime) -> list[str]:
        """Files inside a Delta table its current version does not reference, last modified before
        `older_than`: what Delta's VACUUM deletes (the table is append-only, so no older version uses them)."""
        t = self._existing(rel)
        if t is None:
            return []
        if self.io.scheme == "s3":
            self.io.fs.invalidate_cache(self.io.fs_path(rel))
        referenced = {f"{rel}/{p}" for p in pa.table(t.get_add_actions(flatten=True)).column("path").to_pylist()}
        out = []
        for p in self.io.list_files(rel):
            name = p[len(rel) + 1 :]
            if p in referenced or name.startswith(("_", ".")) or "/_" in name or "/." in name:
                continue  # _delta_log and hidden files are Delta's own, never vacuumed
            modified = self.io.fs.modified(self.io.fs_path(p))
            if (modified.astimezone() if modified.tzinfo is None else modified) < older_than:
                out.append(p)
        return out

    def manifest(self, checkpoint_id: int, attempt_id: str) -> list[FileEntry]:
        """The files a completed checkpoint uses."""
        t = self._table(C.MANIFEST_TABLE)
        if t is None:
            raise CorruptFileError(f"checkpoint {checkpoint_id}: the manifest table {self.io.url(C.MANIFEST_TABLE)} is missing")
        tbl = self._read(t, C.MANIFEST_TABLE, checkpoint_id)
        tbl = tbl.filter(pc.equal(tbl.column("attempt_id"), attempt_id))
        return [
            FileEntry(
                path=r["path"],
                operator=r["operator"],
                state=r["state"],
                kind=r["kind"],
                key_group_start=r["key_group_start"],
                key_group_end=r["key_group_end"],
                created_by_checkpoint_id=r["created_by_checkpoint_id"],
                rows=r["rows"],
                bytes=r["bytes"],
                seq=r["seq"],
                checksum=r["checksum"],
            )
            for r in tbl.to_pylist()
        ]

    def manifest_table(self) -> pa.Table:
        """The whole manifest table (all attempts), for garbage collection and audits."""
        t = self._existing(C.MANIFEST_TABLE)
        return MANIFEST_SCHEMA.empty_table() if t is None else self._read(t, C.MANIFEST_TABLE)

    def ensure_tables(self) -> None:
        """Create the empty log and manifest tables of a new job root (idempotent)."""
        from deltalake import CommitProperties, write_deltalake

        tables = ((C.MANIFEST_TABLE, MANIFEST_SCHEMA, "flinkstate manifest"), (C.LOG_TABLE, LOG_SCHEMA, "flinkstate checkpoint log"))
        missing = [t for t in tables if self._table(t[0]) is None]
        for rel, _, _ in missing:
            err = missing_table_error(self.io, rel)  # never recreate a table of a root that holds data
            if err is not None:
                raise err
        for rel, schema, name in missing:
            try:
                write_deltalake(
                    self._uri(rel),
                    schema.empty_table(),
                    mode="error",
                    name=name,
                    description=f"{name} (flinkstate format v{C.FORMAT_VERSION})",
                    storage_options=self.io.delta_storage_options(),
                    commit_properties=CommitProperties(custom_metadata={C.DELTA_FORMAT_VERSION_KEY: str(C.FORMAT_VERSION)}),
                )
            except _delta_errors() as e:
                if self._table(rel) is None:  # not a lost race: a real failure
                    raise CorruptFileError(f"cannot create Delta table {self.io.url(rel)}: {e}") from e

    def append_manifest(self, checkpoint_id: int, attempt_id: str, entries: list[FileEntry]) -> None:
        """Record the files of an attempt (invisible until the log names the attempt)."""
        from deltalake import write_deltalake

        cols: dict[str, list[Any]] = {f.name: [] for f in MANIFEST_SCHEMA}
        for e in entries:
            cols["checkpoint_id"].append(checkpoint_id)
            cols["attempt_id"].append(attempt_id)
            for k in ("operator", "state", "kind", "path", "key_group_start", "key_group_end", "created_by_checkpoint_id", "seq", "rows", "bytes", "checksum"):
                cols[k].append(getattr(e, k))
        target = self._table(C.MANIFEST_TABLE)
        table = as_table_schema(pa.table(cols, schema=MANIFEST_SCHEMA), target)
        try:
            write_deltalake(target if target is not None else self._uri(C.MANIFEST_TABLE), table, mode="append",
                            storage_options=self.io.delta_storage_options())
        except _delta_errors() as e:
            denied = read_only_error(self.io, C.MANIFEST_TABLE, e)
            if denied is None:
                raise
            raise denied from e
        if target is not None:
            self._maybe_checkpoint(target)

    def commit_log(self, row: dict[str, Any] | list[dict[str, Any]], planned_version: int,
                   on_conflict: Callable[[int], bool] | None = None) -> int:
        """Append log events in one commit at `planned_version + 1`; returns the version committed.

        A concurrent commit at that version raises CommitConflictError unless `on_conflict` is
        given: it is called with the newest log version, raises CommitConflictError when the
        commits really conflict (e.g. the same checkpoint id), returns False when this commit
        already landed, and True to try again on top of the newest version.
        """
        from deltalake import CommitProperties, write_deltalake
        from deltalake.exceptions import CommitFailedError

        rows = row if isinstance(row, list) else [row]
        data = pa.Table.from_pylist(rows, schema=LOG_SCHEMA)
        version = planned_version
        for _ in range(_MAX_REBASES):
            table = self._table(C.LOG_TABLE, version)
            if table is None:
                raise CorruptFileError(f"the checkpoint log {self.io.url(C.LOG_TABLE)} is missing")
            try:
                write_deltalake(
                    table,
                    data,
                    mode="append",
                    storage_options=self.io.delta_storage_options(),
                    commit_properties=CommitProperties(max_commit_retries=0),
                )
            except CommitFailedError as e:
                denied = read_only_error(self.io, C.LOG_TABLE, e)
                if denied is not None:
                    raise denied from e
                conflict = CommitConflictError(
                    f"checkpoint {rows[0]['checkpoint_id']}: another writer committed to {self.io.url(C.LOG_TABLE)} "
                    f"after version {version} that this commit was planned against; nothing of this attempt is visible"
                )
                if on_conflict is None:
                    raise conflict from e
                newest = self.log_version()
                assert newest is not None
                if not on_conflict(newest):
                    return newest
                version = newest
                continue
            except _delta_errors() as e:
                denied = read_only_error(self.io, C.LOG_TABLE, e)
                if denied is None:
                    raise
                raise denied from e
            self._maybe_checkpoint(table)
            return version + 1
        raise CommitConflictError(f"checkpoint {rows[0]['checkpoint_id']}: the log {self.io.url(C.LOG_TABLE)} kept moving; gave up after {_MAX_REBASES} attempts")
