"""PyFlink jobs' state: `python-state-X` read as X, coder bytes as typed columns, pickles as bytes, Row-wrapped keys.

The fixture tests/fixtures/pyflink-2.3 is a canonical savepoint a real PyFlink 2.3 job wrote
(tests/fixtures/pyflink_job.py) with expected.jsonl: each key's state read back through PyFlink's
own state API, and the key group Flink's Java `KeyGroupRangeAssignment` gives `Row.of(key)`.
"""

from __future__ import annotations

import json
import pickle
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import flinkstate
from flinkstate.core.errors import InvalidArgumentError
from flinkstate.flink.errors import CorruptFileError, UnsupportedFlinkFormatError
from flinkstate.flink.pyflink.coders import PICKLED, Pickled, list_state, map_state, row_key_group, row_key_groups_array, value_state
from flinkstate.core.keygroups import assign_key_group

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
FIXTURE = FIXTURES / "pyflink-2.3"
OPS = {"by-long": pa.int64(), "by-string": pa.string()}
PROFILE = pa.struct([("name", pa.string()), ("visits", pa.int64()), ("score", pa.float64()), ("active", pa.bool_()),
                     ("level", pa.int32())])
BLOB = pa.struct([("n", pa.int64()), ("words", pa.list_(pa.string()))])
DECLARED = {"total": value_state(pa.int64()), "last": value_state(pa.string()), "profile": value_state(PROFILE),
            "history": list_state(pa.string()), "counts": map_state(pa.string(), pa.int64()), "blob": value_state(PICKLED)}


def expected(folder: Path) -> dict[str, dict[Any, dict[str, Any]]]:
    """expected.jsonl by operator, then key."""
    out: dict[str, dict[Any, dict[str, Any]]] = defaultdict(dict)
    for line in (folder / "expected.jsonl").read_text(encoding="utf-8").splitlines():
        d = json.loads(line)
        out[d["operator"]][d["key"]] = d
    return out


def by_key(t: pa.Table) -> dict[Any, list[dict[str, Any]]]:
    """Rows of a read grouped by key (in the order read)."""
    out: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for r in t.to_pylist():
        out[r["key"]].append(r)
    return out


def check_savepoint(folder: Path) -> int:
    """Every value, list element, map entry and key group of the savepoint equals what the PyFlink job wrote; rows checked."""
    exp = expected(folder)
    src = flinkstate.open(folder / "savepoint", pyflink=DECLARED)
    checked = 0
    for op, key_type in OPS.items():
        want = exp[op]
        assert want, op
        reads = {s: by_key(src.read_state(op, s)) for s in DECLARED}
        for domain in ("event", "processing"):  # timers of the Row-keyed operator: keys unwrapped too
            reads[domain] = by_key(src.read_timers(op, f"{domain}_user-timers"))
        for s, rows in reads.items():
            assert set(rows) == set(want), (op, s)
        for key, w in want.items():
            kg = w["key_group"]
            for s, rows in reads.items():
                assert {r["key_group"] for r in rows[key]} == {kg}, (op, s, key)  # the group Flink stored the key under
            assert [r["value"] for r in reads["total"][key]] == [w["total"]]
            assert [r["value"] for r in reads["last"][key]] == [w["last"]]
            assert [list(r["value"].values()) for r in reads["profile"][key]] == [w["profile"]]
            assert [r["value"] for r in reads["history"][key]] == w["history"]
            assert {r["user_key"]: r["value"] for r in reads["counts"][key]} == w["counts"]
            assert len(reads["counts"][key]) == len(w["counts"])
            [blob] = [r["value"] for r in reads["blob"][key]]
            assert isinstance(blob, bytes) and pickle.loads(blob) == w["blob"]  # the test's own fixture: trusted
            timers = sorted([d, r["timestamp"]] for d in ("event", "processing") for r in reads[d][key])
            assert timers == w["timers"]
            assert row_key_group(key, key_type, 128) == kg
            checked += 1
    return checked


def test_fixture_equals_what_pyflink_wrote() -> None:
    assert check_savepoint(FIXTURE) == sum(len(v) for v in expected(FIXTURE).values()) > 20


def test_states_go_by_their_python_names() -> None:
    src = flinkstate.open(FIXTURE / "savepoint")
    states = {op["uid"]: op["keyed_states"] for op in src.describe()["operators"]}
    assert states["by-long"] == {"blob": "list", "counts": "map", "history": "list", "last": "list", "profile": "list",
                                 "total": "list"}
    with pytest.raises(flinkstate.core.errors.StateNotFoundError):
        src.read_state("by-long", "python-state-total")


def test_undeclared_states_read_as_raw_coder_bytes() -> None:
    """Without declarations the savepoint cannot say the types: each Beam append's coder bytes, never unpickled."""
    exp = expected(FIXTURE)["by-long"]
    src = flinkstate.open(FIXTURE / "savepoint")
    total = src.read_state("by-long", "total")
    assert total.schema.field("value").type == pa.binary()
    got = {r["key"]: r["value"] for r in total.to_pylist()}
    assert got == {k: w["total"].to_bytes(8, "big", signed=True) for k, w in exp.items()}  # LONG: 8 bytes big-endian
    blob = {r["key"]: r["value"] for r in src.read_state("by-long", "blob").to_pylist()}
    for k, raw in blob.items():  # PICKLED_BYTE_ARRAY: i32 length + pickle, left as bytes
        assert int.from_bytes(raw[:4], "big") == len(raw) - 4 and pickle.loads(raw[4:]) == exp[k]["blob"]


def test_pickled_values_are_unpickled_only_when_asked() -> None:
    exp = expected(FIXTURE)["by-string"]
    plain = flinkstate.open(FIXTURE / "savepoint", pyflink={"blob": value_state(Pickled(BLOB))})
    assert plain.read_state("by-string", "blob").schema.field("value").type == pa.binary()
    trusted = flinkstate.open(FIXTURE / "savepoint", pyflink={"blob": value_state(Pickled(BLOB))}, unpickle=True)
    t = trusted.read_state("by-string", "blob")
    assert t.schema.field("value").type == BLOB
    assert {r["key"]: r["value"] for r in t.to_pylist()} == {k: w["blob"] for k, w in exp.items()}
    untyped = flinkstate.open(FIXTURE / "savepoint", pyflink={"blob": value_state(PICKLED)}, unpickle=True)
    with pytest.raises(InvalidArgumentError, match="blob"):
        untyped.read_state("by-string", "blob")


@pytest.mark.parametrize("op", list(OPS))
def test_key_lookup_hashes_the_row_wrapped_key(op: str) -> None:
    """keys=[k] finds each key: its group is murmur(Row.of(k).hashCode()), which for many keys is not murmur(k.hashCode())."""
    exp = expected(FIXTURE)[op]
    src = flinkstate.open(FIXTURE / "savepoint", pyflink=DECLARED)
    differs = 0
    for key, w in exp.items():
        rows = src.read_state(op, "history", keys=[key]).to_pylist()
        assert [r["value"] for r in rows] == w["history"] and {r["key"] for r in rows} == {key}
        assert src.read_state(op, "total", keys=[key]).column("key_group").to_pylist() == [w["key_group"]]
        differs += assign_key_group(key, 128, OPS[op]) != w["key_group"]
        timers = src.checkpoint().scan_timers(op, "event_user-timers", keys=[key]).to_arrow()
        assert sorted(timers.column("timestamp").to_pylist()) == [t for d, t in w["timers"] if d == "event"]
    assert differs > len(exp) // 2
    assert src.read_state(op, "total", keys=list(exp)[:3]).num_rows == 3


def test_wrong_declarations_are_typed_errors() -> None:
    src = flinkstate.open(FIXTURE / "savepoint", pyflink={"history": value_state(pa.string())})
    with pytest.raises(CorruptFileError, match="history"):
        src.read_state("by-long", "history")  # several values under one key: not a value state
    wrong = flinkstate.open(FIXTURE / "savepoint", pyflink={"by-long/last": value_state(pa.int64())})
    with pytest.raises(CorruptFileError, match="last"):
        wrong.read_state("by-long", "last")  # a STRING (i32 length + UTF-8) is not 8-byte LONGs
    assert wrong.read_state("by-string", "last").schema.field("value").type == pa.binary()  # "operator/state" scoped
    as_list = flinkstate.open(FIXTURE / "savepoint", pyflink={"counts": list_state(pa.string())})
    with pytest.raises(InvalidArgumentError, match="counts.*MAP"):
        as_list.read_state("by-long", "total")  # Flink stored a map state: said when the savepoint is opened


def test_row_keyed_savepoint_verifies_row_hash_key_groups() -> None:
    """read_keyed_state checks each stored key group against Row.hashCode (a Row key is not a Tuple)."""
    from flinkstate.flink import read_keyed_state
    from flinkstate.flink.meta.metadata import read_metadata

    meta = read_metadata(str(FIXTURE / "savepoint"))
    for op in OPS:
        total = read_keyed_state(meta, op).states["python-state-total"]
        want = {k: w["key_group"] for k, w in expected(FIXTURE)[op].items()}
        assert {r["key"]["f0"]: r["key_group"] for r in total.to_pylist()} == want


def test_row_key_groups_match_flink_for_multi_field_rows() -> None:
    """Values from Flink 2.3's KeyGroupRangeAssignment.assignToKeyGroup(Row.of(...), maxP) (jshell, flink-dist-2.3.0.jar)."""
    t = pa.struct([("a", pa.int64()), ("b", pa.string()), ("c", pa.int32())])
    assert row_key_groups_array(pa.array([{"a": 5, "b": "ab", "c": None}], t), 128).to_pylist() == [58]
    assert row_key_groups_array(pa.array([{"a": -7, "b": "η", "c": 3}], t), 300).to_pylist() == [30]
    assert row_key_groups_array(pa.array([2 << 40]), 128).to_pylist() == [126] == [row_key_group(2 << 40, pa.int64(), 128)]


def test_flink_options_on_a_flinkstate_root_are_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match="pyflink"):
        flinkstate.open(tmp_path / "root", pyflink=DECLARED)


def test_import_refuses_pyflink_operators(tmp_path: Path) -> None:
    """flinkstate's key groups are murmur(key.hashCode()): PyFlink's Row-hash groups cannot be imported unchanged."""
    from flinkstate.flink.bridge.importer import import_savepoint

    with pytest.raises(UnsupportedFlinkFormatError, match="by-(long|string).*PyFlink"):
        import_savepoint(FIXTURE / "savepoint", tmp_path / "root")
    assert flinkstate.open(tmp_path / "root").checkpoints() == []  # nothing committed


_ENCODE = {"long": (pa.int64(), lambda v: v.to_bytes(8, "big", signed=True)),
           "int": (pa.int32(), lambda v: v.to_bytes(4, "big", signed=True)),
           "bool": (pa.bool_(), lambda v: bytes([v])),
           "string": (pa.string(), lambda v: len(v.encode()).to_bytes(4, "big") + v.encode())}


@pytest.mark.parametrize("kind", list(_ENCODE))
def test_vector_decoding_equals_value_by_value(kind: str) -> None:
    """The numpy path gives what PyFlink's coder layout read one value at a time gives (blobs of 0..5 values)."""
    import random

    from flinkstate.flink.pyflink._vector import vector_values
    from flinkstate.flink.pyflink.coders import coder_reader

    t, enc = _ENCODE[kind]
    rnd = random.Random(7)
    gen = {"long": lambda: rnd.randint(-(2**63), 2**63 - 1), "int": lambda: rnd.randint(-(2**31), 2**31 - 1),
           "bool": lambda: rnd.random() < 0.5, "string": lambda: "".join(rnd.choice("aé€😀z") for _ in range(rnd.randint(0, 6)))}[kind]
    groups = [[gen() for _ in range(rnd.randint(0, 5))] for _ in range(300)]
    blobs = pa.array([b"".join(enc(v) for v in g) for g in groups], pa.binary())
    idx, vals = vector_values(blobs, t)
    assert vals.to_pylist() == [v for g in groups for v in g]
    assert idx.tolist() == [i for i, g in enumerate(groups) for _ in g]
    read = coder_reader(t, False, "test")
    for b, g in zip(blobs.to_pylist(), groups, strict=True):
        pos, got = 0, []
        while pos < len(b):
            v, pos = read(b, pos)
            got.append(v)
        assert got == g
    if kind != "bool":  # every byte is a BOOLEAN: nothing to truncate
        with pytest.raises(ValueError):
            vector_values(pa.array([blobs[1].as_py() + b"\x00\x00\x01"], pa.binary()), t)  # a truncated value


@pytest.mark.flink
@pytest.mark.slow
def test_real_pyflink_regenerated(tmp_path: Path) -> None:
    """Real PyFlink 2.3 (its own venv) writes a fresh savepoint; every value and key group equals its dump."""
    sys.path.insert(0, str(FIXTURES))
    try:
        import make_pyflink_fixture as maker
    finally:
        sys.path.remove(str(FIXTURES))
    try:
        maker.ensure_venv()
    except (RuntimeError, OSError) as e:
        pytest.skip(f"PyFlink {maker.PYFLINK_VERSION} venv at {maker.venv_dir()} cannot be created (offline?): {e}")
    out = maker.generate(tmp_path / "pyflink")
    assert check_savepoint(out) == sum(len(v) for v in expected(out).values()) > 20
