"""Metadata tables of a pinned checkpoint (inspect): files, states, operators."""

from __future__ import annotations

from pathlib import Path

from fsc_helpers import ttl_store as _store


def test_inspect_tables(tmp_path: Path) -> None:
    ck = _store(tmp_path).checkpoint()
    files = ck.inspect.files()
    assert set(files.column("state").to_pylist()) == {"v", "l", "t"} and all(p.startswith("file://") or p.startswith("/") for p in files.column("path").to_pylist())
    states = ck.inspect.states()
    assert dict(zip(states.column("state").to_pylist(), states.column("state_kind").to_pylist())) == {"l": "list", "v": "value", "t": "timers-event"}
    ops = ck.inspect.operators().to_pylist()
    assert ops[0]["operator"] == "op" and ops[0]["keyed_states"] == 2 and ops[0]["timer_services"] == 1
