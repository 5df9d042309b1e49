"""Flink savepoint throughput on one core: decode, write from Arrow, `flinkstate import` and `flinkstate export`, in one run.

    python bench/flink_savepoint_export.py [N]      # N long keys: value Long, value Row, list of 3 Longs, map of 2 entries

Also: python bench/flink_savepoint_export.py --rewrite SAVEPOINT (decode + write a real Flink savepoint).
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time

import numpy as np
import pyarrow as pa

from flinkstate.flink import read_keyed_state, read_metadata
from flinkstate.flink.files.canonical import KeyedState
from flinkstate.flink.serde.encode import _COMP_CLS, type_for_arrow
from flinkstate.flink.write.export import load_flink_savepoint
from flinkstate.flink.bridge.importer import import_savepoint
from flinkstate.flink.write.savepoint_writer import OperatorExport, write_savepoint
from flinkstate.flink.serde.serializers import StateMeta, TypeNode
from flinkstate.flink.bridge.store_export import export_savepoint

_VOID = TypeNode("void", "org.apache.flink.runtime.state.VoidNamespaceSerializer$VoidNamespaceSerializerSnapshot")


def synthetic(n: int) -> list[OperatorExport]:
    """One operator with n Long keys and four states (4 + 3 + 2 = 7 entries per key... n*7 entries)."""
    keys = np.arange(n, dtype=np.int64)
    ks = KeyedState(type_for_arrow(pa.int64(), "key"))
    row = pa.struct([("a", pa.int64()), ("b", pa.string())])
    tables = {
        "count": ("VALUE", pa.table({"key": keys, "value": keys * 3})),
        "row": ("VALUE", pa.table({"key": keys, "value": pa.StructArray.from_arrays([pa.array(keys), pa.array([f"s{i}" for i in keys])], fields=list(row))})),
        "list": ("LIST", pa.table({"key": np.repeat(keys, 3), "value": np.arange(3 * n, dtype=np.int64)})),
        "map": ("MAP", pa.table({"key": np.repeat(keys, 2), "user_key": pa.array(["a", "b"] * n), "value": np.arange(2 * n, dtype=np.int64)})),
    }
    for name, (kind, t) in tables.items():
        v = type_for_arrow(t.schema.field("value").type, name)
        if kind == "LIST":
            v = TypeNode("list", _COMP_CLS["list"], (v,))
        if kind == "MAP":
            v = TypeNode("map", _COMP_CLS["map"], (type_for_arrow(pa.string(), name), v))
        ks.meta[name] = StateMeta(name, "KEY_VALUE", {"KEYED_STATE_TYPE": kind}, {"VALUE_SERIALIZER": v, "NAMESPACE_SERIALIZER": _VOID})
        ks.states[name] = t
    return [OperatorExport("bench", 2, 128, ks)]


def measure(ops: list[OperatorExport]) -> None:
    """Print wall and CPU seconds and entries/s (per CPU second) of each step."""
    n = sum(t.num_rows for o in ops if o.keyed for t in [*o.keyed.states.values(), *o.keyed.timers.values()])
    d = tempfile.mkdtemp()
    try:
        def timed(f):  # (wall, cpu) seconds of f()
            t, c = time.perf_counter(), time.process_time()
            f()
            return time.perf_counter() - t, time.process_time() - c

        w = timed(lambda: write_savepoint(f"{d}/sp", ops))
        meta = read_metadata(f"{d}/sp")
        r = timed(lambda: [read_keyed_state(meta, o.uid) for o in ops if o.keyed])
        i = timed(lambda: import_savepoint(f"{d}/sp", f"{d}/root"))
        e = timed(lambda: export_savepoint(f"{d}/root", f"{d}/sp2"))
        print(f"{n:,} entries, entries per CPU second on one thread (ratio to decode):")
        for label, (wall, cpu) in (("decode a Flink savepoint", r), ("write a Flink savepoint from Arrow", w),
                                   ("flinkstate import (decode + Parquet/Delta)", i), ("flinkstate export (read root + write)", e)):
            print(f"  {label:45s} {wall:6.2f} s wall {cpu:6.2f} s CPU  {n / cpu:>12,.0f}/s  {r[1] / cpu:5.2f}x")
    finally:
        shutil.rmtree(d)


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--rewrite":
        measure(load_flink_savepoint(sys.argv[2]))
    else:
        measure(synthetic(int(sys.argv[1]) if len(sys.argv) > 1 else 100_000))
