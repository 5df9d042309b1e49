"""Flink SQL jobs' state read by the SQL's own column names (the job's compiled plan) equals what each job emitted.

Each fixture (tests/fixtures/flink-<line>-sql/<query>-<backend>, `make_flink_fixture.py sql`) is a real Flink job run
from its compiled plan and stopped with a savepoint, so its state produced exactly the rows of emitted.txt (the sink's
changelog folded to its current rows). Input: ids 0..N-1, k = 'k' || id % 10, v = id % 7, ts = id seconds.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pyarrow as pa
import pytest

import flinkstate as fs
from flinkstate.core.errors import InvalidArgumentError

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
CELLS = sorted(f"{p.parent.name}/{p.name}" for line in ("2.3", "1.20") for p in (FIXTURES / f"flink-{line}-sql").iterdir() if p.is_dir())


def _open(cell: str) -> tuple[fs.FlinkSource, str, dict[str, pa.Table]]:
    """The savepoint opened with its plan; the stateful operator's name and its states, read by column names."""
    src = fs.open(str(FIXTURES / cell / "savepoint"), sql_plan=str(FIXTURES / cell / "plan.json"))
    ck = src.checkpoint()
    (uid,) = [u for u, om in ck.operators.items() if om.keyed_states]
    return src, uid, {s: src.read_state(uid, s) for s in ck.operators[uid].keyed_states}


def _emitted(cell: str) -> list[list[str]]:
    return [line.split(", ") for line in (FIXTURES / cell / "emitted.txt").read_text(encoding="utf-8").splitlines() if line]


def _query(cell: str) -> str:
    return cell.split("/")[1].rsplit("-", 1)[0]


@pytest.mark.parametrize("cell", [c for c in CELLS if _query(c) in ("agg", "agg_ttl")])
def test_group_aggregate_accumulators_by_name_equal_each_groups_last_emitted_row(cell: str) -> None:
    _, _, states = _open(cell)
    t = states["accState"]
    assert t.schema.field("key").type == pa.struct([("k", pa.string())])
    assert [f.name for f in t.schema.field("value").type] == ["cnt", "total", "mx", "av_sum", "av_count"]
    got = {r["key"]["k"]: r["value"] for r in t.to_pylist()}
    want = {k: (int(cnt), int(total), int(mx), float(av)) for k, cnt, total, mx, av in _emitted(cell)}
    assert set(got) == set(want) and len(want) == 10
    for k, (cnt, total, mx, av) in want.items():
        a = got[k]
        assert (a["cnt"], a["total"], a["mx"], a["av_count"]) == (cnt, total, mx, cnt)
        assert a["av_sum"] / a["av_count"] == pytest.approx(av)


@pytest.mark.parametrize("cell", [c for c in CELLS if _query(c) == "dedup_last"])
def test_deduplication_keeps_each_keys_last_row_as_emitted(cell: str) -> None:
    _, _, states = _open(cell)
    rows = states["deduplicate-state"].to_pylist()
    assert [f.name for f in states["deduplicate-state"].schema.field("value").type] == ["id", "pt", "k", "v"]
    assert sorted(f"{r['value']['id']}, {r['value']['k']}, {r['value']['v']}" for r in rows) == \
        sorted(", ".join(e) for e in _emitted(cell))
    assert all(r["key"]["k"] == r["value"]["k"] for r in rows)


@pytest.mark.parametrize("cell", [c for c in CELLS if _query(c) == "dedup"])
def test_first_row_deduplication_has_seen_exactly_the_emitted_keys(cell: str) -> None:
    _, _, states = _open(cell)
    t = states["deduplicate-state"]
    assert sorted(r["key"]["k"] for r in t.to_pylist()) == sorted(e[1] for e in _emitted(cell))
    assert set(t.column("value").to_pylist()) == {True}


@pytest.mark.parametrize("cell", [c for c in CELLS if _query(c) == "join"])
def test_join_records_by_column_give_exactly_the_emitted_pairs(cell: str) -> None:
    _, _, states = _open(cell)
    left, right = states["left-records"].to_pylist(), states["right-records"].to_pylist()
    assert [f.name for f in states["left-records"].schema.field("user_key").type] == ["id", "k", "$f5"]  # l.id + 1: no SQL name
    by_key = defaultdict(list)
    for r in right:
        by_key[r["key"]["id"]].append(r["user_key"]["id"])
    pairs = sorted(f"{lr['user_key']['k']}, {lr['user_key']['id']}, {rid}" for lr in left for rid in by_key[lr["key"]["$f5"]])
    assert pairs == sorted(", ".join(e) for e in _emitted(cell)) and pairs
    assert all(r["value"] == 1 for r in left + right)  # each record once


@pytest.mark.parametrize("cell", [c for c in CELLS if _query(c) == "topn"])
def test_top_n_rows_by_column_are_the_emitted_top_three(cell: str) -> None:
    _, _, states = _open(cell)
    t = states["data-state-with-append"]
    assert t.schema.field("user_key").type == pa.struct([("v", pa.int32()), ("id", pa.int64())])  # ORDER BY v DESC, id DESC
    rows = [(r["key"]["k"], row) for r in t.to_pylist() for row in r["value"]]
    assert all(k == row["k"] for k, row in rows)
    assert sorted(f"{row['k']}, {row['id']}, {row['v']}" for _, row in rows) == sorted(", ".join(e) for e in _emitted(cell))


@pytest.mark.parametrize("cell", [c for c in CELLS if _query(c) in ("window", "gwindow")])
def test_window_accumulators_by_name_hold_the_input_of_windows_not_yet_emitted(cell: str) -> None:
    """A window's state lives until it fires: the state holds the windows the job has not emitted yet, each with the
    COUNT and SUM of its input rows (one id per key in a 10 s window), and the emitted ones follow the same rule."""
    _, _, states = _open(cell)
    t = states["window-aggs"].to_pylist()
    assert t and all(set(r["value"]) == {"cnt", "total"} for r in t)
    emitted = {(k, _ms(we)) for ws, we, k, cnt, total in _emitted(cell)}
    for r in t:
        end_ms = r["namespace"]["end"] if isinstance(r["namespace"], dict) else r["namespace"]  # TimeWindow or slice end
        ident = end_ms // 1000 - 10 + int(r["key"]["k"][1:])  # the one id of key k in [end - 10 s, end)
        assert r["value"] == {"cnt": 1, "total": ident % 7}
        assert (r["key"]["k"], end_ms) not in emitted  # not fired yet
    for ws, we, k, cnt, total in _emitted(cell):
        ident = _ms(ws) // 1000 + int(k[1:])
        assert (int(cnt), int(total)) == (1, ident % 7) and _ms(we) - _ms(ws) == 10_000


def _ms(text: str) -> int:
    import datetime as dt

    return int(dt.datetime.fromisoformat(text).replace(tzinfo=dt.timezone.utc).timestamp() * 1000)


def test_without_a_plan_columns_are_f0_to_fn_and_a_bad_plan_is_named() -> None:
    cell = "flink-2.3-sql/agg-hashmap"
    src = fs.open(str(FIXTURES / cell / "savepoint"))
    ck = src.checkpoint()
    (uid,) = [u for u, om in ck.operators.items() if om.keyed_states]
    t = src.read_state(uid, "accState", keys=["k3"])
    assert t.schema.field("key").type == pa.struct([("f0", pa.string())]) and t.column("value").type.num_fields == 5
    assert t.num_rows == 1
    with pytest.raises(InvalidArgumentError, match="not-a-plan.json"):
        fs.open(str(FIXTURES / cell / "savepoint"), sql_plan=str(FIXTURES / cell / "not-a-plan.json")).checkpoint()
    with pytest.raises(InvalidArgumentError, match="emitted.txt is not a Flink compiled plan"):
        fs.open(str(FIXTURES / cell / "savepoint"), sql_plan=str(FIXTURES / cell / "emitted.txt")).checkpoint()
    with pytest.raises(InvalidArgumentError, match="sql_plan names SQL columns"):
        fs.open(str(FIXTURES / cell / "savepoint"), sql_plan=str(FIXTURES / cell / "plan.json"), sql_rows="bytes")


def test_a_key_given_by_its_columns_is_looked_up_in_flinks_key_group() -> None:
    src, uid, states = _open("flink-2.3-sql/agg-hashmap")
    every = {r["key"]["k"]: r for r in states["accState"].to_pylist()}
    for keys in (["k3"], [{"k": "k3"}], [("k3",)]):
        assert src.read_state(uid, "accState", keys=keys).to_pylist() == [every["k3"]]
    assert src.read_state(uid, "accState", keys=["k3", "k7", "nope"]).num_rows == 2
    with pytest.raises(InvalidArgumentError, match="not rows of the SQL key type"):
        src.read_state(uid, "accState", keys=[{"k": 5, "other": 1}])
