"""Timing helpers the bench scripts share (each script runs with bench/ on sys.path)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

__all__ = ["best", "parquet_read_seconds", "tree_cpu_seconds"]


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


def tree_cpu_seconds(pid: int) -> float:
    """CPU seconds (user + system) of a process and of all its descendants, live or reaped (Linux /proc): a Spark JVM's
    and its Python workers' work, which on a loaded machine moves less than wall time."""
    tick = os.sysconf("SC_CLK_TCK")
    stats: dict[int, list[str]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    stats[int(d)] = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
    children: dict[int, list[int]] = {}
    for p, st in stats.items():
        children.setdefault(int(st[1]), []).append(p)
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        st = stats.get(p)
        if st is not None:
            total += int(st[11]) + int(st[12]) + int(st[13]) + int(st[14])  # utime stime cutime cstime
        todo += children.get(p, [])
    return total / tick
