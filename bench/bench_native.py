"""State as Spark tables: `pyspark_flinkstate.table` (Spark's own Parquet reader) and the Python source, against their floors.

    .venv/bin/python bench/bench_native.py [--rows 4000000] [--deltas 10] [--repeat 3] [--json]

One value state of --rows entries (string keys, max parallelism 128) written in full (checkpoint 1: a state after
compaction or import), then --deltas delta checkpoints on top (each upserting 1% of the keys, a tenth of them
tombstones); a second one with deltas of 0.1% each, and a third with TTL and no deltas. Every timed action is `groupBy().sum("value").collect()` (a one-key lookup: `collect()` of its one row),
best of --repeat after a warm-up, all in one SparkSession (local[2]); each row's ratio is against a baseline measured in
the same invocation, in wall seconds and in CPU seconds of the Spark JVM, its Python workers and this driver (steadier than
wall time on a loaded machine):
- native full scan vs `spark.read.parquet` of the checkpoint's files (goal <= 1.1x);
- native with the deltas on top vs the same Parquet baseline (goal <= 2x): as `table()` does it (`native.choose_merge`:
  the 1% deltas by the Python tasks, the 0.1% ones by Spark) and by the other merge, and the Python source;
- a one-key lookup (`table(..., keys=[k])`, `collect()` of the DataFrame made before; also with the `table()` call) vs the
  native full scan (goal <= 0.05), with deltas on top, and the Python source's (a pushed-down `key = k`);
- the Python source `format("flinkstate")` vs a pass-through Python source that yields pyarrow's read of the very same
  files with the same columns, partitioned as flinkstate's read (Spark's floor for any Python source; goal <= 1.2x).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import warnings
from typing import Any

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas", category=FutureWarning)

from benchutil import tree_cpu_seconds  # noqa: E402  (bench/ is on sys.path when a bench runs)


def build(root: str, rows: int, deltas: int) -> None:
    """Checkpoint 1: the state `v` in full files (and `t`, the same with TTL, and `s`); 2..deltas+1: 1% of v's keys
    upserted each and 0.1% of s's (a tenth of them as tombstones)."""
    import numpy as np
    import pyarrow as pa

    import flinkstate as fs

    store = fs.open(root)
    desc = fs.ValueStateDescriptor(name="v", value_type=pa.int64())
    keys = pa.array(np.char.add("k", np.arange(rows).astype(str)))
    with store.begin(max_parallelism=128) as w:
        w.put_state("op", desc, pa.table({"key": keys, "value": np.arange(rows, dtype=np.int64)}))
        ttl = fs.ValueStateDescriptor(name="t", value_type=pa.int64(), ttl=fs.StateTtlConfig(ttl_ms=10 * 365 * 86_400_000))
        now = int(time.time() * 1000)  # none expires within ten years: every row is read
        w.put_state("op", ttl, pa.table({"key": keys, "value": np.arange(rows, dtype=np.int64), "ttl_timestamp": np.full(rows, now)}))
        small = fs.ValueStateDescriptor(name="s", value_type=pa.int64())
        w.put_state("op", small, pa.table({"key": keys, "value": np.arange(rows, dtype=np.int64)}))
    rng = np.random.default_rng(47)
    for i in range(deltas):
        with store.begin() as w:
            for d, share in ((desc, 100), (small, 1000)):
                idx = np.sort(rng.choice(rows, max(1, rows // share), replace=False))
                w.put_state("op", d, pa.table({"key": keys.take(pa.array(idx)), "value": np.full(len(idx), -i, dtype=np.int64),
                                               "tombstone": idx % 10 == 0}), mode="delta")


def pass_through_source(tasks: list[list[str]], columns: list[str], ddl: str) -> Any:
    """A Python data source yielding `pq.read_table(files, columns)` per partition (flinkstate's partitions, their files):
    what any Python source costs Spark, with no work of its own."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    class _Reader(DataSourceReader):
        def partitions(self) -> list[InputPartition]:
            return [InputPartition(files) for files in tasks]

        def read(self, partition: InputPartition) -> Any:
            import pyarrow.parquet as pq

            for path in partition.value:
                yield from pq.read_table(path, columns=columns).to_batches(max_chunksize=131072)

    class _PassThrough(DataSource):
        @classmethod
        def name(cls) -> str:
            return "bench_pass_through"

        def schema(self) -> str:
            return ddl

        def reader(self, schema: Any) -> Any:
            return _Reader()

    return _PassThrough


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=4_000_000)
    ap.add_argument("--deltas", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--dir", default=None, help="work directory (default: a temporary one, removed afterwards)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)

    from pyspark.sql import SparkSession

    import flinkstate as fs
    import pyspark_flinkstate
    from pyspark_flinkstate.reader import TARGET_ROWS_PER_PARTITION

    work = a.dir or tempfile.mkdtemp(prefix="flinkstate-native-")
    root = os.path.join(work, "state")
    t = time.perf_counter()
    if not os.path.exists(root):
        build(root, a.rows, a.deltas)
    print(f"state: {a.rows:,} entries + {a.deltas} delta checkpoints at {root} ({time.perf_counter() - t:.1f} s)", file=sys.stderr)
    spark = (SparkSession.builder.master(a.master).appName("flinkstate-native-bench").config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false").config("spark.sql.shuffle.partitions", "4")
             .config("spark.driver.memory", "3g").config("spark.sql.python.filterPushdown.enabled", "true")
             .config("spark.python.worker.reuse", "true").config("spark.driver.host", "127.0.0.1")
             .config("spark.driver.bindAddress", "127.0.0.1").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    pyspark_flinkstate.register(spark)
    results: list[dict[str, Any]] = []

    jvm = int(spark.sparkContext._jvm.ProcessHandle.current().pid())  # type: ignore[union-attr]

    def best(fn: Any) -> tuple[float, float]:
        """(least wall seconds, least CPU seconds of the JVM and its Python workers) of --repeat runs after a warm-up."""
        fn()  # warm-up: Python workers, JIT, file caches
        walls, cpus = [], []
        for _ in range(a.repeat):
            c, t = tree_cpu_seconds(jvm) + time.process_time(), time.perf_counter()
            fn()
            walls.append(time.perf_counter() - t)
            cpus.append(tree_cpu_seconds(jvm) + time.process_time() - c)
        return min(walls), min(cpus)

    def agg(df: Any) -> Any:
        return lambda: df.groupBy().sum("value").collect()

    def row(name: str, ours: tuple[float, float], base: tuple[float, float], baseline: str, goal: float | None) -> None:
        r, rc = ours[0] / base[0], ours[1] / base[1]
        results.append({"comparison": name, "seconds": round(ours[0], 3), "baseline": baseline, "baseline_s": round(base[0], 3),
                        "ratio": round(r, 3), "cpu_s": round(ours[1], 3), "baseline_cpu_s": round(base[1], 3), "cpu_ratio": round(rc, 3),
                        "goal": None if goal is None else f"<= {goal}", "met": None if goal is None else r <= goal})

    try:
        store = fs.open(root)
        ck1 = store.checkpoint(1)
        files = [ck1.io.url(e.path) for e in ck1.state_files("op", "v")]
        parquet = spark.read.parquet(*files)
        native1 = pyspark_flinkstate.table(spark, root, "op", "v", checkpointId=1)
        native = pyspark_flinkstate.table(spark, root, "op", "v")
        python = spark.read.format("flinkstate").options(operator="op", state="v").load(root)
        assert native.schema == python.schema
        t_parquet = best(agg(parquet))
        t_native1 = best(agg(native1))
        row("native full scan (checkpoint 1, full files)", t_native1, t_parquet, "spark.read.parquet of its files", 1.1)
        t_native = best(agg(native))
        row(f"native, {a.deltas} delta checkpoints of 1% each (table(): their key groups merged by the Python tasks)", t_native,
            t_parquet, "spark.read.parquet of ckpt 1's files", 2.0)
        from pyspark_flinkstate.native import frame
        from pyspark_flinkstate.resolve import resolve

        spark_merged = frame(spark, resolve({"path": root, "operator": "op", "state": "v"}), merge="spark")
        t_spark = best(agg(spark_merged))
        row(f"the same merged by Spark (anti-join of the deltas' keys, window over the deltas)", t_spark, t_parquet,
            "spark.read.parquet of ckpt 1's files", 2.0)
        t_python = best(agg(python))
        row(f"Python source, {a.deltas} delta checkpoints on top", t_python, t_parquet, "spark.read.parquet of ckpt 1's files", None)
        small = pyspark_flinkstate.table(spark, root, "op", "s")
        t_small = best(agg(small))
        row(f"native, {a.deltas} delta checkpoints of 0.1% each (table(): merged by Spark)", t_small, t_parquet,
            "spark.read.parquet of ckpt 1's files", 2.0)
        with_keys = best(lambda: parquet.groupBy().agg({"value": "sum", "key": "max"}).collect())
        row("the same merged by Spark, against a Parquet scan that reads the keys too (max(key), sum(value))", t_small, with_keys,
            "spark.read.parquet of ckpt 1's files, keys read", None)
        small_py = frame(spark, resolve({"path": root, "operator": "op", "state": "s"}), merge="python", options={"operator": "op", "state": "s"})
        t_small_py = best(agg(small_py))
        row("the same merged by the Python tasks", t_small_py, t_parquet, "spark.read.parquet of ckpt 1's files", None)
        key = f"k{a.rows // 2}"
        lookup1 = pyspark_flinkstate.table(spark, root, "op", "v", keys=[key], checkpointId=1)
        assert len(lookup1.collect()) == 1
        t_lookup1 = best(lambda: lookup1.collect())
        row("one-key lookup, native (checkpoint 1: the key's file, key-group filter)", t_lookup1, t_native1, "native full scan (checkpoint 1)", 0.05)
        t_any = best(lambda: spark.range(1).collect())
        row("spark.range(1).collect() (Spark's own cost of any query)", t_any, t_native1, "native full scan (checkpoint 1)", None)
        t_call1 = best(lambda: pyspark_flinkstate.table(spark, root, "op", "v", keys=[key], checkpointId=1).collect())
        row("the same with the table() call (resolving the checkpoint: Delta logs)", t_call1, t_native1, "native full scan (checkpoint 1)", None)
        lookup = pyspark_flinkstate.table(spark, root, "op", "v", keys=[key])
        t_lookup = best(lambda: lookup.collect())
        row("one-key lookup with deltas on top (its key group through the Python tasks)", t_lookup, t_native,
            "native, deltas on top (Python tasks)", None)
        t_lookup_py = best(lambda: python.where(python.key == key).collect())
        row("one-key lookup, Python source (where key = k, pushed down)", t_lookup_py, t_native, "native, deltas on top (Python tasks)", None)
        for state, cols, ddl in (("v", ["key", "value", "key_group"], "key string not null, value bigint, key_group int not null"),
                                 ("t", ["key", "value", "key_group", "ttl_timestamp"],
                                  "key string not null, value bigint, key_group int not null, ttl_timestamp bigint")):
            tasks = [[ck1.io.fs_path(e.path) for e in task.entries] for task in ck1.scan("op", state).plan(TARGET_ROWS_PER_PARTITION)]  # type: ignore[attr-defined]
            spark.dataSource.register(pass_through_source(tasks, cols, ddl))
            floor = spark.read.format("bench_pass_through").load()
            ours = spark.read.format("flinkstate").options(operator="op", state=state, checkpointId="1").load(root)
            t_floor = best(agg(floor))
            t_ours = best(agg(ours))
            what = "value state" if state == "v" else "value state with TTL (expiry judged, ttl_expires_at shown)"
            row(f"Python source full scan, {what}", t_ours, t_floor, "pass-through Python source (pq.read_table, same files, columns)", 1.2)
            if state == "v":
                row("pass-through Python source (the floor)", t_floor, t_parquet, "spark.read.parquet of ckpt 1's files", None)
    finally:
        spark.stop()
        if a.dir is None:
            shutil.rmtree(work, ignore_errors=True)
    if a.json:
        print(json.dumps(results, indent=2))
        return 0
    try:
        load = os.getloadavg()
        print(f"\n{a.rows:,} rows, {a.deltas} deltas, best of {a.repeat} after a warm-up, {a.master}; load average {load[0]:.1f}")
    except OSError:
        pass
    print("| comparison | wall s | baseline | baseline wall s | ratio | CPU s | baseline CPU s | CPU ratio | goal | met (wall) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        met = "" if r["met"] is None else ("yes" if r["met"] else "no")
        print(f"| {r['comparison']} | {r['seconds']:.3f} | {r['baseline']} | {r['baseline_s']:.3f} | {r['ratio']:.3f}x | {r['cpu_s']:.2f} | "
              f"{r['baseline_cpu_s']:.2f} | {r['cpu_ratio']:.3f}x | {r['goal'] or ''} | {met} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
