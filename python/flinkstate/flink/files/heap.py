"""Decode the HashMap (heap) backend's native keyed-state format: checkpoints and NATIVE savepoints.

Sources: `HeapSnapshotStrategy`, `CopyOnWriteStateMapSnapshot`, `HeapPriorityQueueStateSnapshot`,
`StateTableByKeyGroupReaders` (version >= 2 readers). The file starts with the same
KeyedBackendSerializationProxy header as a canonical savepoint. Every key group of the range has
an offset; there: `i32 keyGroupId`, then one section per state, each its own snappy framed stream
when compressed: `u16 stateId, i32 n`, then n times `namespace, key, state` in the serializers'
own formats (ListSerializer: i32 n + elements; MapSerializer: i32 n + (key, bool isNull, value));
a timer service's section holds n TimerSerializer elements (i64 timestamp ^ sign bit, key, namespace).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Any, Protocol

import numpy as np

from flinkstate.flink._io import snappy_unframe
from flinkstate.flink.errors import CorruptFileError, UnsupportedSerializerError
from flinkstate.flink.meta.metadata import KeyGroupsHandle
from flinkstate.flink.serde.values import Reader, make_reader

__all__ = ["decode_heap_key_groups", "is_heap_native"]

_I32 = struct.Struct(">i")
_U16 = struct.Struct(">H")
_U64 = struct.Struct(">Q")
_SIGN = 1 << 63


class _Sink(Protocol):
    """What a heap section feeds: the canonical decoder's per-state accumulator."""

    timer: bool
    kind: str
    key_node: Any
    ns_node: Any
    value_node: Any
    ctx: str

    unreadable: str | None

    def add_decoded(self, kg: int, key: object, ns: object, state: object) -> None: ...


def is_heap_native(data: bytes, handle: KeyGroupsHandle) -> bool:
    """Whether a KeyGroupsStateHandle stream is in the heap-native layout (not canonical).

    Heap snapshots give every key group of the range an offset, and each key group starts with
    its own id as an i32; a canonical stream starts with a u16 state id and an i32 key length, and
    leaves key groups without data at offset 0.
    """
    offsets = handle.offsets
    if len(offsets) == 0 or (offsets <= 0).any() or int(offsets.max()) + 4 > len(data):
        return False
    arr = np.frombuffer(data, dtype=np.uint8)
    heads = arr[offsets[:, None] + np.arange(4)].astype(np.int64)
    ids = (heads[:, 0] << 24) | (heads[:, 1] << 16) | (heads[:, 2] << 8) | heads[:, 3]
    return bool((ids == handle.start + np.arange(len(offsets))).all())


def _key_group_ranges(data: bytes, handle: KeyGroupsHandle) -> Iterator[tuple[int, int, int]]:
    """(key group, start, end) of each key group's bytes: up to the next larger offset or the end."""
    offsets = handle.offsets
    ends = np.sort(offsets)
    for i, off in enumerate(offsets.tolist()):
        j = int(np.searchsorted(ends, off, side="right"))
        yield handle.start + i, off, int(ends[j]) if j < len(ends) else len(data)


def _timer_reader(sink: _Sink) -> Reader:
    key_reader = make_reader(sink.key_node, sink.ctx)
    ns_reader = make_reader(sink.ns_node, sink.ctx)

    def read(buf: bytes, pos: int) -> tuple[tuple[int, object, object], int]:
        ts = _U64.unpack_from(buf, pos)[0] ^ _SIGN
        if ts >= _SIGN:
            ts -= 1 << 64
        k, pos = key_reader(buf, pos + 8)
        ns, pos = ns_reader(buf, pos)
        return (ts, k, ns), pos

    return read


class _Readers:
    """Per state: the namespace, key and state readers of its sections."""

    def __init__(self, sink: _Sink) -> None:
        self.sink = sink
        if sink.timer:
            self.element = _timer_reader(sink)
        else:
            self.ns = make_reader(sink.ns_node, sink.ctx)
            self.key = make_reader(sink.key_node, sink.ctx)
            self.state = make_reader(sink.value_node, sink.ctx)

    def section(self, buf: bytes, pos: int, kg: int, dry: bool = False) -> int:
        """Decode one state's section (after its state id) of key group kg; return the offset after it (dry: only skip it)."""
        n = _I32.unpack_from(buf, pos)[0]
        pos += 4
        if n < 0 or n > len(buf) - pos:
            raise ValueError(f"invalid entry count {n}")
        sink = self.sink
        if sink.timer:
            read = self.element
            for _ in range(n):
                (ts, k, ns), pos = read(buf, pos)
                if not dry:
                    sink.add_decoded(kg, k, ns, ts)
            return pos
        read_ns, read_key, read_state = self.ns, self.key, self.state
        for _ in range(n):
            ns, pos = read_ns(buf, pos)
            k, pos = read_key(buf, pos)
            state, pos = read_state(buf, pos)
            if not dry:
                sink.add_decoded(kg, k, ns, state)
        return pos


_OPAQUE_DEPTH = 8  # undecodable sections one key group may hold and still be located


def _starts(buf: bytes, pos: int, end: int, left: set[int], after: int | None, hint: dict[int, int]) -> Iterator[int]:
    """Where the section after state `after`'s may start: offsets holding the id of a state not yet seen, only the id that
    followed it in the key groups before (the writer walks its states in one order for every key group) when known."""
    want = {hint[after]} & left if after is not None and after in hint else left
    for q in range(pos, end - 5):
        if _U16.unpack_from(buf, q)[0] in want:
            yield q


def _tail(readers: list[_Readers], buf: bytes, pos: int, end: int, kg: int, left: set[int], hint: dict[int, int],
          depth: int = _OPAQUE_DEPTH) -> bool:
    """Whether buf[pos:end] is exactly one decodable section of each state in left (any order); up to `depth` of them may
    be sections whose values cannot be decoded, each ending where the rest decodes."""
    left = set(left)
    try:
        while pos < end:
            sid = _U16.unpack_from(buf, pos)[0]
            if sid not in left:
                return False
            left.discard(sid)
            try:
                pos = readers[sid].section(buf, pos + 2, kg, dry=True)
            except UnsupportedSerializerError:
                if depth <= 0:
                    return False
                if not left:
                    return True  # the last section: it ends where the key group does
                return any(_tail(readers, buf, q, end, kg, left, hint, depth - 1) for q in _starts(buf, pos + 6, end, left, sid, hint))
    except (IndexError, ValueError, struct.error, UnicodeDecodeError):
        return False
    return pos == end and not left


def _skip_opaque(readers: list[_Readers], buf: bytes, pos: int, end: int, kg: int, left: set[int], err: UnsupportedSerializerError,
                 sid: int, hint: dict[int, int]) -> int:
    """The end of state sid's section, whose values cannot be decoded (Kryo, Avro: not length-framed here).

    The heap writer gives every state a section in every key group, so the section ends where the sections of the
    states not yet seen in this key group start: the one offset from which they decode exactly to the key group's end
    (or the key group's end when none is left; other such sections are located the same way). Anything else, or more
    than one such offset, raises err.
    """
    found = [end] if not left else []
    for q in _starts(buf, pos, end, left, sid, hint):
        if _tail(readers, buf, q, end, kg, left, hint):
            found.append(q)
            if len(found) > 1:
                break
    if len(found) != 1:
        raise err
    return found[0]


def _unlocated(readers: list[_Readers], left: set[int], kg: int, where: str, why: str) -> None:
    """The sections after one whose values cannot be decoded could not be located: those states are not read (reading
    one raises an UnsupportedSerializerError naming the key group), the states before it are."""
    for sid in left:
        sink = readers[sid].sink
        if getattr(sink, "unreadable", None) is None:
            sink.unreadable = (f"{sink.ctx}: in {where} key group {kg} its section follows one whose values cannot be decoded "
                               f"and could not be located ({why})")


def decode_heap_key_groups(data: bytes, handle: KeyGroupsHandle, compressed: bool, sinks: list[_Sink], where: str, ctx: str) -> None:
    """Decode every key group of a heap-native stream, feeding each state's entries to sinks[stateId]."""
    readers = [_Readers(s) for s in sinks]
    hint: dict[int, int] = {}  # state id -> the id whose section followed it in the key groups decoded so far
    for kg, start, end in _key_group_ranges(data, handle):
        try:
            if _I32.unpack_from(data, start)[0] != kg:
                raise ValueError(f"the key group starts with id {_I32.unpack_from(data, start)[0]}")
            if compressed:
                buf = snappy_unframe(memoryview(data)[start + 4 : end], f"{where} key group {kg}")
                pos, end = 0, len(buf)
            else:
                buf, pos = data, start + 4
            left = set(range(len(readers)))
            before: int | None = None
            while pos < end:
                sid = _U16.unpack_from(buf, pos)[0]
                if sid >= len(readers):
                    raise ValueError(f"state id {sid} is not in the header ({len(readers)} states)")
                left.discard(sid)
                if before is not None:
                    hint[before] = sid
                before = sid
                try:
                    pos = readers[sid].section(buf, pos + 2, kg)
                except UnsupportedSerializerError as err:
                    # One state's values cannot be decoded: the others still are; reading that state raises err.
                    readers[sid].sink.unreadable = str(err)
                    try:
                        pos = _skip_opaque(readers, buf, pos + 6, end, kg, left, err, sid, hint)
                    except UnsupportedSerializerError:
                        _unlocated(readers, left, kg, where, str(err))  # the states after it in this key group cannot be found
                        pos = end
            if pos != end:
                raise ValueError(f"{pos - end} bytes past the key group's end")
        except (IndexError, ValueError, struct.error, UnicodeDecodeError) as e:
            raise CorruptFileError(f"{where}: {ctx}: key group {kg} is corrupt or truncated: {e}") from e
