"""Decode throughput of a canonical Flink savepoint (entries/s per keyed operator, one core), next to Parquet.

    python flinkjobs/harness.py /tmp/fl 100000 files keys=100000 skeys=50000 rate=50000
    python bench/flink_canonical_decode.py /tmp/fl/files/savepoint

For each keyed operator: the decode time of all its states and timers, then the time pyarrow
takes to read the same rows back from Parquet files (the decoded tables written uncompressed
and with snappy into a temporary directory), in the same run.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq

from flinkstate.flink import read_keyed_state, read_metadata


def _parquet_read(tables: dict[str, object], tmp: Path, compression: str) -> float:
    """Write every table to Parquet, then time reading them all back."""
    paths = []
    for i, table in enumerate(tables.values()):
        p = tmp / f"{compression}-{i}.parquet"
        pq.write_table(table, p, compression=compression)
        paths.append(p)
    t = time.perf_counter()
    for p in paths:
        pq.read_table(p)
    return time.perf_counter() - t


def main(path: str) -> None:
    """Print entries, seconds and entries/s for every operator with keyed state, decoded and from Parquet."""
    meta = read_metadata(path)
    total_n = 0
    total_dt = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for op in meta.operators:
            if not any(s.managed_keyed is not None for s in op.subtasks):
                continue
            t = time.perf_counter()
            ks = read_keyed_state(meta, op.label)
            dt = time.perf_counter() - t
            tables = {**ks.states, **{"timers/" + k: v for k, v in ks.timers.items()}}
            n = sum(t.num_rows for t in tables.values())
            total_n += n
            total_dt += dt
            print(f"{op.label}: {n} entries decoded in {dt:.2f} s = {n / dt:,.0f} entries/s")
            for codec in ("none", "snappy"):
                pt = _parquet_read(tables, Path(tmp), codec)
                print(f"  pyarrow pq.read_table, same rows ({codec}): {pt:.3f} s = {n / pt:,.0f} entries/s")
    if total_dt:
        print(f"all keyed operators: {total_n} entries in {total_dt:.2f} s = {total_n / total_dt:,.0f} entries/s")


if __name__ == "__main__":
    main(sys.argv[1])
