"""A small job runner: one keyed operator over N subtasks in one process, with checkpoints.

It is the host of the demo and the tests, not a stream processor: elements come from a
replayable iterable, are routed to the subtask owning their key group (Flink's assignment),
and processed by a `KeyedProcessFunction` with event-time and processing-time timers.
Every `checkpoint_interval` elements the runner takes a checkpoint: the synchronous part of
every subtask's snapshot runs between two elements, then one background thread writes all
subtasks' files and commits them as ONE checkpoint (one `CheckpointWriter` commit, files per
subtask key-group range) while processing continues. `KeyedJob.restore` resumes from the
latest (or a given) checkpoint with any parallelism; the source is replayed from the offset
stored in the checkpoint.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from flinkstate.backend.keyed import KeyedStateBackend, system_clock
from flinkstate.backend.snapshot import CompactionPolicy, KeyedSnapshot
from flinkstate.backend.timers import Timer, TimerService
from flinkstate.core.descriptors import KeyedStateDescriptor, TimerServiceDescriptor
from flinkstate.core.errors import CommitOutcomeUnknownError, InvalidArgumentError
from flinkstate.core.keygroups import (
    assign_key_group,
    default_max_parallelism,
    key_group_range,
    operator_index_for_key_group,
)
from flinkstate.flink.bridge.source import open_store
from flinkstate.runtime.coordinator import (
    CoordinatorContext,
    OperatorCoordinator,
    coordinator_table,
    parse_coordinator_records,
)
from flinkstate.store.registry import Pin, pin
from flinkstate.store.store import CheckpointStore

__all__ = ["KeyedProcessFunction", "Context", "RuntimeContext", "KeyedJob", "CheckpointStats", "JobResult",
           "EVENT_TIMERS", "PROCESSING_TIMERS"]

EVENT_TIMERS = "event-timers"
PROCESSING_TIMERS = "processing-timers"
MIN_WATERMARK = -(1 << 63)
MAX_WATERMARK = (1 << 63) - 1

PROP_SOURCE_OFFSET = "runner.source_offset"
PROP_WATERMARK = "runner.watermark"
PROP_MAX_TIMESTAMP = "runner.max_timestamp"


class RuntimeContext:
    """What `KeyedProcessFunction.open` gets: state registration and the subtask's identity."""

    def __init__(self, backend: KeyedStateBackend, subtask: int, parallelism: int) -> None:
        self.backend = backend
        self.index_of_this_subtask = subtask
        self.number_of_parallel_subtasks = parallelism
        self.max_parallelism = backend.max_parallelism

    def get_state(self, descriptor: KeyedStateDescriptor) -> Any:
        """A keyed state (value, list, map, reducing, aggregating) of this subtask."""
        return self.backend.get_state(descriptor)

    # Flink's names
    get_list_state = get_map_state = get_reducing_state = get_aggregating_state = get_state


class Context:
    """The context of `process_element` and `on_timer`: current key, timers, output."""

    def __init__(self, job: KeyedJob, subtask: int, backend: KeyedStateBackend, event: TimerService, proc: TimerService) -> None:
        self._job = job
        self.subtask = subtask
        self._backend = backend
        self._event = event
        self._proc = proc
        self.timestamp: int | None = None
        self.time_domain: str | None = None  # set in on_timer: "event" or "processing"
        self.namespace: Any = None

    @property
    def current_key(self) -> Any:
        """The key of the element or timer being processed."""
        return self._backend.get_current_key()

    def get_current_key(self) -> Any:
        """Flink's name of `current_key`."""
        return self._backend.get_current_key()

    def current_watermark(self) -> int:
        """The subtask's event-time watermark."""
        return self._backend.watermark

    def current_processing_time(self) -> int:
        """The job clock in epoch milliseconds."""
        return self._job.clock()

    def register_event_time_timer(self, timestamp: int) -> None:
        """Fire `on_timer` for the current key once the watermark reaches `timestamp` (deduplicated)."""
        self._event.register(timestamp)

    def delete_event_time_timer(self, timestamp: int) -> None:
        """Delete an event-time timer of the current key (no-op if absent)."""
        self._event.delete(timestamp)

    def register_processing_time_timer(self, timestamp: int) -> None:
        """Fire `on_timer` for the current key once processing time reaches `timestamp` (deduplicated)."""
        self._proc.register(timestamp)

    def delete_processing_time_timer(self, timestamp: int) -> None:
        """Delete a processing-time timer of the current key (no-op if absent)."""
        self._proc.delete(timestamp)

    def output(self, value: Any) -> None:
        """Emit a result (collected by the job's sink)."""
        self._job._emit(value)

    def send_to_coordinator(self, event: bytes) -> None:
        """Send an event to the operator coordinator (handled before the coordinator's part of any later checkpoint)."""
        if self._job.coordinator is None:
            raise InvalidArgumentError("this job has no operator coordinator")
        if not isinstance(event, (bytes, bytearray)):
            raise InvalidArgumentError(f"coordinator events are bytes, got {type(event).__name__}")
        self._job._send_to_coordinator(self.subtask, bytes(event))


class KeyedProcessFunction:
    """Override `open`, `process_element` and `on_timer` (Flink's KeyedProcessFunction)."""

    def open(self, ctx: RuntimeContext) -> None:  # noqa: B027 - optional hook
        """Register states here."""

    def process_element(self, value: Any, ctx: Context) -> None:
        """Handle one element; its key is current in `ctx`."""
        raise NotImplementedError

    def on_timer(self, timestamp: int, ctx: Context) -> None:  # noqa: B027 - optional hook
        """A timer of the current key fired (ctx.time_domain says which)."""

    def handle_operator_event(self, event: bytes, ctx: Context) -> None:  # noqa: B027 - optional hook
        """An event from the operator coordinator (no current key)."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Called at the end of the job."""


@dataclass
class CheckpointStats:
    """One checkpoint the runner took."""

    checkpoint_id: int
    status: str  # "completed", "failed", or "unknown" (the commit outcome could not be read: resolved before the next checkpoint)
    sync_ms: float  # longest synchronous pause of a subtask
    async_ms: float
    bytes: int = 0
    files: int = 0
    full_parts: int = 0
    delta_parts: int = 0
    source_offset: int = 0
    error: str | None = None


@dataclass
class JobResult:
    """What `KeyedJob.run` returns."""

    elements: int
    outputs: list[Any]
    checkpoints: list[CheckpointStats] = field(default_factory=list)
    fired_timers: int = 0
    seconds: float = 0.0


@dataclass
class _Subtask:
    index: int
    backend: KeyedStateBackend
    function: KeyedProcessFunction
    ctx: Context
    event: TimerService
    proc: TimerService


_SLICE_LOCK = threading.Lock()
_SLICE_USERS = 0
_SLICE_SAVED = 0.005


@contextlib.contextmanager
def _short_gil_slices(interval: float = 0.0005) -> Iterator[None]:
    """While an asynchronous checkpoint runs, hand the GIL over every 0.5 ms instead of 5 ms.

    The upload thread gives the GIL up at every Parquet and Delta call; with the default
    switch interval the busy processing thread keeps it up to 5 ms each time, which made the
    asynchronous part several times slower than the same work done alone.
    """
    global _SLICE_USERS, _SLICE_SAVED
    with _SLICE_LOCK:
        if _SLICE_USERS == 0:
            _SLICE_SAVED = sys.getswitchinterval()
            sys.setswitchinterval(min(interval, _SLICE_SAVED))
        _SLICE_USERS += 1
    try:
        yield
    finally:
        with _SLICE_LOCK:
            _SLICE_USERS -= 1
            if _SLICE_USERS == 0:
                sys.setswitchinterval(_SLICE_SAVED)


class KeyedJob:
    """One keyed operator (uid) over `parallelism` subtasks with periodic checkpoints (see module doc)."""

    def __init__(
        self,
        uid: str,
        function: Callable[[], KeyedProcessFunction],
        *,
        key_selector: Callable[[Any], Any],
        key_type: pa.DataType | None = None,
        parallelism: int = 1,
        max_parallelism: int | None = None,
        checkpoint_path: str | None = None,
        storage_options: dict[str, Any] | None = None,
        checkpoint_interval: int | None = None,
        timestamp_assigner: Callable[[Any], int] | None = None,
        out_of_orderness_ms: int = 0,
        watermark_interval: int = 1,
        clock: Callable[[], int] | None = None,
        compaction: CompactionPolicy | None = None,
        incremental: bool = True,
        retain: int | None = None,
        on_checkpoint: Callable[[CheckpointStats], Any] | None = None,
        num_buckets: int = 1024,
        coordinator: Callable[[], OperatorCoordinator] | None = None,
        max_concurrent_checkpoints: int = 1,
        wait_for_previous_checkpoint: bool = False,
        _restore_from: int | None = None,
    ) -> None:
        if parallelism < 1:
            raise InvalidArgumentError(f"parallelism must be >= 1, got {parallelism}")
        self.uid = uid
        self.function_factory = function
        self.key_selector = key_selector
        self.key_type = key_type if key_type is not None else pa.string()
        self.parallelism = parallelism
        self.checkpoint_interval = checkpoint_interval
        self.timestamp_assigner = timestamp_assigner
        self.out_of_orderness_ms = out_of_orderness_ms
        self.watermark_interval = max(1, watermark_interval)
        self.clock: Callable[[], int] = clock or system_clock
        self.retain = retain
        self.max_concurrent_checkpoints = max(1, max_concurrent_checkpoints)
        self.wait_for_previous_checkpoint = wait_for_previous_checkpoint
        self._checkpoint_due = False
        self.on_checkpoint = on_checkpoint
        self.store: CheckpointStore | None = open_store(checkpoint_path, storage_options) if checkpoint_path is not None else None
        self.outputs: list[Any] = []
        self.checkpoints: list[CheckpointStats] = []
        self.source_offset = 0
        self.watermark = MIN_WATERMARK
        self._max_ts = MIN_WATERMARK
        self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"flinkstate-ckpt-{uid}")
        self._futures: list[concurrent.futures.Future[Any]] = []
        self._stats_lock = threading.Lock()
        self._unknown: set[int] = set()  # checkpoints whose commit outcome was unknown, resolved at the next trigger
        self._base_lock = threading.Lock()
        self._fired = 0
        self._route: dict[Any, int] = {}

        backends: list[KeyedStateBackend] = []
        if _restore_from is not None:
            assert self.store is not None
            rec = self.store.record(_restore_from)
            maxp = self.store.metadata(rec.checkpoint_id).operator(uid).max_parallelism or rec.max_parallelism
            if max_parallelism is not None and max_parallelism != maxp:
                raise InvalidArgumentError(f"checkpoint {_restore_from} has max parallelism {maxp}; it cannot change on restore (got {max_parallelism})")
            backends = KeyedStateBackend.restore_all(
                self.store, uid, parallelism, checkpoint_id=rec.checkpoint_id, clock=self.clock,
                num_buckets=num_buckets, compaction=compaction, incremental=incremental)
            meta = self.store.metadata(rec.checkpoint_id)
            self.source_offset = int(meta.properties.get(PROP_SOURCE_OFFSET, "0"))
            self.watermark = int(meta.properties.get(PROP_WATERMARK, str(MIN_WATERMARK)))
            self._max_ts = int(meta.properties.get(PROP_MAX_TIMESTAMP, str(self.watermark)))
            if backends and backends[0].key_type != self.key_type and key_type is not None:
                raise InvalidArgumentError(f"checkpoint keys are {backends[0].key_type}, the job declares {self.key_type}")
            if backends:
                self.key_type = backends[0].key_type
        else:
            maxp = max_parallelism or default_max_parallelism(parallelism)
            for i in range(parallelism):
                backends.append(KeyedStateBackend(
                    max_parallelism=maxp, key_group_range=key_group_range(maxp, parallelism, i), key_type=self.key_type,
                    clock=self.clock, num_buckets=num_buckets, compaction=compaction, incremental=incremental))
        self.max_parallelism = maxp
        self.subtasks: list[_Subtask] = []
        for i, be in enumerate(backends):
            be.watermark = self.watermark
            event = be.timer_service(TimerServiceDescriptor(name=EVENT_TIMERS, domain="event", key_type=self.key_type))
            proc = be.timer_service(TimerServiceDescriptor(name=PROCESSING_TIMERS, domain="processing", key_type=self.key_type))
            fn = function()
            ctx = Context(self, i, be, event, proc)
            st = _Subtask(i, be, fn, ctx, event, proc)
            event.on_timer = self._timer_callback(st, "event")
            proc.on_timer = self._timer_callback(st, "processing")
            fn.open(RuntimeContext(be, i, parallelism))
            self.subtasks.append(st)
        self.coordinator: OperatorCoordinator | None = None
        self._coord_ctx = CoordinatorContext(parallelism)
        # the coordinator's mailbox (drained on the processing thread): ("event", subtask, payload),
        # ("last", subtask, checkpoint id), ("complete" | "aborted", checkpoint id)
        self._mailbox: deque[tuple[Any, ...]] = deque()
        self._gateway_closed = [False] * parallelism
        self._subtask_buffers: list[list[bytes]] = [[] for _ in range(parallelism)]
        if coordinator is not None:
            self.coordinator = coordinator()
            if _restore_from is not None:
                assert self.store is not None
                state, events, op_events = None, [], []
                if self.store.operator(uid, _restore_from).has_coordinator:
                    state, events, op_events = parse_coordinator_records(self.store.read_coordinator(uid, _restore_from))
                self.coordinator.reset_to_checkpoint(_restore_from, state)
                # events buffered in the checkpoint are replayed (to subtask % parallelism after a rescale)
                self._coord_ctx.outbox.extend((s % parallelism, e) for s, e in events)
                self._mailbox.extend(("event", s % parallelism, e) for s, e in op_events)
            self.coordinator.start(self._coord_ctx)
        if self.store is not None:
            recs = self.store.checkpoints(include_discarded=True)
            self._next_cid = (max(r.checkpoint_id for r in recs) + 1) if recs else 1
        else:
            self._next_cid = 1

    @classmethod
    def restore(cls, uid: str, function: Callable[[], KeyedProcessFunction], *, checkpoint_path: str,
                checkpoint_id: int | None = None, **kwargs: Any) -> KeyedJob:
        """A job resuming from a committed checkpoint (default the latest), with any parallelism."""
        store = open_store(checkpoint_path, kwargs.get("storage_options"))
        rec = store.record(checkpoint_id)
        return cls(uid, function, checkpoint_path=checkpoint_path, _restore_from=rec.checkpoint_id, **kwargs)

    # ------------------------------------------------------------------ processing
    def _emit(self, value: Any) -> None:
        self.outputs.append(value)

    def _timer_callback(self, st: _Subtask, domain: str) -> Callable[[Timer], None]:
        fn = st.function
        ctx = st.ctx

        def cb(timer: Timer) -> None:
            ctx.timestamp = timer.timestamp
            ctx.time_domain = domain
            ctx.namespace = timer.namespace
            self._fired += 1
            fn.on_timer(timer.timestamp, ctx)

        return cb

    def _subtask_of(self, key: Any) -> int:
        i = self._route.get(key)
        if i is None:
            kg = assign_key_group(key, self.max_parallelism, self.key_type)
            i = operator_index_for_key_group(self.max_parallelism, self.parallelism, kg)
            if len(self._route) > (1 << 20):
                self._route.clear()
            self._route[key] = i
        return i

    def advance_watermark(self, watermark: int) -> None:
        """Advance every subtask's watermark (fires due event-time timers)."""
        if watermark <= self.watermark:
            return
        self.watermark = watermark
        for st in self.subtasks:
            st.backend.advance_watermark(watermark)

    def advance_processing_time(self, now: int | None = None) -> None:
        """Fire due processing-time timers in every subtask."""
        now = self.clock() if now is None else now
        for st in self.subtasks:
            st.backend.advance_processing_time(now)

    def _send_to_coordinator(self, subtask: int, event: bytes) -> None:
        if self._gateway_closed[subtask]:
            self._subtask_buffers[subtask].append(event)  # after its last event: stored with its snapshot
        else:
            self._mailbox.append(("event", subtask, event))

    def run_coordinator(self, last_of: int | None = None) -> None:
        """Run the coordinator's mailbox on this (the processing) thread; with `last_of`, until every
        subtask's last event of that checkpoint arrived (later items stay queued)."""
        coord = self.coordinator
        if coord is None:
            self._mailbox.clear()
            return
        waiting = set(range(self.parallelism)) if last_of is not None else set()
        mailbox = self._mailbox
        while mailbox and (last_of is None or waiting):
            item = mailbox.popleft()
            if item[0] == "event":
                coord.handle_event_from_operator(item[1], item[2])
            elif item[0] == "last":
                if item[2] == last_of:
                    waiting.discard(item[1])
            elif item[0] == "complete":
                coord.notify_checkpoint_complete(item[1])
            else:
                coord.notify_checkpoint_aborted(item[1])
        if waiting:
            raise InvalidArgumentError(f"checkpoint {last_of}: no last event from subtasks {sorted(waiting)}")

    def deliver_coordinator_events(self) -> int:
        """Run the coordinator's mailbox, then deliver its queued events to their subtasks (done at every element boundary)."""
        if self._mailbox:
            self.run_coordinator()
        outbox = self._coord_ctx.outbox
        n = 0
        while outbox:
            subtask, event = outbox.popleft()
            st = self.subtasks[subtask]
            st.function.handle_operator_event(event, st.ctx)
            n += 1
        return n

    def process(self, element: Any) -> None:
        """Process one element on the subtask owning its key."""
        if self._mailbox or self._coord_ctx.outbox:
            self.deliver_coordinator_events()
        key = self.key_selector(element)
        st = self.subtasks[self._subtask_of(key)]
        st.backend.set_current_key(key)
        ctx = st.ctx
        ts = self.timestamp_assigner(element) if self.timestamp_assigner is not None else None
        ctx.timestamp = ts
        ctx.time_domain = None
        ctx.namespace = None
        st.function.process_element(element, ctx)
        if ts is not None and ts > self._max_ts:
            self._max_ts = ts

    def run(self, source: Iterable[Any], *, limit: int | None = None, final_watermark: bool = True,
            processing_time_interval: int = 0) -> JobResult:
        """Process `source` from the stored offset (up to `limit` more elements), checkpointing as configured.

        `final_watermark` fires all remaining event-time timers at the end (as Flink does at
        the end of a bounded input). Waits for pending checkpoints before returning.
        """
        t0 = time.perf_counter()
        start = self.source_offset
        n = 0
        it = iter(source)
        for _ in range(start):
            next(it, None)
        interval = self.checkpoint_interval
        self._futures = [f for f in self._futures if not f.done() or f.exception() is not None]
        wm_every = self.watermark_interval
        for element in it:
            if limit is not None and n >= limit:
                break
            self.process(element)
            n += 1
            self.source_offset += 1
            if self.timestamp_assigner is not None and self.source_offset % wm_every == 0:
                self.advance_watermark(self._max_ts - self.out_of_orderness_ms - 1)
            if processing_time_interval and self.source_offset % processing_time_interval == 0:
                self.advance_processing_time()
            if interval and self.store is not None:
                if self.source_offset % interval == 0:
                    self._checkpoint_due = True
                if self._checkpoint_due:
                    self._maybe_trigger()
        if final_watermark and (limit is None or n < limit):
            self.advance_watermark(MAX_WATERMARK)
        self.wait_for_checkpoints()
        return JobResult(elements=n, outputs=self.outputs, checkpoints=list(self.checkpoints), fired_timers=self._fired,
                         seconds=time.perf_counter() - t0)

    # ------------------------------------------------------------------ checkpoints
    def _maybe_trigger(self) -> None:
        """Trigger a due checkpoint unless `max_concurrent_checkpoints` are in flight (then at a later element)."""
        inflight = [f for f in self._futures if not f.done()]
        if len(inflight) >= self.max_concurrent_checkpoints:
            if not self.wait_for_previous_checkpoint:
                return  # as Flink: the next checkpoint waits for the running one
            concurrent.futures.wait(inflight)
        self._checkpoint_due = False
        self.trigger_checkpoint()

    def trigger_checkpoint(self, *, full: bool = False) -> concurrent.futures.Future[Any]:
        """Take a checkpoint of every subtask now; the files are written and committed in the background."""
        if self.store is None:
            raise InvalidArgumentError("this job has no checkpoint_path")
        self._resolve_unknown()
        cid = self._next_cid
        self._next_cid += 1
        coord_part = self._coordinator_checkpoint(cid) if self.coordinator is not None else None
        snaps: list[KeyedSnapshot] = []
        sync = 0.0
        with self._base_lock:  # no completion moves the subtasks' base between their snapshots and the pin
            for st in self.subtasks:
                t = time.perf_counter()
                snaps.append(st.backend.snapshot(cid, full=full))
                sync = max(sync, time.perf_counter() - t)
            # the pending snapshot pins the checkpoint it builds on until it completes or aborts
            reused = [e.path for s in snaps for p in s.parts for e in p.reused]
            pins = [pin(self.store, b, reused) for b in {s.base_checkpoint_id for s in snaps}]
        offset, wm, max_ts = self.source_offset, self.watermark, self._max_ts
        coord = None
        if coord_part is not None:
            coord = self._reopen_gateways(*coord_part)
        fut = self._executor.submit(self._complete, cid, snaps, offset, wm, max_ts, sync, coord, pins)
        self._futures.append(fut)
        return fut

    def _resolve_unknown(self) -> None:
        """Checkpoints whose commit outcome was unknown: the log tells now whether each landed (complete) or not."""
        with self._stats_lock:
            unknown, self._unknown = sorted(self._unknown), set()
        if not unknown:
            return
        assert self.store is not None
        committed = {r.checkpoint_id for r in self.store.checkpoints(include_discarded=True)}
        with self._base_lock:
            for st in self.subtasks:
                st.backend.resolve_unknown(committed)
        if self.coordinator is not None:
            self._mailbox.extend(("complete" if c in committed else "aborted", c) for c in unknown)

    def _coordinator_checkpoint(self, cid: int) -> tuple[bytes, list[tuple[int, bytes]]]:
        """FLINK-28639, before the subtasks' snapshots: every subtask sends its last event and closes its
        gateway; the coordinator handles everything up to those, takes its state and the events no
        subtask has seen yet, and closes its gateway."""
        assert self.coordinator is not None
        for i in range(self.parallelism):
            self._mailbox.append(("last", i, cid))
            self._gateway_closed[i] = True
        self.run_coordinator(last_of=cid)
        state = self.coordinator.checkpoint_coordinator(cid)
        undelivered = list(self._coord_ctx.outbox)
        self._coord_ctx.close_gateway()
        return state, undelivered

    def _reopen_gateways(self, state: bytes, undelivered: list[tuple[int, bytes]]) -> pa.Table:
        """After the subtasks' snapshots: store what is in flight, then open both gateways again
        (subtasks' buffered events go to the coordinator, the coordinator's held ones to the subtasks)."""
        buffered = [(i, e) for i, buf in enumerate(self._subtask_buffers) for e in buf]
        table = coordinator_table(state, undelivered, buffered)
        for i, buf in enumerate(self._subtask_buffers):
            self._gateway_closed[i] = False
            self._mailbox.extend(("event", i, e) for e in buf)
            buf.clear()
        self._coord_ctx.open_gateway()
        return table

    def _complete(self, cid: int, snaps: list[KeyedSnapshot], offset: int, wm: int, max_ts: int, sync: float,
                  coord: pa.Table | None = None, pins: list[Pin] | None = None) -> CheckpointStats:
        assert self.store is not None
        try:
            with _short_gil_slices():
                return self._complete_checkpoint(cid, snaps, offset, wm, max_ts, sync, coord)
        finally:
            for p in pins or []:
                p.release()

    def _complete_checkpoint(self, cid: int, snaps: list[KeyedSnapshot], offset: int, wm: int, max_ts: int, sync: float,
                             coord: pa.Table | None) -> CheckpointStats:
        assert self.store is not None
        t0 = time.perf_counter()
        bases = {s.base_checkpoint_id for s in snaps}
        base = next(iter(bases)) if len(bases) == 1 else None
        stats = CheckpointStats(cid, "completed", sync * 1000, 0.0, source_offset=offset)
        try:
            if len(bases) > 1 and any(s.incremental for s in snaps):
                raise InvalidArgumentError(f"checkpoint {cid}: subtasks have different base checkpoints {bases}")
            with self.store.begin(checkpoint_id=cid, base=base) as w:
                w.declare_max_parallelism(self.uid, self.max_parallelism)
                for s in snaps:
                    files = s.write(w, self.uid)
                    stats.files += len(files)
                    stats.bytes += sum(f.bytes for f in files)
                    stats.full_parts += sum(1 for p in s.parts if p.mode == "full")
                    stats.delta_parts += sum(1 for p in s.parts if p.mode == "delta")
                w.set_parallelism(self.uid, self.parallelism)
                w.set_property(PROP_SOURCE_OFFSET, str(offset))
                w.set_property(PROP_WATERMARK, str(wm))
                w.set_property(PROP_MAX_TIMESTAMP, str(max_ts))
                if coord is not None:
                    w.put_coordinator(self.uid, coord)
        except CommitOutcomeUnknownError as e:  # resolved from the log before the next checkpoint
            for s in snaps:
                s.backend.notify_checkpoint_unknown(cid)
            with self._stats_lock:
                self._unknown.add(cid)
            stats.status = "unknown"
            stats.error = f"{type(e).__name__}: {e}"
        except Exception as e:  # noqa: BLE001 - a failed checkpoint does not fail the job
            for s in snaps:
                s.release()
                s.backend.notify_checkpoint_aborted(cid)
            if self.coordinator is not None:
                self._mailbox.append(("aborted", cid))  # run on the coordinator thread, not here
            stats.status = "failed"
            stats.error = f"{type(e).__name__}: {e}"
        else:
            with self._base_lock:
                for s in snaps:
                    s.backend.notify_checkpoint_complete(cid)
            if self.coordinator is not None:
                self._mailbox.append(("complete", cid))  # run on the coordinator thread, not here
            if self.retain:
                self.store.retain(self.retain)
        stats.async_ms = (time.perf_counter() - t0) * 1000
        with self._stats_lock:
            self.checkpoints.append(stats)
        if self.on_checkpoint is not None:
            self.on_checkpoint(stats)
        return stats

    def wait_for_checkpoints(self) -> list[CheckpointStats]:
        """Block until every triggered checkpoint completed or failed."""
        out = [f.result() for f in self._futures]
        self._futures = []
        self.run_coordinator()  # their notifications, on this thread
        return out

    def close(self) -> None:
        """Wait for checkpoints, call `close` on the functions and stop the checkpoint thread."""
        self.wait_for_checkpoints()
        for st in self.subtasks:
            st.function.close()
        self._executor.shutdown(wait=True)

    def __enter__(self) -> KeyedJob:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def backends(self) -> list[KeyedStateBackend]:
        """The subtasks' state backends, by subtask index."""
        return [st.backend for st in self.subtasks]
