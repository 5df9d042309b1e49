"""Read a real Flink canonical savepoint: decode entries/s on one core, next to pyarrow on the same rows and real Flink restoring it.

    python flinkjobs/harness.py /tmp/fl 1000000 files keys=1000000 skeys=500000 rate=100000
    taskset -c 1 python bench/flink_savepoint_read.py /tmp/fl/files/savepoint [--restore]

Rows of the table, all in this run:
- decode: every keyed state and timer service of every keyed operator (`read_keyed_state`: the
  numpy-framed decoder), CPU seconds of this process (one thread), so a loaded machine still
  gives one core's figure;
- pyarrow: the decoded tables written to Parquet (uncompressed, snappy), then `pq.read_table` of
  them all, CPU seconds with pyarrow limited to one thread;
- Flink restore (with --restore): RestoreDumpJob (flinkjobs/harness.py) restoring the savepoint on
  the HashMap backend at parallelism 1 and dumping every entry, wall seconds including the JVM start;
- read_state: every keyed state read through `flinkstate.open(path).read_state` (a task per state and
  subtask, TTL visibility, list and map state one row per element), CPU seconds;
- one-key lookup: bytes read through FileIO by `read_state(..., keys=[k])` against the keyed files' size.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute  # noqa: F401  (imported before timing: the decoder uses it)

import flinkstate
from benchutil import parquet_read_seconds
from flinkstate.flink import read_keyed_state, read_metadata
from flinkstate.flink.meta.handles import KeyGroupsHandle

ROOT = Path(__file__).resolve().parents[1]


def _harness():
    spec = importlib.util.spec_from_file_location("flinkjobs_harness", ROOT / "flinkjobs" / "harness.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def decode(path: str) -> tuple[dict[str, pa.Table], float, float]:
    """Every keyed operator's states and timers decoded: (tables, CPU s, wall s)."""
    meta = read_metadata(path)
    tables: dict[str, pa.Table] = {}
    t, w = time.process_time(), time.perf_counter()
    for op in meta.operators:
        if any(s.managed_keyed is not None for s in op.subtasks):
            ks = read_keyed_state(meta, op.label, raw_values=True)  # a Kryo state: its values as bytes
            tables.update({f"{op.label}/{k}": v for k, v in ks.states.items()})
            tables.update({f"{op.label}/timers/{k}": v for k, v in ks.timers.items()})
    return tables, time.process_time() - t, time.perf_counter() - w


def read_states(path: str) -> tuple[int, float]:
    """Every keyed state read through `flinkstate.open(path).read_state` (the scan path Spark and the library use:
    a task per state and subtask, TTL visibility, list/map state flattened): (rows, CPU s)."""
    src = flinkstate.open(path, raw_values=True)
    ck = src.checkpoint()
    t, n = time.process_time(), 0
    for uid, op in ck.operators.items():
        for name in op.keyed_states:
            n += src.read_state(uid, name, include_expired=True).num_rows
    return n, time.process_time() - t


def lookup_bytes(path: str) -> tuple[int, int]:
    """(bytes read by a one-key lookup of long-keyed/count, bytes of long-keyed's keyed files)."""
    src = flinkstate.open(path)
    ck = src.checkpoint()
    op = ck.meta.operator("long-keyed")
    total = sum(s.managed_keyed.stream.size for s in op.subtasks if s.managed_keyed is not None)
    before = src.files.bytes_read
    src.read_state("long-keyed", "count", keys=[7])
    return src.files.bytes_read - before, total


def main() -> None:
    """Print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("savepoint")
    ap.add_argument("--restore", action="store_true", help="also time real Flink restoring the savepoint (RestoreDumpJob)")
    args = ap.parse_args()
    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)
    tables, cpu, wall = decode(args.savepoint)
    n = sum(t.num_rows for t in tables.values())
    rows = [("decode the Flink savepoint (flinkstate read_keyed_state)", cpu, f"{wall:.2f} wall", n)]
    read_n, read_cpu = read_states(args.savepoint)
    rows.append(("every state through flinkstate.open(...).read_state (the scan path)", read_cpu, "CPU", read_n))
    with tempfile.TemporaryDirectory() as tmp:
        for codec in ("none", "snappy"):
            rows.append((f"pyarrow pq.read_table, same rows ({codec})", parquet_read_seconds(tables, Path(tmp), codec), "CPU", n))
        if args.restore:
            w = time.perf_counter()
            lines = _harness().restore_and_dump(Path(args.savepoint), Path(tmp) / "dump.jsonl")
            rows.append((f"real Flink 2.3 restore + dump (RestoreDumpJob, {len(lines):,} lines)", time.perf_counter() - w, "wall", n))
    print(f"{n:,} entries in {len(tables)} states/timer services of {args.savepoint}")
    print("| read | seconds | entries/s | vs decode |")
    print("|---|---|---|---|")
    for name, s, kind, m in rows:
        print(f"| {name} | {s:.2f} ({kind}) | {m / s:,.0f} | {(cpu / n) / (s / m):.2f}x |")
    if any(isinstance(s.managed_keyed, KeyGroupsHandle) for s in read_metadata(args.savepoint).operator("long-keyed").subtasks):
        got, total = lookup_bytes(args.savepoint)
    else:  # RocksDB/ForSt native: no per-key-group offsets, a lookup reads the subtask's SSTs
        sys.stdout.flush()
        return
    print(f"one-key lookup (long-keyed/count, key 7): {got:,} bytes read of {total:,} keyed-file bytes ({got / total:.4%})")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
