"""Throughput of the table runtime's RowData decoder (entries/s, one core), next to pyarrow reading the same rows.

    python bench/flink_rowdata_decode.py [N]

The rows are real: every BinaryRowData of the SQL fixtures Flink 2.3 wrote (tests/fixtures/flink-2.3-sql: a group
aggregate's accumulators, a deduplication's last rows with strings and a timestamp, a join's records, a Top-N's sort
keys), repeated to N rows (default 1,000,000) per kind. For each kind, in one run: `decode_rows` (BinaryRowData bytes
to typed Arrow columns), `encode_rows` on a tenth of them (the write side, value by value), and pyarrow reading the
decoded rows back from an uncompressed Parquet file. Times are CPU seconds of this process with Arrow on one thread.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

import flinkstate as fs
from flinkstate.flink.bridge.mapping import subtask_states
from flinkstate.flink.serde.rowdata import decode_rows, encode_rows, row_type

SQL = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "flink-2.3-sql"
KINDS = (("agg-hashmap", "accState", "value"), ("dedup_last-hashmap", "deduplicate-state", "value"),
         ("join-hashmap", "left-records", "user_key"), ("topn-hashmap", "data-state-with-append", "user_key"))


def _rows(cell: str, state: str, column: str) -> tuple[pa.Array, object]:
    src = fs.open(str(SQL / cell / "savepoint"), sql_rows="bytes")
    ck = src.checkpoint()
    (uid,) = [u for u, om in ck.operators.items() if state in om.keyed_states]
    op = ck.meta.operator(ck.uids[uid])
    dec = subtask_states(ck.meta, op, next(s for s in op.subtasks if s.managed_keyed))[state]
    value = dec.meta.serializers["VALUE_SERIALIZER"]
    node = value.children[0] if column == "user_key" else value
    return src.read_state(uid, state).column(column).combine_chunks(), row_type(node.sql)


def main(n: int) -> None:
    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)
    print(f"{'rows':<28}{'decode entries/s':>18}{'encode entries/s':>18}{'parquet entries/s':>19}{'decode/parquet':>16}")
    with tempfile.TemporaryDirectory() as tmp:
        for cell, state, column in KINDS:
            base, row = _rows(cell, state, column)
            col = pa.concat_arrays([base] * (n // len(base) + 1)).slice(0, n)
            t0 = time.process_time()
            decoded = decode_rows(col, row, row_kind="any")
            dt = time.process_time() - t0
            few = decoded.slice(0, n // 10)
            t0 = time.process_time()
            encode_rows(few, row)
            et = time.process_time() - t0
            path = f"{tmp}/{cell}.parquet"
            pq.write_table(pa.table({"v": decoded}), path, compression="none")
            t0 = time.process_time()
            pq.read_table(path)
            pt = time.process_time() - t0
            print(f"{cell.split('-')[0] + ' ' + column:<28}{n / dt:>18,.0f}{len(few) / et:>18,.0f}{n / pt:>19,.0f}{dt / pt:>15.1f}x")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000)
