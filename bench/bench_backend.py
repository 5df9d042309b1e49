"""Benchmark of the embedded keyed state backend, side by side with what a Python user would pick.

One invocation prints:
1. value and map state operations per second, with and without TTL, against rocksdict
   (an `Rdict` in a temporary directory, TTL through `AccessType.with_ttl`) and a plain dict
   (the limit). Our numbers include `set_current_key` (key-group check) for every operation pair.
2. the synchronous snapshot pause at 100k, 1M and 5M entries (plus 10% as many timers)
   against a naive `copy.deepcopy` of the same dicts (measured at the smallest size,
   extrapolated linearly above it unless --deepcopy-all).
3. incremental (1% of keys changed) against full checkpoint: bytes and time.
4. restore rate (rows/s into a backend) against `pyarrow.parquet.read_table` of the same files.

    python bench/bench_backend.py            # full sizes (about two minutes, ~4 GB RAM at 5M)
    python bench/bench_backend.py --quick    # scaled down
    python bench/bench_backend.py --json     # machine-readable
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

import flinkstate
from flinkstate import MapStateDescriptor, StateTtlConfig, TimerServiceDescriptor, ValueStateDescriptor
from flinkstate.backend import KeyedStateBackend

MAXP = 128
TTL = StateTtlConfig(ttl_ms=3_600_000, incremental_cleanup=None)


def _rate(n_ops: int, seconds: float) -> float:
    return n_ops / seconds if seconds > 0 else float("inf")


# ------------------------------------------------------------------------------------------ 1. ops/sec
def bench_ops(n_keys: int, n_ops: int) -> list[dict[str, Any]]:
    keys = [f"user-{i:08d}" for i in range(n_keys)]
    seq = [keys[random.Random(1).randrange(n_keys)] for _ in range(n_ops)]
    rows = []

    def ours(kind: str, ttl: bool) -> float:
        be = KeyedStateBackend(max_parallelism=MAXP, num_buckets=4096)
        if kind == "value":
            s = be.get_state(ValueStateDescriptor(name="v", value_type=pa.int64(), ttl=TTL if ttl else None))
            for k in keys:  # warm: every key exists
                be.set_current_key(k)
                s.update(0)
            t0 = time.perf_counter()
            for i, k in enumerate(seq):
                be.set_current_key(k)
                s.update(s.value() + i)
            return _rate(2 * n_ops, time.perf_counter() - t0)
        m = be.get_state(MapStateDescriptor(name="m", user_key_type=pa.int64(), user_value_type=pa.int64(), ttl=TTL if ttl else None))
        for k in keys:
            be.set_current_key(k)
            m.put(0, 0)
        t0 = time.perf_counter()
        for i, k in enumerate(seq):
            be.set_current_key(k)
            uk = i & 7
            m.put(uk, (m.get(uk) or 0) + i)
        return _rate(2 * n_ops, time.perf_counter() - t0)

    def rocks(kind: str, ttl: bool) -> float:
        from rocksdict import AccessType, Rdict

        d = tempfile.mkdtemp(prefix="bench-rocks-")
        try:
            db = Rdict(d, access_type=AccessType.with_ttl(3600)) if ttl else Rdict(d)
            if kind == "value":
                for k in keys:
                    db[k] = 0
                t0 = time.perf_counter()
                for i, k in enumerate(seq):
                    db[k] = db[k] + i
                r = _rate(2 * n_ops, time.perf_counter() - t0)
            else:
                for k in keys:
                    db[k + "\x000"] = 0
                t0 = time.perf_counter()
                for i, k in enumerate(seq):
                    mk = f"{k}\x00{i & 7}"
                    db[mk] = (db.get(mk) or 0) + i
                r = _rate(2 * n_ops, time.perf_counter() - t0)
            db.close()
            return r
        finally:
            shutil.rmtree(d, ignore_errors=True)

    def plain(kind: str) -> float:
        if kind == "value":
            d = {k: 0 for k in keys}
            t0 = time.perf_counter()
            for i, k in enumerate(seq):
                d[k] = d[k] + i
            return _rate(2 * n_ops, time.perf_counter() - t0)
        dm: dict[str, dict[int, int]] = {k: {0: 0} for k in keys}
        t0 = time.perf_counter()
        for i, k in enumerate(seq):
            mm = dm[k]
            uk = i & 7
            mm[uk] = (mm.get(uk) or 0) + i
        return _rate(2 * n_ops, time.perf_counter() - t0)

    try:
        import rocksdict  # noqa: F401

        have_rocks = True
    except ImportError:
        have_rocks = False
    for kind in ("value", "map"):
        p = plain(kind)
        for ttl in (False, True):
            o = ours(kind, ttl)
            r = rocks(kind, ttl) if have_rocks else float("nan")
            rows.append({"state": kind, "ttl": ttl, "flinkstate_ops_s": o, "rocksdict_ops_s": r, "dict_ops_s": p,
                         "vs_rocksdict": o / r if r == r else None, "vs_dict": o / p})
    return rows


# ------------------------------------------------------------------------------------------ 2. sync pause
def _filled_backend(n: int) -> KeyedStateBackend:
    be = KeyedStateBackend(max_parallelism=MAXP, num_buckets=4096)
    v = be.get_state(ValueStateDescriptor(name="v", value_type=pa.int64()))
    m = be.get_state(MapStateDescriptor(name="m", user_key_type=pa.int64(), user_value_type=pa.int64()))
    ts = be.timer_service(TimerServiceDescriptor(name="t"))
    vt, mt = v._t, m._t
    half = n // 2
    for i in range(half):  # bulk fill through the tables (same structures the state API writes)
        vt.put(f"user-{i:08d}", i)
    for i in range(n - half):
        mt.put_container(f"user-{i:08d}", {0: i})
    for i in range(n // 10):
        be.set_current_key(f"user-{i:08d}")
        ts.register(i)
    return be


def bench_pause(sizes: list[int], deepcopy_all: bool) -> list[dict[str, Any]]:
    rows = []
    per_entry = None
    for n in sizes:
        be = _filled_backend(n)
        gc.collect()
        pauses = []
        for cid in range(1, 6):
            be.set_current_key("user-00000001")  # a write between snapshots
            be.get_state(ValueStateDescriptor(name="v", value_type=pa.int64())).update(cid)
            t0 = time.perf_counter()
            s = be.snapshot(cid)
            pauses.append(time.perf_counter() - t0)
            s.release()
            be.notify_checkpoint_aborted(cid)
        entries = be.num_entries()
        if per_entry is None or deepcopy_all:
            data = {name: dict(t.items()) for name, t in {**be._tables, **be._timer_tables}.items()}
            t0 = time.perf_counter()
            copy.deepcopy(data)
            dc = time.perf_counter() - t0
            per_entry = dc / entries
            measured = True
            del data
        else:
            dc = per_entry * entries
            measured = False
        rows.append({"entries": entries, "timers": n // 10, "sync_pause_ms_median": sorted(pauses)[len(pauses) // 2] * 1000,
                     "sync_pause_ms_max": max(pauses) * 1000, "deepcopy_ms": dc * 1000, "deepcopy_measured": measured})
        del be
        gc.collect()
    return rows


# ------------------------------------------------------------------------------------------ 3./4. checkpoints and restore
def bench_checkpoints(n_keys: int) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix="bench-ckpt-"))
    try:
        store = flinkstate.open(root)
        be = KeyedStateBackend(max_parallelism=MAXP)
        v = be.get_state(ValueStateDescriptor(name="v", value_type=pa.string(), ttl=TTL))
        m = be.get_state(MapStateDescriptor(name="m", user_key_type=pa.int64(), user_value_type=pa.int64()))
        ts = be.timer_service(TimerServiceDescriptor(name="t"))
        rng = random.Random(5)
        keys = [f"user-{i:08d}" for i in range(n_keys)]
        for i, k in enumerate(keys):
            be.set_current_key(k)
            v.update(f"{rng.getrandbits(64):x}")
            m.put(rng.randrange(1000), i)
            ts.register(i)

        def checkpoint(cid: int, full: bool) -> tuple[float, float, int]:
            t0 = time.perf_counter()
            snap = be.snapshot(cid, full=full)
            t1 = time.perf_counter()
            with store.begin(checkpoint_id=cid, base=snap.base_checkpoint_id, max_parallelism=MAXP) as w:
                snap.write(w, "op")
            be.notify_checkpoint_complete(cid)
            t2 = time.perf_counter()
            new_bytes = sum(f.bytes for f in store.files(cid) if f.created_by_checkpoint_id == cid)
            return t1 - t0, t2 - t1, new_bytes

        full_sync, full_async, full_bytes = checkpoint(1, True)
        for k in rng.sample(keys, n_keys // 100):
            be.set_current_key(k)
            v.update("changed")
            m.put(7, 7)
            ts.register(-1)
        inc_sync, inc_async, inc_bytes = checkpoint(2, False)
        ckpt = {"keys": n_keys, "full_bytes": full_bytes, "full_sync_ms": full_sync * 1000, "full_async_s": full_async,
                "incremental_bytes": inc_bytes, "incremental_sync_ms": inc_sync * 1000, "incremental_async_s": inc_async,
                "bytes_ratio": inc_bytes / full_bytes}
        # restore rate: the full files of checkpoint 1
        rows = sum(f.rows for f in store.files(1))
        t0 = time.perf_counter()
        KeyedStateBackend.restore(store, "op", checkpoint_id=1)
        restore_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        for f in store.files(1):
            pq.read_table(store.io.fs_path(f.path), filesystem=store.io.arrow_fs)
        pq_s = time.perf_counter() - t0
        restore = {"rows": rows, "restore_rows_s": rows / restore_s, "parquet_read_rows_s": rows / pq_s,
                   "restore_s": restore_s, "parquet_read_s": pq_s, "vs_parquet": pq_s / restore_s}
        return {"checkpoints": ckpt, "restore": restore}
    finally:
        shutil.rmtree(root, ignore_errors=True)


# ------------------------------------------------------------------------------------------ report
def _fmt(x: float) -> str:
    if x != x:
        return "n/a"
    if x >= 1e6:
        return f"{x / 1e6:.2f} M"
    if x >= 1e3:
        return f"{x / 1e3:.0f} k"
    return f"{x:.1f}"


def print_report(res: dict[str, Any], out: Any = sys.stdout) -> None:
    w = out.write
    w("\n== 1. state operations per second (set_current_key + read + write per element; higher is better)\n")
    w(f"{'state':<7}{'ttl':<6}{'flinkstate':>12}{'rocksdict':>12}{'dict':>12}{'vs rocksdict':>14}{'vs dict':>9}\n")
    for r in res["ops"]:
        vr = "n/a" if r["vs_rocksdict"] is None else f"{r['vs_rocksdict']:.2f}x"
        w(f"{r['state']:<7}{str(r['ttl']):<6}{_fmt(r['flinkstate_ops_s']):>12}{_fmt(r['rocksdict_ops_s']):>12}"
          f"{_fmt(r['dict_ops_s']):>12}{vr:>14}{r['vs_dict']:>8.2f}x\n")
    w("\n== 2. synchronous snapshot pause (state + timers; goal: flat, < 5 ms)\n")
    w(f"{'entries':>10}{'timers':>9}{'pause median':>14}{'pause max':>11}{'deepcopy':>13}{'':>3}\n")
    for r in res["pause"]:
        dc = f"{r['deepcopy_ms']:.0f} ms"
        w(f"{r['entries']:>10}{r['timers']:>9}{r['sync_pause_ms_median']:>11.3f} ms{r['sync_pause_ms_max']:>8.3f} ms"
          f"{dc:>13}{'' if r['deepcopy_measured'] else ' (extrapolated)'}\n")
    c = res["checkpoints"]
    w(f"\n== 3. incremental (1% of {c['keys']} keys changed) vs full checkpoint (value + map + timers)\n")
    w(f"{'':<13}{'bytes':>12}{'sync':>11}{'async (write+commit)':>22}\n")
    w(f"{'full':<13}{c['full_bytes']:>12}{c['full_sync_ms']:>8.2f} ms{c['full_async_s']:>20.2f} s\n")
    w(f"{'incremental':<13}{c['incremental_bytes']:>12}{c['incremental_sync_ms']:>8.2f} ms{c['incremental_async_s']:>20.2f} s\n")
    w(f"incremental / full bytes: {c['bytes_ratio'] * 100:.2f}% (goal <= 3%)\n")
    r = res["restore"]
    w(f"\n== 4. restore rate ({r['rows']} rows)\n")
    w(f"restore into a backend: {_fmt(r['restore_rows_s'])} rows/s ({r['restore_s']:.2f} s); "
      f"pyarrow.parquet.read_table of the same files: {_fmt(r['parquet_read_rows_s'])} rows/s ({r['parquet_read_s']:.2f} s); "
      f"ratio {r['vs_parquet']:.2f}\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="scaled-down sizes (seconds)")
    ap.add_argument("--json", action="store_true", help="print JSON instead of tables")
    ap.add_argument("--deepcopy-all", action="store_true", help="measure deepcopy at every size (slow)")
    ap.add_argument("--sizes", type=str, default=None, help="comma-separated snapshot sizes (entries)")
    args = ap.parse_args(argv)
    if args.quick:
        sizes, n_keys, n_ops, ck = [10_000, 100_000, 300_000], 20_000, 100_000, 50_000
    else:
        sizes, n_keys, n_ops, ck = [100_000, 1_000_000, 5_000_000], 100_000, 500_000, 200_000
    if args.sizes:
        sizes = [int(x) for x in args.sizes.split(",")]
    t0 = time.perf_counter()
    res: dict[str, Any] = {"python": sys.version.split()[0], "quick": args.quick}
    res["ops"] = bench_ops(n_keys, n_ops)
    res.update(bench_checkpoints(ck))  # before the multi-GB snapshot section (clean heap)
    res["pause"] = bench_pause(sizes, args.deepcopy_all)
    res["seconds"] = time.perf_counter() - t0
    if args.json:
        print(json.dumps(res, indent=2))
    else:
        print_report(res)
        print(f"\n(total {res['seconds']:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
