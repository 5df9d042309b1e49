"""What real Flink holds in a savepoint (SqlStateDump's JSON lines, flinkjobs/sql/SqlStateDump.java: every entry read by
Flink's own serializers) next to what flinkstate reads: both in one plain form, compared state by state.

The plain form is the dump's: a row or tuple as the list of its fields, a map as its [key, value] pairs sorted, a
timestamp as [epoch ms, nanos of the ms], a decimal as its plain text, bytes as base64, a window as [start, end], a TTL
value as {"ttl": last access, "v": value}. Column names do not enter it (Flink's bytes hold none): the tests check them
apart.
"""

from __future__ import annotations

import base64
import gzip
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pyarrow as pa

__all__ = ["Dump", "plain", "our_entries", "canonical"]


def canonical(obj: Any) -> str:
    """One entry as a sortable, comparable text (maps' pairs sorted wherever they are)."""
    return json.dumps(_sorted_maps(obj), sort_keys=True)


def _sorted_maps(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _sorted_maps(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_sorted_maps(v) for v in obj]
    return obj


class Dump:
    """SqlStateDump's lines: per (operator id, state) the state's kind and serializer classes, and its entries."""

    def __init__(self, path: Path) -> None:
        opener = gzip.open if str(path).endswith(".gz") else open
        self.headers: dict[tuple[str, str], dict[str, Any]] = {}
        self.entries: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
        with opener(path, "rt", encoding="utf-8") as f:  # type: ignore[operator]
            for line in f:
                d = json.loads(line)
                key = (d["op"], d["state"])
                if d.get("header"):
                    self.headers[key] = d
                else:
                    self.entries[key].append(d)

    def states(self, operator_id: str) -> dict[str, dict[str, Any]]:
        """The states of one operator (by Flink's operator id, hex) with their headers."""
        return {s: h for (op, s), h in self.headers.items() if op == operator_id}

    def comparable(self, operator_id: str, state: str) -> list[str]:
        """The state's entries as canonical texts (TTL values as {"ttl", "v"}, list values whole, one per map entry)."""
        out = []
        for e in self.entries[(operator_id, state)]:
            d = {k: e.get(k) for k in ("kg", "key", "ns", "uk", "value", "ts")}
            out.append(canonical(d))
        return sorted(out)

    def opaque(self, operator_id: str, state: str) -> bool:
        """True when Flink's values of this state have no plain form here (rendered by class and toString)."""
        return any('"class"' in json.dumps(e) for e in self.entries[(operator_id, state)])


def plain(arr: pa.Array) -> list[Any]:
    """An Arrow column in the dump's plain form, one Python value per row."""
    t = arr.type
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    valid = arr.is_valid().to_pylist()
    if pa.types.is_struct(t):
        fields = [plain(arr.field(i)) for i in range(t.num_fields)]
        return [[f[i] for f in fields] if valid[i] else None for i in range(len(arr))]
    if pa.types.is_map(t):
        keys, items = plain(arr.keys), plain(arr.items)
        offsets = arr.offsets.to_pylist()
        out = []
        for i in range(len(arr)):
            if not valid[i]:
                out.append(None)
                continue
            pairs = [[keys[j], items[j]] for j in range(offsets[i], offsets[i + 1])]
            out.append(sorted(pairs, key=lambda p: json.dumps(p, sort_keys=True)))
        return out
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        values = plain(arr.values)
        offsets = arr.offsets.to_pylist()
        return [values[offsets[i]:offsets[i + 1]] if valid[i] else None for i in range(len(arr))]
    if pa.types.is_timestamp(t):
        ints = arr.cast(pa.int64()).to_pylist()
        per_ms = {"s": None, "ms": 1, "us": 1_000, "ns": 1_000_000}[t.unit]
        assert per_ms is not None
        return [None if v is None else [v // per_ms, (v % per_ms) * (1_000_000 // per_ms)] for v in ints]
    if pa.types.is_decimal(t):
        return [None if v is None else format(v, "f") for v in arr.to_pylist()]
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return [None if v is None else base64.b64encode(v).decode() for v in arr.to_pylist()]
    if pa.types.is_date32(t) or pa.types.is_time32(t):
        return arr.cast(pa.int32()).to_pylist()
    if pa.types.is_floating(t):
        return [None if v is None else float(v) for v in arr.to_pylist()]
    return arr.to_pylist()


def our_entries(table: pa.Table, kind: str, ttl: bool) -> list[str]:
    """A state read with raw=True (stored rows: a list per key, TTL last-access times) in the dump's canonical form."""
    n = table.num_rows
    cols = {c: plain(table.column(c).combine_chunks()) for c in table.column_names}
    out = []
    for i in range(n):
        value = cols["value"][i] if "value" in cols else None
        if ttl:
            stamps = cols.get("ttl_timestamp", [None] * n)[i]
            if kind == "LIST":
                value = [{"ttl": s, "v": v} for s, v in zip(stamps, value, strict=True)]
            elif value is not None or stamps is not None:
                value = {"ttl": stamps, "v": value}
        d = {"kg": cols["key_group"][i], "key": cols["key"][i], "ns": cols.get("namespace", [None] * n)[i],
             "uk": cols["user_key"][i] if "user_key" in cols else None, "value": value, "ts": cols["timestamp"][i] if "timestamp" in cols else None}
        out.append(canonical(d))
    return sorted(out)
