"""Compare what the decoder reads from a savepoint with the JSON-lines dump the Flink job wrote."""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from flinkstate.core.errors import OperatorNotFoundError
from flinkstate.flink import operator_state_names, read_keyed_state, read_metadata, read_operator_state

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "flink-2.3-canonical"
KEYED_OPERATORS = ("long-keyed", "string-keyed", "window")
# Operators whose states need reader options (Kryo values read as raw bytes): checked by test_types_more.
SKIPPED_OPERATORS = ("kryo",)
OPERATOR_STATES = {"opstate": ("split", "union"), "bcast": ("bcast",)}


def load_dump(path: Path) -> list[dict[str, Any]]:
    """The expected.jsonl lines (gzip compressed when the name ends in .gz)."""
    text = gzip.decompress(path.read_bytes()).decode("utf-8") if path.suffix == ".gz" else path.read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _key(d: dict[str, Any]) -> Any:
    """The key of a dump line or decoded row: the key, with the window (start, end) when it has a namespace."""
    ns = d.get("namespace")
    return d["key"] if ns is None else (d["key"], ns["start"], ns["end"])


def check_savepoint(savepoint: Path, expected: Path) -> int:
    """Assert every value, list element, map entry, TTL timestamp, timer and operator-state element; return the count."""
    dump = load_dump(expected)
    meta = read_metadata(str(savepoint))
    want: dict[tuple[str, str], dict[Any, Any]] = defaultdict(dict)
    ttl_bounds: dict[tuple[str, str, Any], tuple[int, int]] = {}
    kgs: dict[tuple[str, Any], int] = {}
    for d in dump:
        kind = d["kind"]
        if d["operator"] in SKIPPED_OPERATORS:
            continue
        if kind in ("value", "list"):
            want[(d["operator"], d["state"])][_key(d)] = d["value"]
            if "ttl_min" in d:
                ttl_bounds[(d["operator"], d["state"], d["key"])] = (d["ttl_min"], d["ttl_max"])
        elif kind == "map":
            want[(d["operator"], d["state"])][(d["key"], d["user_key"])] = d["value"]
            if "ttl_min" in d:
                ttl_bounds[(d["operator"], d["state"], (d["key"], d["user_key"]))] = (d["ttl_min"], d["ttl_max"])
        elif kind == "timer":
            want[(d["operator"], d["service"])][(_key(d), d["timestamp"])] = True
        elif kind in ("split", "union"):
            want[(d["operator"], d["state"])].setdefault(d["subtask"], []).append(d["value"])
        elif kind == "broadcast":
            want[(d["operator"], d["state"])][(d["subtask"], d["user_key"])] = d["value"]
        if "key_group" in d:
            kgs[(d["operator"], d["key"])] = d["key_group"]
    checked = 0
    seen: set[tuple[str, str]] = set()
    for uid in KEYED_OPERATORS:
        try:
            ks = read_keyed_state(meta, uid)
        except OperatorNotFoundError:
            continue  # a savepoint of an older job (the dump then has no lines of it: checked below)
        for name, table in list(ks.states.items()) + list(ks.timers.items()):
            rows = table.to_pylist()
            got: dict[Any, Any] = {}
            kind = ks.meta.get(name, ks.meta.get("_timer_state/" + name)).keyed_type
            for r in rows:
                if isinstance(r.get("value"), bytes):
                    r["value"] = r["value"].hex()  # the dump writes byte[] as hex
                assert r["key_group"] == kgs[(uid, r["key"])], (uid, name, r)
                if kind == "LIST":
                    got.setdefault(_key(r), []).append(r["value"])
                elif kind == "MAP":
                    got[(r["key"], r["user_key"])] = r["value"]
                elif kind == "PRIORITY_QUEUE":
                    got[(_key(r), r["timestamp"])] = True
                else:
                    got[_key(r)] = r["value"]
                if "ttl_last_access" in r:
                    lo, hi = ttl_bounds[(uid, name, (r["key"], r["user_key"]) if kind == "MAP" else r["key"])]
                    assert lo <= r["ttl_last_access"] <= hi, (uid, name, r, lo, hi)
                    checked += 1
            assert got == want.get((uid, name), {}), (uid, name)
            seen.add((uid, name))
            checked += len(rows)
    for uid, names in OPERATOR_STATES.items():
        assert set(operator_state_names(meta, uid)) == set(names)
        for name in names:
            t = read_operator_state(meta, uid, name).to_pylist()
            if "key" in (t[0] if t else {}):
                got = {(r["subtask"], r["key"]): r["value"] for r in t}
            else:
                got = {}
                for r in t:
                    got.setdefault(r["subtask"], []).append(r["value"])
            assert got == want[(uid, name)], (uid, name)
            seen.add((uid, name))
            checked += len(t)
    assert set(want) <= seen, set(want) - seen
    return checked


def _norm(v: Any) -> Any:
    if isinstance(v, dict):
        return tuple((k, _norm(x)) for k, x in v.items())
    if isinstance(v, list):
        return tuple(_norm(x) for x in v)
    return v.hex() if isinstance(v, bytes) else v


def flink_entries(meta, uid: str) -> dict[str, set]:
    """What the Flink reader holds per state: (key_group, key, [user_key], value, [ttl]) per element."""
    ks = read_keyed_state(meta, uid)
    out = {}
    for name, t in list(ks.states.items()) + list(ks.timers.items()):
        cols = [c for c in ("key_group", "key", "namespace", "user_key", "timestamp", "value", "ttl_last_access") if c in t.column_names]
        out[name] = {tuple(_norm(r[c]) for c in cols) for r in t.to_pylist()}
    return out


def store_entries(store, uid: str) -> dict[str, set]:
    """The same from the imported flinkstate savepoint (list state exploded to elements)."""
    meta = store.metadata()
    op = meta.operators[uid]
    out = {}
    for name in op.keyed_states:
        t = store.read_state(uid, name, raw=True)  # stored rows: list per key, last-access times
        rows = set()
        for r in t.to_pylist():
            base = [r["key_group"], r["key"]] + ([_norm(r["namespace"])] if "namespace" in r else [])
            if op.keyed_states[name].kind == "list":  # list state: one entry per element, its own last-access time
                ttls = r.get("ttl_timestamp") or [None] * len(r["value"])
                rows |= {tuple(base + [_norm(v)] + ([ts] if "ttl_timestamp" in r else [])) for v, ts in zip(r["value"], ttls)}
            else:
                rows.add(tuple(base + ([r["user_key"]] if "user_key" in r else []) + [_norm(r["value"])]
                               + ([r["ttl_timestamp"]] if "ttl_timestamp" in r else [])))
        out[name] = rows
    for name in op.timer_services:
        t = store.read_timers(uid, name)
        out[name] = {(r["key_group"], r["key"], r["timestamp"]) if "namespace" not in r else (r["key_group"], r["key"], _norm(r["namespace"]), r["timestamp"])
                     for r in t.to_pylist()}
    return out
