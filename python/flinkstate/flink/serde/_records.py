"""Decode the canonical records of one state, located by their start offsets, into Arrow columns at once.

A record is `i32 klen, key, i32 vlen, value` where key = key-group prefix (its first bit is the
metadata-follows flag) + key + namespace [+ map user key]. The framing loop only collects where
each record starts; lengths, key groups, keys, namespaces and values are then read with numpy
for all records of the state (`_vector`). LIST values are split into their ','-delimited
elements (with or without TTL): by arithmetic when these have a fixed width, else element j of
every list at once (`_vseq`); MAP values are a null flag + value.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from flinkstate.flink.serde._vector import Source, VReader, gather, segments, vector_reader
from flinkstate.flink.serde._vseq import lockstep_delimited
from flinkstate.flink.serde.serializers import FIXED_WIDTH, TypeNode, arrow_type

__all__ = ["RecordPlan", "record_plan"]


class RecordPlan:
    """How to read one state's records with vector readers: key, namespace, [user key], element (TTL unwrapped)."""

    def __init__(self, kind: str, prefix: int, key: VReader, ns: VReader | None, user_key: VReader | None,
                 elem: VReader | None, ttl: bool, list_width: int, elem_type: pa.DataType | None = None) -> None:
        self.kind, self.prefix, self.key, self.ns, self.user_key = kind, prefix, key, ns, user_key
        self.elem, self.ttl, self.list_width, self.elem_type = elem, ttl, list_width, elem_type

    def columns(self, src: Source, starts: np.ndarray, kgs: np.ndarray,
                lengths: tuple[np.ndarray, np.ndarray] | None = None) -> dict[str, pa.Array]:
        """The columns (key_group, key, [namespace], [user_key], value, [ttl_last_access]) of these records. lengths:
        their key and value lengths as framing read them (it also checked each key's key group), else read here."""
        arr = src.arr
        kpos = starts + 4
        if lengths is None:
            klen = gather(arr, starts, ">i4").astype(np.int64)
            if (klen <= 0).any():
                raise ValueError("a record has a key of no bytes")
            vpos = kpos + klen + 4
            vlen = gather(arr, vpos - 4, ">i4").astype(np.int64)
            if (vlen < 0).any() or int((vpos + vlen).max()) > len(arr):
                raise IndexError("a record runs past the end of its key group")
            stored = (arr[kpos] & 0x7F).astype(np.int32)
            if self.prefix == 2:
                stored = stored * 256 + arr[kpos + 1]
            if (stored != kgs).any():
                raise ValueError(f"a key carries key group {int(stored[np.flatnonzero(stored != kgs)[0]])}")
        else:
            klen, vlen = lengths[0].astype(np.int64), lengths[1].astype(np.int64)
            vpos = kpos + klen + 4
        return self.split_columns(src, kpos, klen, src, vpos, vlen, kgs)

    def split_columns(self, ksrc: Source, kpos: np.ndarray, klen: np.ndarray, vsrc: Source, vpos: np.ndarray,
                      vlen: np.ndarray, kgs: np.ndarray) -> dict[str, pa.Array]:
        """The columns of records whose keys (key-group prefix first) are at kpos of ksrc and values at vpos of vsrc:
        framed records (one stream for both) or keys and values held apart (a RocksDB column family's)."""
        if len(vpos) and int((vpos + vlen).max()) > len(vsrc.arr):
            raise IndexError("a record runs past the end of its key group")
        cols: dict[str, pa.Array] = {"key_group": pa.array(kgs, pa.int32())}
        if self.kind == "TIMER":
            return self._timers(ksrc, cols, kpos, klen, vlen)
        cols["key"], pos = self.key(ksrc, kpos + self.prefix, None)
        if self.ns is None:
            if ksrc.arr[pos].any():
                raise ValueError("a VoidNamespace byte is not 0")
            pos = pos + 1
        else:
            cols["namespace"], pos = self.ns(ksrc, pos, None)
        if self.kind == "MAP":
            cols["user_key"], pos = self.user_key(ksrc, pos, None)
            present = vsrc.arr[vpos] == 0
            value_start, value_present = vpos + 1, present
        else:
            value_start, value_present = vpos, None
        if (pos != kpos + klen).any():
            raise ValueError("unread bytes in a key")
        if self.kind == "LIST":
            return self._list(vsrc, cols, vpos, vlen)
        self._values(vsrc, cols, value_start, value_present, vpos + vlen)
        return cols

    def _timers(self, src: Source, cols: dict[str, pa.Array], kpos: np.ndarray, klen: np.ndarray,
                vlen: np.ndarray) -> dict[str, pa.Array]:
        """Timer records: key = prefix + (timestamp ^ sign bit) + key + namespace, no value."""
        raw = gather(src.arr, kpos + self.prefix, ">u8")
        ts = pa.array((raw ^ np.uint64(1 << 63)).view(np.int64))
        cols["key"], pos = self.key(src, kpos + self.prefix + 8, None)
        if self.ns is None:
            if src.arr[pos].any():
                raise ValueError("a VoidNamespace byte is not 0")
            pos = pos + 1
        else:
            cols["namespace"], pos = self.ns(src, pos, None)
        if (pos != kpos + klen).any() or vlen.any():
            raise ValueError("unread bytes in a timer")
        cols["timestamp"] = ts
        return cols

    def _values(self, src: Source, cols: dict[str, pa.Array], pos: np.ndarray, present: np.ndarray | None,
                end: np.ndarray) -> None:
        read = self.elem if self.elem is not None else _rest(end)  # None: a value of unknown layout, kept as its bytes
        if self.ttl:
            ts, pos = _LONG(src, pos, present)
            cols["value"], pos = read(src, pos, present)
            cols["ttl_last_access"] = ts
        else:
            cols["value"], pos = read(src, pos, present)
        if (pos != end).any():
            raise ValueError("unread bytes in a value")

    def _list(self, src: Source, cols: dict[str, pa.Array], vpos: np.ndarray, vlen: np.ndarray) -> dict[str, pa.Array]:
        """One row per element: elements of list_width bytes, each followed by ',' but the last."""
        w = self.list_width
        if w < 0:
            return self._list_variable(src, cols, vpos, vlen)
        if (vlen % (w + 1) != w).any():
            raise ValueError(f"a list value is not ','-delimited {w}-byte elements")
        counts = (vlen + 1) // (w + 1)
        rows = np.repeat(np.arange(len(vpos)), counts)
        first = np.cumsum(counts) - counts
        starts = vpos[rows] + (np.arange(len(rows)) - first[rows]) * (w + 1)
        last = np.zeros(len(rows), bool)
        last[first + counts - 1] = True
        if (src.arr[starts[~last] + w] != 0x2C).any():
            raise ValueError("list elements are not ','-delimited")
        take = pa.array(rows)
        out = {name: col.take(take) for name, col in cols.items()}
        self._values(src, out, starts, None, starts + w)
        return out


    def _list_variable(self, src: Source, cols: dict[str, pa.Array], vpos: np.ndarray, vlen: np.ndarray) -> dict[str, pa.Array]:
        """One row per element of variable width: element j of every list decoded at once, up to its ','."""
        if (vlen == 0).any():
            raise ValueError("a list value has no bytes")
        elem, typ = self.elem, self.elem_type
        if self.ttl:
            inner = self.elem

            def elem(s: Source, pos: np.ndarray, present: np.ndarray | None) -> tuple[pa.Array, np.ndarray]:
                ts, pos = _LONG(s, pos, present)
                v, pos = inner(s, pos, present)
                return pa.StructArray.from_arrays([v, ts], names=["v", "t"]), pos

            typ = pa.struct([("v", typ), ("t", pa.int64())])
        values, counts = lockstep_delimited(src, src.arr, elem, vpos, vpos + vlen, typ)
        out = {name: col.take(pa.array(np.repeat(np.arange(len(vpos)), counts))) for name, col in cols.items()}
        if self.ttl:
            out["value"], out["ttl_last_access"] = values.field("v"), values.field("t")
        else:
            out["value"] = values
        return out


def _rest(end: np.ndarray) -> VReader:
    """A reader of the bytes from each position to its value's end (a Kryo/Avro value: the record frames it alone)."""

    def read(src: Source, pos: np.ndarray, present: np.ndarray | None) -> tuple[pa.Array, np.ndarray]:
        n = end - pos if present is None else np.where(present, end - pos, 0)
        if (n < 0).any():
            raise ValueError("a value is shorter than its TTL timestamp")
        offsets = np.zeros(len(pos) + 1, np.int64)
        np.cumsum(n, out=offsets[1:])
        data = src.arr[segments(pos, n)]
        validity = None if present is None or present.all() else pa.array(present).buffers()[1]
        nulls = 0 if present is None else int(len(pos) - present.sum())
        out = pa.Array.from_buffers(pa.large_binary(), len(pos), [validity, pa.py_buffer(offsets), pa.py_buffer(data)], nulls)
        return out, end if present is None else np.where(present, end, pos)

    return read


def _long_reader() -> VReader:
    return vector_reader(TypeNode("long", "i64"), "")  # type: ignore[return-value]


_LONG = _long_reader()


def record_plan(kind: str, prefix: int, key: TypeNode, ns: TypeNode, value: TypeNode | None, ctx: str,
                raw_rest: bool = False) -> RecordPlan | None:
    """A RecordPlan for a VALUE/REDUCING/AGGREGATING/LIST/MAP state or a timer service when every part has a vector reader.

    raw_rest: the value (a VALUE/MAP state's, inside its TTL wrapper if any) has no decoder and is read as the bytes up to
    its record's end, as Kryo and Avro values are kept."""
    if kind == "TIMER":
        key_reader = vector_reader(key, ctx)
        ns_reader = None if ns.kind == "void" else vector_reader(ns, ctx)
        if key_reader is None or (ns.kind != "void" and ns_reader is None):
            return None
        return RecordPlan(kind, prefix, key_reader, ns_reader, None, key_reader, False, 0)
    if kind not in ("VALUE", "REDUCING", "AGGREGATING", "LIST", "MAP") or value is None:
        return None
    if key.fixed_width < 0 and ns.fixed_width < 0:
        return None  # length-suffixed ("ambiguous") composite keys: record by record
    key_reader = vector_reader(key, ctx)
    ns_reader = None if ns.kind == "void" else vector_reader(ns, ctx)
    if key_reader is None or (ns.kind != "void" and ns_reader is None):
        return None
    user_key = None
    elem = value
    if kind == "MAP":
        user_key = vector_reader(value.children[0], ctx)
        if user_key is None:
            return None
        elem = value.children[1]
    elif kind == "LIST":
        elem = value.children[0]
    ttl = elem.kind == "ttl"
    inner = elem.children[1] if ttl else elem
    list_width = 0
    if kind == "LIST":  # fixed-width elements are found by arithmetic; others by decoding them (-1)
        fixed = inner.kind in FIXED_WIDTH and inner.kind not in ("char", "void")
        list_width = FIXED_WIDTH[inner.kind] + (8 if ttl else 0) if fixed else -1
    if raw_rest and kind != "LIST":
        return RecordPlan(kind, prefix, key_reader, ns_reader, user_key, None, ttl, 0, pa.large_binary())
    elem_reader = vector_reader(inner, ctx)
    if elem_reader is None:
        return None
    return RecordPlan(kind, prefix, key_reader, ns_reader, user_key, elem_reader, ttl, list_width, arrow_type(inner))
