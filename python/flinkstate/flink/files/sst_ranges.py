"""Some key groups of SST files read by ranged reads: each file's tail (meta blocks and index) once, then only the
data blocks its index says may hold the key groups, in one read per file.

A subtask read a run of key groups at a time (`rocksdb.column_families`) would otherwise read and parse every SST
that meets a run once per run. Here an SST's index (`SstIndex`: its layout and every data block's offset, size and
key-group bound) is read from its tail once and kept by the caller for the next runs; a run then reads from each
file the span from its first to its last block that may hold the run. All non-data blocks follow the data blocks
(RocksDB `BlockBasedTableBuilder::Finish`), so the tail starts at the index or the metaindex block, whichever comes
first; a file whose properties come before that, or with a partitioned index (its partitions precede the top-level
index), is read whole for its index.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from flinkstate.flink.errors import CorruptFileError, UnsupportedFlinkFormatError
from flinkstate.flink.files.sst import _FOOTER, SstFile, _Batch, _data_blocks, _files, _footer, _keep, _Layout, _layout

__all__ = ["Fetch", "SstIndex", "read_indexes", "read_key_groups"]

Fetch = Callable[[int, int], bytes]  # (offset, length) -> those bytes of a file (fewer at its end)


@dataclass(frozen=True)
class SstIndex:
    """An SST's layout and its data blocks (file offsets, sizes, key-group bounds as `sst._data_blocks` gives them)."""

    layout: _Layout
    offsets: np.ndarray
    sizes: np.ndarray
    bounds: np.ndarray


def _read(fetch: Fetch, offset: int, length: int, size: int, where: str) -> bytes:
    data = fetch(offset, length)
    if len(data) != length:
        raise CorruptFileError(f"{where}: the SST ends at {offset + len(data)} bytes, not at {size} as its MANIFEST records")
    return data


def _tail(fetch: Fetch, size: int, where: str) -> tuple[bytes, int, _Layout]:
    """(tail bytes, its offset in the file, layout): the file from its first non-data block on, or whole."""
    if size < _FOOTER:
        raise CorruptFileError(f"{where}: too short for an SST file ({size} bytes)")
    (meta_off, _), (index_off, _) = _footer(_read(fetch, size - _FOOTER, _FOOTER, size, where), where)
    start = min(meta_off, index_off)
    if 0 < start < size - _FOOTER:
        tail = _read(fetch, start, size - start, size, where)
        try:
            lay = _layout(tail, where, start)
            if not lay.two_level:
                return tail, start, lay
        except IndexError:
            pass  # a meta block before the index: read whole
    data = _read(fetch, 0, size, size, where)
    return data, 0, _layout(data, where)


def read_indexes(files: Sequence[tuple[Fetch, int, str]], prefix: int) -> list[SstIndex]:
    """The index of each SST ((fetch, size, name) each), their index blocks parsed at once; an SST that cannot be
    read is a CorruptFileError naming it (the batch read again one file at a time to find it)."""
    if not files:
        return []
    try:
        tails = [_tail(fetch, size, where) for fetch, size, where in files]
        b = _Batch([t for t, _, _ in tails], [w for _, _, w in files])
        layouts = [lay for _, _, lay in tails]
        blocks, offsets, sizes, bounds = _data_blocks(b, layouts, prefix)
    except (CorruptFileError, UnsupportedFlinkFormatError, IndexError, ValueError, struct.error) as e:
        if len(files) > 1:
            for one in files:
                read_indexes([one], prefix)
        if isinstance(e, (CorruptFileError, UnsupportedFlinkFormatError)):
            raise
        raise CorruptFileError(f"{files[0][2] if len(files) == 1 else 'SSTs'}: corrupt SST file: {e}") from e
    out = []
    for i, lay in enumerate(layouts):
        mine = blocks == i
        out.append(SstIndex(lay, offsets[mine], sizes[mine], bounds[mine]))
    return out


def read_key_groups(files: Sequence[tuple[Fetch, int, str]], indexes: Sequence[SstIndex], key_groups: tuple[int, int, int]) -> list[SstFile]:
    """The records of each SST's data blocks that may hold keys of key_groups (prefix bytes, first, last): one ranged
    read per file, from its first such block to its last, all files' blocks parsed at once (`sst._files`)."""
    spans, wheres, sel = [], [], []
    for i, ((fetch, size, where), ix) in enumerate(zip(files, indexes, strict=True)):
        keep = _keep(np.zeros(len(ix.offsets), np.int64), ix.bounds, key_groups)
        wheres.append(where)
        if not keep.any():
            spans.append(b"")
            sel.append((keep, 0))
            continue
        start = int(ix.offsets[keep].min())
        end = int((ix.offsets + ix.sizes + 5)[keep].max())
        if end > size:
            raise CorruptFileError(f"{where}: a data block at {start} runs past the end of the file ({size} bytes)")
        spans.append(_read(fetch, start, end - start, size, where))
        sel.append((keep, start))
    b = _Batch(spans, wheres)
    blocks = np.concatenate([np.full(int(k.sum()), i, np.int64) for i, (k, _) in enumerate(sel)] or [np.zeros(0, np.int64)])
    offsets = np.concatenate([ix.offsets[k] - s for ix, (k, s) in zip(indexes, sel, strict=True)] or [np.zeros(0, np.int64)])
    sizes = np.concatenate([ix.sizes[k] for ix, (k, _) in zip(indexes, sel, strict=True)] or [np.zeros(0, np.int64)])
    whole = np.array([bool(k.all()) for k, _ in sel])
    try:
        return _files(b, [ix.layout for ix in indexes], wheres, blocks, offsets, sizes, whole)
    except (CorruptFileError, UnsupportedFlinkFormatError, IndexError, ValueError, struct.error) as e:
        if len(files) > 1:
            for one, ix in zip(files, indexes, strict=True):
                read_key_groups([one], [ix], key_groups)
        if isinstance(e, (CorruptFileError, UnsupportedFlinkFormatError)):
            raise
        raise CorruptFileError(f"{files[0][2] if len(files) == 1 else 'SSTs'}: corrupt SST file: {e}") from e
