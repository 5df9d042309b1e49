"""Vectorised decoding of runs of fixed-width records (numpy over the framed buffer).

In a canonical key group, the records of one state follow each other. When the key, namespace
and value serializers all have a fixed width (Long/Int/Short/Byte/Double/Float/Boolean keys and
values, VoidNamespace, optionally TTL-wrapped; timers of such keys), every record of the run has
the same length, so the run is a strided block: its end is the first record whose key carries
the metadata-follows flag, and its columns are gathered with numpy instead of a Python loop.
"""

from __future__ import annotations

import numpy as np

from flinkstate.flink.serializers import TypeNode

__all__ = ["FixedRun", "fixed_run_spec"]

_DTYPES = {"long": ">i8", "int": ">i4", "short": ">i2", "byte": "i1", "double": ">f8", "float": ">f4", "bool": "u1"}
_CHUNK = 4096


def _width(node: TypeNode) -> int:
    return np.dtype(_DTYPES[node.kind]).itemsize


def _gather(arr: np.ndarray, starts: np.ndarray, node: TypeNode) -> np.ndarray:
    """The fixed-width values at byte offsets starts, as a native-endian numpy array."""
    w = _width(node)
    block = arr[starts[:, None] + np.arange(w)]
    values = np.ascontiguousarray(block).view(_DTYPES[node.kind]).ravel()
    if node.kind == "bool":
        return values != 0
    return values.astype(values.dtype.newbyteorder("="))


class FixedRun:
    """The layout of one state's fixed-width records and its decoded column chunks."""

    def __init__(self, prefix: int, key: TypeNode, ns_width: int, value: TypeNode | None, ttl: bool, timer: bool) -> None:
        self.prefix, self.key, self.value, self.ttl, self.timer = prefix, key, value, ttl, timer
        self.key_off = prefix + (8 if timer else 0)
        self.klen = self.key_off + _width(key) + ns_width
        self.vlen = (0 if value is None else _width(value)) + (8 if ttl else 0)
        self.stride = 8 + self.klen + self.vlen
        self.chunks: dict[str, list[np.ndarray]] = {}

    def _add(self, name: str, values: np.ndarray) -> None:
        self.chunks.setdefault(name, []).append(values)

    def run(self, arr: np.ndarray, pos: int, kg: int) -> int:
        """Decode the run starting at pos (key group kg); return the offset after its last record."""
        s = self.stride
        count = 0
        while True:  # find the flagged (last) record, a chunk of candidates at a time
            n = min(_CHUNK, (len(arr) - pos) // s - count)
            if n <= 0:
                raise IndexError("a run of records runs past the end of the key group")
            flags = arr[pos + 4 + s * (count + np.arange(n))] & 0x80
            hit = np.flatnonzero(flags)
            if len(hit):
                count += int(hit[0]) + 1
                break
            count += n
        starts = pos + s * np.arange(count)
        lens = _gather(arr, starts, _I32)
        vlens = _gather(arr, starts + 4 + self.klen, _I32)
        if (lens != self.klen).any() or (vlens != self.vlen).any():
            raise ValueError(f"a record of a fixed-width state does not have {self.klen}/{self.vlen} key/value bytes")
        first = arr[starts + 4] & 0x7F
        if self.prefix == 2:
            stored = first.astype(np.int32) * 256 + arr[starts + 5]
        else:
            stored = first.astype(np.int32)
        if (stored != kg).any():
            raise ValueError(f"a key carries key group {int(stored[np.flatnonzero(stored != kg)[0]])}")
        kstart = starts + 4
        self._add("key_group", np.full(count, kg, np.int32))
        self._add("key", _gather(arr, kstart + self.key_off, self.key))
        if self.timer:
            raw = _gather(arr, kstart + self.prefix, _U64)
            self._add("timestamp", (raw ^ np.uint64(1 << 63)).view(np.int64))
        else:
            vstart = kstart + self.klen + 4
            if self.ttl:
                self._add("ttl_last_access", _gather(arr, vstart, _I64))
                vstart = vstart + 8
            self._add("value", _gather(arr, vstart, self.value))
        return pos + s * count


_DTYPES["u64"] = ">u8"  # timer timestamps: read unsigned, then the sign bit flipped back
_I32 = TypeNode("int", "i32")
_I64 = TypeNode("long", "i64")
_U64 = TypeNode("u64", "u64")


def fixed_run_spec(kind: str, prefix: int, key: TypeNode, ns: TypeNode, value: TypeNode | None) -> FixedRun | None:
    """A FixedRun for this state when all its parts are fixed width (kind VALUE/REDUCING/AGGREGATING or TIMER)."""
    if key.kind not in _DTYPES or ns.kind != "void":
        return None
    if kind == "TIMER":
        return FixedRun(prefix, key, 1, None, False, True)
    if kind not in ("VALUE", "REDUCING", "AGGREGATING") or value is None:
        return None
    ttl = value.kind == "ttl"
    inner = value.children[1] if ttl else value
    if inner.kind not in _DTYPES:
        return None
    return FixedRun(prefix, key, 1, inner, ttl, False)
