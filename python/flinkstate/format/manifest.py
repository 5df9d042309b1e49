"""The shared-state manifest and the checkpoint log, both Delta Lake tables (delta-rs).

- `_flinkstate/manifest`: one row per file a checkpoint uses, tagged with the attempt that
  wrote it. Rows of attempts that never completed are invisible (the log names the attempt).
- `_flinkstate/log`: one row per event: COMPLETED (the commit point of a checkpoint, one Delta
  commit made against the log version the writer planned with, never retried) and
  DISCARDED (a checkpoint subsumed or removed). Checkpoint metadata travels as JSON.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import threading
from collections import Counter, OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from flinkstate.core.errors import (
    CommitConflictError,
    CorruptFileError,
    FlinkStateError,
    StorageError,
)
from flinkstate.core.io import FileIO
from flinkstate.format import constants as C
from flinkstate.format.datafile import FileEntry
from flinkstate.format.deltacheck import (
    check_table_files,
    delta_log_error,
    is_checkpoint,
    log_listing,
    newest_checkpoint,
    remove_table_file,
    staged_adds,
    staged_leftovers,
    table_file_error,
)
from flinkstate.format.deltamaint import (
    housekeep,
    new_table_properties,
    no_hooks,
    only_on_read_version,
    vacuum_candidates,
)
from flinkstate.format.integrity import (
    check_commit_file,
    missing_table_error,
    read_only_error,
)
from flinkstate.format.logrows import (
    Collection,
    as_table_schema,
    conform_rows,
    parse_collection,
    parse_metadata,
)

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

    def unsupported_format(self) -> int | None:
        """The format version this release cannot read that the checkpoint was written in (None: a readable one)."""
        versions = (self.format_version, self.metadata.get("format_version", C.FORMAT_VERSION))
        return next((v for v in versions if v not in C.SUPPORTED_FORMAT_VERSIONS), None)


# Delta data files are immutable: their parsed content is cached by (table, file path)
_FILE_CACHE: OrderedDict[tuple[str, str], pa.Table] = OrderedDict()
_FILE_CACHE_SIZE = 4096
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


# parsed log rows per Delta data file: (completed records as (completed, discarded) views, ids discarded by that file)
_LOG_CACHE: OrderedDict[tuple[str, str], tuple[list[tuple[LogRecord, LogRecord]], frozenset[int]]] = OrderedDict()
# parsed COMPLETED rows per (log table, row): a compacted log file holds rows already parsed from the files it replaced
_ROW_CACHE: OrderedDict[tuple[Any, ...], tuple[LogRecord, LogRecord]] = OrderedDict()
_ROW_CACHE_SIZE = 1 << 17


def _parse_log_file(base: str, path: str, rows: pa.Table, log_url: str) -> tuple[list[tuple[LogRecord, LogRecord]], frozenset[int]]:
    """The COMPLETED records and DISCARDED ids of one log data file (parsed once: the file is immutable)."""
    key = (base, path)
    hit = _LOG_CACHE.get(key)
    if hit is not None:
        _LOG_CACHE.move_to_end(key)
        return hit
    event = rows.column("event")
    discarded = frozenset(rows.column("checkpoint_id").filter(pc.equal(event, C.EVENT_DISCARDED)).to_pylist())
    pairs = []
    for r in rows.filter(pc.equal(event, C.EVENT_COMPLETED)).to_pylist():
        row_key = (base, *r.values())  # the whole row: a log rewritten under the same attempt id is parsed again
        pair = _ROW_CACHE.get(row_key)
        if pair is None:
            meta, damage = parse_metadata(r, log_url)  # one damaged row never hides the others
            rec = LogRecord(
                checkpoint_id=int(r["checkpoint_id"]),
                attempt_id=r["attempt_id"],
                kind=r["kind"],
                status=C.STATUS_COMPLETED,
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
            pair = _ROW_CACHE[row_key] = (rec, dataclasses.replace(rec, status=C.STATUS_DISCARDED))
            if len(_ROW_CACHE) > _ROW_CACHE_SIZE:
                _ROW_CACHE.popitem(last=False)
        pairs.append(pair)
    hit = (pairs, discarded)
    _LOG_CACHE[key] = hit
    if len(_LOG_CACHE) > _FILE_CACHE_SIZE:
        _LOG_CACHE.popitem(last=False)
    return hit


def _only_new_commits(seen: dict[str, tuple[int, str]], listing: dict[str, tuple[int, str]]) -> bool:
    """True when a `_delta_log` listing only adds commits (and checkpoints) to what a kept table has read, and
    drops only entries before its newest checkpoint (Delta's expired-log cleanup)."""
    last = newest_checkpoint(listing)
    return all(n < last or listing.get(n) == v for n, v in seen.items()) and all(
        n in seen or n < last or (n.endswith(".json") and n[:-5].isdigit()) or is_checkpoint(n) for n in listing)


def _check_protocol(io: FileIO, rel: str, table: Any) -> None:
    """CorruptFileError unless the table is plain Delta (reader version 1): the catalog reads its Parquet files
    itself (cached per immutable file), which deletion vectors or column mapping would make wrong."""
    proto = table.protocol()
    if proto.min_reader_version > 1 or proto.reader_features:
        what = "checkpoint log" if rel == C.LOG_TABLE else "shared-state manifest"
        raise CorruptFileError(
            f"the {what} {io.url(rel)} needs Delta reader version {proto.min_reader_version} "
            f"(features {sorted(proto.reader_features or [])}); flinkstate's tables are plain Delta (reader version 1), "
            "another writer upgraded this one: refusing to read or write it, nothing was changed")


class DeltaCatalog:
    """Reads and commits the manifest and log tables of one job root.

    It keeps one DeltaTable per table and brings it up to date incrementally (only the new
    commits are read), and caches what immutable Delta data files and log versions parse to.
    """

    def __init__(self, io: FileIO) -> None:
        self.io = io
        self.table_opens: Counter[str] = Counter()  # DeltaTable loads or refreshes per table (tests and benches read it)
        # rel -> (kept DeltaTable, its _delta_log as listed, its version when listed: a commit through it moves it on)
        self._tables: dict[str, tuple[Any, dict[str, tuple[int, str]], int]] = {}
        self._lock = threading.RLock()  # one refresh or commit through a kept DeltaTable at a time
        self._records: OrderedDict[int, list[LogRecord]] = OrderedDict()  # log version -> its records

    def _uri(self, rel: str) -> str:
        return self.io.delta_uri(rel)

    def _open(self, rel: str, version: int | None) -> Any:
        """A new DeltaTable (None when the table doesn't exist); a damaged `_delta_log` raises CorruptFileError naming its file."""
        from deltalake import DeltaTable
        from deltalake.exceptions import DeltaError, TableNotFoundError

        try:
            return DeltaTable(self._uri(rel), version=version, storage_options=self.io.delta_storage_options())
        except TableNotFoundError:
            return None
        except DeltaError as e:  # a damaged _delta_log: name the file, never treat the table as empty
            raise delta_log_error(self.io, rel, e) from e

    def _table(self, rel: str, version: int | None = None) -> Any:
        """The table at its newest version (this catalog's kept DeltaTable, refreshed), or a new one at `version`.

        The kept table reads only new commits; it is loaded afresh when a file of `_delta_log` it has read
        changed or vanished (a damaged, rolled back or replaced log is never served from memory).
        """
        from deltalake.exceptions import DeltaError, TableNotFoundError

        self.table_opens[rel] += 1
        with self._lock:
            listing = log_listing(self.io, rel)
            kept = self._tables.get(rel)
            table = None
            kept_table = None
            if kept is not None and kept[1] == listing and int(kept[0].version()) == kept[2]:
                table = kept_table = kept[0]  # nothing in `_delta_log` changed since it was read: the kept table is current
            elif kept is not None and _only_new_commits(kept[1], listing):
                table = kept[0]
                try:
                    table.update_incremental()
                except (TableNotFoundError, DeltaError):
                    table = None  # a fresh load names what is wrong
            if table is None:
                self._tables.pop(rel, None)
                table = self._open(rel, None)
                if table is None:
                    return None
            if table is not kept_table:
                _check_protocol(self.io, rel, table)
            current = int(table.version())
            self._tables[rel] = (table, listing, current if f"{current:020d}.json" in listing else -1)
        if version is not None and version != current:
            cause: CorruptFileError | None = None
            try:
                old = self._open(rel, version)
            except CorruptFileError as e:
                old, cause = None, e
            if old is not None or version > current:
                if cause is not None:
                    raise cause
                return old
            raise CommitConflictError(
                f"version {version} of {self.io.url(rel)} is no longer kept (log entries older than "
                f"delta.logRetentionDuration go after a Delta checkpoint) and the table is at version {current}: "
                "others committed since this write was planned against it; plan it again") from cause
        commit = listing.get(f"{current:020d}.json")
        if commit is None or commit[0] == 0:
            check_commit_file(self.io, rel, current)  # a lost (empty) commit raises
        return table

    def _existing(self, rel: str, version: int | None = None) -> Any:
        """A table that must exist in a root holding data (None only in a new, empty root)."""
        table = self._table(rel, version)
        if table is None:
            err = missing_table_error(self.io, rel)
            if err is not None:
                table = self._table(rel, version)  # a concurrent first writer of a new root may have created it since
                if table is None:
                    raise err
        return table

    def _read(self, table: Any, rel: str, checkpoint_id: int | None = None, columns: list[str] | None = None) -> pa.Table:
        """Rows of a Delta table (`_data_files`); a table file gone, resized or unreadable raises CorruptFileError naming it."""
        parts = self._data_files(table, rel, checkpoint_id)
        schema = LOG_SCHEMA if rel == C.LOG_TABLE else MANIFEST_SCHEMA
        out = pa.concat_tables([t for _, t in parts]) if parts else schema.empty_table()
        if checkpoint_id is not None:
            out = out.filter(pc.equal(out.column("checkpoint_id"), checkpoint_id))
        return out.select(columns) if columns else out

    def _data_files(self, table: Any, rel: str, checkpoint_id: int | None = None) -> list[tuple[str, pa.Table]]:
        """(path, rows in the current schema) of each data file of a table version, only files whose stats may hold
        `checkpoint_id` when given. Files are checked against a fresh listing, then served from a per-file cache:
        the cost does not grow with the number of commits already read."""
        from deltalake.exceptions import DeltaError

        try:
            actions = pa.table(table.get_add_actions(flatten=True))
            paths = actions.column("path").to_pylist()
            sizes = actions.column("size_bytes").to_pylist()
            if checkpoint_id is not None and "min.checkpoint_id" in actions.column_names and paths:
                lo, hi = actions.column("min.checkpoint_id"), actions.column("max.checkpoint_id")
                may = pc.fill_null(pc.and_(pc.less_equal(lo, checkpoint_id), pc.greater_equal(hi, checkpoint_id)), True)
                keep = [i for i, m in enumerate(may.to_pylist()) if m]
                paths, sizes = [paths[i] for i in keep], [sizes[i] for i in keep]
            check_table_files(self.io, rel, paths, sizes)  # the cache must not serve a file that is gone
            base = self._uri(rel)
            return [(p, self._data_file(rel, base, p)) for p in paths]
        except CorruptFileError:
            raise
        except DeltaError as e:
            raise delta_log_error(self.io, rel, e) from e
        except (OSError, pa.ArrowInvalid) as e:
            raise table_file_error(self.io, rel, pa.table(table.get_add_actions(flatten=True)).column("path").to_pylist(), e) from e

    def _data_file(self, rel: str, base: str, path: str) -> pa.Table:
        """One Delta data file's rows in the current schema (cached: Delta data files are immutable)."""
        import pyarrow.parquet as pq

        key = (base, path)
        t = _FILE_CACHE.get(key)
        if t is not None:
            _FILE_CACHE.move_to_end(key)
            return t
        if self.io.scheme == "s3":
            t = _read_s3(self.io.fs, f"{base.rstrip('/')}/{path}")
        else:
            t = pq.read_table(os.path.join(base, path))
        t = conform_rows(t, LOG_SCHEMA if rel == C.LOG_TABLE else MANIFEST_SCHEMA)
        _FILE_CACHE[key] = t
        if len(_FILE_CACHE) > _FILE_CACHE_SIZE:
            _FILE_CACHE.popitem(last=False)
        return t

    def _housekeep(self, rel: str, table: Any) -> None:
        """`deltamaint.housekeep` on a table a commit of this catalog just went through."""
        from deltalake import DeltaTable

        housekeep(table, lambda path: remove_table_file(self.io, rel, path),
                  lambda: DeltaTable(self._uri(rel), storage_options=self.io.delta_storage_options()),
                  lambda: as_table_schema(self._read(table, rel), table))

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
        files = self._data_files(t, C.LOG_TABLE)  # checked against storage on every call, parsed once per file
        at = int(t.version())
        with self._lock:
            cached = self._records.get(at)
        if cached is None:
            parsed = [_parse_log_file(self._uri(C.LOG_TABLE), p, rows, self.io.url(C.LOG_TABLE)) for p, rows in files]
            discarded = set().union(*(d for _, d in parsed))
            cached = [gone if done.checkpoint_id in discarded else done for pairs, _ in parsed for done, gone in pairs]
            cached.sort(key=lambda r: r.checkpoint_id)
            with self._lock:
                self._records[at] = cached
                while len(self._records) > 4:
                    self._records.popitem(last=False)
        return list(cached)

    def log_events(self, version: int | None = None) -> pa.Table:
        """The raw log rows (checkpoint_id, attempt_id, event, files, bytes) at a log version (default the newest),
        for checks that must not trust parsing."""
        t = self._existing(C.LOG_TABLE, version)
        cols = ["checkpoint_id", "attempt_id", "event", "files", "bytes"]
        return LOG_SCHEMA.empty_table().select(cols) if t is None else self._read(t, C.LOG_TABLE, columns=cols)

    def collections(self, version: int | None = None) -> list[Collection]:
        """The garbage collections the log announces (COLLECTING rows) at a log version (default the newest)."""
        t = self._existing(C.LOG_TABLE, version)
        if t is None:
            return []
        rows = self._read(t, C.LOG_TABLE, columns=["attempt_id", "event", "metadata"])
        out = []
        for r in rows.filter(pc.equal(rows.column("event"), C.EVENT_COLLECTING)).to_pylist():
            try:
                out.append(parse_collection(r))
            except (KeyError, TypeError, ValueError) as e:
                raise CorruptFileError(f"the checkpoint log {self.io.url(C.LOG_TABLE)} is damaged: the {C.EVENT_COLLECTING} row of "
                                       f"garbage collection {r['attempt_id']} does not say what it deletes ({type(e).__name__}: {e})") from e
        return out

    def check_files(self, rel: str) -> None:
        """CorruptFileError naming every data file the current version of a Delta table references
        that storage no longer holds at its recorded size (a fresh listing, never a cache)."""
        t = self._existing(rel)
        if t is None:
            return
        actions = pa.table(t.get_add_actions(flatten=True))
        check_table_files(self.io, rel, actions.column("path").to_pylist(), actions.column("size_bytes").to_pylist())

    def vacuum(self, rel: str, retention: dt.timedelta | None = None, *, full: bool = False) -> list[str]:
        """Delete the data files of a table Delta's VACUUM would (`deltamaint.vacuum_candidates`): files removed
        longer than `retention` ago (default the table's deletedFileRetentionDuration), read from the log;
        with `full`, also files no version references, by a listing. Returns root-relative paths deleted."""
        with self._lock:
            t = self._existing(rel)
            if t is None:
                return []
            try:
                candidates = vacuum_candidates(t, retention, full=full)
            except _delta_errors() as e:
                raise delta_log_error(self.io, rel, e) from e
        return [f"{rel}/{p}" for p in candidates if remove_table_file(self.io, rel, p)]

    def staged_leftovers(self, older_than: dt.timedelta | None = None) -> list[tuple[str, float]]:
        """(root-relative path, modification time in epoch s) of the staging files killed writes left in both tables
        (`_delta_log/<version>.json#1` and the like), those last modified more than `older_than` ago when given."""
        import time

        out = [(f"{rel}/{p}", t) for rel in (C.LOG_TABLE, C.MANIFEST_TABLE) for p, t in staged_leftovers(self.io, rel)]
        if older_than is None:
            return out
        cutoff = time.time() - older_than.total_seconds()
        return [(p, t) for p, t in out if t < cutoff]

    def remove_staged(self, path: str) -> bool:
        """Delete one staging file `staged_leftovers` listed (root-relative); True when it was there."""
        rel = next(r for r in (C.LOG_TABLE, C.MANIFEST_TABLE) if path.startswith(r + "/"))
        return remove_table_file(self.io, rel, path[len(rel) + 1:])

    def unreferenced_rows(self, rel: str) -> list[tuple[str, pa.Table]]:
        """(path relative to the table, rows) of each data file in a table's folder that its current version neither uses
        nor removed: a write that lost a commit race, a writer killed before its commit, or a `_delta_log` commit file lost
        (not those of writers killed inside their commit: their staged commit files name them)."""
        with self._lock:
            t = self._existing(rel)
            if t is None:
                return []
            try:
                every = set(vacuum_candidates(t, dt.timedelta(0), full=True))
                removed = set(vacuum_candidates(t, dt.timedelta(0), full=False))
            except _delta_errors() as e:
                raise delta_log_error(self.io, rel, e) from e
        base = self._uri(rel)
        killed = staged_adds(self.io, rel)  # added only by a commit file its killed writer never linked: no lost commit
        return [(p, self._data_file(rel, base, p)) for p in sorted(every - removed - killed) if p.endswith(".parquet")]

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

    def prune_manifest(self, attempt_ids: list[str]) -> None:
        """Delete the manifest rows of these attempts (discarded checkpoints nothing uses any more) in one Delta
        commit, so the manifest holds the retained checkpoints only (best effort: a concurrent commit skips it)."""
        ids = sorted({a for a in attempt_ids if a.isalnum()})  # attempt ids are uuid hex: safe in a SQL literal
        if not ids:
            return
        with self._lock:
            table = self._table(C.MANIFEST_TABLE)
            if table is None:
                return
            try:
                table.delete(predicate="attempt_id IN (" + ", ".join(f"'{a}'" for a in ids) + ")",
                             post_commithook_properties=no_hooks(), commit_properties=only_on_read_version())
            except _delta_errors() as e:
                denied = read_only_error(self.io, C.MANIFEST_TABLE, e)
                if denied is not None:
                    raise denied from e
                return  # a concurrent manifest commit: the rows go at the next collection
            self._housekeep(C.MANIFEST_TABLE, table)

    def ensure_tables(self) -> None:
        """Create the empty log and manifest tables of a new job root (idempotent)."""
        from deltalake import CommitProperties, write_deltalake

        tables = ((C.MANIFEST_TABLE, MANIFEST_SCHEMA, "flinkstate manifest"), (C.LOG_TABLE, LOG_SCHEMA, "flinkstate checkpoint log"))
        missing = [t for t in tables if self._table(t[0]) is None]
        for rel, _, _ in missing:
            err = missing_table_error(self.io, rel)  # never recreate a table of a root that holds data
            if err is not None and self._table(rel) is None:  # (data written by the concurrent first writer that created it)
                raise err
        for rel, schema, name in missing:
            try:
                write_deltalake(
                    self._uri(rel),
                    schema.empty_table(),
                    mode="error",
                    name=name,
                    description=f"{name} (flinkstate format v{C.FORMAT_VERSION})",
                    configuration=new_table_properties(),
                    storage_options=self.io.delta_storage_options(),
                    commit_properties=CommitProperties(custom_metadata={C.DELTA_FORMAT_VERSION_KEY: str(C.FORMAT_VERSION)},
                                                       max_commit_retries=0),  # a lost creation race fails, never a second create commit
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
        from deltalake.exceptions import CommitFailedError

        failure: BaseException | None = None
        with self._lock:  # the kept table moves to the new version: no refresh of it in between
            for _ in range(_MAX_REBASES):
                target = self._table(C.MANIFEST_TABLE)
                table = as_table_schema(pa.table(cols, schema=MANIFEST_SCHEMA), target)
                try:
                    write_deltalake(target if target is not None else self._uri(C.MANIFEST_TABLE), table, mode="append",
                                    storage_options=self.io.delta_storage_options(), post_commithook_properties=no_hooks())
                except CommitFailedError as e:  # a concurrent prune or compaction of the manifest: an append just goes again
                    denied = read_only_error(self.io, C.MANIFEST_TABLE, e)
                    if denied is not None:
                        raise denied from e
                    failure = e
                    continue
                except (*_delta_errors(), OSError) as e:
                    raise self._write_error(C.MANIFEST_TABLE, target, f"checkpoint {checkpoint_id}", e) from e
                if target is not None:
                    self._housekeep(C.MANIFEST_TABLE, target)
                return
        raise CommitConflictError(f"checkpoint {checkpoint_id}: the manifest {self.io.url(C.MANIFEST_TABLE)} kept changing under "
                                  f"concurrent commits ({_MAX_REBASES} tries); nothing of this attempt is visible") from failure

    def _write_error(self, rel: str, table: Any, what: str, e: BaseException) -> FlinkStateError:
        """The typed error for a failed Delta write that is not a lost race: read-only store, or StorageError naming
        the table and the version the write was made on."""
        denied = read_only_error(self.io, rel, e)
        if denied is not None:
            return denied
        version = "none (new table)" if table is None else str(int(table.version()))
        first = (str(e).strip().splitlines() or [type(e).__name__])[0][:300]
        return StorageError(f"{what}: writing the Delta table {self.io.url(rel)} on its version {version} failed "
                            f"({type(e).__name__}: {first}); nothing of this write is visible")

    def commit_log(self, row: dict[str, Any] | list[dict[str, Any]], planned_version: int,
                   on_conflict: Callable[[int], bool] | None = None) -> int:
        """Append log events in one commit at `planned_version + 1`; returns the version committed.

        A concurrent commit at that version raises CommitConflictError unless `on_conflict` is
        given: it is called with the newest log version, raises CommitConflictError when the
        commits really conflict (e.g. the same checkpoint id), returns False when this commit
        already landed, and True to try again on top of the newest version.
        """
        rows = row if isinstance(row, list) else [row]
        data = pa.Table.from_pylist(rows, schema=LOG_SCHEMA)
        with self._lock:  # the kept log table must stay at `version` until the commit is made against it
            return self._commit_log(rows, data, planned_version, on_conflict)

    def _commit_log(self, rows: list[dict[str, Any]], data: pa.Table, version: int,
                    on_conflict: Callable[[int], bool] | None) -> int:
        from deltalake import CommitProperties, write_deltalake
        from deltalake.exceptions import CommitFailedError

        for _ in range(_MAX_REBASES):
            table = self._table(C.LOG_TABLE)  # the newest version: a commit planned on an older one conflicts anyway
            if table is None:
                raise CorruptFileError(f"the checkpoint log {self.io.url(C.LOG_TABLE)} is missing")
            failure: BaseException | None = None
            if int(table.version()) == version:
                try:
                    write_deltalake(
                        table,
                        data,
                        mode="append",
                        storage_options=self.io.delta_storage_options(),
                        commit_properties=CommitProperties(max_commit_retries=0),
                        post_commithook_properties=no_hooks(),
                    )
                except CommitFailedError as e:  # another process committed this version first
                    denied = read_only_error(self.io, C.LOG_TABLE, e)
                    if denied is not None:
                        raise denied from e
                    failure = e
                except (*_delta_errors(), OSError) as e:
                    raise self._write_error(C.LOG_TABLE, table, f"checkpoint {rows[0]['checkpoint_id']}", e) from e
                else:
                    self._housekeep(C.LOG_TABLE, table)  # the commit landed: housekeeping never raises
                    return version + 1
            if on_conflict is None:
                raise CommitConflictError(
                    f"checkpoint {rows[0]['checkpoint_id']}: another writer committed to {self.io.url(C.LOG_TABLE)} "
                    f"after version {version} that this commit was planned against; nothing of this attempt is visible"
                ) from failure
            newest = self.log_version()
            assert newest is not None
            if not on_conflict(newest):
                return newest
            version = newest
        raise CommitConflictError(f"checkpoint {rows[0]['checkpoint_id']}: the log {self.io.url(C.LOG_TABLE)} kept moving; gave up after {_MAX_REBASES} attempts")
