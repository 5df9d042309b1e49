"""Fixtures of the connector tests."""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/: shared helpers


from fsc_helpers import build_job  # noqa: E402


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A read-only job root shared by a test module (checkpoints 1 and 2)."""
    root = str(tmp_path_factory.mktemp("job") / "root")
    build_job(root)
    return root
