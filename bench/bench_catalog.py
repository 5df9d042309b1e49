"""Catalog cost as history grows: begin+commit, file listing, one small read, and GC at N checkpoints of history.

    python bench/bench_catalog.py [N ...] [--full-every K] [--retained R]    # default 10 100 1000, K=10, R=3

The history a long-running job leaves: each checkpoint is one small delta put on one state,
every K-th rewrites the state in full (as compaction does: the live file set stays bounded),
and after each checkpoint the job keeps its R newest (`retain(R)`, R=0: keep every checkpoint).
Times are per operation at that history length, best of 3, and the last columns are the ratios
to the first history length (flat: near 1).
"""

from __future__ import annotations

import shutil
import tempfile
import time

import pyarrow as pa

import flinkstate as fs

D = fs.ValueStateDescriptor(name="v", value_type=pa.int64())


FULL_EVERY, RETAINED = 10, 3


def _grow(store: fs.CheckpointStore, upto: int, have: int, retain: bool = True) -> None:
    for i in range(have, upto):
        with store.begin() as w:
            if FULL_EVERY and i % FULL_EVERY == 0:
                w.put_state("op", D, pa.table({"key": [f"k{j}" for j in range(50)], "value": [i] * 50}))
            else:
                w.put_state("op", D, pa.table({"key": [f"k{i % 50}"], "value": [i], "tombstone": [False]}), mode="delta")
        if RETAINED and retain:
            store.retain(RETAINED)


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
                _grow(store, have + 1, have, retain=False)  # the commit alone (retain is its own column)
                have += 1

            rows.append((n, _best(commit), _best(lambda: store.files()), _best(lambda: store.read_state("op", "v")),
                         _best(lambda: store.retain(RETAINED or 10**9))))
        base = rows[0]
        print(f"{'history':>8} {'begin+commit ms':>16} {'files() ms':>11} {'read_state ms':>14} {'retain ms':>10}   ratios to {base[0]}")
        for r in rows:
            print(f"{r[0]:>8} {r[1]*1e3:>16.1f} {r[2]*1e3:>11.1f} {r[3]*1e3:>14.1f} {r[4]*1e3:>10.1f}   "
                  + " ".join(f"{r[i]/base[i]:.2f}" for i in range(1, 5)))
    finally:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sizes", nargs="*", type=int, default=[10, 100, 1000], help="history lengths (checkpoints)")
    ap.add_argument("--full-every", type=int, default=FULL_EVERY, help="every K-th checkpoint rewrites the state in full (0: never)")
    ap.add_argument("--retained", type=int, default=RETAINED, help="checkpoints the job keeps after each one (0: all)")
    a = ap.parse_args()
    FULL_EVERY, RETAINED = a.full_every, a.retained
    main(a.sizes)
