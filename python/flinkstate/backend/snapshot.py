"""Snapshots of the embedded keyed state backend: what the synchronous part freezes and the
asynchronous part writes, and the compaction policy that picks full or delta files.

`KeyedStateBackend.snapshot` returns a `KeyedSnapshot` holding frozen bucket references (no
copy of state or timers); `KeyedSnapshot.write` builds Arrow tables from them and hands them
to a `CheckpointWriter` on any thread while processing goes on.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from flinkstate.backend.arrow_io import state_to_arrow, timers_to_arrow
from flinkstate.backend.tables import FrozenTable
from flinkstate.core.errors import InvalidArgumentError
from flinkstate.core.policy import (
    CompactionPolicy,  # one definition, shared with maintenance
)
from flinkstate.format import constants as C
from flinkstate.format.datafile import FileEntry

if TYPE_CHECKING:
    from flinkstate.backend.context import SnapshotSource
    from flinkstate.store.writer import CheckpointWriter

__all__ = ["KeyedSnapshot", "CompactionPolicy", "gc_paused"]

_gc_lock = threading.Lock()
_gc_pauses = 0
_gc_was_enabled = False


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause Python's cyclic GC while millions of small lists/tuples are built (snapshot, restore).

    The collector would otherwise rescan the whole state on every generation-2 pass. Nested
    and concurrent pauses (snapshot thread plus restore) are counted; the GC comes back when
    the last one ends, in whatever state it was before the first.
    """
    global _gc_pauses, _gc_was_enabled
    with _gc_lock:
        if _gc_pauses == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_pauses += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_pauses -= 1
            if _gc_pauses == 0 and _gc_was_enabled:
                gc.enable()


@dataclass
class _Chain:
    full_bytes: int = 0
    deltas: int = 0
    delta_bytes: int = 0


@dataclass
class _Part:
    """One state or timer service inside a snapshot."""

    name: str
    scope: str  # "keyed" or "timers"
    desc: Any
    frozen: FrozenTable
    mode: str  # "full" or "delta"
    reason: str  # why full: "requested", "first", "new-state", "compaction", "" for delta
    rows: int = 0
    bytes: int = 0
    files: list[FileEntry] = field(default_factory=list)
    # files of aborted attempts this part references instead of writing their changes again
    reused: list[FileEntry] = field(default_factory=list)


class KeyedSnapshot:
    """A snapshot's synchronous result; `write` is the asynchronous part (run it on any thread)."""

    def __init__(self, backend: SnapshotSource, checkpoint_id: int, version: int, parts: list[_Part], now: int, sync_seconds: float) -> None:
        self.backend = backend
        self.checkpoint_id = checkpoint_id
        self.version = version
        self.parts = parts
        self.now = now
        self.sync_seconds = sync_seconds
        self.key_group_range = backend.key_group_range
        self.base_checkpoint_id = backend.base_checkpoint_id
        self.written = False
        self._released = False
        self._writing = False

    @property
    def incremental(self) -> bool:
        """True when at least one part is written as a delta."""
        return any(p.mode == "delta" for p in self.parts)

    def tables(self) -> dict[tuple[str, str], pa.Table]:
        """The Arrow tables this snapshot writes, by (scope, name) (builds them; for tests/tools)."""
        return {(p.scope, p.name): self._table(p) for p in self.parts}

    def _table(self, p: _Part) -> pa.Table:
        if p.scope == "timers":
            return timers_to_arrow(p.desc, p.frozen, delta=p.mode == "delta")
        ttl = p.desc.ttl if p.desc.ttl_enabled else None
        drop = False
        if ttl is not None and p.mode == "full":
            drop = ttl.cleanup_full_snapshot or (p.reason == "compaction" and ttl.compaction_cleanup is not None)
        return state_to_arrow(p.desc, p.frozen, delta=p.mode == "delta", now=self.now, drop_expired=drop)

    def write(self, writer: CheckpointWriter, operator: str) -> list[FileEntry]:
        """Write every state and timer service of this snapshot into `writer` (a CheckpointWriter).

        Full parts replace the files of the backend's key-group range; delta parts add one
        delta file each. Releases the frozen buckets when done (also on error).
        """
        writer_mp = writer.max_parallelism_of(operator) if hasattr(writer, "max_parallelism_of") else writer.max_parallelism
        if writer_mp != self.backend.max_parallelism:
            self.release()
            raise InvalidArgumentError(
                f"checkpoint writer has max parallelism {writer_mp} for operator {operator!r}, the backend {self.backend.max_parallelism}"
            )
        with self.backend._lock:
            if self._released:
                raise InvalidArgumentError(
                    f"snapshot of checkpoint {self.checkpoint_id} was released (aborted or subsumed by a later "
                    "completed checkpoint): its frozen state may have changed since, it cannot be written")
            self._writing = True
        rng = self.key_group_range
        out: list[FileEntry] = []
        try:
            for p in self.parts:
                writer.declare(operator, p.desc)  # the job's declaration, also where no data changed (a TTL changed on restore)
                if p.reused:
                    self._reuse(writer, operator, p)
                with gc_paused():
                    table = self._table(p)
                if p.mode == "delta" and table.num_rows == 0:
                    continue
                if p.scope == "timers":
                    files = writer.put_timers(operator, p.desc, table, mode=p.mode, key_group_range=rng)
                else:
                    files = writer.put_state(operator, p.desc, table, mode=p.mode, key_group_range=rng)
                p.files = files
                p.rows = sum(f.rows for f in files)
                p.bytes = sum(f.bytes for f in files)
                out.extend(files)
                keep = getattr(writer, "keep_on_abort", None)  # any writer with put_state/put_timers works
                if self.backend.reuse_aborted and keep is not None:
                    keep(files)
            self.written = True
        finally:
            self._writing = False
            self.release()
        return out

    @staticmethod
    def _reuse(writer: CheckpointWriter, operator: str, p: _Part) -> None:
        """Reference the aborted attempts' files; if one is gone, write everything since the base instead."""
        if all(writer.io.exists(e.path) for e in p.reused):
            writer.reuse_files(operator, p.desc, p.reused)
            return
        if any(e.kind not in C.DELTA_KINDS for e in p.reused):
            p.mode, p.reason = "full", "reused-file-missing"
        p.frozen.covered = 0
        p.reused = []

    def release(self) -> None:
        """Let writers mutate the frozen buckets in place again (idempotent)."""
        with self.backend._lock:
            if not self._released:
                self._released = True
                self.backend._versions.release(self.version)

    def _release_unless_writing(self) -> None:
        """Release now, or let the running `write` release when it ends (its buckets must stay frozen)."""
        with self.backend._lock:
            if not self._writing:
                self.release()

    @property
    def bytes(self) -> int:
        """Bytes written by `write` (0 before)."""
        return sum(p.bytes for p in self.parts)
