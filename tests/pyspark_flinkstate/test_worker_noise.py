"""`df.limit(n).show()` prints its rows and no BrokenPipe traceback from PySpark's worker daemon."""

from __future__ import annotations

import io
import subprocess
import sys
import textwrap

import pyarrow as pa
import pytest

import flinkstate as fs
from pyspark_flinkstate.worker_noise import ClosedPipeFilter


def _filtered(text: str) -> str:
    out = io.StringIO()
    f = ClosedPipeFilter(out)
    for part in text.splitlines(keepends=True):  # as print() writes: a chunk per line
        f.write(part)
    f.flush()
    return out.getvalue()


_PIPE = ('Traceback (most recent call last):\n'
         '  File "/x/pyspark.zip/pyspark/daemon.py", line 264, in manager\n'
         '  File "/x/pyspark.zip/pyspark/daemon.py", line 95, in worker\n'
         'BrokenPipeError: [Errno 32] Broken pipe\n')


def test_filter_drops_only_closed_pipe_tracebacks_of_pyspark():
    other = 'Traceback (most recent call last):\n  File "/x/pyspark/worker.py", line 1, in main\nValueError: bad row\n'
    user = 'Traceback (most recent call last):\n  File "job.py", line 3, in f\nBrokenPipeError: [Errno 32] Broken pipe\n'
    assert _filtered("before\n" + _PIPE + "after\n") == "before\nafter\n"
    assert _filtered(other) == other
    assert _filtered(user) == user  # not raised in PySpark's own code: kept
    assert _filtered("no newline yet") == "no newline yet"


@pytest.mark.spark
@pytest.mark.slow
def test_limit_show_prints_rows_and_no_traceback(tmp_path):
    root = tmp_path / "job"
    n = 1_000_000
    with fs.open(str(root)).begin(max_parallelism=128) as w:
        w.put_state("op", fs.ValueStateDescriptor(name="v", key_type=pa.int64(), value_type=pa.int64()),
                    pa.table({"key": pa.array(range(n), pa.int64()), "value": pa.array(range(n), pa.int64())}))
    script = textwrap.dedent(f"""
        from pyspark.sql import SparkSession
        spark = SparkSession.builder.master("local[1]").getOrCreate()
        df = spark.read.format("flinkstate").option("operator", "op").option("state", "v").load({str(root)!r})
        df.limit(5).show()
        df.limit(3).show()
        spark.stop()
    """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("|key|value|key_group|") == 2
    assert "BrokenPipe" not in r.stderr and "Traceback" not in r.stderr, r.stderr
