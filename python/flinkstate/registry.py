"""Shared-state registry (FLINK-24611 semantics): discard checkpoints, delete unused shared files.

A shared file lives while any retained checkpoint's manifest uses it. When checkpoints are
discarded, files whose last use is gone are deleted. Files of attempts that never completed
stay until a later checkpoint completes; savepoints own their files and are never touched.
"""

from __future__ import annotations

import datetime as dt
import re
import threading
import weakref
from collections import Counter
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from flinkstate.errors import CorruptFileError, InvalidArgumentError
from flinkstate.format import constants as C
from flinkstate.integrity import check_writable

if TYPE_CHECKING:
    from flinkstate.checkpoint_writer import CheckpointWriter

if TYPE_CHECKING:
    from flinkstate.format.manifest import LogRecord
    from flinkstate.store import CheckpointStore

__all__ = [
    "discard_checkpoints", "collect_garbage", "check_collectable", "collect_orphans", "ORPHAN_RETENTION",
    "Pin", "pin", "pinned", "track_writer", "untrack_writer",
]

# Pending work of this process, per job root: checkpoints pinned by pending snapshots and the
# open writers (whose carried-over and new files are in use). Garbage collection holds the
# root's lock while it decides and deletes, so a pin taken before it starts is always seen.
_LOCK = threading.Lock()
_GC_LOCKS: dict[str, threading.RLock] = {}
_PINS: dict[str, Counter[int]] = {}
_PINNED_PATHS: dict[str, Counter[str]] = {}
_WRITERS: dict[str, weakref.WeakValueDictionary[int, Any]] = {}


def _gc_lock(root: str) -> threading.RLock:
    with _LOCK:
        return _GC_LOCKS.setdefault(root, threading.RLock())


class Pin:
    """A pending snapshot's hold on the checkpoint it builds on; `release()` when it completes or aborts."""

    def __init__(self, root: str, checkpoint_id: int | None, paths: tuple[str, ...] = ()) -> None:
        self.root = root
        self.checkpoint_id = checkpoint_id
        self.paths = paths
        self._released = False

    def release(self) -> None:
        """Let garbage collection delete what only this pin kept (idempotent)."""
        if self._released:
            return
        self._released = True
        with _LOCK:
            for key, table in ((self.checkpoint_id, _PINS), *((p, _PINNED_PATHS) for p in self.paths)):
                c = table.get(self.root)
                if key is None or c is None:
                    continue
                c[key] -= 1
                if c[key] <= 0:
                    del c[key]

    def __enter__(self) -> Pin:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()


def pin(store: CheckpointStore, checkpoint_id: int | None, paths: list[str] | None = None) -> Pin:
    """Keep a checkpoint's files (and the right to build on it) even if it is discarded meanwhile,
    and `paths` (files of aborted attempts a pending snapshot reuses)."""
    p = Pin(store.root, checkpoint_id, tuple(paths or ()))
    with _gc_lock(store.root), _LOCK:  # waits for a collection in progress to finish
        if checkpoint_id is not None:
            _PINS.setdefault(store.root, Counter())[checkpoint_id] += 1
        for path in p.paths:
            _PINNED_PATHS.setdefault(store.root, Counter())[path] += 1
    return p


def pinned(store: CheckpointStore) -> set[int]:
    """Checkpoint ids pinned by pending snapshots of this process."""
    with _LOCK:
        return {cid for cid, n in _PINS.get(store.root, Counter()).items() if n > 0}


def _pinned_paths(root: str) -> set[str]:
    with _LOCK:
        return {p for p, n in _PINNED_PATHS.get(root, Counter()).items() if n > 0}


def track_writer(writer: CheckpointWriter) -> None:
    """An open CheckpointWriter: the files it references stay until it commits or aborts."""
    with _gc_lock(writer.store.root), _LOCK:
        _WRITERS.setdefault(writer.store.root, weakref.WeakValueDictionary())[id(writer)] = writer


def untrack_writer(writer: CheckpointWriter) -> None:
    """The writer committed or aborted."""
    with _LOCK:
        ws = _WRITERS.get(writer.store.root)
        if ws is not None:
            ws.pop(id(writer), None)


def _open_writer_ids(root: str) -> set[int]:
    """Checkpoint ids of this process's open writers (a savepoint attempt may still commit)."""
    with _LOCK:
        return {w.checkpoint_id for w in _WRITERS.get(root, {}).values()}


def _in_use_by_writers(root: str) -> tuple[set[str], set[int]]:
    """Paths open writers reference or wrote, and the ids of their base checkpoints."""
    with _LOCK:
        writers = list(_WRITERS.get(root, {}).values())
    paths: set[str] = set()
    bases: set[int] = set()
    for w in writers:
        if w.base is not None:
            bases.add(w.base.checkpoint_id)
        paths.update(e.path for e in list(w._entries))
        paths.update(list(w._new_paths))
    return paths, bases


_SAVEPOINT_DIR = re.compile(rf"^{C.SAVEPOINTS_DIR}/sp-(\d{{10}})/")
# Delta's default VACUUM retention: files a running commit may still reference are younger
ORPHAN_RETENTION = dt.timedelta(hours=168)
_CKID = re.compile(r"/(?P<created>\d{10})-[a-z-]+-kg\d+-\d+-[0-9a-f]+\.parquet$")


def discard_checkpoints(store: CheckpointStore, checkpoint_ids: list[int]) -> list[str]:
    """Mark checkpoints discarded in one log commit, then delete files nothing retained uses."""
    catalog = store.catalog
    version = catalog.log_version()
    if version is None:
        raise InvalidArgumentError(f"no checkpoints at {store.root}")
    check_collectable(store)  # refuse before the log changes, not halfway through
    check_writable(store.io)
    recs = {r.checkpoint_id: r for r in catalog.records(version) if r.status == C.STATUS_COMPLETED}
    rows = []
    now = dt.datetime.now(dt.timezone.utc)
    for cid in checkpoint_ids:
        r = recs.get(cid)
        if r is None:
            raise InvalidArgumentError(f"checkpoint {cid} is not a retained checkpoint at {store.root}; retained: {sorted(recs)}")
        if r.kind == C.SAVEPOINT:
            raise InvalidArgumentError(f"checkpoint {cid} is a savepoint: savepoints own their files and are never discarded by the registry")
        rows.append({
            "checkpoint_id": cid, "attempt_id": r.attempt_id, "event": C.EVENT_DISCARDED, "kind": r.kind,
            "event_time": now, "created_at": r.created_at, "max_parallelism": r.max_parallelism,
            "format_version": r.format_version, "base_checkpoint_id": r.base_checkpoint_id,
            "files": r.files, "rows": r.rows, "bytes": r.bytes, "metadata": "{}",
        })
    if rows:
        # a discard conflicts with nothing: checkpoints completing meanwhile keep their own ids
        catalog.commit_log(rows, version, lambda newest: True)
    return collect_garbage(store)


def collect_garbage(store: CheckpointStore) -> list[str]:
    """Delete shared files that no retained checkpoint uses and no running attempt may still commit."""
    with _gc_lock(store.root):
        return _collect(store)


def _collect(store: CheckpointStore) -> list[str]:
    """FLINK-24611's rule: a shared file goes when its last use is at or below the newest completed
    checkpoint and no retained checkpoint, pinned checkpoint or open writer uses it.

    A file's last use is the newest checkpoint or attempt that referenced it (the manifest,
    invisible attempts included) or created it (its name). Only checkpoints move the line:
    savepoints own their files and complete independently, so they never make an attempt's
    files collectable, and files of a newer attempt (pending, or aborted and reusable by the
    backend) stay until a later checkpoint completes.
    """
    catalog = store.catalog
    live = check_collectable(store)
    all_recs = catalog.records()
    line = max((r.checkpoint_id for r in all_recs if r.kind == C.CHECKPOINT), default=None)
    if line is None:
        return []
    in_use, bases = _in_use_by_writers(store.root)
    pins = pinned(store) | bases
    for r in all_recs:  # discarded checkpoints a pending snapshot builds on (retained ones are in `live`)
        if r.status != C.STATUS_COMPLETED and r.checkpoint_id in pins:
            live.update(e.path for e in catalog.manifest(r.checkpoint_id, r.attempt_id))
    live |= in_use | _pinned_paths(store.root)
    manifest = catalog.manifest_table().select(["attempt_id", "path", "checkpoint_id"])
    deleted = []
    for path in _collectable(store, manifest, line, live):
        if store.io.delete(path):
            deleted.append(path)
    # the manifest keeps retained checkpoints only: rows of discarded ones nothing pins go (it stops growing with history)
    present = set(pc.unique(manifest.column("attempt_id")).to_pylist())
    catalog.prune_manifest([r.attempt_id for r in all_recs
                            if r.status != C.STATUS_COMPLETED and r.checkpoint_id not in pins and r.attempt_id in present])
    return deleted + _orphans(store, all_recs, None)


def _collectable(store: CheckpointStore, manifest: pa.Table, line: int, live: set[str]) -> list[str]:
    """Shared files whose last use (newest manifest row, or the id in the name of a listed file) is at or
    below `line` and that nothing live uses: Arrow set operations over the manifest and the listing."""
    listed = pa.array(store.io.list_files(C.SHARED_DIR), pa.string())
    created = pc.struct_field(pc.extract_regex(pc.binary_join_element_wise("/", listed, ""), _CKID.pattern), [0])
    named = pa.table({"path": listed, "checkpoint_id": pc.cast(created, pa.int64())}).filter(pc.is_valid(created))
    uses = pa.concat_tables([named, manifest.select(["path", "checkpoint_id"]).cast(named.schema)])
    last = uses.group_by("path").aggregate([("checkpoint_id", "max")])
    paths, used = last.column("path"), last.column("checkpoint_id_max")
    keep = pc.and_(pc.and_(pc.less_equal(used, line), pc.starts_with(paths, C.SHARED_DIR + "/")),  # savepoint files are their savepoint's
                   pc.invert(pc.is_in(paths, value_set=pa.array(list(live), pa.string()))))
    return sorted(paths.filter(keep).to_pylist())


def collect_orphans(store: CheckpointStore, retention: dt.timedelta = ORPHAN_RETENTION) -> list[str]:
    """Delete what no checkpoint can ever use (refused, like GC, unless log and manifest read in full)."""
    if not isinstance(retention, dt.timedelta) or retention < dt.timedelta(0):
        raise InvalidArgumentError(f"retention must be a non-negative datetime.timedelta, got {retention!r}")
    check_collectable(store)
    check_writable(store.io)
    return _orphans(store, store.catalog.records(), retention)


def _orphans(store: CheckpointStore, records: list[LogRecord], retention: dt.timedelta | None) -> list[str]:
    """Files of savepoint attempts that can no longer commit (an id at or below the newest committed
    one that no savepoint holds), and data files of the Delta tables, by Delta's VACUUM rule.

    retention None (every garbage collection): files the tables removed (compaction, manifest pruning) longer
    than their `delta.deletedFileRetentionDuration` ago, read from the Delta log, no listing. Given
    (`collect_orphans`): also files no version ever referenced (a lost commit race, a killed writer), last
    modified longer than `retention` ago, by listing the table folders (a running commit's file is younger).
    """
    deleted = []
    latest = max((r.checkpoint_id for r in records), default=None)
    committed = {r.checkpoint_id for r in records}
    # kept: committed savepoints, and open attempts of this process whose id is still free to commit
    owned = {r.checkpoint_id for r in records if r.kind == C.SAVEPOINT} | (_open_writer_ids(store.root) - committed)
    if latest is not None:
        for path in store.io.list_files(C.SAVEPOINTS_DIR):
            m = _SAVEPOINT_DIR.match(path)
            if m and int(m.group(1)) <= latest and int(m.group(1)) not in owned and store.io.delete(path):
                deleted.append(path)
    for rel in (C.LOG_TABLE, C.MANIFEST_TABLE):
        deleted += store.catalog.vacuum(rel, retention, full=retention is not None)
    return deleted


def check_collectable(store: CheckpointStore) -> set[str]:
    """Every path the log says a retained checkpoint or savepoint uses; CorruptFileError (GC refused)
    unless the log and the manifest can be read in full and agree on every retained checkpoint."""
    catalog = store.catalog
    try:
        catalog.check_files(C.LOG_TABLE)
        catalog.check_files(C.MANIFEST_TABLE)
        recs = catalog.records()
        # retained = what the raw log rows say, whatever parsing made of them
        events = catalog.log_events()
        discarded = events.filter(pc.equal(events.column("event"), C.EVENT_DISCARDED)).column("checkpoint_id")
        completed = events.filter(pc.equal(events.column("event"), C.EVENT_COMPLETED))
        kept = completed.filter(pc.invert(pc.is_in(completed.column("checkpoint_id"), value_set=discarded.combine_chunks())))
        retained = {e["attempt_id"]: e for e in kept.to_pylist()}  # only the retained rows reach Python
        parsed = {r.attempt_id for r in recs if r.status == C.STATUS_COMPLETED}
        unparsed = sorted(e["checkpoint_id"] for aid, e in retained.items() if aid not in parsed)
        if unparsed:
            raise CorruptFileError(f"checkpoints {unparsed} are in the log {store.io.url(C.LOG_TABLE)} but cannot be read")
        manifest = catalog.manifest_table().select(["attempt_id", "path", "bytes"])  # one read for every checkpoint
        manifest = manifest.filter(pc.is_in(manifest.column("attempt_id"), value_set=pa.array(list(retained), pa.string())))
        listed = {g["attempt_id"]: (g["bytes_count"], g["bytes_sum"]) for g in
                  manifest.group_by("attempt_id").aggregate([("bytes", "count"), ("bytes", "sum")]).to_pylist()}
        for aid, r in retained.items():
            n, size = listed.get(aid, (0, 0))
            if (n, size or 0) != (r["files"], r["bytes"]):
                raise CorruptFileError(
                    f"checkpoint {r['checkpoint_id']}: the log records {r['files']} files ({r['bytes']} bytes) but the manifest "
                    f"{store.io.url(C.MANIFEST_TABLE)} lists {n} ({size or 0} bytes)"
                )
        live = set(manifest.column("path").to_pylist())
    except CorruptFileError as e:
        raise CorruptFileError(f"garbage collection refused at {store.root}, nothing deleted: {e}") from e
    except (OSError, ValueError, _delta_error()) as e:  # a table file gone or unreadable mid-read
        raise CorruptFileError(
            f"garbage collection refused at {store.root}, nothing deleted: the checkpoint log or manifest cannot be fully read: {e}"
        ) from e
    return live


def _delta_error() -> type[Exception]:
    from deltalake.exceptions import DeltaError

    return DeltaError
