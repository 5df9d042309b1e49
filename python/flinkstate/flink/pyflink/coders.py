"""PyFlink jobs' keyed state: Flink's `python-state-X` states read back as the Python job's state `X`.

Sources (apache/flink, flink-python): `BeamKeyedStateStore` stores a Python state `X` as Java state
`python-state-X`: value and list state as a LIST of `byte[]` (each Beam bag append is one element
holding one or more values encoded back to back; a ValueState update clears and appends one), map
state as `MapSerializer[ByteArrayWrapperSerializer, byte[]]`. The bytes are PyFlink coder output
(`pyflink/fn_execution/coder_impl_slow.py`, no length prefix per value): LONG 8 bytes big-endian,
INT 4, SHORT 2, BYTE 1, DOUBLE/FLOAT IEEE big-endian, BOOLEAN 1 byte, STRING and byte arrays
i32 length + bytes (UTF-8), ROW a null mask (2 RowKind bits, then one bit per field, MSB first) +
the non-null fields, PICKLED_BYTE_ARRAY i32 length + `pickle.dumps` bytes. A keyed stream's key is
`Row.of(key)` (`DataStream.key_by`: `Types.ROW([key_type])`), so its key group is
`murmurHash(Row.hashCode())` with `Row.hashCode() = 31*0 + (31 + (31 + key.hashCode()))`.

The savepoint does not hold the Python types (every value is `byte[]` to Java), nor whether a
LIST is a ValueState or a ListState: a user declares them per state (`value_state`, `list_state`,
`map_state`); undeclared states read as list (or map) state of the raw coder bytes. Pickled values
come as their pickle bytes; `unpickle=True` unpickles them, which runs code chosen by whoever wrote
the savepoint: only for savepoints you trust.
"""

from __future__ import annotations

import dataclasses
import pickle
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pyarrow as pa

from flinkstate.core.errors import InvalidArgumentError
from flinkstate.core.keygroups import java_hash_code, murmur_hash
from flinkstate.flink.errors import (
    CorruptFileError,
    UnsupportedFlinkFormatError,
    UnsupportedSerializerError,
)
from flinkstate.flink.meta.names import lookup
from flinkstate.flink.pyflink._vector import vector_values
from flinkstate.flink.serde.values import (
    flagged_array_reader,
    map_entries_reader,
    masked_row_reader,
)

__all__ = ["PREFIX", "PICKLED", "Pickled", "PyFlinkDecoder", "PyFlinkOptions", "PyFlinkState", "PyFlinkTimerDecoder", "is_pyflink_state", "list_state",
           "map_state", "pyflink_states", "refuse_import", "row_key_group", "row_key_groups", "row_key_groups_array", "value_state"]

PREFIX = "python-state-"
_ROW_KIND_BITS = 2


@dataclass(frozen=True)
class Pickled:
    """PyFlink's PICKLED_BYTE_ARRAY (the default type): bytes, or with `unpickle=True` objects converted to `as_type`."""

    as_type: pa.DataType | None = None


PICKLED = Pickled()
PyFlinkType = pa.DataType | Pickled


@dataclass(frozen=True)
class PyFlinkState:
    """What a PyFlink job declared for one state: its kind and the types its coders wrote."""

    kind: Literal["value", "list", "map"]
    value_type: PyFlinkType
    user_key_type: PyFlinkType | None = None
    raw: bool = False  # undeclared: the coder bytes as stored, not decoded


def value_state(value_type: PyFlinkType) -> PyFlinkState:
    """A ValueStateDescriptor's declaration (Types.LONG() is pa.int64(), ROW a struct, PICKLED_BYTE_ARRAY `PICKLED`)."""
    return PyFlinkState("value", value_type)


def list_state(element_type: PyFlinkType) -> PyFlinkState:
    """A ListStateDescriptor's declaration (the element type)."""
    return PyFlinkState("list", element_type)


def map_state(key_type: PyFlinkType, value_type: PyFlinkType) -> PyFlinkState:
    """A MapStateDescriptor's declaration (user key and value types)."""
    return PyFlinkState("map", value_type, key_type)


@dataclass(frozen=True)
class PyFlinkOptions:
    """The declared PyFlink states ("operator/state" or "state" -> PyFlinkState) and whether to unpickle.

    A checkpoint reads them with their operators resolved (`names.resolve_options`: keys "<operator id>/<state>").
    """

    states: Mapping[str, PyFlinkState] = dataclasses.field(default_factory=dict)
    unpickle: bool = False

    def declared(self, op: Any, state: str) -> PyFlinkState | None:
        """The declaration of a state of an operator (a `metadata.OperatorState`), if any."""
        got = lookup(self.states, op, state)
        if got is not None and not isinstance(got, PyFlinkState):
            raise InvalidArgumentError(f"PyFlink state {op.label}/{state}: declare it with value_state/list_state/map_state, got {got!r}")
        return got


def is_pyflink_state(name: str, key_node: Any, value_node: Any, kind: str) -> bool:
    """True for a state a PyFlink job wrote: `python-state-` name, one-field Row key, byte[] values."""
    if not name.startswith(PREFIX) or key_node.kind != "row" or len(key_node.children) != 1:
        return False
    if kind == "LIST":
        return value_node.kind == "list" and _bytes_node(value_node.children[0])
    if kind == "MAP":
        return value_node.kind == "map" and all(_bytes_node(c) for c in value_node.children)
    return False


def _bytes_node(node: Any) -> bool:
    if node.kind == "ttl":
        node = node.children[1]
    return node.kind == "bytes"


# ------------------------------------------------------------------------------------------- key groups
def row_key_group(key: Any, key_type: pa.DataType, max_parallelism: int) -> int:
    """The key group of `Row.of(key)`, as PyFlink's keyed streams assign it."""
    inner = 0 if key is None else java_hash_code(key, key_type)
    code = (31 * 0 + (31 + (31 + inner))) & 0xFFFFFFFF
    code = code - (1 << 32) if code & 0x80000000 else code
    return murmur_hash(code) % max_parallelism


def row_key_groups_array(keys: pa.Array | pa.ChunkedArray, max_parallelism: int) -> pa.Array:
    """Key groups of Row keys (a struct array: Row's fields; any other array: one-field Rows of it), vectorized.

    `RowUtils.deepHashCodeRow`: 31 * RowKind.INSERT(0) + deepHashCode(fields), where the fields' hash is
    Arrays.hashCode-like (start 1, times 31) over `31 + field.hashCode()` per field (0 for a null field).
    """
    from flinkstate.core.keygroups import _hash_array, _murmur_np

    arr = keys.combine_chunks() if isinstance(keys, pa.ChunkedArray) else keys
    fields = [arr.field(i) for i in range(arr.type.num_fields)] if pa.types.is_struct(arr.type) else [arr]
    h = np.ones(len(arr), dtype=np.uint32)
    for f in fields:
        inner = np.zeros(len(arr), dtype=np.uint32)
        valid = f.is_valid().to_numpy(zero_copy_only=False)
        if valid.any():
            inner[valid] = _hash_array(f.filter(pa.array(valid))) + np.uint32(31)
        h = h * np.uint32(31) + inner
    return pa.array(_murmur_np(h, max_parallelism).view(np.int32), pa.int32())


def row_key_groups(keys: list[Any], key_type: pa.DataType, max_parallelism: int) -> set[int]:
    """The key groups of PyFlink keys (each wrapped in a one-field Row)."""
    try:
        return {row_key_group(k, key_type, max_parallelism) for k in keys}
    except (InvalidArgumentError, TypeError, ValueError, OverflowError) as e:
        raise InvalidArgumentError(f"keys {keys[:5]!r} are not values of the PyFlink key type {key_type}: {e}") from e


# ------------------------------------------------------------------------------------------- coders
Reader = Callable[[bytes, int], tuple[Any, int]]
_FIXED = {pa.int64(): ">q", pa.int32(): ">i", pa.int16(): ">h", pa.int8(): ">b", pa.float64(): ">d", pa.float32(): ">f",
          pa.date32(): ">i", pa.timestamp("ms"): ">q"}


def _fixed(fmt: str) -> Reader:
    s = struct.Struct(fmt)

    def read(buf: bytes, pos: int) -> tuple[Any, int]:
        return s.unpack_from(buf, pos)[0], pos + s.size

    return read


def _sized(buf: bytes, pos: int) -> tuple[bytes, int]:
    n = int.from_bytes(buf[pos : pos + 4], "big", signed=True)
    end = pos + 4 + n
    if n < 0 or end > len(buf):
        raise IndexError(f"a length of {n} at offset {pos} runs past the value's end")
    return bytes(buf[pos + 4 : end]), end


def _string(buf: bytes, pos: int) -> tuple[str, int]:
    raw, pos = _sized(buf, pos)
    return raw.decode("utf-8"), pos


def _bool(buf: bytes, pos: int) -> tuple[bool, int]:
    return buf[pos] != 0, pos + 1


def coder_reader(t: PyFlinkType, unpickle: bool, ctx: str) -> Reader:
    """A (buf, pos) -> (value, pos) reader of PyFlink coder bytes for a declared type."""
    if isinstance(t, Pickled):
        if not unpickle:
            return _sized
        if t.as_type is None:
            raise InvalidArgumentError(f"{ctx}: unpickle=True needs the Arrow type of the unpickled values: PICKLED = Pickled(as_type=...)")

        def unpickled(buf: bytes, pos: int) -> tuple[Any, int]:
            raw, pos = _sized(buf, pos)
            return pickle.loads(raw), pos  # noqa: S301 - opted into by the user (unpickle=True): trusted savepoints only

        return unpickled
    if t in _FIXED:
        return _fixed(_FIXED[t])
    if pa.types.is_boolean(t):
        return _bool
    if pa.types.is_string(t):
        return _string
    if pa.types.is_binary(t):
        return _sized
    if pa.types.is_struct(t):
        return _row(t, unpickle, ctx)
    if pa.types.is_list(t):
        # GenericArrayCoder: i32 n, (present flag, value)*, the layout of Flink's GenericArraySerializer
        return flagged_array_reader(coder_reader(t.value_type, unpickle, ctx))
    if pa.types.is_map(t):
        # MapCoder: i32 n, (key, null flag, value)*, the layout of Flink's MapSerializer
        return map_entries_reader(coder_reader(t.key_type, unpickle, ctx), coder_reader(t.item_type, unpickle, ctx))
    raise UnsupportedSerializerError(f"{ctx}: PyFlink values of Arrow type {t} cannot be decoded")


def _row(t: pa.StructType, unpickle: bool, ctx: str) -> Reader:
    fields = [(t.field(i).name, coder_reader(t.field(i).type, unpickle, ctx)) for i in range(t.num_fields)]
    return masked_row_reader(fields, _ROW_KIND_BITS)


def arrow_of(t: PyFlinkType, unpickle: bool) -> pa.DataType:
    """The Arrow type a declared PyFlink type reads as."""
    if isinstance(t, Pickled):
        return t.as_type if unpickle and t.as_type is not None else pa.binary()
    return t


# ------------------------------------------------------------------------------------------- decoded tables
class PyFlinkDecoder:
    """A decoded `python-state-X` state seen as the Python job's state `X`: key unwrapped, coder bytes decoded."""

    def __init__(self, inner: Any, declared: PyFlinkState | None, opts: PyFlinkOptions) -> None:
        self.inner = inner
        self.name = inner.meta.name.removeprefix(PREFIX)
        self.meta = dataclasses.replace(inner.meta, name=self.name)
        self.ctx = f"{inner.ctx.rsplit(', state ', 1)[0]}, state {self.name!r} (Flink state {inner.meta.name!r})"
        java_kind = inner.kind
        if declared is None:
            declared = PyFlinkState("map", pa.binary(), pa.binary(), raw=True) if java_kind == "MAP" else PyFlinkState("list", pa.binary(), raw=True)
        if (declared.kind == "map") != (java_kind == "MAP"):
            raise InvalidArgumentError(f"{self.ctx}: declared as PyFlink {declared.kind} state, but Flink stored a {java_kind} state")
        self.declared = declared
        self.unpickle = opts.unpickle
        self.kind = declared.kind.upper()
        self.timer = False
        self.ttl = inner.ttl
        self.key_node = inner.key_node.children[0]
        self.ns_node = inner.ns_node
        self.value_node = inner.value_node
        self.elem_node = inner.elem_node
        self.key_type = arrow_type_of(self.key_node)
        self.value_type = arrow_of(declared.value_type, opts.unpickle)
        self.user_key_type = None if declared.user_key_type is None else arrow_of(declared.user_key_type, opts.unpickle)
        self.unreadable = inner.unreadable  # PyFlink states are byte[] to Java: these are None, kept for the shared checks
        self.raw_error = inner.raw_error

    def table(self, raw_values: bool = False) -> pa.Table:
        """The entries as the Python job holds them: one row per value, list element or map entry, Flink's key groups."""
        t = self.inner.table(raw_values)
        key = t.column("key").combine_chunks().field(0) if t.num_rows else pa.array([], self.key_type)
        cols: dict[str, pa.Array] = {"key_group": t.column("key_group").combine_chunks(), "key": key}
        if "namespace" in t.column_names:
            cols["namespace"] = t.column("namespace").combine_chunks()
        if "ttl_last_access" in t.column_names:
            cols["ttl_last_access"] = t.column("ttl_last_access").combine_chunks()
        d = self.declared
        try:
            if self.kind == "MAP":
                uk_idx, cols["user_key"] = self._values(t.column("user_key").combine_chunks(), d.user_key_type)
                v_idx, value = self._values(t.column("value").combine_chunks(), d.value_type)
                if len(uk_idx) != t.num_rows or len(v_idx) != t.num_rows:
                    raise ValueError("a map entry's key or value holds more than one value")
                return pa.table({**cols, "value": value})
            idx, value = self._values(t.column("value").combine_chunks(), d.value_type)
        except InvalidArgumentError:
            raise  # a declaration the user must fix, not a damaged file
        except (IndexError, ValueError, struct.error, UnicodeDecodeError, pickle.UnpicklingError, pa.ArrowInvalid) as e:
            raise CorruptFileError(f"{self.ctx}: PyFlink coder bytes do not decode as {d}: {e}") from e
        if self.kind == "VALUE" and len(idx) and np.any(np.diff(idx) == 0):
            raise CorruptFileError(f"{self.ctx}: declared a value state, but a key holds several values (a list state?)")
        take = pa.array(idx, pa.int64())
        out = {c: a.take(take) for c, a in cols.items()}
        out["value"] = value
        return pa.table(out)

    def _values(self, blobs: pa.Array, declared: PyFlinkType | None) -> tuple[np.ndarray, pa.Array]:
        """(blob index of each value, the values): raw blobs, numpy-decoded, or value by value (ROW, arrays, unpickled)."""
        if self.declared.raw or declared is None:
            return np.arange(len(blobs), dtype=np.int64), blobs.cast(pa.binary())
        t = arrow_of(declared, self.unpickle)
        if not (isinstance(declared, Pickled) and self.unpickle):
            got = vector_values(blobs, t)
            if got is not None:
                return got
        read = coder_reader(declared, self.unpickle, self.ctx)
        idx: list[int] = []
        vals: list[Any] = []
        for i, b in enumerate(blobs.to_pylist()):
            if b is None:  # a map entry without a value
                idx.append(i)
                vals.append(None)
                continue
            pos = 0
            while pos < len(b):  # one Beam bag append: values back to back
                v, pos = read(b, pos)
                idx.append(i)
                vals.append(v)
        return np.array(idx, dtype=np.int64), pa.array(vals, t)


def arrow_type_of(node: Any) -> pa.DataType:
    """The Arrow type of a Flink serializer node (the unwrapped PyFlink key)."""
    from flinkstate.flink.serde.serializers import arrow_type

    return arrow_type(node)


class PyFlinkTimerDecoder:
    """A PyFlink operator's timer service with its Row-wrapped key unwrapped (Flink's key groups kept)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.meta = inner.meta
        self.ctx = inner.ctx
        self.timer = True
        self.kind = "TIMER"
        self.ttl = False
        self.key_node = inner.key_node.children[0]
        self.ns_node = inner.ns_node
        self.value_node = None

    def table(self) -> pa.Table:
        """The timers (key_group, key, [namespace], timestamp) with the key out of its Row."""
        t = self.inner.table()
        key = t.column("key").combine_chunks().field(0) if t.num_rows else pa.array([], arrow_type_of(self.key_node))
        return t.set_column(t.column_names.index("key"), "key", key)


def pyflink_states(meta: Any, op: Any, decoders: dict[str, Any]) -> dict[str, Any]:
    """An operator's decoders with each PyFlink state under its Python name and its timers' keys unwrapped."""
    opts = meta.options.get("pyflink") or PyFlinkOptions()
    label = op.uid or op.operator_id
    if not any(not d.timer and is_pyflink_state(n, d.key_node, d.value_node, d.kind) for n, d in decoders.items()):
        return decoders
    meta.options.setdefault("pyflink_ops", set()).add(label)
    out: dict[str, Any] = {}
    for name, dec in decoders.items():
        if dec.timer:
            row = dec.key_node.kind == "row" and len(dec.key_node.children) == 1
            out[name] = PyFlinkTimerDecoder(dec) if row else dec
        elif is_pyflink_state(name, dec.key_node, dec.value_node, dec.kind):
            py = PyFlinkDecoder(dec, opts.declared(op, name.removeprefix(PREFIX)), opts)
            out[py.name] = py
        else:
            out[name] = dec
    return out


def refuse_import(dec: Any, op: Any, path: str) -> None:
    """A PyFlink operator cannot be imported: flinkstate groups keys by murmurHash(key.hashCode()), PyFlink by its Row's."""
    if isinstance(dec, (PyFlinkDecoder, PyFlinkTimerDecoder)):
        raise UnsupportedFlinkFormatError(
            f"{path}: operator {op.label} is a PyFlink job's (state {dec.meta.name!r}): its keys are grouped by the hash of the "
            "one-field Row PyFlink wraps them in, which flinkstate's key groups do not follow, so it cannot be imported "
            "unchanged; read it in place with flinkstate.open(savepoint)")
