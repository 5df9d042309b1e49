"""Every combination of put / rename / remove / rescale in one CheckpointWriter keeps every entry (issue 7 item 1)."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

import pyarrow as pa
from hypothesis import given, settings

from flinkstate.store.rewrite import rescale_into

from fsc_helpers import build_job
from fsc_helpers import check_key_groups as _check_key_groups

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import combo_model as M  # noqa: E402


def _run(steps: list[tuple[Any, ...]], mp: int | None, savepoint: bool) -> None:
    with tempfile.TemporaryDirectory() as root:
        store, model = M.build_base(root)
        kept = M.applicable(steps, model)
        w = store.begin(kind="savepoint" if savepoint else "checkpoint", max_parallelism=mp)
        with w:
            for s in kept:
                if s[0] == "put":
                    w.put_state(s[1], M.desc(s[2]), M.table(s[3]))
                elif s[0] == "rename":
                    w.rename_operator(s[1], s[2])
                elif s[0] == "remove_operator":
                    w.remove_operator(s[1])
                else:
                    w.remove_state(s[1], s[2])
            if w.rescaled:
                rescale_into(w)
        M.check(store, model, mp or M.BASE_MP)


def test_put_then_rename_then_rescale_keeps_the_put_rows() -> None:
    _run([("put", "a", "s1", 12), ("rename", "a", "c")], 256, True)
    _run([("put", "c", "s1", 12), ("rename", "c", "b")], 256, False)
    _run([("remove_operator", "b"), ("put", "b", "s2", 5), ("remove_operator", "b"), ("rename", "a", "b")], 300, False)


@settings(max_examples=40, deadline=None)
@given(M.PLAN)
def test_every_combination_keeps_every_entry(plan: tuple[list[tuple[Any, ...]], int | None, bool]) -> None:
    steps, mp, savepoint = plan
    _run(steps, mp, savepoint)


def test_core_rescale_matches_flink_assignment(tmp_path):
    from flinkstate.store.rewrite import rescale

    root = str(tmp_path / "core")
    store = build_job(root)
    old = store.read_state("carts", "items")
    info = rescale(store, 17)
    assert info.max_parallelism == 17
    new = store.read_state("carts", "items")
    assert new.num_rows == old.num_rows
    _check_key_groups(new, 17, pa.int64())
    _check_key_groups(store.read_timers("sessions", "expiry"), 17, pa.string())
