"""Decode throughput of a canonical Flink savepoint (entries/s per keyed operator, one core).

    python flinkjobs/harness.py /tmp/fl 100000 files keys=100000 skeys=50000 rate=50000
    python bench/flink_canonical_decode.py /tmp/fl/files/savepoint
"""

from __future__ import annotations

import sys
import time

from flinkstate.flink import read_keyed_state, read_metadata


def main(path: str) -> None:
    """Print entries, seconds and entries/s for every operator with keyed state."""
    meta = read_metadata(path)
    for op in meta.operators:
        if not any(s.managed_keyed is not None for s in op.subtasks):
            continue
        t = time.perf_counter()
        ks = read_keyed_state(meta, op.label)
        dt = time.perf_counter() - t
        n = sum(t.num_rows for t in [*ks.states.values(), *ks.timers.values()])
        print(f"{op.label}: {n} entries in {dt:.2f} s = {n / dt:,.0f} entries/s")


if __name__ == "__main__":
    main(sys.argv[1])
