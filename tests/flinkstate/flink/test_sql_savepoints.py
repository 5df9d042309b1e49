"""Savepoints of Flink SQL jobs (RowData keys and values, the table runtime's serializers) open, list every operator
and state with its serializer class, read (rows as their BinaryRowData bytes, keys in Flink's key groups), import
without a flag and export byte for byte; a serializer snapshot class nobody knows is found by its extent and listed.

Fixtures: tests/fixtures/flink-2.3-sql and flink-1.20-sql (real Flink SQL jobs run from their compiled plan.json,
`make_flink_fixture.py sql`); each cell's stateful operator is found from its plan's node id.
"""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pyarrow as pa
import pytest

import flinkstate as fs
from flinkstate.cli import main
from flinkstate.flink.errors import UnsupportedSerializerError
from flinkstate.flink.bridge.importer import import_savepoint
from flinkstate.flink.bridge.store_export import export_savepoint
from flinkstate.core.keygroups import assign_key_groups
from flinkstate.flink.meta.names import uid_hash

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
SQL = FIXTURES / "flink-2.3-sql"
ROW = "org.apache.flink.table.runtime.typeutils.RowDataSerializer$RowDataSerializerSnapshot"
TTL = "org.apache.flink.runtime.state.ttl.TtlStateFactory$TtlSerializerSnapshot"
BOOL = "org.apache.flink.api.common.typeutils.base.BooleanSerializer$BooleanSerializerSnapshot"
MAP = "org.apache.flink.api.common.typeutils.base.MapSerializerSnapshot"
# query -> (the operator's name as the planner gives it, its transformation's name in the uid "<plan node id>_<name>",
# its keyed states with their kinds and value serializers)
OPERATORS = {
    "agg": ("GroupAggregate", "group-aggregate", {"accState": ("value", ROW)}),
    "agg_ttl": ("GroupAggregate", "group-aggregate", {"accState": ("value", TTL)}),  # table.exec.state.ttl: TTL-wrapped
    "dedup": ("Deduplicate", "deduplicate", {"deduplicate-state": ("value", BOOL)}),  # first row: "seen", not the row
    "dedup_last": ("Deduplicate", "deduplicate", {"deduplicate-state": ("value", ROW)}),
    "join": ("Join", "join", {"left-records": ("map", MAP), "right-records": ("map", MAP)}),
    "window": ("GlobalWindowAggregate", "global-window-aggregate", {"window-aggs": ("value", ROW)}),
    "gwindow": ("GroupWindowAggregate", "group-window-aggregate", {"window-aggs": ("value", ROW)}),
    "topn": ("Rank", "rank", {"data-state-with-append": ("map", MAP)}),
}
# flink-<line>-sql/<cell>: every query on Flink 2.3, four on 1.20 (whose _metadata records no names or uids)
CELLS = sorted(f"{p.parent.name}/{p.name}" for line in ("2.3", "1.20") for p in (FIXTURES / f"flink-{line}-sql").iterdir() if p.is_dir())
READ_CELLS = CELLS  # the legacy group window too: its TimeWindow namespace decodes


def _query(cell: str) -> str:
    return cell.split("/")[1].rsplit("-", 1)[0]


def _stateful(ck: fs.scan.Checkpoint, cell: str) -> str:
    """The stateful operator of the cell's job, found from its compiled plan: uid "<node id>_<transformation>", which
    Flink 2.x records with the name "<Name>[<node id>]" and Flink 1.x only as the hash of that uid (its operator id)."""
    name, transformation, _ = OPERATORS[_query(cell)]
    plan = json.loads((FIXTURES / cell / "plan.json").read_text(encoding="utf-8"))
    (node,) = [n for n in plan["nodes"] if n["type"].rsplit("_", 1)[0] == f"stream-exec-{transformation}"]
    uid = f"{node['id']}_{transformation}"
    if uid in ck.operators:
        assert ck.meta.operator(ck.uids[uid]).name == f"{name}[{node['id']}]"
        return uid
    assert uid_hash(uid) in ck.operators, (uid, list(ck.operators))
    return uid_hash(uid)


@pytest.mark.parametrize("cell", READ_CELLS)
def test_sql_savepoint_opens_lists_serializers_and_reads_every_row(cell: str) -> None:
    name, _, states = OPERATORS[_query(cell)]
    src = fs.open(str(FIXTURES / cell / "savepoint"), sql_rows="bytes")
    ck = src.checkpoint()
    uid = _stateful(ck, cell)
    assert {s: (d.kind, ck.serializers_of(uid, s)[1]) for s, d in ck.operators[uid].keyed_states.items()} == states
    table = ck.inspect.states(uid)
    keyed = table.filter(pa.compute.is_in(table.column("state"), pa.array(list(states))))
    assert set(keyed.column("key_serializer").to_pylist()) == {ROW}
    columns = fs.open(str(FIXTURES / cell / "savepoint"))  # the default: RowData as columns, the same rows in the same key groups
    for state in states:
        t = src.read_state(uid, state)
        assert t.num_rows > 0 and t.schema.field("key").type == pa.binary()
        # a RowData key's key group is Flink's: murmur of BinaryRowData.hashCode() over its bytes
        assert assign_key_groups(t.column("key"), ck.max_parallelism_of(uid)).to_pylist() == t.column("key_group").to_pylist()
        c = columns.read_state(uid, state)
        assert pa.types.is_struct(c.schema.field("key").type) and c.column("key_group").to_pylist() == t.column("key_group").to_pylist()
        # a key looked up by its columns is found in its key group (encoded back to BinaryRowData and hashed as Flink does)
        one = c.column("key")[0].as_py()
        assert columns.read_state(uid, state, keys=[one]).column("key").to_pylist() == [k for k in c.column("key").to_pylist() if k == one]
    out = io.StringIO()
    assert main(["describe", str(FIXTURES / cell / "savepoint")], out=out) == 0
    assert "key serializer RowDataSerializer" in out.getvalue()
    assert f"({name}[" in out.getvalue() or cell.startswith("flink-1.")  # Flink 1.x records no operator names


def test_row_data_snapshot_keeps_the_sql_types_of_its_fields() -> None:
    from flinkstate.flink.bridge.mapping import subtask_states

    ck = fs.open(str(SQL / "agg-hashmap" / "savepoint")).checkpoint()
    op = ck.meta.operator(ck.uids[_stateful(ck, "flink-2.3-sql/agg-hashmap")])
    dec = next(iter(subtask_states(ck.meta, op, next(s for s in op.subtasks if s.managed_keyed)).values()))
    assert dec.key_node.logical == ("VARCHAR(2147483647)",)  # GROUP BY k
    decs = subtask_states(ck.meta, op, next(s for s in op.subtasks if s.managed_keyed))
    acc = decs["accState"].meta.serializers["VALUE_SERIALIZER"]
    assert acc.kind == "rowdata" and acc.logical == ("BIGINT", "INT", "INT", "DOUBLE", "BIGINT")  # COUNT, SUM, MAX, AVG's sum, count


@pytest.mark.parametrize("cell", READ_CELLS)
def test_sql_savepoint_imports_without_a_flag_and_exports_the_same_records(cell: str, tmp_path: Path) -> None:
    sp = FIXTURES / cell / "savepoint"
    report = import_savepoint(sp, tmp_path / "root")
    assert report.as_bytes and all(ROW.rsplit(".", 1)[-1] in v or "RowData" in v for v in report.as_bytes.values())
    dest = export_savepoint(str(tmp_path / "root"), tmp_path / "exported")
    before, after = fs.open(str(sp)).checkpoint(), fs.open(dest).checkpoint()
    for uid, op in before.operators.items():
        for state in op.keyed_states:
            a, b = fs.open(str(sp)).read_state(uid, state), fs.open(dest).read_state(uid, state)
            order = [(c, "ascending") for c in ("key_group", "key", "user_key") if c in a.column_names]
            assert a.sort_by(order).equals(b.sort_by(order)), (uid, state)
        for service in op.timer_services:
            assert fs.open(str(sp)).read_timers(uid, service).equals(fs.open(dest).read_timers(uid, service)), (uid, service)
        assert after.serializers_of(uid, next(iter(op.keyed_states), "")) == before.serializers_of(uid, next(iter(op.keyed_states), ""))


def _rename_class(data: bytes, cls: bytes, new: bytes, after: bytes = b"") -> bytes:
    """data with the first occurrence of class name cls (after `after`) renamed to new (same length: offsets stay)."""
    assert len(cls) == len(new)
    start = data.index(after) if after else 0
    i = data.index(cls, start)
    return data[:i] + new + data[i + len(cls):]


def test_an_unknown_serializer_class_nested_in_a_row_is_found_by_its_extent(tmp_path: Path) -> None:
    """The table runtime's StringData serializer inside the RowData key renamed to a class nobody knows: the header still
    parses (the class's extent is the one with which the rest of it ends where the key groups start)."""
    sp = tmp_path / "sp"
    shutil.copytree(SQL / "agg-hashmap" / "savepoint", sp)
    meta = sp / "_metadata"
    cls = b"org.apache.flink.table.runtime.typeutils.StringDataSerializer$StringDataSerializerSnapshot"
    fake = b"com.example.udf.CustomStringSerializerXXXXXXXXXXXXXXXXXXXXXXX$CustomStringSerializerSnapshot"
    fake = fake[: len(cls)]
    meta.write_bytes(_rename_class(meta.read_bytes(), cls, fake))
    src = fs.open(str(sp))
    uid = _stateful(src.checkpoint(), "flink-2.3-sql/agg-hashmap")
    assert src.read_state(uid, "accState").num_rows == 10


def test_an_unknown_value_serializer_is_listed_and_read_as_bytes_only(tmp_path: Path) -> None:
    """A Long value serializer of one state renamed to an unknown class: that state is listed with the class and reads as
    its bytes (raw_values) or a typed error naming operator, state and class; every other state reads as before."""
    original = FIXTURES / "flink-2.3-canonical" / "files" / "savepoint"
    sp = tmp_path / "sp"
    shutil.copytree(original, sp)
    cls = b"org.apache.flink.api.common.typeutils.base.LongSerializer$LongSerializerSnapshot"
    fake = (b"com.example.udf.SecretLongSerializer$SecretLongSerializerSnapshotXXXXXXXXXXXXXXXXXXXX")[: len(cls)]
    for f in sp.iterdir():  # each long-keyed subtask's header: the value serializer of state 'count'
        if b"\x00\x05count" in f.read_bytes():
            f.write_bytes(_rename_class(f.read_bytes(), cls, fake, b"\x00\x05count"))
    src = fs.open(str(sp))
    ck = src.checkpoint()
    assert ck.serializers_of("long-keyed", "count")[1] == fake.decode()
    with pytest.raises(UnsupportedSerializerError, match=r"operator long-keyed, state 'count'.*com\.example\.udf"):
        src.read_state("long-keyed", "count")
    assert src.read_state("long-keyed", "list").num_rows > 0  # the other states of the operator are not affected
    raw = fs.open(str(sp), raw_values=True).read_state("long-keyed", "count")
    want = fs.open(str(original)).read_state("long-keyed", "count")
    assert [int.from_bytes(v, "big", signed=True) for v in raw.column("value").to_pylist()] == want.column("value").to_pylist()
