"""`flinkstate import` and `flinkstate export` of a real Flink savepoint as Spark jobs: local[1] vs local[2].

    PYTHONPATH=python:connector python bench/flink_spark_jobs.py SAVEPOINT [WORKDIR]

Per run: entries per second of the single-process import/export (no Spark), then of the Spark jobs (one task per
Flink subtask) at local[1] and local[2], the 2-core/1-core ratio, and the largest peak RSS of a Python worker over
the tasks (a fresh worker per task: spark.python.worker.reuse=false, so ru_maxrss is that task's peak).
The machine's other load skews the ratio: run it on an idle machine for the figure that counts.
"""

from __future__ import annotations

import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from flinkstate.flink.bridge.export_task import export_range
from flinkstate.flink.bridge.import_task import import_subtask
from flinkstate.flink.bridge.importer import import_savepoint, plan_import, run_import
from flinkstate.flink.bridge.store_export import (
    export_savepoint,
    plan_export,
    run_export,
)


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _measured(spark: Any, fn: Any, peaks: list[float]) -> Any:
    """A runner like flink_jobs' (one Spark task per job) that also brings back each task's peak RSS."""

    def task(job: Any) -> tuple[Any, float]:
        return fn(job), _rss_mb()

    def run(jobs: list[Any]) -> list[Any]:
        out = spark.sparkContext.parallelize(jobs, len(jobs)).map(task).collect()
        peaks.extend(p for _, p in out)
        return [r for r, _ in out]

    return run


def _session(master: str) -> Any:
    from pyspark.sql import SparkSession

    return (SparkSession.builder.master(master).appName(f"flink jobs bench {master}").config("spark.ui.enabled", "false")
            .config("spark.python.worker.reuse", "false").config("spark.driver.memory", "2g").getOrCreate())


def main(argv: list[str]) -> int:
    src = argv[0]
    work = Path(argv[1] if len(argv) > 1 else tempfile.mkdtemp(prefix="flink-spark-jobs-"))
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    t = time.perf_counter()
    report = import_savepoint(src, work / "local")
    imp_local = time.perf_counter() - t
    n = report.total
    t = time.perf_counter()
    export_savepoint(str(work / "local"), work / "sp-local")
    exp_local = time.perf_counter() - t
    print(f"{n} entries; single process: import {n / imp_local:,.0f} entries/s ({imp_local:.1f} s), "
          f"export {n / exp_local:,.0f} entries/s ({exp_local:.1f} s); driver peak RSS {_rss_mb():.0f} MB")
    results: dict[str, tuple[float, float]] = {}
    for master in ("local[1]", "local[2]"):
        spark = _session(master)
        spark.sparkContext.parallelize([0], 1).count()  # workers' start-up outside the timing
        ipeaks: list[float] = []
        epeaks: list[float] = []
        root, dest = work / f"root-{master[6]}", work / f"sp-{master[6]}"
        plan = plan_import(src, root)
        t = time.perf_counter()
        run_import(plan, _measured(spark, import_subtask, ipeaks))
        ti = time.perf_counter() - t
        plan_e = plan_export(str(root), dest)
        t = time.perf_counter()
        run_export(plan_e, _measured(spark, export_range, epeaks))
        te = time.perf_counter() - t
        results[master] = (ti, te)
        print(f"{master}: import {n / ti:,.0f} entries/s ({ti:.1f} s, {len(ipeaks)} tasks, worker peak RSS {max(ipeaks):.0f} MB); "
              f"export {n / te:,.0f} entries/s ({te:.1f} s, {len(epeaks)} tasks, worker peak RSS {max(epeaks):.0f} MB)")
        spark.stop()
    (i1, e1), (i2, e2) = results["local[1]"], results["local[2]"]
    print(f"2-core/1-core: import {i1 / i2:.2f}x, export {e1 / e2:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
