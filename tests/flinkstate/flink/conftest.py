"""Fixtures of the Flink decoder tests: the checked-in savepoints and, for the `flink` tier, fresh ones."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from fsc_helpers import flink_harness as _harness

sys.path.insert(0, os.path.dirname(__file__))  # flink_dump


@pytest.fixture(scope="session")
def flink_fresh(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Savepoints written by real Flink 2.3.0 in this test session (flinkjobs/harness.py)."""
    out = tmp_path_factory.mktemp("flink-savepoints")
    _harness().run_job(out, 150)
    return out


@pytest.fixture(scope="session")
def flink_fresh_maxp300(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A savepoint of real Flink with maxParallelism 300 (2-byte key-group prefixes) and 500 Long keys."""
    out = tmp_path_factory.mktemp("flink-savepoints-maxp300")
    _harness().run_job(out, 1000, ("files",), props={"maxp": 300, "keys": 500, "rate": 5000})
    return out


@pytest.fixture(scope="session")
def flink_fresh_native(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A NATIVE savepoint and a retained snappy checkpoint of the HashMap backend, written by real Flink 2.3.0 now."""
    out = tmp_path_factory.mktemp("flink-native")
    harness = _harness()
    harness.run_job(out, 150, harness.NATIVE_VARIANTS)
    return out


@pytest.fixture(scope="session")
def flink_fresh_rocksdb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A RocksDB NATIVE savepoint and retained incremental checkpoints, written by real Flink 2.3.0 now."""
    out = tmp_path_factory.mktemp("flink-rocksdb")
    harness = _harness()
    harness.run_job(out, 150, harness.ROCKSDB_VARIANTS)
    return out

