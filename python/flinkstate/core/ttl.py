"""State TTL configuration as in Flink's StateTtlConfig (FLIP-25).

Defaults follow Flink: update on create-and-write, never return expired, processing time,
cleanup in background on (incremental cleanup of 5 entries per access, compaction filter
re-querying time every 1000 entries); full-snapshot cleanup off unless asked for.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from flinkstate.core.errors import InvalidArgumentError

__all__ = [
    "StateTtlConfig",
    "IncrementalCleanup",
    "CompactionCleanup",
    "UpdateType",
    "StateVisibility",
    "expiry_timestamp",
    "expiry_timestamps",
    "is_expired",
    "MAX_TIMESTAMP",
]

UpdateType = Literal["OnCreateAndWrite", "OnReadAndWrite", "Disabled"]
StateVisibility = Literal["NeverReturnExpired", "ReturnExpiredIfNotCleanedUp"]

MAX_TIMESTAMP = (1 << 63) - 1


def expiry_timestamp(last_access_ms: int, ttl_ms: int) -> int:
    """Flink's TtlUtils.expired arithmetic: last access + ttl, saturating at Long.MAX_VALUE."""
    total = last_access_ms + ttl_ms
    return MAX_TIMESTAMP if total > MAX_TIMESTAMP else total


def is_expired(last_access_ms: int, ttl_ms: int, now_ms: int) -> bool:
    """Flink's TtlUtils.expired: the (saturating) expiry time is at or before now."""
    total = last_access_ms + ttl_ms  # inlined expiry_timestamp: this runs on every state access
    return (MAX_TIMESTAMP if total > MAX_TIMESTAMP else total) <= now_ms


def expiry_timestamps(last_access_ms: Any, ttl_ms: int) -> np.ndarray:
    """Vectorized `expiry_timestamp` over an Arrow or NumPy array of last-access times (null as 0)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(last_access_ms, (pa.Array, pa.ChunkedArray)):
        if last_access_ms.null_count:
            last_access_ms = pc.fill_null(last_access_ms, 0)
        last_access_ms = last_access_ms.to_numpy(zero_copy_only=False)
    a = np.asarray(last_access_ms, dtype=np.int64)
    out = np.minimum(a, MAX_TIMESTAMP - ttl_ms)  # saturating: last access + ttl, at most Long.MAX_VALUE
    out += ttl_ms
    return out


@dataclass(frozen=True)
class IncrementalCleanup:
    """Check `cleanup_size` entries per state access (and per record if asked)."""

    cleanup_size: int = 5
    run_cleanup_for_every_record: bool = False


@dataclass(frozen=True)
class CompactionCleanup:
    """Drop expired entries when deltas are compacted into a new full file."""

    query_time_after_num_entries: int = 1000


@dataclass(frozen=True, kw_only=True)
class StateTtlConfig:
    """Time-to-live of keyed state entries, in milliseconds of processing time."""

    ttl_ms: int
    update_type: UpdateType = "OnCreateAndWrite"
    state_visibility: StateVisibility = "NeverReturnExpired"
    ttl_time_characteristic: Literal["ProcessingTime"] = "ProcessingTime"
    cleanup_full_snapshot: bool = False
    incremental_cleanup: IncrementalCleanup | None = IncrementalCleanup()
    compaction_cleanup: CompactionCleanup | None = CompactionCleanup()

    def __post_init__(self) -> None:
        if not isinstance(self.ttl_ms, int) or isinstance(self.ttl_ms, bool) or not 0 < self.ttl_ms <= MAX_TIMESTAMP:
            raise InvalidArgumentError(f"ttl_ms must be a positive int of milliseconds up to {MAX_TIMESTAMP} (Java long), got {self.ttl_ms!r}")
        if self.update_type not in ("OnCreateAndWrite", "OnReadAndWrite", "Disabled"):
            raise InvalidArgumentError(f"unknown TTL update_type {self.update_type!r}")
        if self.state_visibility not in ("NeverReturnExpired", "ReturnExpiredIfNotCleanedUp"):
            raise InvalidArgumentError(f"unknown TTL state_visibility {self.state_visibility!r}")
        if self.ttl_time_characteristic != "ProcessingTime":
            raise InvalidArgumentError("only ProcessingTime TTL is supported (as in Flink)")
        if self.incremental_cleanup is not None and self.incremental_cleanup.cleanup_size < 0:
            raise InvalidArgumentError("incremental_cleanup.cleanup_size must be >= 0")

    @property
    def enabled(self) -> bool:
        """TTL is active unless the update type is Disabled."""
        return self.update_type != "Disabled"

    def disable_cleanup_in_background(self) -> StateTtlConfig:
        """Like Flink's disableCleanupInBackground(): no incremental and no compaction cleanup."""
        import dataclasses

        return dataclasses.replace(self, incremental_cleanup=None, compaction_cleanup=None)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form stored in checkpoint metadata."""
        return {
            "ttl_ms": self.ttl_ms,
            "update_type": self.update_type,
            "state_visibility": self.state_visibility,
            "ttl_time_characteristic": self.ttl_time_characteristic,
            "cleanup_full_snapshot": self.cleanup_full_snapshot,
            "incremental_cleanup": None
            if self.incremental_cleanup is None
            else {
                "cleanup_size": self.incremental_cleanup.cleanup_size,
                "run_cleanup_for_every_record": self.incremental_cleanup.run_cleanup_for_every_record,
            },
            "compaction_cleanup": None
            if self.compaction_cleanup is None
            else {"query_time_after_num_entries": self.compaction_cleanup.query_time_after_num_entries},
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> StateTtlConfig:
        """Inverse of `to_dict`."""
        inc = d.get("incremental_cleanup")
        comp = d.get("compaction_cleanup")
        return cls(
            ttl_ms=int(d["ttl_ms"]),
            update_type=d["update_type"],
            state_visibility=d["state_visibility"],
            ttl_time_characteristic=d.get("ttl_time_characteristic", "ProcessingTime"),
            cleanup_full_snapshot=bool(d.get("cleanup_full_snapshot", False)),
            incremental_cleanup=None if inc is None else IncrementalCleanup(**inc),
            compaction_cleanup=None if comp is None else CompactionCleanup(**comp),
        )
