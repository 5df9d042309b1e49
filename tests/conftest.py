"""Shared fixtures: real parts started by the tests themselves.

- `spark`: one local SparkSession per test session (local[2]).
- `s3`: a moto server on 127.0.0.1 (moto_server) with a fresh bucket; yields storage options (s3fs naming).
- `spark_cluster`: a Spark standalone master + worker started with spark-class on 127.0.0.1.
- `rocksdb_full`: the checked-in non-incremental RocksDB/ForSt savepoints and checkpoints of real Flink, extracted.
- `canonical_flink_dump`: what real Flink 2.3 holds after restoring the checked-in canonical savepoint, once a session.
- `failing_log_write`: makes the next write of a root's checkpoint log fail, after or before its row lands.
"""

from __future__ import annotations

import os
import shutil
import sys
import tarfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
# Spark's Python workers (and subprocesses) import the source tree, like the test process
# does (pyproject's pytest `pythonpath`): an editable install's import hook is invisible to
# the `pkgutil.iter_modules()` lookup Spark uses to find `pyspark_*` data sources.
_SRC = [str(ROOT / "python"), str(ROOT / "connector")]
os.environ["PYTHONPATH"] = os.pathsep.join(_SRC + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p not in _SRC])
# Test modules import the shared helpers of this folder (`fsc_helpers`, the models) by name.
if str(ROOT / "tests") not in sys.path:
    sys.path.insert(0, str(ROOT / "tests"))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
# Every JVM the tests start (Spark's, real Flink's, in this process's children) compiles with C1 only: their jobs are
# small and short, so C2's compile threads cost more CPU on a 2-core host than they win back (a Flink restore of the
# canonical savepoint: 8-9 s -> 4.5-5.5 s). The production-size runs (FLINKSTATE_LARGE=1) keep the JVM's default.
if os.environ.get("FLINKSTATE_LARGE", "") in ("", "0"):
    os.environ.setdefault("JDK_JAVA_OPTIONS", "-XX:TieredStopAtLevel=1")

from spark_standalone import free_port, standalone_cluster  # noqa: E402  (the tests folder is on sys.path from here)


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """The one local SparkSession of the test session."""
    pytest.importorskip("pyspark")
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("flinkstate-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.python.filterPushdown.enabled", "true")
        .config("spark.python.worker.reuse", "true")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def moto_server() -> Iterator[str]:
    """A moto server (every service: S3, IAM, its /moto-api) on 127.0.0.1; yields its endpoint URL.

    moto's own ThreadedMotoServer, minus two per-request costs that were most of its CPU time in the S3 tests (a
    sampling profile of test_registry_processes' S3 seeds): finding the request's backend lists moto's package
    folders and matches every service's URL patterns for each request, under one lock (here: remembered per host,
    a pure function of it), and werkzeug logs every request line at INFO into the captured stderr (here: warnings and
    errors only)."""
    import logging
    import threading

    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from werkzeug.serving import make_server

    class Dispatcher(DomainDispatcherApplication):
        def __init__(self) -> None:
            super().__init__(create_backend_app)
            self._hosts: dict[str | None, Any] = {}

        def get_backend_for_host(self, host: str | None) -> Any:
            if host not in self._hosts:
                self._hosts[host] = super().get_backend_for_host(host)
            return self._hosts[host]

    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    server = make_server("127.0.0.1", free_port(), Dispatcher(), threaded=True, request_handler=MotoRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        thread.join()


@pytest.fixture()
def s3(moto_server: str) -> dict[str, Any]:
    """A fresh bucket on the moto server; returns {'root': 's3://bucket/job', 'storage_options': {...}}."""
    import boto3

    bucket = f"fs-{uuid.uuid4().hex[:12]}"
    opts = {"endpoint_url": moto_server, "key": "testing", "secret": "testing", "region": "us-east-1"}
    client = boto3.client(
        "s3", endpoint_url=moto_server, aws_access_key_id="testing", aws_secret_access_key="testing", region_name="us-east-1"
    )
    client.create_bucket(Bucket=bucket)
    return {"root": f"s3://{bucket}/job", "storage_options": opts, "bucket": bucket, "client": client}


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Spark standalone master and one worker (2 cores) on 127.0.0.1; yields the master URL."""
    pytest.importorskip("pyspark")
    with standalone_cluster(tmp_path_factory.mktemp("spark-cluster")) as master_url:
        yield master_url


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, Any]:
    """A job root (local, or s3:// on the moto server) with its storage options: the damage suites run on both."""
    if request.param == "local":
        return {"root": str(tmp_path / "job"), "storage_options": None}
    s3 = request.getfixturevalue("s3")
    return {"root": s3["root"], "storage_options": s3["storage_options"]}


@pytest.fixture()
def job_root(tmp_path: Path) -> str:
    """An empty local job root."""
    p = tmp_path / "job"
    return str(p)


def have(cmd: str) -> bool:
    """True when a command is on PATH."""
    return shutil.which(cmd) is not None


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A read-only job root shared by a test module (checkpoints 1 and 2, fsc_helpers.build_job)."""
    from fsc_helpers import build_job

    root = str(tmp_path_factory.mktemp("job") / "root")
    build_job(root)
    return root


FULL_FIXTURES = ROOT / "tests" / "fixtures" / "flink-rocksdb-full"
CANONICAL_SAVEPOINT = ROOT / "tests" / "fixtures" / "flink-2.3-canonical" / "files" / "savepoint"


@pytest.fixture(scope="session")
def canonical_flink_dump(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, ...]:
    """Real Flink 2.3's dump after restoring the checked-in canonical savepoint Flink wrote (HashMap backend, parallelism 1):
    the baseline every import/change/export/restore test compares with, restored once a session (about 15 s each)."""
    from fsc_helpers import flink_harness

    out = tmp_path_factory.mktemp("canonical-dump") / "dump.txt"
    return tuple(flink_harness().restore_and_dump(CANONICAL_SAVEPOINT, out, "hashmap", 1))


@pytest.fixture(scope="session")
def rocksdb_full(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tests/fixtures/flink-rocksdb-full extracted: <line>/<variant>/{savepoint | checkpoint} (make_flink_fixture.py rocksdb-full)."""
    out = tmp_path_factory.mktemp("flink-rocksdb-full")
    for archive in sorted(FULL_FIXTURES.glob("*/*/*.tar.gz")):
        dest = out / archive.parent.parent.name / archive.parent.name
        dest.mkdir(parents=True)
        with tarfile.open(archive) as tar:
            tar.extractall(dest, filter="data")
    return out


class LogWriteFault:
    """The next write of a checkpoint log fails with an OSError (a connection reset), after (`landed=True`) or before its
    row lands in real Delta; with `unreadable=True` reads of the log fail too from that failure on, until `heal()`."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        import deltalake

        from flinkstate.format.manifest import DeltaCatalog

        real_write, real_records = deltalake.write_deltalake, DeltaCatalog.records
        self.state: dict[str, bool] = {}

        def write(table: Any, data: Any, *args: Any, **kwargs: Any) -> Any:
            if "fail" in self.state and "event" in data.schema.names:  # a log write (the manifest has no event column)
                if self.state.pop("fail"):
                    real_write(table, data, *args, **kwargs)
                self.state["unreadable"] = self.state.pop("then_unreadable")
                raise OSError("connection reset by peer (injected)")
            return real_write(table, data, *args, **kwargs)

        def records(catalog: Any, *args: Any, **kwargs: Any) -> Any:
            if self.state.get("unreadable"):
                raise OSError("the log cannot be read (injected)")
            return real_records(catalog, *args, **kwargs)

        monkeypatch.setattr(deltalake, "write_deltalake", write)
        monkeypatch.setattr(DeltaCatalog, "records", records)
        monkeypatch.setattr("flinkstate.store.writer._OUTCOME_READS", (0.0, 0.0))

    def __call__(self, *, landed: bool, unreadable: bool = False) -> None:
        self.state.update(fail=landed, then_unreadable=unreadable)

    def heal(self) -> None:
        self.state.clear()


@pytest.fixture()
def failing_log_write(monkeypatch: pytest.MonkeyPatch) -> LogWriteFault:
    """A LogWriteFault for this test (undone after it)."""
    return LogWriteFault(monkeypatch)
