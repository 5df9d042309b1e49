"""Benchmark: what the checkpoint after an aborted one uploads (FLINK-24611 reuse).

A backend with N keys completes checkpoint 1, changes 10% of its keys, uploads checkpoint 2
and aborts it (its commit fails), changes 1% more and takes checkpoint 3. With reuse (the
default) checkpoint 3 references checkpoint 2's files and uploads only the 1%; the baseline,
measured in the same invocation, is a backend with `reuse_aborted=False`, which sends the
aborted checkpoint's changes again (the behaviour before the shared-state registry kept them).

    python bench/bench_reuse.py              # 1,000,000 keys
    python bench/bench_reuse.py --keys 200000
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from typing import Any

import pyarrow as pa

import flinkstate
from flinkstate import ValueStateDescriptor
from flinkstate.backend import KeyedStateBackend


def run(n_keys: int, reuse: bool) -> dict[str, Any]:
    """Checkpoint 1, aborted checkpoint 2 (10% changed), checkpoint 3 (1% more): what 3 uploads."""
    root = tempfile.mkdtemp(prefix="bench-reuse-")
    try:
        store = flinkstate.open(root)
        be = KeyedStateBackend(max_parallelism=128, num_buckets=4096, reuse_aborted=reuse)
        v = be.get_state(ValueStateDescriptor(name="v", value_type=pa.int64()))
        keys = [f"user-{i:08d}" for i in range(n_keys)]
        for i, k in enumerate(keys):
            be.set_current_key(k)
            v.update(i)
        be.checkpoint(store, "op").result()
        for k in keys[: n_keys // 10]:
            be.set_current_key(k)
            v.update(-1)
        snap = be.snapshot(2)
        w = store.begin(checkpoint_id=2, base=snap.base_checkpoint_id)
        snap.write(w, "op")
        w.abort()  # the commit failed
        be.notify_checkpoint_aborted(2)
        for k in keys[n_keys // 10 : n_keys // 10 + n_keys // 100]:
            be.set_current_key(k)
            v.update(-2)
        t0 = time.perf_counter()
        info = be.checkpoint(store, "op").result()
        seconds = time.perf_counter() - t0
        new = [e for e in store.files(info.checkpoint_id) if e.created_by_checkpoint_id == info.checkpoint_id]
        return {"reuse": reuse, "rows": sum(e.rows for e in new), "bytes": sum(e.bytes for e in new), "seconds": seconds}
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    """Print the uploaded rows, bytes and time of checkpoint 3 with and without reuse."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", type=int, default=1_000_000)
    args = ap.parse_args(argv)
    ours, base = run(args.keys, True), run(args.keys, False)
    print(f"checkpoint after an aborted one, {args.keys:,} keys (10% changed before the abort, 1% after)")
    print("| backend | rows uploaded | bytes uploaded | seconds |")
    print("|---|---|---|---|")
    for r in (ours, base):
        name = "reuses the aborted upload" if r["reuse"] else "re-sends (reuse_aborted=False)"
        print(f"| {name} | {r['rows']:,} | {r['bytes']:,} | {r['seconds']:.2f} |")
    print(f"bytes saved: {base['bytes'] - ours['bytes']:,} ({1 - ours['bytes'] / base['bytes']:.0%}); "
          f"time ratio {ours['seconds'] / base['seconds']:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
