"""Catalog cost as history grows: begin+commit, file listing, one small read, and GC at N checkpoints of history.

    python bench/bench_catalog.py [N ...] [--full-every K] [--retained R] [--retention S]
    # default 10 100 1000, K=10, R=3, S=0

The history a long-running job leaves: each checkpoint is one small delta put on one state,
every K-th rewrites the state in full (as compaction does: the live file set stays bounded),
and after each checkpoint the job keeps its R newest (`retain(R)`, R=0: keep every checkpoint).
A job running for weeks is older than its tables' retention windows (`delta.logRetentionDuration`,
1 day on flinkstate's tables, and `delta.deletedFileRetentionDuration`, 7 days): the bench sets both
to S seconds so that a run of minutes reaches that steady state (S<0: keep the tables' own).
Times are per operation at that history length, best of 3 (reads: of 7), and the ratios to the first history
length follow (flat: near 1); the last columns are what the catalog holds on disk.
"""

from __future__ import annotations

import os
import shutil
import tempfile

import pyarrow as pa

import flinkstate as fs
from benchutil import best
from flinkstate.format import constants as C
from flinkstate.format.deltamaint import DELETED_FILE_RETENTION_KEY, LOG_RETENTION_KEY

D = fs.ValueStateDescriptor(name="v", value_type=pa.int64())


FULL_EVERY, RETAINED, RETENTION = 10, 3, 0


def _grow(store: fs.CheckpointStore, upto: int, have: int, retain: bool = True) -> None:
    for i in range(have, upto):
        with store.begin() as w:
            if FULL_EVERY and i % FULL_EVERY == 0:
                w.put_state("op", D, pa.table({"key": [f"k{j}" for j in range(50)], "value": [i] * 50}))
            else:
                w.put_state("op", D, pa.table({"key": [f"k{i % 50}"], "value": [i], "tombstone": [False]}), mode="delta")
        if RETAINED and retain:
            store.retain(RETAINED)


def _set_retention(store: fs.CheckpointStore, seconds: int) -> None:
    from deltalake import DeltaTable

    for rel in (C.LOG_TABLE, C.MANIFEST_TABLE):
        DeltaTable(store.io.delta_uri(rel)).alter.set_table_properties(
            {LOG_RETENTION_KEY: f"interval {seconds} seconds", DELETED_FILE_RETENTION_KEY: f"interval {seconds} seconds"})


def _on_disk(store: fs.CheckpointStore) -> tuple[int, int]:
    """(`_delta_log` entries, data files) of both tables."""
    log = data = 0
    for rel in (C.LOG_TABLE, C.MANIFEST_TABLE):
        d = store.io.delta_uri(rel)
        log += len(os.listdir(os.path.join(d, "_delta_log")))
        data += sum(1 for n in os.listdir(d) if n.endswith(".parquet"))
    return log, data


def _manifest_read(store: fs.CheckpointStore) -> None:
    """One checkpoint's manifest rows: the catalog (its own cached Parquet reads) against delta-rs' Arrow dataset."""
    import pyarrow.dataset as ds
    from deltalake import DeltaTable

    r = store.record()
    table = DeltaTable(store.io.delta_uri(C.MANIFEST_TABLE))
    mine = best(lambda: store.catalog.manifest(r.checkpoint_id, r.attempt_id), 20)
    theirs = best(lambda: table.to_pyarrow_dataset().to_table(
        filter=(ds.field("checkpoint_id") == r.checkpoint_id) & (ds.field("attempt_id") == r.attempt_id)).to_pylist(), 20)
    print(f"manifest of one checkpoint: catalog {mine*1e3:.2f} ms, delta-rs to_pyarrow_dataset {theirs*1e3:.2f} ms "
          f"(catalog/dataset {mine/theirs:.2f})")

def main(sizes: list[int]) -> None:
    d = tempfile.mkdtemp()
    try:
        store = fs.open(f"{d}/job")
        with store.begin(max_parallelism=128) as w:
            w.put_state("op", D, pa.table({"key": [f"k{i}" for i in range(50)], "value": list(range(50))}))
        if RETENTION >= 0:
            _set_retention(store, RETENTION)
        have, rows = 1, []
        for n in sizes:
            _grow(store, n, have)
            have = n

            def commit() -> None:
                nonlocal have
                _grow(store, have + 1, have, retain=False)  # the commit alone (retain is its own column)
                have += 1

            rows.append((n, best(commit), best(lambda: store.files(), 7), best(lambda: store.read_state("op", "v"), 7),
                         best(lambda: store.retain(RETAINED or 10**9)), *_on_disk(store)))
        base = rows[0]
        print(f"{'history':>8} {'begin+commit ms':>16} {'files() ms':>11} {'read_state ms':>14} {'retain ms':>10}   "
              f"{'ratios to ' + str(base[0]):<24} {'_delta_log':>10} {'data files':>10}")
        for r in rows:
            print(f"{r[0]:>8} {r[1]*1e3:>16.1f} {r[2]*1e3:>11.1f} {r[3]*1e3:>14.1f} {r[4]*1e3:>10.1f}   "
                  + f"{' '.join(f'{r[i]/base[i]:.2f}' for i in range(1, 5)):<24} {r[5]:>10} {r[6]:>10}")
        _manifest_read(store)

    finally:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sizes", nargs="*", type=int, default=[10, 100, 1000], help="history lengths (checkpoints)")
    ap.add_argument("--full-every", type=int, default=FULL_EVERY, help="every K-th checkpoint rewrites the state in full (0: never)")
    ap.add_argument("--retained", type=int, default=RETAINED, help="checkpoints the job keeps after each one (0: all)")
    ap.add_argument("--retention", type=int, default=RETENTION,
                    help="seconds of log and removed-file retention on both tables (<0: the tables' own)")
    a = ap.parse_args()
    FULL_EVERY, RETAINED, RETENTION = a.full_every, a.retained, a.retention
    main(a.sizes)
