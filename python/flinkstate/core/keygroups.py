"""Key-group assignment bit-identical with Apache Flink's ``KeyGroupRangeAssignment``.

A key's group is ``MathUtils.murmurHash(key.hashCode()) % maxParallelism`` where
``hashCode`` follows Java semantics of the declared key type.
"""

from __future__ import annotations

import math
import struct
import sys
import threading
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from flinkstate.core.errors import InvalidArgumentError

__all__ = [
    "is_supported_key_type",
    "DEFAULT_LOWER_BOUND_MAX_PARALLELISM",
    "UPPER_BOUND_MAX_PARALLELISM",
    "assign_key_group",
    "assign_key_groups",
    "default_max_parallelism",
    "java_hash_code",
    "key_group_range",
    "murmur_hash",
    "operator_index_for_key_group",
]

UPPER_BOUND_MAX_PARALLELISM = 32768
DEFAULT_LOWER_BOUND_MAX_PARALLELISM = 128

# Flink's tuples go from Tuple0 to Tuple25.
_MAX_TUPLE_ARITY = 25

_MASK32 = 0xFFFFFFFF
_INT32_MIN = -(1 << 31)
_INT32_MAX = (1 << 31) - 1
_INT_BOUNDS = {
    8: (-(1 << 7), (1 << 7) - 1),
    16: (-(1 << 15), (1 << 15) - 1),
    32: (_INT32_MIN, _INT32_MAX),
    64: (-(1 << 63), (1 << 63) - 1),
}
_JAVA_TRUE = 1231
_JAVA_FALSE = 1237
_CANONICAL_NAN64 = 0x7FF8000000000000
_CANONICAL_NAN32 = 0x7FC00000
_UTF16_NATIVE = "utf-16-le" if sys.byteorder == "little" else "utf-16-be"
_INV31 = pow(31, -1, 1 << 32)  # 31 is odd, so it is invertible modulo 2**32

# Bytes of string data hashed per vectorised batch (keeps temporaries in cache).
_STRING_BATCH_BYTES = 1 << 18
# Longest cached power-of-31 tables (entries); longer strings get throwaway tables.
_MAX_CACHED_POWERS = 1 << 22
# Elements per block of the vectorised murmur hash (temporaries stay in cache).
_MURMUR_BLOCK = 1 << 16


# ---------------------------------------------------------------------------------------
# small helpers
# ---------------------------------------------------------------------------------------


def _to_int32(value: int) -> int:
    value &= _MASK32
    return value - (1 << 32) if value & 0x80000000 else value


def _check_int(name: str, value: Any, low: int, high: int) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise InvalidArgumentError(f"{name} must be an int, got {type(value).__name__}")
    value = int(value)
    if not low <= value <= high:
        raise InvalidArgumentError(f"{name} must be in [{low}, {high}], got {value}")
    return value


def _check_max_parallelism(max_parallelism: Any) -> int:
    return _check_int("max_parallelism", max_parallelism, 1, UPPER_BOUND_MAX_PARALLELISM)


def _unsupported(key_type: pa.DataType) -> InvalidArgumentError:
    return InvalidArgumentError(
        f"unsupported key type {key_type}: supported are int8, int16, int32, int64, bool, "
        "float32, float64, string, large_string, string_view, dictionary of those and "
        "struct (Flink tuple) of those"
    )


def _value_type(key_type: pa.DataType) -> pa.DataType:
    while pa.types.is_dictionary(key_type):
        key_type = key_type.value_type
    return key_type


def _is_string(key_type: pa.DataType) -> bool:
    return (
        pa.types.is_string(key_type)
        or pa.types.is_large_string(key_type)
        or pa.types.is_string_view(key_type)
    )


# ---------------------------------------------------------------------------------------
# scalar path
# ---------------------------------------------------------------------------------------


def murmur_hash(code: int) -> int:
    """Flink's ``MathUtils.murmurHash(int)``: a non-negative int from a signed int32 code."""
    code = _check_int("code", code, _INT32_MIN, _INT32_MAX) & _MASK32
    code = (code * 0xCC9E2D51) & _MASK32
    code = ((code << 15) | (code >> 17)) & _MASK32
    code = (code * 0x1B873593) & _MASK32
    code = ((code << 13) | (code >> 19)) & _MASK32
    code = (code * 5 + 0xE6546B64) & _MASK32
    code ^= 4
    code ^= code >> 16
    code = (code * 0x85EBCA6B) & _MASK32
    code ^= code >> 13
    code = (code * 0xC2B2AE35) & _MASK32
    code ^= code >> 16
    if code & 0x80000000:  # negative as int32: -code, and Integer.MIN_VALUE -> 0
        code = (-code) & 0x7FFFFFFF
    return code


def _infer_type(key: Any) -> pa.DataType:
    if key is None:
        raise InvalidArgumentError("key must not be None: Flink rejects null keys")
    if isinstance(key, pa.Scalar):
        return key.type
    if isinstance(key, (bool, np.bool_)):
        return pa.bool_()
    if isinstance(key, str):
        return pa.string()
    if isinstance(key, np.generic):
        try:
            return pa.from_numpy_dtype(key.dtype)
        except (pa.ArrowNotImplementedError, TypeError) as exc:
            raise InvalidArgumentError(f"unsupported key of numpy type {key.dtype}") from exc
    if isinstance(key, int):
        return pa.int64()
    if isinstance(key, float):
        return pa.float64()
    if isinstance(key, tuple):
        return pa.struct([pa.field(f"f{i}", _infer_type(v)) for i, v in enumerate(key)])
    raise InvalidArgumentError(
        f"cannot infer a key type for a {type(key).__name__} key; pass key_type"
    )


def _string_hash(value: str) -> int:
    units = memoryview(value.encode(_UTF16_NATIVE, "surrogatepass")).cast("H")
    h = 0
    for unit in units:
        h = (31 * h + unit) & _MASK32
    return h


def _hash_unsigned(key: Any, key_type: pa.DataType) -> int:
    """Java hashCode of ``key`` as declared by ``key_type``, as an unsigned 32-bit int."""
    if key is None:
        raise InvalidArgumentError("key must not be None: Flink rejects null keys")
    if isinstance(key, pa.Scalar):
        if not key.is_valid:
            raise InvalidArgumentError("key must not be null: Flink rejects null keys")
        key = key.as_py()
        if key is None:
            raise InvalidArgumentError("key must not be null: Flink rejects null keys")
    key_type = _value_type(key_type)
    if pa.types.is_integer(key_type) and pa.types.is_signed_integer(key_type):
        width = key_type.bit_width
        low, high = _INT_BOUNDS[width]
        value = _check_int(f"key of type {key_type}", key, low, high)
        if width == 64:  # Long.hashCode: (int)(v ^ (v >>> 32))
            value &= 0xFFFFFFFFFFFFFFFF
            return (value ^ (value >> 32)) & _MASK32
        return value & _MASK32  # Integer/Short/Byte.hashCode: the value itself
    if pa.types.is_binary(key_type) or pa.types.is_large_binary(key_type):
        if not isinstance(key, (bytes, bytearray, memoryview)):
            raise InvalidArgumentError(f"key of type {key_type} must be bytes (a BinaryRowData's), got {type(key).__name__}")
        return int(_hash_binary_rows(pa.array([bytes(key)], pa.binary()))[0])
    if pa.types.is_boolean(key_type):
        if not isinstance(key, (bool, np.bool_)):
            raise InvalidArgumentError(f"key of type bool must be a bool, got {type(key).__name__}")
        return _JAVA_TRUE if key else _JAVA_FALSE
    if pa.types.is_float64(key_type) or pa.types.is_float32(key_type):
        if isinstance(key, (bool, np.bool_)) or not isinstance(key, (int, float, np.integer, np.floating)):
            raise InvalidArgumentError(
                f"key of type {key_type} must be a float, got {type(key).__name__}"
            )
        value = float(key)
        if pa.types.is_float64(key_type):  # Double.hashCode over doubleToLongBits
            bits = _CANONICAL_NAN64 if math.isnan(value) else struct.unpack("<Q", struct.pack("<d", value))[0]
            return (bits ^ (bits >> 32)) & _MASK32
        if math.isnan(value):  # Float.hashCode = floatToIntBits
            return _CANONICAL_NAN32
        try:
            return struct.unpack("<I", struct.pack("<f", value))[0]
        except OverflowError as exc:
            raise InvalidArgumentError(f"key {value!r} does not fit in float32") from exc
    if _is_string(key_type):
        if not isinstance(key, str):
            raise InvalidArgumentError(
                f"key of type {key_type} must be a str, got {type(key).__name__}"
            )
        return _string_hash(key)
    if pa.types.is_struct(key_type):
        fields = [key_type.field(i) for i in range(key_type.num_fields)]
        if len(fields) > _MAX_TUPLE_ARITY:
            raise InvalidArgumentError(
                f"struct key type has {len(fields)} fields; Flink tuples have at most {_MAX_TUPLE_ARITY}"
            )
        if isinstance(key, dict):
            missing = [f.name for f in fields if f.name not in key]
            if missing or len(key) != len(fields):
                raise InvalidArgumentError(
                    f"struct key {key!r} does not match fields {[f.name for f in fields]}"
                )
            values = [key[f.name] for f in fields]
        elif isinstance(key, (tuple, list)):
            if len(key) != len(fields):
                raise InvalidArgumentError(
                    f"tuple key has {len(key)} values but key type {key_type} has {len(fields)} fields"
                )
            values = list(key)
        else:
            raise InvalidArgumentError(
                f"key of type {key_type} must be a tuple or dict, got {type(key).__name__}"
            )
        h = 0  # TupleN.hashCode: result = 31 * result + field.hashCode()
        for f, v in zip(fields, values):
            if v is None:
                raise InvalidArgumentError(
                    f"field {f.name!r} of a tuple key is null: Flink tuples reject null fields"
                )
            h = (31 * h + _hash_unsigned(v, f.type)) & _MASK32
        return h
    raise _unsupported(key_type)


def java_hash_code(key: Any, key_type: pa.DataType | None = None) -> int:
    """Java ``hashCode()`` (signed int32) of ``key`` under the declared or inferred key type."""
    if key_type is None:
        key_type = _infer_type(key)
    elif not isinstance(key_type, pa.DataType):
        raise InvalidArgumentError(f"key_type must be a pyarrow DataType, got {type(key_type).__name__}")
    return _to_int32(_hash_unsigned(key, key_type))


def assign_key_group(key: Any, max_parallelism: int, key_type: pa.DataType | None = None) -> int:
    """Flink's ``KeyGroupRangeAssignment.assignToKeyGroup``: the key group of one key."""
    max_parallelism = _check_max_parallelism(max_parallelism)
    return murmur_hash(java_hash_code(key, key_type)) % max_parallelism


# ---------------------------------------------------------------------------------------
# vectorised path
# ---------------------------------------------------------------------------------------

_tables_lock = threading.Lock()
_tables: tuple[np.ndarray, np.ndarray] = (np.empty(0, np.uint32), np.empty(0, np.uint32))


def _geometric(base: int, n: int) -> np.ndarray:
    out = np.full(n, base, dtype=np.uint32)
    out[0] = 1
    return np.cumprod(out, dtype=np.uint32)  # wraps modulo 2**32


def _power_tables(n: int) -> tuple[np.ndarray, np.ndarray]:
    """(INV[j] = 31**-j, PRE[j] = 31**(j-1)) modulo 2**32 for j in [0, n]."""
    global _tables
    tables = _tables
    if tables[0].size > n:
        return tables
    if n >= _MAX_CACHED_POWERS:  # a huge single string: do not keep tables that large around
        pre = _geometric(31, n + 1)
        pre *= np.uint32(_INV31)
        return _geometric(_INV31, n + 1), pre
    with _tables_lock:
        if _tables[0].size <= n:
            size = max(n + 1, 2 * _tables[0].size, _STRING_BATCH_BYTES + 1)
            pre = _geometric(31, size)
            pre *= np.uint32(_INV31)
            _tables = (_geometric(_INV31, size), pre)
        return _tables


def _murmur_np(codes: np.ndarray, modulus: int | None = None) -> np.ndarray:
    """Vectorised ``MathUtils.murmurHash`` over uint32 codes, optionally ``% modulus``.

    Works in cache-sized blocks; returns non-negative values as uint32.
    """
    out = np.empty(codes.size, dtype=np.uint32)
    tmp = np.empty(min(codes.size, _MURMUR_BLOCK), dtype=np.uint32)
    for lo in range(0, codes.size, _MURMUR_BLOCK):
        h = out[lo : lo + _MURMUR_BLOCK]
        t = tmp[: h.size]
        np.multiply(codes[lo : lo + _MURMUR_BLOCK], np.uint32(0xCC9E2D51), out=h)
        np.right_shift(h, np.uint32(17), out=t)
        h <<= np.uint32(15)
        h |= t
        h *= np.uint32(0x1B873593)
        np.right_shift(h, np.uint32(19), out=t)
        h <<= np.uint32(13)
        h |= t
        h *= np.uint32(5)
        h += np.uint32(0xE6546B64)
        h ^= np.uint32(4)
        np.right_shift(h, np.uint32(16), out=t)
        h ^= t
        h *= np.uint32(0x85EBCA6B)
        np.right_shift(h, np.uint32(13), out=t)
        h ^= t
        h *= np.uint32(0xC2B2AE35)
        np.right_shift(h, np.uint32(16), out=t)
        h ^= t
        # int32 abs with Integer.MIN_VALUE -> 0: conditional two's-complement negation, then mask.
        np.right_shift(h, np.uint32(31), out=t)
        np.negative(t, out=t)  # 0 or 0xFFFFFFFF
        h ^= t
        h -= t
        h &= np.uint32(0x7FFFFFFF)
        if modulus is not None:
            if modulus & (modulus - 1) == 0:
                h &= np.uint32(modulus - 1)
            else:
                h %= np.uint32(modulus)
    return out


def _check_no_nulls(arr: pa.Array, what: str = "key") -> None:
    if arr.null_count:
        raise InvalidArgumentError(
            f"{what} array contains {arr.null_count} null(s): Flink rejects null keys"
        )


def _primitive_view(arr: pa.Array, dtype: type) -> np.ndarray:
    buf = arr.buffers()[1]
    if buf is None or len(arr) == 0:
        return np.empty(0, dtype=dtype)
    return np.frombuffer(buf, dtype=dtype, count=len(arr), offset=arr.offset * np.dtype(dtype).itemsize)


def _hash_strings(arr: pa.Array) -> np.ndarray:
    """Java String.hashCode over UTF-16 code units for a string/large_string array."""
    n = len(arr)
    out = np.empty(n, dtype=np.uint32)
    if n == 0:
        return out
    _, off_buf, data_buf = arr.buffers()
    off_dtype = np.int64 if pa.types.is_large_string(arr.type) else np.int32
    offsets = np.frombuffer(
        off_buf, dtype=off_dtype, count=n + 1, offset=arr.offset * np.dtype(off_dtype).itemsize
    ).astype(np.int64)
    start, stop = int(offsets[0]), int(offsets[-1])
    if stop == start or data_buf is None:
        out.fill(0)
        return out
    data = np.frombuffer(data_buf, dtype=np.uint8, count=stop, offset=0)
    batch = _STRING_BATCH_BYTES
    i = 0
    while i < n:
        # largest j with offsets[j] <= offsets[i] + batch, always at least one string
        j = int(np.searchsorted(offsets, int(offsets[i]) + batch, side="right")) - 1
        j = min(max(j, i + 1), n)
        b0, b1 = int(offsets[i]), int(offsets[j])
        rel = offsets[i : j + 1].astype(np.intp)
        rel -= b0
        chunk = data[b0:b1]
        top = int(chunk.max()) if chunk.size else 0
        if top >= 0x80:
            out[i:j] = _hash_utf8_batch(arr.slice(i, j - i), chunk, rel, top >= 0xF0)
        else:
            out[i:j] = _hash_units(chunk, rel)
        i = j
    return out


def _hash_units(units: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """String hashes of consecutive UTF-16 unit runs ``units[bounds[k]:bounds[k+1]]``."""
    # h = sum u_k 31^(e-1-k) = 31^(e-1) * sum u_k 31^-k  (mod 2**32): a segmented sum.
    size = units.size
    out = np.zeros(bounds.size - 1, dtype=np.uint32)
    if size == 0:
        return out
    inv, pre = _power_tables(size)
    weighted = np.multiply(units, inv[:size], dtype=np.uint32)
    starts = bounds[:-1]
    # strings starting at the very end are empty (and reduceat cannot index there)
    k = int(np.searchsorted(starts, size, side="left"))
    out[:k] = np.add.reduceat(weighted, starts[:k], dtype=np.uint32)
    out[bounds[1:] == starts] = 0  # reduceat yields weighted[start] for empty runs
    out *= pre[bounds[1:]]
    return out


def _hash_utf8_batch(strings: pa.Array, chunk: np.ndarray, rel: np.ndarray, four_byte: bool) -> np.ndarray:
    """Like ``_hash_units`` for UTF-8 bytes: transcode the batch to UTF-16 units first."""
    try:
        text = chunk.tobytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidArgumentError(f"string key array holds invalid UTF-8: {exc}") from exc
    starts = rel[:-1]
    starts = starts[starts < chunk.size]
    if starts.size and bool((chunk.view(np.int8)[starts] < -64).any()):  # 0x80..0xBF
        raise InvalidArgumentError("string key array holds invalid UTF-8: a string starts mid-character")
    units = np.frombuffer(text.encode("utf-16-le"), dtype="<u2")
    lengths = pc.utf8_length(strings).to_numpy(zero_copy_only=False)  # code points per string
    bounds = np.zeros(lengths.size + 1, dtype=np.intp)
    np.cumsum(lengths, out=bounds[1:])
    if four_byte:  # code points beyond the BMP take two UTF-16 units (a surrogate pair)
        high = np.flatnonzero((units & np.uint16(0xFC00)) == np.uint16(0xD800))
        high -= np.arange(high.size)  # code point index of each surrogate pair
        bounds += np.searchsorted(high, bounds)
    return _hash_units(units, bounds)


def _fold64(v: np.ndarray) -> np.ndarray:
    """(int)(v ^ (v >>> 32)) for uint64 values: xor of the two 32-bit halves (any byte order)."""
    halves = v.view(np.uint32)
    return halves[0::2] ^ halves[1::2]


def _hash_array(arr: pa.Array) -> np.ndarray:
    """Java hashCodes (as uint32) of every element of a null-free Arrow array."""
    t = arr.type
    if pa.types.is_dictionary(t):
        _check_no_nulls(arr)
        dictionary = arr.dictionary
        indices = arr.indices.to_numpy(zero_copy_only=False).astype(np.intp, copy=False)
        if dictionary.null_count:
            valid = dictionary.is_valid().to_numpy(zero_copy_only=False)
            if not valid[indices].all():
                raise InvalidArgumentError("key array references a null dictionary value: Flink rejects null keys")
            remap = np.cumsum(valid) - 1
            dictionary = dictionary.filter(pa.array(valid))
            indices = remap[indices]
        return _hash_array(dictionary)[indices]
    _check_no_nulls(arr)
    if pa.types.is_int64(t):
        return _fold64(_primitive_view(arr, np.uint64))
    if pa.types.is_int32(t):
        return _primitive_view(arr, np.uint32)
    if pa.types.is_int16(t):
        return _primitive_view(arr, np.int16).astype(np.int32).view(np.uint32)
    if pa.types.is_int8(t):
        return _primitive_view(arr, np.int8).astype(np.int32).view(np.uint32)
    if pa.types.is_boolean(t):
        v = arr.to_numpy(zero_copy_only=False)
        return np.where(v, np.uint32(_JAVA_TRUE), np.uint32(_JAVA_FALSE)).astype(np.uint32)
    if pa.types.is_float64(t):
        f = _primitive_view(arr, np.float64)
        bits = f.view(np.uint64).copy()
        bits[np.isnan(f)] = np.uint64(_CANONICAL_NAN64)
        return _fold64(bits)
    if pa.types.is_float32(t):
        f = _primitive_view(arr, np.float32)
        bits = f.view(np.uint32).copy()
        bits[np.isnan(f)] = np.uint32(_CANONICAL_NAN32)
        return bits
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return _hash_strings(arr)
    if pa.types.is_string_view(t):
        return _hash_strings(arr.cast(pa.large_string()))
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return _hash_binary_rows(arr)
    if pa.types.is_struct(t):
        if t.num_fields > _MAX_TUPLE_ARITY:
            raise InvalidArgumentError(
                f"struct key type has {t.num_fields} fields; Flink tuples have at most {_MAX_TUPLE_ARITY}"
            )
        h = np.zeros(len(arr), dtype=np.uint32)
        for i in range(t.num_fields):
            child = arr.field(i)
            if child.null_count:
                raise InvalidArgumentError(
                    f"field {t.field(i).name!r} of the struct key array has nulls: Flink tuples reject null fields"
                )
            h *= np.uint32(31)
            h += _hash_array(child)
        return h
    raise _unsupported(t)


_ROW_SEED = 42  # MurmurHashUtil.DEFAULT_SEED


def _hash_binary_rows(arr: pa.Array) -> np.ndarray:
    """BinaryRowData.hashCode of each element (the keys of SQL and Table API operators, stored as their bytes):
    MurmurHashUtil.hashBytesByWords with seed 42 over the row's bytes as little-endian 4-byte words (a BinaryRowData
    is 8-byte aligned), then murmur3's finalizer with the length. Vectorised per distinct length."""
    arr = arr.cast(pa.large_binary())
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int64, count=len(arr) + 1, offset=arr.offset * 8)
    data = np.frombuffer(arr.buffers()[2], dtype=np.uint8) if arr.buffers()[2] is not None else np.empty(0, np.uint8)
    lengths = np.diff(offsets)
    if (lengths % 4).any():
        raise InvalidArgumentError("binary keys are Flink BinaryRowData bytes (SQL operators' keys), whose length is a multiple of 8; "
                                   f"got a key of {int(lengths[(lengths % 4) != 0][0])} bytes")
    out = np.empty(len(arr), dtype=np.uint32)
    with np.errstate(over="ignore"):
        for length in np.unique(lengths):
            rows = np.nonzero(lengths == length)[0]
            n = int(length)
            idx = offsets[:-1][rows, None] + np.arange(n, dtype=np.int64)[None, :]
            words = data[idx].reshape(len(rows), n).view("<u4") if n else np.empty((len(rows), 0), np.uint32)
            h = np.full(len(rows), _ROW_SEED, dtype=np.uint32)
            for j in range(n // 4):
                k = words[:, j].astype(np.uint32) * np.uint32(0xCC9E2D51)
                k = (k << np.uint32(15)) | (k >> np.uint32(17))
                k *= np.uint32(0x1B873593)
                h ^= k
                h = (h << np.uint32(13)) | (h >> np.uint32(19))
                h = h * np.uint32(5) + np.uint32(0xE6546B64)
            h ^= np.uint32(n)
            h ^= h >> np.uint32(16)
            h *= np.uint32(0x85EBCA6B)
            h ^= h >> np.uint32(13)
            h *= np.uint32(0xC2B2AE35)
            h ^= h >> np.uint32(16)
            out[rows] = h
    return out


def assign_key_groups(array: pa.Array | pa.ChunkedArray, max_parallelism: int) -> pa.Array:
    """Vectorised ``assign_key_group`` for every element of an Arrow array (int32 result).

    The element type is the declared key type; nulls raise ``InvalidArgumentError``.
    """
    max_parallelism = _check_max_parallelism(max_parallelism)
    if isinstance(array, pa.ChunkedArray):
        chunks = array.chunks
    elif isinstance(array, pa.Array):
        chunks = [array]
    else:
        raise InvalidArgumentError(
            f"array must be a pyarrow Array or ChunkedArray, got {type(array).__name__}"
        )
    if not is_supported_key_type(array.type):
        raise _unsupported(array.type)
    parts = [_hash_array(chunk) for chunk in chunks if len(chunk)]
    if not parts:
        return pa.array(np.empty(0, dtype=np.int32), type=pa.int32())
    codes = parts[0] if len(parts) == 1 else np.concatenate(parts)
    groups = _murmur_np(codes, max_parallelism)
    return pa.array(groups.view(np.int32), type=pa.int32())


def is_supported_key_type(t: pa.DataType) -> bool:
    """True for key types whose Java hashCode (and so Flink's key group) is modelled here."""
    t = _value_type(t)
    if pa.types.is_struct(t):
        return t.num_fields <= _MAX_TUPLE_ARITY and all(
            is_supported_key_type(t.field(i).type) for i in range(t.num_fields)
        )
    return (
        pa.types.is_int8(t)
        or pa.types.is_int16(t)
        or pa.types.is_int32(t)
        or pa.types.is_int64(t)
        or pa.types.is_boolean(t)
        or pa.types.is_float32(t)
        or pa.types.is_float64(t)
        or _is_string(t)
        or pa.types.is_binary(t)  # a SQL operator's BinaryRowData key, as its bytes
        or pa.types.is_large_binary(t)
    )


# ---------------------------------------------------------------------------------------
# ranges and parallelism
# ---------------------------------------------------------------------------------------


def key_group_range(max_parallelism: int, parallelism: int, operator_index: int) -> tuple[int, int]:
    """Inclusive (start, end) key groups of subtask ``operator_index`` of ``parallelism``.

    Flink's ``computeKeyGroupRangeForOperatorIndex``.
    """
    max_parallelism = _check_max_parallelism(max_parallelism)
    parallelism = _check_int("parallelism", parallelism, 1, max_parallelism)
    operator_index = _check_int("operator_index", operator_index, 0, parallelism - 1)
    start = (operator_index * max_parallelism + parallelism - 1) // parallelism
    end = ((operator_index + 1) * max_parallelism - 1) // parallelism
    return start, end


def operator_index_for_key_group(max_parallelism: int, parallelism: int, key_group: int) -> int:
    """Subtask index owning ``key_group``: Flink's ``computeOperatorIndexForKeyGroup``."""
    max_parallelism = _check_max_parallelism(max_parallelism)
    parallelism = _check_int("parallelism", parallelism, 1, max_parallelism)
    key_group = _check_int("key_group", key_group, 0, max_parallelism - 1)
    return key_group * parallelism // max_parallelism


def default_max_parallelism(parallelism: int) -> int:
    """Flink's ``computeDefaultMaxParallelism``: max parallelism used when none is configured."""
    parallelism = _check_int("parallelism", parallelism, 1, UPPER_BOUND_MAX_PARALLELISM)
    x = parallelism + parallelism // 2
    rounded = 1 << (x - 1).bit_length()  # MathUtils.roundUpToPowerOfTwo for x >= 1
    return min(max(rounded, DEFAULT_LOWER_BOUND_MAX_PARALLELISM), UPPER_BOUND_MAX_PARALLELISM)
