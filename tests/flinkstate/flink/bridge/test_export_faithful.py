"""Export changes only what was asked (fast tier: checked-in savepoints of flinkjobs/src/ShapesJob.java, no Flink run).

A state nobody changed goes back byte for byte: its serializer snapshots and, per key group, its records (key and value
bytes; in Flink's own order where Flink wrote them sorted, RocksDB), operator, union and broadcast state elements per
subtask, coordinator bytes. A changed state keeps its serializers (a POJO stays that POJO, a Tuple2 that Tuple2, an enum
that enum); a change they cannot hold, and Kryo bytes the target release reads differently, are refused by name before
anything is written. `test_flink_export_shapes.py` has real Flink restore such exports.
"""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pytest

import flinkstate as fs
from flinkstate.core.errors import InvalidArgumentError
from flinkstate.flink.bridge.importer import import_savepoint
from flinkstate.flink.bridge.store_export import export_savepoint, plan_export
from flinkstate.flink.errors import IncompatibleReleaseError, KryoMigrationError, SerializerMismatchError
from flinkstate.flink.meta.metadata import read_metadata
from flinkstate.flink.write.export import rewrite_flink_savepoint

from savepoint_bytes import SavepointBytes, read_savepoint_bytes

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "flink-shapes"
UIDS = ("shapes", "rules", "split", "source")  # Flink 1.x metadata records operator ids only
CELLS = {"2.3-hashmap": "2.3", "2.3-rocksdb": "2.3", "1.20-hashmap": "1.20"}


def savepoint(cell: str) -> str:
    return str(FIXTURES / cell / "savepoint")


def imported(cell: str, root: Path) -> str:
    import_savepoint(savepoint(cell), str(root), uids=UIDS)
    return str(root)


def assert_same_bytes(a: SavepointBytes, b: SavepointBytes, *, changed: set[str] = frozenset(), in_order: bool = False) -> None:
    """Every state but `changed` (names) identical: serializer snapshots, records per key group (in the same order when
    in_order, else as sets: a HashMap savepoint writes a key group's records in hash order), elements, coordinators."""
    assert a.key_serializers == b.key_serializers
    assert a.keyed_serializers.keys() == b.keyed_serializers.keys()
    assert a.operator_serializers == b.operator_serializers and a.coordinators == b.coordinators
    for k in a.keyed_serializers:
        assert a.keyed_serializers[k] == b.keyed_serializers[k], k  # a changed state keeps its serializers too
        if k[1] in changed:
            continue
        ra, rb = a.records[k], b.records[k]
        if not in_order:
            ra, rb = ({kg: sorted(r) for kg, r in x.items()} for x in (ra, rb))
        assert ra == rb, k
    for k in a.elements:
        if k[1] not in changed:
            assert a.elements[k] == b.elements[k], k


@pytest.mark.parametrize("cell", sorted(CELLS))
def test_untouched_import_exports_every_state_byte_for_byte(cell: str, tmp_path: Path) -> None:
    root = imported(cell, tmp_path / "root")
    dest = export_savepoint(root, tmp_path / "export", flink_version=CELLS[cell])
    a, b = read_savepoint_bytes(savepoint(cell)), read_savepoint_bytes(dest)
    assert len(a.records) == 15 and sum(len(r) for x in a.records.values() for r in x.values()) == 238
    assert {k[1] for k in a.operator_serializers} == {"pairs", "marks", "rules", "SourceReaderState"}
    assert_same_bytes(a, b, in_order=cell.endswith("rocksdb"))  # RocksDB writes records sorted by their bytes, as export does

    def operators(path: str) -> dict:
        return {op.operator_id: (op.name, op.uid, op.parallelism, op.max_parallelism) for op in read_metadata(path).operators
                if any(s.managed_keyed or s.managed_operator for s in op.subtasks) or op.coordinator_state is not None}

    assert operators(dest) == operators(savepoint(cell))  # ids, 2.x names and uids, parallelism, max parallelism


def test_rewrite_of_a_flink_savepoint_is_byte_for_byte(tmp_path: Path) -> None:
    dest = rewrite_flink_savepoint(savepoint("2.3-rocksdb"), str(tmp_path / "export"))
    assert_same_bytes(read_savepoint_bytes(savepoint("2.3-rocksdb")), read_savepoint_bytes(dest), in_order=True)


POINT = pa.struct([("color", pa.string()), ("inner", pa.struct([("label", pa.string()), ("weight", pa.float64())])),
                   ("x", pa.int64()), ("y", pa.int64())])


def test_changed_states_keep_their_serializers_and_the_others_their_bytes(tmp_path: Path) -> None:
    """A POJO value, a Tuple2 value, an enum key of a map and a broadcast state of enum keys and POJO values changed with
    the library: written with Flink's serializers (snapshots byte for byte), read back as written; the rest unchanged."""
    root = imported("2.3-rocksdb", tmp_path / "root")
    store = fs.open(root)
    desc = store.checkpoint().operators["shapes"].keyed_states
    assert desc["point"].value_type == POINT and desc["color"].value_type == pa.string()
    point = {"color": "BLUE", "inner": {"label": None, "weight": 0.5}, "x": 7, "y": 8}  # a null String field: a POJO holds it
    with store.begin() as w:
        w.put_state("shapes", desc["point"], pa.table({"key": ["k3"], "value": pa.array([point], POINT), "tombstone": [False]}),
                    mode="delta")
        w.put_state("shapes", desc["pair"], pa.table({"key": ["k4", "new"], "value": pa.array([{"f0": 1, "f1": None}, {"f0": 2, "f1": "n"}],
                    desc["pair"].value_type), "tombstone": [False, False]}), mode="delta")
        w.put_state("shapes", desc["by_color"], pa.table({"key": ["new"], "user_key": ["BLACK"], "value": pa.array([point], POINT),
                                                          "tombstone": [False]}), mode="delta")
        rules = store.checkpoint().scan_operator_state("rules", "rules").to_arrow()
        w.put_operator_state("rules", store.checkpoint().operators["rules"].operator_states["rules"],
                             rules.filter(pa.compute.not_equal(rules.column("key"), "RED")))
    dest = export_savepoint(root, tmp_path / "export")
    a, b = read_savepoint_bytes(savepoint("2.3-rocksdb")), read_savepoint_bytes(dest)
    assert_same_bytes(a, b, changed={"point", "pair", "by_color", "rules"}, in_order=True)
    shapes = [k for k in a.records if k[1] == "point"][0][0]
    for name, added, removed in (("point", 1, 1), ("pair", 2, 1), ("by_color", 1, 0)):  # the records changed and added, no other
        ra = {r for x in a.records[(shapes, name)].values() for r in x}
        rb = {r for x in b.records[(shapes, name)].values() for r in x}
        assert (len(rb - ra), len(ra - rb)) == (added, removed), name
    back = fs.open(dest)
    got = back.read_state("shapes", "point", keys=["k3"]).column("value").to_pylist()
    assert got == [point]
    assert back.read_state("shapes", "pair", keys=["k4"]).column("value").to_pylist() == [{"f0": 1, "f1": None}]
    assert sorted(back.read_operator_state("rules", "rules").column("key").to_pylist()) == ["BLACK", "BLACK", "BLUE", "BLUE", "GREEN", "GREEN"]


@pytest.mark.parametrize("state, column, value, message", [
    ("color", "value", "PURPLE", r"EnumSerializer of ShapesJob\$Color \(constants RED, GREEN, BLUE, BLACK\).*'PURPLE'"),
    ("pair", "value", {"f0": None, "f1": "x"}, r"TupleSerializerSnapshot.*null"),
    ("by_color", "user_key", "PURPLE", r"EnumSerializer of ShapesJob\$Color"),
])
def test_a_change_its_serializer_cannot_hold_is_refused_by_name(tmp_path: Path, state: str, column: str, value, message: str) -> None:
    root = imported("2.3-hashmap", tmp_path / "root")
    store = fs.open(root)
    desc = store.checkpoint().operators["shapes"].keyed_states[state]
    if state == "by_color":  # a map's user key
        row = {"key": ["k1"], "user_key": [value], "value": pa.nulls(1, desc.user_value_type), "tombstone": [False]}
    else:
        row = {"key": ["k1"], "value": pa.array([value], desc.value_type), "tombstone": [False]}
    with store.begin() as w:
        w.put_state("shapes", desc, pa.table(row), mode="delta")
    with pytest.raises(InvalidArgumentError, match=rf"operator 'shapes', state '{state}', column '{column}'.*{message}"):
        plan_export(root, tmp_path / "export")  # refused while planning: no job has written a file
    assert not os.path.exists(tmp_path / "export")


def test_operator_state_change_its_serializer_cannot_hold_is_refused_by_name(tmp_path: Path) -> None:
    root = imported("2.3-hashmap", tmp_path / "root")
    store = fs.open(root)
    desc = store.checkpoint().operators["split"].operator_states["pairs"]
    with store.begin() as w:
        w.put_operator_state("split", desc, pa.table({"subtask": pa.array([0], pa.int32()),
                                                      "value": pa.array([{"f0": "sum", "f1": None}], desc.value_type)}))
    with pytest.raises(InvalidArgumentError, match=r"operator 'split', operator state 'pairs', column 'value'.*TupleSerializerSnapshot"):
        plan_export(root, tmp_path / "export")
    assert not os.path.exists(tmp_path / "export")


def test_a_state_whose_type_changed_is_refused_by_name(tmp_path: Path) -> None:
    root = imported("2.3-hashmap", tmp_path / "root")
    store = fs.open(root)
    old = store.checkpoint().operators["shapes"].keyed_states["pair"]
    wider = pa.struct([("f0", pa.int64()), ("f1", pa.string()), ("f2", pa.bool_())])
    with store.begin() as w:  # a full put may change a state's types
        w.put_state("shapes", fs.ValueStateDescriptor(name="pair", key_type=old.key_type, value_type=wider),
                    pa.table({"key": ["k1"], "value": pa.array([{"f0": 1, "f1": "a", "f2": True}], wider)}))
    with pytest.raises(SerializerMismatchError, match=r"operator 'shapes', state 'pair', column 'value': Flink wrote it with "
                                                      r"serializer .*TupleSerializerSnapshot.*f2"):
        plan_export(root, tmp_path / "export")
    assert not os.path.exists(tmp_path / "export")


def test_kryo_states_of_flink_1x_are_refused_for_2x_by_name(tmp_path: Path) -> None:
    """Flink 2.3 would restore 1.20's Kryo 2 bytes as Kryo 5 without an error and with wrong values: refused, naming
    operator, states, serializer and release; nothing written. For 1.20 they go back as they were; without them, 2.3 is fine."""
    root = imported("1.20-hashmap", tmp_path / "root")
    pattern = (r"cannot export for Flink 2\.3.*Kryo 5.*operator 'shapes' \(written by Flink 1\.18, 1\.19, 1\.20, Kryo 2 bytes\): "
               r"blobs \(VALUE_SERIALIZER: .*kryo\.KryoSerializerSnapshot of ShapesJob\$Profile\); profile \(")
    # the export of a root migrates Kryo 2 state for 2.x (serde.kryo.migrate): Profile has no schema, so it cannot
    migration = (r"2 state\(s\) cannot be written for Flink 2\.3: operator 'shapes', state 'blobs', .*ShapesJob\$Profile: no "
                 r"schema for this class.*--kryo-class.*operator 'shapes', state 'profile'")
    with pytest.raises(KryoMigrationError, match=migration):
        plan_export(root, tmp_path / "export", flink_version="2.3")
    with pytest.raises(KryoMigrationError, match=migration):
        export_savepoint(root, tmp_path / "export", flink_version="2.3")
    with pytest.raises(IncompatibleReleaseError, match=pattern.replace("'shapes'", "'[0-9a-f]{32}'")):  # 1.x: operator ids
        rewrite_flink_savepoint(savepoint("1.20-hashmap"), str(tmp_path / "export"), flink_version="2.3")
    assert not os.path.exists(tmp_path / "export")
    store = fs.open(root)
    with store.begin() as w:
        w.remove_state("shapes", "profile")
        w.remove_state("shapes", "blobs")
    dest = export_savepoint(root, tmp_path / "export", flink_version="2.3")
    a, b = read_savepoint_bytes(savepoint("1.20-hashmap")), read_savepoint_bytes(dest)
    assert {k[1] for k in a.records} - {k[1] for k in b.records} == {"profile", "blobs"}
    for k in b.records:
        assert {kg: sorted(r) for kg, r in b.records[k].items()} == {kg: sorted(r) for kg, r in a.records[k].items()}, k


def test_kryo_states_whose_release_is_not_recorded_are_refused(tmp_path: Path) -> None:
    root = imported("2.3-hashmap", tmp_path / "root")
    store = fs.open(root)
    with store.begin() as w:  # as a root imported before the release was recorded
        w.set_property("flink.source-release.shapes", "")
    with pytest.raises(IncompatibleReleaseError, match=r"operator 'shapes' \(written by an unrecorded Flink release .*import the savepoint again\)"):
        export_savepoint(root, tmp_path / "export")


OTHER_JOBS = {  # savepoints of jobs other than ShapesJob (StateGenJob of three releases, ProductionJob), and their uids
    "stategen-2.3-snappy": ("flink-2.3-canonical/snappy/savepoint", ()),
    "stategen-2.0": ("flink-2.0/canonical/savepoint", ()),
    "stategen-1.20": ("flink-1.20/canonical/savepoint", ("long-keyed", "string-keyed", "opstate", "bcast", "source")),
    "production-2.3": ("flink-production/2.3/hashmap/canonical.tar.gz", ()),
}


@pytest.mark.parametrize("job", sorted(OTHER_JOBS))
def test_untouched_import_of_other_jobs_exports_byte_for_byte(job: str, tmp_path: Path) -> None:
    """The same for the other jobs' canonical savepoints here (snappy-compressed ones too: compared uncompressed), each
    exported for the release that wrote it."""
    import tarfile

    rel, uids = OTHER_JOBS[job]
    src = FIXTURES.parent / rel
    if rel.endswith(".tar.gz"):
        with tarfile.open(src) as t:
            t.extractall(tmp_path / "src", filter="data")
        (src,) = (tmp_path / "src").iterdir()
    line = read_metadata(str(src)).flink_version.versions[-1]
    import_savepoint(str(src), str(tmp_path / "root"), uids=uids)
    dest = export_savepoint(str(tmp_path / "root"), tmp_path / "export", flink_version=line)
    a, b = read_savepoint_bytes(str(src)), read_savepoint_bytes(dest)
    assert len(a.records) >= 15 and len(a.elements) >= 3
    assert_same_bytes(a, b)
