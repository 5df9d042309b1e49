"""Spark's Python workers: the interpreter they run, whether it can import this package, and the session a
command-line `--spark` run starts so that they can."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from typing import Any

__all__ = ["check_workers", "cli_session", "worker_python"]


def worker_python(spark: Any) -> str:
    """The interpreter Spark starts its Python workers with (PYSPARK_PYTHON, default `python3` on PATH)."""
    sc = getattr(spark, "sparkContext", None)
    exe = getattr(sc, "pythonExec", None) if sc is not None else None
    return str(exe or os.environ.get("PYSPARK_PYTHON") or "python3")


def check_workers(spark: Any) -> None:
    """Raise WorkerPythonError, naming the interpreter, when Spark's Python workers cannot import this package."""
    from flinkstate.core.errors import WorkerPythonError

    exe = worker_python(spark)
    found = shutil.which(exe)
    if found is not None and os.path.abspath(found) == os.path.abspath(sys.executable):
        return
    fix = (f"set PYSPARK_PYTHON={sys.executable} before the SparkSession starts, or run with the virtual "
           "environment that has flinkstate activated")
    if found is None:
        raise WorkerPythonError(f"Spark's Python workers run {exe!r} (PYSPARK_PYTHON, default python3 on PATH), "
                                f"which is not on PATH: {fix}")
    r = subprocess.run([found, "-c", "import pyspark_flinkstate.source"], capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or ["exit status " + str(r.returncode)])[-1]
        raise WorkerPythonError(f"Spark's Python workers run {found} (PYSPARK_PYTHON, default python3 on PATH), "
                                f"which cannot import pyspark_flinkstate ({last}); this script runs {sys.executable}: {fix}")


def cli_session(app: str, master: str | None = None) -> Any:
    """The session of a command-line `--spark` run: one on MASTER, else the active one, else a local one. A session it
    starts runs Spark's Python workers with this interpreter (unless PYSPARK_PYTHON names one), which has flinkstate
    installed; the workers are checked either way (`check_workers`)."""
    from pyspark.sql import SparkSession

    spark = None if master else SparkSession.getActiveSession()
    if spark is None:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        builder = SparkSession.builder.appName(app).config("spark.ui.showConsoleProgress", "true")
        spark = (builder.master(master) if master else builder).getOrCreate()
    check_workers(spark)
    return spark
