"""Fast tier: the vectorised records and key-group framing are byte-identical to the per-value writer they replaced.

The reference (`_ref_state_records`, `_ref_keyed_file`) is the writer as it was before vectorisation, value
by value with `encode.make_writer`; it lives only here.
"""

from __future__ import annotations

import glob
import os
import struct

import numpy as np
import pyarrow as pa
import pytest
from flinkstate.core.errors import InvalidArgumentError
from flinkstate.core.keygroups import assign_key_groups
from flinkstate.flink.files.canonical import TIMER_PREFIX, KeyedState
from flinkstate.flink.serde.encode import (
    _CLS,
    _COMP_CLS,
    make_writer,
    plain_values,
    snappy_frame,
    write_state_meta,
    write_type,
)
from flinkstate.flink.serde.serializers import StateMeta, TypeNode
from flinkstate.flink.write.export import load_flink_savepoint
from flinkstate.flink.write.savepoint_writer import (
    OperatorExport,
    encode_state,
    _keyed_file,
    _ranges,
    write_savepoint,
)

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures")
_SIGN = 1 << 63


# --- the per-value reference -------------------------------------------------------------------------------------


def _ref_key_groups(table: pa.Table, maxp: int) -> list[int]:
    try:
        return assign_key_groups(table.column("key"), maxp).to_pylist()
    except InvalidArgumentError:
        return table.column("key_group").to_pylist()


def _len_suffix(b: bytearray, n: int) -> None:
    b.append(n & 0xFF)
    n >>= 8
    while n:
        b.append(n & 0xFF)
        n >>= 8


def _ref_state_records(name: str, meta: StateMeta, table: pa.Table, ks: KeyedState, maxp: int) -> dict[int, list[tuple[bytes, bytes]]]:
    ctx = f"state {name!r}"
    prefix = 1 if maxp <= 128 else 2
    kgs = _ref_key_groups(table, maxp)
    cols = {c: plain_values(table.column(c)) for c in table.column_names}
    n = table.num_rows
    by_key: dict = {}
    if meta.backend_type == "PRIORITY_QUEUE":
        node = meta.serializers["VALUE_SERIALIZER"]
        kw, nw = make_writer(node.children[0], ctx), make_writer(node.children[1], ctx)
        ns = cols.get("namespace", [None] * n)
        out: dict[int, list[tuple[bytes, bytes]]] = {}
        for i in range(n):
            b = bytearray(kgs[i].to_bytes(prefix, "big"))
            b += struct.pack(">Q", (cols["timestamp"][i] & ((1 << 64) - 1)) ^ _SIGN)
            kw(b, cols["key"][i])
            nw(b, ns[i])
            out.setdefault(kgs[i], []).append((bytes(b), b""))
        return {k: sorted(v) for k, v in out.items()}
    vnode, nsnode, kind = meta.serializers["VALUE_SERIALIZER"], meta.serializers["NAMESPACE_SERIALIZER"], meta.keyed_type
    kw, nw = make_writer(ks.key_type, ctx), make_writer(nsnode, ctx)
    ambiguous = ks.key_type.fixed_width < 0 and nsnode.fixed_width < 0
    elem = vnode.children[1] if kind == "MAP" else vnode.children[0] if kind == "LIST" else vnode
    ukw = make_writer(vnode.children[0], ctx) if kind == "MAP" else None
    ttl = elem.kind == "ttl"
    ew = make_writer(elem.children[1] if ttl else elem, ctx)
    ns = cols.get("namespace", [None] * n)
    for i in range(n):
        b = bytearray(kgs[i].to_bytes(prefix, "big"))
        s = len(b)
        kw(b, cols["key"][i])
        if ambiguous:
            _len_suffix(b, len(b) - s)
        s = len(b)
        nw(b, ns[i])
        if ambiguous:
            _len_suffix(b, len(b) - s)
        if ukw is not None:
            ukw(b, cols["user_key"][i])
        v = bytearray()
        val = cols["value"][i]
        if kind == "MAP":
            v.append(1 if val is None else 0)
        if val is not None or kind != "MAP":
            if ttl:
                v += struct.pack(">q", cols["ttl_last_access"][i])
            ew(v, val)
        k = (kgs[i], bytes(b))
        if kind == "LIST" and k in by_key:
            by_key[k] += b"," + v
        else:
            by_key[k] = v
    out = {}
    for (kg, kb), v in sorted(by_key.items()):
        out.setdefault(kg, []).append((kb, bytes(v)))
    return out


def _ref_keyed_file(op: OperatorExport, kg_range: tuple[int, int], records: list[dict], metas: list[StateMeta], compress: bool) -> tuple[bytes, list[int]]:
    out = bytearray(struct.pack(">i?i", 6, compress, 2))
    write_type(out, op.keyed.key_type)
    out += struct.pack(">h", len(metas))
    for m in metas:
        write_state_meta(out, m)
    offsets = []
    for kg in range(kg_range[0], kg_range[1] + 1):
        runs = [(sid, recs[kg]) for sid, recs in enumerate(records) if recs.get(kg)]
        if not runs:
            offsets.append(0)
            continue
        offsets.append(len(out))
        s = bytearray(struct.pack(">H", runs[0][0]))
        for j, (_, recs) in enumerate(runs):
            for r, (kb, vb) in enumerate(recs):
                last = r == len(recs) - 1
                key = bytes([kb[0] | 0x80]) + kb[1:] if last else kb
                s += struct.pack(">i", len(key)) + key + struct.pack(">i", len(vb)) + vb
                if last:
                    s += struct.pack(">H", runs[j + 1][0] if j + 1 < len(runs) else 0xFFFF)
        out += snappy_frame(bytes(s)) if compress else s
    return bytes(out), offsets


# --- comparing the two -------------------------------------------------------------------------------------------


def assert_same_files(op: OperatorExport, compress_too: bool = True) -> None:
    """Every state's records and every subtask's keyed file equal the reference's, compressed or not."""
    metas = list(op.keyed.meta.values())
    tables = {**op.keyed.states, **{TIMER_PREFIX + k: v for k, v in op.keyed.timers.items()}}
    new = [encode_state(op, m, tables) for m in metas]
    ref = [_ref_state_records(m.name, m, tables[m.name], op.keyed, op.max_parallelism) for m in metas]
    for m, a, b in zip(metas, new, ref, strict=True):
        assert dict(a) == b, m.name
    for rng in _ranges(op.parallelism, op.max_parallelism):
        for compress in (False, True) if compress_too else (False,):
            assert _keyed_file(op, rng, new, metas, compress) == _ref_keyed_file(op, rng, ref, metas, compress)


def simple(kind: str) -> TypeNode:
    return TypeNode(kind, _CLS[kind])


def comp(kind: str, *children: TypeNode, names: tuple[str, ...] = ()) -> TypeNode:
    return TypeNode(kind, _COMP_CLS[kind], children, names)


VOID = simple("void")
WINDOW = simple("timewindow")


def ttl(node: TypeNode) -> TypeNode:
    return comp("ttl", simple("long"), node)


def state(ks: KeyedState, name: str, kind: str, value: TypeNode, table: pa.Table, ns: TypeNode = VOID) -> None:
    if kind == "LIST":
        value = comp("list", value)
    ks.meta[name] = StateMeta(name, "KEY_VALUE", {"KEYED_STATE_TYPE": kind}, {"VALUE_SERIALIZER": value, "NAMESPACE_SERIALIZER": ns})
    ks.states[name] = table


def timers(ks: KeyedState, name: str, key: TypeNode, ns: TypeNode, table: pa.Table) -> None:
    full = TIMER_PREFIX + name
    ks.meta[full] = StateMeta(full, "PRIORITY_QUEUE", {}, {"VALUE_SERIALIZER": comp("timer", key, ns)})
    ks.timers[name] = table


_RNG = np.random.default_rng(23)
_WORDS = ["a", "b", "é", "日本", "😀", "", "nul\x00", "x" * 200, "y" * 300]  # 300: a 2-byte length suffix


def _words(n: int, nulls: bool = False) -> pa.Array:
    w = [_WORDS[i] for i in _RNG.integers(0, len(_WORDS), n)]
    return pa.array([None if nulls and i % 7 == 3 else x for i, x in enumerate(w)], pa.string())


def _windows(n: int) -> pa.Array:
    start = _RNG.integers(-10**6, 10**6, n)
    return pa.StructArray.from_arrays([pa.array(start), pa.array(start + 10)], names=["start", "end"])


def _long_keyed(n: int) -> KeyedState:
    """Long keys (with repeats): every value type, TTL, lists, maps with null values, windows, timers."""
    keys = pa.array(_RNG.integers(-50, 50, n))
    ks = KeyedState(simple("long"))
    row = comp("row", simple("long"), simple("string"), simple("double"), names=("a", "b", "c"))
    rows = pa.StructArray.from_arrays([pa.array([None if i % 5 == 0 else i for i in range(n)], pa.int64()), _words(n, True),
                                       pa.array(_RNG.random(n))], names=["a", "b", "c"])
    pojo = TypeNode("pojo", "org.example.Event", (simple("int"), simple("string")), ("id", "tag"))
    pojos = pa.StructArray.from_arrays([pa.array([i if i % 3 else None for i in range(n)], pa.int32()), _words(n)], names=["id", "tag"],
                                       mask=pa.array([i % 11 == 0 for i in range(n)]))
    tup = comp("tuple", simple("short"), simple("bool"), simple("char"), names=("f0", "f1", "f2"))
    tups = pa.StructArray.from_arrays([pa.array(_RNG.integers(-999, 999, n), pa.int16()), pa.array(_RNG.random(n) > 0.5),
                                       pa.array([chr(65 + i % 26) for i in range(n)])], names=["f0", "f1", "f2"])
    for name, node, values in [
        ("long", simple("long"), pa.array(_RNG.integers(-2**63, 2**63 - 1, n, dtype=np.int64))),
        ("int", simple("int"), pa.array(_RNG.integers(-2**31, 2**31, n), pa.int32())),
        ("short", simple("short"), pa.array(_RNG.integers(-2**15, 2**15, n), pa.int16())),
        ("byte", simple("byte"), pa.array(_RNG.integers(-128, 128, n), pa.int8())),
        ("bool", simple("bool"), pa.array(_RNG.random(n) > 0.5)),
        ("double", simple("double"), pa.array(_RNG.standard_normal(n))),
        ("float", simple("float"), pa.array(_RNG.standard_normal(n), pa.float32())),
        ("char", simple("char"), pa.array([chr(32 + i % 90) if i % 9 else "é" for i in range(n)])),
        ("string", simple("string"), _words(n, True)),
        ("bytes", simple("bytes"), pa.array([bytes([i % 256]) * (i % 5) for i in range(n)])),
        ("raw", TypeNode("opaque", "org.apache.flink.api.java.typeutils.runtime.kryo.KryoSerializerSnapshot", (), ("org.example.Blob",),
                         payload=b"\x00\x00\x00\x00"), pa.array([b"\x01\x02" * (i % 4) for i in range(n)])),
        ("row", row, rows),
        ("pojo", pojo, pojos),
        ("tuple", tup, tups),
    ]:
        state(ks, name, "VALUE", node, pa.table({"key": keys, "value": values}))
    state(ks, "ttl", "VALUE", ttl(simple("string")), pa.table({"key": keys, "value": _words(n), "ttl_last_access": pa.array(_RNG.integers(0, 2**40, n))}))
    state(ks, "windowed", "AGGREGATING", simple("long"), pa.table({"key": keys, "namespace": _windows(n), "value": pa.array(range(n))}), WINDOW)
    state(ks, "list", "LIST", simple("long"), pa.table({"key": keys, "value": pa.array(range(n))}))
    state(ks, "list_str", "LIST", simple("string"), pa.table({"key": keys, "value": _words(n, True)}))
    state(ks, "list_ttl", "LIST", ttl(simple("int")), pa.table({"key": keys, "value": pa.array(range(n), pa.int32()),
                                                                "ttl_last_access": pa.array(range(n))}))
    map_node = comp("map", simple("string"), simple("long"))
    state(ks, "map", "MAP", map_node, pa.table({"key": keys, "user_key": _words(n), "value": pa.array([None if i % 4 == 0 else i for i in range(n)])}))
    map_ttl = comp("map", simple("int"), ttl(row))
    state(ks, "map_ttl", "MAP", map_ttl, pa.table({"key": keys, "user_key": pa.array(_RNG.integers(0, 5, n), pa.int32()),
                                                   "value": pa.array([None if i % 6 == 0 else v for i, v in enumerate(rows.to_pylist())], rows.type),
                                                   "ttl_last_access": pa.array([None if i % 6 == 0 else i for i in range(n)], pa.int64())}))
    timers(ks, "event_t", simple("long"), VOID, pa.table({"key": keys, "timestamp": pa.array(_RNG.integers(-2**62, 2**62, n))}))
    timers(ks, "window_t", simple("long"), WINDOW, pa.table({"key": keys, "namespace": _windows(n), "timestamp": pa.array([5] * n)}))
    return ks


def _string_keyed(n: int) -> KeyedState:
    """String keys (non-ASCII, repeats) with string namespaces: the length-suffixed ("ambiguous") key layout."""
    ks = KeyedState(simple("string"))
    keys = _words(n)
    state(ks, "v", "VALUE", simple("long"), pa.table({"key": keys, "namespace": _words(n), "value": pa.array(range(n))}), simple("string"))
    state(ks, "l", "LIST", simple("string"), pa.table({"key": keys, "namespace": _words(n), "value": _words(n)}), simple("string"))
    state(ks, "m", "MAP", comp("map", simple("long"), simple("string")),
          pa.table({"key": keys, "user_key": pa.array(_RNG.integers(0, 3, n)), "value": _words(n, True)}))
    timers(ks, "t", simple("string"), simple("string"), pa.table({"key": keys, "namespace": _words(n), "timestamp": pa.array(range(n))}))
    return ks


@pytest.mark.parametrize("maxp", [128, 300, 32768])
@pytest.mark.parametrize("parallelism", [1, 3])
def test_long_keys_every_type_same_bytes_as_the_per_value_writer(maxp, parallelism):
    assert_same_files(OperatorExport("op", parallelism, maxp, _long_keyed(400)), compress_too=parallelism == 1)


@pytest.mark.parametrize("maxp", [128, 4096])
def test_string_keys_and_namespaces_same_bytes_as_the_per_value_writer(maxp):
    assert_same_files(OperatorExport("op", 2, maxp, _string_keyed(300)))


def test_subtask_slices_pickle_and_frame_the_same():
    """A subtask's key_group_slice (e.g. sent to a worker process) frames its key groups as the whole state does."""
    import pickle

    op = OperatorExport("op", 3, 300, _long_keyed(200))
    metas = list(op.keyed.meta.values())
    tables = {**op.keyed.states, **{TIMER_PREFIX + k: v for k, v in op.keyed.timers.items()}}
    whole = [encode_state(op, m, tables) for m in metas]
    for lo, hi in _ranges(3, 300):
        part = [pickle.loads(pickle.dumps(r.key_group_slice(lo, hi))) for r in whole]
        assert all(set(p) == {kg for kg in r if lo <= kg <= hi} for p, r in zip(part, whole, strict=True))
        assert _keyed_file(op, (lo, hi), part, metas, False) == _keyed_file(op, (lo, hi), whole, metas, False)


def test_key_group_column_when_keys_cannot_be_hashed_and_empty_states():
    """A key type without a modelled hashCode takes the key_group column; empty tables write no records."""
    ks = KeyedState(TypeNode("bytes", _CLS["bytes"]))
    keys = pa.array([b"k%d" % (i % 13) for i in range(100)], pa.large_binary())
    state(ks, "v", "VALUE", simple("long"), pa.table({"key": keys, "key_group": pa.array([i % 13 * 9 for i in range(100)], pa.int32()),
                                                      "value": pa.array(range(100))}))
    state(ks, "empty", "VALUE", simple("string"), pa.table({"key": pa.array([], pa.large_binary()), "key_group": pa.array([], pa.int32()),
                                                            "value": pa.array([], pa.string())}))
    assert_same_files(OperatorExport("op", 2, 128, ks))


@pytest.mark.parametrize("fixture", sorted(glob.glob(os.path.join(FIXTURES, "flink-*", "**", "savepoint", "_metadata"), recursive=True)),
                         ids=lambda p: os.path.relpath(os.path.dirname(os.path.dirname(p)), FIXTURES))
def test_every_fixture_savepoint_rewrites_to_the_same_keyed_files(fixture):
    """Each real Flink savepoint here, decoded and written again: keyed files (contents and offsets) as before."""
    ops = [op for op in load_flink_savepoint(os.path.dirname(fixture)) if op.keyed is not None]
    assert ops
    for op in ops:
        assert_same_files(op)


def test_values_that_do_not_fit_name_operator_state_and_column(tmp_path):
    def write(table: pa.Table, value: TypeNode = simple("int")) -> None:
        ks = KeyedState(simple("long"))
        state(ks, "n", "VALUE", value, table)
        write_savepoint(str(tmp_path / "sp"), [OperatorExport("op", 1, 128, ks)])

    with pytest.raises(InvalidArgumentError, match=r"operator 'op', state 'n', column 'value'.*serializer"):
        write(pa.table({"key": [1], "value": pa.array([2**40])}))  # overflows Integer
    with pytest.raises(InvalidArgumentError, match=r"operator 'op', state 'n', column 'value'"):
        write(pa.table({"key": [1, 2], "value": pa.array([1, None])}))  # null Integer
    with pytest.raises(InvalidArgumentError, match=r"operator 'op', state 'n', column 'value'"):
        write(pa.table({"key": [1], "value": pa.array(["1"])}))  # a string for an Integer
    with pytest.raises(InvalidArgumentError, match=r"operator 'op', state 'n', column 'key':.*null.*no key_group column"):
        write(pa.table({"key": pa.array([1, None]), "value": pa.array([1, 2], pa.int32())}))  # null key, no key_group column
    with pytest.raises(InvalidArgumentError, match=r"operator 'op', state 'n', column 'key'"):
        write(pa.table({"key": pa.array([1, None]), "key_group": pa.array([1, 2], pa.int32()), "value": pa.array([1, 2], pa.int32())}))
    assert os.listdir(tmp_path) == []


def test_chunked_dictionary_large_sliced_and_timestamp_columns():
    """Column layouts the encoders see from real tables: chunks, dictionaries, large strings, a sliced table, timer
    timestamps as an Arrow timestamp or as uint64 bits."""
    n = 300
    ks = KeyedState(simple("string"))
    keys = pa.chunked_array([pa.array([f"k{i % 17}" for i in range(150)]), pa.array([f"é{i % 5}" for i in range(150)])])
    state(ks, "dict", "VALUE", simple("string"), pa.table({"key": keys, "value": pa.array([f"v{i % 4}" for i in range(n)]).dictionary_encode()}))
    state(ks, "large", "MAP", comp("map", simple("string"), simple("int")),
          pa.table({"key": keys, "user_key": pa.array([f"u{i % 3}" for i in range(n)], pa.large_string()), "value": pa.array(range(n))}))
    both = pa.concat_arrays([keys.combine_chunks(), keys.combine_chunks()])
    state(ks, "sliced", "LIST", simple("long"), pa.table({"key": both, "value": pa.array(range(2 * n))}).slice(n // 2, n))
    timers(ks, "ts", simple("string"), VOID, pa.table({"key": keys, "timestamp": pa.array(_RNG.integers(0, 2**40, n)).cast(pa.timestamp("ms"))}))
    timers(ks, "u64", simple("string"), VOID, pa.table({"key": keys, "timestamp": pa.array(_RNG.integers(0, 2**64 - 1, n, dtype=np.uint64))}))
    assert_same_files(OperatorExport("op", 2, 256, ks))


def test_rows_already_in_key_order_with_and_without_repeats(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows sorted as a root's are (key group, then non-negative key) are not sorted again: every key once (the rows as
    they are), a key repeated (the last value kept, list elements joined), timers with repeats; the same bytes as the
    per-value writer."""
    import flinkstate.flink.write.keyed_records as kr

    maxp = 128
    keys = np.arange(300)
    kg = assign_key_groups(pa.array(keys), maxp).to_numpy()
    ordered = keys[np.lexsort([keys, kg])]
    once, twice = pa.array(ordered), pa.array(np.repeat(ordered, 2))
    ks = KeyedState(simple("long"))
    state(ks, "once", "VALUE", simple("string"), pa.table({"key": once, "value": _words(300)}))
    state(ks, "twice", "VALUE", simple("long"), pa.table({"key": twice, "value": pa.array(range(600))}))
    state(ks, "list", "LIST", simple("int"), pa.table({"key": twice, "value": pa.array(range(600), pa.int32())}))
    timers(ks, "t", simple("long"), VOID, pa.table({"key": twice, "timestamp": pa.array([7] * 600)}))
    sorts: list[int] = []
    real = kr._sort_order
    monkeypatch.setattr(kr, "_sort_order", lambda keys: sorts.append(keys.n) or real(keys))
    assert_same_files(OperatorExport("op", 2, maxp, ks))
    assert sorts == []
