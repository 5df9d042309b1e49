"""The demo's Spark half: Spark SQL over the checkpoints the `flinkstate demo` job wrote.

Registered as the `flinkstate.demo` entry point `sql`, so the core's demo finds it when the
connector is installed, without importing PySpark itself.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any, TextIO

from flinkstate.demo import OPERATOR, print_table, queries, result_table

__all__ = ["answer_with_spark"]


def answer_with_spark(path: str, cp: int, pair: tuple[int, int] | None, watermark: int, now: int, out: TextIO) -> bool:
    """Answer the questions with Spark SQL over format("flinkstate"); False when PySpark is absent."""
    try:
        import pyspark  # noqa: F401
    except ImportError:
        out.write("PySpark is not installed (pip install 'flinkstate[spark]'): answering with pyarrow instead\n\n")
        return False
    import pkgutil

    from pyspark.sql import SparkSession

    out.write("starting a local SparkSession for SQL over the checkpoints (10-60 s: Java starts, then Spark) ...\n")
    out.flush()
    started = time.perf_counter()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    import warnings

    # PySpark 4.x warns about pandas 3 on import; the demo exchanges Arrow, not pandas
    warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas", category=FutureWarning)
    spark = (SparkSession.builder.master("local[2]").appName("flinkstate-demo")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "4")
             .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.sql.python.filterPushdown.enabled", "true")
             .config("spark.sql.session.timeZone", "UTC").config("spark.ui.showConsoleProgress", "true").getOrCreate())
    try:
        spark.sparkContext.setLogLevel("ERROR")
        out.write(f"Spark {spark.version} started in {time.perf_counter() - started:.0f} s; each query below runs "
                  "Spark jobs in Python workers (a few seconds each; progress on stderr)\n")
        if "pyspark_flinkstate" not in {m.name for m in pkgutil.iter_modules()}:
            # an editable install hides the module from Spark's lookup of pyspark_* data sources
            import pyspark_flinkstate

            pyspark_flinkstate.register(spark)

        def reader(**opts: str) -> Any:
            r = spark.read.format("flinkstate")
            for k, v in opts.items():
                r = r.option(k, v)
            return r.load(path)

        reader(operator=OPERATOR, state="session", ttlReferenceTime=str(now)).createOrReplaceTempView("session")
        reader(operator=OPERATOR, state="event-timers", table="timers").createOrReplaceTempView("timers")
        reader(table="files").createOrReplaceTempView("files")
        reader(operator=OPERATOR, state="sessions_total").createOrReplaceTempView("totals")
        if pair is not None:
            reader(operator=OPERATOR, state="session", table="changes", fromCheckpointId=str(pair[0]),
                   toCheckpointId=str(pair[1])).createOrReplaceTempView("changes")
        out.write(f"SQL over checkpoint {cp} with spark.read.format('flinkstate'):\n")
        for title, q in queries(watermark, pair):
            out.write(f"\n-- {title}\n{q}\n")
            out.flush()
            t = time.perf_counter()
            df = spark.sql(q)
            print_table(result_table(df.columns, [r.asDict() for r in df.collect()]), out)
            out.write(f"  ({time.perf_counter() - t:.1f} s)\n")
            out.flush()
        return True
    finally:
        spark.stop()
