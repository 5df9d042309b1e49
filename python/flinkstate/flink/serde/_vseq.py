"""Sequences of variable-width values decoded in lockstep: element j of every sequence at once, with numpy.

A sequence's element j starts where its element j - 1 ends, so the elements of one sequence cannot
be located without decoding the ones before them. Across sequences they can: step j decodes the
j-th element of every sequence that has one with the vector reader of the element type. The steps
are as many as the longest sequence has elements; each is one vector-reader call over the
sequences still going, so the work is proportional to the elements, not to the sequences times the
longest. Used for Flink's String[] and generic arrays and for ListState values of variable width.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa

__all__ = ["lockstep", "lockstep_delimited"]

# (source, positions, present mask or None) -> (values, positions after them): a _vector.VReader
Reader = Callable[[Any, np.ndarray, "np.ndarray | None"], tuple[pa.Array, np.ndarray]]


def _row_major(chunks: list[pa.Array], rows: list[np.ndarray], counts: np.ndarray, typ: pa.DataType) -> pa.Array:
    """The chunks of step-major elements (chunk j: element j of sequences rows[j]) in sequence order."""
    if not chunks:
        return pa.array([], typ)
    values = pa.concat_arrays(chunks)
    first = np.cumsum(counts) - counts
    dest = np.concatenate([first[r] + j for j, r in enumerate(rows)])
    take = np.empty(len(dest), np.int64)
    take[dest] = np.arange(len(dest))
    return values.take(pa.array(take))


def lockstep(src: Any, arr: np.ndarray, elem: Reader, start: np.ndarray, counts: np.ndarray, flagged: bool,
             typ: pa.DataType) -> tuple[pa.Array, np.ndarray]:
    """counts[i] elements from start[i] (each led by a presence byte when flagged): (elements in order, end positions)."""
    cur = start.astype(np.int64, copy=True)
    if len(counts) and int(counts.max()) > len(arr):
        raise ValueError("an array is longer than its stream")  # every element takes at least one byte
    act = np.flatnonzero(counts > 0)  # the sequences still going, in stream order (so their values are too)
    chunks: list[pa.Array] = []
    rows: list[np.ndarray] = []
    j = 0
    while len(act):
        p = cur[act]
        present = None
        if flagged:
            if len(p) and int(p.max()) >= len(arr):
                raise IndexError("an array element runs past the end of its record")
            present = arr[p] != 0
            p = p + 1
        v, p = elem(src, p, present)
        cur[act] = p
        chunks.append(v)
        rows.append(act)
        j += 1
        act = act[counts[act] > j]  # each step looks only at the sequences of the step before: work ~ elements
    return _row_major(chunks, rows, counts, typ), cur


def lockstep_delimited(src: Any, arr: np.ndarray, elem: Reader, start: np.ndarray, end: np.ndarray,
                       typ: pa.DataType) -> tuple[pa.Array, np.ndarray]:
    """Elements from start[i] to end[i], one ',' between two (ListState's format): (elements in order, counts)."""
    cur = start.astype(np.int64, copy=True)
    counts = np.zeros(len(start), np.int64)
    act = np.flatnonzero(end > cur)
    chunks: list[pa.Array] = []
    rows: list[np.ndarray] = []
    while len(act):
        v, p = elem(src, cur[act], None)
        chunks.append(v)
        rows.append(act)
        counts[act] += 1
        over = p > end[act]
        if over.any():
            raise ValueError("a list element runs past the end of its value")
        more = p < end[act]
        if (arr[p[more]] != 0x2C).any():
            raise ValueError("list elements are not ','-delimited")
        cur[act] = np.where(more, p + 1, p)
        act = act[more]
        if len(act) and (cur[act] >= end[act]).any():
            raise ValueError("a list value ends with ','")
    steps = rows
    return _row_major(chunks, steps, counts, typ), counts
