"""A RocksDB MANIFEST's VersionEdits parsed all at once with numpy, and their live files found by sorting, not replaying.

A long-running job's MANIFEST holds tens of thousands of edits: parsing each in Python costs more than the SSTs they
name. Here every record is parsed in lockstep (step j reads the j-th field of every record that has one; a
kNewFile4's custom fields take one step each), giving arrays of the files added and deleted and each record's column
family. File numbers are never reused, so a file is live when the last event naming it (in record order, an edit's
deletions before its additions) is an addition. Anything this does not model exactly (a column family dropped or
added twice, an edit naming a family not yet added, an unknown tag, a field past its record, a file number in two
families) is `Irregular`: the caller replays the edits one by one, which reads it or names what is wrong.
Tags and layout: RocksDB `db/version_edit.cc` (see `manifest`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Irregular", "LiveArrays", "scan"]

_PAD = 128  # zero bytes after the records: the varints read between two bounds checks stay inside the buffer
# what a tag's field is, by tag (bit 13 set: length-prefixed and skippable; tags past the table are that or unknown)
_UNKNOWN, _VARINT, _SKIP, _CURSOR, _DELETED, _CF_ADD, _CF_DROP, _NEW_FILE = range(8)
_KIND = np.full(1 << 14, _UNKNOWN, np.uint8)
_KIND[[2, 3, 4, 9, 10, 200, 203, 300]] = _VARINT  # log number, next file, last sequence, prev log, min log, cf, max cf, atomic group
_KIND[1], _KIND[1 << 13 :] = _SKIP, _SKIP  # the comparator's name, and every safe-to-ignore tag
_KIND[5], _KIND[6], _KIND[201], _KIND[202] = _CURSOR, _DELETED, _CF_ADD, _CF_DROP
_KIND[[7, 100, 102, 103]] = _NEW_FILE
_MASK = np.uint64(0x3FFFFFFFFFFFFFFF)


class Irregular(Exception):  # noqa: N818 (not an error: the signal to replay the edits one by one)
    """The MANIFEST holds something the lockstep scan does not model: the caller replays its edits one by one."""


@dataclass(frozen=True)
class LiveArrays:
    """The live files: numbers (ascending, unique), sizes, column family ids, where their smallest and largest internal
    keys are in buf ((start, length) rows); and the families' names by id."""

    numbers: np.ndarray
    sizes: np.ndarray
    families: np.ndarray
    names: dict[int, str]
    bounds: np.ndarray
    buf: np.ndarray


def _varints(buf: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(u64 values, positions after) of the varint at each position."""
    b = buf[pos]
    val = (b & 0x7F).astype(np.uint64)
    after = pos + 1
    more = np.flatnonzero(b >= 0x80)
    shift = 7
    while len(more):
        if shift > 63:
            raise Irregular("a varint over 10 bytes")
        b = buf[after[more]]
        val[more] |= (b & 0x7F).astype(np.uint64) << np.uint64(shift)
        after[more] += 1
        more = more[b >= 0x80]
        shift += 7
    return val, after


def _skip(buf: np.ndarray, pos: np.ndarray, end: np.ndarray) -> np.ndarray:
    """The positions after a length-prefixed field at each position, checked against the records' ends."""
    n, pos = _varints(buf, pos)
    _within(pos, end)
    pos = pos + n.astype(np.int64)
    _within(pos, end)
    return pos


def _within(pos: np.ndarray, end: np.ndarray) -> None:
    if (pos > end).any():
        raise Irregular("a field runs past its record")


@dataclass
class _Events:
    """What the steps found: per record its column family; files added and deleted (record, number, size, step)."""

    cf: np.ndarray
    added: list[tuple[np.ndarray, np.ndarray, np.ndarray, int, np.ndarray]]  # ..., (start, length) of smallest and largest keys
    deleted: list[tuple[np.ndarray, np.ndarray, int]]
    cf_adds: list[tuple[np.ndarray, np.ndarray, np.ndarray]]  # (records, name starts, name lengths)
    dropped: bool = False


def _step(buf: np.ndarray, recs: np.ndarray, pos: np.ndarray, ends: np.ndarray, ev: _Events, custom: np.ndarray,
          step: int) -> None:
    """One top-level field of each record in recs (at pos): pos and custom (in a kNewFile4's custom fields) updated."""
    end = ends[recs]
    tag, p = _varints(buf, pos[recs])
    _within(p, end)
    out = np.full(len(recs), -1, np.int64)
    kind = _KIND[np.minimum(tag, len(_KIND) - 1).astype(np.int64)]
    kind[(tag >= len(_KIND)) & ((tag & np.uint64(1 << 13)) == 0)] = _UNKNOWN
    one = kind == _VARINT
    if one.any():
        v, out[one] = _varints(buf, p[one])
        cfs = tag[one] == 200
        ev.cf[recs[one][cfs]] = v[cfs].astype(np.int64)
    skip = kind == _SKIP
    if skip.any():
        out[skip] = _skip(buf, p[skip], end[skip])
    cursor = kind == _CURSOR
    if cursor.any():
        out[cursor] = _skip(buf, _varints(buf, p[cursor])[1], end[cursor])
    dele = kind == _DELETED
    if dele.any():
        number, out[dele] = _varints(buf, _varints(buf, p[dele])[1])
        ev.deleted.append((recs[dele], number, step))
    name = kind == _CF_ADD
    if name.any():
        n, q = _varints(buf, p[name])
        ev.cf_adds.append((recs[name], q, n.astype(np.int64)))
        out[name] = q + n.astype(np.int64)
    drop = kind == _CF_DROP
    if drop.any():
        ev.dropped = True
        out[drop] = p[drop]
    new = kind == _NEW_FILE
    if new.any():
        out[new] = _new_files(buf, recs[new], tag[new], p[new], end[new], ev, custom, step)
    if (out < 0).any():
        raise Irregular("an unknown tag")
    _within(out, end)
    pos[recs] = out


def _new_files(buf: np.ndarray, recs: np.ndarray, tag: np.ndarray, p: np.ndarray, end: np.ndarray, ev: _Events,
               custom: np.ndarray, step: int) -> np.ndarray:
    """kNewFile, 2, 3, 4: level, number, (path id), size, smallest and largest keys, (sequence numbers)."""
    _, p = _varints(buf, p)
    number, p = _varints(buf, p)
    path = tag == 102
    if path.any():
        p[path] = _varints(buf, p[path])[1]
    size, p = _varints(buf, p)
    _within(p, end)
    bounds = np.empty((len(recs), 4), np.int64)  # smallest key's start and length, largest key's
    for i in (0, 2):
        n, p = _varints(buf, p)
        _within(p, end)
        bounds[:, i], bounds[:, i + 1] = p, n.astype(np.int64)
        p = p + bounds[:, i + 1]
        _within(p, end)
    seqs = tag != 7
    if seqs.any():
        p[seqs] = _varints(buf, _varints(buf, p[seqs])[1])[1]
    ev.added.append((recs, number & _MASK, size, step, bounds))
    custom[recs[tag == 103]] = True
    return p


def _custom(buf: np.ndarray, recs: np.ndarray, pos: np.ndarray, ends: np.ndarray, custom: np.ndarray) -> None:
    """One custom field of a kNewFile4 in each record of recs, or its kTerminate (1): the custom fields end."""
    end = ends[recs]
    tag, p = _varints(buf, pos[recs])
    _within(p, end)
    done = tag == 1
    custom[recs[done]] = False
    if (((tag & np.uint64(64)) != 0) & (tag != 65) & ~done).any():
        raise Irregular("a custom field that must be understood")
    p[~done] = _skip(buf, p[~done], end[~done])
    pos[recs] = p


def _parse(records: list[bytes]) -> tuple[_Events, np.ndarray]:
    lengths = np.fromiter(map(len, records), np.int64, len(records))
    ends = np.cumsum(lengths)
    pos = ends - lengths
    buf = np.frombuffer(b"".join([*records, bytes(_PAD)]), np.uint8)
    ev = _Events(np.zeros(len(records), np.int64), [], [], [])
    custom = np.zeros(len(records), bool)
    act = np.flatnonzero(pos < ends)
    step = 0
    while len(act):
        in_custom = custom[act]
        if in_custom.any():
            _custom(buf, act[in_custom], pos, ends, custom)
        if not in_custom.all():
            _step(buf, act[~in_custom], pos, ends, ev, custom, step)
        step += 1
        act = act[pos[act] < ends[act]]
        if custom.any() and (pos[custom] >= ends[custom]).any():
            raise Irregular("a record ends inside a new file's custom fields")
    return ev, buf


def scan(records: list[bytes]) -> LiveArrays:
    """The live files the edits (a MANIFEST's records) leave; Irregular for what only a replay one by one reads."""
    try:
        ev, buf = _parse(records)
    except IndexError as e:
        raise Irregular(str(e)) from e
    if ev.dropped:
        raise Irregular("a column family dropped")
    first = {0: -1}  # column family id -> the record adding it
    names = {0: "default"}
    for recs, starts, lengths in ev.cf_adds:
        for r, s, n in zip(recs.tolist(), starts.tolist(), lengths.tolist(), strict=True):
            cf = int(ev.cf[r])
            if cf in first:
                raise Irregular("a column family added twice")
            first[cf] = r
            try:
                names[cf] = buf[s : s + n].tobytes().decode("utf-8")
            except UnicodeDecodeError as e:
                raise Irregular("a column family name that is not UTF-8") from e
    ids = np.array(sorted(first), np.int64)
    at = np.searchsorted(ids, ev.cf)
    known = (at < len(ids)) & (ids[np.minimum(at, len(ids) - 1)] == ev.cf)
    since = np.array([first[i] for i in ids.tolist()], np.int64)
    if not known.all() or (since[at] > np.arange(len(ev.cf))).any():
        raise Irregular("an edit names a column family not yet added")
    return _last_events(ev, names, buf)


def _last_events(ev: _Events, names: dict[int, str], buf: np.ndarray) -> LiveArrays:
    """Per (family, number), the last event in (record, deletions first, step) order: live if it is an addition."""
    empty_u, empty_i = np.zeros(0, np.uint64), np.zeros(0, np.int64)
    a_rec = np.concatenate([empty_i, *(a[0] for a in ev.added)])
    d_rec = np.concatenate([empty_i, *(r for r, _, _ in ev.deleted)])
    rec = np.concatenate([d_rec, a_rec])
    number = np.concatenate([empty_u, *(n for _, n, _ in ev.deleted), *(a[1] for a in ev.added)])
    size = np.concatenate([np.zeros(len(d_rec), np.uint64), *(a[2] for a in ev.added)])
    step = np.concatenate([empty_i, *(np.full(len(r), s) for r, _, s in ev.deleted), *(np.full(len(a[0]), a[3]) for a in ev.added)])
    bounds = np.concatenate([np.zeros((len(d_rec), 4), np.int64), *(a[4] for a in ev.added)])
    is_add = np.arange(len(rec)) >= len(d_rec)
    cf = ev.cf[rec]
    order = np.lexsort((step, is_add, rec, number, cf))
    cf, number, is_add, size, bounds = cf[order], number[order], is_add[order], size[order], bounds[order]
    last = np.ones(len(order), bool)
    last[:-1] = (cf[1:] != cf[:-1]) | (number[1:] != number[:-1])
    keep = last & is_add
    number, size, cf, bounds = number[keep], size[keep], cf[keep], bounds[keep]
    by_number = np.argsort(number, kind="stable")
    number = number[by_number]
    if len(number) > 1 and (number[1:] == number[:-1]).any():
        raise Irregular("a file number live in two column families")
    return LiveArrays(number, size[by_number], cf[by_number], names, bounds[by_number], buf)
