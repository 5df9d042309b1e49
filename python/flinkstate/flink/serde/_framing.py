"""Locate every record of a canonical keyed-state stream with numpy, without walking it record by record.

A key group's stream is `u16 stateId` then records `i32 klen, key, i32 vlen, value`, where the
first key byte is the key group prefix with the metadata-follows flag; after a flagged record a
u16 names the next state, or 0xFFFF ends the key group. Within a key group, every byte offset that
could start a record (a klen below 65536 and the key group's prefix four bytes later) is a
candidate; each candidate's successor (`next`) is computed at once. The real records are the chain
from the key group's first record: candidates that no surviving candidate points to are dropped
until none is, and the survivors are accepted only if they form one closed chain ending at the
key group's end (then, as `next` is increasing, they are exactly the records). Otherwise the
caller falls back to the record-by-record loop, which also names what is wrong.
"""

from __future__ import annotations

import numpy as np

from flinkstate.flink.serde._vector import gather

__all__ = ["frame_records"]

_END_OF_KEY_GROUP = 0xFFFF
_PRUNE_ROUNDS = 4


def _be(a: np.ndarray, pos: np.ndarray, width: int) -> np.ndarray:
    return gather(a, pos, ">u4" if width == 4 else ">u2").astype(np.int64)


def _frame_key_group(a: np.ndarray, kg: int, prefix: int, n_states: int) -> tuple[np.ndarray, np.ndarray] | None:
    """(record starts, state ids) of one key group's stream a (from its first u16 to its end), or None."""
    n = len(a)
    if n < 2 + 9:
        return None
    last = n - 8 - prefix  # a record needs at least klen, prefix, vlen
    lead = kg >> 8 if prefix == 2 else kg
    tail = a[6 : last + 4]
    c = np.flatnonzero((tail & 0x7F) == lead) + 2  # the key group prefix (with or without flag)
    c = c[(a[c] == 0) & (a[c + 1] == 0)]  # klen < 65536
    if prefix == 2:
        c = c[a[c + 5] == (kg & 0xFF)]
    klen = (a[c + 2].astype(np.int64) << 8) | a[c + 3]
    real = klen > prefix  # drops the runs of zero bytes of small numbers, which key group 0's prefix matches throughout
    c, klen = c[real], klen[real]
    if len(c) == 0 or c[0] != 2:
        return None
    vpos = c + 4 + klen
    ok = vpos + 4 <= n
    vlen = _be(a, np.where(ok, vpos, 0), 4)
    vend = vpos + 4 + vlen
    ok &= (vlen >= 0) & (vlen < 2**31) & (vend <= n)
    flagged = (a[c + 4] & 0x80) != 0
    follow = np.full(len(c), -1, np.int64)  # the u16 after a flagged record
    has_u16 = ok & flagged & (vend + 2 <= n)
    follow[has_u16] = _be(a, vend[has_u16], 2)
    terminal = has_u16 & (follow == _END_OF_KEY_GROUP) & (vend + 2 == n)
    nxt = np.where(flagged, vend + 2, vend)
    inner = ok & ~terminal & (~flagged | has_u16) & (follow != _END_OF_KEY_GROUP)
    alive = ok & (inner | terminal)
    jump = _jumps(c, nxt)
    for _ in range(_PRUNE_ROUNDS):  # drop candidates that no surviving candidate points to (the first record stays)
        pointed = np.zeros(len(c) + 1, bool)
        pointed[jump[alive & inner]] = True
        pointed[0] = True
        still = alive & pointed[:-1]
        if (still == alive).all():
            break
        alive = still
    else:  # long chains of false candidates: take the chain from the first record by pointer doubling
        alive = _orbit(jump, alive & inner)
    rec = np.flatnonzero(alive)
    if len(rec) == 0 or rec[0] != 0 or not terminal[rec[-1]] or terminal[rec[:-1]].any():
        return None
    if (nxt[rec[:-1]] != c[rec[1:]]).any():  # one closed chain from the first record to the end
        return None
    starts = c[rec]
    run = np.concatenate(([0], np.cumsum(flagged[rec[:-1]])))
    run_sid = np.concatenate(([_be(a, np.array([0]), 2)[0]], follow[rec[:-1]][flagged[rec[:-1]]]))
    sids = run_sid[run]
    if (sids >= n_states).any():
        return None
    return starts, sids


def _jumps(c: np.ndarray, nxt: np.ndarray) -> np.ndarray:
    """Per candidate, the index of the candidate starting where it ends (len(c) when none does). Most records end where
    the next candidate starts (false candidates are rare), so only the others are searched for."""
    m = len(c)
    jump = np.full(m, m, np.int64)
    direct = np.zeros(m, bool)
    direct[:-1] = nxt[:-1] == c[1:]
    jump[direct] = np.flatnonzero(direct) + 1
    rest = np.flatnonzero(~direct)
    idx = np.searchsorted(c, nxt[rest])
    found = idx < m
    found[found] &= c[idx[found]] == nxt[rest[found]]
    jump[rest[found]] = idx[found]
    return jump


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


def frame_records(
    arr: np.ndarray, groups: list[tuple[int, int]], end: int, prefix: int, n_states: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(starts, state ids, key groups) of every record of a stream whose key groups start at groups' offsets.

    groups holds (key group, offset of its first u16) in stream order; each key group's stream
    runs to the next one's offset (or end). None when the chains cannot be verified.
    """
    order = sorted(groups, key=lambda g: g[1])
    starts, sids, kgs = [], [], []
    for i, (kg, off) in enumerate(order):
        stop = order[i + 1][1] if i + 1 < len(order) else end
        found = _frame_key_group(arr[off:stop], kg, prefix, n_states)
        if found is None:
            return None
        s, sid = found
        starts.append(s + off)
        sids.append(sid)
        kgs.append(np.full(len(s), kg, np.int32))
    if not starts:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int32)
    return np.concatenate(starts), np.concatenate(sids), np.concatenate(kgs)
