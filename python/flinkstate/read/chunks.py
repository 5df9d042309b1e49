"""A flinkstate store task's rows a key-group sub-range at a time, read as they come (`format.stream.RangeStream`).

`StateScanTask.chunk_reader` and `TimerScanTask.chunk_reader` return these: each sub-range's rows are merged from the
row groups that hold them and shaped as the task's `to_batches` shapes them, so a reader of a large range (an export
subtask) holds about one sub-range's rows, not the range's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager

import pyarrow as pa

from flinkstate.format.stream import RangeStream
from flinkstate.read.scan import ChunkReader

__all__ = ["StreamChunks", "opened"]


class StreamChunks(ChunkReader):
    """Sub-ranges of one or more merged streams (a state, or each timer service of a task), each shaped by `shape`
    (None when a stream has no rows there) and concatenated in stream order, under `guard` (a missing file's recheck)."""

    def __init__(self, streams: list[RangeStream], shape: Callable[[int, pa.Table | None], pa.Table | None], schema: pa.Schema,
                 guard: Callable[[], AbstractContextManager[None]]) -> None:
        self.streams, self.shape, self.schema, self.guard = streams, shape, schema, guard
        self.nbytes = sum(s.uncompressed_bytes() for s in streams)

    def take(self, lo: int, hi: int) -> pa.Table:
        with self.guard():
            parts = [t for i, s in enumerate(self.streams) if (t := self.shape(i, s.take(lo, hi))) is not None and t.num_rows]
        if not parts:
            return self.schema.empty_table()
        return parts[0] if len(parts) == 1 else pa.concat_tables(parts)

    def close(self) -> None:
        for s in self.streams:
            s.close()
        self.streams = []


def opened(make: Iterator[RangeStream]) -> list[RangeStream]:
    """Every stream make yields, all closed again when one fails to open."""
    out: list[RangeStream] = []
    try:
        for s in make:
            out.append(s)
    except BaseException:
        for s in out:
            s.close()
        raise
    return out
