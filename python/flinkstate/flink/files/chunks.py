"""Key-group ranges cut into runs of about a given number of bytes: what one task decodes at a time.

One way to chunk for every keyed-state file kind: canonical and heap files know each key group's bytes from their
offsets (`key_group_ranges.key_group_chunks`), RocksDB from each SST's key-group span and size in the MANIFEST
(`rocksdb.rocksdb_chunks`); both cut the per-key-group sizes here.
"""

from __future__ import annotations

import numpy as np

__all__ = ["runs"]


def runs(size: np.ndarray, first: int, max_bytes: int) -> list[tuple[int, int]]:
    """Consecutive runs (first, last), inclusive, of the key groups first, first + 1, ... whose bytes are size[i], each
    holding at most max_bytes (a larger key group is a run of its own)."""
    if not len(size):
        return []
    out: list[tuple[int, int]] = []
    start, held = 0, 0
    for i, n in enumerate(size.tolist()):
        if held and held + n > max_bytes:
            out.append((first + start, first + i - 1))
            start, held = i, 0
        held += n
    out.append((first + start, first + len(size) - 1))
    return out
