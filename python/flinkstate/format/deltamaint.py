"""Housekeeping of the manifest and log Delta tables: what keeps a long-running job's catalog flat.

Every HOUSEKEEPING_INTERVAL versions of a table, the process whose commit reaches it:
- compacts the table's data files into one when it holds COMPACT_MIN_FILES or more (the log gets a
  file per commit; the manifest's are pruned to the retained checkpoints by garbage collection) by an overwrite
  committed on the version it read (`compact`),
- deletes the data files removed longer than `delta.deletedFileRetentionDuration` ago (Delta's VACUUM in
  lite mode), and writes a Delta checkpoint (a load reads it and only the commits after it); the removes
  the checkpoint drops as expired by its own clock are deleted too, so no removed file is forgotten,
- deletes the `_delta_log` entries before that checkpoint older than `delta.logRetentionDuration`
  (delta-rs' own cleanup: Delta's rule, every version inside the retention stays readable).
Garbage collection runs the same lite VACUUM (from the log, without a listing) and reports what it deleted.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable
from typing import Any

__all__ = [
    "HOUSEKEEPING_INTERVAL", "COMPACT_MIN_FILES", "LOG_RETENTION_KEY", "DELETED_FILE_RETENTION_KEY", "DEFAULT_LOG_RETENTION",
    "new_table_properties", "no_hooks", "only_on_read_version", "housekeep", "compact", "vacuum_candidates",
]

# a table's housekeeping runs on the commit that makes its version a multiple of this
HOUSEKEEPING_INTERVAL = 20
# data files of a table that make housekeeping compact it into one
COMPACT_MIN_FILES = 8
# Delta's table property: how long `_delta_log` entries stay after a newer checkpoint covers them
LOG_RETENTION_KEY = "delta.logRetentionDuration"
# Delta's table property: how long a data file a commit removed stays for readers of older versions (7 days by default)
DELETED_FILE_RETENTION_KEY = "delta.deletedFileRetentionDuration"
# what flinkstate sets on the tables it creates (Delta's default is 30 days; versions are needed only while a
# two-phase write planned against one is running, and every entry kept is listed by each load)
DEFAULT_LOG_RETENTION = "interval 1 days"


def _errors() -> tuple[type[BaseException], ...]:
    """What a failed housekeeping step raises: it runs after a commit landed, so it must never escape."""
    from deltalake.exceptions import DeltaError

    return (DeltaError, OSError, ValueError, RuntimeError)


def new_table_properties() -> dict[str, str]:
    """Table properties of a new manifest or log table."""
    return {LOG_RETENTION_KEY: DEFAULT_LOG_RETENTION}


def no_hooks() -> Any:
    """delta-rs' post-commit hooks off: its own checkpoints (every 100 versions) would drop expired removes
    before their files are vacuumed, and `housekeep` checkpoints and cleans the tables itself."""
    from deltalake import PostCommitHookProperties

    return PostCommitHookProperties(create_checkpoint=False, cleanup_expired_logs=False)


def only_on_read_version() -> Any:
    """Commit properties of a rewrite (compaction, delete) that must land on the version it read or not at all."""
    from deltalake import CommitProperties

    return CommitProperties(max_commit_retries=0)


def housekeep(table: Any, remove: Callable[[str], object], reload: Callable[[], Any], rows: Callable[[], Any]) -> None:
    """Compact, vacuum, checkpoint and clean a table whose version just reached a multiple of HOUSEKEEPING_INTERVAL.

    `table` is the DeltaTable the commit went through (at the new version); `remove` deletes one of its data
    files (a path relative to the table); `reload` loads the table afresh; `rows` reads its rows at that version
    (in its schema). Best effort: each step is an optimisation only, the table stays valid without it, and a
    concurrent writer's commit simply wins.
    """
    if table.version() % HOUSEKEEPING_INTERVAL:
        return
    try:
        if table.get_add_actions().num_rows >= COMPACT_MIN_FILES:
            compact(table, rows())
        listed = set(vacuum_candidates(table, dt.timedelta(0), full=False))  # every remove the log still holds
        listed = set(vacuum_candidates(table, dt.timedelta(0), full=False))  # every remove the log still holds
        expired = vacuum_candidates(table, None, full=False)
        for path in expired:
            remove(path)
        table.create_checkpoint()
        # the checkpoint forgets removes older than the retention as of its own clock: what it dropped goes too
        for path in listed - set(expired) - set(vacuum_candidates(reload(), dt.timedelta(0), full=False)):
            remove(path)
        table.cleanup_metadata()
    except _errors():
        return


def compact(table: Any, rows: Any) -> None:
    """Rewrite a table's rows as one data file, in one commit on the version they were read at or not at all.

    A Delta overwrite, not delta-rs' OPTIMIZE: OPTIMIZE marks its removes as no data change, which delta-rs lets two
    concurrent compactions of the same files both commit (every row then counted twice). An overwrite's removes
    conflict with any concurrent commit; a writer planned on the version before rebases over it (its rows are kept).
    """
    from deltalake import write_deltalake

    write_deltalake(table, rows, mode="overwrite", commit_properties=only_on_read_version(),
                    post_commithook_properties=no_hooks())


def vacuum_candidates(table: Any, retention: dt.timedelta | None, *, full: bool) -> list[str]:
    """Data files of a table (paths relative to it) that Delta's VACUUM would delete, without deleting them
    or committing: files removed longer than `retention` ago (default the table's
    `delta.deletedFileRetentionDuration`, 7 days), and with `full` also files no version ever referenced,
    last modified before `retention` (the listing of the whole table folder)."""
    hours = None if retention is None else math.ceil(retention.total_seconds() / 3600)
    return [str(p) for p in table.vacuum(retention_hours=hours, dry_run=True, enforce_retention_duration=retention is None,
                                         full=full)]
