"""Decode Flink operator (non-keyed) state: split and union list state, broadcast state.

Sources: `OperatorBackendSerializationProxy`, `DefaultOperatorStateBackendSnapshotStrategy`,
`OperatorStateRestoreOperation`. The handle records per state the offsets of its elements (list
state) or one offset where `i32 n` and n (key, value) pairs start (broadcast state). With snapshot
compression the stream after the header is snappy framed and each offset starts a framed stream
(Flink 1.18 wrote one framed stream per state, its start recorded for each element: read in sequence).
"""

from __future__ import annotations

import struct

import numpy as np
import pyarrow as pa

from flinkstate.core.errors import StateNotFoundError
from flinkstate.flink._io import DataReader, snappy_unframe
from flinkstate.flink.errors import CorruptFileError
from flinkstate.flink.meta.metadata import (
    CheckpointMetadata,
    OperatorState,
    OperatorStateHandle,
)
from flinkstate.flink.serde._vector import Source, vector_reader
from flinkstate.flink.serde.serializers import (
    StateMeta,
    arrow_type,
    read_operator_header,
)
from flinkstate.flink.serde.values import make_reader

__all__ = ["operator_state_headers", "operator_state_names", "operator_state_types", "read_operator_state"]


def _subtask_streams(meta: CheckpointMetadata, op: OperatorState):
    """Yield (subtask index, handle, bytes, where, compressed, metas by name) per subtask with operator state."""
    for sub in op.subtasks:
        h: OperatorStateHandle | None = sub.managed_operator
        if h is None:
            continue
        data = h.stream.read(meta.directory)
        where = h.stream.location(meta.directory) if h.stream.kind != "inline" else f"inline state {h.stream.path}"
        r = DataReader(data, where=where)
        starts = [int(o.min()) for _, o in h.states.values() if len(o)]
        compressed, ops, bcast = read_operator_header(r, f"operator {op.label} subtask {sub.index}", min(starts, default=len(data)))
        yield sub.index, h, data, where, compressed, {m.name: m for m in ops + bcast}


def operator_state_names(meta: CheckpointMetadata, uid: str) -> dict[str, str]:
    """The operator states of an operator: name -> distribution mode (SPLIT_DISTRIBUTE, UNION, BROADCAST)."""
    op = meta.operator(uid)
    out: dict[str, str] = {}
    for sub in op.subtasks:
        if sub.managed_operator is not None:
            for name, (mode, _) in sub.managed_operator.states.items():
                out[name] = mode
    return out


def _element_buffer(data: bytes, off: int, ends: np.ndarray, compressed: bool, where: str) -> tuple[bytes, int]:
    if off >= len(data) or off < 0:
        raise CorruptFileError(f"{where}: element offset {off} is past the end of the file ({len(data)} bytes)")
    if not compressed:
        return data, off
    j = np.searchsorted(ends, off, side="right")
    end = int(ends[j]) if j < len(ends) else len(data)
    return snappy_unframe(memoryview(data)[off:end], where), 0


def read_operator_state(meta: CheckpointMetadata, uid: str, name: str) -> pa.Table:
    """One operator state as Arrow: list/union state (subtask, value), broadcast state (subtask, key, value)."""
    op = meta.operator(uid)
    modes = operator_state_names(meta, uid)
    if name not in modes:
        raise StateNotFoundError(f"{meta.path}: operator {op.label} has no operator state {name!r} (it has {sorted(modes)})")
    broadcast = modes[name] == "BROADCAST"
    subtasks: list[int] = []
    keys: list[object] = []
    values: list[object] = []
    chunks: list[pa.Array] = []  # values decoded before `values` (subtasks read at once, in subtask order)
    state_meta: StateMeta | None = None
    for index, h, data, where, compressed, metas in _subtask_streams(meta, op):
        if name not in h.states:
            continue
        state_meta = metas.get(name)
        if state_meta is None:
            raise CorruptFileError(f"{where}: operator {op.label} subtask {index}: state {name!r} is not in the file header")
        ctx = f"operator {op.label}, state {name!r}"
        read_value = make_reader(state_meta.serializers["VALUE_SERIALIZER"], ctx)
        offsets = h.states[name][1]
        all_offsets = np.sort(np.concatenate([o for _, o in h.states.values()] or [np.zeros(0, np.int64)]))
        try:
            if broadcast:
                read_key = make_reader(state_meta.serializers["KEY_SERIALIZER"], ctx)
                if len(offsets) == 0:
                    continue
                buf, pos = _element_buffer(data, int(offsets[0]), all_offsets, compressed, where)
                n = struct.unpack_from(">i", buf, pos)[0]
                pos += 4
                for _ in range(n):
                    k, pos = read_key(buf, pos)
                    v, pos = read_value(buf, pos)
                    subtasks.append(index)
                    keys.append(k)
                    values.append(v)
            elif not compressed and (vread := vector_reader(state_meta.serializers["VALUE_SERIALIZER"], ctx)) is not None:
                starts = np.asarray(offsets, np.int64)  # elements one after the other at their offsets: read at once
                if len(starts) and (int(starts.min()) < 0 or int(starts.max()) >= len(data)):
                    raise CorruptFileError(f"{where}: operator {op.label} subtask {index}: state {name!r} has an element "
                                           f"offset outside the file ({len(data)} bytes)")
                column, _ = vread(Source(data), starts, None)
                if values:  # earlier subtasks' values read one by one come first
                    chunks.append(pa.array(values, arrow_type(state_meta.serializers["VALUE_SERIALIZER"])))
                    values = []
                chunks.append(column)
                subtasks.extend([index] * len(starts))
            else:
                prev = -1
                for off in offsets.tolist():
                    # Flink 1.18 (FLINK-34063) compressed a state's elements as one snappy stream and recorded
                    # its start for every element: equal offsets are read on where the previous element ended.
                    if not (compressed and off == prev):
                        buf, pos = _element_buffer(data, off, all_offsets, compressed, where)
                    v, pos = read_value(buf, pos)
                    prev = off
                    subtasks.append(index)
                    values.append(v)
        except (IndexError, ValueError, struct.error, UnicodeDecodeError) as e:
            raise CorruptFileError(f"{where}: operator {op.label} subtask {index}: state {name!r} is corrupt or truncated: {e}") from e
    if state_meta is None:
        raise StateNotFoundError(f"{meta.path}: operator {op.label}: operator state {name!r} has no data")
    cols: dict[str, pa.Array] = {"subtask": pa.array(subtasks, pa.int32())}
    if broadcast:
        cols["key"] = pa.array(keys, arrow_type(state_meta.serializers["KEY_SERIALIZER"]))
    value_type = arrow_type(state_meta.serializers["VALUE_SERIALIZER"])
    cols["value"] = pa.concat_arrays([c.cast(value_type) for c in chunks] + [pa.array(values, value_type)])
    return pa.table(cols)


def operator_state_headers(meta: CheckpointMetadata, uid: str) -> dict[str, StateMeta]:
    """Each operator state's header entry (name, serializers) from the subtasks' file headers alone: a ranged read of
    the bytes before the first element, so describing or exporting an operator decodes none of its elements."""
    op = meta.operator(uid)
    out: dict[str, StateMeta] = {}
    for sub in op.subtasks:
        h: OperatorStateHandle | None = sub.managed_operator
        if h is None:
            continue
        starts = [int(o.min()) for _, o in h.states.values() if len(o)]
        data = h.stream.read(meta.directory, 0, min(starts)) if starts else h.stream.read(meta.directory)
        where = h.stream.location(meta.directory) if h.stream.kind != "inline" else f"inline state {h.stream.path}"
        _, ops, bcast = read_operator_header(DataReader(data, where=where), f"operator {op.label} subtask {sub.index}", len(data))
        metas = {m.name: m for m in ops + bcast}
        for name in h.states:
            if name not in metas:
                raise CorruptFileError(f"{where}: operator {op.label}: state {name!r} is not in the file header")
        for name, m in metas.items():
            out.setdefault(name, m)
    return out


def operator_state_types(headers: dict[str, StateMeta]) -> dict[str, tuple[pa.DataType, pa.DataType | None]]:
    """Each operator state's (value type, key type or None) as `read_operator_state` gives them, from its header."""
    out: dict[str, tuple[pa.DataType, pa.DataType | None]] = {}
    for name, m in headers.items():
        key = m.serializers.get("KEY_SERIALIZER")
        out[name] = (arrow_type(m.serializers["VALUE_SERIALIZER"]), None if key is None else arrow_type(key))
    return out
