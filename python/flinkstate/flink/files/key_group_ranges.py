"""Ranged reads of canonical and heap-native keyed-state files: the header, some key groups' bytes, chunks of key groups.

A KeyGroupsStateHandle records each key group's offset in its file (KeyGroupRangeOffsets; 0: no data), so a read of
some key groups fetches the header and their byte ranges only, lays them out after the header in a compact stream
with offsets to match, and decodes that as the whole file would be (`canonical.decode_keyed_handle`): one decoder
for a whole file and for a part of it. `key_group_chunks` cuts a handle's range into runs of key groups of about a
given number of bytes, so an import task holds one chunk's bytes and rows at a time, not a subtask's.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from flinkstate.flink._io import DataReader
from flinkstate.flink.errors import CorruptFileError
from flinkstate.flink.files.canonical import decode_keyed_handle
from flinkstate.flink.files.chunks import runs
from flinkstate.flink.files.state_decoder import StateDecoder
from flinkstate.flink.meta.metadata import KeyGroupsHandle, OperatorState, StreamHandle
from flinkstate.flink.serde.serializers import StateMeta, TypeNode, read_keyed_header

__all__ = ["KeyedHeader", "decode_key_groups", "header_bytes", "key_group_chunks", "read_header"]

_I32 = struct.Struct(">i")


def header_bytes(handle: KeyGroupsHandle, base_dir: str) -> bytes:
    """The bytes before the first key group's data (the serializer header): one ranged read, not the whole file."""
    offsets = handle.offsets[handle.offsets > 0]
    if not len(offsets):
        return handle.stream.read(base_dir)
    if handle.stream.data is not None:  # inline in _metadata: the header is what comes before the first key group
        return handle.stream.data[: int(offsets.min())]
    return handle.stream.read(base_dir, 0, int(offsets.min()))


@dataclass(frozen=True)
class KeyedHeader:
    """A keyed file's serializer header: its bytes and their parse (snappy compressed, key type, states), read once per
    subtask and passed to each chunk's `decode_key_groups`."""

    data: bytes
    parsed: tuple[bool, TypeNode, list[StateMeta]]


def read_header(handle: KeyGroupsHandle, base_dir: str, op: OperatorState) -> KeyedHeader:
    """The handle's header, read (one ranged read) and parsed."""
    data = header_bytes(handle, base_dir)
    where = handle.stream.location(base_dir)
    return KeyedHeader(data, read_keyed_header(DataReader(data, where=where), f"operator {op.label}", len(data)))


def _segments(handle: KeyGroupsHandle, indexes: list[int]) -> list[tuple[int, int, int | None]]:
    """(index in the range, start, end) of these key groups' bytes, by start; end is the next key group's offset or the file's end."""
    offsets = handle.offsets
    positive = np.sort(offsets[offsets > 0])
    size = handle.stream.size if handle.stream.size > 0 else None
    out = []
    for i in indexes:
        off = int(offsets[i])
        j = int(np.searchsorted(positive, off, side="right"))
        out.append((i, off, int(positive[j]) if j < len(positive) else size))
    return sorted(out, key=lambda t: t[1])


def _read_segments(stream: StreamHandle, base_dir: str, segs: list[tuple[int, int, int | None]],
                   first_kg: int) -> dict[int, memoryview]:
    """The bytes of each segment (views of one read, not copies), adjacent segments fetched in one ranged read; a short
    file is a CorruptFileError naming the key group."""
    out: dict[int, memoryview] = {}
    i = 0
    while i < len(segs):
        j = i
        while j + 1 < len(segs) and segs[j][2] is not None and segs[j + 1][1] == segs[j][2]:
            j += 1
        start, end = segs[i][1], segs[j][2]
        data = stream.read(base_dir, start, None if end is None else end - start)
        if end is not None and len(data) < end - start:
            short = next(s for s in segs[i : j + 1] if s[2] is not None and s[2] > start + len(data))
            raise CorruptFileError(f"{stream.location(base_dir)}: truncated: key group {first_kg + short[0]} needs bytes "
                                   f"{short[1]}..{short[2]} but the file ends at {start + len(data)}")
        view = memoryview(data)
        for idx, a, b in segs[i : j + 1]:
            out[idx] = view[a - start : None if b is None else b - start]
        i = j + 1
    return out


def _looks_heap(handle: KeyGroupsHandle, parts: dict[int, memoryview], stream: StreamHandle, base_dir: str) -> bool:
    """Heap-native layout (see `is_heap_native`), judged from the fetched key groups' leading ids."""
    offsets = handle.offsets
    if handle.kind != "KeyGroupsStateHandle" or not len(offsets) or (offsets <= 0).any():
        return False
    probe: dict[int, bytes | memoryview] = dict(parts)
    if all(handle.start + i == 0 for i in probe) and len(offsets) > 1:  # a canonical kg 0 can start with 4 zero bytes too
        probe[1] = stream.read(base_dir, int(offsets[1]), 4)
    return all(len(d) >= 4 and _I32.unpack_from(d, 0)[0] == handle.start + i for i, d in probe.items())


def decode_key_groups(
    handle: KeyGroupsHandle, base_dir: str, op: OperatorState, key_groups: list[int], decoders: dict[str, StateDecoder] | None = None,
    only: frozenset[str] | None = None, header: KeyedHeader | None = None,
) -> tuple[TypeNode, list[StateMeta], dict[str, StateDecoder]]:
    """Decode only these key groups of a canonical or heap-native stream, reading just the header and their byte ranges.

    header: the handle's header (`read_header`), read and parsed once for all the chunks of a subtask; else read here.

    The handle's per-key-group offsets (KeyGroupRangeOffsets) say where each key group starts; the
    fetched ranges are laid out after the header in a compact stream with offsets to match, and
    decoded as the whole file would be. Memory: the fetched bytes and their compact copy, then the
    copy alone while it is decoded.
    """
    stream = handle.stream
    if stream.data is not None:  # inline in _metadata: already in memory
        return decode_keyed_handle(handle, base_dir, op, decoders, only)
    offsets = handle.offsets
    wanted = sorted({k - handle.start for k in key_groups if handle.start <= k <= handle.end})
    parts = _read_segments(stream, base_dir, _segments(handle, [i for i in wanted if offsets[i] > 0]), handle.start)
    if header is None:
        header = read_header(handle, base_dir, op)
    parsed = header.parsed
    header = header.data
    if _looks_heap(handle, parts, stream, base_dir):
        runs: list[list[int]] = []
        for i in sorted(parts):
            if runs and runs[-1][-1] == i - 1:
                runs[-1].append(i)
            else:
                runs.append([i])
        result = None
        for run in runs or [[]]:
            if not run:  # nothing asked in this range: the header alone declares the states
                sub = KeyGroupsHandle("KeyGroupsSavepointStateHandle", handle.start, np.zeros(0, np.int64),
                                      StreamHandle(stream.kind, stream.path, len(header), header, stream.files))
            else:
                sub = _compact(handle.kind, handle.start + run[0], header, [parts[i] for i in run], stream)
            result = decode_keyed_handle(sub, base_dir, op, decoders, header=parsed)
            decoders = result[2]
        assert result is not None
        return result
    new = np.zeros(len(offsets), np.int64)
    chunks = [header]
    pos = len(header)
    for i, _, _ in _segments(handle, sorted(parts)):
        new[i] = pos
        chunks.append(parts[i])
        pos += len(parts[i])
    buf = b"".join(chunks)
    del chunks, parts  # the fetched bytes: only their compact copy is decoded
    sub = KeyGroupsHandle(handle.kind, handle.start, new, StreamHandle(stream.kind, stream.path, len(buf), buf, stream.files))
    return decode_keyed_handle(sub, base_dir, op, decoders, only, header=parsed)


def _compact(kind: str, start: int, header: bytes, parts: list[memoryview], stream: StreamHandle) -> KeyGroupsHandle:
    """A handle over header + consecutive key groups' bytes, offsets pointing into it."""
    sizes = np.array([len(p) for p in parts], np.int64)
    offsets = len(header) + np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    buf = header + b"".join(parts)
    return KeyGroupsHandle(kind, start, offsets, StreamHandle(stream.kind, stream.path, len(buf), buf, stream.files))


def key_group_chunks(handle: KeyGroupsHandle, max_bytes: int) -> list[tuple[int, int]]:
    """The handle's key-group range cut into consecutive runs (first, last), inclusive, each holding at most max_bytes
    of the file (a larger key group is a run of its own), from the per-key-group offsets alone: what a task decodes at a
    time. An inline stream, or a file whose size the metadata does not record, is one run."""
    if handle.end < handle.start:
        return []
    if handle.stream.data is not None or handle.stream.size <= 0 or max_bytes <= 0:
        return [(handle.start, handle.end)]
    offsets = handle.offsets
    present = np.flatnonzero(offsets > 0)
    ordered = present[np.argsort(offsets[present], kind="stable")]
    size = np.zeros(len(offsets), np.int64)  # bytes of each key group: to the next key group's offset or the file's end
    size[ordered] = np.diff(np.append(offsets[ordered], handle.stream.size))
    return runs(size, handle.start, max_bytes)
