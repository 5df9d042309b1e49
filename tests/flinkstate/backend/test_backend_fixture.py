"""The checkpoint written by release 0.1.0's backend (tests/fixtures/backend-v1) stays restorable."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

import flinkstate
from flinkstate.backend import KeyedStateBackend

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "backend-v1"
OP = "fixture-op"


def canonical(backends: list[KeyedStateBackend]) -> dict[str, Any]:
    out: dict[str, list[Any]] = {}
    for b in backends:
        for name, t in b._tables.items():
            for pk, v in t.items():
                out.setdefault(name, []).append([pk, v])
        for name, t in b._timer_tables.items():
            for pk, _ in t.items():
                out.setdefault("timers:" + name, []).append(list(pk))
    for v in out.values():
        v.sort(key=lambda x: json.dumps(x, sort_keys=True, default=str))
    return json.loads(json.dumps(out, sort_keys=True, default=list))


@pytest.fixture()
def store(tmp_path: Path) -> Any:
    shutil.copytree(FIXTURE, tmp_path / "cp")
    return flinkstate.open(tmp_path / "cp")


@pytest.mark.parametrize("parallelism", [1, 2, 3])
def test_fixture_restores_with_any_parallelism(store: Any, parallelism: int) -> None:
    expected = json.loads((FIXTURE / "expected.json").read_text())
    assert [c.checkpoint_id for c in store.checkpoints()] == [1, 2]
    assert store.checkpoint(2).format_version == 1
    backends = KeyedStateBackend.restore_all(store, OP, parallelism)
    assert canonical(backends) == expected
    assert sorted(backends[0].state_names()) == ["avg", "clicks", "pages", "profile", "total"]


def test_fixture_state_objects_work_after_restore(store: Any) -> None:
    import sys

    sys.path.insert(0, str(FIXTURE.parent))
    try:
        from make_backend_fixture import descriptors
    finally:
        sys.path.pop(0)
    d = descriptors()
    (be,) = KeyedStateBackend.restore_all(store, OP, 1, clock=lambda: 1_700_000_000_000)
    prof, clicks, pages, total, avg = (be.get_state(d[n]) for n in ("profile", "clicks", "pages", "total", "avg"))
    fired: list[int] = []
    be.timer_service(d["event"], on_timer=lambda t: fired.append(t.timestamp))
    be.timer_service(d["proc"])
    be.set_current_key("user-000")
    assert prof.value() == {"name": "changed", "visits": -1}
    assert clicks.get() == [0, 0, 99]
    be.set_current_key("user-001")
    assert prof.value() is None and clicks.get() == []
    be.set_current_key("user-015")
    pages.set_current_namespace(1)
    assert dict(pages.items()) == {"/p0": 15 / 4}
    total.add(5)
    assert total.get() == 20
    avg.add(1)
    assert avg.get() == 8.0
    be.advance_watermark(1015)
    assert fired == list(range(1010, 1016))
    # and it checkpoints again on top of the old files
    snap = be.snapshot(3)
    with store.begin(checkpoint_id=3, base=2) as w:
        snap.write(w, OP)
    be.notify_checkpoint_complete(3)
    assert len(store.read_state(OP, "total", 3)) == 40
