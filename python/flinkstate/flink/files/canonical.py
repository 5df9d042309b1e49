"""Decode Flink's canonical (FLIP-41) keyed-state savepoint files into Arrow tables, one per state.

Sources: `FullSnapshotAsyncWriter`, `FullSnapshotRestoreOperation`, `HeapKeyValueStateIterator`,
`CompositeKeySerializationUtils`, `SnappyStreamCompressionDecorator`. Per key group with data, at
its offset: u16 state id, then (i32 len, key, i32 len, value) pairs; the high bit of a key's first
byte says a u16 follows (the next state id, or 0xFFFF at the end of the key group). Keys are
key-group prefix + key + namespace [+ map user key]; list values are elements joined by ','; map
values are a null flag + value; timers are keys of prefix + (timestamp ^ sign bit) + key + namespace.
Record starts are located with numpy (`_framing`) and each state's records decoded at once
(`_records`). The same decoders take heap-native streams (`heap`) and the merged records of
RocksDB native/incremental state (`rocksdb`), so every format yields the same tables.
"""

from __future__ import annotations

import struct
import threading
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from flinkstate.core.errors import InvalidArgumentError, StateNotFoundError
from flinkstate.core.keygroups import assign_key_groups
from flinkstate.flink._io import DataReader, snappy_unframe
from flinkstate.flink.errors import (
    CorruptFileError,
    StateAccountingError,
    UnsupportedFlinkFormatError,
    UnsupportedSerializerError,
)
from flinkstate.flink.files.heap import decode_heap_key_groups, is_heap_native
from flinkstate.flink.files.rocksdb import (
    FamilyAccount,
    column_families,
    key_groups_of_keys,
    records_buffer,
)
from flinkstate.flink.meta.metadata import (
    CheckpointMetadata,
    KeyGroupsHandle,
    OperatorState,
    StreamHandle,
    UnsupportedKeyedHandle,
)
from flinkstate.flink.serde._framing import frame_records
from flinkstate.flink.serde._records import record_plan
from flinkstate.flink.serde._vector import Source
from flinkstate.flink.serde.serializers import (
    StateMeta,
    TypeNode,
    arrow_type,
    opaque_part,
    read_keyed_header,
)
from flinkstate.flink.serde.values import Reader, make_reader, read_rest

__all__ = ["KeyedState", "TIMER_PREFIX", "decode_key_groups", "decode_keyed_handle", "header_bytes", "read_keyed_state", "record_figures"]

TIMER_PREFIX = "_timer_state/"
_END_OF_KEY_GROUP = 0xFFFF
_I32 = struct.Struct(">i")
_U16 = struct.Struct(">H")
_U64 = struct.Struct(">Q")
_I64 = struct.Struct(">q")
_SIGN = 1 << 63


class KeyGroupCorrupt(ValueError):
    """A record of key group kg does not decode."""

    def __init__(self, kg: int, message: str) -> None:
        super().__init__(message)
        self.kg = kg


@dataclass
class KeyedState:
    """The keyed state of an operator: a table per state and per timer service, with their metadata."""

    key_type: TypeNode
    states: dict[str, pa.Table] = field(default_factory=dict)
    timers: dict[str, pa.Table] = field(default_factory=dict)
    meta: dict[str, StateMeta] = field(default_factory=dict)


def _type_of(node: TypeNode) -> str:
    """" (type <class>)" of a Kryo/Avro serializer, "" where the snapshot does not name it."""
    return f" (type {node.names[0]})" if node.names else ""


class _StateDecoder:
    """Accumulates the decoded entries of one state across key groups."""

    def __init__(self, meta: StateMeta, key_type: TypeNode, prefix: int, ctx: str) -> None:
        self.meta = meta
        self.ctx = ctx
        self.prefix = prefix
        self.timer = meta.backend_type == "PRIORITY_QUEUE"
        self.rows: dict[str, list] = {"key_group": [], "key": []}
        if self.timer:
            node = meta.serializers["VALUE_SERIALIZER"]
            if node.kind != "timer":
                raise UnsupportedFlinkFormatError(f"{ctx}: priority queue state {meta.name!r} is not a timer service ({node.cls})")
            self.key_node, self.ns_node = node.children
            self.value_node = None
            if self.ns_node.kind != "void":
                self.rows["namespace"] = []
            self.rows["timestamp"] = []
        else:
            self.key_node = key_type
            self.ns_node = meta.serializers["NAMESPACE_SERIALIZER"]
            self.value_node = meta.serializers["VALUE_SERIALIZER"]
            if self.ns_node.kind != "void":
                self.rows["namespace"] = []
        self.kind = "TIMER" if self.timer else meta.keyed_type
        self.key_reader = make_reader(self.key_node, ctx)
        self.ns_reader = make_reader(self.ns_node, ctx)
        self.ambiguous = self.key_node.fixed_width < 0 and self.ns_node.fixed_width < 0
        self.user_key_reader: Reader | None = None
        self.ttl = False
        elem = self.value_node
        if self.kind == "MAP":
            self.rows["user_key"] = []
            self.user_key_reader = make_reader(elem.children[0], ctx)
            elem = elem.children[1]
        elif self.kind == "LIST":
            elem = elem.children[0]
        if elem is not None:
            self.elem_reader = make_reader(elem, ctx)  # a TTL wrapper reads (timestamp, value)
            self.rows["value"] = []
        if elem is not None and elem.kind == "ttl":
            self.ttl = True
            elem = elem.children[1]
        self.elem_node = elem
        if self.ttl:
            self.rows["ttl_last_access"] = []
        # States whose parts all have vector readers are decoded from their records' start offsets at once.
        self.plan = record_plan(self.kind, prefix, self.key_node, self.ns_node, self.value_node, ctx)
        self._opaque(ctx)
        self.starts: list[int] = []
        self.kg_runs: list[tuple[int, int]] = []
        self.vector_chunks: list[dict[str, pa.Array]] = []

    def _opaque(self, ctx: str) -> None:
        """Kryo/Avro values: raw bytes where a record frames the value alone, else the state cannot be read."""
        self.unreadable: str | None = None
        self.raw_error: str | None = None
        value = opaque_part(self.elem_node) if self.value_node is not None else None
        user_key = opaque_part(self.value_node.children[0]) if self.kind == "MAP" else None
        other = opaque_part(self.key_node) or opaque_part(self.ns_node) or user_key
        if value is None and other is None:
            return
        self.plan = None
        o = other or value
        assert o is not None
        if other is not None or self.kind == "LIST" or self.elem_node.kind not in ("opaque", "unknown"):
            self.unreadable = (f"{ctx}: serializer {o.cls}{_type_of(o)} cannot be decoded, nor read as raw bytes: only "
                               "a whole value, map value or TTL value is length-framed (not list elements, keys or nested values)")
            return
        self.raw_error = (f"{ctx}: serializer {o.cls}{_type_of(o)} cannot be decoded; read with raw_values=True "
                          "(Spark: .option('rawValues', 'true')) to get its values as raw serialized bytes")
        if self.ttl:
            self.elem_reader = lambda buf, pos: ((_I64.unpack_from(buf, pos)[0], bytes(buf[pos + 8 :])), len(buf))
        else:
            self.elem_reader = read_rest
        # the same bytes at once when key and namespace have vector readers
        self.plan = record_plan(self.kind, self.prefix, self.key_node, self.ns_node, self.value_node, ctx, raw_rest=True)

    def kept_as_bytes(self) -> str | None:
        """The serializers of this state whose values are read as their serialized bytes (Kryo, Avro and unknown classes,
        the table runtime's BinaryRowData), as "class, class"; None when every part is decoded."""
        found: list[str] = []

        def walk(node: TypeNode | None) -> None:
            if node is None:
                return
            if node.kind in ("opaque", "unknown", "rowdata", "arraydata") and node.cls not in found:
                found.append(node.cls + (f" ({node.names[0]})" if node.kind == "opaque" and node.names else ""))
                return
            for c in node.children:
                walk(c)

        for node in (self.key_node, self.ns_node, self.value_node):
            walk(node)
        return ", ".join(found) or None

    def row_count(self) -> int:
        """Rows decoded so far (column chunks and rows added one by one)."""
        return sum(len(c["key_group"]) for c in self.vector_chunks) + len(self.rows["key_group"])

    def flush(self, src: Source) -> None:
        """Decode the records collected from src (one file's stream) into column chunks."""
        if not self.starts:
            return
        starts = np.array(self.starts, dtype=np.int64)
        kgs = np.repeat(np.array([k for k, _ in self.kg_runs], np.int32), [n for _, n in self.kg_runs])
        self.starts, self.kg_runs = [], []
        self.decode_records(src, starts, kgs)

    def decode_records(self, src: Source, starts: np.ndarray, kgs: np.ndarray) -> None:
        """Decode the records starting at these offsets of src (key groups kgs) into a column chunk."""
        assert self.plan is not None
        try:
            self.vector_chunks.append(self.plan.columns(src, starts, kgs))
        except (IndexError, ValueError) as e:  # find the first key group whose records fail on their own
            for kg in dict.fromkeys(kgs.tolist()):
                sel = kgs == kg
                try:
                    self.plan.columns(src, starts[sel], kgs[sel])
                except (IndexError, ValueError) as inner:
                    raise KeyGroupCorrupt(kg, str(inner)) from e
            raise

    def _skip_len(self, key: bytes, pos: int, start: int) -> int:
        n = pos - start
        pos += 1
        n >>= 8
        while n:
            pos += 1
            n >>= 8
        return pos

    def add(self, kg: int, key: bytes, value: bytes) -> None:
        """Decode one (key, value) record of key group kg."""
        if self.unreadable is not None:
            return
        rows = self.rows
        pos = self.prefix
        if self.timer:
            ts = _U64.unpack_from(key, pos)[0] ^ _SIGN
            if ts >= _SIGN:
                ts -= 1 << 64
            k, pos = self.key_reader(key, pos + 8)
            ns, pos = self.ns_reader(key, pos)
            rows["key_group"].append(kg)
            rows["key"].append(k)
            if "namespace" in rows:
                rows["namespace"].append(ns)
            rows["timestamp"].append(ts)
            return
        start = pos
        k, pos = self.key_reader(key, pos)
        if self.ambiguous:
            pos = self._skip_len(key, pos, start)
        start = pos
        ns, pos = self.ns_reader(key, pos)
        if self.ambiguous:
            pos = self._skip_len(key, pos, start)
        if self.kind == "MAP":
            uk, pos = self.user_key_reader(key, pos)
            if value[0]:
                v = None
                vpos = 1
            else:
                v, vpos = self.elem_reader(value, 1)
            self._row(kg, k, ns, v, vpos, len(value))
            rows["user_key"].append(uk)
        elif self.kind == "LIST":
            vpos = 0
            n = len(value)
            while vpos < n:
                v, vpos = self.elem_reader(value, vpos)
                self._row(kg, k, ns, v, vpos, vpos)
                if vpos < n:
                    if value[vpos] != 0x2C:
                        raise ValueError("list elements are not ','-delimited")
                    vpos += 1
        else:
            v, vpos = self.elem_reader(value, 0)
            self._row(kg, k, ns, v, vpos, len(value))
        if pos != len(key):
            raise ValueError(f"{len(key) - pos} unread bytes in a key")

    def add_decoded(self, kg: int, k: object, ns: object, state: object) -> None:
        """Add one decoded heap-native entry: a value, a list of elements, a list of map (key, value) or a timestamp."""
        if self.timer:
            rows = self.rows
            rows["key_group"].append(kg)
            rows["key"].append(k)
            if "namespace" in rows:
                rows["namespace"].append(ns)
            rows["timestamp"].append(state)
        elif self.kind == "MAP":
            for uk, v in state:
                self._row(kg, k, ns, v, 0, 0)
                self.rows["user_key"].append(uk)
        elif self.kind == "LIST":
            for v in state:
                self._row(kg, k, ns, v, 0, 0)
        else:
            self._row(kg, k, ns, state, 0, 0)

    def _row(self, kg: int, k: object, ns: object, v: object, vpos: int, vend: int) -> None:
        if vpos != vend:
            raise ValueError(f"{vend - vpos} unread bytes in a value")
        rows = self.rows
        rows["key_group"].append(kg)
        rows["key"].append(k)
        if "namespace" in rows:
            rows["namespace"].append(ns)
        if self.ttl:
            if v is None:
                rows["ttl_last_access"].append(None)
                rows["value"].append(None)
            else:
                rows["ttl_last_access"].append(v[0])
                rows["value"].append(v[1])
        else:
            rows["value"].append(v)

    def table(self, raw_values: bool = False) -> pa.Table:
        """The decoded entries as an Arrow table (Kryo/Avro values as raw bytes only when raw_values is set)."""
        if self.unreadable is not None:
            raise UnsupportedSerializerError(self.unreadable)
        if self.raw_error is not None and not raw_values:
            raise UnsupportedSerializerError(self.raw_error)
        types = {"key_group": pa.int32(), "key": arrow_type(self.key_node), "timestamp": pa.int64(), "ttl_last_access": pa.int64()}
        if "namespace" in self.rows:
            types["namespace"] = arrow_type(self.ns_node)
        if "user_key" in self.rows:
            types["user_key"] = arrow_type(self.value_node.children[0])
        if "value" in self.rows:
            types["value"] = arrow_type(self.elem_node)
        order = ["key_group", "key", "namespace", "user_key", "timestamp", "value", "ttl_last_access"]
        if self.vector_chunks:
            names = [c for c in order if c in self.rows]
            return pa.Table.from_batches(
                [pa.record_batch([ch[c].cast(types[c]) for c in names], names=names) for ch in self.vector_chunks]
            )
        cols = {c: pa.array(self.rows[c], type=types[c]) for c in order if c in self.rows}
        return pa.table(cols)


def _key_group_streams(data: bytes, handle: KeyGroupsHandle, compressed: bool, where: str) -> tuple[bytes, list[tuple[int, int]]]:
    """The stream to frame and (key group, start) of each key group with data; snappy streams are joined."""
    offsets = handle.offsets
    present = np.flatnonzero(offsets > 0)
    ends = np.sort(offsets[present])
    out: list[tuple[int, int]] = []
    parts: list[bytes] = []
    base = 0
    for i in present.tolist():
        kg = handle.start + i
        off = int(offsets[i])
        if off >= len(data):
            raise CorruptFileError(f"{where}: key group {kg}: offset {off} is past the end of the file ({len(data)} bytes)")
        if compressed:
            j = np.searchsorted(ends, off, side="right")
            end = int(ends[j]) if j < len(ends) else len(data)
            part = snappy_unframe(memoryview(data)[off:end], f"{where} key group {kg}")
            out.append((kg, base))
            parts.append(part)
            base += len(part)
        else:
            out.append((kg, off))
    return (b"".join(parts) if compressed else data), out


def decode_keyed_handle(
    handle: KeyGroupsHandle, base_dir: str, op: OperatorState, decoders: dict[str, _StateDecoder] | None = None,
    only: frozenset[str] | None = None,
) -> tuple[TypeNode, list[StateMeta], dict[str, _StateDecoder]]:
    """Decode one subtask's canonical or heap-native keyed-state stream, adding its entries to decoders (by state name).

    only: decode the records of these states alone (the others' decoders stay empty); a read of one state
    then costs that state's records, not the operator's. Heap-native streams are decoded whole.

    Subtasks may list their states in different orders (states registered lazily): the state ids
    of each file are mapped by name; one state with different serializers in two files is refused.
    """
    where = handle.stream.location(base_dir) if handle.stream.kind != "inline" else f"inline state {handle.stream.path}"
    ctx = f"operator {op.label}"
    prefix = 1 if op.max_parallelism <= 128 else 2
    hit = _cached_stream(_stream_key(handle, where, prefix))  # framed just before (another state's read): not read again
    data = b"" if hit is not None else handle.stream.read(base_dir)
    if hit is not None:
        compressed, key_type, metas = hit.header
    else:
        starts = handle.offsets[handle.offsets > 0]
        compressed, key_type, metas = read_keyed_header(DataReader(data, where=where), ctx, int(starts.min()) if len(starts) else len(data))
    if decoders is None:
        decoders = {}
    by_id = []
    for m in metas:
        dec = decoders.get(m.name)
        if dec is None:
            dec = decoders[m.name] = _StateDecoder(m, key_type, prefix, f"{ctx}, state {m.name!r}")
        elif dec.meta != m:
            raise UnsupportedFlinkFormatError(f"{where}: {ctx}: state {m.name!r} has different serializers in different subtasks")
        by_id.append(dec)
    if hit is None and handle.kind == "KeyGroupsStateHandle" and is_heap_native(data, handle):
        for dec in by_id:  # entries come decoded one by one, not from collected record starts
            dec.plan = None
        decode_heap_key_groups(data, handle, compressed, by_id, where, ctx)
        return key_type, metas, decoders
    kg = handle.start
    try:
        stream = hit or _framed_stream(data, handle, compressed, where, prefix, (compressed, key_type, metas))
        buf, groups, framed = stream.buf, stream.groups, stream.framed
        src = Source(buf)
        if framed is not None:
            _decode_framed(src, *framed, prefix, by_id, only, stream.by_state())
            return key_type, metas, decoders
        for kg, pos in groups:
            _decode_key_group(src, pos, kg, prefix, by_id)
        for dec in by_id:
            kg = -1
            dec.flush(src)
    except KeyGroupCorrupt as e:
        raise CorruptFileError(f"{where}: {ctx}: key group {e.kg} is corrupt or truncated: {e}") from e
    except (IndexError, ValueError, struct.error, UnicodeDecodeError) as e:
        at = f"key group {kg}" if kg >= 0 else f"a key group of {handle.start}..{handle.end}"
        raise CorruptFileError(f"{where}: {ctx}: {at} is corrupt or truncated: {e}") from e
    return key_type, metas, decoders


# The framing of the subtask streams read last (header, record starts, state ids, key groups): reading each state of
# an operator in turn (a task per state and subtask) reads and frames each file once, not once per state. Files are
# immutable; the newest entries up to _FRAMED_MAX bytes of streams in all are kept (least recently used dropped first).
_FRAMED: OrderedDict[tuple[object, ...], _Framed] = OrderedDict()
_FRAMED_LOCK = threading.Lock()
_FRAMED_MAX = 256 << 20


@dataclass
class _Framed:
    """A canonical file's header (compressed, key type, states), key-group stream and framing (None: not verifiable)."""

    header: tuple[bool, TypeNode, list[StateMeta]]
    buf: bytes
    groups: list[tuple[int, int]]
    framed: tuple[np.ndarray, np.ndarray, np.ndarray] | None
    _by_state: tuple[np.ndarray, np.ndarray] | None = None

    def by_state(self) -> tuple[np.ndarray, np.ndarray] | None:
        """The records ordered by state id (a stable radix sort) and each state's bounds in that order, computed once."""
        if self.framed is None:
            return None
        if self._by_state is None:
            sids = self.framed[1]
            order = np.argsort(sids.astype(np.uint16), kind="stable")  # ids < 2^15: numpy's O(n) radix sort
            self._by_state = order, np.searchsorted(sids[order], np.arange(len(self.header[2]) + 1))
        return self._by_state


def _stream_key(handle: KeyGroupsHandle, where: str, prefix: int) -> tuple[object, ...] | None:
    """The cache key of a file's framing: its location and size as the metadata records them (None: not cached)."""
    if handle.stream.data is not None or handle.stream.size <= 0:
        return None
    return (where, handle.stream.size, handle.start, handle.end, handle.offsets.tobytes(), prefix)


def _cached_stream(key: tuple[object, ...] | None) -> _Framed | None:
    if key is None:
        return None
    with _FRAMED_LOCK:
        hit = _FRAMED.get(key)
        if hit is not None:
            _FRAMED.move_to_end(key)
        return hit


def _framed_stream(data: bytes, handle: KeyGroupsHandle, compressed: bool, where: str, prefix: int,
                   header: tuple[bool, TypeNode, list[StateMeta]]) -> _Framed:
    """The key-group stream of a canonical file and its framing (`frame_records`), kept for the next read of the file."""
    key = _stream_key(handle, where, prefix) if len(data) == handle.stream.size and len(data) <= _FRAMED_MAX else None
    hit = _cached_stream(key)
    if hit is not None:
        return hit
    buf, groups = _key_group_streams(data, handle, compressed, where)
    out = _Framed(header, buf, groups, frame_records(Source(buf).arr, groups, len(buf), prefix, len(header[2])))
    if key is not None:
        with _FRAMED_LOCK:
            _FRAMED[key] = out
            while sum(len(v.buf) for v in _FRAMED.values()) > _FRAMED_MAX and len(_FRAMED) > 1:
                _FRAMED.popitem(last=False)
    return out


def record_figures(handle: KeyGroupsHandle, base_dir: str, op: OperatorState) -> dict[str, pa.Table] | None:
    """Per state (Flink name) of a canonical stream: per key group its records and their serialized bytes (`key_group`,
    `entries`, `bytes`: length fields, key and value; uncompressed), from the framing alone: no key or value is
    decoded. None for a heap-native stream or one whose framing cannot be verified (decode it instead)."""
    data = handle.stream.read(base_dir)
    where = handle.stream.location(base_dir) if handle.stream.kind != "inline" else f"inline state {handle.stream.path}"
    starts = handle.offsets[handle.offsets > 0]
    compressed, key_type, metas = read_keyed_header(DataReader(data, where=where), f"operator {op.label}",
                                                    int(starts.min()) if len(starts) else len(data))
    if not len(starts) or (handle.kind == "KeyGroupsStateHandle" and is_heap_native(data, handle)):
        return None if len(starts) else {}
    prefix = 1 if op.max_parallelism <= 128 else 2
    stream = _framed_stream(data, handle, compressed, where, prefix, (compressed, key_type, metas))
    buf, framed = stream.buf, stream.framed
    if framed is None:
        return None
    pos, sids, kgs = framed
    arr = np.frombuffer(buf, np.uint8)

    def be32(at: np.ndarray) -> np.ndarray:
        b = arr[at[:, None] + np.arange(4)].astype(np.int64)
        return (b[:, 0] << 24) | (b[:, 1] << 16) | (b[:, 2] << 8) | b[:, 3]

    klen = be32(pos.astype(np.int64))
    size = 8 + klen + be32(pos.astype(np.int64) + 4 + klen)
    out: dict[str, pa.Table] = {}
    for i, m in enumerate(metas):
        sel = sids == i
        t = pa.table({"key_group": pa.array(kgs[sel], pa.int32()), "bytes": pa.array(size[sel], pa.int64())})
        g = t.group_by("key_group").aggregate([("bytes", "count"), ("bytes", "sum")])
        out[m.name] = pa.table({"key_group": g.column("key_group"), "entries": g.column("bytes_count"), "bytes": g.column("bytes_sum")})
    return out


def header_bytes(handle: KeyGroupsHandle, base_dir: str) -> bytes:
    """The bytes before the first key group's data (the serializer header): one ranged read, not the whole file."""
    offsets = handle.offsets[handle.offsets > 0]
    if handle.stream.data is not None or not len(offsets):
        return handle.stream.read(base_dir)
    return handle.stream.read(base_dir, 0, int(offsets.min()))


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


def _read_segments(stream: StreamHandle, base_dir: str, segs: list[tuple[int, int, int | None]], first_kg: int) -> dict[int, bytes]:
    """The bytes of each segment, adjacent segments fetched in one ranged read; a short file is a CorruptFileError naming the key group."""
    out: dict[int, bytes] = {}
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
        for idx, a, b in segs[i : j + 1]:
            out[idx] = data[a - start : None if b is None else b - start]
        i = j + 1
    return out


def _looks_heap(handle: KeyGroupsHandle, parts: dict[int, bytes], stream: StreamHandle, base_dir: str) -> bool:
    """Heap-native layout (see `is_heap_native`), judged from the fetched key groups' leading ids."""
    offsets = handle.offsets
    if handle.kind != "KeyGroupsStateHandle" or not len(offsets) or (offsets <= 0).any():
        return False
    probe = dict(parts)
    if all(handle.start + i == 0 for i in probe) and len(offsets) > 1:  # a canonical kg 0 can start with 4 zero bytes too
        probe[1] = stream.read(base_dir, int(offsets[1]), 4)
    return all(len(d) >= 4 and _I32.unpack_from(d, 0)[0] == handle.start + i for i, d in probe.items())


def decode_key_groups(
    handle: KeyGroupsHandle, base_dir: str, op: OperatorState, key_groups: list[int], decoders: dict[str, _StateDecoder] | None = None,
    only: frozenset[str] | None = None,
) -> tuple[TypeNode, list[StateMeta], dict[str, _StateDecoder]]:
    """Decode only these key groups of a canonical or heap-native stream, reading just the header and their byte ranges.

    The handle's per-key-group offsets (KeyGroupRangeOffsets) say where each key group starts; the
    fetched ranges are laid out after the header in a compact stream with offsets to match, and
    decoded as the whole file would be.
    """
    stream = handle.stream
    if stream.data is not None:  # inline in _metadata: already in memory
        return decode_keyed_handle(handle, base_dir, op, decoders, only)
    offsets = handle.offsets
    wanted = sorted({k - handle.start for k in key_groups if handle.start <= k <= handle.end})
    parts = _read_segments(stream, base_dir, _segments(handle, [i for i in wanted if offsets[i] > 0]), handle.start)
    header = header_bytes(handle, base_dir)
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
            result = decode_keyed_handle(sub, base_dir, op, decoders)
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
    sub = KeyGroupsHandle(handle.kind, handle.start, new, StreamHandle(stream.kind, stream.path, len(buf), buf, stream.files))
    return decode_keyed_handle(sub, base_dir, op, decoders, only)


def _compact(kind: str, start: int, header: bytes, parts: list[bytes], stream: StreamHandle) -> KeyGroupsHandle:
    """A handle over header + consecutive key groups' bytes, offsets pointing into it."""
    sizes = np.array([len(p) for p in parts], np.int64)
    offsets = len(header) + np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    buf = header + b"".join(parts)
    return KeyGroupsHandle(kind, start, offsets, StreamHandle(stream.kind, stream.path, len(buf), buf, stream.files))


def _collect(buf: bytes, pos: int, kg: int, dec: _StateDecoder) -> int:
    """Record where each record of a run of dec's state starts (up to the flagged one); return the offset after it."""
    unpack_i32 = _I32.unpack_from
    starts = dec.starts
    append = starts.append
    n0 = len(starts)
    while True:
        klen = unpack_i32(buf, pos)[0]
        vp = pos + 4 + klen
        vlen = unpack_i32(buf, vp)[0]
        if klen <= 0 or vlen < 0:
            raise IndexError(f"key/value length {klen}/{vlen} at offset {pos}")
        append(pos)
        last = buf[pos + 4] & 0x80
        pos = vp + 4 + vlen
        if last:
            dec.kg_runs.append((kg, len(starts) - n0))
            return pos


def _decode_key_group(src: Source, pos: int, kg: int, prefix: int, decoders: list[_StateDecoder]) -> None:
    buf = src.buf
    unpack_i32 = _I32.unpack_from
    sid = _U16.unpack_from(buf, pos)[0]
    pos += 2
    n_states = len(decoders)
    while True:
        if sid >= n_states:
            raise ValueError(f"state id {sid} is not in the header ({n_states} states)")
        dec = decoders[sid]
        if dec.plan is not None:  # only the record starts of the run, decoded at once later
            pos = _collect(buf, pos, kg, dec)
            sid = _U16.unpack_from(buf, pos)[0]
            pos += 2
            if sid == _END_OF_KEY_GROUP:
                return
            continue
        klen = unpack_i32(buf, pos)[0]
        pos += 4
        if klen <= 0 or pos + klen > len(buf):
            raise IndexError(f"key length {klen} at offset {pos - 4}")
        key = buf[pos : pos + klen]
        pos += klen
        vlen = unpack_i32(buf, pos)[0]
        pos += 4
        if vlen < 0 or pos + vlen > len(buf):
            raise IndexError(f"value length {vlen} at offset {pos - 4}")
        value = buf[pos : pos + vlen]
        pos += vlen
        follows = key[0] & 0x80
        if follows:
            key = bytes([key[0] & 0x7F]) + key[1:]
        stored = int.from_bytes(key[:prefix], "big")
        if stored != kg:
            raise ValueError(f"a key carries key group {stored}")
        dec.add(kg, key, value)
        if follows:
            sid = _U16.unpack_from(buf, pos)[0]
            pos += 2
            if sid == _END_OF_KEY_GROUP:
                return


def decode_rocksdb_handle(
    handle: UnsupportedKeyedHandle, base_dir: str, op: OperatorState, decoders: dict[str, _StateDecoder] | None = None,
    only: frozenset[str] | None = None,
) -> tuple[TypeNode, list[StateMeta], dict[str, _StateDecoder]]:
    """Decode one subtask's RocksDB/ForSt native or incremental state (SST files): merged records to the canonical decoders.

    Every column family with records must be a state the header declares, and each state's live
    records must all come out as rows: otherwise a StateAccountingError names operator, state and files.
    """
    assert handle.meta_stream is not None
    where = handle.meta_stream.location(base_dir) if handle.meta_stream.kind != "inline" else f"inline state {handle.meta_stream.path}"
    ctx = f"operator {op.label}"
    header = handle.meta_stream.read(base_dir)
    compressed, key_type, metas = read_keyed_header(DataReader(header, where=where), ctx, len(header))
    del compressed  # SST blocks carry their own compression
    prefix = 1 if op.max_parallelism <= 128 else 2
    if decoders is None:
        decoders = {}
    try:
        skip = frozenset() if only is None else frozenset(m.name for m in metas) - only  # undeclared families are still read
        families = column_families(handle, base_dir, prefix, f"{where}: {ctx}", skip)
    except (IndexError, ValueError, struct.error) as e:
        raise CorruptFileError(f"{where}: {ctx}: RocksDB state is corrupt: {e}") from e
    declared = {m.name for m in metas}
    for cf, acc in sorted(families.items()):
        if cf not in declared and acc.entries:
            raise StateAccountingError(f"{where}: {ctx}: column family {cf!r} holds {acc.summary()}, but the keyed-state header "
                                       f"declares no such state (it declares {sorted(declared)})")
    for m in metas:
        dec = decoders.get(m.name)
        if dec is None:
            dec = decoders[m.name] = _StateDecoder(m, key_type, prefix, f"{ctx}, state {m.name!r}")
        acc = families.get(m.name)
        if acc is None or not acc.live or (only is not None and m.name not in only):
            continue
        before = dec.row_count()
        buf, starts = records_buffer(acc.live_keys, acc.live_values)
        src = Source(buf)
        kgs = key_groups_of_keys(acc.live_keys, prefix).astype(np.int32)
        try:
            _decode_framed(src, starts, np.zeros(len(starts), np.int64), kgs, prefix, [dec])
        except KeyGroupCorrupt as e:
            raise CorruptFileError(f"{where}: {ctx}: state {m.name!r}: key group {e.kg} is corrupt: {e}") from e
        _check_rows(dec, acc, dec.row_count() - before, f"{where}: {ctx}: state {m.name!r}")
    return key_type, metas, decoders


def _check_rows(dec: _StateDecoder, acc: FamilyAccount, rows: int, where: str) -> None:
    """One row per live record (a list state at least one per key): else the read would lose rows silently."""
    if dec.unreadable is not None:
        return  # its values cannot be read: reading the state raises UnsupportedSerializerError
    live = acc.live
    if rows == live or (dec.kind == "LIST" and rows >= live):
        return
    raise StateAccountingError(f"{where}: its SSTs hold {live} live entries in the subtask's key groups but {rows} rows "
                               f"were decoded from them ({acc.summary()})")


def _decode_framed(src: Source, starts: np.ndarray, sids: np.ndarray, kgs: np.ndarray, prefix: int,
                   decoders: list[_StateDecoder], only: frozenset[str] | None = None,
                   by_state: tuple[np.ndarray, np.ndarray] | None = None) -> None:
    """Decode records located by frame_records: per state at once, or one by one for states without a plan;
    with `only`, the records of the other states are skipped. by_state: the records' order by state id and each
    state's bounds in it, when already computed."""
    if by_state is None:
        order = np.argsort(sids, kind="stable")
        bounds = np.searchsorted(sids[order], np.arange(len(decoders) + 1))
    else:
        order, bounds = by_state
    unpack_i32 = _I32.unpack_from
    buf = src.buf
    for i, dec in enumerate(decoders):
        sel = order[bounds[i] : bounds[i + 1]]
        if not len(sel) or (only is not None and dec.meta.name not in only):
            continue
        if dec.plan is not None:
            dec.decode_records(src, starts[sel], kgs[sel])
            continue
        for pos, kg in zip(starts[sel].tolist(), kgs[sel].tolist(), strict=True):
            try:
                klen = unpack_i32(buf, pos)[0]
                key = bytes([buf[pos + 4] & 0x7F]) + buf[pos + 5 : pos + 4 + klen]
                vlen = unpack_i32(buf, pos + 4 + klen)[0]
                value = buf[pos + 8 + klen : pos + 8 + klen + vlen]
                dec.add(kg, key, value)
            except (IndexError, ValueError, struct.error, UnicodeDecodeError) as e:
                raise KeyGroupCorrupt(kg, str(e)) from e


def read_keyed_state(meta: CheckpointMetadata, uid: str, verify_key_groups: bool = True, raw_values: bool = False) -> KeyedState:
    """Decode every keyed state and timer service of an operator (canonical savepoint, heap checkpoint or NATIVE savepoint) into Arrow tables.

    Kryo/Avro values are an UnsupportedSerializerError naming operator, state and class, unless raw_values
    asks for their serialized bytes (canonical and RocksDB value, reducing, aggregating and map state).
    """
    op = meta.operator(uid)
    decoders = None
    key_type = None
    for sub in op.subtasks:
        h = sub.managed_keyed
        if h is None:
            continue
        if isinstance(h, UnsupportedKeyedHandle):
            if h.meta_stream is None:
                raise UnsupportedFlinkFormatError(f"{meta.path}: operator {op.label} subtask {sub.index} uses {h.kind}, which is not supported")
            key_type, _, decoders = decode_rocksdb_handle(h, meta.directory, op, decoders)
        else:
            key_type, _, decoders = decode_keyed_handle(h, meta.directory, op, decoders)
        if sub.raw_keyed is not None:
            raise UnsupportedFlinkFormatError(f"{meta.path}: operator {op.label} subtask {sub.index} has raw keyed state, which is not supported")
    if key_type is None or decoders is None:
        raise StateNotFoundError(f"{meta.path}: operator {op.label} has no keyed state")
    out = KeyedState(key_type)
    for dec in decoders.values():
        table = dec.table(raw_values)
        if verify_key_groups:
            _verify(table, op, meta.path, dec.meta.name, row_key=dec.key_node.kind == "row")
        if dec.timer:
            out.timers[dec.meta.name.removeprefix(TIMER_PREFIX)] = table
        else:
            out.states[dec.meta.name] = table
        out.meta[dec.meta.name] = dec.meta
    return out


def _verify(table: pa.Table, op: OperatorState, path: str, state: str, row_key: bool = False) -> None:
    """Every key's group must be Flink's assignment for the declared key type (row_key: a Row's hashCode, not a Tuple's)."""
    if table.num_rows == 0:
        return
    try:
        if row_key:
            from flinkstate.flink.pyflink.coders import row_key_groups_array

            expected = row_key_groups_array(table.column("key"), op.max_parallelism)
        else:
            expected = assign_key_groups(table.column("key"), op.max_parallelism)
    except InvalidArgumentError:
        return  # key type without a Java hashCode model here (e.g. a Row key): not checked
    got = table.column("key_group").to_numpy()
    bad = np.flatnonzero(np.asarray(expected.to_numpy(zero_copy_only=False)) != got)
    if len(bad):
        i = int(bad[0])
        raise CorruptFileError(
            f"{path}: operator {op.label}, state {state!r}: key {table.column('key')[i].as_py()!r} is stored in key group "
            f"{int(got[i])} but hashes to key group {expected[i].as_py()}"
        )
