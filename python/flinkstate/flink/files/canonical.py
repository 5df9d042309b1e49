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
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from flinkstate.core.errors import InvalidArgumentError, StateNotFoundError
from flinkstate.core.keygroups import assign_key_groups
from flinkstate.flink._io import DataReader, snappy_unframe
from flinkstate.flink.errors import (
    CorruptFileError,
    KryoDecodeError,
    StateAccountingError,
    UnsupportedFlinkFormatError,
    UnsupportedSerializerError,
)
from flinkstate.flink.files.heap import decode_heap_key_groups, is_heap_native
from flinkstate.flink.files.rocksdb import (
    FamilyAccount,
    column_families,
    key_groups_of_keys,
    rocksdb_chunks,
)
from flinkstate.flink.files.rocksdb_frame import records_apart, records_buffer
from flinkstate.flink.files.sst_ranges import SstIndex
from flinkstate.flink.files.state_decoder import KeyGroupCorrupt, StateDecoder
from flinkstate.flink.meta.metadata import (
    CheckpointMetadata,
    KeyGroupsHandle,
    OperatorState,
    UnsupportedKeyedHandle,
)
from flinkstate.flink.serde._framing import Framing, frame_records
from flinkstate.flink.serde._vector import Source
from flinkstate.flink.serde.serializers import StateMeta, TypeNode, key_hashing, read_keyed_header

__all__ = ["KeyedState", "TIMER_PREFIX", "decode_keyed_handle", "read_keyed_state", "record_figures"]

_StateDecoder = StateDecoder  # the name the bridge and tests know it by

TIMER_PREFIX = "_timer_state/"
_END_OF_KEY_GROUP = 0xFFFF
_I32 = struct.Struct(">i")
_U16 = struct.Struct(">H")


@dataclass
class KeyedState:
    """The keyed state of an operator: a table per state and per timer service, with their metadata."""

    key_type: TypeNode
    states: dict[str, pa.Table] = field(default_factory=dict)
    timers: dict[str, pa.Table] = field(default_factory=dict)
    meta: dict[str, StateMeta] = field(default_factory=dict)


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
    only: frozenset[str] | None = None, header: tuple[bool, TypeNode, list[StateMeta]] | None = None,
) -> tuple[TypeNode, list[StateMeta], dict[str, _StateDecoder]]:
    """Decode one subtask's canonical or heap-native keyed-state stream, adding its entries to decoders (by state name).

    only: decode the records of these states alone (the others' decoders stay empty); a read of one state
    then costs that state's records, not the operator's. Heap-native streams are decoded whole.
    header: the stream's header already parsed (`read_keyed_header` of its bytes; a subtask read a chunk of key groups
    at a time parses it once), else parsed here.

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
    elif header is not None:
        compressed, key_type, metas = header
    else:
        starts = handle.offsets[handle.offsets > 0]
        compressed, key_type, metas = read_keyed_header(DataReader(data, where=where), ctx, int(starts.min()) if len(starts) else len(data))
    if decoders is None:
        decoders = {}
    by_id = []
    for m in metas:
        dec = decoders.get(m.name)
        if dec is None:
            dec = decoders[m.name] = _StateDecoder(m, key_type, prefix, f"{ctx}, state {m.name!r}", op.kryo, op.operator_id)
        elif dec.header_meta != m:
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
            _decode_framed(src, _framed_records(framed), by_id, only, where)
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
    framed: Framing | None


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
    framed = stream.framed
    if framed is None:
        return None
    out: dict[str, pa.Table] = {}
    for i, m in enumerate(metas):
        _, kgs, klen, vlen = framed.records(i)
        t = pa.table({"key_group": pa.array(kgs, pa.int32()), "bytes": pa.array(8 + klen.astype(np.int64) + vlen, pa.int64())})
        g = t.group_by("key_group").aggregate([("bytes", "count"), ("bytes", "sum")])
        out[m.name] = pa.table({"key_group": g.column("key_group"), "entries": g.column("bytes_count"), "bytes": g.column("bytes_sum")})
    return out


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
    only: frozenset[str] | None = None, key_groups: tuple[int, int] | None = None, indexes: dict[int, SstIndex] | None = None,
) -> tuple[TypeNode, list[StateMeta], dict[str, _StateDecoder]]:
    """Decode one subtask's RocksDB/ForSt native or incremental state (SST files): merged records to the canonical decoders.

    key_groups (first, last): only these key groups; None: the whole handle, read a run of key groups at a time
    (`rocksdb_chunks`), so what is held besides the decoded rows is one run's SST bytes and records, not the subtask's.
    indexes: the SSTs' indexes read by earlier runs (by file number; `sst_ranges`), for a caller reading run by run.
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
    skip = frozenset() if only is None else frozenset(m.name for m in metas) - only  # undeclared families are still read
    for m in metas:
        if m.name not in decoders:
            decoders[m.name] = _StateDecoder(m, key_type, prefix, f"{ctx}, state {m.name!r}", op.kryo, op.operator_id)
    try:
        runs = [key_groups] if key_groups is not None else rocksdb_chunks(handle, base_dir, prefix, f"{where}: {ctx}", skip=skip)
    except (IndexError, ValueError, struct.error) as e:
        raise CorruptFileError(f"{where}: {ctx}: RocksDB state is corrupt: {e}") from e
    indexes = {} if indexes is None else indexes
    for run in runs:
        _decode_rocksdb_run(handle, base_dir, prefix, where, ctx, metas, decoders, skip, only, run, indexes)
    return key_type, metas, decoders


def _decode_rocksdb_run(handle: UnsupportedKeyedHandle, base_dir: str, prefix: int, where: str, ctx: str, metas: list[StateMeta],
                        decoders: dict[str, _StateDecoder], skip: frozenset[str], only: frozenset[str] | None,
                        run: tuple[int, int], indexes: dict[int, SstIndex]) -> None:
    """The records of key groups run[0]..run[1] of a RocksDB handle, checked and decoded (`decode_rocksdb_handle`)."""
    try:
        families = column_families(handle, base_dir, prefix, f"{where}: {ctx}", skip, run, indexes)
    except (IndexError, ValueError, struct.error) as e:
        raise CorruptFileError(f"{where}: {ctx}: RocksDB state is corrupt: {e}") from e
    declared = {m.name for m in metas}
    for cf, acc in sorted(families.items()):
        if cf not in declared and acc.entries:
            raise StateAccountingError(f"{where}: {ctx}: column family {cf!r} holds {acc.summary()}, but the keyed-state header "
                                       f"declares no such state (it declares {sorted(declared)})")
    for m in metas:
        dec = decoders[m.name]
        acc = families.get(m.name)
        if acc is None or not acc.live or (only is not None and m.name not in only):
            continue
        before = dec.row_count()
        kgs = key_groups_of_keys(acc.live_keys, prefix).astype(np.int32)
        try:
            if dec.plan is not None:  # keys and values read where they are: no framed copy of either
                (kbuf, kpos, klen), (vbuf, vpos, vlen) = records_apart(acc.live_keys, acc.live_parts, acc.live_counts)
                dec.decode_split((Source(kbuf), kpos, klen), (Source(vbuf), vpos, vlen), kgs)
            else:  # the one-by-one decoders read framed records from bytes
                buf, starts = records_buffer(acc.live_keys, acc.live_parts, acc.live_counts)
                _decode_framed(Source(buf.to_pybytes()), lambda _: (starts, kgs, None), [dec], where=where)
        except KeyGroupCorrupt as e:  # this state's values: the state is not read, the others are
            dec.fail(CorruptFileError(f"{where}: {ctx}: state {m.name!r}: key group {e.kg} is corrupt: {e}"))
        except _VALUE_ERRORS as e:
            dec.fail(CorruptFileError(f"{where}: {ctx}: state {m.name!r}: a key group of {run[0]}..{run[1]} is corrupt: {e}"))
        _check_rows(dec, acc, dec.row_count() - before, f"{where}: {ctx}: state {m.name!r}")


def _check_rows(dec: _StateDecoder, acc: FamilyAccount, rows: int, where: str) -> None:
    """One row per live record (a list state at least one per key): else the read would lose rows silently."""
    if dec.unreadable is not None or dec.failed is not None:
        return  # its values cannot be read: reading the state raises UnsupportedSerializerError
    live = acc.live
    if rows == live or (dec.kind == "LIST" and rows >= live):
        return
    raise StateAccountingError(f"{where}: its SSTs hold {live} live entries in the subtask's key groups but {rows} rows "
                               f"were decoded from them ({acc.summary()})")


# what decoding a state's values raises when they are not what its serializers say
_VALUE_ERRORS = (IndexError, ValueError, struct.error, UnicodeDecodeError, UnsupportedSerializerError)
_Records = Callable[[int], tuple[np.ndarray, np.ndarray, "tuple[np.ndarray, np.ndarray] | None"]]


def _framed_records(framing: Framing) -> _Records:
    """Per state id, its records as frame_records located them: starts, key groups, key and value lengths."""

    def records(sid: int) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray] | None]:
        starts, kgs, klen, vlen = framing.records(sid)
        return starts, kgs, (klen, vlen)

    return records


def _decode_framed(src: Source, records: _Records, decoders: list[_StateDecoder], only: frozenset[str] | None = None,
                   where: str = "") -> None:
    """Decode located records: per state at once, or one by one for states without a plan; with `only`, the records
    of the other states are skipped. records(i): the starts and key groups of state i's records, and their key and
    value lengths when framing read them (and checked each key's key group). A state whose values do not decode is
    marked failed (reading it raises a CorruptFileError naming it and the key group); the other states are decoded."""
    for i, dec in enumerate(decoders):
        if only is not None and dec.meta.name not in only:
            continue
        starts, kgs, lengths = records(i)
        if not len(starts) or dec.failed is not None:
            continue
        try:
            _decode_state_records(src, dec, starts, kgs, lengths)
        except KryoDecodeError as e:  # a Kryo class without a schema (or the like): named as it is, not as damage
            dec.fail(e)
        except KeyGroupCorrupt as e:
            dec.fail(CorruptFileError(f"{where}: {dec.ctx}: key group {e.kg} is corrupt or truncated: {e}"))
        except _VALUE_ERRORS as e:
            dec.fail(CorruptFileError(f"{where}: {dec.ctx}: a key group of {int(kgs.min())}..{int(kgs.max())} is corrupt or "
                                      f"truncated: {e}"))


def _decode_state_records(src: Source, dec: _StateDecoder, starts: np.ndarray, kgs: np.ndarray,
                          lengths: tuple[np.ndarray, np.ndarray] | None) -> None:
    unpack_i32 = _I32.unpack_from
    buf = src.buf
    if dec.plan is not None:
        if lengths is None:
            dec.decode_records(src, starts, kgs)
        else:
            dec.decode_records(src, starts, kgs, lengths)
        return
    for pos, kg in zip(starts.tolist(), kgs.tolist(), strict=True):
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
            _verify(table, op, meta.path, dec.meta.name, dec.key_node)
        if dec.timer:
            out.timers[dec.meta.name.removeprefix(TIMER_PREFIX)] = table
        else:
            out.states[dec.meta.name] = table
        out.meta[dec.meta.name] = dec.meta
    return out


def _verify(table: pa.Table, op: OperatorState, path: str, state: str, key_node: TypeNode) -> None:
    """Every key's group must be Flink's assignment for the declared key type (a Row's hashCode for Row keys); keys whose
    hash flinkstate does not model (`serializers.key_hashing`: POJOs, BigDecimal, java.time...) are not checked."""
    hashing = key_hashing(key_node)
    if table.num_rows == 0 or hashing is None:
        return
    try:
        if hashing == "row":
            from flinkstate.flink.pyflink.coders import row_key_groups_array

            expected = row_key_groups_array(table.column("key"), op.max_parallelism)
        else:
            expected = assign_key_groups(table.column("key"), op.max_parallelism)
    except InvalidArgumentError:
        return  # key type without a Java hashCode model here: not checked
    got = table.column("key_group").to_numpy()
    bad = np.flatnonzero(np.asarray(expected.to_numpy(zero_copy_only=False)) != got)
    if len(bad):
        i = int(bad[0])
        raise CorruptFileError(
            f"{path}: operator {op.label}, state {state!r}: key {table.column('key')[i].as_py()!r} is stored in key group "
            f"{int(got[i])} but hashes to key group {expected[i].as_py()}"
        )
