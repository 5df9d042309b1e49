"""Decode throughput of a canonical Flink savepoint (entries/s per keyed operator, one core), next to Parquet.

    python flinkjobs/harness.py /tmp/fl 100000 files keys=100000 skeys=50000 rate=50000
    python bench/flink_canonical_decode.py /tmp/fl/files/savepoint

The same command times the other formats too: the harness variants `native` (HashMap NATIVE
savepoint), `rocksdb` (RocksDB NATIVE savepoint) and the `*checkpoint` variants' chk-N directories.

For each keyed operator: the decode time of all its states and timers, then the time pyarrow
takes to read the same rows back from Parquet files (the decoded tables written uncompressed
and with snappy into a temporary directory), in the same run. Times are CPU seconds of this
process (one thread: the decoder is single-threaded; pyarrow is limited to one thread here), so
that a machine shared with other work still gives one core's figure; wall seconds are shown too.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute  # noqa: F401  (imported before timing: the decoder uses it)

from benchutil import parquet_read_seconds
from flinkstate.flink import read_keyed_state, read_metadata


def main(path: str) -> None:
    """Print entries, seconds and entries/s for every operator with keyed state, decoded and from Parquet."""
    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)
    meta = read_metadata(path)
    total_n = 0
    total_dt = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for op in meta.operators:
            if not any(s.managed_keyed is not None for s in op.subtasks):
                continue
            t, wall = time.process_time(), time.perf_counter()
            ks = read_keyed_state(meta, op.label)
            dt, wall = time.process_time() - t, time.perf_counter() - wall
            tables = {**ks.states, **{"timers/" + k: v for k, v in ks.timers.items()}}
            n = sum(t.num_rows for t in tables.values())
            total_n += n
            total_dt += dt
            print(f"{op.label}: {n} entries decoded in {dt:.2f} s CPU ({wall:.2f} s wall) = {n / dt:,.0f} entries/s")
            for codec in ("none", "snappy"):
                pt = parquet_read_seconds(tables, Path(tmp), codec)
                print(f"  pyarrow pq.read_table, same rows ({codec}): {pt:.3f} s = {n / pt:,.0f} entries/s")
    if total_dt:
        print(f"all keyed operators: {total_n} entries in {total_dt:.2f} s = {total_n / total_dt:,.0f} entries/s")


if __name__ == "__main__":
    main(sys.argv[1])
