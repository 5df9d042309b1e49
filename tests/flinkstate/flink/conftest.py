"""Fixtures of the Flink decoder tests: the checked-in savepoints and, for the `flink` tier, fresh ones."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, os.path.dirname(__file__))

ROOT = Path(__file__).resolve().parents[3]
FIXTURE = ROOT / "tests" / "fixtures" / "flink-2.3-canonical"


@pytest.fixture(scope="session")
def flink_fresh(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Savepoints written by real Flink 2.3.0 in this test session (flinkjobs/harness.py)."""
    spec = importlib.util.spec_from_file_location("flinkjobs_harness", ROOT / "flinkjobs" / "harness.py")
    harness = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(harness)
    out = tmp_path_factory.mktemp("flink-savepoints")
    harness.run_job(out, 150)
    return out
