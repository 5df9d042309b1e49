"""Locate every record of a canonical keyed-state stream with numpy, without walking it record by record.

A key group's stream is `u16 stateId` then records `i32 klen, key, i32 vlen, value`, where the
first key byte is the key group prefix with the metadata-follows flag; after a flagged record a
u16 names the next state, or 0xFFFF ends the key group. Within a key group, every byte offset that
could start a record (a klen below 65536 and the key group's prefix four bytes later) is a
candidate; each candidate's successor (`next`) is computed at once. The real records are the chain
from the key group's first record: candidates that no surviving candidate points to are dropped
until none is, and the survivors are accepted only if they form one closed chain ending at the
key group's end (then, as `next` is increasing, they are exactly the records). Otherwise the
caller falls back to the record-by-record loop, which also names what is wrong. The framing keeps
each record's key and value length and each key group's runs of one state (`Framing`), so
decoding a state joins slices of its runs and reads no length again.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Framing", "frame_records"]

_END_OF_KEY_GROUP = 0xFFFF
_PRUNE_ROUNDS = 4
_BLOCK = 1 << 17


@dataclass
class _KeyGroupFrame:
    """The records of one key group: starts (in the stream), key and value lengths, and its runs of one state each
    (run k: records bounds[k]..bounds[k + 1], of state sids[k])."""

    kg: int
    starts: np.ndarray
    klen: np.ndarray
    vlen: np.ndarray
    sids: list[int]
    bounds: list[int]


class Framing:
    """Every record of a stream, per key group, with each record's key and value length (read by the framing, so
    decoding does not read them again). A state's records come out by `records`, in stream order: a key group holds
    them in runs, so they are joined from slices, not gathered one by one."""

    def __init__(self, groups: list[_KeyGroupFrame]) -> None:
        self.groups = groups
        self._runs: dict[int, list[tuple[_KeyGroupFrame, int, int]]] | None = None

    def _by_state(self) -> dict[int, list[tuple[_KeyGroupFrame, int, int]]]:
        if self._runs is None:
            runs: dict[int, list[tuple[_KeyGroupFrame, int, int]]] = {}
            for g in self.groups:
                for k, sid in enumerate(g.sids):
                    runs.setdefault(sid, []).append((g, g.bounds[k], g.bounds[k + 1]))
            self._runs = runs
        return self._runs

    def records(self, sid: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(starts, key groups, key lengths, value lengths) of the records of state sid, in stream order."""
        runs = self._by_state().get(sid, [])
        if not runs:
            return np.zeros(0, np.int64), np.zeros(0, np.int32), np.zeros(0, np.uint16), np.zeros(0, np.int32)
        starts = np.concatenate([g.starts[a:b] for g, a, b in runs])
        kgs = np.repeat(np.array([g.kg for g, _, _ in runs], np.int32), [b - a for _, a, b in runs])
        klen = np.concatenate([g.klen[a:b] for g, a, b in runs])
        vlen = np.concatenate([g.vlen[a:b] for g, a, b in runs])
        return starts, kgs, klen, vlen


def _be(a: np.ndarray, pos: np.ndarray, width: int) -> np.ndarray:
    """Big-endian unsigned ints of `width` bytes at pos (within a), as int64."""
    view = np.ndarray((len(a) - width + 1,), ">u4" if width == 4 else ">u2", buffer=a, strides=(1,))
    return view[pos].astype(np.int64)


def _candidates(a: np.ndarray, kg: int, prefix: int) -> np.ndarray:
    """Every offset c that may start a record: klen (i32 at c) below 65536 and above prefix, then the key group's
    prefix (flag bit aside). Byte comparisons over the stream, so only the few candidates are gathered; block by block
    (of _BLOCK bytes), so the comparisons' operands and results stay in the processor's cache."""
    end = len(a) - 6 - prefix  # c < end: a record needs klen, prefix and vlen at least
    lead = kg >> 8 if prefix == 2 else kg
    found = []
    for s in range(2, end, _BLOCK):
        e = min(end, s + _BLOCK)
        m = a[s:e] == 0
        t = np.empty_like(m)
        m &= np.equal(a[s + 1 : e + 1], 0, out=t)
        m &= np.equal(a[s + 4 : e + 4] & 0x7F, lead, out=t)
        if prefix == 2:
            m &= np.equal(a[s + 5 : e + 5], kg & 0xFF, out=t)
        m &= np.greater(a[s + 3 : e + 3], prefix, out=t) | (a[s + 2 : e + 2] != 0)  # klen > prefix: no runs of zeros
        at = np.flatnonzero(m)
        at += s
        found.append(at)
    return np.concatenate(found) if found else np.zeros(0, np.int64)


def _frame_key_group(a: np.ndarray, kg: int, prefix: int, n_states: int) -> _KeyGroupFrame | None:
    """The records of one key group's stream a (from its first u16 to its end; starts within a), or None."""
    n = len(a)
    if n < 2 + 9:
        return None
    c = _candidates(a, kg, prefix)
    m = len(c)
    if m == 0 or c[0] != 2:
        return None
    klen = (a[c + 2].astype(np.int32) << 8) | a[c + 3]
    vpos = c + 4 + klen
    ok = vpos <= n - 4
    vlen = _be(a, np.where(ok, vpos, 0), 4)
    nxt = vpos + 4 + vlen  # where the record ends; after a flagged one, where its u16 ends (below)
    ok &= (nxt <= n) & (vlen < 2**31)  # Flink's i32: not negative
    flag = np.flatnonzero(a[c + 4] >= 0x80)  # records followed by a u16: the next state's id, or the key group's end
    nxt[flag] += 2
    f_ok = ok[flag] & (nxt[flag] <= n)
    follow = np.full(len(flag), -1, np.int64)
    follow[f_ok] = _be(a, nxt[flag][f_ok] - 2, 2)
    f_end = follow == _END_OF_KEY_GROUP
    terminal = np.zeros(m, bool)
    terminal[flag[f_end & (nxt[flag] == n)]] = True
    inner = ok.copy()  # alive candidates that go on to a next record
    inner[flag] &= f_ok & ~f_end
    alive = inner | terminal
    jump, direct = _jumps(c, nxt)
    for _ in range(_PRUNE_ROUNDS):  # drop candidates that no surviving candidate points to (the first record stays)
        go = alive & inner
        pointed = np.zeros(m + 1, bool)
        pointed[1:m] = go[:-1] & direct[:-1]
        far = np.flatnonzero(go & ~direct)
        pointed[jump[far]] = True
        pointed[0] = True
        still = alive & pointed[:-1]
        if np.array_equal(still, alive):
            break
        alive = still
    else:  # long chains of false candidates: take the chain from the first record by pointer doubling
        alive = _orbit(jump, alive & inner)
    rec = np.flatnonzero(alive)
    if len(rec) == 0 or rec[0] != 0 or not terminal[rec[-1]] or terminal[rec[:-1]].any():
        return None
    starts = c[rec]
    if (nxt[rec[:-1]] != starts[1:]).any():  # one closed chain from the first record to the end
        return None
    ends = np.searchsorted(rec, flag[alive[flag]])  # each run's last record (the last record is one)
    run_sid = np.empty(len(ends), np.int64)  # the state of each run: the stream's first u16, then each run's follower
    run_sid[0] = _be(a, np.array([0]), 2)[0]
    run_sid[1:] = _be(a, nxt[rec[ends[:-1]]] - 2, 2)
    if (run_sid >= n_states).any():
        return None
    return _KeyGroupFrame(kg, starts, klen[rec].astype(np.uint16), vlen[rec].astype(np.int32), run_sid.tolist(),
                          [0, *(ends + 1).tolist()])


def _jumps(c: np.ndarray, nxt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per candidate, the index of the candidate starting where it ends (len(c) when none does), and whether that is
    the next candidate. Most records end where the next candidate starts (false candidates are rare), so only the
    others are searched for."""
    m = len(c)
    jump = np.arange(1, m + 1)
    direct = np.zeros(m, bool)
    np.equal(nxt[:-1], c[1:], out=direct[:-1])
    rest = np.flatnonzero(~direct)  # the last candidate among them
    idx = np.searchsorted(c, nxt[rest])
    found = idx < m
    found[found] &= c[idx[found]] == nxt[rest[found]]
    jump[rest] = np.where(found, idx, m)
    return jump, direct


def _orbit(jump: np.ndarray, inner: np.ndarray) -> np.ndarray:
    """The candidates reachable from the first one by following jump (inner ones only continue)."""
    m = len(jump)
    jump = np.append(np.where(inner, jump, m), m)
    reached = np.zeros(m + 1, bool)
    reached[0] = True
    frontier = np.array([0])
    while True:  # after round k, every candidate within 2^k steps is reached
        new = jump[frontier]
        if reached[new].all():
            break
        reached[new] = True
        frontier = np.flatnonzero(reached)
        jump = jump[jump]
    return reached[:m]


def frame_records(arr: np.ndarray, groups: list[tuple[int, int]], end: int, prefix: int, n_states: int) -> Framing | None:
    """Every record of a stream whose key groups start at groups' offsets.

    groups holds (key group, offset of its first u16) in stream order; each key group's stream
    runs to the next one's offset (or end). None when the chains cannot be verified.
    """
    order = sorted(groups, key=lambda g: g[1])
    frames = []
    for i, (kg, off) in enumerate(order):
        stop = order[i + 1][1] if i + 1 < len(order) else end
        found = _frame_key_group(arr[off:stop], kg, prefix, n_states)
        if found is None:
            return None
        found.starts += off
        frames.append(found)
    return Framing(frames)
