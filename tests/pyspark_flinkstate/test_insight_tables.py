"""The insight tables through Spark: `format("flinkstate").option("table", "keyGroups" | "topKeys" | ...)`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fsc_helpers import HOT, SKEW_SAVEPOINT, TTL_2H, skewed_root

pytestmark = [pytest.mark.spark, pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning")]


def _read(spark: Any, path: str, table: str, **opts: str) -> list[Any]:
    r = spark.read.format("flinkstate").option("table", table)
    for k, v in opts.items():
        r = r.option(k, v)
    return r.load(path).collect()


def test_insight_tables_of_a_root_and_a_savepoint_point_at_the_hot_keys(spark: Any, tmp_path: Path) -> None:
    import flinkstate as fs
    import pyarrow as pa

    root = str(tmp_path / "job")
    skewed_root(tmp_path / "job")
    hot_kgs = {fs.assign_key_group(k, 128, pa.string()) for k in HOT}
    paths = [(root, {})]
    if (SKEW_SAVEPOINT / "_metadata").exists():
        paths.append((str(SKEW_SAVEPOINT), {"ttl": f"skewed/last={TTL_2H}"}))
    for path, extra in paths:
        kg = _read(spark, path, "keyGroups", operator="skewed", **extra)
        seen = sorted((r for r in kg if r.state == "seen"), key=lambda r: -r.entries)
        assert {r.key_group for r in seen[:3]} == hot_kgs
        top = _read(spark, path, "topKeys", topN="3", **extra)
        assert {r.key for r in top if r.state == "events" and r.ranked_by == "elements"} == set(HOT)
        assert sum(r.entries for r in _read(spark, path, "ttlExpiry", ttlBucket="day", **extra)) > 0
        assert len(_read(spark, path, "subtasks", parallelism="4", **extra)) == 4
        assert {r.checkpoint_id for r in _read(spark, path, "history", **extra)}
