"""Shared-state registry (FLINK-24611 semantics): discard checkpoints, delete unused shared files.

A shared file lives while any retained checkpoint's manifest uses it. When checkpoints are
discarded, files whose last use is gone are deleted. Files of attempts that never completed
stay until a later checkpoint completes; savepoints own their files and are never touched.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import TYPE_CHECKING

from flinkstate.errors import InvalidArgumentError
from flinkstate.format import constants as C

if TYPE_CHECKING:
    from flinkstate.store import CheckpointStore

__all__ = ["discard_checkpoints", "collect_garbage"]

_CKID = re.compile(r"/(\d{10})-[a-z-]+-kg\d+-\d+-[0-9a-f]+\.parquet$")


def discard_checkpoints(store: CheckpointStore, checkpoint_ids: list[int]) -> list[str]:
    """Mark checkpoints discarded in one log commit, then delete files nothing retained uses."""
    catalog = store.catalog
    version = catalog.log_version()
    if version is None:
        raise InvalidArgumentError(f"no checkpoints at {store.root}")
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
    catalog = store.catalog
    all_recs = catalog.records()
    retained = [r for r in all_recs if r.status == C.STATUS_COMPLETED]
    latest = max((r.checkpoint_id for r in all_recs), default=None)
    if latest is None:
        return []
    live: set[str] = set()
    for r in retained:
        live.update(e.path for e in catalog.manifest(r.checkpoint_id, r.attempt_id))
    manifest = catalog.manifest_table().to_pylist()
    candidates: set[str] = set()
    for row in manifest:
        # files of discarded checkpoints, and of attempts older than the newest completed one
        if row["checkpoint_id"] <= latest:
            candidates.add(row["path"])
    for path in store.io.list_files(C.SHARED_DIR):
        m = _CKID.search("/" + path)
        if m and int(m.group(1)) < latest:
            candidates.add(path)
    deleted = []
    for path in sorted(candidates - live):
        if not path.startswith(C.SHARED_DIR + "/"):
            continue  # savepoint files are owned by their savepoint
        if store.io.delete(path):
            deleted.append(path)
    return deleted
