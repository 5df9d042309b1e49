"""Where a scan task's stored rows are, file by file: the plan an engine with its own Parquet reader executes.

A task's stored rows are, per key group, the rows of its newest full file plus those of later deltas, newest wins
(`format.merge`). `file_slices` says the same file by file: which files count, for which key groups, and in which order
they win. Reading every slice's rows of those key groups and merging the delta slices newest-wins (the higher `order`,
then the later row of a file) gives exactly the rows `ScanTask.to_batches` merges; Spark's native path
(`pyspark_flinkstate.native`) does so with Spark's own Parquet reader. No slice of a key group is older than its newest
full file, so a full slice's rows are only ever replaced by delta slices' rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from flinkstate.core.io import FileIO
from flinkstate.format import constants as C
from flinkstate.format.datafile import FileEntry
from flinkstate.format.merge import newest_full_order, order_entries, overlaps

__all__ = ["FileSlice", "file_slices", "key_group_runs", "key_groups_held"]


@dataclass(frozen=True)
class FileSlice:
    """One file of a task and the key groups whose rows in it count.

    `order` sorts the files as the merge does (oldest first: creating checkpoint, write order, path); of two rows with
    one primary key in one key group the one of the higher order wins, within a file the later row. `whole`: the
    ranges are the file's own range (no key-group filter needed)."""

    entry: FileEntry
    url: str
    order: tuple[int, int, str]
    delta: bool
    key_group_ranges: tuple[tuple[int, int], ...]
    whole: bool


def key_group_runs(mask: np.ndarray, base: int = 0) -> tuple[tuple[int, int], ...]:
    """Inclusive runs of True in mask, as key-group ranges (mask[0] is key group base)."""
    if not mask.any():
        return ()
    m = np.concatenate([[False], mask, [False]]).astype(np.int8)
    d = np.diff(m)
    starts, ends = np.nonzero(d == 1)[0], np.nonzero(d == -1)[0] - 1
    return tuple((base + int(a), base + int(b)) for a, b in zip(starts, ends))


def file_slices(io: FileIO, entries: Sequence[FileEntry], max_parallelism: int, key_group_range: tuple[int, int],
                key_groups: Sequence[int] | None = None) -> list[FileSlice]:
    """The slices of a task's files in its key-group range (restricted to `key_groups` when given), oldest first.

    A file's rows count in a key group inside the range where no newer full file covers it (the mask
    `format.merge.merge_tables` applies); files whose rows count nowhere are left out."""
    lo, hi = key_group_range
    ordered = order_entries([e for e in entries if overlaps(e, lo, hi)])
    full_order = newest_full_order(ordered, max_parallelism)
    allowed = np.zeros(hi - lo + 1, dtype=bool)
    if key_groups is None:
        allowed[:] = True
    else:
        ks = np.asarray([k for k in key_groups if lo <= k <= hi], dtype=np.int64)
        allowed[ks - lo] = True
    out = []
    for pos, e in enumerate(ordered):
        a, b = max(lo, e.key_group_start), min(hi, e.key_group_end)
        mask = np.zeros(hi - lo + 1, dtype=bool)
        mask[a - lo : b - lo + 1] = full_order[a : b + 1] <= pos
        runs = key_group_runs(mask & allowed, lo)
        if runs:
            out.append(FileSlice(e, io.url(e.path), (e.created_by_checkpoint_id, e.seq, e.path), e.kind in C.DELTA_KINDS, runs,
                                 runs == ((e.key_group_start, e.key_group_end),)))
    return out


def key_groups_held(io: FileIO, s: FileSlice) -> np.ndarray:
    """The key groups of a slice's ranges its file holds rows of (sorted): its `key_group` column, the one column read (a
    delta's ranges are those of its file; the rows it holds, a few key groups of them or all)."""
    import pyarrow.parquet as pq

    from flinkstate.core.errors import CorruptFileError

    try:
        with io.open(s.entry.path, "rb") as f:
            kg = pq.ParquetFile(f).read(columns=[C.COL_KEY_GROUP]).column(0).to_numpy()
    except (OSError, pa.ArrowException) as e:
        raise CorruptFileError(f"data file {s.url} of operator {s.entry.operator!r} state {s.entry.state!r} is unreadable: {e}") from e
    held = np.unique(kg)
    keep = np.zeros(len(held), dtype=bool)
    for a, b in s.key_group_ranges:
        keep |= (held >= a) & (held <= b)
    return held[keep]
