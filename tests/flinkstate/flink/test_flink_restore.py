"""The judge: real Flink 2.3 restores savepoints flinkstate wrote and its dump after restore is the expected one."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from fsc_helpers import flink_harness as _harness

from flinkstate.flink.write.export import load_flink_savepoint, rewrite_flink_savepoint
from flinkstate.flink.write.savepoint_writer import write_savepoint

pytestmark = [pytest.mark.flink, pytest.mark.slow]

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "flink-2.3-canonical"


@pytest.fixture()
def original_dump(canonical_flink_dump: tuple[str, ...]) -> list[str]:
    """What Flink holds after restoring the checked-in savepoint Flink itself wrote (HashMap backend, parallelism 1)."""
    return list(canonical_flink_dump)


@pytest.mark.parametrize(("variant", "backend", "parallelism", "compression"),
                         [("files", "hashmap", 1, False), ("snappy", "rocksdb", 3, True)])
def test_round_trip_restores_to_same_dump(tmp_path, original_dump, variant, backend, parallelism, compression):
    """decode -> export (no change) -> Flink restores every key's state, timers and operator state as the original."""
    dest = rewrite_flink_savepoint(str(FIXTURE / variant / "savepoint"), str(tmp_path / "sp"), compression=compression)
    moved = tmp_path / "moved"
    os.rename(dest, moved)  # relative file handles: the savepoint can be moved
    got = _harness().restore_and_dump(moved, tmp_path / "dump.txt", backend, parallelism)
    assert len(got) > 700
    assert got == original_dump


def test_changed_savepoint_restores_to_changed_dump(tmp_path, original_dump):
    """Delete keys 0-4 of long-keyed, upsert count of key 5, rename string-keyed's uid, max parallelism 300 -> RocksDB p=3."""
    ops = load_flink_savepoint(str(FIXTURE / "files" / "savepoint"))
    by_uid = {o.uid: o for o in ops}
    lk = by_uid["long-keyed"]
    for name, t in list(lk.keyed.states.items()):
        t = t.filter(pc.invert(pc.is_in(t.column("key"), pa.array([0, 1, 2, 3, 4], pa.int64()))))
        if name == "count":
            t = t.set_column(t.schema.get_field_index("value"), "value",
                             pc.if_else(pc.equal(t.column("key"), 5), pa.scalar(424242, pa.int64()), t.column("value")))
        lk.keyed.states[name] = t
    for name, t in list(lk.keyed.timers.items()):
        lk.keyed.timers[name] = t.filter(pc.invert(pc.is_in(t.column("key"), pa.array([0, 1, 2, 3, 4], pa.int64()))))
    lk.max_parallelism = 300
    by_uid["string-keyed"].uid = "sk2"
    write_savepoint(str(tmp_path / "sp"), ops)
    got = _harness().restore_and_dump(tmp_path / "sp", tmp_path / "dump.txt", "rocksdb", 3, ("long-keyed", "sk2"))
    expected = []
    for line in original_dump:
        parts = line.split(" ")
        if parts[0] == "long-keyed":
            key = parts[3] if parts[1] == "timer" else parts[2]
            if key in {"0", "1", "2", "3", "4"}:
                continue
            if parts[1] == "count" and key == "5":
                line = "long-keyed count 5 424242"
        if parts[0] == "string-keyed":
            line = "sk2" + line[len("string-keyed"):]
        expected.append(line)
    assert len(expected) < len(original_dump)
    assert got == sorted(expected)


def test_savepoint_written_from_arrow_tables(tmp_path):
    """A checkpoint written from scratch (store.begin puts: string key, struct, list, map, byte[], timers) exported and restored by Flink."""
    import flinkstate as fs
    from flinkstate.flink.bridge.store_export import export_savepoint

    store = fs.open(str(tmp_path / "job"))
    row = pa.struct([("id", pa.int64()), ("name", pa.string()), ("score", pa.float64())])
    with store.begin(max_parallelism=128) as w:
        w.put_state("arrow", fs.ValueStateDescriptor(name="profile", value_type=row),
                    pa.table({"key": ["k1", "ü2"], "value": pa.array([{"id": 1, "name": "x", "score": 1.5}, {"id": 2, "name": None, "score": -0.25}], row)}))
        w.put_state("arrow", fs.ListStateDescriptor(name="events", value_type=pa.int64()),
                    pa.table({"key": ["k1"], "value": pa.array([[3, 1, 2]], pa.list_(pa.int64()))}))
        w.put_state("arrow", fs.MapStateDescriptor(name="counts", user_key_type=pa.string(), user_value_type=pa.int32()),
                    pa.table({"key": ["k1", "k1", "ü2"], "user_key": ["a", "b", "c"], "value": pa.array([3, 4, 5], pa.int32())}))
        w.put_state("arrow", fs.ValueStateDescriptor(name="blob", value_type=pa.binary()),
                    pa.table({"key": ["k1"], "value": pa.array([b"\x01\xff"], pa.binary())}))
        w.put_timers("arrow", fs.TimerServiceDescriptor(name="user-timers"), pa.table({"key": ["k1", "ü2"], "timestamp": [10, 20]}))
        w.set_parallelism("arrow", 2)
    dest = export_savepoint(str(tmp_path / "job"), str(tmp_path / "sp"), compression=True)
    got = _harness().restore_and_dump(dest, tmp_path / "dump.txt", "rocksdb", 3, ("--arrow",))
    assert got == sorted([
        "arrow profile k1 +I[1, x, 1.5]", "arrow profile ü2 +I[2, null, -0.25]",
        "arrow events k1 [3, 1, 2]",
        "arrow counts k1 a=3", "arrow counts k1 b=4", "arrow counts ü2 c=5",
        "arrow blob k1 [1, -1]",
        "arrow timer EVENT_TIME k1 10", "arrow timer EVENT_TIME ü2 20",
    ])


@pytest.mark.parametrize(("variant", "backend", "parallelism"), [("files", "rocksdb", 2), ("snappy", "hashmap", 3)])
def test_import_then_export_restores_to_same_dump(tmp_path, original_dump, variant, backend, parallelism):
    """Flink savepoint -> `flinkstate import` -> `flinkstate export`, no change: Flink restores the original dump."""
    from flinkstate.cli import main

    assert main(["import", str(FIXTURE / variant / "savepoint"), str(tmp_path / "root"), "--raw-values"]) == 0
    assert main(["export", str(tmp_path / "root"), str(tmp_path / "sp")]) == 0
    got = _harness().restore_and_dump(tmp_path / "sp", tmp_path / "dump.txt", backend, parallelism)
    assert len(got) > 700
    assert got == original_dump


def test_decimal_and_java_time_types_restore(tmp_path):
    """Arrow decimal, date32, time64, timestamp (with and without zone) exported as BigDecimal, BigInteger (kept from a
    read), LocalDate, LocalTime, LocalDateTime, Instant: real Flink restores them and prints the same values; the
    reader reads the export back exactly."""
    import datetime as dt
    import decimal

    import flinkstate as fs
    from flinkstate.flink import read_keyed_state, read_metadata
    from flinkstate.flink.bridge.store_export import export_savepoint

    store = fs.open(str(tmp_path / "job"))
    ns = 123456789
    with store.begin(max_parallelism=128) as w:
        def put(name, typ, values, desc=fs.ValueStateDescriptor):
            arrow = pa.list_(typ) if desc is fs.ListStateDescriptor else typ
            w.put_state("arrow", desc(name=name, value_type=typ), pa.table({"key": ["k1", "ü2"][: len(values)], "value": pa.array(values, arrow)}))
        put("dec", pa.decimal128(12, 2), [decimal.Decimal("123.45"), decimal.Decimal("-0.50")])
        put("date", pa.date32(), [dt.date(2024, 2, 29), dt.date(1, 1, 1)])
        put("time", pa.time64("ns"), [(23 * 3600 + 59 * 60 + 58) * 10**9 + ns])
        put("dt", pa.timestamp("ns"), [pa.scalar(1_709_251_198 * 10**9 + ns, pa.timestamp("ns")).value])
        put("inst", pa.timestamp("us", tz="UTC"), [-1])
        put("drow", pa.struct([("d", pa.decimal128(5, 1)), ("day", pa.date32())]), [{"d": decimal.Decimal("1.5"), "day": dt.date(1970, 1, 2)}])
        put("dates", pa.date32(), [[dt.date(2000, 1, 1), dt.date(1969, 12, 31)]], fs.ListStateDescriptor)
    dest = export_savepoint(str(tmp_path / "job"), str(tmp_path / "sp"))
    got = _harness().restore_and_dump(dest, tmp_path / "dump.txt", "hashmap", 1, ("--arrow",))
    assert got == sorted([
        "arrow dec k1 123.45", "arrow dec ü2 -0.50",
        "arrow date k1 2024-02-29", "arrow date ü2 0001-01-01",
        "arrow time k1 23:59:58.123456789",
        "arrow dt k1 2024-02-29T23:59:58.123456789",
        "arrow inst k1 1969-12-31T23:59:59.999999Z",
        "arrow drow k1 +I[1.5, 1970-01-02]",
        "arrow dates k1 [2000-01-01, 1969-12-31]",
    ])
    ks = read_keyed_state(read_metadata(dest), "arrow")
    assert sorted(ks.states["dec"].column("value").to_pylist()) == ["-0.50", "123.45"]
    assert ks.states["date"].column("value").type == pa.date32()
    assert sorted(ks.states["date"].column("value").to_pylist()) == [dt.date(1, 1, 1), dt.date(2024, 2, 29)]
    assert ks.states["dt"].column("value").cast(pa.int64()).to_pylist() == [1_709_251_198 * 10**9 + ns]
    assert ks.states["inst"].column("value").cast(pa.int64()).to_pylist() == [-1000]


def test_struct_exported_as_named_pojo_restores(tmp_path):
    """`flinkstate export --pojo long-keyed/pojo=StateGenJob$Pojo`: a struct written from Arrow restores into the job's POJO state."""
    import flinkstate as fs
    from flinkstate.cli import main

    store = fs.open(str(tmp_path / "job"))
    row = pa.struct([("score", pa.int32()), ("name", pa.string()), ("id", pa.int64())])  # any field order: matched by name
    with store.begin(max_parallelism=128) as w:
        w.put_state("long-keyed", fs.ValueStateDescriptor(name="pojo", key_type=pa.int64(), value_type=row),
                    pa.table({"key": pa.array([7, 8], pa.int64()),
                              "value": pa.array([{"score": 3, "name": "x", "id": 70}, {"score": None, "name": None, "id": 80}], row)}))
    assert main(["export", str(tmp_path / "job"), str(tmp_path / "sp"), "--pojo", "long-keyed/pojo=StateGenJob$Pojo"]) == 0
    got = _harness().restore_and_dump(tmp_path / "sp", tmp_path / "dump.txt", "rocksdb", 2)
    assert [line for line in got if line.startswith("long-keyed")] == ["long-keyed pojo 7 Pojo(70,x,3)", "long-keyed pojo 8 Pojo(80,null,null)"]
    assert main(["export", str(tmp_path / "job"), str(tmp_path / "sp2"), "--pojo", "long-keyed/nope=X"]) == 2
    assert not (tmp_path / "sp2").exists()
