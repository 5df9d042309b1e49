"""One keyed state's Flink records built from its Arrow table with column encoders, and their key-group framing, with numpy.

The mirror of the decoders (`serde._records`, `serde._framing`). A record's key is the key-group prefix
(1 byte, or 2 big-endian when max parallelism > 128), the serialized key, the serialized namespace
(each followed by its length as little-endian bytes when both are variable-width) and, for MAP states,
the serialized user key; its value is the serialized value (MAP: a null flag byte first; TTL: the
big-endian i64 last-access timestamp first; LIST: the elements of one key joined with ','). Timers
(PRIORITY_QUEUE) have key = prefix + big-endian (timestamp ^ sign bit) + key + namespace and no value.
Records are sorted by key bytes (so by key group first); a key given twice keeps its last value (LIST:
all elements, in row order), timers keep duplicates. Each column is encoded by one call (`_vencode`).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from flinkstate.core.errors import InvalidArgumentError
from flinkstate.core.keygroups import assign_key_groups
from flinkstate.flink.serde._bin import Bin, concat
from flinkstate.flink.serde._crc32c import snappy_frames
from flinkstate.flink.serde._vencode import column_encoder
from flinkstate.flink.serde.encode import plain_values
from flinkstate.flink.serde.serializers import StateMeta, TypeNode

__all__ = ["ColumnValueError", "StateRecords", "frame_key_groups", "framed_parts", "serializer_problem", "state_records"]

_SIGN = np.uint64(1 << 63)


class ColumnValueError(InvalidArgumentError):
    """A value of this column cannot be written (does not fit its Flink serializer: overflow, null, wrong type)."""

    def __init__(self, column: str, problem: str) -> None:
        super().__init__(f"column {column!r}: {problem}")
        self.column = column


class StateRecords(Mapping[int, list[tuple[bytes, bytes]]]):
    """One state's records sorted by key bytes: key groups, key bytes (prefix included, no flag) and value bytes.

    As a mapping: key group -> [(key bytes, value bytes)] (what the per-value writer produced); the
    framing reads the arrays (`rows`, `key_bin`, `value_bin`) without building these lists.
    """

    def __init__(self, kgs: np.ndarray, keys: Bin, values: Bin) -> None:
        self.kgs = kgs.astype(np.int64, copy=False)
        self.key_bin, self.value_bin = keys, values
        self._groups = self.kgs[np.flatnonzero(np.diff(self.kgs, prepend=-1))] if len(self.kgs) else self.kgs
        self._framed: tuple[np.ndarray, np.ndarray] | None = None

    @property
    def key_bytes(self) -> pa.Array:
        """The key bytes of each record, as an Arrow binary array."""
        return self.key_bin.arrow()

    @property
    def value_bytes(self) -> pa.Array:
        """The value bytes of each record, as an Arrow binary array."""
        return self.value_bin.arrow()

    def rows(self, lo: int, hi: int) -> tuple[int, int]:
        """The record rows [start, stop) of key groups lo..hi."""
        a, b = np.searchsorted(self.kgs, [lo, hi + 1])
        return int(a), int(b)

    def __getitem__(self, kg: int) -> list[tuple[bytes, bytes]]:
        a, b = self.rows(kg, kg)
        if a == b:
            raise KeyError(kg)
        return list(zip(self.key_bin.slice(a, b).arrow().to_pylist(), self.value_bin.slice(a, b).arrow().to_pylist(), strict=True))

    def __iter__(self) -> Iterator[int]:
        return iter(self._groups.tolist())

    def __len__(self) -> int:
        return len(self._groups)

    def key_group_slice(self, lo: int, hi: int) -> StateRecords:
        """The records of key groups lo..hi (one subtask's), sharing this one's arrays."""
        a, b = self.rows(lo, hi)
        return StateRecords(self.kgs[a:b], self.key_bin.slice(a, b), self.value_bin.slice(a, b))

    def framed(self) -> tuple[np.ndarray, np.ndarray]:
        """The records framed back to back (`i32 klen, key, i32 vlen, value`, the last record of each key group with
        the 0x80 flag on its first key byte) and each record's start (n + 1 offsets), computed once."""
        if self._framed is None:
            n = len(self.kgs)
            klen, vlen = self.key_bin.lens(), self.value_bin.lens()
            rec = concat([_be(klen, 4), self.key_bin, _be(vlen, 4), self.value_bin])
            offsets, data = rec.as_var()
            if not data.flags.writeable:  # an Arrow buffer: the flags are set on a copy
                data = data.copy()
            last = np.ones(n, bool)
            last[:-1] = self.kgs[1:] != self.kgs[:-1]
            data[offsets[:-1][last] + 4] |= 0x80
            self._framed = (data, offsets)
        return self._framed

    @staticmethod
    def of(records: Mapping[int, list[tuple[bytes, bytes]]]) -> StateRecords:
        """StateRecords of a key group -> sorted [(key, value)] mapping (as the per-value writer returned)."""
        if isinstance(records, StateRecords):
            return records
        items = [(kg, k, v) for kg in sorted(records) for k, v in records[kg]]
        kgs = np.array([kg for kg, _, _ in items], np.int64)
        keys = Bin.from_arrow(pa.array([k for _, k, _ in items], pa.binary()))
        return StateRecords(kgs, keys, Bin.from_arrow(pa.array([v for _, _, v in items], pa.binary())))


def _column(table: pa.Table, name: str) -> pa.Array:
    col = table.column(name)  # KeyError: the caller names the missing column
    return col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col


def serializer_problem(node: TypeNode, e: BaseException) -> str:
    """What a ColumnValueError says of a value that node's serializer cannot write: the serializer (and the class it
    writes: a POJO, an enum, a Tuple) and why."""
    if node.kind == "pojo":
        what = f"PojoSerializer of {node.cls}"
    elif node.kind == "enum":
        what = f"EnumSerializer of {node.cls} (constants {', '.join(node.names)})"
    elif node.kind == "ttl" and node.children:
        return serializer_problem(node.children[1], e)
    else:
        what = node.cls
    return f"a value does not fit its Flink serializer {what}: {e}"


def _encode(node: TypeNode, arr: pa.Array, column: str, ctx: str) -> Bin:
    """arr encoded with node's serializer; a value that does not fit is a ColumnValueError naming the column and serializer."""
    try:
        return column_encoder(node, ctx)(arr)
    except (struct.error, TypeError, AttributeError, OverflowError, ValueError, KeyError) as e:
        raise ColumnValueError(column, serializer_problem(node, e)) from e


def _key_groups(table: pa.Table, maxp: int, prefix: int) -> np.ndarray:
    """The key group of each row (Flink's hash of the key, else the table's key_group column)."""
    try:
        kg = assign_key_groups(table.column("key"), maxp)
    except InvalidArgumentError as e:
        if "key_group" not in table.column_names:
            raise ColumnValueError("key", f"{e}, and the table has no key_group column to take key groups from") from e
        kg = _column(table, "key_group")
        if kg.null_count:
            raise ColumnValueError("key_group", "a null key group") from e
    kgs = kg.to_numpy(zero_copy_only=False).astype(np.int64)
    if len(kgs) and (kgs.min() < 0 or kgs.max() >= 1 << (8 * prefix)):
        bad = int(kgs.min()) if kgs.min() < 0 else int(kgs.max())
        raise ColumnValueError("key_group", f"key group {bad} does not fit the {prefix}-byte key-group prefix")
    return kgs


_BIG_ENDIAN = {1: np.dtype("u1"), 2: np.dtype(">u2"), 4: np.dtype(">u4"), 8: np.dtype(">u8")}


def _be(values: np.ndarray, width: int) -> Bin:
    """Big-endian unsigned values of width (1, 2, 4 or 8) bytes as fixed rows (the low bytes of each: one cast)."""
    return Bin.fixed(values.astype(_BIG_ENDIAN[width]).view(np.uint8).reshape(-1, width))


def _len_suffix(lens: np.ndarray) -> Bin:
    """The length of a variable-width key or namespace: little-endian, as few bytes as needed (at least one)."""
    nb = 1 + (lens >= 1 << 8) + (lens >= 1 << 16) + (lens >= 1 << 24)
    le = lens.astype("<u4").view(np.uint8).reshape(-1, 4)
    return Bin.from_lens(nb, le[np.arange(4) < nb[:, None]])


def _timestamps(arr: pa.Array) -> np.ndarray:
    """A timer's timestamps as the u64 bits of the i64 (as `& (2**64 - 1)` of a Python int)."""
    if arr.null_count:
        raise ColumnValueError("timestamp", "a null timestamp")
    if pa.types.is_uint64(arr.type):
        return arr.to_numpy(zero_copy_only=False).astype(np.uint64)
    if pa.types.is_integer(arr.type):
        return arr.cast(pa.int64()).to_numpy(zero_copy_only=False).view(np.uint64)
    try:
        return np.array([v & ((1 << 64) - 1) for v in plain_values(arr)], np.uint64)
    except TypeError as e:
        raise ColumnValueError("timestamp", f"not an integer timestamp: {e}") from e


def _in_order(keys: Bin) -> tuple[bool, bool]:
    """Whether fixed-width rows are already in byte order (as a root's rows of a numeric key mostly are), and strictly
    (then no key is given twice): rows packed into big-endian u64 words, adjacent ones compared word by word."""
    n, w = keys.n, keys.width
    if n < 2 or w <= 0:
        return True, n < 2 or w > 0
    k = (w + 7) // 8
    padded = np.zeros((n, 8 * k), np.uint8)
    padded[:, :w] = keys.mat
    cols = padded.view(">u8").astype(np.uint64)
    if k == 1:
        a, b = cols[:-1, 0], cols[1:, 0]
        if (b > a).all():
            return True, True
        return bool((b >= a).all()), False
    less = np.zeros(n - 1, bool)
    equal = np.ones(n - 1, bool)
    for j in range(k):
        a, b = cols[:-1, j], cols[1:, j]
        less |= equal & (a < b)
        equal &= a == b
    return bool((less | equal).all()), bool(less.all())


def _sort_order(keys: Bin) -> np.ndarray:
    """The stable order of the rows by their bytes (unsigned, shorter first on a common prefix).

    Fixed-width keys: byte columns that are the same in every row are left out, the rest packed into
    big-endian u64 words; when one word and the row number fit 64 bits, a plain sort of (word, row)."""
    if keys.mat is None:
        return pc.sort_indices(keys.arrow()).to_numpy()
    n = keys.n
    mat = keys.mat[:, ~(keys.mat == keys.mat[:1]).all(axis=0)] if n else keys.mat
    w = mat.shape[1]
    if w == 0:
        return np.arange(n)
    words = (w + 7) // 8
    padded = np.zeros((n, 8 * words), np.uint8)
    padded[:, 8 * words - w if words == 1 else 0 : (8 * words - w if words == 1 else 0) + w] = mat
    cols = padded.view(">u8").astype(np.uint64)
    if words == 1 and (cols[1:, 0] >= cols[:-1, 0]).all():  # already in order (a root's rows often are)
        return np.arange(n)
    row_bits = max(1, int(n - 1).bit_length())
    if words == 1 and 8 * w + row_bits <= 64:  # (key, row) is unique: any sort is stable
        return (np.sort((cols[:, 0] << np.uint64(row_bits)) | np.arange(n, dtype=np.uint64)) & np.uint64((1 << row_bits) - 1)).astype(np.int64)
    if words == 1:
        return np.argsort(cols[:, 0], kind="stable")
    return np.lexsort([cols[:, j] for j in range(words - 1, -1, -1)])


def _same_as_previous(keys: Bin) -> np.ndarray:
    """Per row of sorted keys, whether it equals the previous row."""
    same = np.zeros(keys.n, bool)
    if keys.n < 2:
        return same
    if keys.mat is not None:
        rows = keys.rows()
        same[1:] = rows[1:] == rows[:-1]
    else:
        arr = keys.arrow()
        same[1:] = pc.equal(arr.slice(1), arr.slice(0, keys.n - 1)).to_numpy(zero_copy_only=False)
    return same


def _key_part(enc_node: TypeNode, table: pa.Table, column: str, n: int, ctx: str) -> Bin:
    arr = _column(table, column) if column in table.column_names else pa.nulls(n)
    return _encode(enc_node, arr, column, ctx)


def state_records(meta: StateMeta, table: pa.Table, key_type: TypeNode, maxp: int, ctx: str) -> StateRecords:
    """The sorted records of one state (VALUE/REDUCING/AGGREGATING/LIST/MAP or a timer service) from its table."""
    n = table.num_rows
    prefix = 1 if maxp <= 128 else 2
    kgs = _key_groups(table, maxp, prefix)
    head = _be(kgs, prefix)
    if meta.backend_type == "PRIORITY_QUEUE":
        node = meta.serializers["VALUE_SERIALIZER"]
        ts = _timestamps(_column(table, "timestamp")) ^ _SIGN
        keys = concat([head, _be(ts, 8), _encode(node.children[0], _column(table, "key"), "key", ctx),
                       _key_part(node.children[1], table, "namespace", n, ctx)])
        empty = Bin.from_lens(np.zeros(n, np.int64), np.zeros(0, np.uint8))
        if keys.mat is not None and _in_order(keys)[0]:  # timers in order already: nothing to gather
            return StateRecords(kgs, keys, empty)
        order = _sort_order(keys)
        return StateRecords(kgs[order], keys.take(order), empty)
    vnode = meta.serializers["VALUE_SERIALIZER"]
    nsnode = meta.serializers["NAMESPACE_SERIALIZER"]
    kind = meta.keyed_type
    key = _encode(key_type, _column(table, "key"), "key", ctx)
    ns = _key_part(nsnode, table, "namespace", n, ctx)
    parts = [head, key]
    if key_type.fixed_width < 0 and nsnode.fixed_width < 0:  # ambiguous: each part followed by its length
        parts = [head, key, _len_suffix(key.lens()), ns, _len_suffix(ns.lens())]
    else:
        parts.append(ns)
    if kind == "MAP":
        parts.append(_encode(vnode.children[0], _column(table, "user_key"), "user_key", ctx))
    keys = concat(parts)
    values = _values(kind, vnode, table, n, ctx)
    ordered, strictly = _in_order(keys) if keys.mat is not None else (False, False)
    if strictly:  # in order, every key once: the rows as they are
        return StateRecords(kgs, keys, values)
    if not ordered:
        order = _sort_order(keys)
        keys, kgs, values = keys.take(order), kgs[order], values.take(order)
    same = _same_as_previous(keys)
    if not same.any():
        return StateRecords(kgs, keys, values)
    first = np.flatnonzero(~same)
    if kind == "LIST":  # one record per key: its elements in row order, joined with ','
        lists = pa.ListArray.from_arrays(pa.array(np.append(first, n).astype(np.int32)), values.arrow())
        return StateRecords(kgs[first], keys.take(first), Bin.from_arrow(pc.binary_join(lists, b",")))
    last = np.append(first[1:] - 1, n - 1)  # a key given twice keeps its last value
    return StateRecords(kgs[last], keys.take(last), values.take(last))


def _values(kind: str, vnode: TypeNode, table: pa.Table, n: int, ctx: str) -> Bin:
    """The value bytes of each row (a MAP's null flag, a TTL's last-access timestamp, the serialized element)."""
    elem = vnode.children[1] if kind == "MAP" else vnode.children[0] if kind == "LIST" else vnode
    ttl = elem.kind == "ttl"
    inner = elem.children[1] if ttl else elem
    value = _column(table, "value")
    present = np.ones(n, bool)
    parts = []
    if kind == "MAP":
        present = value.is_valid().to_numpy(zero_copy_only=False) if value.null_count else present
        parts.append(Bin.fixed((~present).astype(np.uint8).reshape(-1, 1)))
    sel = None if present.all() else pa.array(present)
    if ttl and present.any():
        last_access = _column(table, "ttl_last_access")
        parts.append(_encode(TypeNode("long", ""), last_access if sel is None else last_access.filter(sel), "ttl_last_access", ctx).expand(present))
    if present.any():
        parts.append(_encode(inner, value if sel is None else value.filter(sel), "value", ctx).expand(present))
    if not parts:
        return Bin.from_lens(np.zeros(n, np.int64), np.zeros(0, np.uint8))
    return concat(parts)


def frame_key_groups(records: list[StateRecords], kg_range: tuple[int, int], head: bytes, compress: bool,
                     base: int = 0) -> tuple[bytes, list[int]]:
    """`framed_parts` joined into one bytes object."""
    parts, offsets = framed_parts(records, kg_range, head, compress, base)
    return b"".join(parts), offsets


def framed_parts(records: list[StateRecords], kg_range: tuple[int, int], head: bytes, compress: bool,
                 base: int = 0) -> tuple[list[bytes | memoryview], list[int]]:
    """The parts (views of the states' framed records, not copies) of head followed by the key-group streams of key groups kg_range (inclusive) of these states, and each key group's
    offset in it (0 for an empty key group). A stream is u16 state id, then records `i32 klen, key, i32 vlen, value`; the last record
    of a state's run has the 0x80 flag on its first key byte and is followed by the next state's id or 0xFFFF.
    A run is a contiguous slice of its state's framed records (`StateRecords.framed`), so this copies slices, not values.
    With compress, each key group's stream is snappy-framed on its own. base: where the returned bytes start in the file
    (a part of a file written chunk by chunk), added to every offset."""
    lo, hi = kg_range
    kgs = np.arange(lo, hi + 2)
    runs = []  # per state: its framed bytes and the byte bounds of each key group's run
    for recs in records:
        buf, starts = recs.framed()
        runs.append((memoryview(buf), starts[np.searchsorted(recs.kgs, kgs)].tolist()))
    chunks: list[bytes | memoryview] = [head]
    offsets: list[int] = []
    streams: list[bytes] = []  # with compress: each key group's stream, framed together at the end
    at = base + len(head)
    for g in range(hi - lo + 1):
        parts = [(sid, buf, b[g], b[g + 1]) for sid, (buf, b) in enumerate(runs) if b[g] < b[g + 1]]
        if not parts:
            offsets.append(0 if not compress else -1)
            continue
        stream: list[bytes | memoryview] = [parts[0][0].to_bytes(2, "big")]
        for j, (_, buf, a, b) in enumerate(parts):
            stream.append(buf[a:b])
            stream.append(parts[j + 1][0].to_bytes(2, "big") if j + 1 < len(parts) else b"\xff\xff")
        if compress:
            streams.append(b"".join(stream))
            offsets.append(len(streams) - 1)
        else:
            offsets.append(at)
            chunks += stream
            at += sum(len(x) for x in stream)
    if compress:
        framed = snappy_frames(streams)
        starts = np.cumsum([base + len(head)] + [len(f) for f in framed]).tolist()
        offsets = [0 if i < 0 else starts[i] for i in offsets]
        chunks += framed
    return chunks, offsets
