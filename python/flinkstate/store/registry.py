"""Shared-state registry (FLINK-24611 semantics) for any number of processes: discard checkpoints, delete unused files.

A shared file lives while any retained checkpoint's manifest uses it. When checkpoints are discarded, files whose
last use is gone are deleted. Files of attempts that never completed stay until a later checkpoint completes;
savepoints own their files and are never touched.

Every deletion is decided against one version `v` of the log and announced there before any file goes: a
COLLECTING row committed at exactly `v + 1`, in the same commit as the DISCARDED rows of a discard. When a
checkpoint completed after `v`, the collection is planned again. A commit landing after the announcement re-checks
its files against it (`CheckpointWriter._rebase`), so no interleaving of commits and collections, in one process
or many, deletes a file a committed checkpoint references. Checkpoints pinned by pending snapshots of this process
and the files of its open writers are kept, and the announcement names them so those writers can still commit.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import threading
import uuid
import weakref
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import pyarrow as pa
import pyarrow.compute as pc

from flinkstate.core.errors import (
    CheckpointNotFoundError,
    CommitConflictError,
    CorruptFileError,
    InvalidArgumentError,
)
from flinkstate.format import constants as C
from flinkstate.format.integrity import check_writable

if TYPE_CHECKING:
    from flinkstate.format.manifest import LogRecord
    from flinkstate.store.root import StoreRoot

__all__ = [
    "discard_checkpoints", "collect_garbage", "check_collectable", "collect_orphans", "ORPHAN_RETENTION",
    "Pin", "pin", "pinned", "track_writer", "untrack_writer", "OpenWriter",
]

# Pending work of this process, per job root: checkpoints pinned by pending snapshots and the
# open writers (whose carried-over and new files are in use). Garbage collection holds the
# root's lock while it decides and deletes, so a pin taken before it starts is always seen.
_LOCK = threading.Lock()
_GC_LOCKS: dict[str, threading.RLock] = {}
_PINS: dict[str, Counter[int]] = {}
_PINNED_PATHS: dict[str, Counter[str]] = {}
_WRITERS: dict[str, weakref.WeakValueDictionary[int, Any]] = {}

# a collection planned again this many times (checkpoints kept completing meanwhile) gives up: CommitConflictError
_MAX_PLANS = 50


class OpenWriter(Protocol):
    """What garbage collection asks of an open writer (a `CheckpointWriter`): its root, id, base and files."""

    store: StoreRoot
    checkpoint_id: int
    base: LogRecord | None

    def referenced_paths(self) -> list[str]:
        """Paths it carries over from its base or wrote itself."""
        ...


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


def pin(store: StoreRoot, checkpoint_id: int | None, paths: list[str] | None = None) -> Pin:
    """Keep a checkpoint's files (and the right to build on it) even if it is discarded meanwhile,
    and `paths` (files of aborted attempts a pending snapshot reuses)."""
    p = Pin(store.root, checkpoint_id, tuple(paths or ()))
    with _gc_lock(store.root), _LOCK:  # waits for a collection in progress to finish
        if checkpoint_id is not None:
            _PINS.setdefault(store.root, Counter())[checkpoint_id] += 1
        for path in p.paths:
            _PINNED_PATHS.setdefault(store.root, Counter())[path] += 1
    return p


def pinned(store: StoreRoot) -> set[int]:
    """Checkpoint ids pinned by pending snapshots of this process."""
    with _LOCK:
        return {cid for cid, n in _PINS.get(store.root, Counter()).items() if n > 0}


def _pinned_paths(root: str) -> set[str]:
    with _LOCK:
        return {p for p, n in _PINNED_PATHS.get(root, Counter()).items() if n > 0}


def track_writer(writer: OpenWriter) -> None:
    """An open writer: the files it references stay until it commits or aborts."""
    with _gc_lock(writer.store.root), _LOCK:
        _WRITERS.setdefault(writer.store.root, weakref.WeakValueDictionary())[id(writer)] = writer


def untrack_writer(writer: OpenWriter) -> None:
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
        paths.update(w.referenced_paths())
    return paths, bases


_SAVEPOINT_DIR = re.compile(rf"^{C.SAVEPOINTS_DIR}/sp-(\d{{10}})/")
# Delta's default VACUUM retention: files a running commit may still reference are younger
ORPHAN_RETENTION = dt.timedelta(hours=168)
_CKID = re.compile(r"/(?P<created>\d{10})-[a-z-]+-kg\d+-\d+-[0-9a-f]+\.parquet$")

Ids = Sequence[int] | Callable[[list["LogRecord"]], Sequence[int]]


class _Replan(Exception):
    """The log moved in a way a collection's plan did not see: plan it again on the newest version."""


@dataclass(frozen=True)
class _Plan:
    """What one collection commits and then deletes, decided against log version `version`."""

    version: int
    discarded: tuple[dict[str, Any], ...]  # the DISCARDED rows it commits
    completed: frozenset[str]  # attempts COMPLETED at `version`: one completing later makes the plan stale
    collecting: dict[str, Any] | None  # its COLLECTING row (None: it deletes no data file)
    shared: tuple[str, ...]  # shared files no retained or pinned checkpoint uses, last used at or below the line
    savepoint_files: tuple[str, ...]  # files of savepoint attempts that can no longer commit
    prune: tuple[str, ...]  # manifest attempts (discarded checkpoints nothing pins) whose rows go

    @property
    def rows(self) -> list[dict[str, Any]]:
        """The log rows of its one commit."""
        return [*self.discarded, *([self.collecting] if self.collecting is not None else [])]


def discard_checkpoints(store: StoreRoot, checkpoint_ids: Ids) -> list[str]:
    """Mark checkpoints discarded and delete the files nothing retained uses, in one log commit planned on one version.

    `checkpoint_ids`: the ids, or a function choosing them from the retained records of the version the plan reads
    (`retain`), so that concurrent calls agree. An id another process discarded meanwhile counts as done. Returns
    the deleted paths.
    """
    if store.catalog.log_version() is None:
        if callable(checkpoint_ids) or not checkpoint_ids:
            return []  # a new root: nothing retained, nothing to discard
        raise InvalidArgumentError(f"checkpoints {list(checkpoint_ids)} are not retained at {store.root}: it holds no checkpoints")
    return _collect_planned(store, checkpoint_ids, None)


def collect_garbage(store: StoreRoot) -> list[str]:
    """Delete shared files that no retained checkpoint uses and no running attempt may still commit."""
    if store.catalog.log_version() is None:
        return []
    return _collect_planned(store, (), None)


def collect_orphans(store: StoreRoot, retention: dt.timedelta = ORPHAN_RETENTION) -> list[str]:
    """Delete what no checkpoint can ever use (refused, like GC, unless log and manifest read in full)."""
    if not isinstance(retention, dt.timedelta) or retention < dt.timedelta(0):
        raise InvalidArgumentError(f"retention must be a non-negative datetime.timedelta, got {retention!r}")
    if store.catalog.log_version() is None:
        return []
    return _collect_planned(store, (), retention)


def _collect_planned(store: StoreRoot, checkpoint_ids: Ids, retention: dt.timedelta | None) -> list[str]:
    """Plan on the newest log version, commit the plan's rows at the next one, then delete: planned again while
    checkpoints complete in between (CommitConflictError after _MAX_PLANS tries, nothing deleted)."""
    catalog = store.catalog
    with _gc_lock(store.root):
        check_writable(store.io)
        for _ in range(_MAX_PLANS):
            version = catalog.log_version()
            assert version is not None
            try:
                plan = _plan(store, version, checkpoint_ids)
                if plan.rows:
                    catalog.commit_log(plan.rows, version, lambda newest, p=plan: _rebase(store, p, newest))
            except _Replan:
                continue
            return _execute(store, plan, retention)
    raise CommitConflictError(f"garbage collection at {store.root}: checkpoints kept completing while it was planned "
                              f"({_MAX_PLANS} plans); nothing was discarded or deleted, try again")


def _rebase(store: StoreRoot, plan: _Plan, newest: int) -> bool:
    """The log moved past the planned version: commit on top unless a checkpoint completed (plan again) or this
    commit already landed (False)."""
    events = store.catalog.log_events(newest)
    event, attempt = events.column("event"), events.column("attempt_id")
    if plan.collecting is not None and plan.collecting["attempt_id"] in set(
            attempt.filter(pc.equal(event, C.EVENT_COLLECTING)).to_pylist()):
        return False
    if set(attempt.filter(pc.equal(event, C.EVENT_COMPLETED)).to_pylist()) - plan.completed:
        raise _Replan()
    return True  # only discards and other collections landed: what this plan deletes is still unused


def _plan(store: StoreRoot, version: int, checkpoint_ids: Ids) -> _Plan:
    """What to discard and delete, from log version `version` (and the manifest and listings read after it)."""
    catalog = store.catalog
    recs = catalog.records(version)
    retained = [r for r in recs if r.status == C.STATUS_COMPLETED]
    wanted = list(checkpoint_ids(retained) if callable(checkpoint_ids) else checkpoint_ids)
    by_id = {r.checkpoint_id: r for r in recs}
    now = dt.datetime.now(dt.timezone.utc)
    discarded: list[dict[str, Any]] = []
    discarding: set[int] = set()
    for cid in wanted:
        r = by_id.get(cid) if isinstance(cid, int) and not isinstance(cid, bool) else None
        if r is None:
            raise InvalidArgumentError(f"checkpoint {cid!r} is not a retained checkpoint at {store.root}; "
                                       f"retained: {sorted(x.checkpoint_id for x in retained)}")
        if r.kind == C.SAVEPOINT:
            raise InvalidArgumentError(f"checkpoint {cid} is a savepoint: savepoints own their files and are never discarded by the registry")
        if r.status != C.STATUS_COMPLETED or cid in discarding:
            continue  # discarded already (by a concurrent discard or retain): nothing left to do for it
        discarding.add(cid)
        discarded.append({
            "checkpoint_id": cid, "attempt_id": r.attempt_id, "event": C.EVENT_DISCARDED, "kind": r.kind,
            "event_time": now, "created_at": r.created_at, "max_parallelism": r.max_parallelism,
            "format_version": r.format_version, "base_checkpoint_id": r.base_checkpoint_id,
            "files": r.files, "rows": r.rows, "bytes": r.bytes, "metadata": "{}",
        })
    live = check_collectable(store, version, discarding)
    line = max((r.checkpoint_id for r in recs if r.kind == C.CHECKPOINT), default=None)
    latest = max((r.checkpoint_id for r in recs), default=None)
    in_use, bases = _in_use_by_writers(store.root)
    pins = pinned(store) | bases
    for r in recs:  # discarded checkpoints a pending snapshot builds on (retained ones are in `live`)
        if r.checkpoint_id in pins and (r.status != C.STATUS_COMPLETED or r.checkpoint_id in discarding):
            live.update(e.path for e in catalog.manifest(r.checkpoint_id, r.attempt_id))
    kept_paths = _pinned_paths(store.root)
    live |= in_use | kept_paths
    manifest = catalog.manifest_table().select(["attempt_id", "path", "checkpoint_id"])
    shared = _collectable(store, manifest, line, live) if line is not None else []
    savepoint_files = _savepoint_orphans(store, recs)
    # the manifest keeps retained checkpoints only: rows of discarded ones nothing pins go (it stops growing with history)
    present = set(pc.unique(manifest.column("attempt_id")).to_pylist())
    prune = [r.attempt_id for r in recs if (r.status != C.STATUS_COMPLETED or r.checkpoint_id in discarding)
             and r.checkpoint_id not in pins and r.attempt_id in present]
    collecting = None
    if shared or savepoint_files:
        assert latest is not None
        # kept: retained after the discards, pinned here, and attempts of this process's open writers (they may commit)
        protected = ({r.checkpoint_id for r in retained if r.checkpoint_id not in discarding} | pins
                     | (_open_writer_ids(store.root) - {r.checkpoint_id for r in recs}))
        newest = max(recs, key=lambda r: r.checkpoint_id)
        collecting = {
            "checkpoint_id": latest, "attempt_id": uuid.uuid4().hex, "event": C.EVENT_COLLECTING, "kind": C.CHECKPOINT,
            "event_time": now, "created_at": now, "max_parallelism": newest.max_parallelism, "format_version": C.FORMAT_VERSION,
            "base_checkpoint_id": None, "files": len(shared) + len(savepoint_files), "rows": 0, "bytes": 0,
            "metadata": json.dumps({"planned_log_version": version, "line": -1 if line is None else line, "latest": latest,
                                    "protected": sorted(protected), "kept_paths": sorted(kept_paths)},
                                   sort_keys=True, separators=(",", ":")),
        }
    return _Plan(version, tuple(discarded), frozenset(r.attempt_id for r in recs), collecting, tuple(shared),
                 tuple(savepoint_files), tuple(prune))


def _execute(store: StoreRoot, plan: _Plan, retention: dt.timedelta | None) -> list[str]:
    """Delete what a committed plan announced, prune the manifest and vacuum the two tables."""
    deleted = [p for p in (*plan.shared, *plan.savepoint_files) if store.io.delete(p)]
    store.catalog.prune_manifest(list(plan.prune))
    for rel in (C.LOG_TABLE, C.MANIFEST_TABLE):
        deleted += store.catalog.vacuum(rel, retention, full=retention is not None)
    if retention is not None:  # orphans: also what writes killed mid-commit staged in the tables (`<version>.json#1`)
        deleted += [p for p, _ in store.catalog.staged_leftovers(retention) if store.catalog.remove_staged(p)]
    return deleted


def _collectable(store: StoreRoot, manifest: pa.Table, line: int, live: set[str]) -> list[str]:
    """Listed shared files whose last use (newest manifest row, or the id in the name) is at or below `line` and that
    nothing live uses: Arrow set operations over the manifest and the listing of shared/."""
    listed = pa.array(store.io.list_files(C.SHARED_DIR), pa.string())
    created = pc.struct_field(pc.extract_regex(pc.binary_join_element_wise("/", listed, ""), _CKID.pattern), [0])
    named = pa.table({"path": listed, "checkpoint_id": pc.cast(created, pa.int64())}).filter(pc.is_valid(created))
    uses = pa.concat_tables([named, manifest.select(["path", "checkpoint_id"]).cast(named.schema)])
    last = uses.group_by("path").aggregate([("checkpoint_id", "max")])
    paths, used = last.column("path"), last.column("checkpoint_id_max")
    keep = pc.and_(pc.and_(pc.less_equal(used, line), pc.is_in(paths, value_set=listed)),  # files that are there (in shared/ only)
                   pc.invert(pc.is_in(paths, value_set=pa.array(list(live), pa.string()))))
    return sorted(paths.filter(keep).to_pylist())


def _savepoint_orphans(store: StoreRoot, records: list[LogRecord]) -> list[str]:
    """Files of savepoint attempts that can no longer commit: an id at or below the newest committed one that no
    savepoint holds and no open writer of this process still may commit."""
    latest = max((r.checkpoint_id for r in records), default=None)
    if latest is None:
        return []
    committed = {r.checkpoint_id for r in records}
    owned = {r.checkpoint_id for r in records if r.kind == C.SAVEPOINT} | (_open_writer_ids(store.root) - committed)
    out = []
    for path in store.io.list_files(C.SAVEPOINTS_DIR):
        m = _SAVEPOINT_DIR.match(path)
        if m and int(m.group(1)) <= latest and int(m.group(1)) not in owned:
            out.append(path)
    return out


def check_collectable(store: StoreRoot, version: int | None = None, discarding: set[int] | frozenset[int] = frozenset()) -> set[str]:
    """Every path the log (at `version`, default the newest) says a retained checkpoint or savepoint uses, the
    checkpoints in `discarding` excepted; CorruptFileError (GC refused) unless the log and the manifest can be read
    in full and agree on every retained checkpoint. A disagreement a concurrent discard explains plans again."""
    catalog = store.catalog
    try:
        catalog.check_files(C.LOG_TABLE)
        catalog.check_files(C.MANIFEST_TABLE)
        recs = catalog.records(version)
        # retained = what the raw log rows say, whatever parsing made of them (the same version as `recs`)
        events = catalog.log_events(version)
        discarded = events.filter(pc.equal(events.column("event"), C.EVENT_DISCARDED)).column("checkpoint_id")
        completed = events.filter(pc.equal(events.column("event"), C.EVENT_COMPLETED))
        kept = completed.filter(pc.invert(pc.is_in(completed.column("checkpoint_id"), value_set=discarded.combine_chunks())))
        retained = {e["attempt_id"]: e for e in kept.to_pylist() if e["checkpoint_id"] not in discarding}
        newer = {r.checkpoint_id: v for r in recs if r.status == C.STATUS_COMPLETED and (v := r.unsupported_format()) is not None}
        if newer:  # which files they use, and how, is not this release's to know
            raise CorruptFileError(
                f"checkpoints {sorted(newer)} were written in format versions {sorted(set(newer.values()))}, newer than this "
                f"release reads ({list(C.SUPPORTED_FORMAT_VERSIONS)}): garbage collection is for a release that reads them")
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
                if version is not None and _discarded_since(store, r["checkpoint_id"]):
                    raise _Replan()  # discarded and pruned by another collection after `version`: not damage
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


def _discarded_since(store: StoreRoot, checkpoint_id: int) -> bool:
    """True when a fresh read of the log no longer retains the checkpoint."""
    try:
        return checkpoint_id not in {r.checkpoint_id for r in store.catalog.records() if r.status == C.STATUS_COMPLETED}
    except CheckpointNotFoundError:
        return True


def _delta_error() -> type[Exception]:
    from deltalake.exceptions import DeltaError

    return DeltaError
