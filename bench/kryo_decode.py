"""Throughput of the Kryo reader and writer (values/s, one core), on the values of Flink 1.20's KryoUpgradeJob savepoint.

    python bench/kryo_decode.py [N]

The values are the job's own: every Kryo part of tests/fixtures/kryo-upgrade/1.20-rocksdb (the POJO's Set, Map,
LocalDate, Note and List fields, ValueState<ArrayList<Long>>, the HashMap map values, the Item list elements, the Note
values), each written as Flink 1.20's Kryo 2 writes it (byte for byte: tests/flinkstate/flink/serde/test_kryo_wire.py)
and repeated to N values (default 100,000). Per part: decode (Kryo 2 bytes to tagged trees), to columns (the Python
values of its Arrow type), and the migration's write (Kryo 5 bytes from the columns). CPU seconds of this process.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import flinkstate as fs
from flinkstate.flink.bridge.mapping import subtask_states
from flinkstate.flink.serde.kryo.bind import kryo_paths
from flinkstate.flink.serde.kryo.decode import KryoDecoder
from flinkstate.flink.serde.kryo.registry import parse_kryo_snapshot
from flinkstate.flink.serde.kryo.schema import parse_class_specs
from flinkstate.flink.serde.kryo.shapes import from_plain, to_plain
from flinkstate.flink.serde.kryo.write import KryoEncoder

SAVEPOINT = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "kryo-upgrade" / "1.20-rocksdb" / "savepoint"
CLASSES = ["KryoUpgradeJob$Item=sku:String,qty:int,price:double", "KryoUpgradeJob$Note=text:String,at:long"]
SCHEMAS = parse_class_specs(CLASSES)


def _column(src: Any, state: str, field: str | None) -> list[Any]:
    """A state's values (or one field of them), as read."""
    values = src.read_state("upgrade", state).column("value").to_pylist()
    return [v[field] if v is not None else None for v in values] if field else values


def main(n: int) -> None:
    src = fs.open(str(SAVEPOINT), uids=["upgrade"], kryo_classes=CLASSES)
    meta = src.checkpoint().meta
    op = meta.operator("upgrade")
    first = next(s for s in op.subtasks if s.managed_keyed)
    for name, dec in sorted(subtask_states(meta, op, first).items()):
        value = dec.meta.serializers.get("VALUE_SERIALIZER")
        for path, node in ([] if value is None else kryo_paths(value, "VALUE_SERIALIZER")):
            if node.kind != "kryo" or not node.children:
                continue
            shape, regs = node.children[0], parse_kryo_snapshot(node.payload, "bench")
            field = value.names[int(path.split("/")[1])] if value.kind == "pojo" else None
            enc2, enc5 = KryoEncoder(2, regs.ids(2), SCHEMAS), KryoEncoder(5, regs.ids(5), SCHEMAS)
            raw = [enc2.write(from_plain(v, shape, "bench")) for v in _column(src, name, field) if v is not None]
            raw = (raw * (n // len(raw) + 1))[:n]
            dec2 = KryoDecoder(2, regs.ids(2), SCHEMAS)
            t0 = time.process_time()
            trees = [dec2.read(b)[0] for b in raw]
            t1 = time.process_time()
            cols = [to_plain(t, shape) for t in trees]
            t2 = time.process_time()
            for v in cols:
                enc5.write(from_plain(v, shape, "bench"))
            t3 = time.process_time()
            print(f"{name} {field or path} ({node.names[0]}): {n:,} values, {sum(map(len, raw)) / n:.0f} B each: decode "
                  f"{n / (t1 - t0):,.0f}/s, to columns {n / (t2 - t1):,.0f}/s, Kryo 5 write {n / (t3 - t2):,.0f}/s")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 100_000)
