"""Timers as keyed state (FLINK-9485): a priority queue per timer service.

A timer is (key, namespace, timestamp), deduplicated on all three, as Flink's
``HeapPriorityQueueSet``. The set of timers lives in a `StateTable` (versioned copy-on-write
buckets, snapshotted asynchronously with the rest of the keyed state, FLINK-9182); a binary
heap over (timestamp, registration) gives O(log n) register, poll and lazy delete.
``advance`` fires every timer with timestamp <= time in timestamp order (ties in
registration order), with its key and namespace set as current, as
``InternalTimerServiceImpl.advanceWatermark`` / ``onProcessingTime``; a callback may
register new timers, which fire in the same advance when due.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from flinkstate.backend.tables import StateTable
from flinkstate.core.descriptors import TimerServiceDescriptor
from flinkstate.core.errors import InvalidArgumentError

if TYPE_CHECKING:
    from flinkstate.backend.context import KeyContext

__all__ = ["Timer", "TimerService"]


class Timer(NamedTuple):
    """A fired (or listed) timer."""

    timestamp: int
    key: Any
    namespace: Any
    service: str


class TimerService:
    """One named timer service of one time domain (get it with `backend.timer_service(desc)`)."""

    def __init__(
        self,
        backend: KeyContext,
        desc: TimerServiceDescriptor,
        table: StateTable,
        on_timer: Callable[[Timer], Any] | None = None,
    ) -> None:
        self._be = backend
        self.descriptor = desc
        self._t = table
        self.on_timer = on_timer
        self._heap: list[tuple[int, int, Any]] = []
        self._seq = 0
        self._dead = 0
        self._namespaced = desc.namespace_type is not None
        # timers restored into the table before this service object existed
        self._rebuild()

    @property
    def name(self) -> str:
        """The timer service's name."""
        return self.descriptor.name

    @property
    def domain(self) -> str:
        """"event" or "processing"."""
        return self.descriptor.domain

    def _rebuild(self) -> None:
        heap = []
        t = self._t
        for b in t.buckets:
            for pk in list(b):
                self._seq += 1
                b[pk] = self._seq  # buckets loaded on restore are not shared with a snapshot
                heap.append((pk[2], self._seq, pk))
        heapq.heapify(heap)
        self._heap = heap
        self._dead = 0

    def _compact(self) -> None:
        live = []
        for b in self._t.buckets:
            for pk, seq in b.items():
                live.append((pk[2], seq, pk))
        heapq.heapify(live)
        self._heap = live
        self._dead = 0

    def _pk(self, timestamp: int, namespace: Any) -> Any:
        key = self._be._key
        if key is None:
            raise InvalidArgumentError(f"timer service {self.name!r} used without a current key: call set_current_key first")
        if isinstance(timestamp, bool) or not isinstance(timestamp, int):
            raise InvalidArgumentError(f"timer timestamp must be an int of epoch milliseconds, got {timestamp!r}")
        if namespace is not None and not self._namespaced:
            raise InvalidArgumentError(f"timer service {self.name!r} has no namespace_type; it cannot take a namespace")
        return (key, namespace, timestamp)

    def register(self, timestamp: int, namespace: Any = None) -> None:
        """Register a timer for the current key (no-op if the same timer exists)."""
        pk = self._pk(timestamp, namespace)
        t = self._t
        if t.get(pk) is not None:
            return
        self._seq += 1
        t.put(pk, self._seq)
        heapq.heappush(self._heap, (timestamp, self._seq, pk))

    def delete(self, timestamp: int, namespace: Any = None) -> None:
        """Delete a timer of the current key (no-op if absent)."""
        pk = self._pk(timestamp, namespace)
        if self._t.remove(pk) is not None:
            self._dead += 1
            if self._dead > 1024 and 2 * self._dead >= len(self._heap):
                self._compact()

    def contains(self, timestamp: int, namespace: Any = None) -> bool:
        """True when the current key has this timer."""
        return self._t.get(self._pk(timestamp, namespace)) is not None

    def next_timestamp(self) -> int | None:
        """Timestamp of the earliest timer (None when there is none)."""
        heap = self._heap
        t = self._t
        while heap:
            ts, seq, pk = heap[0]
            if t.get(pk) == seq:
                return ts
            heapq.heappop(heap)
            self._dead -= 1
        return None

    def advance(self, time: int, on_timer: Callable[[Timer], Any] | None = None) -> int:
        """Fire every timer with timestamp <= `time`, in order; returns how many fired."""
        cb = on_timer or self.on_timer
        heap = self._heap
        t = self._t
        be = self._be
        fired = 0
        while heap and heap[0][0] <= time:
            ts, seq, pk = heapq.heappop(heap)
            if t.get(pk) != seq:
                self._dead -= 1
                continue
            t.remove(pk)
            key, ns, _ = pk
            be._set_key_unchecked(key)
            if self._namespaced:
                be._namespace = ns
            fired += 1
            if cb is not None:
                cb(Timer(ts, key, ns, self.name))
            heap = self._heap  # a callback may have compacted the heap
        return fired

    def timers(self) -> list[Timer]:
        """Every registered timer, in firing order."""
        out = []
        for b in self._t.buckets:
            for pk, seq in b.items():
                out.append((pk[2], seq, pk))
        out.sort(key=lambda x: (x[0], x[1]))
        return [Timer(ts, pk[0], pk[1], self.name) for ts, _, pk in out]

    def __len__(self) -> int:
        return len(self._t)
