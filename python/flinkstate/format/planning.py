"""Splitting a state's files into key-group ranges of about a target row count (the tasks of a scan)."""

from __future__ import annotations

from collections.abc import Sequence

from flinkstate.core.keygroups import key_group_range
from flinkstate.format.datafile import FileEntry
from flinkstate.format.merge import elementary_ranges, overlaps

__all__ = ["plan_ranges"]


def _estimate(entries: Sequence[FileEntry], lo: int, hi: int) -> int:
    r = 0
    for e in entries:
        if overlaps(e, lo, hi):
            span = e.key_group_end - e.key_group_start + 1
            r += e.rows * (min(hi, e.key_group_end) - max(lo, e.key_group_start) + 1) // max(1, span)
    return r


def plan_ranges(entries: Sequence[FileEntry], max_parallelism: int, allowed: set[int] | None = None,
                target_rows: int = 1_000_000) -> list[tuple[int, int]]:
    """Key-group ranges of a read's tasks.

    The ranges of the full files (of the deltas when there is no full file); a range holding
    more than `target_rows` is split into Flink's sub-ranges, small adjacent ones are
    combined up to `target_rows`; with `allowed` key groups, only ranges holding them remain,
    tightened to them.
    """
    if not entries:
        return []
    pieces: list[tuple[int, int, int]] = []
    for lo, hi in elementary_ranges(entries, 0, max_parallelism - 1):
        r = _estimate(entries, lo, hi)
        width = hi - lo + 1
        k = min(width, max(1, -(-r // max(1, target_rows))))
        for i in range(k):
            a, b = key_group_range(width, k, i)
            pieces.append((lo + a, lo + b, r // k))
    out: list[tuple[int, int]] = []
    cur: list[int] | None = None
    acc = 0
    for lo, hi, r in pieces:
        if allowed is not None:
            inside = [kg for kg in allowed if lo <= kg <= hi]
            if inside:
                out.append((min(inside), max(inside)))
            continue
        if cur is not None and acc + r <= target_rows:
            cur[1] = hi
            acc += r
        else:
            if cur is not None:
                out.append((cur[0], cur[1]))
            cur, acc = [lo, hi], r
    if cur is not None:
        out.append((cur[0], cur[1]))
    return out
