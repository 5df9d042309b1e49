"""The slow `flink` tier: real Flink 2.3 writes fresh savepoints and the decoder must read exactly its dump."""

from __future__ import annotations

from pathlib import Path

import pytest
from flink_dump import check_savepoint

pytestmark = [pytest.mark.flink, pytest.mark.slow]


@pytest.mark.parametrize("variant", ["files", "inline", "snappy"])
def test_fresh_savepoint_matches_dump(flink_fresh: Path, variant: str) -> None:
    """A savepoint real Flink just wrote (150 records, separate files / inlined / snappy) equals the job's dump."""
    n = check_savepoint(flink_fresh / variant / "savepoint", flink_fresh / variant / "expected.jsonl")
    assert n > 800
