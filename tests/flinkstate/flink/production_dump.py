"""Render what flinkstate reads of ProductionJob's state (flinkjobs/src/ProductionJob.java) as the job's dump lines.

The job writes its state as text lines ("op state key [user key] value", timers, fired windows, operator and
broadcast state); the same lines rendered from a read compare equal line for line, whatever the snapshot format.
The Kryo-typed state ("sessions/profile") is bytes to flinkstate: its keys are compared, its values by Flink's restore.
"""

from __future__ import annotations

from typing import Any, Protocol

import pyarrow as pa

KEYED = {"sessions": ("last", "recent", "by_mod", "total", "avg"), "wide": ("count",), "explicit": ("seen", "first"), "rules": ("hits",)}
OPAQUE = ("sessions", "profile")


class Reads(Protocol):
    def read_state(self, operator: str, state: str) -> pa.Table: ...
    def read_timers(self, operator: str, service: str) -> pa.Table: ...
    def read_operator_state(self, operator: str, name: str) -> pa.Table: ...


def show(v: Any) -> str:
    """A value as Java prints it: Tuple2 as (f0,f1), lists as [a, b]."""
    if isinstance(v, dict) and set(v) == {"f0", "f1"}:
        return f"({show(v['f0'])},{show(v['f1'])})"
    if isinstance(v, list):
        return "[" + ", ".join(show(x) for x in v) + "]"
    return str(v)


def render(src: Reads, timer_service: str = "event_user-timers", window_service: str = "event_window-timers") -> list[str]:
    """Every line of the job's dump but the Kryo values, from what src reads (a Flink savepoint or a flinkstate root)."""
    out: set[str] = set()
    for op, states in KEYED.items():
        for st in states:
            rows = src.read_state(op, st).to_pylist()
            if st == "recent":  # a list state reads one row per element, in the list's order
                lists: dict[str, list[Any]] = {}
                for r in rows:
                    lists.setdefault(show(r["key"]), []).append(r["value"])
                out.update(f"{op} {st} {k} {show(v)}" for k, v in lists.items())
                continue
            for r in rows:
                k = show(r["key"])
                if "user_key" in r:
                    out.add(f"{op} {st} {k} {r['user_key']} {r['value']}")
                elif st == "avg":  # the accumulator Tuple2(sum, count); the job prints its result "sum/count"
                    out.add(f"{op} {st} {k} {r['value']['f0']}/{r['value']['f1']}")
                else:
                    out.add(f"{op} {st} {k} {show(r['value'])}")
    for r in src.read_timers("sessions", timer_service).to_pylist():
        out.add(f"sessions timer {show(r['key'])} {r['timestamp']}")
    windows = {(r["key"], r["namespace"]["start"]): r["value"] for r in src.read_state("window", "window-contents").to_pylist()}
    for (k, start), v in windows.items():
        out.add(f"window fire {k} {start} {v}")
    # every window holds its end-of-window timer (it fires the window at the final watermark of the restore)
    timers = {(r["key"], r["namespace"]["start"], r["timestamp"]) for r in src.read_timers("window", window_service).to_pylist()}
    assert timers == {(k, s, s + 999) for k, s in windows}, "window timers differ from the windows"
    for r in src.read_operator_state("rules", "rules").to_pylist():
        out.add(f"rules bcast {r['key']}={r['value']}")
    for r in src.read_operator_state("parse", "offsets").to_pylist():
        out.add(f"parse split {r['value']}")
    for r in src.read_operator_state("parse", "watermarks").to_pylist():
        out.add(f"parse union {r['value']}")
    return sorted(out)


def expected(dump: list[str]) -> tuple[list[str], set[str]]:
    """The dump's lines but the Kryo values; and the keys the Kryo state holds."""
    prefix = " ".join(OPAQUE) + " "
    return sorted(line for line in dump if not line.startswith(prefix)), {line[len(prefix):].rsplit(" ", 1)[0] for line in dump if line.startswith(prefix)}


def opaque_keys(table: pa.Table) -> set[str]:
    """The keys of the Kryo state read as bytes (every value non-empty bytes)."""
    rows = table.to_pylist()
    assert all(isinstance(r["value"], bytes) and r["value"] for r in rows), "Kryo values are not bytes"
    return {show(r["key"]) for r in rows}
