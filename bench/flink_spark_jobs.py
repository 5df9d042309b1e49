"""`flinkstate import` and `flinkstate export` of a real Flink savepoint as Spark jobs: local[1], local[2] and a cluster.

    PYTHONPATH=python:connector python bench/flink_spark_jobs.py SAVEPOINT [WORKDIR] [--no-cluster]

Per run: entries per second of the single-process import/export (no Spark), then of the Spark jobs (one task per
Flink subtask) at local[1], local[2] and on a Spark standalone cluster of 2 workers of 1 core each on 127.0.0.1
(started here, as the tests start theirs), the 2-core/1-core ratios, and the largest peak RSS of a Python worker over
the tasks (a fresh worker per task: spark.python.worker.reuse=false, so ru_maxrss is that task's peak), and the
2-core speed-up the tasks' own CPU seconds allow (what an idle 2-core machine gives at best). Other load on the
machine skews the measured ratio: the load average is printed at the start and the end.
"""

from __future__ import annotations

import os
import resource
import shutil
import sys
import tempfile
import time
from contextlib import ExitStack
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

ROOT = Path(__file__).resolve().parents[1]


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _cpu_s() -> float:
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime


def _measured(spark: Any, fn: Any, peaks: list[tuple[float, float]]) -> Any:
    """A runner like flink_jobs' (one Spark task per job) that also brings back each task's peak RSS and CPU seconds."""

    def task(job: Any) -> tuple[Any, float, float]:
        c = _cpu_s()
        out = fn(job)
        return out, _rss_mb(), _cpu_s() - c

    def run(jobs: list[Any]) -> list[Any]:
        out = spark.sparkContext.parallelize(jobs, len(jobs)).map(task).collect()
        peaks.extend((p, c) for _, p, c in out)
        return [r for r, _, _ in out]

    return run


def _cpu_bound(cpu: list[float], cores: int = 2) -> float:
    """The speed-up the tasks' CPU seconds allow on `cores` idle cores (longest task first onto the least loaded core)."""
    slots = [0.0] * cores
    for c in sorted(cpu, reverse=True):
        slots[slots.index(min(slots))] += c
    return sum(cpu) / max(max(slots), 1e-9)


def _line(peaks: list[tuple[float, float]]) -> str:
    cpu = [c for _, c in peaks]
    return (f"{len(peaks)} tasks, task CPU {sum(cpu):.1f} s (largest {max(cpu):.1f} s), worker peak RSS {max(p for p, _ in peaks):.0f} MB, "
            f"2-core bound {_cpu_bound(cpu):.2f}x")


def _session(master: str) -> Any:
    from pyspark.sql import SparkSession

    return (SparkSession.builder.master(master).appName(f"flink jobs bench {master}").config("spark.ui.enabled", "false")
            .config("spark.python.worker.reuse", "false").config("spark.driver.memory", "2g").getOrCreate())


def _cluster(stack: ExitStack, logs: Path) -> str:
    """The master URL of a standalone cluster of 2 one-core workers, stopped when the stack closes."""
    sys.path.insert(0, str(ROOT / "tests"))
    from spark_standalone import standalone_cluster

    return stack.enter_context(standalone_cluster(logs, workers=2, cores=1, memory="2g"))


def main(argv: list[str]) -> int:
    # Spark's Python workers (the cluster's executors inherit the workers' environment): this interpreter, the source tree
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    src_dirs = [str(ROOT / "python"), str(ROOT / "connector")]
    os.environ["PYTHONPATH"] = os.pathsep.join(src_dirs + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
    cluster = "--no-cluster" not in argv
    argv = [a for a in argv if a != "--no-cluster"]
    src = argv[0]
    work = Path(argv[1] if len(argv) > 1 else tempfile.mkdtemp(prefix="flink-spark-jobs-"))
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    print(f"load average at the start {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
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
    stack = ExitStack()  # the cluster, started for its own run only
    for label in ("local[1]", "local[2]", *(["standalone 2x1"] if cluster else [])):
        master = _cluster(stack, work / "cluster-logs") if label.startswith("standalone") else label
        spark = _session(master)
        spark.sparkContext.parallelize([0], 1).count()  # workers' start-up outside the timing
        ipeaks: list[tuple[float, float]] = []
        epeaks: list[tuple[float, float]] = []
        root, dest = work / f"root-{len(results)}", work / f"sp-{len(results)}"
        plan = plan_import(src, root)
        t = time.perf_counter()
        run_import(plan, _measured(spark, import_subtask, ipeaks))
        ti = time.perf_counter() - t
        plan_e = plan_export(str(root), dest)
        t = time.perf_counter()
        run_export(plan_e, _measured(spark, export_range, epeaks))
        te = time.perf_counter() - t
        results[label] = (ti, te)
        print(f"{label}: import {n / ti:,.0f} entries/s ({ti:.1f} s; {_line(ipeaks)})")
        print(f"{label}: export {n / te:,.0f} entries/s ({te:.1f} s; {_line(epeaks)})")
        spark.stop()
    stack.close()
    i1, e1 = results["local[1]"]
    for label in list(results)[1:]:
        i, e = results[label]
        print(f"{label} against local[1]: import {i1 / i:.2f}x, export {e1 / e:.2f}x")
    print(f"load average at the end {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
