"""Benchmark: read-path overhead of the integrity checks (goal: under 5% of a full read).

A read of every file of one keyed state (full files in several key-group ranges plus deltas) through
`read_data_file`, the one file reader the scan path uses, with the checks (`verify=True`: the file fetched whole, size, crc32 checksum,
footer identity, row count, column types, key-group range) and without them (`verify=False`:
the reader as it was before, a Parquet dataset scan checking format version and row count),
timed alternately in the same process, best of `--repeat`. Also times the per-read check of
the Delta table files (one listing per table read) against a whole `store.read_state`.

Usage: python bench/bench_verify.py [--rows N] [--files F] [--deltas D] [--repeat R] [--path DIR] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from typing import Callable

try:
    import flinkstate  # noqa: F401
except ImportError:  # running from a source checkout without installing
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "python"))

import numpy as np
import pyarrow as pa

import flinkstate as fs
from flinkstate.format import constants as C
from flinkstate.format.checks import bytes_problems, footer_problems, key_group_problems
from flinkstate.format.datafile import _PARQUET, read_data_file
from flinkstate.format.deltacheck import check_table_files

GOAL_OVERHEAD = 0.05
MAX_PARALLELISM = 128
DESC = fs.ValueStateDescriptor(name="count", value_type=pa.int64(), ttl=fs.StateTtlConfig(ttl_ms=3_600_000))


def build(root: str, rows: int, files: int, deltas: int, seed: int) -> fs.CheckpointStore:
    """A store whose latest checkpoint has `files` full files and `deltas` delta files of one state."""
    rng = np.random.default_rng(seed)
    store = fs.open(root)
    keys = pa.array([f"user-{i}" for i in range(rows)])
    ranges = [(i * MAX_PARALLELISM // files, (i + 1) * MAX_PARALLELISM // files - 1) for i in range(files)]
    with store.begin(max_parallelism=MAX_PARALLELISM) as w:
        w.put_state("op", DESC, pa.table({"key": keys, "value": rng.integers(0, 1 << 40, rows), "ttl_timestamp": rng.integers(0, 1 << 40, rows)}),
                    ranges=ranges)
    for _ in range(deltas):
        n = max(1, rows // 20)
        idx = rng.integers(0, rows, n)
        with store.begin() as w:
            w.put_state("op", DESC, pa.table({"key": keys.take(pa.array(idx)), "value": rng.integers(0, 1 << 40, n),
                                              "ttl_timestamp": rng.integers(0, 1 << 40, n), "tombstone": rng.random(n) < 0.1}), mode="delta")
    return store


def _time(fn: Callable[[], object]) -> float:
    """Seconds one call takes."""
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def run(rows: int, files: int, deltas: int, repeat: int, path: str | None, seed: int) -> dict:
    """Build the store, then time both reads alternately (best of `repeat`) and the Delta table file check."""
    root = path or tempfile.mkdtemp(prefix="flinkstate-bench-verify-")
    try:
        store = build(root, rows, files, deltas, seed)
        r = store.record()
        entries = store.state_files("op", "count")

        def read(verify: bool) -> pa.Table:
            return pa.concat_tables([read_data_file(store.io, e, descriptor=DESC, verify=verify, max_parallelism=r.max_parallelism)
                                     for e in entries], promote_options="default")

        assert read(True).equals(read(False)), "the checked and unchecked reads disagree"
        on, off = float("inf"), float("inf")
        for _ in range(repeat):  # alternate, so both see the same cache and machine load
            off = min(off, _time(lambda: read(False)))
            on = min(on, _time(lambda: read(True)))
        whole = min(_time(lambda: store.read_state("op", "count")) for _ in range(repeat))

        def table_check() -> None:
            for rel in (C.LOG_TABLE, C.MANIFEST_TABLE):
                t = store.catalog._table(rel)
                a = pa.table(t.get_add_actions(flatten=True))
                check_table_files(store.io, rel, a.column("path").to_pylist(), a.column("size_bytes").to_pylist())

        delta_check = min(_time(table_check) for _ in range(repeat))
        blobs = [(e, store.io.fs.cat_file(store.io.fs_path(e.path))) for e in entries]

        def checks_alone() -> None:  # the checks on bytes already fetched: checksum, footer, key-group range
            for e, data in blobs:
                bytes_problems(e, data)
                frag = _PARQUET.make_fragment(pa.BufferReader(data))
                footer_problems(e, frag.physical_schema, frag.metadata.num_rows, DESC)
                key_group_problems(e, frag.to_table(columns=[C.COL_KEY_GROUP]))

        checks = min(_time(checks_alone) for _ in range(repeat))
        return {
            "rows": rows, "files": len(entries), "bytes": sum(e.bytes for e in entries), "repeat": repeat,
            "read_unchecked_s": off, "read_checked_s": on, "data_file_overhead": on / off - 1,
            "checks_alone_s": checks, "checks_alone_share": checks / on,
            "read_state_s": whole, "delta_table_check_s": delta_check, "delta_table_check_share": delta_check / whole,
            "goal_overhead": GOAL_OVERHEAD, "python": platform.python_version(), "machine": platform.machine(),
        }
    finally:
        if path is None:
            shutil.rmtree(root, ignore_errors=True)


def main() -> int:
    """Parse arguments, run, print a summary (or JSON)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--files", type=int, default=8, help="full files (key-group ranges)")
    p.add_argument("--deltas", type=int, default=2, help="delta checkpoints on top")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--path", default=None, help="where to build the store (default: a temporary folder, removed after)")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    res = run(a.rows, a.files, a.deltas, a.repeat, a.path, a.seed)
    if a.json:
        print(json.dumps(res, indent=2))
        return 0
    print(f"{res['rows']:,} rows in {res['files']} files ({res['bytes'] / 2**20:.1f} MiB), best of {res['repeat']}")
    print(f"  full read without checks : {res['read_unchecked_s'] * 1000:8.1f} ms")
    print(f"  full read with checks    : {res['read_checked_s'] * 1000:8.1f} ms")
    print(f"  ratio checked/unchecked  : {res['read_checked_s'] / res['read_unchecked_s']:.3f} "
          f"(overhead {res['data_file_overhead'] * 100:+.1f}%, goal < {GOAL_OVERHEAD * 100:.0f}%)")
    print(f"  the checks alone         : {res['checks_alone_s'] * 1000:8.1f} ms ({res['checks_alone_share'] * 100:.1f}% of the checked read; "
          f"includes decoding the key_group column once more)")
    print(f"  Delta table file check   : {res['delta_table_check_s'] * 1000:8.2f} ms of a {res['read_state_s'] * 1000:.1f} ms "
          f"read_state ({res['delta_table_check_share'] * 100:.2f}%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
