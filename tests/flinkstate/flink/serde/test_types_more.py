"""Enums, arrays, Row field names, Kryo values (typed error or raw bytes) and window namespaces of real Flink savepoints (fast tier)."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from flink_dump import load_dump

import flinkstate as fs
from flinkstate.core.errors import InvalidArgumentError
from flinkstate.flink import UnsupportedSerializerError, read_keyed_state, read_metadata
from flinkstate.flink.bridge.importer import import_savepoint

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
# savepoint (or chk-N) directory and the job's dump, per format
SAVEPOINTS = {
    "canonical": (FIXTURES / "flink-2.3-canonical" / "files"),
    "canonical-snappy": (FIXTURES / "flink-2.3-canonical" / "snappy"),
    "heap-native": (FIXTURES / "flink-2.3-native" / "native"),
    "heap-checkpoint": (FIXTURES / "flink-2.3-native" / "checkpoint"),
    "rocksdb-native": (FIXTURES / "flink-2.3-rocksdb" / "rocksdb"),
    "rocksdb-incremental": (FIXTURES / "flink-2.3-rocksdb" / "rocksdb-checkpoint"),
}
FRAMED = ("canonical", "canonical-snappy", "rocksdb-native", "rocksdb-incremental")  # formats that hold the Kryo state
KRYO = "org.apache.flink.api.java.typeutils.runtime.kryo.KryoSerializerSnapshot"
NEW_STATES = {"color": "value", "longs": "value", "doubles": "value", "names": "value", "strs": "value", "colors": "list",
              "arr_list": "list", "by_color": "map", "mixed": "value"}


def _dir(variant: str) -> Path:
    base = SAVEPOINTS[variant]
    if (base / "savepoint").is_dir():
        return base / "savepoint"
    return sorted((base / "checkpoint").glob("chk-*"), key=lambda p: int(p.name[4:]))[-1]


def _dump(variant: str) -> list[dict[str, Any]]:
    return load_dump(SAVEPOINTS[variant] / "expected.jsonl")


def _wanted(dump: list[dict[str, Any]], op: str, state: str) -> dict[Any, Any]:
    out = {}
    for d in dump:
        if d["operator"] == op and d.get("state") == state:
            out[(d["key"], d["user_key"]) if "user_key" in d else d["key"]] = d["value"]
    return out


def _got(t: pa.Table) -> dict[Any, Any]:
    out: dict[Any, Any] = {}
    for r in t.to_pylist():
        k = (r["key"], r["user_key"]) if "user_key" in r else r["key"]
        out[k] = r["value"]
    return out


def test_enum_and_array_schemas() -> None:
    """Enums read as their constant's name; primitive, String and generic arrays as Arrow lists, also inside Row/List/Map."""
    src = fs.open(str(_dir("canonical")))
    types = {n: src.read_state("long-keyed", n).schema.field("value").type for n in NEW_STATES}
    assert types["color"] == pa.string() and types["colors"] == pa.string()  # list state: a row per element
    assert types["longs"] == pa.list_(pa.int64()) and types["doubles"] == pa.list_(pa.float64())
    assert types["names"] == types["strs"] == pa.list_(pa.string())  # GenericArraySerializer, StringArraySerializer
    assert types["arr_list"] == pa.list_(pa.string())
    assert types["by_color"] == pa.list_(pa.int32())  # map state: a row per entry, user_key an enum name
    assert fs.open(str(_dir("canonical"))).read_state("long-keyed", "by_color").schema.field("user_key").type == pa.string()
    assert types["mixed"] == pa.struct([("f0", pa.string()), ("f1", pa.list_(pa.int64())), ("f2", pa.list_(pa.string()))])


@pytest.mark.parametrize("variant", sorted(SAVEPOINTS))
def test_enum_and_array_values_equal_the_dump(variant: str) -> None:
    """Every enum/array value, list element and map entry equals what the Flink job held, in every format."""
    dump = _dump(variant)
    ks = read_keyed_state(read_metadata(str(_dir(variant))), "long-keyed")
    for name, kind in NEW_STATES.items():
        want = _wanted(dump, "long-keyed", name)
        rows = ks.states[name].to_pylist()
        if kind == "list":
            got: dict[Any, Any] = {}
            for r in rows:
                got.setdefault(r["key"], []).append(r["value"])
        else:
            got = _got(ks.states[name])
        assert want and got == want, (variant, name)


def test_enums_are_checked_against_their_constants() -> None:
    """An ordinal outside the snapshot's constants is a typed error, not a wrong name."""
    from flinkstate.flink.serde._vector import Source, vector_reader
    from flinkstate.flink.serde.serializers import TypeNode
    from flinkstate.flink.serde.values import make_reader

    node = TypeNode("enum", "Color", (), ("RED", "GREEN"))
    buf = struct.pack(">ii", 1, 2)
    assert make_reader(node, "ctx")(buf, 0) == ("GREEN", 4)
    with pytest.raises(ValueError, match="ordinal 2 of Color"):
        make_reader(node, "ctx")(buf, 4)
    rd = vector_reader(node, "ctx")
    assert rd is not None
    import numpy as np

    with pytest.raises(ValueError, match="ordinal 2 of Color"):
        rd(Source(buf), np.array([0, 4]), None)


def test_row_fields_are_f0_fn_unless_named() -> None:
    """Flink's Row serializer keeps no names: f0..fn by default; row_fields names them per operator/state."""
    path = str(_dir("canonical"))
    dump = _wanted(_dump("canonical"), "long-keyed", "row")
    plain = fs.open(path).read_state("long-keyed", "row")
    assert plain.schema.field("value").type.names == ["f0", "f1"]
    named = fs.open(path, row_fields="long-keyed/row=id,label; long-keyed/mixed=color,longs,names")
    t = named.read_state("long-keyed", "row")
    assert t.schema.field("value").type == pa.struct([("id", pa.int64()), ("label", pa.string())])
    assert {r["key"]: r["value"] for r in t.to_pylist()} == {k: {"id": v["f0"], "label": v["f1"]} for k, v in dump.items()}
    assert named.checkpoint().state_descriptor("long-keyed", "row").value_type.names == ["id", "label"]
    assert named.read_state("long-keyed", "mixed").schema.field("value").type.names == ["color", "longs", "names"]
    mapping = fs.open(path, row_fields={"long-keyed/row": ["a", "b"]})
    assert mapping.read_state("long-keyed", "row", keys=[3]).column("value").to_pylist() == [
        {"a": dump[3]["f0"], "b": dump[3]["f1"]}]


@pytest.mark.parametrize("spec,match", [
    ("long-keyed/row=a,b,c", "operator 'long-keyed', state 'row': row fields \\['a', 'b', 'c'\\]"),
    ("long-keyed/count=a", "state 'count': row fields"),
    ("long-keyed/row", "expected 'operator/state=name"),
    ("long-keyed/row=a,a", "distinct"),
])
def test_bad_row_fields_name_the_state(spec: str, match: str) -> None:
    with pytest.raises(InvalidArgumentError, match=match):
        fs.open(str(_dir("canonical")), row_fields=spec).checkpoint()


def test_flink_options_on_a_flinkstate_root_are_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match="raw_values"):
        fs.open(str(tmp_path / "root"), raw_values=True)


def _kryo_text(value: bytes, text: str) -> bool:
    """Kryo writes an ASCII string's chars with the last one's high bit set."""
    return (text[:-1].encode() + bytes([ord(text[-1]) | 0x80])) in value


@pytest.mark.parametrize("variant", FRAMED)
def test_kryo_values_are_a_typed_error_or_raw_bytes(variant: str) -> None:
    """A Kryo state names operator, state and serializer class; raw_values reads its values' serialized bytes."""
    path = str(_dir(variant))
    with pytest.raises(UnsupportedSerializerError, match=rf"operator kryo, state 'opaque'.*{KRYO}.*StateGenJob\$Opaque.*raw_values"):
        fs.open(path).read_state("kryo", "opaque")
    seen = fs.open(path).read_state("kryo", "seen")  # the operator's other states read as usual
    assert _got(seen) == _wanted(_dump(variant), "kryo", "seen")
    raw = fs.open(path, raw_values=True).read_state("kryo", "opaque")
    assert raw.schema.field("value").type == pa.binary()
    want = _wanted(_dump(variant), "kryo", "opaque")
    got = _got(raw)
    assert set(got) == set(want)
    for k, v in want.items():
        assert _kryo_text(got[k], v["text"]), (k, got[k], v)
    assert fs.open(path, raw_values=True).checkpoint().state_descriptor("kryo", "opaque").value_type == pa.binary()


def test_kryo_raw_values_on_the_low_level_reader() -> None:
    meta = read_metadata(str(_dir("canonical")))
    with pytest.raises(UnsupportedSerializerError, match="state 'opaque'"):
        read_keyed_state(meta, "kryo")
    assert read_keyed_state(meta, "kryo", raw_values=True).states["opaque"].num_rows == 7


def test_kryo_state_is_imported_as_bytes_by_default(tmp_path: Path) -> None:
    """A Kryo state's values are kept as their serialized bytes, and the report says so; raw_values=False refuses it
    (and imports nothing)."""
    root = tmp_path / "root"
    with pytest.raises(UnsupportedSerializerError, match="operator kryo, state 'opaque'"):
        import_savepoint(_dir("canonical"), root, raw_values=False)
    assert not root.exists() or fs.open(str(root)).checkpoints() == []
    report = import_savepoint(_dir("canonical"), root)
    assert list(report.as_bytes) == ["kryo/opaque"]  # Kryo values without their class's schema: named, with the remedy
    assert report.as_bytes["kryo/opaque"].startswith("org.apache.flink.api.java.typeutils.runtime.kryo.KryoSerializerSnapshot "
                                                     "(StateGenJob$Opaque): ")
    assert "StateGenJob$Opaque: no schema" in report.as_bytes["kryo/opaque"] and "--kryo-class" in report.as_bytes["kryo/opaque"]
    t = fs.open(str(root)).read_state("kryo", "opaque")
    assert t.num_rows == 7 and t.schema.field("value").type == pa.binary()


@pytest.mark.parametrize("variant", sorted(SAVEPOINTS))
def test_window_contents_and_timers_have_time_window_namespaces(variant: str) -> None:
    """The window operator's aggregate per key and TimeWindow (start, end), and its cleanup timers at end - 1."""
    dump = [d for d in _dump(variant) if d["operator"] == "window"]
    src = fs.open(str(_dir(variant)))
    t = src.read_state("window", "window-contents")
    assert t.schema.field("namespace").type == pa.struct([("start", pa.int64()), ("end", pa.int64())])
    want = {(d["key"], d["namespace"]["start"], d["namespace"]["end"]): d["value"] for d in dump if d.get("state") == "window-contents"}
    got = {(r["key"], r["namespace"]["start"], r["namespace"]["end"]): r["value"] for r in t.to_pylist()}
    assert want and got == want
    timers = src.read_timers("window", "event_window-timers")
    want_t = {(d["key"], d["namespace"]["start"], d["namespace"]["end"], d["timestamp"]) for d in dump if d.get("service")}
    got_t = {(r["key"], r["namespace"]["start"], r["namespace"]["end"], r["timestamp"]) for r in timers.to_pylist()}
    assert want_t and got_t == want_t
    # a per-key aggregate check independent of the dump: the sum over a key's windows is the sum of its values
    values = range(60)
    assert {k: sum(v for (kk, _, _), v in got.items() if kk == k) for k in range(5)} == {k: sum(v for v in values if v % 5 == k) for k in range(5)}


@pytest.mark.flink
@pytest.mark.slow
def test_kryo_state_in_a_heap_native_savepoint_is_refused_by_name(tmp_path: Path) -> None:
    """HashMap native snapshots put entries back to back without lengths: a Kryo value of a class without a schema cannot
    even be skipped (an error naming the class and the option); with the class's schema the state reads."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("flinkjobs_harness", FIXTURES.parents[1] / "flinkjobs" / "harness.py")
    assert spec is not None and spec.loader is not None
    harness = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(harness)
    harness.run_job(tmp_path, 30, ("native",), props={"kryo": "true"})
    src = fs.open(str(tmp_path / "native" / "savepoint"), raw_values=True)
    with pytest.raises(UnsupportedSerializerError, match=r"operator kryo, state 'opaque'.*StateGenJob\$Opaque: no schema.*--kryo-class"):
        src.read_state("kryo", "opaque")
    assert src.read_state("long-keyed", "count").num_rows > 0  # other operators read as usual
    typed = fs.open(str(tmp_path / "native" / "savepoint"), kryo_classes="StateGenJob$Opaque=id:long,text:String")
    rows = typed.read_state("kryo", "opaque").to_pylist()
    assert rows and all(r["value"]["text"] == f"kryo-{r['value']['id']}" for r in rows)
