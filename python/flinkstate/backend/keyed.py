"""The embedded keyed state backend: Flink's heap backend semantics over format v1 checkpoints.

A `KeyedStateBackend` owns one key-group range of a job with a given max parallelism. It
holds keyed states (value, list, map, reducing, aggregating) and timer services in
versioned copy-on-write tables, takes snapshots whose synchronous part only freezes bucket
references (O(buckets), independent of the number of entries), and writes them
asynchronously as full or incremental (delta) files into a `CheckpointWriter`:

    backend = KeyedStateBackend(max_parallelism=128, key_group_range=(0, 63))
    count = backend.get_state(ValueStateDescriptor(name="count", value_type=pa.int64()))
    backend.set_current_key("alice"); count.update((count.value() or 0) + 1)
    snap = backend.snapshot(checkpoint_id)            # synchronous part, microseconds
    with store.begin(checkpoint_id=checkpoint_id, base=backend.base_checkpoint_id) as w:
        snap.write(w, "my-operator")                  # asynchronous part (any thread)
    backend.notify_checkpoint_complete(checkpoint_id)

`KeyedStateBackend.restore(store, operator, ...)` rebuilds a backend for any key-group range
(scale up or down) from any committed checkpoint or savepoint, timers included.
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from flinkstate.backend.arrow_io import arrow_to_state_items, arrow_to_timer_keys
from flinkstate.backend.container_states import ListState, MapState
from flinkstate.backend.snapshot import (
    CompactionPolicy,
    KeyedSnapshot,
    _Chain,
    _Part,
    gc_paused,
)
from flinkstate.backend.states import AggregatingState, ReducingState, State, ValueState
from flinkstate.backend.tables import DEFAULT_BUCKETS, StateTable, VersionClock
from flinkstate.backend.timers import Timer, TimerService
from flinkstate.core.descriptors import (
    KeyedStateDescriptor,
    TimerServiceDescriptor,
    same_schema,
)
from flinkstate.core.errors import (
    CommitConflictError,
    CommitOutcomeUnknownError,
    InvalidArgumentError,
    KeyGroupOutOfRangeError,
    SchemaMismatchError,
    StateNotFoundError,
)
from flinkstate.core.keygroups import assign_key_group
from flinkstate.core.keygroups import key_group_range as _kg_range
from flinkstate.format import constants as C
from flinkstate.format.datafile import FileEntry
from flinkstate.format.filekind import FileKind, Scope
from flinkstate.format.merge import order_entries, overlaps

if TYPE_CHECKING:
    from flinkstate.store.store import CheckpointStore
    from flinkstate.store.writer import CheckpointWriter

__all__ = ["KeyedStateBackend", "KeyedSnapshot", "CompactionPolicy", "system_clock"]

_KG_CACHE_LIMIT = 1 << 20

STATE_CLASSES: dict[str, type[State]] = {
    "value": ValueState,
    "list": ListState,
    "map": MapState,
    "reducing": ReducingState,
    "aggregating": AggregatingState,
}


def system_clock() -> int:
    """Processing time in epoch milliseconds."""
    return int(time.time() * 1000)


class KeyedStateBackend:
    """Keyed state and timers for one key-group range (see module doc)."""

    def __init__(
        self,
        *,
        max_parallelism: int = 128,
        key_group_range: tuple[int, int] | None = None,
        key_type: pa.DataType | None = None,
        clock: Callable[[], int] | None = None,
        num_buckets: int = DEFAULT_BUCKETS,
        compaction: CompactionPolicy | None = None,
        incremental: bool = True,
        reuse_aborted: bool = True,
    ) -> None:
        if isinstance(max_parallelism, bool) or not isinstance(max_parallelism, int) or not 1 <= max_parallelism <= 32768:
            raise InvalidArgumentError(f"max_parallelism must be in [1, 32768], got {max_parallelism!r}")
        if key_group_range is None:
            key_group_range = (0, max_parallelism - 1)
        lo, hi = int(key_group_range[0]), int(key_group_range[1])
        if not 0 <= lo <= hi < max_parallelism:
            raise InvalidArgumentError(f"key_group_range {key_group_range} is not inside [0, {max_parallelism - 1}]")
        self.max_parallelism = max_parallelism
        self.key_group_range = (lo, hi)
        self.key_type = key_type if key_type is not None else pa.string()
        self.clock: Callable[[], int] = clock or system_clock
        self.num_buckets = num_buckets
        self.compaction = compaction or CompactionPolicy()
        self.incremental = incremental
        # FLINK-24611: the next checkpoint references what an aborted one uploaded, not re-sends it
        self.reuse_aborted = reuse_aborted
        self._versions = VersionClock()
        self._lock = threading.RLock()
        self._key: Any = None
        self._key_group = -1
        self._namespace: Any = None
        self._kg_cache: dict[Any, int] = {}
        self._tables: dict[str, StateTable] = {}
        self._descs: dict[str, KeyedStateDescriptor] = {}
        self._states: dict[str, State] = {}
        self._timer_tables: dict[str, StateTable] = {}
        self._timer_descs: dict[str, TimerServiceDescriptor] = {}
        self._timer_services: dict[str, TimerService] = {}
        self._every_record: list[State] = []
        self.watermark = -(1 << 63)
        self.processing_time = -(1 << 63)
        # incremental bookkeeping: the last completed checkpoint and each state's chain in it
        self.base_checkpoint_id: int | None = None
        self._chains: dict[tuple[str, str], _Chain] = {}
        self._pending: dict[int, KeyedSnapshot] = {}
        #: checkpoints whose commit outcome was unknown (CommitOutcomeUnknownError): resolved from the log at the next one
        self._unknown: set[int] = set()
        self._last_snapshot_id = 0
        # per (scope, name): files of aborted attempts that hold every change up to a checkpoint id
        self._reuse: dict[tuple[str, str], tuple[list[FileEntry], int]] = {}

    def __repr__(self) -> str:
        return (f"KeyedStateBackend(max_parallelism={self.max_parallelism}, key_group_range={self.key_group_range}, "
                f"states={sorted(self._descs)}, timer_services={sorted(self._timer_descs)})")

    # ------------------------------------------------------------------ key context
    def set_current_key(self, key: Any) -> None:
        """Make `key` current; KeyGroupOutOfRangeError if its key group is not owned by this backend."""
        kg = self._kg_cache.get(key)
        if kg is None:
            if key is None:
                raise InvalidArgumentError("key must not be None: Flink rejects null keys")
            kg = assign_key_group(key, self.max_parallelism, self.key_type)
            lo, hi = self.key_group_range
            if not lo <= kg <= hi:
                raise KeyGroupOutOfRangeError(
                    f"key {key!r} belongs to key group {kg}, outside this backend's key-group range [{lo}, {hi}] "
                    f"(max parallelism {self.max_parallelism})"
                )
            if len(self._kg_cache) >= _KG_CACHE_LIMIT:
                self._kg_cache.clear()
            self._kg_cache[key] = kg
        self._key = key
        self._key_group = kg
        if self._every_record:
            for s in self._every_record:
                s.incremental_cleanup()

    def _set_key_unchecked(self, key: Any) -> None:
        self._key = key
        self._key_group = -1

    def get_current_key(self) -> Any:
        """The current key (None before the first `set_current_key`)."""
        return self._key

    def set_current_namespace(self, namespace: Any) -> None:
        """The namespace states with a namespace_type use (unless the state object sets its own)."""
        self._namespace = namespace

    def get_current_namespace(self) -> Any:
        """The backend-wide current namespace."""
        return self._namespace

    # ------------------------------------------------------------------ states
    def _check_key_type(self, what: str, key_type: pa.DataType) -> None:
        if key_type != self.key_type:
            raise SchemaMismatchError(f"{what} declares key_type {key_type} but the backend's keys are {self.key_type}")

    def get_state(self, descriptor: KeyedStateDescriptor) -> Any:
        """The state object of a descriptor (created on first use; restored state is bound here)."""
        name = descriptor.name
        s = self._states.get(name)
        if s is not None:
            if s.descriptor.to_dict() != descriptor.to_dict():
                raise SchemaMismatchError(f"state {name!r} is already registered with another declaration: {s.descriptor}")
            return s
        if name in self._timer_descs:
            raise InvalidArgumentError(f"{name!r} is already a timer service of this backend")
        self._check_key_type(f"state {name!r}", descriptor.key_type)
        old = self._descs.get(name)
        if old is not None and not same_schema(old, descriptor):  # a new TTL config is fine, TTL on/off is not
            raise SchemaMismatchError(
                f"state {name!r} was restored as {old.kind} {old.to_dict()} but is now declared as {descriptor.kind} "
                f"{descriptor.to_dict()}; state schema migration is not supported"
            )
        t = self._tables.get(name)
        if t is None:
            t = self._new_table(descriptor.kind)
            self._tables[name] = t
        self._descs[name] = descriptor
        cls = STATE_CLASSES[descriptor.kind]
        s = cls(self, descriptor, t)
        self._states[name] = s
        if s.cleanup_every_record:
            self._every_record.append(s)
        return s

    def _new_table(self, kind: str) -> StateTable:
        # every kind carries per-entry versions for copy-on-write: list/map values are containers
        # changed in place, other values are handed to user code that may mutate them
        t = StateTable(self._versions, self.num_buckets, containers=True)
        if kind == "map":
            t.track_changes = False  # map state tracks (pk, user_key) itself
        return t

    def timer_service(self, descriptor: TimerServiceDescriptor, on_timer: Callable[[Timer], Any] | None = None) -> TimerService:
        """The timer service of a descriptor (created on first use; restored timers are bound here)."""
        name = descriptor.name
        ts = self._timer_services.get(name)
        if ts is not None:
            if ts.descriptor.to_dict() != descriptor.to_dict():
                raise SchemaMismatchError(f"timer service {name!r} is already registered with another declaration")
            if on_timer is not None:
                ts.on_timer = on_timer
            return ts
        if name in self._descs:
            raise InvalidArgumentError(f"{name!r} is already a keyed state of this backend")
        self._check_key_type(f"timer service {name!r}", descriptor.key_type)
        old = self._timer_descs.get(name)
        if old is not None and old.to_dict() != descriptor.to_dict():
            raise SchemaMismatchError(f"timer service {name!r} was restored as {old.to_dict()} but is now declared as {descriptor.to_dict()}")
        t = self._timer_tables.get(name)
        if t is None:
            t = self._timer_tables[name] = StateTable(self._versions, self.num_buckets)
        self._timer_descs[name] = descriptor
        ts = TimerService(self, descriptor, t, on_timer)
        self._timer_services[name] = ts
        return ts

    def state_names(self) -> list[str]:
        """Keyed states of this backend (registered or restored)."""
        return sorted(self._descs)

    def timer_service_names(self) -> list[str]:
        """Timer services of this backend (registered or restored)."""
        return sorted(self._timer_descs)

    def num_entries(self, name: str | None = None) -> int:
        """Entries of one state (list/map: keys) or of all states and timers."""
        if name is not None:
            if name in self._tables:
                return len(self._tables[name])
            if name in self._timer_tables:
                return len(self._timer_tables[name])
            raise StateNotFoundError(f"no state {name!r}; states: {self.state_names()}, timer services: {self.timer_service_names()}")
        return sum(len(t) for t in self._tables.values()) + sum(len(t) for t in self._timer_tables.values())

    def keys(self, name: str) -> list[Any]:
        """Keys with an entry in a state (Flink's getKeys, for the default/any namespace)."""
        t = self._tables.get(name)
        if t is None:
            raise StateNotFoundError(f"no state {name!r}; states: {self.state_names()}")
        desc = self._descs[name]
        out = {pk[0] if desc.namespace_type is not None else pk for pk, _ in t.items()}
        return list(out)

    # ------------------------------------------------------------------ time
    def advance_watermark(self, watermark: int, on_timer: Callable[[Timer], Any] | None = None) -> int:
        """Fire event-time timers with timestamp <= watermark (per service, in order); returns how many."""
        if watermark > self.watermark:
            self.watermark = watermark
        fired = 0
        for ts in list(self._timer_services.values()):
            if ts.domain == "event":
                fired += ts.advance(watermark, on_timer)
        return fired

    def advance_processing_time(self, time_ms: int, on_timer: Callable[[Timer], Any] | None = None) -> int:
        """Fire processing-time timers with timestamp <= time_ms; returns how many."""
        if time_ms > self.processing_time:
            self.processing_time = time_ms
        fired = 0
        for ts in list(self._timer_services.values()):
            if ts.domain == "processing":
                fired += ts.advance(time_ms, on_timer)
        return fired

    # ------------------------------------------------------------------ snapshots
    def snapshot(self, checkpoint_id: int, *, full: bool = False) -> KeyedSnapshot:
        """The synchronous part of a checkpoint: freeze every table (no copy of state or timers).

        Parts are written as deltas against `base_checkpoint_id` unless `full` is asked, the
        backend is not incremental, the state is new since the base, or the compaction
        policy says the chain is too long or too large.
        """
        t0 = time.perf_counter()
        now = self.clock()
        parts: list[_Part] = []
        with self._lock:
            if checkpoint_id in self._pending:
                raise InvalidArgumentError(f"checkpoint {checkpoint_id} is already being taken by this backend")
            version = self._versions.take()
            base = self.base_checkpoint_id
            for scope, tables, descs in (("keyed", self._tables, self._descs), ("timers", self._timer_tables, self._timer_descs)):
                for name, t in tables.items():
                    chain = self._chains.get((scope, name))
                    reuse = None if full or not self.incremental else self._reuse.get((scope, name))
                    if reuse is not None and reuse[1] >= checkpoint_id:
                        reuse = None  # ids must increase for files to merge in order: write the changes again
                    if reuse is not None:
                        chain = _chain_after(chain, reuse[0])
                    if full:
                        mode, reason = "full", "requested"
                    elif not self.incremental or (base is None and chain is None):
                        mode, reason = "full", "first"
                    elif chain is None:
                        mode, reason = "full", "new-state"
                    elif self.compaction.needs_full(chain.full_bytes, chain.deltas, chain.delta_bytes):
                        mode, reason = "full", "compaction"
                    else:
                        mode, reason = "delta", ""
                    if mode == "delta" and reuse is not None:
                        part = _Part(name, scope, descs[name], t.freeze(checkpoint_id, version, reuse[1]), mode, reason)
                        part.reused = list(reuse[0])
                    else:
                        part = _Part(name, scope, descs[name], t.freeze(checkpoint_id, version), mode, reason)
                    parts.append(part)
            snap = KeyedSnapshot(self, checkpoint_id, version, parts, now, 0.0)
            self._last_snapshot_id = max(self._last_snapshot_id, checkpoint_id)
            self._pending[checkpoint_id] = snap
        snap.sync_seconds = time.perf_counter() - t0
        return snap

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        """The checkpoint committed: it becomes the base of the next incremental snapshot."""
        with self._lock:
            snap = self._pending.pop(checkpoint_id, None)
            for cid in [c for c in self._pending if c < checkpoint_id]:
                self._pending.pop(cid)._release_unless_writing()  # subsumed
            if snap is None or not snap.written:
                return
            for p in snap.parts:
                key = (p.scope, p.name)
                if p.mode == "full":
                    self._chains[key] = _Chain(p.bytes, 0, 0)
                else:
                    self._chains[key] = _chain_after(self._chains.get(key), p.reused + p.files) or _Chain()
            for tables in (self._tables, self._timer_tables):
                for t in tables.values():
                    t.completed(checkpoint_id)
            self.base_checkpoint_id = checkpoint_id
            # aborted attempts up to this one are subsumed: their files are no longer needed
            self._reuse = {k: v for k, v in self._reuse.items() if v[1] > checkpoint_id}

    def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
        """The checkpoint failed: the next one references the files it uploaded (FLINK-24611) and
        writes only the changes made since; what it did not upload stays pending."""
        with self._lock:
            snap = self._pending.pop(checkpoint_id, None)
            if snap is not None and snap.written and self.reuse_aborted and (
                    self.base_checkpoint_id is None or checkpoint_id > self.base_checkpoint_id):
                for p in snap.parts:
                    if p.mode == "full" and not p.files:
                        continue  # nothing to reference: the next checkpoint writes these changes again
                    self._reuse[(p.scope, p.name)] = (p.files if p.mode == "full" else p.reused + p.files, checkpoint_id)
        if snap is not None:
            snap._release_unless_writing()

    def notify_checkpoint_unknown(self, checkpoint_id: int) -> None:
        """The checkpoint's commit outcome is unknown (CommitOutcomeUnknownError): neither complete nor aborted until
        `resolve_unknown` learns from the log whether it landed."""
        with self._lock:
            self._unknown.add(checkpoint_id)

    def resolve_unknown(self, committed: set[int]) -> None:
        """Checkpoints whose commit outcome was unknown: complete if `committed` (every id in the log, retained or
        discarded since) holds them, else aborted, so the next snapshot builds on what really landed."""
        with self._lock:
            unknown, self._unknown = sorted(self._unknown), set()
        for cid in unknown:
            if cid in committed:
                self.notify_checkpoint_complete(cid)
            else:
                self.notify_checkpoint_aborted(cid)

    def forget_base_unless(self, retained: set[int]) -> bool:
        """Fall back to a full checkpoint when the base is no longer retained (as Flink's backends do); True if it was gone."""
        with self._lock:
            if self.base_checkpoint_id is None or self.base_checkpoint_id in retained:
                return False
            self.base_checkpoint_id = None
            self._chains.clear()
            return True

    def checkpoint(self, store: CheckpointStore, operator: str, *, checkpoint_id: int | None = None, full: bool = False,
                   executor: concurrent.futures.Executor | None = None) -> concurrent.futures.Future[Any]:
        """Snapshot synchronously, then write and commit on a background thread; a Future of the CheckpointInfo.

        The new checkpoint starts from the store's latest one: everything this backend does not
        own (other operators, other states, other key groups) is kept by reference. For a single
        backend; a job with several subtasks commits them together (see `flinkstate.runtime`).
        """
        recs = store.checkpoints(include_discarded=True)
        self.resolve_unknown({r.checkpoint_id for r in recs})
        if checkpoint_id is None:  # never an id this backend already used, aborted ones included
            checkpoint_id = max([r.checkpoint_id for r in recs] + [self._last_snapshot_id]) + 1
        from flinkstate.store.registry import pin

        with self._lock:  # no completion moves the base between the snapshot and the pin
            # a base no longer retained (discarded meanwhile): fall back to a full checkpoint
            self.forget_base_unless({r.checkpoint_id for r in recs if r.status == C.STATUS_COMPLETED})
            snap = self.snapshot(checkpoint_id, full=full)
            # the base and reused files are kept until this checkpoint completes or aborts
            base_pin = pin(store, snap.base_checkpoint_id, [e.path for p in snap.parts for e in p.reused])

        def run() -> Any:
            try:
                # based on the latest checkpoint: what this backend does not own (other operators,
                # other states, other key groups) is carried over by reference, as Flink keeps it
                with store.begin(checkpoint_id=checkpoint_id, base="latest") as w:
                    w.declare_max_parallelism(operator, self.max_parallelism)
                    _check_delta_base(w, snap, operator)
                    snap.write(w, operator)
                info = w.info  # as committed: a concurrent retain may already have discarded it, it still completed
            except CommitOutcomeUnknownError:
                self.notify_checkpoint_unknown(checkpoint_id)
                raise
            except BaseException:
                self.notify_checkpoint_aborted(checkpoint_id)
                raise
            finally:
                base_pin.release()
            self.notify_checkpoint_complete(checkpoint_id)
            return info

        if executor is None:
            fut: concurrent.futures.Future[Any] = concurrent.futures.Future()

            def thread() -> None:
                try:
                    fut.set_result(run())
                except BaseException as e:  # noqa: BLE001 - handed to the future
                    fut.set_exception(e)

            threading.Thread(target=thread, name=f"flinkstate-snapshot-{checkpoint_id}", daemon=True).start()
            return fut
        return executor.submit(run)

    # ------------------------------------------------------------------ restore
    @classmethod
    def restore(
        cls,
        store: CheckpointStore,
        operator: str,
        *,
        checkpoint_id: int | None = None,
        key_group_range: tuple[int, int] | None = None,
        parallelism: int | None = None,
        subtask: int | None = None,
        clock: Callable[[], int] | None = None,
        num_buckets: int = DEFAULT_BUCKETS,
        compaction: CompactionPolicy | None = None,
        incremental: bool = True,
        _checkpoint: _CheckpointView | None = None,
    ) -> KeyedStateBackend:
        """A backend for `key_group_range` (or subtask `subtask` of `parallelism`) restored from a checkpoint.

        Reads each state's view (newest full + later deltas) restricted to the range, so any
        parallelism works (scale up and down). The restored checkpoint becomes the base of
        the next incremental checkpoint.
        """
        view = _checkpoint or _CheckpointView(store, operator, checkpoint_id)
        maxp = view.max_parallelism
        if key_group_range is None:
            if parallelism is not None and subtask is not None:
                key_group_range = _kg_range(maxp, parallelism, subtask)
            else:
                key_group_range = (0, maxp - 1)
        be = cls(max_parallelism=maxp, key_group_range=key_group_range, key_type=view.key_type, clock=clock,
                 num_buckets=num_buckets, compaction=compaction, incremental=incremental)
        be._restore_from(view)
        return be

    @classmethod
    def restore_all(cls, store: CheckpointStore, operator: str, parallelism: int, *, checkpoint_id: int | None = None,
                    **kwargs: Any) -> list[KeyedStateBackend]:
        """The backends of all `parallelism` subtasks restored from one checkpoint (metadata read once)."""
        view = _CheckpointView(store, operator, checkpoint_id)
        return [cls.restore(store, operator, parallelism=parallelism, subtask=i, _checkpoint=view, **kwargs)
                for i in range(parallelism)]

    def _restore_from(self, view: _CheckpointView) -> None:
        with gc_paused():  # millions of new containers: the cyclic GC would rescan them over and over
            self._restore_tables(view)

    def _restore_tables(self, view: _CheckpointView) -> None:
        lo, hi = self.key_group_range
        mine = range(lo, hi + 1)
        ck = view.checkpoint
        for name, desc in view.op.keyed_states.items():
            entries = view.files("keyed", name)
            data = ck.scan(view.operator, name, key_groups=mine, raw=True).to_arrow()
            t = self._new_table(desc.kind)
            if data is not None and data.num_rows:
                t.load(*arrow_to_state_items(desc, data))
            self._tables[name] = t
            self._descs[name] = desc
            chain = self._chain_of(entries)
            if chain is not None:
                self._chains[("keyed", name)] = chain
        for name, tdesc in view.op.timer_services.items():
            entries = view.files("timers", name)
            data = ck.scan_timers(view.operator, name, key_groups=mine).to_arrow()
            t = StateTable(self._versions, self.num_buckets)
            if data is not None and data.num_rows:
                tkeys = arrow_to_timer_keys(tdesc, data)
                t.load(tkeys, [0] * len(tkeys))
            self._timer_tables[name] = t
            self._timer_descs[name] = tdesc
            chain = self._chain_of(entries)
            if chain is not None:
                self._chains[("timers", name)] = chain
        if view.is_savepoint:
            # Flink's NO_CLAIM restore: the savepoint stays owned by the user, so the first
            # checkpoint after it is full and later ones never reference its files
            self._chains.clear()
        self.base_checkpoint_id = view.checkpoint_id

    def _chain_of(self, entries: list[FileEntry]) -> _Chain | None:
        """The chain of files of exactly this backend's range (None: files cover other ranges -> write full first)."""
        rng = self.key_group_range
        mine = [e for e in order_entries(entries) if (e.key_group_start, e.key_group_end) == rng]
        if not mine or any(
            overlaps(e, *rng) and (e.key_group_start, e.key_group_end) != rng
            for e in entries
        ):
            return None
        fulls = [i for i, e in enumerate(mine) if e.kind not in C.DELTA_KINDS]
        if not fulls:
            return None
        last = fulls[-1]
        deltas = mine[last + 1 :]
        return _Chain(mine[last].bytes, len(deltas), sum(e.bytes for e in deltas))


def _chain_after(chain: _Chain | None, files: list[FileEntry]) -> _Chain | None:
    """A state's chain once `files` (one key-group range, any order) are added on top of `chain`."""
    ordered = order_entries(files)
    fulls = [i for i, e in enumerate(ordered) if e.kind not in C.DELTA_KINDS]
    if fulls:
        after = ordered[fulls[-1] + 1:]
        return _Chain(ordered[fulls[-1]].bytes, len(after), sum(e.bytes for e in after))
    if chain is None:
        return None
    created = {e.created_by_checkpoint_id for e in ordered}  # one delta file per checkpoint
    return _Chain(chain.full_bytes, chain.deltas + len(created), chain.delta_bytes + sum(e.bytes for e in ordered))


def _check_delta_base(w: CheckpointWriter, snap: KeyedSnapshot, operator: str) -> None:
    """Deltas apply to the backend's base: refuse if a newer checkpoint changed the backend's own files."""
    base = snap.base_checkpoint_id
    if not snap.incremental or base is None or w.base is None or w.base.checkpoint_id == base:
        return
    rng = snap.key_group_range


    def mine(entries: list[FileEntry]) -> list[str]:
        return sorted(e.path for e in entries if e.operator == operator and FileKind(e.kind).scope in (Scope.KEYED, Scope.TIMERS) and overlaps(e, *rng))

    if mine(w.store.files(base)) != mine(w.entries()):
        raise CommitConflictError(
            f"operator {operator!r}: checkpoint {w.base.checkpoint_id} changed key groups {rng} after this backend's base "
            f"checkpoint {base}; its deltas would apply to other state: restore from checkpoint {w.base.checkpoint_id}"
        )


class _CheckpointView:
    """One pinned checkpoint and the operator restored from it, loaded once for several restores."""

    def __init__(self, store: CheckpointStore, operator: str, checkpoint_id: int | None) -> None:
        self.store = store
        ck = self.checkpoint = store.checkpoint(checkpoint_id)
        self.operator = operator
        self.checkpoint_id = ck.checkpoint_id
        self.is_savepoint = ck.kind == C.SAVEPOINT
        op = self.op = ck.operator(operator)
        self.max_parallelism = ck.max_parallelism_of(operator)
        self.properties = dict(ck.metadata.properties)
        key_types = {str(d.key_type): d.key_type for d in [*op.keyed_states.values(), *op.timer_services.values()]}
        if len(key_types) > 1:
            raise SchemaMismatchError(f"operator {operator!r} has states with different key types {sorted(key_types)}")
        self.key_type = next(iter(key_types.values())) if key_types else pa.string()

    def files(self, scope: str, name: str) -> list[FileEntry]:
        """The checkpoint's files of one keyed state or timer service of the operator."""
        return self.checkpoint.state_files(self.operator, name, Scope(scope))
