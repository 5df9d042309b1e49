"""`flinkstate verify`: read every file the checkpoints of a root use and name what is damaged.

Each data file is fetched whole and checked as a read checks it (size, checksum, footer,
column types against the state's descriptor, key-group range), plus Flink's key-group
assignment of every key. Damage to the checkpoint log or manifest, or to one checkpoint's
metadata, is reported too. Nothing is written or deleted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from flinkstate.core.errors import CorruptFileError, FlinkStateError
from flinkstate.format import constants as C
from flinkstate.format.filekind import FileKind, Scope

if TYPE_CHECKING:
    from flinkstate.format.datafile import FileEntry
    from flinkstate.format.metadata import CheckpointMetadata
    from flinkstate.store.store import CheckpointStore

__all__ = ["Damage", "VerifyReport", "verify_store"]


@dataclass(frozen=True)
class Damage:
    """One damaged part: the file (URL), the checkpoints that use it, and what is wrong."""

    path: str
    checkpoints: tuple[int, ...]
    problem: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-able dict."""
        return {"path": self.path, "checkpoints": list(self.checkpoints), "problem": self.problem}


@dataclass
class VerifyReport:
    """What `verify_store` checked and found."""

    root: str
    checkpoints: list[int] = field(default_factory=list)
    files_checked: int = 0
    damaged: list[Damage] = field(default_factory=list)
    #: checkpoints this release cannot check (written in a newer format version), with why
    not_checked: dict[int, str] = field(default_factory=dict)
    #: URLs of files that writes killed mid-commit staged in the Delta tables (never part of them; `collect_orphans`
    #: deletes them once older than its retention)
    stray: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when nothing damaged was found."""
        return not self.damaged

    def to_dict(self) -> dict[str, Any]:
        """JSON-able dict."""
        return {"root": self.root, "checkpoints": self.checkpoints, "files_checked": self.files_checked,
                "ok": self.ok, "damaged": [d.to_dict() for d in self.damaged],
                "not_checked": {str(k): v for k, v in self.not_checked.items()}, "stray": self.stray}


def verify_store(store: CheckpointStore, checkpoint_id: int | None = None) -> VerifyReport:
    """Check every file of one checkpoint (default: every retained checkpoint and savepoint)."""
    report = VerifyReport(root=store.root)
    try:
        records = [r for r in store.catalog.records() if r.status == C.STATUS_COMPLETED]
    except CorruptFileError as e:  # the log or manifest itself: nothing further can be trusted
        report.damaged.append(Damage(_culprit(str(e), store), (), str(e)))
        return report
    ids = []
    for r in records:
        newer = None if r.damage else r.unsupported_format()
        if newer is None:
            ids.append(r.checkpoint_id)
        else:  # not damage: a newer release wrote it (listing and reads refuse it by name)
            report.not_checked[r.checkpoint_id] = (f"written in format version {newer}; this release reads "
                                                   f"{list(C.SUPPORTED_FORMAT_VERSIONS)}: check it with a release that does")
    if checkpoint_id is not None:
        if checkpoint_id not in ids:
            store.checkpoint(checkpoint_id)  # CheckpointNotFoundError listing the retained ids, or the newer format
        ids = [checkpoint_id]
    users: dict[str, list[int]] = {}
    todo: dict[str, tuple[FileEntry, Any, int]] = {}
    for cid in ids:
        try:
            meta = store.metadata(cid)
            files = store.files(cid)
        except CorruptFileError as e:
            report.damaged.append(Damage(_culprit(str(e), store), (cid,), str(e)))
            continue
        report.checkpoints.append(cid)
        for e in files:
            users.setdefault(e.path, []).append(cid)
            op = meta.operators.get(e.operator)
            mp = meta.info.max_parallelism if op is None or op.max_parallelism is None else op.max_parallelism
            todo.setdefault(e.path, (e, _descriptor(meta, e), mp))
    for path, (entry, desc, mp) in sorted(todo.items()):
        report.files_checked += 1
        problem = _check_file(store, entry, desc, mp)
        if problem is not None:
            report.damaged.append(Damage(store.io.url(path), tuple(users[path]), problem))
    if checkpoint_id is None:
        report.damaged += _lost_log_commits(store)
        report.stray = [store.io.url(p) for p, _ in store.catalog.staged_leftovers()]
    return report


def _lost_log_commits(store: CheckpointStore) -> list[Damage]:
    """Checkpoints whose COMPLETED row sits in a log data file no log version references while their own data files
    are there: the `_delta_log` commit that recorded them is gone (or the writer was killed in the instant between
    writing the row and committing it). A writer that lost a commit race deleted its files, so it is not reported."""
    import pyarrow.compute as pc

    catalog = store.catalog
    in_log = {(r.checkpoint_id, r.attempt_id) for r in catalog.records()}
    out = []
    manifest = None
    for path, rows in catalog.unreferenced_rows(C.LOG_TABLE):
        for r in rows.filter(pc.equal(rows.column("event"), C.EVENT_COMPLETED)).to_pylist():
            if (r["checkpoint_id"], r["attempt_id"]) in in_log:
                continue  # a lost race of a commit that then landed, or a compacted copy
            if manifest is None:
                manifest = catalog.manifest_table().select(["attempt_id", "path", "created_by_checkpoint_id"])
            own = manifest.filter(pc.and_(pc.equal(manifest.column("attempt_id"), r["attempt_id"]),
                                          pc.equal(manifest.column("created_by_checkpoint_id"), r["checkpoint_id"])))
            present = [p for p in own.column("path").to_pylist() if store.io.exists(p)]
            if not present:
                continue
            url = store.io.url(f"{C.LOG_TABLE}/{path}")
            out.append(Damage(url, (int(r["checkpoint_id"]),), (
                f"{r['kind']} {r['checkpoint_id']} (attempt {r['attempt_id']}) completed in the log data file {url}, which no "
                f"version of the log {store.io.url(C.LOG_TABLE)} references, and its {len(present)} data files are there "
                f"(e.g. {store.io.url(present[0])}): the _delta_log commit file that recorded it is missing (deleted or rolled "
                "back), or its writer was killed between writing that file and committing it. Restore the commit file from a "
                "copy of the root before writing here: a new checkpoint would take its id and garbage collection would delete "
                "its files")))
    return out


def _check_file(store: CheckpointStore, entry: FileEntry, desc: Any, max_parallelism: int) -> str | None:
    """The problem of one data file (None: intact), reading it whole as a read does."""
    from flinkstate.format.datafile import read_data_file

    try:
        table = read_data_file(store.io, entry, descriptor=desc, max_parallelism=max_parallelism)
    except CorruptFileError as e:
        return str(e)
    if FileKind(entry.kind).scope in (Scope.KEYED, Scope.TIMERS) and table.num_rows:
        import pyarrow.compute as pc

        from flinkstate.core.keygroups import assign_key_groups

        try:
            kg = assign_key_groups(table.column(C.COL_KEY), max_parallelism)
        except (FlinkStateError, TypeError, ValueError):
            return None  # a key type without Flink's assignment here: the range check above is all there is
        if not pc.all(pc.equal(table.column(C.COL_KEY_GROUP).cast(kg.type), kg)).as_py():
            return (f"data file {store.io.url(entry.path)} of operator {entry.operator!r} state {entry.state!r} is damaged: "
                    f"its key_group column does not match Flink's key-group assignment of its keys (max parallelism {max_parallelism})")
    return None


def _descriptor(meta: CheckpointMetadata, e: FileEntry) -> Any:
    """The descriptor a file's schema must match in its checkpoint (None: unknown, not checked)."""
    op = meta.operators.get(e.operator)
    if op is None or e.state is None:
        return None
    scope = FileKind(e.kind).scope
    if scope == Scope.KEYED:
        return op.keyed_states.get(e.state)
    if scope == Scope.TIMERS:
        return op.timer_services.get(e.state)
    if scope == Scope.OPERATOR:
        return op.operator_states.get(e.state)
    return None


def _culprit(message: str, store: CheckpointStore) -> str:
    """The file a message names (its first URL below the root), else the root itself."""
    import re

    m = re.search(re.escape(store.root) + r"[^\s,;:()'\"]*", message)
    return m.group(0).rstrip(".") if m else store.root
