"""Timing helpers the bench scripts share (each script runs with bench/ on sys.path)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

__all__ = ["best", "parquet_read_seconds"]


def best(fn: Callable[[], Any], repeat: int = 3) -> float:
    """Fastest wall-clock seconds of `repeat` calls (the least disturbed run on a shared machine)."""
    out = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return min(out)


def parquet_read_seconds(tables: dict[str, Any], tmp: Path, compression: str) -> float:
    """Write every table to Parquet, then CPU seconds to read them all back (the baseline of the decode benches)."""
    paths = []
    for i, table in enumerate(tables.values()):
        p = tmp / f"{compression}-{i}.parquet"
        pq.write_table(table, p, compression=compression)
        paths.append(p)
    t = time.process_time()
    for p in paths:
        pq.read_table(p)
    return time.process_time() - t
