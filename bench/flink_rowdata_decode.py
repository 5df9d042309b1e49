"""Throughput of the table runtime's RowData decoder and encoder (entries/s, one core), next to pyarrow reading the same rows.

    python bench/flink_rowdata_decode.py [N] [--against REV] [--cold]

The rows are real: every BinaryRowData of the SQL fixtures Flink 2.3 wrote (tests/fixtures/flink-2.3-sql: a group
aggregate's accumulators, a deduplication's last rows with strings and a timestamp, a join's records, a Top-N's sort
keys), repeated to N rows (default 1,000,000) per kind. For each kind, in one run: `decode_rows` (BinaryRowData bytes
to typed Arrow columns), `encode_rows` (typed columns back to the same bytes), and pyarrow reading the decoded rows
back from an uncompressed Parquet file. Times are CPU seconds of this process with Arrow on one thread; the numba
kernels are compiled (or loaded from their cache) before timing. --against REV also times the encoder of git revision
REV (the row-by-row encoder before issue 46: bf39b2d) on a tenth of the rows, in this process, and prints the ratio.
--cold prints the first encode of a fresh Python process without numba's cache and with it warm.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

import pyarrow as pa
import pyarrow.parquet as pq

import flinkstate as fs
from flinkstate.flink.bridge.mapping import subtask_states
from flinkstate.flink.serde.rowdata import decode_rows, encode_rows, row_type

ROOT = Path(__file__).resolve().parents[1]
SQL = ROOT / "tests" / "fixtures" / "flink-2.3-sql"
KINDS = (("agg-hashmap", "accState", "value"), ("dedup_last-hashmap", "deduplicate-state", "value"),
         ("join-hashmap", "left-records", "user_key"), ("topn-hashmap", "data-state-with-append", "user_key"))
COLD = """
import time
t = time.perf_counter()
import pyarrow as pa
from flinkstate.flink.serde.rowdata import encode_rows, row_type
from flinkstate.flink.serde.sqltypes import SqlType
row = row_type((SqlType("BIGINT"), SqlType("VARCHAR", length=20), SqlType("TIMESTAMP_WITHOUT_TIME_ZONE", precision=3)))
col = pa.array([{"f0": 1, "f1": "a string of 20 bytes", "f2": 0}], pa.struct([("f0", pa.int64()), ("f1", pa.string()), ("f2", pa.timestamp("ms"))]))
t0 = time.perf_counter()
encode_rows(col, row)
print(f"{time.perf_counter() - t0:.3f} {t0 - t:.3f}")
"""


def _rows(cell: str, state: str, column: str) -> tuple[pa.Array, object]:
    src = fs.open(str(SQL / cell / "savepoint"), sql_rows="bytes")
    ck = src.checkpoint()
    (uid,) = [u for u, om in ck.operators.items() if state in om.keyed_states]
    op = ck.meta.operator(ck.uids[uid])
    dec = subtask_states(ck.meta, op, next(s for s in op.subtasks if s.managed_keyed))[state]
    value = dec.meta.serializers["VALUE_SERIALIZER"]
    node = value.children[0] if column == "user_key" else value
    return src.read_state(uid, state).column(column).combine_chunks(), row_type(node.sql)


def _module_at(rev: str) -> ModuleType:
    """flinkstate.flink.serde.rowdata as it was at git revision rev (its imports from the current tree)."""
    text = subprocess.run(["git", "show", f"{rev}:python/flinkstate/flink/serde/rowdata.py"], cwd=ROOT, check=True,
                          capture_output=True, text=True).stdout
    path = Path(tempfile.mkdtemp()) / f"rowdata_{rev}.py"
    path.write_text(text, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(f"rowdata_{rev}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def cold_start() -> None:
    """The first encode_rows of a fresh process: without numba's cache (compiling), then with it warm."""
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "NUMBA_CACHE_DIR": cache}
        for label in ("without cache", "cache warm"):
            first, imports = subprocess.run([sys.executable, "-c", COLD], env=env, check=True, capture_output=True, text=True).stdout.split()
            print(f"cold start, {label}: first encode_rows {float(first):.3f} s (imports before it {float(imports):.3f} s)")


def main(n: int, against: str | None) -> None:
    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)
    old = _module_at(against) if against else None
    head = f"{'rows':<28}{'decode entries/s':>18}{'encode entries/s':>18}{'parquet entries/s':>19}{'decode/parquet':>16}"
    print(head + (f"{'old encode/s':>14}{'speed-up':>10}" if old else ""))
    with tempfile.TemporaryDirectory() as tmp:
        for cell, state, column in KINDS:
            base, row = _rows(cell, state, column)
            col = pa.concat_arrays([base] * (n // len(base) + 1)).slice(0, n)
            encode_rows(decode_rows(base, row, row_kind="field"), row)  # compiled (or loaded from the cache) before timing
            t0 = time.process_time()
            decoded = decode_rows(col, row, row_kind="field")
            dt = time.process_time() - t0
            t0 = time.process_time()
            encoded = encode_rows(decoded, row)
            et = time.process_time() - t0
            assert encoded.equals(col.cast(pa.binary())), "the encoded rows are not the bytes Flink wrote"
            path = f"{tmp}/{cell}.parquet"
            pq.write_table(pa.table({"v": decoded}), path, compression="none")
            t0 = time.process_time()
            pq.read_table(path)
            pt = time.process_time() - t0
            line = f"{cell.split('-')[0] + ' ' + column:<28}{n / dt:>18,.0f}{n / et:>18,.0f}{n / pt:>19,.0f}{dt / pt:>15.1f}x"
            if old is not None:
                few = decoded.slice(0, n // 10)
                t0 = time.process_time()
                old.encode_rows(few, row)
                ot = time.process_time() - t0
                line += f"{len(few) / ot:>14,.0f}{(ot / len(few)) / (et / n):>9.0f}x"
            print(line)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("n", nargs="?", type=int, default=1_000_000)
    parser.add_argument("--against", help="git revision whose encode_rows to time in the same process")
    parser.add_argument("--cold", action="store_true", help="time the first encode of fresh processes, without and with numba's cache")
    args = parser.parse_args()
    if args.cold:
        cold_start()
    main(args.n, args.against)
