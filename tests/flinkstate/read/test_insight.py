"""State insight tables (read.insight): a skewed job's hot keys and key groups, on a flinkstate root and a Flink savepoint."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import flinkstate as fs
from flinkstate.read.insight import CheckpointInsight, history_table, row_nbytes
from fsc_helpers import HOT, SKEW_SAVEPOINT, TTL_2H, skewed_root


def _top(t: pa.Table, state: str, by: str) -> list[str]:
    t = t.filter(pc.and_(pc.equal(t.column("state"), state), pc.equal(t.column("ranked_by"), by)))
    return t.sort_by("rank").column("key").to_pylist()


def _hot_key_groups(maxp: int = 128) -> set[int]:
    return {fs.assign_key_group(k, maxp, pa.string()) for k in HOT}


def test_row_nbytes_counts_nested_values() -> None:
    t = pa.table({"k": ["ab", None], "l": pa.array([[1, 2, 3], []], pa.list_(pa.int64())),
                  "m": pa.array([[("x", 1)], None], pa.map_(pa.string(), pa.int32()))})
    assert row_nbytes(t).tolist() == [(2 + 4) + (24 + 4) + ((1 + 4 + 4) + 4), 0 + 4 + 0]


def test_a_flinkstate_root_points_at_its_hot_keys_and_key_groups(tmp_path: Path) -> None:
    store = skewed_root(tmp_path / "job")
    ck = store.checkpoint()
    ins = CheckpointInsight(ck)
    kg = ins.key_groups()
    assert set(kg.column("measured_from").to_pylist()) == {"files"}  # from key_group columns and row groups: no value read
    events = kg.filter(pc.equal(kg.column("state"), "events")).sort_by([("bytes", "descending")])
    assert set(events.column("key_group").to_pylist()[:3]) == _hot_key_groups()
    hot_bytes = sum(b for g, b in zip(events.column("key_group").to_pylist(), events.column("bytes").to_pylist()) if g in _hot_key_groups())
    assert hot_bytes > 0.5 * pc.sum(events.column("bytes")).as_py()
    top = ins.top_keys(3)
    for state in ("events", "seen"):
        assert set(_top(top, state, "bytes")) == set(HOT) and set(_top(top, state, "elements")) == set(HOT)
    ev = top.filter(pc.and_(pc.equal(top.column("state"), "events"), pc.equal(top.column("ranked_by"), "elements")))
    assert ev.column("elements").to_pylist() == [500, 500, 500]  # the live lists: the delta replaced the full file's 1000
    assert ins._states[("skewed", "seen")].keys.keys() <= set(range(128))
    assert len(ins._states[("skewed", "seen")].keys) < 128  # the search decoded some key groups, not all
    ttl = ins.ttl_expiry("hour")
    assert dict(zip(ttl.column("offset").to_pylist(), ttl.column("entries").to_pylist())) == {1: 68, 0: 68, -1: 67}  # accessed 0, 1, 2 h before
    sub = ins.subtasks("skewed", 2)
    assert sub.column("key_group_start").to_pylist() == [0, 64] and pc.sum(sub.column("bytes")).as_py() == pc.sum(kg.column("bytes")).as_py()
    hist = history_table([store.checkpoint(c.checkpoint_id) for c in store.checkpoints()])
    sizes = hist.group_by("checkpoint_id").aggregate([("bytes", "sum")]).sort_by("checkpoint_id").column("bytes_sum").to_pylist()
    assert len(sizes) == 2 and sizes[1] > sizes[0]


def test_the_top_keys_search_is_exact_against_a_full_decode(tmp_path: Path) -> None:
    store = skewed_root(tmp_path / "job")
    ck = store.checkpoint()
    ins = CheckpointInsight(ck)
    got = ins.top_keys(5).filter(pc.equal(ins.top_keys(5).column("state"), "seen"))
    rows = ck.scan("skewed", "seen").to_arrow()
    counts = rows.group_by("key").aggregate([("user_key", "count")]).sort_by([("user_key_count", "descending"), ("key", "ascending")])
    want = counts.column("user_key_count").to_pylist()[:5]
    assert got.filter(pc.equal(got.column("ranked_by"), "elements")).column("elements").to_pylist() == want


@pytest.fixture(scope="module")
def savepoint_insight() -> CheckpointInsight:
    if not (SKEW_SAVEPOINT / "_metadata").exists():
        pytest.skip("tests/fixtures/flink-2.3-skew is missing: python tests/fixtures/make_flink_fixture.py skew")
    return CheckpointInsight(fs.open(str(SKEW_SAVEPOINT), ttl={"skewed/last": TTL_2H}).checkpoint())


def test_a_flink_savepoint_points_at_its_hot_keys_and_key_groups(savepoint_insight: CheckpointInsight) -> None:
    ins = savepoint_insight
    kg = ins.key_groups("skewed")
    assert set(kg.column("measured_from").to_pylist()) == {"files"}  # framing and per-key-group offsets: no value decoded
    for state in ("events", "seen"):
        s = kg.filter(pc.equal(kg.column("state"), state)).sort_by([("bytes", "descending")])
        assert set(s.column("key_group").to_pylist()[:3]) == _hot_key_groups()
    top = ins.top_keys(3)
    for state in ("events", "seen"):
        assert set(_top(top, state, "bytes")) == set(HOT) and set(_top(top, state, "elements")) == set(HOT)
    seen = top.filter(pc.and_(pc.equal(top.column("state"), "seen"), pc.equal(top.column("ranked_by"), "elements")))
    assert min(seen.column("elements").to_pylist()) >= 300  # residues of v % 400 among a hot key's records
    assert len(ins._states[("skewed", "seen")].keys) < kg.filter(pc.equal(kg.column("state"), "seen")).num_rows
    ttl = ins.ttl_expiry("day")
    assert pc.sum(ttl.column("entries")).as_py() == 43  # one "last" value per key: 3 hot and 40 cold keys
    sub = ins.subtasks("skewed")
    shares = sub.column("bytes_share").to_pylist()
    assert sub.num_rows == 2 and max(shares) > 0.6  # two hot keys' key groups fall in subtask 0 of 2
    p4 = ins.subtasks("skewed", 4)
    assert p4.num_rows == 4 and np.isclose(sum(p4.column("bytes_share").to_pylist()), 1.0)


def test_the_flink_figures_agree_with_a_decode(savepoint_insight: CheckpointInsight) -> None:
    ck = savepoint_insight.checkpoint
    figures = ck.key_group_figures("skewed", "seen")
    rows = ck.scan("skewed", "seen", raw=True).to_arrow()
    per = rows.group_by("key_group").aggregate([("key", "count")]).sort_by("key_group")
    assert figures.sort_by("key_group").column("entries").to_pylist() == per.column("key_count").to_pylist()
    assert ck.key_group_figures("skewed", "seen").column("bytes").type == pa.int64()
