"""State maintenance as rewrites: compaction of delta chains and TTL expiry, one new checkpoint each.

`compact` merges a state's newest full file and later deltas per key-group range into one new
full file; `expire` drops the entries expired at a given time. Both plan on the checkpoint being
written (`writer_view`: a pinned `StoreCheckpoint` of the writer's files), read each range's raw
stored rows through the one scan path (`scan(..., raw=True).plan()` → `ScanTask.to_batches()`),
write one full file per range (`run_range`, picklable: Spark runs it as one task per range) and
commit every range in one `CheckpointWriter`, planned against the log version it began on.
TTL timestamps, timers and every other state are carried over unchanged.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from flinkstate.core.errors import (
    CheckpointNotFoundError,
    CorruptFileError,
    InvalidArgumentError,
    StateNotFoundError,
)
from flinkstate.core.io import FileIO
from flinkstate.core.policy import CompactionPolicy
from flinkstate.core.ttl import expiry_timestamps
from flinkstate.format import constants as C
from flinkstate.format.datafile import FileEntry
from flinkstate.format.merge import newest_full_order, order_entries, overlaps
from flinkstate.read.scan import DEFAULT_TARGET_ROWS, ScanTask
from flinkstate.store.writer import CheckpointWriter

if TYPE_CHECKING:
    from flinkstate.read.checkpoint import StoreCheckpoint
    from flinkstate.store.root import StoreRoot

__all__ = ["CompactionPolicy", "MaintenanceResult", "CompactionResult", "ExpiryResult", "StateStep", "RangeJob", "RangeResult",
           "compact", "expire", "compact_into", "run_range", "run_local", "drop_expired", "writer_view", "Runner"]


@dataclass
class RangeJob:
    """One key-group range of one state to rewrite as a full file (picklable: a Spark task)."""

    io: FileIO
    operator: str
    name: str
    scope: str  # "keyed" or "timers"
    descriptor: dict[str, Any]
    task: ScanTask
    checkpoint_id: int
    max_parallelism: int
    seq: int
    expire_at: int | None = None  # drop entries expired at this time (epoch ms); rewrite only if any is
    checkpoint_kind: str = C.CHECKPOINT  # a savepoint's files go to its own folder

    @property
    def key_group_range(self) -> tuple[int, int]:
        """The range this job rewrites."""
        return self.task.key_group_range


@dataclass
class RangeResult:
    """What one range job wrote: its full file (none when an expiry found nothing to drop)."""

    operator: str
    name: str
    scope: str
    key_group_range: tuple[int, int]
    entries: list[FileEntry] = field(default_factory=list)
    rows: int = 0
    dropped: int = 0


@dataclass(frozen=True)
class StateStep:
    """One state's part of a maintenance run: ranges rewritten, rows written, entries dropped, files before and after."""

    operator: str
    state: str
    scope: str
    ranges: int
    rows: int
    dropped: int
    files_before: int
    files_after: int

    def line(self, what: str) -> str:
        """The one-line progress summary of this step."""
        extra = f", {self.dropped} expired entries dropped" if what == "expire" else ""
        return (f"{what} {self.operator}/{self.state} ({self.scope}): {self.ranges} ranges rewritten, {self.rows} rows, "
                f"files {self.files_before} -> {self.files_after}{extra}")


@dataclass(frozen=True)
class MaintenanceResult:
    """The outcome of `compact` or `expire`: the new checkpoint (None when nothing was due), files and per-state steps."""

    what: str
    checkpoint_id: int | None
    base_checkpoint_id: int
    files_before: int
    files_after: int
    steps: tuple[StateStep, ...]
    seconds: float

    @property
    def dropped(self) -> dict[str, int]:
        """Expired entries dropped per state ("operator/state")."""
        return {f"{s.operator}/{s.state}": s.dropped for s in self.steps if s.scope == "keyed"}

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (the CLI's --json)."""
        return {"what": self.what, "checkpoint_id": self.checkpoint_id, "base_checkpoint_id": self.base_checkpoint_id,
                "files_before": self.files_before, "files_after": self.files_after, "seconds": round(self.seconds, 3),
                "steps": [dataclasses.asdict(s) for s in self.steps]}


CompactionResult = MaintenanceResult
ExpiryResult = MaintenanceResult
Runner = Callable[[list[RangeJob]], list[RangeResult]]
Progress = Callable[[str], None]


# ------------------------------------------------------------------ per range (driver or executor)
def drop_expired(rows: pa.Table, desc: Any, at: int) -> tuple[pa.Table, int]:
    """Stored rows without the entries expired at `at` (last access + ttl <= at, Flink's rule); list elements one by one."""
    ttl_ms = desc.ttl.ttl_ms
    if rows.num_rows == 0 or C.COL_TTL not in rows.column_names:
        return rows, 0
    if desc.kind != "list":
        keep = expiry_timestamps(rows.column(C.COL_TTL), ttl_ms) > at
        dropped = int((~keep).sum())
        return (rows.filter(pa.array(keep)) if dropped else rows), dropped
    values = rows.column(C.COL_VALUE).combine_chunks()
    ttls = rows.column(C.COL_TTL).combine_chunks()
    keep = expiry_timestamps(pc.list_flatten(ttls), ttl_ms) > at
    dropped = int((~keep).sum())
    if not dropped:
        return rows, 0
    parents = pc.list_parent_indices(values).to_numpy(zero_copy_only=False)
    idx = np.nonzero(keep)[0]
    counts = np.bincount(parents[idx], minlength=rows.num_rows)
    kept_rows = np.nonzero(counts)[0]  # keys left with no element are dropped, as Flink drops an empty list
    offsets = pa.array(np.concatenate([[0], np.cumsum(counts[kept_rows])]).astype(np.int32))
    out = rows.take(pa.array(kept_rows))
    for name, flat in ((C.COL_VALUE, pc.list_flatten(values)), (C.COL_TTL, pc.list_flatten(ttls))):
        col = pa.ListArray.from_arrays(offsets, flat.take(pa.array(idx)), type=rows.schema.field(name).type)
        out = out.set_column(out.column_names.index(name), name, col)
    return out, dropped


def run_range(job: RangeJob) -> RangeResult:
    """Read one range's raw stored rows through its scan task, drop what expired, write them as one full file."""
    from flinkstate.core.descriptors import TimerServiceDescriptor, descriptor_from_dict
    from flinkstate.format.writer import write_state_files, write_timer_files

    rows = job.task.to_arrow()
    rows = rows.drop_columns([C.COL_KEY_GROUP])  # the writer assigns them again (same keys, same max parallelism)
    out = RangeResult(job.operator, job.name, job.scope, job.key_group_range)
    kw: dict[str, Any] = {"checkpoint_id": job.checkpoint_id, "checkpoint_kind": job.checkpoint_kind, "max_parallelism": job.max_parallelism,
                          "ranges": [job.key_group_range], "seq": job.seq, "write_empty": True}
    if job.scope == "timers":
        out.entries = write_timer_files(job.io, job.operator, TimerServiceDescriptor.from_dict(job.descriptor), rows, **kw)
    else:
        desc = descriptor_from_dict(job.descriptor)
        if job.expire_at is not None:
            rows, out.dropped = drop_expired(rows, desc, job.expire_at)
            if not out.dropped:
                return out  # nothing expired here: the range keeps its files
        out.entries = write_state_files(job.io, job.operator, desc, rows, **kw)
    out.rows = rows.num_rows
    return out


def run_local(jobs: list[RangeJob]) -> list[RangeResult]:
    """Run the range jobs one after the other in this process."""
    return [run_range(j) for j in jobs]


# ------------------------------------------------------------------ planning (driver)
def writer_view(w: CheckpointWriter) -> StoreCheckpoint:
    """The checkpoint a writer is building, pinned as a StoreCheckpoint (its operators and files so far) to scan."""
    return w.view()


def _targets(ck: StoreCheckpoint, operator: str | None, state: str | None, ttl_only: bool) -> list[tuple[str, str, str]]:
    """(operator, scope, name) of the states a run covers: keyed states and timer services (TTL states only for expiry)."""
    ops = [ck.operator(operator).uid] if operator is not None else sorted(ck.operators)
    out: list[tuple[str, str, str]] = []
    known: list[str] = []
    for uid in ops:
        op = ck.operators[uid]
        for name in sorted(op.keyed_states):
            known.append(f"{uid}/{name}")
            if state is not None and name != state:
                continue
            if ttl_only and not op.keyed_states[name].ttl_enabled:
                if state is not None:
                    raise InvalidArgumentError(f"state {name!r} of operator {uid!r} has no TTL: nothing can expire in it "
                                               f"(checkpoint {ck.checkpoint_id})")
                continue
            out.append((uid, "keyed", name))
        for name in sorted(op.timer_services) if not ttl_only else []:
            known.append(f"{uid}/{name} (timers)")
            if state is None or name == state:
                out.append((uid, "timers", name))
    if state is not None and not out:
        raise StateNotFoundError(f"no keyed state or timer service {state!r} in checkpoint {ck.checkpoint_id}"
                                 f"{'' if operator is None else f' of operator {operator!r}'}; states: {known}")
    return out


def _chain(entries: Sequence[FileEntry], lo: int, hi: int, max_parallelism: int) -> tuple[int, int, int]:
    """(full bytes, deltas, delta bytes) of the files a read of [lo, hi] merges (those no newer full file shadows there)."""
    ordered = order_entries([e for e in entries if overlaps(e, lo, hi)])
    if not ordered:
        return 0, 0, 0
    first = max(int(newest_full_order(ordered, max_parallelism)[lo : hi + 1].min()), 0)
    live = ordered[first:]
    deltas = [e for e in live if e.kind in C.DELTA_KINDS]
    return sum(e.bytes for e in live if e.kind not in C.DELTA_KINDS), len(deltas), sum(e.bytes for e in deltas)


def _due(policy: CompactionPolicy | None, full_bytes: int, deltas: int, delta_bytes: int) -> bool:
    """Whether a range's chain is compacted: any delta without a policy; with one, its threshold
    (a chain of deltas only, as a Spark overwrite leaves, is judged by its count alone)."""
    if deltas == 0:
        return False
    if policy is None:
        return True
    if full_bytes == 0:
        return deltas >= policy.max_deltas
    return policy.needs_full(full_bytes, deltas, delta_bytes)


def _plan(ck: StoreCheckpoint, targets: list[tuple[str, str, str]], *, checkpoint_id: int, seq: int, policy: CompactionPolicy | None,
          expire_at: int | None, target_rows: int) -> list[RangeJob]:
    """One job per key-group range due (every range of a TTL state for expiry), in scan order: the ranges of the
    state's full files (of its deltas when it has none), a range above `target_rows` split in Flink's sub-ranges."""
    jobs = []
    for uid, scope, name in targets:
        mp = ck.max_parallelism_of(uid)
        every = range(mp)  # every key group asked for: the scan keeps the full files' ranges apart (no combining)
        if scope == "timers":
            scan: Any = ck.scan_timers(uid, name, key_groups=every)
            desc = ck.timer_service(uid, name).to_dict()
        else:
            scan = ck.scan(uid, name, raw=True, key_groups=every)
            desc = ck.state_descriptor(uid, name).to_dict()
        for task in scan.plan(target_rows):
            lo, hi = task.key_group_range
            if expire_at is None and not _due(policy, *_chain(task.entries, lo, hi, mp)):
                continue
            jobs.append(RangeJob(ck.io, uid, name, scope, desc, task, checkpoint_id, mp, seq, expire_at, ck.kind))
    return jobs


def _register(w: CheckpointWriter, results: list[RangeResult]) -> None:
    """Register every range's new full file with the writer (files of the same checkpoint: `abort` deletes them)."""
    w.adopt([e for r in results for e in r.entries])
    for r in results:
        if not r.entries:
            continue
        op = w.operators[r.operator]
        if r.scope == "timers":
            w.add_timer_files(r.operator, op.timer_services[r.name], r.entries, mode="full", key_group_range=r.key_group_range)
        else:
            w.add_state_files(r.operator, op.keyed_states[r.name], r.entries, mode="full", key_group_range=r.key_group_range)


def _count(entries: Sequence[FileEntry], operator: str, scope: str, name: str) -> int:
    from flinkstate.format.filekind import FileKind

    return sum(1 for e in entries if e.operator == operator and e.state == name and FileKind(e.kind).scope.value == scope)


# ------------------------------------------------------------------ the runs
def _maintain(store: StoreRoot, what: str, operator: str | None, state: str | None, *, policy: CompactionPolicy | None,
              expire_at: int | None, progress: Progress | None, run: Runner | None, target_rows: int) -> MaintenanceResult:
    t0 = time.perf_counter()
    if policy is not None and not isinstance(policy, CompactionPolicy):
        raise InvalidArgumentError(f"policy must be a flinkstate.CompactionPolicy or None, got {policy!r}")
    if store.latest_checkpoint_id() is None:
        raise CheckpointNotFoundError(f"no committed checkpoint at {store.root}: nothing to {what}")
    w = CheckpointWriter(store, kind=C.CHECKPOINT, checkpoint_id=None, base="latest", max_parallelism=None)  # pins the id, the base and the log version; keeps the base's files from garbage collection
    try:
        ck = writer_view(w)
        base_id = ck.base_checkpoint_id
        assert base_id is not None
        targets = _targets(ck, operator, state, ttl_only=expire_at is not None)
        jobs = _plan(ck, targets, checkpoint_id=w.checkpoint_id, seq=1, policy=policy, expire_at=expire_at, target_rows=target_rows)
        before = {t: _count(ck.entries, *t) for t in targets}
        if progress is not None:
            progress(f"{what}: checkpoint {base_id} at {store.root}: {len(jobs)} key-group ranges of {len(targets)} states to read")
        try:
            results = (run or run_local)(jobs) if jobs else []
        except CorruptFileError as e:  # a base file gone: damage, unless another process's collection since the plan deleted it
            w.conflict_if_collected(store.catalog.log_version(), e)
            raise
        if not any(r.entries for r in results):
            w.abort()
            steps = tuple(_steps(targets, results, before, before))
            _report(progress, what, steps, None)
            return MaintenanceResult(what, None, base_id, len(ck.entries), len(ck.entries), steps, time.perf_counter() - t0)
        _register(w, results)
        w.set_property("flinkstate.maintenance", what)
        info = w.commit()
    except BaseException:
        w.abort()
        raise
    after_entries = w.entries()
    steps = tuple(_steps(targets, results, before, {t: _count(after_entries, *t) for t in targets}))
    _report(progress, what, steps, info.checkpoint_id)
    return MaintenanceResult(what, info.checkpoint_id, base_id, len(ck.entries), info.files, steps, time.perf_counter() - t0)


def _steps(targets: list[tuple[str, str, str]], results: list[RangeResult], before: dict[Any, int], after: dict[Any, int]) -> list[StateStep]:
    out = []
    for t in targets:
        mine = [r for r in results if (r.operator, r.scope, r.name) == t and r.entries]
        dropped = sum(r.dropped for r in results if (r.operator, r.scope, r.name) == t)
        out.append(StateStep(t[0], t[2], t[1], len(mine), sum(r.rows for r in mine), dropped, before[t], after[t]))
    return out


def _report(progress: Progress | None, what: str, steps: tuple[StateStep, ...], checkpoint_id: int | None) -> None:
    if progress is None:
        return
    for s in steps:
        if s.ranges or what == "expire":
            progress(s.line(what))
    progress(f"{what}: " + (f"committed checkpoint {checkpoint_id}" if checkpoint_id is not None else "nothing due, no checkpoint written"))


def compact(store: StoreRoot, operator: str | None = None, state: str | None = None, *, policy: CompactionPolicy | None = None,
            progress: Progress | None = None, run: Runner | None = None, target_rows: int = DEFAULT_TARGET_ROWS) -> MaintenanceResult:
    """Merge delta chains into full files per key-group range as one new checkpoint (reads stay identical).

    Without a policy every range holding a delta is compacted; with one, only the ranges past its threshold.
    `run` runs the range jobs (default: here, one after the other; the Spark connector runs them as tasks).
    """
    return _maintain(store, "compact", operator, state, policy=policy, expire_at=None, progress=progress, run=run, target_rows=target_rows)


def expire(store: StoreRoot, operator: str | None = None, state: str | None = None, *, at: int | None = None,
           progress: Progress | None = None, run: Runner | None = None, target_rows: int = DEFAULT_TARGET_ROWS) -> MaintenanceResult:
    """Drop the entries of TTL states expired at `at` (epoch ms, default now) as one new checkpoint; the ranges
    holding any are rewritten in full, everything else is carried over. `result.dropped` counts them per state."""
    if at is None:
        at = int(time.time() * 1000)
    if isinstance(at, bool) or not isinstance(at, int) or at < 0:
        raise InvalidArgumentError(f"at must be a non-negative epoch time in milliseconds, got {at!r}")
    return _maintain(store, "expire", operator, state, policy=None, expire_at=at, progress=progress, run=run, target_rows=target_rows)


def compact_into(w: CheckpointWriter, operator: str, state: str, policy: CompactionPolicy | None = None) -> list[RangeResult]:
    """Inside a writer about to commit (a Spark append): rewrite the ranges of one keyed state whose chain crossed
    the policy's threshold as full files of the same checkpoint, as the embedded backend does."""
    policy = policy or CompactionPolicy()
    op = w.operators.get(operator)
    if op is None or state not in op.keyed_states or w.base is None:
        return []
    ck = writer_view(w)
    seq = 1 + max((e.seq for e in ck.entries if e.created_by_checkpoint_id == w.checkpoint_id), default=0)
    jobs = _plan(ck, [(operator, "keyed", state)], checkpoint_id=w.checkpoint_id, seq=seq, policy=policy, expire_at=None,
                 target_rows=DEFAULT_TARGET_ROWS)
    results = run_local(jobs)
    _register(w, results)
    return results
