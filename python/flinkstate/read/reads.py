"""The read API every source of checkpoints shares: a flinkstate root and a Flink savepoint alike.

`read_*` pin a checkpoint (`self.checkpoint(id)`) and run its scan; whatever the source, the rows,
TTL visibility and flattening are the same (see `flinkstate.read.scan`, `flinkstate.read.visibility`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from flinkstate.read.scan import Checkpoint

__all__ = ["ReadApi"]


def _sorted(t: pa.Table, by: list[str]) -> pa.Table:
    if t.num_rows <= 1 or any(b not in t.column_names for b in by) or _in_order(t, by):
        return t
    return t.take(pc.sort_indices(t, sort_keys=[(b, "ascending") for b in by]))


def _in_order(t: pa.Table, by: list[str]) -> bool:
    """Whether the rows are already ascending by the integer columns `by` (as a scan of key-ordered files gives them):
    the stable sort would then return them as they are, and its copy of every column is skipped."""
    cols = [t.column(b) for b in by]
    if not all(pa.types.is_integer(c.type) and not c.null_count for c in cols):
        return False
    tied = np.ones(t.num_rows - 1, bool)  # pairs of neighbours equal in the columns so far
    for c in cols:
        a = c.to_numpy()
        later, earlier = a[1:], a[:-1]
        if (tied & (later < earlier)).any():
            return False
        tied &= later == earlier
    return True


class ReadApi(ABC):
    """`read_state`, `read_timers`, `read_operator_state`, `read_coordinator` over `checkpoint(id)`."""

    @abstractmethod
    def checkpoint(self, checkpoint_id: int | None = None) -> Checkpoint:
        """One checkpoint (default the latest), pinned."""

    def read_state(
        self,
        operator: str,
        state: str,
        checkpoint_id: int | None = None,
        *,
        key_group_range: tuple[int, int] | None = None,
        keys: Sequence[Any] | None = None,
        ttl_reference: int | None = None,
        include_expired: bool = False,
        flatten: bool = True,
        columns: Sequence[str] | None = None,
        raw: bool = False,
    ) -> pa.Table:
        """A keyed state at a checkpoint (default the latest), as Spark's `state` table reads it.

        Columns: key_group, key, [namespace], [user_key], value, and for TTL states ttl_expires_at
        (plus `expired` with include_expired). Entries expired at ttl_reference (epoch ms, default
        the checkpoint's time) are hidden; list and map state are one row per element unless
        flatten=False. raw=True returns the stored rows instead (ttl_timestamp last-access times,
        a list per key), as restore and rewrites need them. Rows are in key-group order.
        """
        kgs = None
        if key_group_range is not None:
            lo, hi = key_group_range
            kgs = range(int(lo), int(hi) + 1)
        scan = self.checkpoint(checkpoint_id).scan(operator, state, keys=keys, key_groups=kgs, ttl_reference=ttl_reference,
                                                   include_expired=include_expired, flatten=flatten, columns=columns, raw=raw)
        t = scan.to_arrow()
        return _sorted(t, ["key_group"])

    def read_timers(self, operator: str, service: str, checkpoint_id: int | None = None) -> pa.Table:
        """A timer service's timers at a checkpoint: key_group, key, [namespace], timestamp."""
        t = self.checkpoint(checkpoint_id).scan_timers(operator, service).to_arrow()
        return _sorted(t, ["key_group", "timestamp"])

    def read_operator_state(self, operator: str, name: str, checkpoint_id: int | None = None) -> pa.Table:
        """An operator state at a checkpoint: subtask, [key], value."""
        return self.checkpoint(checkpoint_id).scan_operator_state(operator, name).to_arrow()

    def read_coordinator(self, operator: str, checkpoint_id: int | None = None) -> pa.Table:
        """An operator coordinator's stored state and buffered events (record_type, subtask, seq, payload)."""
        return self.checkpoint(checkpoint_id).scan_coordinator(operator).to_arrow()
