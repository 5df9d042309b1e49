"""The connector on a Spark standalone cluster (master + worker started with spark-class).

Only one SparkSession can be active per process and the test session already has a local
one, so the cluster program runs in a subprocess with the same interpreter.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from fsc_helpers import N, build_job

pytestmark = [
    pytest.mark.spark,
    pytest.mark.cluster,
    pytest.mark.slow,
]

PROGRAM = textwrap.dedent(
    """
    import json, sys
    from pyspark.sql import SparkSession

    master, root = sys.argv[1], sys.argv[2]
    spark = (SparkSession.builder.master(master).appName("flinkstate-cluster-test")
             .config("spark.ui.enabled", "false").config("spark.driver.host", "127.0.0.1")
             .config("spark.driver.bindAddress", "127.0.0.1").config("spark.executor.memory", "1g")
             .config("spark.sql.python.filterPushdown.enabled", "true").config("spark.sql.shuffle.partitions", "4")
             .getOrCreate())
    out = {}
    r = spark.read.format("flinkstate").option("operator", "sessions").option("state", "count")
    out["count"] = r.load(root).count()
    out["point"] = [row.value for row in r.load(root).where("key = 'u2'").collect()]
    df = spark.range(0, 1000, numPartitions=4).selectExpr("concat('c', id) as key", "id as value")
    df.write.format("flinkstate").option("operator", "sessions").option("state", "count").mode("overwrite").save(root)
    out["after"] = r.load(root).count()
    spark.sql(f"CREATE TEMPORARY VIEW cnt USING flinkstate OPTIONS (path '{root}', operator 'sessions', state 'count')")
    out["sql"] = spark.sql("SELECT sum(value) AS s FROM cnt").collect()[0].s
    out["executors"] = spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1
    out["master"] = spark.sparkContext.master
    print("RESULT " + json.dumps(out))
    spark.stop()
    """
)


def test_read_write_on_standalone_cluster(spark_cluster, tmp_path):
    root = str(tmp_path / "job")
    store = build_job(root)
    script = tmp_path / "program.py"
    script.write_text(PROGRAM)
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    proc = subprocess.run([sys.executable, str(script), spark_cluster, root], capture_output=True, text=True, timeout=600, env=env)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, "\n".join(ln for ln in proc.stderr.splitlines() if not ln.startswith("\tat "))[-6000:]
    out = json.loads(lines[-1][len("RESULT "):])
    assert out["count"] == N and out["point"] == [200]
    assert out["after"] == 1000 and out["sql"] == sum(range(1000))
    assert out["executors"] >= 1 and out["master"] == spark_cluster
    assert store.latest_checkpoint_id() == 3
