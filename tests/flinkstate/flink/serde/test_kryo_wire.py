"""Every Kryo wire form flinkstate reads, against bytes Flink's own KryoSerializer wrote: Flink 1.20.5 (Kryo 2.24) and
2.3.0 (Kryo 5.6), as Flink configures Kryo (references on, its default registrations, the job's registrations).

tests/fixtures/kryo-wire/<line>.jsonl is written by flinkjobs/kryo/KryoWire.java (`make_kryo_fixture.py wire`): each value
with its bytes and its rendering by the JVM that wrote it (class and value of every node, floats as their bits). The
`flink` tier has real Flink read the bytes flinkstate writes: Kryo 2 values re-encoded as Kryo 5 (what a migration to
Flink 2.x writes) and back.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pytest

from flinkstate.flink._io import DataReader
from flinkstate.flink.serde.kryo.decode import KryoDecoder, KryoUndecodable, Node
from flinkstate.flink.serde.kryo.registry import parse_kryo_snapshot
from flinkstate.flink.serde.kryo.schema import parse_class_specs
from flinkstate.flink.serde.kryo.wire import WireError
from flinkstate.flink.serde.kryo.write import KryoEncoder

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "kryo-wire"
GEN = {"1.20": 2, "2.3": 5}
# KryoWire's classes as a user gives them (--kryo-class): fields with their declared types, finality, enum constants
SPECS = [
    "KryoWire$Order=id:String,amount:long,qty:int,price:double,ratio:float,small:short,tiny:byte,letter:char,paid:boolean,"
    "boxed:Long,count:Integer,tags:List<String>,counts:Map<String,Long>,codes:Set<Integer>,color:KryoWire$Color,"
    "line:KryoWire$Line,day:LocalDate,ints:int[],names:String[],any:Object",
    "KryoWire$Line=sku:String,n:long",
    "final KryoWire$Point=x:int,y:int",
    "KryoWire$Special=sku:String,n:long,note:String,at:KryoWire$Point",
    "KryoWire$Deep=byKey:Map<String,List<String>>,rows:List<List<Long>>,lines:List<KryoWire$Line>,"
    "byColor:Map<KryoWire$Color,Long>,names:Set<String>",
    "KryoWire$Item=sku:String,qty:int,price:double,history:List<Long>",
    "KryoWire$Color=enum:RED,GREEN,BLUE",
    "KryoWire$Op=enum:PLUS,MINUS",
]
SCHEMAS = parse_class_specs(SPECS)
# Forms whose bytes flinkstate writes differently but equivalently: Flink writes a second reference to one object as a
# back reference (two uses of a String literal, a list added twice), flinkstate (from columns) the object again; an enum
# constant with a body is written as its enum class, not as the constant's anonymous class.
NOT_BYTE_EQUAL = {"references", "List<Order>", "Deep", "enum with body"}
# Java's List.of/Set.of/Map.of: Kryo 2 writes them but cannot read them back (not even Flink 1.x's own bytes of them)
KRYO2_CANNOT_READ = {"List.of", "List.of one", "Set.of one", "Map.of"}


def render(n: Node) -> Any:
    """A tagged tree as KryoWire.java renders the Java value."""
    if n is None:
        return None
    cls, kind, v = n
    if kind in ("long", "int", "short", "byte", "bool", "string", "date", "sqldate", "sqltime", "localdate", "localtime"):
        return {"c": cls, "v": v}
    if kind == "char":
        return {"c": cls, "v": ord(v)}
    if kind == "float":
        return {"c": cls, "v": struct.unpack(">i", struct.pack(">f", v))[0]}
    if kind == "double":
        return {"c": cls, "v": struct.unpack(">q", struct.pack(">d", v))[0]}
    if kind == "bigint":
        return {"c": cls, "v": str(v)}
    if kind == "bigdec":
        sign, digits, exp = v.as_tuple()
        return {"c": cls, "v": [str(int("".join(map(str, digits))) * (-1 if sign else 1)), -exp]}
    if kind in ("sqltimestamp", "localdatetime", "instant", "duration"):
        return {"c": cls, "v": list(v)}
    if kind == "uuid":
        return {"c": cls, "v": {"mostSigBits": {"c": "java.lang.Long", "v": v[0]}, "leastSigBits": {"c": "java.lang.Long", "v": v[1]}}}
    if kind == "enum":
        return {"c": cls, "v": v[1]}
    if kind in ("list", "set", "array"):
        return {"c": cls, "v": [render(x) for x in v]}
    if kind == "map":
        return {"c": cls, "v": [[render(k), render(x)] for k, x in v]}
    assert kind == "object", kind
    return {"c": cls, "v": {k: render(x) for k, x in v.items()}}


def samples(line: str) -> list[tuple[str, str, bytes, Any, Any]]:
    """(group, name, bytes, expected rendering, the group's registrations) of one Flink line's fixture."""
    out, regs = [], {}
    for text in (FIXTURES / f"{line}.jsonl").read_text(encoding="utf-8").splitlines():
        d = json.loads(text)
        if "snapshot" in d:
            r = DataReader(bytes.fromhex(d["snapshot"]))
            assert r.utf() == "org.apache.flink.api.java.typeutils.runtime.kryo.KryoSerializerSnapshot" and r.i32() == 2
            regs[d["group"]] = parse_kryo_snapshot(bytes(r.buf[r.pos :]), d["group"])
            continue
        out.append((d["group"], d["name"], bytes.fromhex(d["hex"]), d["value"], regs[d["group"]]))
    return out


def decoder(line: str, regs: Any) -> KryoDecoder:
    return KryoDecoder(GEN[line], regs.ids(GEN[line]), SCHEMAS, regs.custom())


@pytest.mark.parametrize("line", ["1.20", "2.3"])
def test_every_form_decodes_as_flink_wrote_it(line: str) -> None:
    got = samples(line)
    kinds = set()
    assert len(got) >= 120
    for group, name, raw, want, regs in got:
        node, end = decoder(line, regs).read(raw)
        assert end == len(raw), (name, end, len(raw))
        assert render(node) == want, name
        kinds.add(node[1] if node else None)
    assert kinds >= {"int", "long", "short", "byte", "char", "bool", "float", "double", "string", "bigint", "bigdec", "date",
                     "sqldate", "sqltimestamp", "localdate", "localtime", "localdatetime", "instant", "duration", "enum",
                     "array", "list", "set", "map", "object", "uuid"}


def test_registrations_follow_the_snapshot() -> None:
    """Group "registered" registers Item, Color and Line: ids 85 (the serializer's type, Object), then 86, 87, 88 and
    Avro's dummy class; group "typed" is a serializer of ArrayList, which then has id 85 (byte 0x57 = 85 + 2)."""
    for line in ("1.20", "2.3"):
        by = {(g, n): (raw, regs) for g, n, raw, _, regs in samples(line)}
        raw, regs = by[("registered", "Item")]
        assert regs.ids(GEN[line])[86] == "KryoWire$Item" and raw[0] == 86 + 2
        raw, regs = by[("typed", "ArrayList<Long>")]
        assert regs.type_class == "java.util.ArrayList" and regs.ids(GEN[line])[85] == "java.util.ArrayList" and raw[0] == 85 + 2
        assert regs.ids(GEN[line])[73] == "java.util.Arrays$ArrayList"
    assert 9 in regs.ids(2) and 9 not in regs.ids(5)  # Kryo 2 registers void


@pytest.mark.parametrize("line", ["1.20", "2.3"])
def test_written_byte_for_byte(line: str) -> None:
    """Re-encoded with the same Kryo, every value gives Flink's own bytes (but the forms of NOT_BYTE_EQUAL, which read
    back as the same value)."""
    for group, name, raw, want, regs in samples(line):
        node, _ = decoder(line, regs).read(raw)
        ours = KryoEncoder(GEN[line], regs.ids(GEN[line]), SCHEMAS).write(node)
        if name in NOT_BYTE_EQUAL:
            assert ours != raw, name
            again, end = decoder(line, regs).read(ours)
            assert end == len(ours) and render(again) == want, name
        else:
            assert ours == raw, name


def test_bad_bytes_are_named() -> None:
    """Bytes that are not the declared form, an unknown registration id, a class without a schema: typed errors."""
    (group, name, raw, _, regs), = [s for s in samples("1.20") if s[1] == "Order 0"]
    with pytest.raises(KryoUndecodable, match="KryoWire\\$Order: no schema"):
        KryoDecoder(2, regs.ids(2), parse_class_specs(None)).read(raw)
    with pytest.raises(KryoUndecodable, match="registration id 130"):
        KryoDecoder(2, regs.ids(2), SCHEMAS).read(bytes([132, 1]))
    with pytest.raises(WireError):
        KryoDecoder(2, regs.ids(2), SCHEMAS).read(raw[: len(raw) // 2])
    wrong = parse_class_specs([s.replace("amount:long", "amount:String") for s in SPECS])
    with pytest.raises((WireError, KryoUndecodable)):
        node, end = KryoDecoder(2, regs.ids(2), wrong).read(raw)
        assert end == len(raw)
    with pytest.raises(KryoUndecodable, match="KryoWire\\$Color.*whether Kryo writes its class"):
        KryoDecoder(2, regs.ids(2), parse_class_specs([s for s in SPECS if s.startswith("KryoWire$Order")])).read(raw)


@pytest.mark.flink
@pytest.mark.slow
@pytest.mark.parametrize(("src", "dst"), [("1.20", "2.3"), ("2.3", "1.20")])
def test_flink_reads_what_flinkstate_writes(src: str, dst: str) -> None:
    """Values Flink `src` wrote, re-encoded for Flink `dst`'s Kryo, are read by `dst`'s own KryoSerializer as the same
    Java values (Flink 1.x cannot read List.of & co. at all, its own bytes of them neither)."""
    from fsc_helpers import flink_harness

    harness = flink_harness()
    lines, want = [], []
    for group, name, raw, value, regs in samples(src):
        node, _ = decoder(src, regs).read(raw)
        lines.append((group, name, KryoEncoder(GEN[dst], regs.ids(GEN[dst]), SCHEMAS).write(node)))
        want.append(value)
    got = harness.kryo_read(lines, dst)
    for (_, name, _), w, out in zip(lines, want, got, strict=True):
        if dst == "1.20" and name in KRYO2_CANNOT_READ:
            assert out.startswith("ERROR: java.lang.UnsupportedOperationException"), (name, out)
            continue
        assert json.loads(out) == w, (name, out)
    if dst == "1.20":  # the same for the bytes Flink 1.20 wrote itself
        own = harness.kryo_read([(g, n, raw) for g, n, raw, _, _ in samples("1.20") if n in KRYO2_CANNOT_READ], "1.20")
        assert own and all(o.startswith("ERROR: java.lang.UnsupportedOperationException") for o in own)
