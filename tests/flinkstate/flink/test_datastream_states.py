"""Every state DataStreamStatesJob writes (one per serializer category Flink's DataStream operators and user functions put
in state) reads exactly as real Flink restores it, in place and after import, or is refused by name.

The fixtures (tests/fixtures/flink-datastream/<line>/<cell>/, `python tests/fixtures/make_datastream_fixture.py`) hold
savepoints real Flink 2.3 and 1.20 wrote on the HashMap and RocksDB backends, canonical and native, and the dump of every
state real Flink wrote when it restored each (`datastream_dump`). The `flink` tier runs the job and its dump again.
"""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest

import flinkstate as fs
from flinkstate.flink.bridge.importer import import_savepoint
from fsc_helpers import flink_harness

from datastream_dump import differences, dump_lines, flinkstate_lines, type_nodes, without

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "flink-datastream"
CELLS = sorted(f"{p.parent.name}/{p.name}" for p in FIXTURES.glob("*/*") if (p / "dump.txt.gz").exists())
_KRYO_NOT_FRAMED = {"values/money", "values/optional"}  # a user Value, a Kryo Optional: HashMap native does not frame them
# 1.x gives a POJO's List field to Kryo (values/order, ttl_order, orders): its Kryo 2 values decode to typed columns
# (flink/serde/kryo), which the comparison serializes again with the POJO's serializer against the dump's bytes
REFUSED_IN_PLACE = {
    "2.3/hashmap-canonical": set(), "2.3/hashmap-native": _KRYO_NOT_FRAMED, "2.3/rocksdb-canonical": set(),
    "2.3/rocksdb-native": set(), "1.20/hashmap-canonical": set(), "1.20/hashmap-native": _KRYO_NOT_FRAMED,
    "1.20/rocksdb-canonical": set(), "1.20/rocksdb-native": set(),
}
# keys hashed by a POJO's own hashCode or Row.hashCode: a flinkstate root places keys by the Java hashCode of the Arrow key
UNHASHED = {f"{op}/{s}" for op in ("pojo-keyed", "row-keyed") for s in ("last", "seen", "event_user-timers", "processing_user-timers")}


def _cell(cell: str, tmp: Path) -> tuple[Path, list[str]]:
    with tarfile.open(FIXTURES / cell / "savepoint.tar.gz") as t:
        t.extractall(tmp, filter="data")
    ops = sorted({json.loads(line)["op"] for line in dump_lines(FIXTURES / cell / "dump.txt.gz")})
    return tmp / "savepoint", ops


def test_fixtures_cover_both_lines_backends_and_formats() -> None:
    assert set(CELLS) == set(REFUSED_IN_PLACE)


@pytest.mark.parametrize("cell", CELLS)
def test_every_state_equals_the_flink_dump(cell: str, tmp_path: Path) -> None:
    savepoint, ops = _cell(cell, tmp_path)
    want = dump_lines(FIXTURES / cell / "dump.txt.gz")
    src = fs.open(str(savepoint), raw_values=True, uids=ops)
    ck = src.checkpoint()
    nodes = {op: type_nodes(ck.meta, ck.uids[op]) for op in ops}
    refused: dict[str, str] = {}
    got = flinkstate_lines(src, ops, nodes, refused)
    assert set(refused) == REFUSED_IN_PLACE[cell]
    for state, why in refused.items():  # a typed error naming operator, state and serializer class
        op, name = state.split("/")
        assert f"operator {op}" in why and repr(name) in why and "Serializer" in why, why
    assert not differences(without(want, set(refused)), got)
    assert sum(got.values()) > 1500 and len({json.loads(line)["op"] for line in got}) == len(ops)


@pytest.mark.parametrize("cell", CELLS)
def test_every_state_equals_the_flink_dump_after_import(cell: str, tmp_path: Path) -> None:
    savepoint, ops = _cell(cell, tmp_path)
    want = dump_lines(FIXTURES / cell / "dump.txt.gz")
    report = import_savepoint(str(savepoint), str(tmp_path / "root"), uids=ops)
    assert set(report.refused) == REFUSED_IN_PLACE[cell] | UNHASHED
    kept = {"values/money", "values/optional"} - REFUSED_IN_PLACE[cell]
    assert set(report.as_bytes) == kept  # said: their values are their serialized bytes
    ck = fs.open(str(savepoint), uids=ops).checkpoint()
    nodes = {op: type_nodes(ck.meta, ck.uids[op]) for op in ops}
    got = flinkstate_lines(fs.open(str(tmp_path / "root")), ops, nodes)
    assert not differences(without(want, set(report.refused)), got)


@pytest.mark.parametrize("cell", ["2.3/hashmap-canonical", "2.3/rocksdb-canonical", "1.20/hashmap-canonical"])
def test_untouched_import_exports_every_imported_state_byte_for_byte(cell: str, tmp_path: Path) -> None:
    """Import -> export writes every imported state's records back as Flink wrote them: each serializer's writer (CEP's NFA
    state and shared buffer, interval-join buffers, evicting windows' stream records, Either, Tuple0...) mirrors its
    reader on Flink's own bytes. (Which Flink restores: test_import_export_and_real_flink_restores_every_imported_state.)"""
    from flinkstate.flink.bridge.store_export import export_savepoint
    from flinkstate.flink.meta.names import uid_hash
    from savepoint_bytes import read_savepoint_bytes

    savepoint, ops = _cell(cell, tmp_path)
    report = import_savepoint(str(savepoint), str(tmp_path / "root"), uids=ops)
    dest = export_savepoint(str(tmp_path / "root"), tmp_path / "export", flink_version=cell.split("/")[0])
    a, b = read_savepoint_bytes(str(savepoint)), read_savepoint_bytes(str(dest))
    refused = {(uid_hash(r.split("/")[0]), name) for r in report.refused for name in (r.split("/")[1], "_timer_state/" + r.split("/")[1])}
    compared = 0
    for k, per_kg in a.records.items():
        if k in refused:
            assert k not in b.records or not any(b.records[k].values()), k
            continue
        assert {kg: sorted(r) for kg, r in per_kg.items() if r} == {kg: sorted(r) for kg, r in b.records[k].items() if r}, k
        compared += 1
    assert compared > 60 and a.elements == b.elements


def test_the_comparison_sees_one_wrong_value(tmp_path: Path) -> None:
    cell = "2.3/hashmap-canonical"
    savepoint, ops = _cell(cell, tmp_path)
    want = dump_lines(FIXTURES / cell / "dump.txt.gz")
    line = next(x for x in want if '"state": "nfaStateName"' in x)
    wrong = want.copy()
    wrong[line] -= 1
    wrong[line.replace('"start_timestamp": ', '"start_timestamp": 1', 1)] += 1
    src = fs.open(str(savepoint), raw_values=True)
    ck = src.checkpoint()
    got = flinkstate_lines(src, ops, {op: type_nodes(ck.meta, ck.uids[op]) for op in ops})
    assert not differences(want, got) and "cep/nfaStateName" in differences(wrong, got)


@pytest.mark.flink
@pytest.mark.slow
@pytest.mark.parametrize("line", ["2.3", "1.20"])
def test_real_flink_writes_and_restores_every_state(line: str, tmp_path: Path) -> None:
    """Real Flink writes the job's savepoint and dumps it on restore: flinkstate reads every state as the dump."""
    harness = flink_harness()
    run = harness.datastream_states(tmp_path / "run", 40, "hashmap", 2, ("canonical",), line)
    dump = tmp_path / "dump.txt"
    harness.datastream_dump(run / "canonical" / "savepoint", dump, "hashmap", 2, line)
    want = dump_lines(dump)
    ops = sorted({json.loads(x)["op"] for x in want})
    src = fs.open(str(run / "canonical" / "savepoint"), raw_values=True, uids=ops)
    ck = src.checkpoint()
    refused: dict[str, str] = {}
    got = flinkstate_lines(src, ops, {op: type_nodes(ck.meta, ck.uids[op]) for op in ops}, refused)
    assert set(refused) == REFUSED_IN_PLACE[f"{line}/hashmap-canonical"]
    assert not differences(without(want, set(refused)), got)


@pytest.mark.flink
def test_flink_refuses_enum_keys() -> None:
    """Enum.hashCode is identity based, so Flink refuses a stream keyed by an enum (enums are values and map keys only)."""
    answer = flink_harness().datastream_enum_key("2.3")
    assert answer.startswith("REFUSED") and "EnumTypeInfo" in answer and "cannot be used as key" in answer


@pytest.mark.flink
@pytest.mark.slow
@pytest.mark.parametrize("cell", ["2.3/hashmap-canonical", "2.3/rocksdb-native", "1.20/rocksdb-canonical"])
def test_import_export_and_real_flink_restores_every_imported_state(cell: str, tmp_path: Path) -> None:
    """The round trip of every state: import -> export (to the cell's release) -> real Flink of that release restores the
    export on the cell's backend, and its dump equals the original savepoint's for every state import carried (the ones it
    refused are named by its report; Flink restores them empty)."""
    from flinkstate.cli import main

    line, shape = cell.split("/")
    savepoint, ops = _cell(cell, tmp_path)
    want = dump_lines(FIXTURES / cell / "dump.txt.gz")
    report = import_savepoint(str(savepoint), str(tmp_path / "root"), uids=ops)
    assert set(report.refused) == REFUSED_IN_PLACE[cell] | UNHASHED
    assert main(["export", str(tmp_path / "root"), str(tmp_path / "export"), "--flink-version", line]) == 0
    dump = tmp_path / "dump.txt"
    flink_harness().datastream_dump(tmp_path / "export", dump, shape.split("-")[0], 2, line)
    got = dump_lines(dump)
    kept = without(want, set(report.refused))
    assert not differences(kept, without(got, set(report.refused)))
    assert sum(kept.values()) > 1200
    assert got == without(got, set(report.refused))  # not imported, not exported: Flink restores those states empty
