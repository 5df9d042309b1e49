"""A production-size savepoint real Flink writes (>= 10 M entries), read, imported and exported, all in one run.

    python bench/flink_large_savepoint.py [--keys 300000] [--kinds files,rocksdb] [--restore] [--spark] [--savepoint KIND=PATH]

The savepoints are written once by real Flink 2.3 and cached in ~/.cache/flinkstate/bench/large-<keys>/<kind>/savepoint:
`files` by StateGenJob's records (Long and String keys, value, list, map, TTL, Kryo, POJO, window and timer state;
300,000 keys give about 10.6 M entries), `rocksdb` by the same job restoring that canonical savepoint on RocksDB and
taking a NATIVE savepoint at once, with no new record (harness.resave: the same state, in minutes rather than the
hour and more RocksDB takes record by record). Each row runs in its own process (spawned), so its
peak RSS is that step's own; times are CPU seconds of that process (one core's work on a shared machine),
with pyarrow limited to one thread. Rows, per savepoint kind (canonical `files`, RocksDB native `rocksdb`):
- decode: `read_keyed_state` of every keyed operator;
- read_state: every keyed state through `flinkstate.open(...)` (the scan path the library and Spark use);
- pyarrow: `pq.read_table` of the same rows from uncompressed Parquet (the baseline);
- import / export: `flinkstate import` into a new root, and `flinkstate export` of that root (canonical);
- with --restore: real Flink restoring the savepoint (RestoreDumpJob, wall seconds, JVM start included);
- with --spark: `groupBy().sum("value")` of string-keyed/map (150,000 rows) and long-keyed/list (800,000) read in
  place by `format("flinkstate")` against the same over `spark.read.parquet` of their rows, over a Python data source
  whose read is `pq.read_table` of those rows (Spark's own cost of a Python source's batches), and (canonical) over the
  imported root by `pyspark_flinkstate.table` (Spark's own Parquet reader; wall, best of 4 after a first run, local[1]);
  and every keyed state read whole in place, imported by `table`, and over Parquet of the same rows (local[2]).
"""

from __future__ import annotations

import argparse
import importlib.util
import multiprocessing as mp
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("FLINKSTATE_BENCH_CACHE", Path.home() / ".cache" / "flinkstate" / "bench"))


def _harness() -> Any:
    spec = importlib.util.spec_from_file_location("flinkjobs_harness", ROOT / "flinkjobs" / "harness.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def savepoint(kind: str, keys: int) -> Path:
    """The cached savepoint of this kind, written by real Flink the first time: `files` (canonical) by StateGenJob's
    records (minutes on a 2-core machine), `rocksdb` (a NATIVE savepoint of incremental RocksDB; `rocksdb-full` of
    non-incremental) by Flink restoring the canonical one on RocksDB and saving it at once (`resave`: generating it record
    by record takes over an hour)."""
    out = CACHE / f"large-{keys}"
    sp = out / kind / "savepoint"
    if not (sp / "_metadata").exists():
        if kind.startswith("rocksdb"):
            resave(kind, keys)
        else:
            print(f"writing a {kind} savepoint of {keys:,} keys with real Flink into {out} (once) ...", flush=True)
            _harness().run_job(out, 8 * keys // 3, (kind,), timeout=3600,
                               props={"keys": keys, "skeys": keys // 2, "rate": 200_000})
    return sp


def resave(kind: str, keys: int) -> None:
    """Real Flink 2.3 restores the canonical savepoint on RocksDB and takes a NATIVE savepoint of it right away (the same
    state) as StateGenJob's variant `kind`; its wall seconds (JVM start included) are kept beside it in resave.txt."""
    src = savepoint("files", keys)
    out = CACHE / f"large-{keys}"
    print(f"writing a {kind} savepoint of {keys:,} keys with real Flink (restore {src} on RocksDB, NATIVE savepoint) ...",
          flush=True)
    w = time.perf_counter()
    (sp,) = _harness().resave(src, out, (kind,), timeout=3600).values()
    took = time.perf_counter() - w
    (sp.parent / "resave.txt").write_text(f"{took:.1f}\n")
    print(f"real Flink 2.3 wrote {sp} in {took:.1f} s (restore + savepoint, wall, JVM start included)", flush=True)


def resave_seconds(sp: str) -> str:
    """How long real Flink took to write a resaved savepoint (its resave.txt), or '' for any other."""
    f = Path(sp).parent / "resave.txt"
    return f"; real Flink 2.3 wrote it from the canonical one in {float(f.read_text()):.0f} s" if f.exists() else ""


# ---------------------------------------------------------------- steps, each in its own process


def _one_thread() -> None:
    import pyarrow as pa

    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)


def step_decode(path: str, parquet_dir: str | None = None) -> int:
    """Every keyed operator decoded; with parquet_dir, the tables written there (uncompressed) for the baseline (untimed)."""
    import pyarrow.parquet as pq

    from flinkstate.flink import read_keyed_state, read_metadata

    meta = read_metadata(path)
    n = 0
    for op in meta.operators:
        if any(s.managed_keyed is not None for s in op.subtasks):
            ks = read_keyed_state(meta, op.label, raw_values=True)
            for i, t in enumerate([*ks.states.values(), *ks.timers.values()]):
                n += t.num_rows
                if parquet_dir is not None:
                    pq.write_table(t, os.path.join(parquet_dir, f"{op.label}-{i}.parquet"), compression="none")
    return n


def step_read_state(path: str) -> int:
    import flinkstate

    src = flinkstate.open(path, raw_values=True)
    ck = src.checkpoint()
    return sum(src.read_state(uid, name, include_expired=True).num_rows for uid, op in ck.operators.items() for name in op.keyed_states)


def step_parquet(parquet_dir: str) -> int:
    import pyarrow.parquet as pq

    return sum(pq.read_table(os.path.join(parquet_dir, f)).num_rows for f in sorted(os.listdir(parquet_dir)))


def step_parquet_write(parquet_dir: str, dest: str) -> tuple[int, float]:
    """pyarrow writing the decoded rows to Parquet with zstd, as import writes its data files: (rows, CPU s of the
    writes alone; reading them back from parquet_dir first is not counted)."""
    import pyarrow.parquet as pq

    tables = [pq.read_table(os.path.join(parquet_dir, f)) for f in sorted(os.listdir(parquet_dir))]
    os.makedirs(dest, exist_ok=True)
    t = time.process_time()
    for i, table in enumerate(tables):
        pq.write_table(table, os.path.join(dest, f"{i}.parquet"), compression="zstd")
    return sum(t.num_rows for t in tables), time.process_time() - t


def step_import(path: str, root: str) -> int:
    from flinkstate.flink.bridge.importer import import_savepoint

    return import_savepoint(path, root).total


def step_export(root: str, dest: str, entries: int) -> int:
    from flinkstate.flink.bridge.store_export import export_savepoint

    export_savepoint(root, dest)
    return entries  # what the import wrote


def _again_args(fn: str, args: tuple[Any, ...]) -> tuple[Any, ...]:
    """The arguments of a step's second run in the same process: import and export write to a destination of their own."""
    if fn == "step_import":
        return (args[0], args[1] + "-again")
    if fn == "step_export":
        return (args[0], args[1] + "-again", args[2])
    if fn == "step_parquet_write":
        return (args[0], args[1] + "-again")
    return args


def _child(q: Any, fn: str, args: tuple[Any, ...], again: bool) -> None:
    _one_thread()
    t = time.process_time()
    w = time.perf_counter()
    n = globals()[fn](*args)  # a step returning (n, seconds) times itself
    first = (*n, time.perf_counter() - w, _peak_rss()) if isinstance(n, tuple) else (n, time.process_time() - t, time.perf_counter() - w, _peak_rss())
    second = 0.0
    if again:  # the steady state: the same work once imports, lazy imports and first-call setup are paid
        t = time.process_time()
        m = globals()[fn](*_again_args(fn, args))
        second = m[1] if isinstance(m, tuple) else time.process_time() - t
    q.put((*first, second))


def _peak_rss() -> int:
    """This process's peak RSS in bytes: VmHWM, which belongs to its own memory map (ru_maxrss survives exec, so a
    spawned child would report its parent's peak when that was higher, as after the Spark rows of another kind)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def run(fn: str, *args: Any, again: bool = True) -> tuple[int, float, float, int, float]:
    """(entries, CPU s, wall s, peak RSS bytes, CPU s of a second run in the same process) of one step in a fresh process.

    The first run pays the process's imports (0.5-0.8 s, more where bytecode is not cached), the second does not: a
    savepoint of 10^8 entries and more pays them once, so the second is the per-core rate at production size."""
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=_child, args=(q, fn, args, again))
    p.start()
    out = q.get()
    p.join()
    return out


def best_of(repeat: int, fn: str, *args: Any) -> tuple[int, float, float, int, float]:
    """`run` repeat times, each in a fresh process (import and export each to a destination of its own): the least CPU
    seconds of the first and of the second run, the least wall, the highest peak RSS. On a shared host, where a run's
    time moves by up to 30%, the minimum is the figure least disturbed by other work."""
    out = []
    for i in range(repeat):
        a = args if i == 0 or fn not in ("step_import", "step_export") else (args[0], f"{args[1]}-{i}", *args[2:])
        out.append(run(fn, *a))
    return (out[0][0], min(o[1] for o in out), min(o[2] for o in out), max(o[3] for o in out), min(o[4] for o in out))


# ---------------------------------------------------------------- Spark


AGG_STATES = (("string-keyed", "map"), ("long-keyed", "list"))  # 150,000 and 800,000 rows of the 300,000-key savepoint


def _floor_source(pq_path: str, ddl: str, parts: int) -> Any:
    """A Python data source whose read is `pq.read_table` of the same rows, cut into as many partitions as flinkstate's read:
    what Spark's intake of a Python source's Arrow batches costs by itself (it turns them into rows)."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    class _Reader(DataSourceReader):
        def partitions(self) -> list[InputPartition]:
            return [InputPartition(i) for i in range(parts)]

        def read(self, partition: InputPartition) -> Any:
            import pyarrow.parquet as pq

            t = pq.read_table(pq_path)
            step = -(-t.num_rows // parts)
            yield from t.slice(partition.value * step, step).to_batches(max_chunksize=131072)

    class _Floor(DataSource):
        @classmethod
        def name(cls) -> str:
            return "bench_parquet_rows"

        def schema(self) -> str:
            return ddl

        def reader(self, schema: Any) -> Any:
            return _Reader()

    return _Floor


def spark_agg(path: str, parquet_dir: str, root: str | None = None) -> list[tuple[str, int, float, float, float, float | None]]:
    """Per state of AGG_STATES: (operator/state, rows, in place, Python-source floor, over Parquet, imported) wall seconds, best
    of 4, of groupBy().sum("value") read in place by format("flinkstate"), by `_floor_source`, by `spark.read.parquet`, and
    with root (the savepoint imported there) by `pyspark_flinkstate.table` on it (Spark's own Parquet reader)."""
    import pyarrow.parquet as pq
    from pyspark.sql import SparkSession
    from pyspark.sql.pandas.types import to_arrow_schema

    import flinkstate

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # Spark's Python workers: this interpreter
    spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()

    def best(df: Any) -> float:
        out = []
        for _ in range(5):  # the first warms Spark's Python workers and the JIT: dropped
            t = time.perf_counter()
            df.groupBy().sum("value").collect()
            out.append(time.perf_counter() - t)
        return min(out[1:])

    try:
        out = []
        for operator, state in AGG_STATES:
            df = spark.read.format("flinkstate").options(operator=operator, state=state).load(path)
            table = flinkstate.open(path).read_state(operator, state).select(df.columns).cast(pa_nullable(to_arrow_schema(df.schema)))
            pq_path = os.path.join(parquet_dir, f"agg-{operator}-{state}.parquet")
            pq.write_table(table, pq_path)  # the types Spark takes from a Python source, so the floor reads them as they are
            parts = df.rdd.getNumPartitions()
            ddl = ", ".join(f"`{f.name}` {f.dataType.simpleString()}" for f in df.schema.fields)
            spark.dataSource.register(_floor_source(pq_path, ddl, parts))
            imported = None
            if root is not None:
                import pyspark_flinkstate

                native = pyspark_flinkstate.table(spark, root, operator, state)
                assert native.schema == df.schema
                imported = best(native)
            out.append((f"{operator}/{state}", table.num_rows, best(df), best(spark.read.format("bench_parquet_rows").load()),
                        best(spark.read.parquet(pq_path)), imported))
        return out
    finally:
        spark.stop()


def spark_every_state(path: str, root: str, parquet_dir: str, repeat: int = 3) -> tuple[int, int, float, float, float]:
    """Every keyed state of the savepoint through Spark (local[2]), each read whole: `agg(max(xxhash64(every column)))`,
    the least wall seconds of `repeat` runs after a first, summed over the states: (states, rows, in place by
    format("flinkstate"), imported by pyspark_flinkstate.table on root, spark.read.parquet of the same rows)."""
    import pyarrow.parquet as pq
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import to_arrow_schema

    import flinkstate
    import pyspark_flinkstate

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false").getOrCreate()
    pyspark_flinkstate.register(spark)

    def best(df: Any) -> float:
        out = []
        for _ in range(repeat + 1):
            t = time.perf_counter()
            # a new query each run: collecting one DataFrame again reuses its materialized shuffle (AQE), not a read
            df.agg(F.max(F.xxhash64(*[F.col(f"`{c}`") for c in df.columns]))).collect()
            out.append(time.perf_counter() - t)
        return min(out[1:])

    src = flinkstate.open(path, raw_values=True)
    ck = src.checkpoint()
    totals = [0, 0, 0.0, 0.0, 0.0]
    try:
        for uid in sorted(ck.operators):
            for name in sorted(ck.operators[uid].keyed_states):
                in_place = spark.read.format("flinkstate").options(operator=uid, state=name, rawValues="true").load(path)
                imported = pyspark_flinkstate.table(spark, root, uid, name)
                assert imported.schema == in_place.schema, (uid, name)
                rows = src.read_state(uid, name).select(in_place.columns).cast(pa_nullable(to_arrow_schema(in_place.schema, timezone="UTC")))
                pq_path = os.path.join(parquet_dir, f"every-{uid}-{name}.parquet")
                pq.write_table(rows, pq_path)
                totals[0] += 1
                totals[1] += rows.num_rows
                each = (best(in_place), best(imported), best(spark.read.parquet(pq_path)))
                print(f"  {uid}/{name}: {rows.num_rows:,} rows, in place {each[0]:.3f} s, imported {each[1]:.3f} s, "
                      f"Parquet {each[2]:.3f} s", flush=True)
                totals[2] += each[0]
                totals[3] += each[1]
                totals[4] += each[2]
        return (totals[0], totals[1], totals[2], totals[3], totals[4])  # type: ignore[return-value]
    finally:
        spark.stop()


def pa_nullable(schema: Any) -> Any:
    """The schema with every field nullable (the floor source declares its columns nullable)."""
    import pyarrow as pa

    return pa.schema([f.with_nullable(True) for f in schema])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", type=int, default=300_000)
    ap.add_argument("--kinds", default="files,rocksdb")
    ap.add_argument("--restore", action="store_true")
    ap.add_argument("--spark", action="store_true")
    ap.add_argument("--repeat", type=int, default=1, help="run each step this many times (fresh processes) and print the least CPU")
    ap.add_argument("--savepoint", action="append", default=[], metavar="KIND=PATH",
                    help="a savepoint of this kind already written (e.g. rocksdb=/tmp/flr/rocksdb/savepoint) instead of the cached one")
    args = ap.parse_args()
    given = dict(s.split("=", 1) for s in args.savepoint)
    for kind in args.kinds.split(","):
        sp = given.get(kind) or str(savepoint(kind, args.keys))
        size = sum(f.stat().st_size for f in Path(sp).iterdir())
        tmp = tempfile.mkdtemp(prefix="fsbench-")
        try:
            pq_dir = os.path.join(tmp, "parquet")
            os.makedirs(pq_dir)
            run("step_decode", sp, pq_dir, again=False)  # the baseline's files
            r = args.repeat
            rows = [("decode (read_keyed_state, every operator)", best_of(r, "step_decode", sp))]
            n = rows[0][1][0]
            rows.append(("read_state, every state (the scan path)", best_of(r, "step_read_state", sp)))
            rows.append(("pyarrow pq.read_table, the same rows (uncompressed Parquet)", best_of(r, "step_parquet", pq_dir)))
            if kind == "files":
                root = os.path.join(tmp, "root")
                rows.append(("pyarrow pq.write_table, the same rows (zstd, as import writes)",
                             best_of(r, "step_parquet_write", pq_dir, os.path.join(tmp, "written"))))
                rows.append(("flinkstate import (decode + Parquet + Delta commit)", best_of(r, "step_import", sp, root)))
                rows.append(("flinkstate export (read the root + write a savepoint)",
                             best_of(r, "step_export", root, os.path.join(tmp, "out"), rows[-1][1][0])))
            if args.restore:
                w = time.perf_counter()
                lines = _harness().restore_and_dump(Path(sp), Path(tmp) / "dump.jsonl")
                rows.append((f"real Flink 2.3 restore + dump ({len(lines):,} lines, wall)", (n, time.perf_counter() - w, 0.0, 0, 0.0)))
            best = f"; each step the least of {r} runs" if r > 1 else ""
            print(f"\n{kind}: {n:,} entries, {size / 2**20:,.0f} MiB of savepoint files ({sp}){resave_seconds(sp)}{best}")
            print("| step | CPU s, fresh process | entries/s | vs pyarrow | CPU s, again in that process | entries/s | vs pyarrow | peak RSS |")
            print("|---|---|---|---|---|---|---|---|")
            base = rows[2][1][1] / max(rows[2][1][0], 1)
            base2 = rows[2][1][4] / max(rows[2][1][0], 1)
            for name, (m, cpu, _wall, rss, cpu2) in rows:
                again = (f"{cpu2:.2f} | {m / cpu2:,.0f} | {(cpu2 / max(m, 1)) / base2:.1f}x" if cpu2 else " | | ")
                print(f"| {name} | {cpu:.2f} | {m / cpu:,.0f} | {(cpu / max(m, 1)) / base:.1f}x | {again} | {rss / 2**20:,.0f} MiB |")
            if kind == "files":  # issue 46's goal: import at most 1.2x its two necessary parts
                for i, label in ((1, "fresh process"), (4, "again")):
                    dec, wr, imp = rows[0][1][i], rows[3][1][i], rows[4][1][i]
                    if dec and wr and imp:
                        print(f"import / (decode + pyarrow write), {label}: {imp:.2f} / ({dec:.2f} + {wr:.2f}) = {imp / (dec + wr):.2f}x")
            if args.spark:
                imported_root = os.path.join(tmp, "root") if kind == "files" else None
                for name, m, in_place, floor, parquet, imported in spark_agg(sp, pq_dir, imported_root):
                    native = "" if imported is None else (f"; imported, pyspark_flinkstate.table (Spark's Parquet reader) {imported:.2f} s "
                                                          f"({imported / parquet:.2f}x)")
                    print(f"Spark groupBy().sum() over {name} ({m:,} rows): in place {in_place:.2f} s, over Parquet {parquet:.2f} s "
                          f"({in_place / parquet:.2f}x); a Python source reading the same rows with pq.read_table {floor:.2f} s "
                          f"({floor / parquet:.2f}x: Spark's intake of Python batches){native}", flush=True)
                if imported_root is not None:
                    n_states, n_rows, in_place, imported, parquet = spark_every_state(sp, imported_root, pq_dir)
                    print(f"Spark, every keyed state read whole ({n_states} states, {n_rows:,} rows, local[2], the sum of each state's "
                          f"best of 3 of agg(max(xxhash64(every column)))): in place {in_place:.2f} s ({in_place / parquet:.2f}x), "
                          f"imported by pyspark_flinkstate.table {imported:.2f} s ({imported / parquet:.2f}x), over Parquet of the "
                          f"same rows {parquet:.2f} s", flush=True)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
