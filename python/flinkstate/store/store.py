"""The checkpoint store: list, read and write the checkpoints of one job root.

`flinkstate.open(path)` returns a `CheckpointStore`: the read side of `root.StoreRoot` plus writes through a
`CheckpointWriter` (`store.begin(...)`, committed atomically), garbage collection and maintenance.
"""

from __future__ import annotations

import datetime as dt
from typing import Literal

from flinkstate.core.errors import CorruptFileError, InvalidArgumentError
from flinkstate.core.policy import CompactionPolicy
from flinkstate.format import constants as C
from flinkstate.format.manifest import LogRecord
from flinkstate.store.maintenance import (
    MaintenanceResult,
    Progress,
    Runner,
    compact,
    expire,
)
from flinkstate.store.registry import (
    ORPHAN_RETENTION,
    collect_orphans,
    discard_checkpoints,
)
from flinkstate.store.root import StoreRoot
from flinkstate.store.writer import CheckpointWriter

__all__ = ["CheckpointStore"]


class CheckpointStore(StoreRoot):
    """Checkpoints and savepoints of one job root (a local path, memory:// or s3:// URL)."""

    def begin(
        self,
        *,
        kind: Literal["checkpoint", "savepoint"] = "checkpoint",
        checkpoint_id: int | None = None,
        base: int | Literal["latest"] | None = "latest",
        max_parallelism: int | None = None,
        at_log_version: int | None = None,
    ) -> CheckpointWriter:
        """Start writing a new checkpoint or savepoint on top of `base` (everything else is carried over).

        at_log_version: plan against that version of the log (a two-phase write: the driver planned,
        executors wrote files, the driver commits); a checkpoint committed since then is a conflict.
        """
        return CheckpointWriter(self, kind=kind, checkpoint_id=checkpoint_id, base=base, max_parallelism=max_parallelism,
                                at_log_version=at_log_version)

    def discard(self, checkpoint_ids: list[int]) -> list[str]:
        """Discard checkpoints (not savepoints) and delete shared files no retained checkpoint uses."""
        if (isinstance(checkpoint_ids, (str, bytes)) or not isinstance(checkpoint_ids, (list, tuple))
                or any(isinstance(c, bool) or not isinstance(c, int) for c in checkpoint_ids)):
            raise InvalidArgumentError(f"checkpoint_ids must be a list of checkpoint ids (integers), got {checkpoint_ids!r}")
        _refuse_gc_if_damaged(self)
        return discard_checkpoints(self, checkpoint_ids)

    def collect_orphans(self, retention: dt.timedelta | None = None) -> list[str]:
        """Delete files no checkpoint can ever use: folders of killed savepoint attempts and files inside
        the Delta tables no version references, older than `retention` (default 7 days, as Delta's VACUUM)."""
        return collect_orphans(self, ORPHAN_RETENTION if retention is None else retention)

    def retain(self, num_retained: int) -> list[str]:
        """Keep the newest `num_retained` checkpoints (savepoints are never touched), then collect
        garbage; returns the deleted paths."""
        if isinstance(num_retained, bool) or not isinstance(num_retained, int) or num_retained < 1:
            raise InvalidArgumentError(f"num_retained must be an int >= 1, got {num_retained!r}")

        def beyond(retained: list[LogRecord]) -> list[int]:  # chosen at the log version the discard is planned on
            cps = [r.checkpoint_id for r in retained if r.kind == C.CHECKPOINT]
            return cps[:-num_retained] if len(cps) > num_retained else []

        _refuse_gc_if_damaged(self)
        return discard_checkpoints(self, beyond)

    def compact(self, operator: str | None = None, state: str | None = None, *, policy: CompactionPolicy | None = None,
                progress: Progress | None = None, run: Runner | None = None) -> MaintenanceResult:
        """Merge delta chains into full files per key-group range as one new checkpoint; every read stays identical.

        One state, an operator's, or all (keyed states and timer services); without a policy every range holding a
        delta, with one only the ranges past its threshold. Nothing due: no checkpoint (`result.checkpoint_id` None).
        """
        return compact(self, operator, state, policy=policy, progress=progress, run=run)

    def expire(self, operator: str | None = None, state: str | None = None, *, at: int | None = None,
               progress: Progress | None = None, run: Runner | None = None) -> MaintenanceResult:
        """Drop the entries of one TTL state (or all) expired at `at` (epoch ms, default now) as one new checkpoint;
        `result.dropped` counts them per state."""
        return expire(self, operator, state, at=at, progress=progress, run=run)


def _refuse_gc_if_damaged(store: CheckpointStore) -> None:
    """CorruptFileError unless every retained checkpoint's log row reads: GC never runs on a partial view."""
    damaged = [r for r in store.catalog.records() if r.damage and r.status == C.STATUS_COMPLETED]
    if damaged:
        raise CorruptFileError(f"garbage collection refused at {store.root}, nothing deleted: {damaged[0].damage}; "
                               f"damaged checkpoints: {[r.checkpoint_id for r in damaged]}")
