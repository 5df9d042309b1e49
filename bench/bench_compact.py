"""Compaction of a long delta history: files before/after, compaction time, and read time after/before.

    python bench/bench_compact.py [CHECKPOINTS] [KEYS]     # default 100 checkpoints over 100000 keys

Checkpoint 1 is a full put of KEYS keys in 4 key-group ranges (max parallelism 128); each later
checkpoint is one delta of 1% of the keys (upserts and a few deletes), the history an incremental
job leaves when nothing compacts. Then `store.compact()` (local, one range job per key-group range)
writes one new checkpoint. Reads are `read_state` of the whole state, best of 3.
"""

from __future__ import annotations

import random
import shutil
import sys
import tempfile
import time

import pyarrow as pa

import flinkstate as fs
from benchutil import best

D = fs.ValueStateDescriptor(name="v", key_type=pa.string(), value_type=pa.int64())


def main(checkpoints: int, keys: int) -> None:
    d = tempfile.mkdtemp()
    try:
        rnd = random.Random(0)
        store = fs.open(d)
        t0 = time.perf_counter()
        with store.begin(max_parallelism=128) as w:
            w.put_state("op", D, pa.table({"key": [f"k{i}" for i in range(keys)], "value": pa.array(range(keys), pa.int64())}),
                        ranges=[fs.key_group_range(128, 4, i) for i in range(4)])
        n = max(1, keys // 100)
        for c in range(1, checkpoints):
            ks = [f"k{rnd.randrange(keys)}" for _ in range(n)]
            ks = sorted(set(ks))
            dead = [rnd.random() < 0.1 for _ in ks]
            with store.begin() as w:
                w.put_state("op", D, pa.table({"key": ks, "value": pa.array([None if x else c for x in dead], pa.int64()),
                                               "tombstone": dead}), mode="delta")
        build = time.perf_counter() - t0
        files_before = len(store.files())
        before = store.read_state("op", "v")
        read_before = best(lambda: store.read_state("op", "v"))
        t = time.perf_counter()
        res = store.compact(progress=lambda line: print("  " + line, file=sys.stderr))
        compact_s = time.perf_counter() - t
        files_after = len(store.files())
        after = store.read_state("op", "v")
        assert sorted(before.to_pylist(), key=repr) == sorted(after.to_pylist(), key=repr), "compaction changed a read"
        read_after = best(lambda: store.read_state("op", "v"))
        print(f"history: {checkpoints} checkpoints ({checkpoints - 1} deltas of {n} keys) over {keys} keys, built in {build:.1f} s")
        print(f"files: {files_before} -> {files_after}; compaction {compact_s:.2f} s (checkpoint {res.checkpoint_id}, "
              f"{sum(s.ranges for s in res.steps)} ranges, {sum(s.rows for s in res.steps)} rows)")
        print(f"read_state: {read_before * 1000:.0f} ms before, {read_after * 1000:.0f} ms after; "
              f"ratio after/before {read_after / read_before:.2f}")
    finally:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:]]
    main(args[0] if args else 100, args[1] if len(args) > 1 else 100_000)
