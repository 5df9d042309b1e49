"""State tables with versioned copy-on-write, the storage of the embedded keyed state backend.

A table is a fixed number of hash buckets, each a plain dict. A snapshot only records the
list of bucket dicts and a version (``StateTable.freeze``): that is O(number of buckets),
never O(entries). Writers copy a bucket dict lazily, the first time they touch it while a
snapshot that still references it is being written (the bucket's version is not newer than
the highest running snapshot version), like Flink's ``CopyOnWriteStateMap`` does per entry.
Mutable containers (list and map state values) carry a per-entry version and are copied
before an in-place change when a running snapshot may reference them.

Each table also tracks the primary keys changed since the last snapshot (upserts and
deletes alike); the change sets of snapshots not yet confirmed stay pending so that an
incremental checkpoint always covers every change since the last *completed* one.
"""

from __future__ import annotations

import copy
from typing import Any

__all__ = ["StateTable", "FrozenTable", "DEFAULT_BUCKETS"]

DEFAULT_BUCKETS = 1024


class VersionClock:
    """The backend-wide state version and the highest version a running snapshot still needs."""

    __slots__ = ("version", "hold", "_running")

    def __init__(self) -> None:
        self.version = 1
        self.hold = -1  # highest running snapshot version; -1: none
        self._running: dict[int, int] = {}

    def take(self) -> int:
        """Start a snapshot: freeze the current version and move on (O(1))."""
        v = self.version
        self.version = v + 1
        self._running[v] = self._running.get(v, 0) + 1
        self.hold = v
        return v

    def release(self, v: int) -> None:
        """A snapshot finished writing: buckets it referenced may be mutated in place again."""
        n = self._running.get(v, 0) - 1
        if n <= 0:
            self._running.pop(v, None)
        else:
            self._running[v] = n
        self.hold = max(self._running) if self._running else -1

    @property
    def running(self) -> int:
        """Number of snapshots still being written."""
        return sum(self._running.values())


class FrozenTable:
    """What a snapshot holds of one table: its bucket dicts and the change sets since the base."""

    __slots__ = ("buckets", "mask", "changes", "version", "covered")

    def __init__(self, buckets: list[dict[Any, Any]], mask: int, changes: list[set[Any]], version: int, covered: int = 0) -> None:
        self.buckets = buckets
        self.mask = mask
        self.changes = changes
        self.version = version
        # leading change sets already in files an aborted attempt uploaded (reused, not written again)
        self.covered = covered

    def get(self, pk: Any) -> Any:
        """Entry of a primary key as of the snapshot (None when absent)."""
        return self.buckets[hash(pk) & self.mask].get(pk)

    def changed_keys(self) -> set[Any]:
        """Union of the change sets (the keys an incremental snapshot writes)."""
        changes = self.changes[self.covered:]
        if len(changes) == 1:
            return changes[0]
        out: set[Any] = set()
        for c in changes:
            out |= c
        return out

    def __len__(self) -> int:
        return sum(len(b) for b in self.buckets)


class StateTable:
    """Bucketed dicts with per-bucket copy-on-write and change tracking (see module doc)."""

    __slots__ = ("buckets", "bver", "cver", "mask", "clock", "changes", "segments", "track_changes")

    def __init__(self, clock: VersionClock, num_buckets: int = DEFAULT_BUCKETS, *, containers: bool = False) -> None:
        if num_buckets & (num_buckets - 1) or num_buckets <= 0:
            raise ValueError("num_buckets must be a power of two")
        self.mask = num_buckets - 1
        self.buckets: list[dict[Any, Any]] = [{} for _ in range(num_buckets)]
        self.bver = [clock.version] * num_buckets
        # per-entry container versions (list/map state): pk -> version the container was made at
        self.cver: list[dict[Any, int]] | None = [{} for _ in range(num_buckets)] if containers else None
        self.clock = clock
        self.changes: set[Any] = set()
        self.segments: list[tuple[int, set[Any]]] = []  # (checkpoint id, changes) not yet completed
        self.track_changes = True

    # ------------------------------------------------------------------ access
    def bucket_for_write(self, i: int) -> dict[Any, Any]:
        """Bucket `i`, copied first if a running snapshot still references it."""
        if self.bver[i] <= self.clock.hold:
            d = dict(self.buckets[i])
            self.buckets[i] = d
            self.bver[i] = self.clock.version
            return d
        return self.buckets[i]

    def get(self, pk: Any) -> Any:
        """The stored entry of `pk` (None when absent)."""
        return self.buckets[hash(pk) & self.mask].get(pk)

    def put(self, pk: Any, value: Any) -> None:
        """Store an entry (copy-on-write of its bucket; recorded as changed)."""
        i = hash(pk) & self.mask
        d = self.buckets[i] if self.bver[i] > self.clock.hold else self.bucket_for_write(i)
        d[pk] = value
        if self.track_changes:
            self.changes.add(pk)

    def remove(self, pk: Any) -> Any:
        """Remove an entry and return it (None when absent; recorded as changed when present)."""
        i = hash(pk) & self.mask
        if pk not in self.buckets[i]:
            return None
        d = self.buckets[i] if self.bver[i] > self.clock.hold else self.bucket_for_write(i)
        old = d.pop(pk, None)
        if self.cver is not None:
            self.cver[i].pop(pk, None)
        if self.track_changes:
            self.changes.add(pk)
        return old

    def put_container(self, pk: Any, container: Any) -> None:
        """Store a new container (list or dict) owned by the current version."""
        i = hash(pk) & self.mask
        d = self.buckets[i] if self.bver[i] > self.clock.hold else self.bucket_for_write(i)
        d[pk] = container
        assert self.cver is not None
        self.cver[i][pk] = self.clock.version
        if self.track_changes:
            self.changes.add(pk)

    def container_for_write(self, pk: Any, copy: Any) -> Any:
        """The container of `pk` ready for an in-place change (copied if a snapshot may see it); None if absent."""
        i = hash(pk) & self.mask
        c = self.buckets[i].get(pk)
        if c is None:
            return None
        assert self.cver is not None
        hold = self.clock.hold
        if self.cver[i].get(pk, 0) <= hold:
            d = self.buckets[i] if self.bver[i] > hold else self.bucket_for_write(i)
            c = copy(c)
            d[pk] = c
            self.cver[i][pk] = self.clock.version
        return c

    def shared(self, pk: Any) -> bool:
        """True when a running snapshot may reference the stored object of `pk` (container tables)."""
        hold = self.clock.hold
        if hold < 0:
            return False
        assert self.cver is not None
        return self.cver[hash(pk) & self.mask].get(pk, 0) <= hold

    def own(self, pk: Any, value: Any) -> Any:
        """`value` (the entry of `pk`) made safe to change in place: if a running snapshot may
        reference it, a deep copy replaces it in the table (same content: not a change)."""
        i = hash(pk) & self.mask
        hold = self.clock.hold
        assert self.cver is not None
        if self.cver[i].get(pk, 0) > hold:
            return value
        value = copy.deepcopy(value)
        d = self.buckets[i] if self.bver[i] > hold else self.bucket_for_write(i)
        d[pk] = value
        self.cver[i][pk] = self.clock.version
        return value

    def __len__(self) -> int:
        return sum(len(b) for b in self.buckets)

    def items(self) -> Any:
        """Every (primary key, entry) of the live table."""
        for b in self.buckets:
            yield from b.items()

    # ------------------------------------------------------------------ snapshots
    def freeze(self, checkpoint_id: int, version: int, covered_upto: int | None = None) -> FrozenTable:
        """The synchronous part of a snapshot: bucket references and the pending change sets
        (those of checkpoints up to `covered_upto` are marked covered by reused files)."""
        self.segments.append((checkpoint_id, self.changes))
        self.changes = set()
        covered = 0 if covered_upto is None else sum(1 for cid, _ in self.segments if cid <= covered_upto)
        return FrozenTable(list(self.buckets), self.mask, [s for _, s in self.segments], version, covered)

    def completed(self, checkpoint_id: int) -> None:
        """Checkpoint `checkpoint_id` completed: changes up to it are now in the base."""
        self.segments = [s for s in self.segments if s[0] > checkpoint_id]

    def load(self, pks: list[Any], values: list[Any]) -> None:
        """Bulk load (restore) into the buckets.

        No change tracking; containers get version 0 (copied before an in-place change while
        a snapshot runs, like every container older than that snapshot). A plain loop of
        C-level dict stores: measured 2x faster than grouping by bucket with numpy first.
        """
        buckets = self.buckets
        mask = self.mask
        for pk, v in zip(pks, values):
            buckets[hash(pk) & mask][pk] = v
