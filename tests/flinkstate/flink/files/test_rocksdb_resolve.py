"""RocksDB records resolved per key as Flink's merge operator reads them: the newest put or delete ends a key,
newer merge operands are appended after the put's value, oldest first; done with Arrow, checked against cases."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from flinkstate.flink.files.rocksdb import FamilyAccount, _adjacent, _key_order, _resolve
from flinkstate.flink.files.rocksdb_frame import records_buffer
from flinkstate.flink.files.sst import RECORDS, TYPE_DELETION, TYPE_MERGE, TYPE_SINGLE_DELETION, TYPE_VALUE
from flinkstate.flink.files.views import Views


def k(kg: int, name: bytes) -> bytes:
    return bytes([kg]) + name


def resolve(records: list[tuple[bytes, int, int, bytes]], lo: int = 0, hi: int = 9) -> tuple[FamilyAccount, dict[bytes, bytes]]:
    acc = FamilyAccount()
    _resolve("cf", pa.Table.from_pylist([dict(zip(RECORDS.names, r, strict=True)) for r in records], RECORDS), acc, 1, lo, hi)
    return acc, dict(zip(acc.live_keys.to_pylist(), acc.live_values.to_pylist(), strict=True))


def test_each_case_of_a_key_resolves_as_the_merge_operator_reads_it() -> None:
    records = [
        (k(1, b"put"), 5, TYPE_VALUE, b"v5"), (k(1, b"put"), 3, TYPE_VALUE, b"old"),           # newest put wins
        (k(1, b"list"), 2, TYPE_VALUE, b"a"), (k(1, b"list"), 7, TYPE_MERGE, b"c"),            # put then merges,
        (k(1, b"list"), 4, TYPE_MERGE, b"b"),                                                   # oldest first
        (k(2, b"merges"), 9, TYPE_MERGE, b"y"), (k(2, b"merges"), 8, TYPE_MERGE, b"x"),        # merges only
        (k(2, b"gone"), 6, TYPE_DELETION, b""), (k(2, b"gone"), 1, TYPE_VALUE, b"dead"),       # deleted
        (k(3, b"again"), 8, TYPE_MERGE, b"n"), (k(3, b"again"), 6, TYPE_SINGLE_DELETION, b""),  # merge after a delete
        (k(3, b"again"), 2, TYPE_VALUE, b"before"),
        (k(12, b"other"), 3, TYPE_VALUE, b"o"),                                                 # another subtask's
    ]
    acc, live = resolve(records)
    assert live == {k(1, b"put"): b"v5", k(1, b"list"): b"a,b,c", k(2, b"merges"): b"x,y", k(3, b"again"): b"n"}
    assert acc.live_keys.to_pylist() == sorted(live)  # key order
    assert (acc.keys, acc.deleted, acc.out_of_range) == (6, 1, 1)


def test_a_run_of_one_record_per_key_keeps_its_range_and_every_operand() -> None:
    """Records in key order, one per key, some outside the run at either end (the boundary blocks of a ranged read):
    the run's own keys are kept as they are; a lone kept key with merge operands still gets its put's value first."""
    records = [(k(kg, b"n%d" % kg), 1, TYPE_VALUE, b"v%d" % kg) for kg in range(0, 12)]
    acc, live = resolve(records, lo=3, hi=7)
    assert live == {k(kg, b"n%d" % kg): b"v%d" % kg for kg in range(3, 8)}
    merged = [(k(2, b"a"), 1, TYPE_VALUE, b"o"), (k(4, b"l"), 9, TYPE_MERGE, b"c"), (k(4, b"l"), 8, TYPE_MERGE, b"b"),
              (k(4, b"l"), 2, TYPE_VALUE, b"a"), (k(6, b"z"), 1, TYPE_VALUE, b"o")]
    assert resolve(merged, lo=3, hi=5)[1] == {k(4, b"l"): b"a,b,c"}


def test_one_record_per_key_is_each_its_own_value() -> None:
    """Each key with a single record (a savepoint's SSTs): a put or a lone merge operand is its value, a delete counts
    as deleted, a key of another range as out of range; a record of an unknown type still fails."""
    records = [(k(1, b"a"), 3, TYPE_VALUE, b"v"), (k(1, b"b"), 2, TYPE_MERGE, b"m"), (k(1, b"c"), 4, TYPE_DELETION, b""),
               (k(2, b"d"), 1, TYPE_SINGLE_DELETION, b""), (k(2, b"e"), 5, TYPE_VALUE, b"w"), (k(12, b"f"), 1, TYPE_VALUE, b"o")]
    acc, live = resolve(records)
    assert live == {k(1, b"a"): b"v", k(1, b"b"): b"m", k(2, b"e"): b"w"}
    assert (acc.keys, acc.deleted, acc.out_of_range, acc.entries) == (6, 2, 1, 6)
    with pytest.raises(ValueError, match="record type 15 is not supported"):
        resolve([(k(1, b"a"), 5, 0x0F, b"x"), (k(1, b"b"), 2, TYPE_VALUE, b"v")])


def test_an_unsupported_record_type_fails_only_where_it_decides_a_key() -> None:
    hidden = [(k(1, b"a"), 5, TYPE_VALUE, b"v"), (k(1, b"a"), 2, 0x0F, b"x")]  # older than the put: never read
    assert resolve(hidden)[1] == {k(1, b"a"): b"v"}
    with pytest.raises(ValueError, match="record type 15 is not supported"):
        resolve([(k(1, b"a"), 5, 0x0F, b"x"), (k(1, b"a"), 2, TYPE_VALUE, b"v")])


def test_records_buffer_frames_canonical_records() -> None:
    acc, live = resolve([(k(1, b"x"), 1, TYPE_VALUE, b"12"), (k(2, b"yy"), 1, TYPE_VALUE, b"")])
    buf, starts = records_buffer(acc.live_keys, acc.live_parts, acc.live_counts)
    want = b"".join(len(key).to_bytes(4, "big") + key + len(v).to_bytes(4, "big") + v for key, v in live.items())
    assert buf.to_pybytes() == want and starts.tolist() == [0, 8 + 2 + 2]


def test_records_buffer_joins_merge_operands_with_commas() -> None:
    """A list state's put and merge operands (long ones too, held as references to their buffers) framed as one value."""
    long = b"L" * 40
    acc, live = resolve([(k(1, b"a"), 1, TYPE_VALUE, b"p"), (k(1, b"a"), 2, TYPE_MERGE, long), (k(1, b"a"), 3, TYPE_MERGE, b""),
                         (k(2, b"b"), 1, TYPE_VALUE, b"only"), (k(3, b"c"), 5, TYPE_MERGE, b"m1"), (k(3, b"c"), 6, TYPE_MERGE, b"m2")])
    assert live == {k(1, b"a"): b"p," + long + b",", k(2, b"b"): b"only", k(3, b"c"): b"m1,m2"}
    buf, starts = records_buffer(acc.live_keys, acc.live_parts, acc.live_counts)
    frames = [len(key).to_bytes(4, "big") + key + len(v).to_bytes(4, "big") + v for key, v in live.items()]
    assert buf.to_pybytes() == b"".join(frames)
    assert starts.tolist() == np.cumsum([0, *map(len, frames[:-1])]).tolist()


def test_records_already_in_order_resolve_as_shuffled_ones() -> None:
    """One SST's records come in key order, newest first: the sort is skipped then, and the result is the same."""
    records = [(k(kg, b"key%d" % (i % 5)), seq, kind, b"%d" % seq) for i, (kg, seq, kind) in
               enumerate([(1, 4, TYPE_VALUE), (1, 9, TYPE_MERGE), (2, 3, TYPE_MERGE), (2, 8, TYPE_DELETION), (1, 7, TYPE_MERGE),
                          (3, 2, TYPE_VALUE), (3, 6, TYPE_MERGE), (1, 5, TYPE_VALUE), (2, 1, TYPE_VALUE), (3, 10, TYPE_MERGE)])]
    ordered = sorted(records, key=lambda r: (r[0], -r[1]))
    assert ordered != records
    shuffled, in_order = resolve(records), resolve(ordered)
    assert shuffled[1] == in_order[1] and shuffled[1]
    assert (shuffled[0].keys, shuffled[0].deleted) == (in_order[0].keys, in_order[0].deleted)


@pytest.mark.parametrize("width", [1, 6, 13])
def test_neighbours_compare_bytewise(width: int) -> None:
    """Neighbouring keys compared bytewise (what RocksDB's comparator does), NUL and high bytes included, keys of one
    width or two, on a sliced array too."""
    rng = random.Random(width)
    pool = [bytes(rng.choice([0, 1, 0x7F, 0x80, 0xFF]) for _ in range(width)) for _ in range(40)]
    keys = [rng.choice(pool) for _ in range(2000)]
    for arr, ks in ((pa.array(keys, pa.large_binary()), keys), (pa.array(keys, pa.large_binary()).slice(7), keys[7:]),
                    (pa.array([*keys, b"\0" * (width + 1)], pa.large_binary()), [*keys, b"\0" * (width + 1)])):
        less, same = _adjacent(arr)
        assert less.tolist() == [b < a for a, b in zip(ks, ks[1:])]
        assert same.tolist() == [b == a for a, b in zip(ks, ks[1:])]
        assert same.any() and less.any()


def test_records_buffer_of_binary_and_empty_arrays() -> None:
    buf, starts = records_buffer(pa.array([b"ab", b"c"], pa.binary()), Views.of_array(pa.array([b"", b"xyz"], pa.binary())))
    assert buf.to_pybytes() == b"\0\0\0\x02ab\0\0\0\0" + b"\0\0\0\x01c\0\0\0\x03xyz" and starts.tolist() == [0, 10]
    empty = pa.array([], pa.large_binary())
    buf, starts = records_buffer(empty, Views.of_array(empty))
    assert buf.to_pybytes() == b"" and starts.tolist() == []


@pytest.mark.parametrize("widths", [(7,), (7, 8)])
def test_key_order_is_arrows_sort(widths: tuple[int, ...]) -> None:
    """Sorted runs (one per SST) of keys of one width (numpy's sort of byte strings) or several (Arrow's): the order
    by key ascending, sequence descending that Arrow's sort gives, and each key's equality with the one before."""
    rng = random.Random(len(widths))
    pool = [bytes(rng.choice([0, 1, 0x7F, 0x80, 0xFF]) for _ in range(rng.choice(widths))) for _ in range(300)]
    seqs = rng.sample(range(1 << 40), 3000)
    runs = [sorted(((rng.choice(pool), seqs.pop()) for _ in range(m)), key=lambda r: (r[0], -r[1])) for m in (2000, 600, 400)]
    keys = pa.array([k for run in runs for k, _ in run], pa.large_binary())
    seq = np.array([q for run in runs for _, q in run], np.int64)
    perm, same = _key_order(keys, seq)
    want = pc.sort_indices(pa.table({"k": keys, "s": seq}), sort_keys=[("k", "ascending"), ("s", "descending")]).to_numpy()
    assert perm.tolist() == want.tolist()
    ordered = keys.take(pa.array(perm)).to_pylist()
    assert same.tolist() == [b == a for a, b in zip(ordered, ordered[1:])] and same.any()


def test_records_of_fixed_widths_are_framed_as_rows() -> None:
    """Keys of one width and values of one width up to 12 bytes (their bytes inline in the views) frame as fixed rows,
    byte for byte as the general join frames them; a longer value falls back to the join."""
    for width in (0, 8, 12, 13):
        live = {k(kg, b"key%d" % kg): bytes([kg]) * width for kg in range(5)}
        acc, got = resolve([(key, 1, TYPE_VALUE, v) for key, v in live.items()])
        assert got == live
        buf, starts = records_buffer(acc.live_keys, acc.live_parts)
        frames = [len(key).to_bytes(4, "big") + key + width.to_bytes(4, "big") + v for key, v in live.items()]
        assert buf.to_pybytes() == b"".join(frames) and starts.tolist() == [i * len(frames[0]) for i in range(5)]
