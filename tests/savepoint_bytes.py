"""A canonical Flink savepoint as bytes, state by state, without decoding a value: what byte-identity tests compare.

- keyed: per (operator id, state) the serializer snapshots' bytes as the header holds them, and per key group the
  records (key bytes without the flag, value bytes) in the file's order (FLINK_FORMAT.md section 3);
- operator: per (operator id, state) the serializer snapshots' bytes and per subtask its elements' bytes (list and union
  state: each element, from its offset to the next offset; broadcast: the entry count and entries at its offset;
  uncompressed when the snapshot was);
- coordinator: per operator id its bytes.
Only the handle layout (`read_metadata`) and the snapshot framing (`read_type`, for where a snapshot ends) come from
flinkstate; the records are cut here from the file's bytes.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

import numpy as np

from flinkstate.flink._io import DataReader, snappy_unframe
from flinkstate.flink.meta.metadata import KeyGroupsHandle, read_metadata
from flinkstate.flink.serde.serializers import read_type


@dataclass
class SavepointBytes:
    """What a canonical savepoint holds, as bytes (see the module docstring)."""

    key_serializers: dict[str, bytes] = field(default_factory=dict)  # operator id -> key serializer snapshot
    keyed_serializers: dict[tuple[str, str], dict[str, bytes]] = field(default_factory=dict)  # (op, state) -> role -> snapshot
    records: dict[tuple[str, str], dict[int, list[tuple[bytes, bytes]]]] = field(default_factory=dict)  # (op, state) -> kg -> records
    operator_serializers: dict[tuple[str, str], dict[str, bytes]] = field(default_factory=dict)
    elements: dict[tuple[str, str], dict[int, list[bytes]]] = field(default_factory=dict)  # (op, state) -> subtask -> elements
    coordinators: dict[str, bytes] = field(default_factory=dict)


def _meta(r: DataReader) -> tuple[str, dict[str, bytes]]:
    """One StateMetaInfoSnapshot: its name and its serializers' snapshot bytes by role."""
    name = r.utf()
    r.i32()
    for _ in range(r.i32()):
        r.utf(), r.utf()
    sers = {}
    for _ in range(r.i32()):
        role = r.utf()
        assert r.i32() == 2
        start = r.pos
        read_type(r, name)
        sers[role] = bytes(r.buf[start : r.pos])
    return name, sers


def read_savepoint_bytes(path: str) -> SavepointBytes:
    """A canonical savepoint's states as bytes (HashMap or RocksDB canonical savepoints, compressed or not)."""
    meta = read_metadata(path)
    out = SavepointBytes()
    for op in meta.operators:
        if op.coordinator_state is not None:
            out.coordinators[op.operator_id] = op.coordinator_state
        for sub in op.subtasks:
            h = sub.managed_keyed
            if h is not None:
                assert isinstance(h, KeyGroupsHandle), f"{path}: not a canonical savepoint"
                _keyed(out, op.operator_id, h, h.stream.read(meta.directory), op.max_parallelism)
            oh = sub.managed_operator
            if oh is not None:
                _operator(out, op.operator_id, sub.index, oh, oh.stream.read(meta.directory))
    return out


def _keyed(out: SavepointBytes, op: str, h: KeyGroupsHandle, data: bytes, maxp: int) -> None:
    r = DataReader(data)
    assert r.i32() in (5, 6)
    compressed = r.bool()
    assert r.i32() == 2
    start = r.pos
    read_type(r, "key")
    out.key_serializers.setdefault(op, bytes(data[start : r.pos]))
    names = []
    for _ in range(r.i16()):
        name, sers = _meta(r)
        names.append(name)
        out.keyed_serializers.setdefault((op, name), sers)
        out.records.setdefault((op, name), {})
    starts = [int(o) for o in h.offsets if o]
    ends = dict(zip(sorted(starts), [*sorted(starts)[1:], len(data)]))
    prefix = 1 if maxp <= 128 else 2
    for i, off in enumerate(h.offsets.tolist()):
        if not off:
            continue
        kg = h.start + i
        buf = snappy_unframe(memoryview(data)[off : ends[off]], "kg") if compressed else bytes(data[off : ends[off]])
        pos = 0
        state = struct.unpack_from(">H", buf, pos)[0]
        pos += 2
        while True:
            klen = struct.unpack_from(">i", buf, pos)[0]
            key = bytearray(buf[pos + 4 : pos + 4 + klen])
            pos += 4 + klen
            vlen = struct.unpack_from(">i", buf, pos)[0]
            value = bytes(buf[pos + 4 : pos + 4 + vlen])
            pos += 4 + vlen
            last = bool(key[0] & 0x80)
            key[0] &= 0x7F
            assert int.from_bytes(key[:prefix], "big") == kg
            out.records[(op, names[state])].setdefault(kg, []).append((bytes(key), value))
            if last:
                nxt = struct.unpack_from(">H", buf, pos)[0]
                pos += 2
                if nxt == 0xFFFF:
                    break
                state = nxt


def _operator(out: SavepointBytes, op: str, index: int, h, data: bytes) -> None:
    r = DataReader(data)
    version = r.i32()
    assert version in (5, 6)
    compressed = r.bool() if version >= 6 else False
    for _ in range(2):
        for _ in range(r.i16()):
            name, sers = _meta(r)
            out.operator_serializers.setdefault((op, name), sers)
    offsets = np.sort(np.concatenate([o for _, o in h.states.values()] + [np.array([len(data)], np.int64)]))
    for name, (mode, offs) in h.states.items():
        got = out.elements.setdefault((op, name), {}).setdefault(index, [])
        assert not compressed or len(set(offs.tolist())) == len(offs), "Flink 1.18's one compressed stream per state: not cut here"
        for off in offs.tolist():
            end = int(offsets[np.searchsorted(offsets, off, side="right")])
            # with snapshot compression each element (a broadcast state's entries) is a snappy framed stream of its own
            got.append(snappy_unframe(memoryview(data)[off:end], "element") if compressed else bytes(data[off:end]))
