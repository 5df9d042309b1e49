"""Tests for flinkstate.core.keygroups: bit-identical with Flink's KeyGroupRangeAssignment."""

from __future__ import annotations

import math
import random
import re
import struct
from unittest import mock

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import flinkstate.core.keygroups as kg
from flinkstate.core.errors import InvalidArgumentError
from flinkstate.core.keygroups import (
    DEFAULT_LOWER_BOUND_MAX_PARALLELISM,
    UPPER_BOUND_MAX_PARALLELISM,
    assign_key_group,
    assign_key_groups,
    default_max_parallelism,
    java_hash_code,
    key_group_range,
    murmur_hash,
    operator_index_for_key_group,
)

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


# ---------------------------------------------------------------------------------------
# Independent reference implementations (written from the Java/Murmur3 specifications,
# sharing no code with the module under test).
# ---------------------------------------------------------------------------------------


def ref_murmur3_x86_32(data: bytes, seed: int = 0) -> int:
    """Austin Appleby's MurmurHash3_x86_32, generic over byte length and seed."""
    c1, c2, mask = 0xCC9E2D51, 0x1B873593, 0xFFFFFFFF

    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (32 - r))) & mask

    h = seed & mask
    nblocks = len(data) // 4
    for i in range(nblocks):
        k = int.from_bytes(data[4 * i : 4 * i + 4], "little")
        k = rotl((k * c1) & mask, 15) * c2 & mask
        h = (rotl(h ^ k, 13) * 5 + 0xE6546B64) & mask
    tail = data[4 * nblocks :]
    k = 0
    for j in reversed(range(len(tail))):
        k = (k << 8) | tail[j]
    if tail:
        h ^= rotl((k * c1) & mask, 15) * c2 & mask
    h ^= len(data)
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & mask
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & mask
    h ^= h >> 16
    return h


def ref_flink_murmur(code: int) -> int:
    """Flink's MathUtils.murmurHash = Murmur3_x86_32(int as 4 LE bytes, seed 0), then abs."""
    h = ref_murmur3_x86_32(struct.pack("<i", code), 0)
    signed = h - 2**32 if h >= 2**31 else h
    if signed >= 0:
        return signed
    return -signed if signed != INT32_MIN else 0


def to_int32(x: int) -> int:
    x %= 2**32
    return x - 2**32 if x >= 2**31 else x


def ref_string_hash(s: str) -> int:
    """java.lang.String.hashCode: sum s[i]*31^(n-1-i) over UTF-16 code units, as int32."""
    units: list[int] = []
    for ch in s:
        cp = ord(ch)
        if cp >= 0x10000:
            cp -= 0x10000
            units += [0xD800 | (cp >> 10), 0xDC00 | (cp & 0x3FF)]
        else:
            units.append(cp)
    n = len(units)
    return to_int32(sum(u * pow(31, n - 1 - i, 2**32) for i, u in enumerate(units)))


def ref_long_hash(v: int) -> int:
    bits = v & (2**64 - 1)
    return to_int32((bits ^ (bits >> 32)) & 0xFFFFFFFF)


def ref_double_hash(x: float) -> int:
    bits = 0x7FF8000000000000 if math.isnan(x) else struct.unpack(">q", struct.pack(">d", x))[0]
    return ref_long_hash(bits)


def ref_float_hash(x: float) -> int:
    if math.isnan(x):
        return 0x7FC00000
    return struct.unpack(">i", struct.pack(">f", x))[0]


def ref_key_group(java_hash: int, max_parallelism: int) -> int:
    return ref_flink_murmur(java_hash) % max_parallelism


# ---------------------------------------------------------------------------------------
# murmur
# ---------------------------------------------------------------------------------------

# Published MurmurHash3_x86_32 test vectors (Ian Boyd's list, stackoverflow.com/a/31929528).
MURMUR3_VECTORS = [
    (b"", 0, 0),
    (b"", 1, 0x514E28B7),
    (b"", 0xFFFFFFFF, 0x81F16F39),
    (b"\xff\xff\xff\xff", 0, 0x76293B50),
    (b"\x21\x43\x65\x87", 0, 0xF55B516B),
    (b"\x21\x43\x65\x87", 0x5082EDEE, 0x2362F9DE),
    (b"\x21\x43\x65", 0, 0x7E4A8634),
    (b"\x21\x43", 0, 0xA0F7B07A),
    (b"\x21", 0, 0x72661CF4),
    (b"\x00\x00\x00\x00", 0, 0x2362F9DE),
    (b"\x00\x00\x00", 0, 0x85F0B427),
    (b"\x00\x00", 0, 0x30F4C306),
    (b"\x00", 0, 0x514E28B7),
]


@pytest.mark.parametrize(("data", "seed", "expected"), MURMUR3_VECTORS)
def test_reference_murmur3_matches_published_vectors(data: bytes, seed: int, expected: int) -> None:
    assert ref_murmur3_x86_32(data, seed) == expected


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        (0, 0x2362F9DE),  # murmur3(00 00 00 00) is positive as int32
        (-1, 0x76293B50),  # murmur3(ff ff ff ff) is positive
        (to_int32(0x87654321), 2**32 - 0xF55B516B),  # murmur3(21 43 65 87) is negative: negated
        (1, 2**32 - 0xFBF1402A),  # murmur3(01 00 00 00) = 0xfbf1402a, negative: negated
    ],
)
def test_murmur_hash_literal_vectors(code: int, expected: int) -> None:
    assert murmur_hash(code) == expected


@SETTINGS
@given(st.integers(INT32_MIN, INT32_MAX))
def test_murmur_hash_matches_reference(code: int) -> None:
    result = murmur_hash(code)
    assert result == ref_flink_murmur(code)
    assert 0 <= result <= INT32_MAX


def test_vectorised_murmur_matches_scalar_on_edge_codes() -> None:
    codes = [0, 1, -1, INT32_MIN, INT32_MAX, 1231, 1237, 99162322] + [
        random.Random(7).randint(INT32_MIN, INT32_MAX) for _ in range(1000)
    ]
    vec = kg._murmur_np(np.array(codes, dtype=np.int64).astype(np.int32).view(np.uint32))
    assert vec.tolist() == [murmur_hash(c) for c in codes]


@pytest.mark.parametrize("bad", [2**31, INT32_MIN - 1, 1.5, "1", True, None])
def test_murmur_hash_rejects_non_int32(bad: object) -> None:
    with pytest.raises(InvalidArgumentError, match="code"):
        murmur_hash(bad)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------
# Java hashCode
# ---------------------------------------------------------------------------------------

HASH_TABLE = [
    # Integer.hashCode() is the value
    (0, pa.int32(), 0),
    (-7, pa.int32(), -7),
    (INT32_MIN, pa.int32(), INT32_MIN),
    (INT32_MAX, pa.int32(), INT32_MAX),
    (-5, pa.int16(), -5),
    (-128, pa.int8(), -128),
    (127, pa.int8(), 127),
    # Long.hashCode() = (int)(v ^ (v >>> 32))
    (0, pa.int64(), 0),
    (-1, pa.int64(), 0),
    (2**32, pa.int64(), 1),
    (2**32 + 5, pa.int64(), 4),
    (INT64_MAX, pa.int64(), INT32_MIN),
    (INT64_MIN, pa.int64(), INT32_MIN),
    (-(2**32), pa.int64(), -1),
    (123456789012, pa.int64(), to_int32(123456789012 ^ (123456789012 >> 32))),
    # Boolean
    (True, pa.bool_(), 1231),
    (False, pa.bool_(), 1237),
    # Double: doubleToLongBits with canonical NaN
    (1.0, pa.float64(), 0x3FF00000),
    (0.0, pa.float64(), 0),
    (-0.0, pa.float64(), INT32_MIN),
    (float("nan"), pa.float64(), 0x7FF80000),
    (float("inf"), pa.float64(), 0x7FF00000),
    (float("-inf"), pa.float64(), to_int32(0xFFF00000)),
    # Float: floatToIntBits with canonical NaN
    (1.0, pa.float32(), 0x3F800000),
    (-0.0, pa.float32(), INT32_MIN),
    (float("nan"), pa.float32(), 0x7FC00000),
    # String over UTF-16 code units
    ("", pa.string(), 0),
    ("hello", pa.string(), 99162322),
    ("Hello", pa.string(), 69609650),
    ("abc", pa.string(), 96354),
    ("Aa", pa.string(), 2112),
    ("BB", pa.string(), 2112),
    ("polygenelubricants", pa.string(), INT32_MIN),
    ("é", pa.string(), 0xE9),
    ("日本語", pa.string(), 0x65E5 * 31 * 31 + 0x672C * 31 + 0x8A9E),
    ("😀", pa.string(), 0xD83D * 31 + 0xDE00),  # surrogate pair: 1772899
    ("\ud800", pa.string(), 0xD800),  # lone surrogate is one Java char
    ("hello", pa.large_string(), 99162322),
    # Tuples: result = 31 * result + f.hashCode()
    ((1, "a"), pa.struct([("f0", pa.int32()), ("f1", pa.string())]), 31 * 1 + 97),
    ({"f0": 1, "f1": "a"}, pa.struct([("f0", pa.int32()), ("f1", pa.string())]), 128),
    ((0, 0), pa.struct([("f0", pa.int64()), ("f1", pa.int64())]), 0),
    ((True, 1, "x"), pa.struct([("a", pa.bool_()), ("b", pa.int32()), ("c", pa.string())]),
     to_int32((1231 * 31 + 1) * 31 + 120)),
    (((1, 2), 3), pa.struct([("f0", pa.struct([("f0", pa.int32()), ("f1", pa.int32())])), ("f1", pa.int32())]),
     (31 * 1 + 2) * 31 + 3),
    ("a", pa.dictionary(pa.int32(), pa.string()), 97),
]


@pytest.mark.parametrize(("key", "key_type", "expected"), HASH_TABLE)
def test_java_hash_code_table(key: object, key_type: pa.DataType, expected: int) -> None:
    assert java_hash_code(key, key_type) == expected


def test_emoji_hash_value_is_the_utf16_surrogate_pair() -> None:
    # "😀" is U+1F600 = UTF-16 0xD83D 0xDE00; Java: 0xD83D * 31 + 0xDE00.
    assert java_hash_code("😀") == 1772899
    assert "😀".encode("utf-16-be") == b"\xd8\x3d\xde\x00"


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        (True, 1231),  # bool before int
        (5, 5),  # int -> Long
        (2**32, 1),  # int -> Long, not Integer
        (1.0, 0x3FF00000),  # float -> Double
        ("hello", 99162322),
        ((1, "a"), 128),  # tuple -> Tuple2(Long, String)
        ((2**32, True), 1 * 31 + 1231),
        (np.int32(-3), -3),
        (np.int16(-3), -3),
        (np.float32(1.0), 0x3F800000),
        (np.bool_(False), 1237),
        (pa.scalar(2**32, pa.int64()), 1),
        (pa.scalar("hello"), 99162322),
    ],
)
def test_java_hash_code_inference(key: object, expected: int) -> None:
    assert java_hash_code(key) == expected


@SETTINGS
@given(st.text())
def test_string_hash_matches_reference(s: str) -> None:
    assert java_hash_code(s) == ref_string_hash(s)
    assert java_hash_code(s, pa.string()) == ref_string_hash(s)


@SETTINGS
@given(st.integers(INT64_MIN, INT64_MAX))
def test_long_hash_matches_reference(v: int) -> None:
    assert java_hash_code(v, pa.int64()) == ref_long_hash(v)


@SETTINGS
@given(st.floats(allow_nan=True, allow_infinity=True))
def test_double_hash_matches_reference(x: float) -> None:
    assert java_hash_code(x, pa.float64()) == ref_double_hash(x)


@SETTINGS
@given(st.floats(width=32, allow_nan=True, allow_infinity=True))
def test_float_hash_matches_reference(x: float) -> None:
    assert java_hash_code(x, pa.float32()) == ref_float_hash(x)


# ---------------------------------------------------------------------------------------
# key groups (scalar)
# ---------------------------------------------------------------------------------------

# Computed by hand from Flink's algorithm with the published Murmur3 vectors above:
# murmurHash(0) = 0x2362F9DE = 593689054, murmurHash(-1) = 0x76293B50 = 1982413648,
# murmurHash(1) = -(int)0xFBF1402A = 68075478, murmurHash((int)0x87654321) = 178564757.
KEY_GROUP_TABLE = [
    (0, pa.int32(), 128, 593689054 % 128),  # 94
    (0, pa.int32(), 128, 94),
    (-1, pa.int32(), 128, 80),
    (1, pa.int32(), 128, 86),
    (to_int32(0x87654321), pa.int32(), 128, 21),
    (0, pa.int32(), 1000, 54),
    (-1, pa.int32(), 32768, 1982413648 % 32768),
    (0, pa.int64(), 128, 94),  # Long 0 hashes to 0
    (-1, pa.int64(), 128, 94),  # Long -1 hashes to 0
    (2**32, pa.int64(), 128, 86),  # Long 2^32 hashes to 1
    ("", pa.string(), 128, 94),  # "" hashes to 0
    ((0, 0), pa.struct([("f0", pa.int32()), ("f1", pa.int32())]), 128, 94),
    ((0, 1), pa.struct([("f0", pa.int32()), ("f1", pa.int32())]), 128, 86),
    (0, pa.int32(), 1, 0),
]


@pytest.mark.parametrize(("key", "key_type", "max_parallelism", "expected"), KEY_GROUP_TABLE)
def test_assign_key_group_table(key: object, key_type: pa.DataType, max_parallelism: int, expected: int) -> None:
    assert assign_key_group(key, max_parallelism, key_type) == expected
    assert assign_key_groups(pa.array([key], key_type), max_parallelism).to_pylist() == [expected]


@SETTINGS
@given(st.text(), st.integers(1, UPPER_BOUND_MAX_PARALLELISM))
def test_assign_key_group_string_matches_reference(s: str, max_parallelism: int) -> None:
    assert assign_key_group(s, max_parallelism) == ref_key_group(ref_string_hash(s), max_parallelism)


@SETTINGS
@given(st.integers(INT64_MIN, INT64_MAX), st.integers(1, UPPER_BOUND_MAX_PARALLELISM))
def test_assign_key_group_long_matches_reference(v: int, max_parallelism: int) -> None:
    result = assign_key_group(v, max_parallelism)
    assert result == ref_key_group(ref_long_hash(v), max_parallelism)
    assert 0 <= result < max_parallelism


# ---------------------------------------------------------------------------------------
# vectorised == scalar
# ---------------------------------------------------------------------------------------

# A few awkward characters to make non-ASCII likely: 2-, 3- and 4-byte UTF-8, BMP edge.
_ALPHABET = st.one_of(
    st.characters(codec="utf-8"),
    st.sampled_from(["a", "Z", "é", "ß", "日", "語", "😀", "𝄞", "\uffff", "\u0080", "\u07ff", "\u0800"]),
)
_TEXT = st.one_of(
    st.text(_ALPHABET, max_size=12),
    st.text(st.characters(max_codepoint=127), max_size=12),
    st.builds(lambda s, n: s * n, st.text(_ALPHABET, min_size=1, max_size=4), st.integers(50, 400)),
)

_VALUES = {
    pa.int8(): st.integers(-(2**7), 2**7 - 1),
    pa.int16(): st.integers(-(2**15), 2**15 - 1),
    pa.int32(): st.integers(INT32_MIN, INT32_MAX),
    pa.int64(): st.integers(INT64_MIN, INT64_MAX),
    pa.bool_(): st.booleans(),
    pa.float32(): st.floats(width=32),
    pa.float64(): st.floats(),
    pa.string(): _TEXT,
    pa.large_string(): _TEXT,
    pa.string_view(): _TEXT,
}
_MAXP = st.sampled_from([1, 2, 3, 128, 1000, 4096, 32768]) | st.integers(1, UPPER_BOUND_MAX_PARALLELISM)


@st.composite
def key_arrays(draw: st.DrawFn, key_type: pa.DataType) -> tuple[pa.Array | pa.ChunkedArray, list]:
    """An array of key_type, maybe sliced (non-zero offset) and maybe chunked, plus its values."""
    values = draw(st.lists(_VALUES[key_type], max_size=40))
    lead = draw(st.lists(_VALUES[key_type], max_size=3))
    trail = draw(st.lists(_VALUES[key_type], max_size=3))
    arr = pa.array(lead + values + trail, type=key_type).slice(len(lead), len(values))
    if draw(st.booleans()):
        cuts = sorted(draw(st.lists(st.integers(0, len(values)), max_size=3)))
        bounds = [0, *cuts, len(values)]
        arr = pa.chunked_array([arr.slice(a, b - a) for a, b in zip(bounds, bounds[1:])], type=key_type)
    return arr, values


def _scalar_groups(values: list, key_type: pa.DataType, max_parallelism: int) -> list[int]:
    return [assign_key_group(v, max_parallelism, key_type) for v in values]


@pytest.mark.parametrize("key_type", list(_VALUES), ids=str)
@SETTINGS
@given(data=st.data(), max_parallelism=_MAXP)
def test_vectorised_matches_scalar(key_type: pa.DataType, data: st.DataObject, max_parallelism: int) -> None:
    arr, values = data.draw(key_arrays(key_type))
    result = assign_key_groups(arr, max_parallelism)
    assert result.type == pa.int32()
    assert result.to_pylist() == _scalar_groups(values, key_type, max_parallelism)


@SETTINGS
@given(st.lists(_TEXT, max_size=30), st.integers(1, 24), st.integers(1, 64), _MAXP)
def test_vectorised_strings_across_tiny_batches(
    values: list[str], batch: int, cached: int, max_parallelism: int
) -> None:
    # Force many string batches (and strings longer than a batch) through the batching logic,
    # and power tables both cached and built on the fly for long strings.
    arr = pa.array(["pad", *values], pa.string()).slice(1)
    empty = np.empty(0, np.uint32)
    with (
        mock.patch.object(kg, "_STRING_BATCH_BYTES", batch),
        mock.patch.object(kg, "_MAX_CACHED_POWERS", cached),
        mock.patch.object(kg, "_tables", (empty, empty)),
    ):
        result = assign_key_groups(arr, max_parallelism).to_pylist()
    assert result == [ref_key_group(ref_string_hash(s), max_parallelism) for s in values]


@SETTINGS
@given(
    st.lists(
        st.tuples(st.integers(INT32_MIN, INT32_MAX), _TEXT, st.tuples(st.booleans(), st.floats())),
        max_size=30,
    ),
    st.integers(0, 3),
    _MAXP,
)
def test_vectorised_struct_matches_scalar(rows: list, offset: int, max_parallelism: int) -> None:
    inner = pa.struct([("f0", pa.bool_()), ("f1", pa.float64())])
    key_type = pa.struct([("id", pa.int32()), ("name", pa.string()), ("pair", inner)])
    pad = [(0, "x", (True, 0.0))] * offset
    arr = pa.array([{"id": a, "name": b, "pair": {"f0": c[0], "f1": c[1]}} for a, b, c in pad + rows], key_type)
    arr = arr.slice(offset)
    expected = [
        ref_key_group(
            to_int32(
                (a * 31 + ref_string_hash(b)) * 31 + ((1231 if c[0] else 1237) * 31 + ref_double_hash(c[1]))
            ),
            max_parallelism,
        )
        for a, b, c in rows
    ]
    assert assign_key_groups(arr, max_parallelism).to_pylist() == expected
    assert _scalar_groups(rows, key_type, max_parallelism) == expected


@SETTINGS
@given(st.lists(st.sampled_from(["a", "é", "日本", "😀x", "", "user-1"]), max_size=40), st.integers(0, 3), _MAXP)
def test_vectorised_dictionary_matches_scalar(values: list[str], offset: int, max_parallelism: int) -> None:
    arr = pa.array(["pad"] * offset + values, pa.string()).dictionary_encode().slice(offset)
    expected = [assign_key_group(v, max_parallelism) for v in values]
    assert assign_key_groups(arr, max_parallelism).to_pylist() == expected


def test_dictionary_with_unreferenced_null_entry() -> None:
    dictionary = pa.array(["a", None, "b"])
    arr = pa.DictionaryArray.from_arrays(pa.array([0, 2, 2, 0], pa.int8()), dictionary)
    assert assign_key_groups(arr, 128).to_pylist() == [assign_key_group(k, 128) for k in "abba"]
    referencing = pa.DictionaryArray.from_arrays(pa.array([0, 1], pa.int8()), dictionary)
    with pytest.raises(InvalidArgumentError, match="null"):
        assign_key_groups(referencing, 128)


def test_non_canonical_nan_bit_patterns() -> None:
    f64 = pa.array(np.array([0x7FF0000000000001, 0xFFF8000000000000, 0x7FF8000000000000], np.uint64).view(np.float64))
    f32 = pa.array(np.array([0x7F800001, 0xFFC00000, 0x7FC00000], np.uint32).view(np.float32))
    assert assign_key_groups(f64, 32768).to_pylist() == [ref_key_group(0x7FF80000, 32768)] * 3
    assert assign_key_groups(f32, 32768).to_pylist() == [ref_key_group(0x7FC00000, 32768)] * 3


def test_large_mixed_string_array_spanning_many_batches() -> None:
    rng = random.Random(42)
    pieces = ["user-", "é", "日本語", "😀", "x" * 70_000, "ß", "0123456789"]
    values = ["".join(rng.choice(pieces[:4] + pieces[5:]) for _ in range(rng.randint(0, 6))) for _ in range(30_000)]
    values[12_345] = pieces[4]  # one string longer than a batch
    values[20_000] = pieces[4] + "é"
    arr = pa.array(values)
    got = assign_key_groups(arr, 4096).to_pylist()
    assert got == [ref_key_group(ref_string_hash(s), 4096) for s in values]
    chunked = pa.chunked_array([arr.slice(0, 10_001), arr.slice(10_001)])
    assert assign_key_groups(chunked, 4096).to_pylist() == got
    large = arr.cast(pa.large_string())
    assert assign_key_groups(large, 4096).to_pylist() == got


def test_large_int64_array_matches_reference() -> None:
    rng = np.random.default_rng(1)
    v = rng.integers(INT64_MIN, INT64_MAX, size=20_000, dtype=np.int64, endpoint=True)
    got = assign_key_groups(pa.array(v), 1000).to_pylist()
    assert got == [ref_key_group(ref_long_hash(int(x)), 1000) for x in v]


def test_empty_arrays() -> None:
    assert assign_key_groups(pa.array([], pa.int64()), 128).to_pylist() == []
    assert assign_key_groups(pa.array(["a"]).slice(1), 128).to_pylist() == []
    assert assign_key_groups(pa.chunked_array([], pa.string()), 128).to_pylist() == []
    assert assign_key_groups(pa.array(["", ""]), 128).to_pylist() == [94, 94]
    assert assign_key_groups(pa.array([], pa.int64()), 128).type == pa.int32()


# ---------------------------------------------------------------------------------------
# errors
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "arr",
    [
        pa.array([1, None], pa.int64()),
        pa.array(["a", None]),
        pa.chunked_array([pa.array([1]), pa.array([None], pa.int64())]),
        pa.array([{"a": 1}, None], pa.struct([("a", pa.int32())])),
        pa.array([{"a": 1}, {"a": None}], pa.struct([("a", pa.int32())])),
        pa.array(["a", None]).dictionary_encode(),
    ],
    ids=["int64", "string", "chunked", "struct", "struct-field", "dictionary"],
)
def test_vectorised_rejects_nulls(arr: pa.Array) -> None:
    with pytest.raises(InvalidArgumentError, match="null"):
        assign_key_groups(arr, 128)


@pytest.mark.parametrize(
    ("key", "key_type"),
    [(None, None), (None, pa.int32()), (pa.scalar(None, pa.int32()), None), ((1, None), None),
     ((1, None), pa.struct([("a", pa.int32()), ("b", pa.int32())]))],
)
def test_scalar_rejects_nulls(key: object, key_type: pa.DataType | None) -> None:
    with pytest.raises(InvalidArgumentError, match="null|None"):
        assign_key_group(key, 128, key_type)


@pytest.mark.parametrize(
    "key_type",
    [pa.uint32(), pa.float16(), pa.list_(pa.int32()), pa.date32(), pa.timestamp("ms"),
     pa.struct([("a", pa.uint8())])],
    ids=str,
)
def test_unsupported_types_are_named(key_type: pa.DataType) -> None:
    with pytest.raises(InvalidArgumentError, match="unsupported key type"):
        assign_key_groups(pa.array([], key_type), 128)
    with pytest.raises(InvalidArgumentError, match=re.escape(str(key_type))):
        java_hash_code(0, key_type)


def test_too_many_tuple_fields() -> None:
    key_type = pa.struct([(f"f{i}", pa.int32()) for i in range(26)])
    with pytest.raises(InvalidArgumentError, match="25"):
        java_hash_code(tuple(range(26)), key_type)
    with pytest.raises(InvalidArgumentError, match="unsupported key type"):
        assign_key_groups(pa.array([dict.fromkeys(key_type.names, 1)], key_type), 128)


@pytest.mark.parametrize(
    ("key", "key_type"),
    [
        (2**31, pa.int32()),
        (-(2**7) - 1, pa.int8()),
        (2**63, pa.int64()),
        (True, pa.int32()),
        ("1", pa.int64()),
        (1, pa.string()),
        (1, pa.bool_()),
        (1e300, pa.float32()),
        ("x", pa.float64()),
        ((1,), pa.struct([("a", pa.int32()), ("b", pa.int32())])),
        ({"a": 1}, pa.struct([("a", pa.int32()), ("b", pa.int32())])),
        (b"x", None),
        ([1, 2], None),
        (2**64, None),
    ],
)
def test_scalar_rejects_mismatched_keys(key: object, key_type: pa.DataType | None) -> None:
    with pytest.raises(InvalidArgumentError, match="key"):
        java_hash_code(key, key_type)


@pytest.mark.parametrize("bad", [0, -1, UPPER_BOUND_MAX_PARALLELISM + 1, 1.0, "128", True])
def test_bad_max_parallelism_is_named(bad: object) -> None:
    with pytest.raises(InvalidArgumentError, match="max_parallelism"):
        assign_key_group(1, bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="max_parallelism"):
        assign_key_groups(pa.array([1]), bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="max_parallelism"):
        key_group_range(bad, 1, 0)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="max_parallelism"):
        operator_index_for_key_group(bad, 1, 0)  # type: ignore[arg-type]


def test_bad_array_argument_is_named() -> None:
    with pytest.raises(InvalidArgumentError, match="array"):
        assign_key_groups([1, 2, 3], 128)  # type: ignore[arg-type]


def test_bad_key_type_argument_is_named() -> None:
    with pytest.raises(InvalidArgumentError, match="key_type"):
        java_hash_code(1, "int32")  # type: ignore[arg-type]


def test_invalid_utf8_is_rejected() -> None:
    offsets = pa.py_buffer(np.array([0, 2], np.int32).tobytes())
    data = pa.py_buffer(b"\xc3\x28")
    arr = pa.Array.from_buffers(pa.string(), 1, [None, offsets, data])
    with pytest.raises(InvalidArgumentError, match="string"):
        assign_key_groups(arr, 128)


def test_string_split_inside_a_character_is_rejected() -> None:
    # "日" = e6 97 a5 cut into two strings: the bytes decode as a whole but neither string does.
    offsets = pa.py_buffer(np.array([0, 2, 3], np.int32).tobytes())
    arr = pa.Array.from_buffers(pa.string(), 2, [None, offsets, pa.py_buffer("日".encode())])
    with pytest.raises(InvalidArgumentError, match="UTF-8"):
        assign_key_groups(arr, 128)
    whole = pa.Array.from_buffers(pa.string(), 1, [None, pa.py_buffer(np.array([0, 3], np.int32).tobytes()),
                                                   pa.py_buffer("日".encode())])
    assert assign_key_groups(whole, 128).to_pylist() == [assign_key_group("日", 128)]


# ---------------------------------------------------------------------------------------
# ranges and parallelism
# ---------------------------------------------------------------------------------------


def _check_partition(max_parallelism: int, parallelism: int) -> None:
    ranges = [key_group_range(max_parallelism, parallelism, i) for i in range(parallelism)]
    assert ranges[0][0] == 0
    assert ranges[-1][1] == max_parallelism - 1
    for (s0, e0), (s1, _) in zip(ranges, ranges[1:]):
        assert s1 == e0 + 1
    for i, (s, e) in enumerate(ranges):
        assert s <= e
        assert operator_index_for_key_group(max_parallelism, parallelism, s) == i
        assert operator_index_for_key_group(max_parallelism, parallelism, e) == i


@pytest.mark.parametrize("max_parallelism", [*range(1, 41), 127, 128, 129, 255])
def test_ranges_partition_exhaustively(max_parallelism: int) -> None:
    for parallelism in range(1, max_parallelism + 1):
        _check_partition(max_parallelism, parallelism)
        owners = [operator_index_for_key_group(max_parallelism, parallelism, g) for g in range(max_parallelism)]
        for i in range(parallelism):
            s, e = key_group_range(max_parallelism, parallelism, i)
            assert [g for g, o in enumerate(owners) if o == i] == list(range(s, e + 1))


@SETTINGS
@given(st.integers(1, UPPER_BOUND_MAX_PARALLELISM).flatmap(lambda m: st.tuples(st.just(m), st.integers(1, m))))
def test_ranges_partition_random(mp: tuple[int, int]) -> None:
    _check_partition(*mp)


def test_ranges_partition_at_upper_bound() -> None:
    for parallelism in (1, 2, 3, 7, 1000, 32767, 32768):
        _check_partition(UPPER_BOUND_MAX_PARALLELISM, parallelism)


def test_key_group_range_literals() -> None:
    assert [key_group_range(128, 3, i) for i in range(3)] == [(0, 42), (43, 85), (86, 127)]
    assert key_group_range(4096, 1, 0) == (0, 4095)
    assert [key_group_range(4096, 2, i) for i in range(2)] == [(0, 2047), (2048, 4095)]
    assert key_group_range(10, 10, 9) == (9, 9)
    assert operator_index_for_key_group(128, 3, 42) == 0
    assert operator_index_for_key_group(128, 3, 43) == 1
    assert operator_index_for_key_group(128, 3, 127) == 2


@pytest.mark.parametrize(
    ("args", "name"),
    [
        ((128, 0, 0), "parallelism"),
        ((128, 129, 0), "parallelism"),
        ((128, 4, 4), "operator_index"),
        ((128, 4, -1), "operator_index"),
        ((128, 4, 1.0), "operator_index"),
    ],
)
def test_key_group_range_bad_arguments(args: tuple, name: str) -> None:
    with pytest.raises(InvalidArgumentError, match=name):
        key_group_range(*args)


@pytest.mark.parametrize(
    ("args", "name"),
    [((128, 0, 0), "parallelism"), ((128, 4, 128), "key_group"), ((128, 4, -1), "key_group")],
)
def test_operator_index_bad_arguments(args: tuple, name: str) -> None:
    with pytest.raises(InvalidArgumentError, match=name):
        operator_index_for_key_group(*args)


@pytest.mark.parametrize(
    ("parallelism", "expected"),
    [
        (1, 128),  # roundUp(1) = 1, raised to the lower bound
        (85, 128),  # 85 + 42 = 127 -> 128
        (86, 256),  # 86 + 43 = 129 -> 256
        (100, 256),  # 150 -> 256
        (1000, 2048),  # 1500 -> 2048
        (1500, 4096),  # 2250 -> 4096
        (21845, 32768),  # 32767 -> 32768
        (30000, 32768),  # 45000 -> 65536, capped
        (32768, 32768),
    ],
)
def test_default_max_parallelism(parallelism: int, expected: int) -> None:
    assert default_max_parallelism(parallelism) == expected


def test_default_max_parallelism_matches_flink_formula() -> None:
    def round_up_to_power_of_two(x: int) -> int:  # MathUtils.roundUpToPowerOfTwo, int32 semantics
        x -= 1
        for s in (1, 2, 4, 8, 16):
            x |= x >> s
        return x + 1

    for p in range(1, UPPER_BOUND_MAX_PARALLELISM + 1):
        expected = min(max(round_up_to_power_of_two(p + p // 2), DEFAULT_LOWER_BOUND_MAX_PARALLELISM),
                       UPPER_BOUND_MAX_PARALLELISM)
        assert default_max_parallelism(p) == expected


@pytest.mark.parametrize("bad", [0, -3, UPPER_BOUND_MAX_PARALLELISM + 1, 2.0])
def test_default_max_parallelism_bad_argument(bad: object) -> None:
    with pytest.raises(InvalidArgumentError, match="parallelism"):
        default_max_parallelism(bad)  # type: ignore[arg-type]


def test_constants_and_exports() -> None:
    assert UPPER_BOUND_MAX_PARALLELISM == 1 << 15
    assert DEFAULT_LOWER_BOUND_MAX_PARALLELISM == 1 << 7
    assert set(kg.__all__) == {
        "DEFAULT_LOWER_BOUND_MAX_PARALLELISM", "UPPER_BOUND_MAX_PARALLELISM", "assign_key_group", "is_supported_key_type",
        "assign_key_groups", "default_max_parallelism", "java_hash_code", "key_group_range",
        "murmur_hash", "operator_index_for_key_group",
    }
    assert issubclass(InvalidArgumentError, ValueError)
