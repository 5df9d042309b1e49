"""The serializer registry (flink/serde/registry.py) against the inventory of Flink's jars (schemas/flink-serializers.json,
`python flinkjobs/inventory.py`): a class the jars hold cannot be missing from the registry, the registry's parse grammar
cannot contradict the bytecode, the table cannot claim what the code does not do, and each test it names exists and
reads the class it claims.
"""

from __future__ import annotations

import ast
import decimal
import importlib.util
import json
import struct
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from flinkstate.flink._io import DataReader
from flinkstate.flink.errors import UnsupportedSerializerError
from flinkstate.flink.files.state_decoder import StateDecoder
from flinkstate.flink.serde import _snapshots
from flinkstate.flink.serde.registry import SNAPSHOTS, TESTS, Snapshot
from flinkstate.flink.serde.serializers import TypeNode, read_keyed_header
from flinkstate.flink.serde.values import make_reader

ROOT = Path(__file__).resolve().parents[4]
FIXTURES = ROOT / "tests" / "fixtures"
_PARSE = "tests/flinkstate/flink/serde/test_snapshot_registry.py::test_parse_only_snapshots_parse_and_keep_the_header_readable"


def _inventory():  # noqa: ANN202 - a module loaded by path (flinkjobs/ is no package)
    spec = importlib.util.spec_from_file_location("flinkjobs_inventory", ROOT / "flinkjobs" / "inventory.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


INVENTORY = _inventory()
DOC = json.loads(INVENTORY.JSON_OUT.read_text(encoding="utf-8"))


def test_the_checked_in_table_is_what_the_registry_and_the_jars_give() -> None:
    """Regenerated from the facts it holds and today's registry: a registry change without `inventory.py` fails here."""
    text, md = INVENTORY.render(INVENTORY.facts_from_json(DOC), INVENTORY.load_registry())
    assert text == INVENTORY.JSON_OUT.read_text(encoding="utf-8"), "run: python flinkjobs/inventory.py --offline"
    assert md == INVENTORY.MD_OUT.read_text(encoding="utf-8"), "run: python flinkjobs/inventory.py --offline"


def test_every_snapshot_class_of_the_jars_is_registered() -> None:
    for line, counts in DOC["counts"].items():
        assert counts["unlisted"] == 0, f"Flink {line}: classes the registry lacks"
        assert sum(counts.values()) > 100
    listed = {r["class"] for r in DOC["classes"]}
    assert listed | {r["class"] for r in DOC["registered_beyond_the_jars"]} == set(SNAPSHOTS)


def test_the_registry_reads_each_payload_as_its_bytecode_says() -> None:
    """`simple`/`generic`/`composite` only for classes of that framework base; `composite:<outer>` exactly for those that
    override readOuterSnapshot; a reader of its own exactly for classes implementing readSnapshot themselves."""
    for row in DOC["classes"]:
        read = SNAPSHOTS[row["class"]].read
        for line, f in row["releases"].items():
            where = f"{row['class']} in Flink {line} (base {f['base']}, overrides {f['overrides']})"
            if read == "simple":
                assert f["base"] == "simple" and "readSnapshot" not in f["overrides"], where
            elif read == "generic":
                assert f["base"] == "generic", where
            elif read.startswith("composite"):
                assert f["base"] == "composite", where
                assert ("readOuterSnapshot" in f["overrides"]) == (":" in read), where
            else:
                assert f["base"] == "direct" and "readSnapshot" in f["overrides"], where
                assert read in _snapshots._DIRECT, where
            assert not f["legacy"]


def test_every_test_the_table_names_exists() -> None:
    for test in {s.test for s in SNAPSHOTS.values()} | set(TESTS):
        path, _, func = test.partition("::")
        tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
        assert func in {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}, test


# --------------------------------------------------------------------------- the claims of real savepoints' tests

# the savepoints each test reads (the classes it claims must be read there)
_FIXTURES_OF = {
    "test_datastream_states.py": ["flink-datastream/*/*/savepoint.tar.gz"],
    "test_sql_savepoints.py": ["flink-2.3-sql/*/savepoint", "flink-1.20-sql/*/savepoint"],
    "test_types_more.py": ["flink-2.3-canonical/*/savepoint"],
    "test_pyflink.py": ["pyflink-2.3/savepoint"],
}


def _savepoints(pattern: str, tmp: Path) -> Iterator[Path]:
    for p in sorted(FIXTURES.glob(pattern)):
        if p.name.endswith(".tar.gz"):
            out = tmp / p.parent.parent.name / p.parent.name
            with tarfile.open(p) as t:
                t.extractall(out, filter="data")
            yield out / "savepoint"
        else:
            yield p


def _classes_read(savepoints: list[Path], monkeypatch: pytest.MonkeyPatch) -> set[str]:
    """Every snapshot class the parser reads in the headers of these savepoints (keyed and operator state)."""
    import flinkstate as fs
    from flinkstate.flink.bridge.mapping import subtask_range, subtask_states
    from flinkstate.flink.files.operator_state import operator_state_headers

    seen: set[str] = set()
    real = _snapshots._read

    def spy(r: DataReader, ctx: str, e: Snapshot, version: int) -> TypeNode:
        seen.add(e.cls)
        return real(r, ctx, e, version)

    monkeypatch.setattr(_snapshots, "_read", spy)
    for sp in savepoints:
        meta = fs.open(str(sp)).checkpoint().meta
        for op in meta.operators:
            for sub in op.subtasks:
                if subtask_range(sub) is not None:
                    subtask_states(meta, op, sub)
            operator_state_headers(meta, op.operator_id)
    return seen


def test_each_class_a_real_savepoint_test_claims_is_read_in_its_savepoints(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    by_test: dict[str, set[str]] = {}
    for s in SNAPSHOTS.values():
        by_test.setdefault(s.test.partition("::")[0].rsplit("/", 1)[-1], set()).add(s.cls)
    for test_file, claimed in sorted(by_test.items()):
        if test_file not in _FIXTURES_OF:
            continue
        savepoints = [p for pattern in _FIXTURES_OF[test_file] for p in _savepoints(pattern, tmp_path)]
        assert savepoints, test_file
        read = _classes_read(savepoints, monkeypatch)
        assert not claimed - read, f"{test_file} claims classes its savepoints do not hold: {sorted(claimed - read)}"


# --------------------------------------------------------------------------- every other class, from synthetic bytes

def _utf(s: str) -> bytes:
    raw = s.encode("utf-8")
    return struct.pack(">H", len(raw)) + raw


_LONG = _utf("org.apache.flink.api.common.typeutils.base.LongSerializer$LongSerializerSnapshot") + struct.pack(">i", 3)
_JAVA_NULL = b"\xac\xed\x00\x05\x70"  # a Java serialization stream holding null
_OPTIONAL_MAP = struct.pack(">qi", 0x4F2C69A3D70, 0)


def _nested(n: int) -> bytes:
    return struct.pack(">iii", 1333245, 1, n) + _LONG * n


def _children(e: Snapshot) -> int:
    return {"ttl": 2, "either": 2, "taggedunion": 2, "sbedge": 2, "map": 2, "nfastate": 3}.get(e.kind, 1)


def _payload(e: Snapshot) -> bytes:
    """The bytes Flink's writeSnapshot gives a snapshot of this class (current version), nested serializers Longs."""
    read = e.read
    if read == "simple":
        return b""
    if read == "generic":
        return _utf("com.example.Type")
    if read.startswith("composite"):
        outer = {"": b"", "class": _utf("com.example.Type"), "utf": _utf("code"), "i32": struct.pack(">i", 8),
                 "row": b"\x01", "bool3": b"\x01", "bool2": b"\x01", "nfa": b"\x01", "java_bool": _JAVA_NULL + b"\x01"}
        version = {"row": 4, "bool3": 4, "bool2": 3, "nfa": 2}.get(read.partition(":")[2], 1)
        return struct.pack(">ii", 911108, version) + outer[read.partition(":")[2]] + _nested(_children(e))
    return {
        "enum": _utf("com.example.Color") + struct.pack(">i", 2) + _utf("RED") + _utf("BLUE"),
        "pojo": _utf("com.example.Pojo") + _OPTIONAL_MAP * 3,
        "kryo": _utf("com.example.Type") + _OPTIONAL_MAP * 3,
        "avro": _utf("com.example.Type") + _utf("{}"),
        "ttl_aware": b"\x01" + _LONG,
        "scala_enum": _utf("com.example.Enum") + struct.pack(">i", 1) + _utf("A") + struct.pack(">i", 0),
        "rowdata_key": struct.pack(">i", 5) + _JAVA_NULL + struct.pack(">i", 5) + _JAVA_NULL
        + _utf("org.apache.flink.table.runtime.typeutils.RowDataSerializer$RowDataSerializerSnapshot") + struct.pack(">i", 3)
        + struct.pack(">i", 0) + _nested(0),
        "table_row": struct.pack(">i", 0) + _nested(0),
        "table_i32": struct.pack(">i", 3),
        "table_i32_i32": struct.pack(">ii", 10, 2),
        "table_array": _logical_type() + _JAVA_NULL,
        "java4": _JAVA_NULL * 4,
        "sorted_map": _JAVA_NULL + _nested(2),
        "either_v2": _nested(2),
        "garray_v2": _utf("com.example.Type") + _nested(1),
    }[read]


def _logical_type() -> bytes:
    """One Java-serialized LogicalType as Flink writes it: the first of a real SQL savepoint's RowData snapshot."""
    from flinkstate.flink.serde.javaser import MAGIC, read_stream

    data = (FIXTURES / "flink-2.3-sql" / "agg-hashmap" / "savepoint" / "_metadata").read_bytes()
    if not data.count(MAGIC):
        data = b"".join(p.read_bytes() for p in (FIXTURES / "flink-2.3-sql" / "agg-hashmap" / "savepoint").iterdir())
    at = data.index(MAGIC)
    return data[at : read_stream(data, at, "test")[1]]


def _version(e: Snapshot) -> int:
    return {"pojo": 2, "kryo": 2, "avro": 2, "either_v2": 2, "garray_v2": 2}.get(e.read, 3)


def _header(e: Snapshot) -> bytes:
    """A keyed-state header (Long keys) of two value states: "x" of this snapshot class, then "after" of Long."""
    def state(name: str, value: bytes) -> bytes:
        return (_utf(name) + struct.pack(">i", 0) + struct.pack(">i", 1) + _utf("KEYED_STATE_TYPE") + _utf("VALUE")
                + struct.pack(">i", 2) + _utf("NAMESPACE_SERIALIZER") + struct.pack(">i", 2)
                + _utf("org.apache.flink.runtime.state.VoidNamespaceSerializer$VoidNamespaceSerializerSnapshot") + struct.pack(">i", 3)
                + _utf("VALUE_SERIALIZER") + struct.pack(">i", 2) + value)
    x = _utf(e.cls) + struct.pack(">i", _version(e)) + _payload(e)
    return struct.pack(">i?i", 6, False, 2) + _LONG + struct.pack(">h", 2) + state("x", x) + state("after", _LONG)


# a value of each kind the parse-only classes decode to (as Flink's serialize writes it; nested serializers Longs)
_VALUES = {"transparent": (struct.pack(">q", 7), 7), "void": (b"\x00", None), "ttl": (struct.pack(">qq", 5, 7), (5, 7)),
           "variant": (struct.pack(">ii", 2, 1) + b"abm", {"value": b"ab", "metadata": b"m"}),
           "list": (struct.pack(">iqq", 2, 5, 7), [5, 7]), "long": (struct.pack(">q", 7), 7),
           "decimaldata": (struct.pack(">q", 1234), decimal.Decimal("12.34"))}


@pytest.mark.parametrize("cls", sorted(c for c, s in SNAPSHOTS.items() if s.test == _PARSE))
def test_parse_only_snapshots_parse_and_keep_the_header_readable(cls: str) -> None:
    """Every class whose table row this test is: its snapshot (as Flink writes it) parses to its kind, the next state's
    serializers still parse, and its state decodes (decoded), keeps its framed values as bytes (bytes) or is refused by
    name when read (refused)."""
    e = SNAPSHOTS[cls]
    data = _header(e)
    _, key, states = read_keyed_header(DataReader(data), "operator op", len(data))
    x, after = states
    node = x.serializers["VALUE_SERIALIZER"]
    assert node.kind == e.kind and after.serializers["VALUE_SERIALIZER"].kind == "long"
    dec = StateDecoder(x, key, 1, "operator op, state 'x'")
    if e.outcome == "decoded":
        raw, want = _VALUES[e.kind]
        assert make_reader(node, "x")(raw, 0) == (want, len(raw))
    elif e.outcome == "bytes" and e.kind in ("bytes", "rowdata", "arraydata"):  # length-prefixed: its bytes wherever it is
        assert make_reader(node, "x")(b"\x00\x00\x00\x02\x01\x02", 0) == (b"\x01\x02", 6)
    elif e.outcome == "bytes":
        assert dec.unreadable is None and dec.raw_error is not None and e.cls in dec.raw_error
        assert dec.elem_reader(b"\x01\x02", 0) == (b"\x01\x02", 2)  # a whole value: its bytes
    else:
        with pytest.raises(UnsupportedSerializerError, match=rf"operator op, state 'x'.*{e.cls.replace('$', '.')}.*refused"):
            dec.table(raw_values=True)


def test_a_snapshot_class_nobody_registered_is_found_by_its_extent() -> None:
    """A user's own serializer snapshot (no registry entry): its extent comes from the rest of the header, and only its
    state is refused."""
    e = Snapshot("com.example.UserSerializer$Snapshot", "composite", "opaque", "bytes", _PARSE)
    data = _header(e)
    _, key, (x, after) = read_keyed_header(DataReader(data), "operator op", len(data))
    assert x.serializers["VALUE_SERIALIZER"].kind == "unknown" and after.serializers["VALUE_SERIALIZER"].kind == "long"
    assert "not one flinkstate knows" in x.serializers["VALUE_SERIALIZER"].error


# Modules outside serde/ that still name a snapshot class (their owners' to move into serde/: one constant each)
_KNOWN: set[str] = set()


def test_only_serde_knows_serializer_class_names() -> None:
    """A serializer Flink ships is one registry entry in flink/serde/: no other module names a snapshot class."""
    import re

    named = re.compile(r"[\"']org\.apache\.flink\.[\w.$]*(Serializer|Snapshot)")
    offenders = {p.relative_to(ROOT).as_posix() for base in ("python/flinkstate", "connector") for p in (ROOT / base).rglob("*.py")
                 if "flink/serde/" not in p.as_posix() and named.search(p.read_text(encoding="utf-8"))}
    assert offenders == _KNOWN
