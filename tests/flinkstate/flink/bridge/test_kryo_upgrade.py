"""Flink 1.x state that Kryo serialized, read typed and migrated for Flink 2.x (issue 44).

tests/fixtures/kryo-upgrade/ holds KryoUpgradeJob's CANONICAL savepoints (flinkjobs/kryo/KryoUpgradeJob.java, a job
written against Flink 1.20's API: a POJO with List/Map/Set/enum/LocalDate fields, ValueState<ArrayList<Long>>,
MapState<String, HashMap<String, Long>>, a list state of a registered non-POJO class, a value state of an unregistered
one) by real Flink 1.20.5 and 2.3.0,
HashMap and RocksDB, each with the job's dump of its state (`make_kryo_fixture.py upgrade`). The fast tier reads them,
migrates the 1.20 ones and compares the serializers with those Flink 2.3 wrote itself for the same job; the `flink` tier
has real Flink 2.3 restore the migrated savepoints (and fail or misread the unmigrated ones, as users report).
"""

from __future__ import annotations

import re

import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

import flinkstate as fs
from flinkstate.cli import main
from flinkstate.flink.bridge.importer import import_savepoint
from flinkstate.flink.bridge.mapping import subtask_states
from flinkstate.flink.bridge.store_export import export_savepoint, plan_export
from flinkstate.flink.errors import KryoDecodeError, UnsupportedSerializerError
from flinkstate.flink.meta.metadata import read_metadata
from flinkstate.flink.serde.kryo.migrate import MISREAD, REFUSED, KryoMigrationError
from flinkstate.flink.serde.serializers import TypeNode

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "kryo-upgrade"
ITEM = "KryoUpgradeJob$Item=sku:String,qty:int,price:double"
NOTE = "KryoUpgradeJob$Note=text:String,at:long"
BOTH = [ITEM, NOTE]
OP_ID = "25492d42ba26e7848eb0810ec9b3dd63"  # murmur3_128 of the uid "upgrade": Flink 1.x records only this


def savepoint(line: str, backend: str) -> Path:
    return FIXTURES / f"{line}-{backend}" / "savepoint"


def dump(line: str, backend: str) -> list[str]:
    return (FIXTURES / f"{line}-{backend}" / "dump.txt").read_text(encoding="utf-8").splitlines()


def _java(v: Any) -> str:
    """A value as Java's toString prints it in the job's dump."""
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, list):
        return "[" + ", ".join(_java(x) for x in v) + "]"
    return str(v)


def render(state: str, row: dict[str, Any]) -> str:
    """A row read by flinkstate as KryoUpgradeJob dumps that state's value."""
    v, k = row["value"], row["key"]
    if state == "order":
        counts = ", ".join(f"{a}={b}" for a, b in sorted(v["counts"]))
        last = "null" if v["last"] is None else f"Note({v['last']['text']},{v['last']['at']})"
        return (f"upgrade order {k} Order{{id={v['id']}, tags={_java(v['tags'])}, counts={{{counts}}}, "
                f"codes={_java(sorted(v['codes']))}, color={v['color']}, total={v['total']}, day={v['day'].isoformat()}, last={last}}}")
    if state == "history":
        return f"upgrade history {k} {_java(v)}"
    if state == "note":
        return f"upgrade note {k} Note({v['text']},{v['at']})"
    if state == "totals":
        return f"upgrade totals {k} {row['user_key']} {{" + ", ".join(f"{a}={b}" for a, b in sorted(v)) + "}"
    items = ", ".join(f"Item({i['sku']},{i['qty']},{_java(i['price'])})" for i in v)
    return f"upgrade items {k} [{items}]"


def read_all(path: Path | str, **opts: Any) -> list[str]:
    src = fs.open(str(path), **opts)
    lines = []
    for state in ("history", "note", "order", "totals"):
        lines += [render(state, r) for r in src.read_state("upgrade", state).to_pylist()]
    items: dict[int, list[Any]] = {}
    for r in src.read_state("upgrade", "items").to_pylist():  # a list state reads one row per element, in list order
        items.setdefault(r["key"], []).append(r["value"])
    lines += [render("items", {"key": k, "value": v}) for k, v in items.items()]
    return sorted(lines)


@pytest.mark.parametrize("line", ["1.20", "2.3"])
@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
def test_kryo_states_read_typed_as_the_job_held_them(line: str, backend: str) -> None:
    """Flink 1.20's Kryo 2 and 2.3's Kryo 5 (the POJO's LocalDate field too), in place: typed columns, every value as the
    job read it back from Flink."""
    src = fs.open(str(savepoint(line, backend)), uids=["upgrade"], kryo_classes=BOTH)
    order = src.read_state("upgrade", "order").schema.field("value").type
    assert str(order) == ("struct<codes: list<item: int32>, color: string, counts: map<string, int64>, day: date32[day], "
                          "id: string, last: struct<at: int64, text: string>, tags: list<item: string>, total: int64>")
    assert str(src.read_state("upgrade", "history").schema.field("value").type) == "list<item: int64>"
    assert str(src.read_state("upgrade", "totals").schema.field("value").type) == "map<string, int64>"
    assert str(src.read_state("upgrade", "items").schema.field("value").type) == "struct<price: double, qty: int32, sku: string>"
    assert str(src.read_state("upgrade", "note").schema.field("value").type) == "struct<at: int64, text: string>"
    assert read_all(savepoint(line, backend), uids=["upgrade"], kryo_classes=BOTH) == sorted(dump(line, backend))


def test_a_class_without_a_schema_is_named(tmp_path: Path) -> None:
    """The registered non-POJO class without --kryo-class: reading its list state is an error naming the class and the
    option (list elements are not framed: not even their bytes can be read apart), the other Kryo states read typed;
    an import of the savepoint leaves that state out, naming it, and imports the others (a failure stays with its state)."""
    src = fs.open(str(savepoint("1.20", "rocksdb")), uids=["upgrade"])
    for raw in (False, True):
        with pytest.raises(UnsupportedSerializerError, match=r"state 'items'.*KryoUpgradeJob\$Item: no schema.*--kryo-class"):
            fs.open(str(savepoint("1.20", "rocksdb")), uids=["upgrade"], raw_values=raw).read_state("upgrade", "items")
    assert len(src.read_state("upgrade", "history")) == 11 and len(src.read_state("upgrade", "totals")) == 22
    root = tmp_path / "root"
    report = import_savepoint(savepoint("1.20", "rocksdb"), root, uids=["upgrade"])
    assert re.search(r"state 'items'.*KryoUpgradeJob\$Item: no schema", report.refused["upgrade/items"])
    states = fs.open(str(root)).checkpoint().operator("upgrade").keyed_states
    assert "items" not in states and {"history", "totals"} <= set(states)
    assert len(fs.open(str(root)).read_state("upgrade", "history")) == 11


def test_kryo_2_bytes_are_never_exported_for_flink_2(tmp_path: Path) -> None:
    """A Kryo value state whose class has no schema (`note` without --kryo-class for Note) imports as its bytes, named;
    exporting it for Flink 2.3 is refused by name (Flink 2.x would read its Kryo 2 bytes with Kryo 5) and writes
    nothing; for 1.20 it goes back as it was."""
    root = tmp_path / "root"
    report = import_savepoint(savepoint("1.20", "rocksdb"), root, uids=["upgrade"], kryo_classes=ITEM)
    assert "KryoUpgradeJob$Note" in report.as_bytes["upgrade/note"] and "no schema" in report.as_bytes["upgrade/note"]
    assert str(fs.open(str(root)).read_state("upgrade", "note").schema.field("value").type) == "binary"
    dest = tmp_path / "sp"
    with pytest.raises(KryoMigrationError, match=r"operator 'upgrade', state 'note'.*KryoUpgradeJob\$Note.*no schema"):
        export_savepoint(str(root), dest, flink_version="2.3")
    assert not dest.exists()
    export_savepoint(str(root), tmp_path / "sp-1.20", flink_version="1.20")
    assert read_all(tmp_path / "sp-1.20", uids=["upgrade"], kryo_classes=BOTH) == sorted(dump("1.20", "rocksdb"))


def test_a_pojo_with_a_field_of_a_class_without_a_schema_is_kept_whole(tmp_path: Path) -> None:
    """Issue 42: a POJO whose field Flink gives to Kryo, of a class without a schema (Order's Note): with raw_values the
    whole POJO value comes back as its bytes (the record frames the value), and an import keeps them (named); an export
    for the same release writes them back unchanged and they read as before; without raw_values the error names the
    class and the option."""
    sp = savepoint("2.3", "rocksdb")
    with pytest.raises(UnsupportedSerializerError, match=r"state 'order'.*KryoUpgradeJob\$Note: no schema.*raw_values=True"):
        fs.open(str(sp), kryo_classes=ITEM).read_state("upgrade", "order")
    raw = fs.open(str(sp), kryo_classes=ITEM, raw_values=True).read_state("upgrade", "order")
    assert str(raw.schema.field("value").type) == "binary" and raw.num_rows == 11
    assert len(fs.open(str(sp), kryo_classes=ITEM).read_state("upgrade", "history")) == 11  # the other states: typed
    root = tmp_path / "root"
    report = import_savepoint(sp, root, kryo_classes=ITEM)
    assert "KryoUpgradeJob$Note" in report.as_bytes["upgrade/order"] and "KryoUpgradeJob$Note" in report.as_bytes["upgrade/note"]
    dest = export_savepoint(str(root), tmp_path / "sp", flink_version="2.3")
    again = fs.open(dest, kryo_classes=ITEM, raw_values=True).read_state("upgrade", "order")
    assert sorted(again.column("value").to_pylist()) == sorted(raw.column("value").to_pylist())
    assert read_all(dest, kryo_classes=BOTH) == sorted(dump("2.3", "rocksdb"))


def test_bytes_that_are_not_the_declared_class_are_named(tmp_path: Path) -> None:
    """A schema that does not match the class (Item's qty declared a String): an error naming operator, state and class,
    in place and on import (which commits nothing)."""
    wrong = "KryoUpgradeJob$Item=sku:String,qty:String,price:double"
    pattern = r"operator upgrade, state 'items'.*do not decode as a Kryo KryoUpgradeJob\$Item"
    with pytest.raises(UnsupportedSerializerError, match=pattern):
        fs.open(str(savepoint("1.20", "hashmap")), uids=["upgrade"], kryo_classes=wrong).read_state("upgrade", "items")
    with pytest.raises(UnsupportedSerializerError, match=pattern):
        import_savepoint(savepoint("1.20", "hashmap"), tmp_path / "root", uids=["upgrade"], kryo_classes=wrong)
    assert fs.open(str(tmp_path / "root")).checkpoints() == []


def test_an_unknown_registration_id_is_named() -> None:
    """A class id that neither Flink's defaults nor the snapshot's registrations give (88: the snapshot of `history`
    registers ArrayList as 85, the job's Item as 86 and Flink's Avro class as 87): an error naming operator, state, id."""
    from flinkstate.flink.serde.kryo.bind import KryoOptions
    from flinkstate.flink.serde.kryo.schema import parse_class_specs
    from flinkstate.flink.serde.values import make_reader

    meta = read_metadata(str(savepoint("1.20", "rocksdb")))
    op = next(o for o in meta.operators if o.operator_id == OP_ID)
    op = dataclasses.replace(op, kryo=KryoOptions(2, parse_class_specs(ITEM)))
    history = subtask_states(meta, op, next(s for s in op.subtasks if s.managed_keyed))["history"].elem_node
    ids = KryoRegistrations_ids(history)
    assert ids[85] == "java.util.ArrayList" and ids[86] == "KryoUpgradeJob$Item" and ids[87].endswith("DummyAvroRegisteredClass")
    with pytest.raises(KryoDecodeError, match=r"operator upgrade, state 'history'.*registration id 88.*no class is registered"):
        make_reader(history, "operator upgrade, state 'history'")(bytes([88 + 2, 1, 1]), 0)


def KryoRegistrations_ids(node: TypeNode) -> dict[int, str]:
    from flinkstate.flink.serde.kryo.registry import parse_kryo_snapshot

    return parse_kryo_snapshot(node.payload, "test").ids(2)


def _tree(n: TypeNode) -> Any:
    """A serializer tree as compared: kind, class, names, params; Kryo by class and registrations (bound or not)."""
    if n.kind in ("kryo", "opaque"):
        return ("kryo", n.cls, n.names, n.payload)
    return (n.kind, n.cls, n.names, n.params, tuple(_tree(c) for c in n.children))


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
def test_migrated_serializers_are_those_flink_2_3_writes(backend: str, tmp_path: Path) -> None:
    """Import 1.20's savepoint, plan the export for 2.3: every state's serializers equal those Flink 2.3 itself wrote for
    the same job (Nullable(List|Set|Map) for the POJO's collection fields, Kryo 5 for the rest); the plan says what it
    migrates and what 2.x does unmigrated."""
    root = tmp_path / "root"
    import_savepoint(savepoint("1.20", backend), root, uids=["upgrade"], kryo_classes=BOTH)
    plan = plan_export(str(root), tmp_path / "sp", flink_version="2.3")
    (op,) = [o for o in plan.operators if o.keyed is not None]
    meta23 = read_metadata(str(savepoint("2.3", backend)))
    op23 = meta23.operator("upgrade")
    want = subtask_states(meta23, op23, next(s for s in op23.subtasks if s.managed_keyed))
    for state in ("order", "history", "totals", "items", "note"):
        assert _tree(op.keyed.meta[state].serializers["VALUE_SERIALIZER"]) == _tree(want[state].meta.serializers["VALUE_SERIALIZER"]), state
    how = {k: [(m.path, m.declared, m.without) for m in v] for k, v in plan.migrations.items()}
    assert how == {
        "upgrade/order": [("VALUE_SERIALIZER/0", "java.util.Set", REFUSED), ("VALUE_SERIALIZER/2", "java.util.Map", REFUSED),
                          ("VALUE_SERIALIZER/3", "java.time.LocalDate", MISREAD), ("VALUE_SERIALIZER/5", "KryoUpgradeJob$Note", MISREAD),
                          ("VALUE_SERIALIZER/6", "java.util.List", REFUSED)],
        "upgrade/history": [("VALUE_SERIALIZER", "java.util.ArrayList", MISREAD)],
        "upgrade/totals": [("VALUE_SERIALIZER/1", "java.util.HashMap", MISREAD)],
        "upgrade/items": [("VALUE_SERIALIZER/0", "KryoUpgradeJob$Item", MISREAD)],
        "upgrade/note": [("VALUE_SERIALIZER", "KryoUpgradeJob$Note", MISREAD)],
    }
    assert plan_export(str(root), tmp_path / "sp", flink_version="1.20").migrations == {}  # a 1.x target keeps Kryo 2


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
def test_migrated_savepoint_reads_back_as_the_job_held_it(backend: str, tmp_path: Path) -> None:
    """The exported 2.3 savepoint, read in place (Kryo 5, Flink 2.x's List/Set/Map serializers): the 1.20 job's state.
    A 1.20 export of the same root keeps Kryo 2 and reads back the same."""
    root = tmp_path / "root"
    import_savepoint(savepoint("1.20", backend), root, uids=["upgrade"], kryo_classes=BOTH)
    for version in ("2.3", "1.20"):
        dest = tmp_path / f"sp-{version}"
        export_savepoint(str(root), dest, flink_version=version)
        assert read_all(dest, uids=["upgrade"], kryo_classes=BOTH) == sorted(dump("1.20", backend)), version


def test_describe_and_dry_run_say_what_is_migrated(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`describe` of a 1.x savepoint names the states Flink 2.x refuses or misreads unmigrated; `export --dry-run` of
    the imported root says per state what the export writes, and writes nothing."""
    sp = str(savepoint("1.20", "rocksdb"))
    assert main(["describe", sp, "--uid", "upgrade", "--kryo-class", ITEM, "--kryo-class", NOTE]) == 0
    text = capsys.readouterr().out
    assert "Flink 2.x" in text
    for state, without in (("order", "refused"), ("history", "wrong"), ("totals", "wrong"), ("items", "wrong"), ("note", "wrong")):
        assert any(line.startswith(f"upgrade/{state} ") or (state in line and without in line) for line in text.splitlines()), (state, text)
    assert main(["describe", sp, "--uid", "upgrade", "--kryo-class", ITEM, "--kryo-class", NOTE, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    upgrade = {f"{u['operator']}/{u['state']}": u for u in doc["upgrade_to_2x"]}
    assert upgrade["upgrade/order"]["without_migration"] == REFUSED and upgrade["upgrade/history"]["without_migration"] == MISREAD
    root = str(tmp_path / "root")
    assert main(["import", sp, root, "--uid", "upgrade", "--kryo-class", ITEM, "--kryo-class", NOTE]) == 0
    capsys.readouterr()
    dest = tmp_path / "sp"
    assert main(["export", root, str(dest), "--flink-version", "2.3", "--dry-run"]) == 0
    text = capsys.readouterr().out
    assert not dest.exists()
    assert "upgrade/order" in text and "NullableSerializer<ListSerializer<NullableSerializer<StringSerializer>>>" in text
    assert "upgrade/items" in text and "Kryo 5 (KryoUpgradeJob$Item)" in text


@pytest.mark.flink
@pytest.mark.slow
@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
def test_flink_2_3_restores_the_migrated_savepoint(backend: str, tmp_path: Path) -> None:
    """Real Flink 2.3 restores KryoUpgradeJob (unchanged but for the 2.x Kryo registration call) from the 1.20 savepoint
    migrated by import + export --flink-version 2.3, and dumps what Flink 1.20 dumped; without migration, Flink 2.3 fails
    on the job's state, and restores the states it keeps Kryo for wrong (RocksDB: a job without the POJO state)."""
    from fsc_helpers import flink_harness

    harness = flink_harness()
    root = str(tmp_path / "root")
    assert main(["import", str(savepoint("1.20", backend)), root, "--uid", "upgrade", "--kryo-class", ITEM, "--kryo-class", NOTE]) == 0
    dest = tmp_path / "sp"
    assert main(["export", root, str(dest), "--flink-version", "2.3"]) == 0
    assert harness.kryo_upgrade_restore(dest, tmp_path / "dump.txt", backend, "2.3") == sorted(dump("1.20", backend))
    copy = tmp_path / "unmigrated"
    shutil.copytree(savepoint("1.20", backend), copy)
    with pytest.raises(RuntimeError) as failed:
        harness.kryo_upgrade_restore(copy, tmp_path / "fail.txt", backend, "2.3")
    if backend == "rocksdb":
        assert "StateMigrationException" in str(failed.value) and "PojoSerializer" in str(failed.value)
        states = ("history", "totals", "items", "note")
        got = harness.kryo_upgrade_restore(copy, tmp_path / "wrong.txt", backend, "2.3", states)
        want = sorted(line for line in dump("1.20", backend) if line.split()[1] in states)
        assert len(got) == len(want) and got != want  # restored without an error, values wrong
        assert any("4.838E-320" in line or "E-3" in line for line in got if " items " in line)  # Kryo 2's doubles read by Kryo 5


@pytest.mark.flink
@pytest.mark.slow
def test_flink_2_3_kryo_5_state_round_trips(tmp_path: Path) -> None:
    """Flink 2.3's own savepoint of the job (Kryo 5: the POJO's LocalDate and Note fields, the ArrayList, HashMap, Item
    and Note states) imports typed, exports for 2.3 (Kryo 5 written from the columns; nothing to migrate) and Flink 2.3
    restores it with the dump it wrote; so it does when Note has no schema (its values and the POJO's kept as bytes)."""
    from fsc_helpers import flink_harness

    root = tmp_path / "root"
    import_savepoint(savepoint("2.3", "rocksdb"), root, kryo_classes=BOTH)
    plan = plan_export(str(root), tmp_path / "sp", flink_version="2.3")
    assert plan.migrations == {}
    dest = export_savepoint(str(root), tmp_path / "sp", flink_version="2.3")
    assert flink_harness().kryo_upgrade_restore(Path(dest), tmp_path / "dump.txt", "hashmap", "2.3") == sorted(dump("2.3", "rocksdb"))
    # without Note's schema: the POJO values holding a Note, and the Note values, kept as their bytes and written back
    import_savepoint(savepoint("2.3", "rocksdb"), tmp_path / "root2", kryo_classes=ITEM)
    dest = export_savepoint(str(tmp_path / "root2"), tmp_path / "sp2", flink_version="2.3")
    assert flink_harness().kryo_upgrade_restore(Path(dest), tmp_path / "dump2.txt", "rocksdb", "2.3") == sorted(dump("2.3", "rocksdb"))


def test_a_pojo_snapshot_of_a_class_without_a_schema_is_named_as_its_start(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where a Kryo class without a schema also has a POJO snapshot in the savepoint, the reason its values stay bytes
    names that snapshot's fields (not used as a schema: it keeps neither primitive-or-boxed nor type arguments)."""
    from flinkstate.flink.bridge import kryo_types
    from flinkstate.flink.serde.kryo.bind import KryoOptions

    pojo = TypeNode("pojo", "com.acme.Order", (TypeNode("long", "x"), TypeNode("opaque", "k", names=("java.util.List",))),
                    ("id", "tags"))
    monkeypatch.setattr(kryo_types, "_pojos", lambda meta, ops: {"com.acme.Order": pojo})
    meta = read_metadata(str(savepoint("1.20", "rocksdb")))
    why = "a Kryo value (declared java.util.ArrayList) cannot be read: com.acme.Order: no schema for this class"
    op = dataclasses.replace(meta.operators[0], kryo=KryoOptions(2, as_bytes={("x", "s", "VALUE_SERIALIZER"): why}))
    (hinted,) = kryo_types._with_pojo_hints(meta, [op])
    text = hinted.kryo.as_bytes[("x", "s", "VALUE_SERIALIZER")]
    assert text.startswith(why) and "POJO snapshot of com.acme.Order has fields id (long), tags (java.util.List)" in text


@pytest.mark.flink
@pytest.mark.slow
@pytest.mark.parametrize("cell", [("1.20", "rocksdb-full", "checkpoint"), ("1.20", "hashmap", "native")], ids="-".join)
def test_another_job_upgrades_to_2_3(cell: tuple[str, str, str], tmp_path: Path) -> None:
    """A job this feature was not written for: ProductionJob's Flink 1.20 snapshots (its `sessions/profile` is a Kryo
    value of a class without a default constructor; Tuple keys, TTL, timers, windows, operator and broadcast state;
    a HashMap NATIVE savepoint, which before could not be imported at all, and a retained RocksDB checkpoint) migrate to
    2.3, and real Flink 2.3 restores the job from them with the dump 1.20 wrote."""
    from fsc_helpers import flink_harness
    from production_matrix import snapshot

    path, want = snapshot(cell, tmp_path / "cells")
    root = str(tmp_path / "root")
    uids = [a for u in ("sessions", "wide", "explicit", "rules", "window", "parse") for a in ("--uid", u)]
    assert main(["import", str(path), root, *uids, "--kryo-class", "ProductionJob$Profile=last:long,user:String"]) == 0
    assert main(["export", root, str(tmp_path / "sp"), "--flink-version", "2.3", "--dry-run"]) == 0
    assert main(["export", root, str(tmp_path / "sp"), "--flink-version", "2.3"]) == 0
    got = flink_harness().production_restore(tmp_path / "sp", tmp_path / "dump.txt", "rocksdb", 2, 3, version="2.3")
    assert got == sorted(want) and any(line.startswith("sessions profile ") for line in got)
