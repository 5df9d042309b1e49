"""Catalog cost as history grows: begin+commit, file listing, one small read, and GC at N checkpoints of history.

    python bench/bench_catalog.py [N ...]     # default 10 100 1000

Each checkpoint is one small delta put on one state (the history a long-running job leaves);
times are per operation at that history length, best of 3, and the last column is the ratio to
the first history length (flat: near 1).
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time

import pyarrow as pa

import flinkstate as fs

D = fs.ValueStateDescriptor(name="v", value_type=pa.int64())


def _grow(store: fs.CheckpointStore, upto: int, have: int) -> None:
    for i in range(have, upto):
        with store.begin() as w:
            w.put_state("op", D, pa.table({"key": [f"k{i % 50}"], "value": [i], "tombstone": [False]}), mode="delta")


def _best(fn, n: int = 3) -> float:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return min(out)


def main(sizes: list[int]) -> None:
    d = tempfile.mkdtemp()
    try:
        store = fs.open(f"{d}/job")
        with store.begin(max_parallelism=128) as w:
            w.put_state("op", D, pa.table({"key": [f"k{i}" for i in range(50)], "value": list(range(50))}))
        have, rows = 1, []
        for n in sizes:
            _grow(store, n, have)
            have = n

            def commit() -> None:
                nonlocal have
                _grow(store, have + 1, have)
                have += 1

            rows.append((n, _best(commit), _best(lambda: store.files()), _best(lambda: store.read_state("op", "v")),
                         _best(lambda: store.retain(10**9))))
        base = rows[0]
        print(f"{'history':>8} {'begin+commit ms':>16} {'files() ms':>11} {'read_state ms':>14} {'retain ms':>10}   ratios to {base[0]}")
        for r in rows:
            print(f"{r[0]:>8} {r[1]*1e3:>16.1f} {r[2]*1e3:>11.1f} {r[3]*1e3:>14.1f} {r[4]*1e3:>10.1f}   "
                  + " ".join(f"{r[i]/base[i]:.2f}" for i in range(1, 5)))
    finally:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [10, 100, 1000])
