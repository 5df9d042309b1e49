"""A Spark standalone cluster on 127.0.0.1 (a master and N workers started with spark-class): the tests' `spark_cluster`
fixture and the benches that compare local[N] with a cluster start it the same way."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["free_port", "standalone_cluster"]


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _spark_class() -> tuple[str, str]:
    import pyspark

    spark_home = os.environ.get("SPARK_HOME") or os.path.dirname(pyspark.__file__)
    spark_class = os.path.join(spark_home, "bin", "spark-class")
    if not os.path.exists(spark_class):
        raise FileNotFoundError(f"spark-class not found under {spark_home}")
    return spark_home, spark_class


def _wait_port(port: int, timeout: float, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"process exited: {log.read_text()[-2000:]}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.3)
    raise RuntimeError(f"port {port} did not open: {log.read_text()[-2000:]}")


@contextmanager
def standalone_cluster(logs: Path, workers: int = 1, cores: int = 2, memory: str = "2g") -> Iterator[str]:
    """A master and `workers` workers of `cores` cores each, logging into logs; yields the master URL, stops them all."""
    spark_home, spark_class = _spark_class()
    logs.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, SPARK_HOME=spark_home, SPARK_LOCAL_IP="127.0.0.1", SPARK_MASTER_HOST="127.0.0.1")
    mport, mweb = free_port(), free_port()
    master_url = f"spark://127.0.0.1:{mport}"
    files = [open(logs / "master.log", "wb")]
    procs = [subprocess.Popen(
        [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(mport), "--webui-port", str(mweb)],
        env=env, stdout=files[0], stderr=subprocess.STDOUT,
    )]
    try:
        _wait_port(mport, 60, procs[0], logs / "master.log")
        for i in range(workers):
            log = logs / f"worker-{i}.log"
            files.append(open(log, "wb"))
            procs.append(subprocess.Popen(
                [spark_class, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--cores", str(cores), "--memory", memory,
                 "--webui-port", str(free_port()), "--work-dir", str(logs / f"work-{i}"), master_url],
                env=env, stdout=files[-1], stderr=subprocess.STDOUT,
            ))
        deadline = time.time() + 60
        for i, worker in enumerate(procs[1:]):
            log = logs / f"worker-{i}.log"
            while b"Successfully registered with master" not in log.read_bytes():
                if time.time() > deadline or worker.poll() is not None:
                    raise RuntimeError(f"Spark worker {i} did not register: " + log.read_text()[-2000:])
                time.sleep(0.5)
        yield master_url
    finally:
        for p in reversed(procs):
            p.terminate()
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for f in files:
            f.close()
