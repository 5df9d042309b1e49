"""Sizes of a Flink savepoint's state from its handles: per operator, per subtask and, where the format tells, per state.

Every handle records its file's size (inline state is held in `_metadata` and counts its bytes, not
as a file); a file several subtasks share (RocksDB SSTs after rescaling) counts once per operator.
Per state: a RocksDB/ForSt column family's live SSTs and their sizes come from the handle's
MANIFEST (no SST is opened); an operator state's bytes run from its first element's offset to the
next state's (and its elements are its rows, but for broadcast state, whose count is in the data).
Canonical and HashMap files interleave all states of a key group, so their per-state bytes (unless
the file holds one state: all of it past the header) and rows are not known without decoding: None,
which the tables show as NULL rather than 0.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from flinkstate.flink.files.canonical import TIMER_PREFIX
from flinkstate.flink.meta.metadata import (
    CheckpointMetadata,
    KeyGroupsHandle,
    OperatorState,
    StreamHandle,
    SubtaskState,
    UnsupportedKeyedHandle,
)
from flinkstate.format.filekind import Scope

__all__ = ["Size", "SubtaskSize", "checkpoint_size", "key_group_figures", "operator_size", "state_sizes", "subtask_sizes"]


@dataclass
class Size:
    """Files, rows and bytes of some state; None where the format does not tell without decoding."""

    files: int = 0
    rows: int | None = 0
    bytes: int | None = 0

    def add(self, files: int, rows: int | None, nbytes: int | None) -> None:
        """Add another part (an unknown part makes the total unknown)."""
        self.files += files
        self.rows = None if self.rows is None or rows is None else self.rows + rows
        self.bytes = None if self.bytes is None or nbytes is None else self.bytes + nbytes


@dataclass(frozen=True)
class SubtaskSize:
    """What one subtask's handles hold: keyed and operator state bytes, and the files they are in."""

    subtask: int
    key_groups: tuple[int, int] | None
    keyed_bytes: int
    operator_bytes: int
    files: int

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (describe)."""
        return {"subtask": self.subtask, "key_groups": None if self.key_groups is None else list(self.key_groups),
                "keyed_bytes": self.keyed_bytes, "operator_bytes": self.operator_bytes, "files": self.files}


def _identity(stream: StreamHandle, base_dir: str) -> str | None:
    """The file a stream is (None: inline in `_metadata`, not a file of its own)."""
    return None if stream.kind == "inline" else stream.location(base_dir)


def _streams(sub: SubtaskState) -> Iterator[tuple[str, StreamHandle]]:
    """("keyed" | "operator", stream) of every stream a subtask's handles name."""
    for h in (sub.managed_keyed, sub.raw_keyed):
        if isinstance(h, KeyGroupsHandle):
            yield "keyed", h.stream
        elif isinstance(h, UnsupportedKeyedHandle):
            for s in (h.meta_stream, *(s for _, s in h.shared), *(s for _, s in h.private)):
                if s is not None:
                    yield "keyed", s
    for oh in (sub.managed_operator, sub.raw_operator):
        if oh is not None:
            yield "operator", oh.stream


def _total(streams: Iterator[StreamHandle], base_dir: str) -> tuple[int, int]:
    """(files, bytes) of streams, each file once; inline streams add their bytes only."""
    seen: set[str] = set()
    nbytes = 0
    for s in streams:
        ident = _identity(s, base_dir)
        if ident is not None:
            if ident in seen:
                continue
            seen.add(ident)
        nbytes += s.size
    return len(seen), nbytes


def subtask_sizes(meta: CheckpointMetadata, op: OperatorState) -> list[SubtaskSize]:
    """Per subtask with state: its key-group range, keyed and operator bytes, and files."""
    from flinkstate.flink.bridge.mapping import subtask_range

    out = []
    for sub in op.subtasks:
        parts = list(_streams(sub))
        if not parts:
            continue
        files, _ = _total((s for _, s in parts), meta.directory)
        keyed = _total((s for k, s in parts if k == "keyed"), meta.directory)[1]
        operator = _total((s for k, s in parts if k == "operator"), meta.directory)[1]
        out.append(SubtaskSize(sub.index, subtask_range(sub), keyed, operator, files))
    return out


def operator_size(meta: CheckpointMetadata, op: OperatorState) -> Size:
    """Files and bytes of an operator's state (every subtask, each file once, coordinator state included); rows unknown."""
    files, nbytes = _total((s for sub in op.subtasks for _, s in _streams(sub)), meta.directory)
    return Size(files, None, nbytes + len(op.coordinator_state or b""))


def checkpoint_size(meta: CheckpointMetadata) -> Size:
    """Files and bytes of every operator's state (each file once); rows unknown."""
    files, nbytes = _total((s for op in meta.operators for sub in op.subtasks for _, s in _streams(sub)), meta.directory)
    return Size(files, None, nbytes + sum(len(op.coordinator_state or b"") for op in meta.operators))


def state_sizes(meta: CheckpointMetadata, op: OperatorState) -> dict[tuple[str, Scope], Size]:
    """Per (state, scope) of an operator: keyed states and timer services by their handles, operator states by offsets."""
    from flinkstate.flink.bridge.mapping import subtask_states
    from flinkstate.flink.files.rocksdb import handle_files

    out: dict[tuple[str, Scope], Size] = {}
    seen: set[tuple[str, str]] = set()
    where = f"{meta.path}: operator {op.label}"

    def add(name: str, scope: Scope, stream: StreamHandle, rows: int | None, nbytes: int | None) -> None:
        """Count a state's part in stream (a file counted once per state)."""
        ident = _identity(stream, meta.directory)
        first = ident is None or (name, ident) not in seen
        if ident is not None:
            seen.add((name, ident))
        out.setdefault((name, scope), Size(rows=None) if scope != Scope.OPERATOR else Size()).add(
            int(first and ident is not None), rows, nbytes if first else 0)

    def keyed(name: str) -> tuple[str, Scope]:
        return (name.removeprefix(TIMER_PREFIX), Scope.TIMERS) if name.startswith(TIMER_PREFIX) else (name, Scope.KEYED)

    for sub in op.subtasks:
        h = sub.managed_keyed
        if isinstance(h, UnsupportedKeyedHandle) and h.meta_stream is not None:
            files = handle_files(h, meta.directory, where)
            for name in subtask_states(meta, op, sub):
                out.setdefault(keyed(name), Size(rows=None))
            for f in files.live(meta.directory, where):
                add(*keyed(f.column_family), files.ssts[f.number][1], None, f.size)
        elif isinstance(h, KeyGroupsHandle):
            names = list(subtask_states(meta, op, sub))
            data = h.offsets[h.offsets > 0]
            alone = h.stream.size - int(data.min()) if len(data) else 0  # everything past the header: one state's
            for name in names:
                add(*keyed(name), h.stream, None, alone if len(names) == 1 else None)
        oh = sub.managed_operator
        if oh is None:
            continue
        firsts = sorted((int(offs[0]), name) for name, (_, offs) in oh.states.items() if len(offs))
        ends = {name: (firsts[i + 1][0] if i + 1 < len(firsts) else oh.stream.size) for i, (_, name) in enumerate(firsts)}
        starts = {name: start for start, name in firsts}
        for name, (mode, offs) in oh.states.items():
            nbytes = ends[name] - starts[name] if name in starts else 0
            add(name, Scope.OPERATOR, oh.stream, None if mode == "BROADCAST" else len(offs), nbytes)
    return out


def key_group_figures(meta: CheckpointMetadata, op: OperatorState, state: str) -> pa.Table | None:
    """Per key group of one keyed state (Flink name; a PyFlink state's `python-state-` name too): records and serialized
    bytes from the canonical files' framing (`files.canonical.record_figures`), no value decoded. None when a subtask's
    handle is RocksDB/ForSt or heap-native (its records are not framed per key group without decoding)."""
    from flinkstate.flink.files.canonical import record_figures
    from flinkstate.flink.pyflink.coders import PREFIX

    parts = []
    for sub in op.subtasks:
        h = sub.managed_keyed
        if h is None:
            continue
        if not isinstance(h, KeyGroupsHandle):
            return None
        figures = record_figures(h, meta.directory, op)
        if figures is None:
            return None
        t = figures.get(state, figures.get(PREFIX + state))
        if t is not None:
            parts.append(t)
    if not parts:
        return pa.table({"key_group": pa.array([], pa.int32()), "entries": pa.array([], pa.int64()), "bytes": pa.array([], pa.int64())})
    return pa.concat_tables(parts)
