"""Locate every record of a canonical keyed-state stream by one compiled walk over it (numba, flink/_jit.py).

A key group's stream is `u16 stateId` then records `i32 klen, key, i32 vlen, value`, where the first key byte is the
key group prefix with the metadata-follows flag; after a flagged record a u16 names the next state, or 0xFFFF ends
the key group. The walk follows each key group's records from its first to its end marker, checking each as it goes
(a key length below 65536 and over the prefix, the key group's prefix, lengths within the key group, state ids
known, the end marker exactly at the key group's end). When anything does not hold, the caller falls back to the
record-by-record loop, which also names what is wrong. The framing keeps each record's key and value length and each
key group's runs of one state (`Framing`), so decoding a state joins slices of its runs and reads no length again.
"""

from __future__ import annotations

import numpy as np

from flinkstate.flink._jit import kernel

__all__ = ["Framing", "frame_records"]


class Framing:
    """Every record of a stream, in stream order, with each record's key and value length (read by the framing, so
    decoding does not read them again), and its runs of one state: run r holds records bounds[r]..bounds[r + 1] of
    state sids[r] in key group kgs[r]. A state's records come out by `records`, in stream order."""

    def __init__(self, starts: np.ndarray, klen: np.ndarray, vlen: np.ndarray, kgs: np.ndarray, sids: np.ndarray,
                 bounds: np.ndarray) -> None:
        self.starts, self.klen, self.vlen = starts, klen, vlen
        self.kgs, self.sids, self.bounds = kgs, sids, bounds

    def records(self, sid: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(starts, key groups, key lengths, value lengths) of the records of state sid, in stream order."""
        runs = np.flatnonzero(self.sids == sid)
        first, stop = self.bounds[runs], self.bounds[runs + 1]
        count = stop - first
        at = np.repeat(first - (np.cumsum(count) - count), count) + np.arange(int(count.sum()))
        return self.starts[at], np.repeat(self.kgs[runs].astype(np.int32), count), self.klen[at], self.vlen[at]


@kernel
def _walk(arr: np.ndarray, kgs: np.ndarray, offs: np.ndarray, stops: np.ndarray, prefix: int, n_states: int,
          starts: np.ndarray, klens: np.ndarray, vlens: np.ndarray, run_kg: np.ndarray, run_sid: np.ndarray,
          run_first: np.ndarray) -> tuple[int, int]:
    """Every key group's records (kgs[i] from offs[i] to stops[i]): (records, runs), or (-1, -1) when one does not
    frame. The first pass (starts empty) only counts; the second writes each record's start, key and value length,
    and each run's key group, state and first record."""
    write = len(starts) > 0
    n, r = 0, 0
    for g in range(len(kgs)):
        kg, pos, stop = kgs[g], offs[g], stops[g]
        lead = kg >> 8 if prefix == 2 else kg
        if stop - pos < 2 + 9:
            return -1, -1
        sid = (np.int64(arr[pos]) << 8) | arr[pos + 1]
        pos += 2
        while True:
            if sid >= n_states:
                return -1, -1
            if write:
                run_kg[r], run_sid[r], run_first[r] = kg, sid, n
            r += 1
            while True:  # the records of one run: up to a flagged one
                if pos + 8 + prefix > stop:
                    return -1, -1
                klen = (np.int64(arr[pos]) << 24) | (np.int64(arr[pos + 1]) << 16) | (np.int64(arr[pos + 2]) << 8) | arr[pos + 3]
                head = np.int64(arr[pos + 4])
                if klen >= 65536 or klen <= prefix or (head & 0x7F) != lead or (prefix == 2 and arr[pos + 5] != (kg & 0xFF)):
                    return -1, -1
                v = pos + 4 + klen
                if v + 4 > stop:
                    return -1, -1
                vlen = (np.int64(arr[v]) << 24) | (np.int64(arr[v + 1]) << 16) | (np.int64(arr[v + 2]) << 8) | arr[v + 3]
                end = v + 4 + vlen
                if vlen >= 2**31 or end > stop:
                    return -1, -1
                if write:
                    starts[n], klens[n], vlens[n] = pos, klen, vlen
                n += 1
                pos = end
                if head >= 0x80:
                    break
            if pos + 2 > stop:
                return -1, -1
            sid = (np.int64(arr[pos]) << 8) | arr[pos + 1]
            pos += 2
            if sid == 0xFFFF:  # the key group's end: exactly there
                if pos != stop:
                    return -1, -1
                break
    return n, r


def frame_records(arr: np.ndarray, groups: list[tuple[int, int]], end: int, prefix: int, n_states: int) -> Framing | None:
    """Every record of a stream whose key groups start at groups' offsets.

    groups holds (key group, offset of its first u16) in stream order; each key group's stream
    runs to the next one's offset (or end). None when the chains cannot be verified.
    """
    order = np.array(sorted(groups, key=lambda g: g[1]), np.int64).reshape(-1, 2)
    kgs, offs = order[:, 0].copy(), order[:, 1].copy()
    stops = np.append(offs[1:], end)
    none = np.zeros(0, np.int64)
    n, r = _walk(arr, kgs, offs, stops, prefix, n_states, none, none, none, none, none, none)
    if n < 0:
        return None
    starts, klen, vlen = np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, np.int64)
    run_kg, run_sid, bounds = np.empty(r, np.int64), np.empty(r, np.int64), np.empty(r + 1, np.int64)
    _walk(arr, kgs, offs, stops, prefix, n_states, starts, klen, vlen, run_kg, run_sid, bounds[:-1])
    bounds[-1] = n
    return Framing(starts, klen.astype(np.uint16), vlen.astype(np.int32), run_kg, run_sid, bounds)
