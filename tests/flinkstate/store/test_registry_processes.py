"""Several processes (not threads) committing, rewriting, discarding and collecting on one root.

Garbage collection's correctness cannot rest on what one process knows: each test runs its writers in processes of
their own (spawned, so nothing is shared but the root) and checks the root against a model of what was committed
(tests/concurrency_model.py). Every outcome a retry resolves must be a success or a CommitConflictError, and no
commit a worker saw fail may be in the log.
"""

from __future__ import annotations

import multiprocessing as mp
import os
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import pyarrow as pa
import pytest

import concurrency_model as model
import flinkstate as fs
from flinkstate.format import constants as C
from flinkstate.store.verify import verify_store

SEEDS = range(20)  # local disk: every seed in every run of the suite
S3_SEEDS = range(2)  # moto is slower: two in the suite (about 25 s each), twenty with FLINKSTATE_STRESS=1 (and bench/stress_concurrency.py)
PROCESSES = 4
ROUNDS = 12


def _stress() -> bool:
    return os.environ.get("FLINKSTATE_STRESS", "") not in ("", "0")


@pytest.fixture(scope="module")
def pool() -> Iterator[ProcessPoolExecutor]:
    """Worker processes for the whole module: spawned (nothing inherited), reused across seeds."""
    with ProcessPoolExecutor(max_workers=PROCESSES, mp_context=mp.get_context("spawn")) as ex:
        yield ex


@pytest.fixture(scope="module")
def manager() -> Iterator[Any]:
    """Barriers the pooled processes can share (to start racing calls together)."""
    with mp.get_context("spawn").Manager() as m:
        yield m


def _run(pool: ProcessPoolExecutor, root: str, storage_options: dict[str, Any] | None, seed: int,
         processes: int = PROCESSES, rounds: int = ROUNDS) -> dict[str, int]:
    futures = [pool.submit(model.worker, root, storage_options, w, rounds, seed * 1000 + w) for w in range(processes)]
    return model.check_root(root, storage_options, [f.result(timeout=900) for f in futures])


@pytest.mark.parametrize("seed", SEEDS)
def test_processes_committing_and_collecting_on_local_disk_lose_nothing(pool: ProcessPoolExecutor, tmp_path: Any, seed: int) -> None:
    figures = _run(pool, str(tmp_path / "job"), None, seed)
    assert figures["commits"] >= PROCESSES * ROUNDS // 3 and figures["retained"] >= 1


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(len(SEEDS), 200))
def test_the_same_over_200_seeds(pool: ProcessPoolExecutor, tmp_path: Any, seed: int) -> None:
    """The suite's workload over 200 seeds in all (FLINKSTATE_STRESS=1): a commit reported as failed that had landed
    showed in about 1 seed of 60 on a loaded machine (issue 41); the model fails on any such commit."""
    if not _stress():
        pytest.skip("runs on demand: FLINKSTATE_STRESS=1")
    test_processes_committing_and_collecting_on_local_disk_lose_nothing(pool, tmp_path, seed)


@pytest.mark.s3
@pytest.mark.parametrize("seed", range(20))
def test_processes_committing_and_collecting_on_s3_lose_nothing(pool: ProcessPoolExecutor, s3: dict[str, Any], seed: int) -> None:
    if seed not in S3_SEEDS and not _stress():
        pytest.skip("runs on demand: FLINKSTATE_STRESS=1")
    figures = _run(pool, s3["root"], s3["storage_options"], seed, rounds=8)
    assert figures["commits"] >= PROCESSES * 8 // 3 and figures["retained"] >= 1


@pytest.mark.slow
@pytest.mark.parametrize("where", ["local", pytest.param("s3", marks=pytest.mark.s3)])
@pytest.mark.parametrize("seed", range(100, 120))
def test_stress_more_processes_and_rounds(where: str, seed: int, tmp_path: Any, request: pytest.FixtureRequest) -> None:
    if not _stress():
        pytest.skip("runs on demand: FLINKSTATE_STRESS=1")
    root, opts = (str(tmp_path / "job"), None) if where == "local" else (request.getfixturevalue("s3")["root"],
                                                                          request.getfixturevalue("s3")["storage_options"])
    with ProcessPoolExecutor(max_workers=6, mp_context=mp.get_context("spawn")) as ex:
        figures = _run(ex, root, opts, seed, processes=6, rounds=30)
    assert figures["commits"] >= 60


# ------------------------------------------------------------------ the retryable races of issue 28, one by one



def test_first_writers_of_an_empty_root_create_it_together(pool: ProcessPoolExecutor, manager: Any, tmp_path: Any) -> None:
    outcomes: list[str] = []
    for run in range(10):
        root = str(tmp_path / f"job{run}")
        barrier = manager.Barrier(PROCESSES)
        got = [f.result(timeout=300) for f in [pool.submit(model.first_commit, root, f"k{i}", barrier) for i in range(PROCESSES)]]
        outcomes += got
        store = fs.open(root)
        assert store.checkpoints() and verify_store(store).ok
        assert got.count("ok") == len(store.checkpoints())  # every success is a retained checkpoint, nothing else is
    assert set(outcomes) <= {"ok", "conflict"}, outcomes
    assert "conflict" in outcomes  # the race happened


def test_racing_retains_both_succeed(pool: ProcessPoolExecutor, manager: Any, tmp_path: Any) -> None:
    for run in range(6):
        root = str(tmp_path / f"job{run}")
        store = fs.open(root)
        for i in range(6):
            with store.begin() as w:
                w.put_state(model.OP, model.descriptor(), pa.table({"key": ["a"], "value": [i], "ttl_timestamp": [model.LIVE_TS]}))
        barrier = manager.Barrier(3)
        got = [f.result(timeout=300) for f in [pool.submit(model.retain, root, barrier) for _ in range(3)]]
        assert {g[0] for g in got} <= {"ok", "conflict"}, got
        assert [c.checkpoint_id for c in store.checkpoints()] == [6]
        assert store.read_state(model.OP, model.STATE).column("value").to_pylist() == [5]
        assert sum(n for _, n in got) >= 5  # the five superseded full files went (once)


def test_commits_racing_retains_and_manifest_pruning(pool: ProcessPoolExecutor, tmp_path: Any) -> None:
    """Writers appending to the manifest while others prune it and read the log for GC: only successes and conflicts."""
    root = str(tmp_path / "job")
    results = [pool.submit(model.commit_or_retain, root, w, 20) for w in range(PROCESSES)]
    got = [r.result(timeout=600) for r in results]
    assert not [e for g in got for e in g["errors"]], got
    assert sum(g["ok"] for g in got) >= 20
    assert verify_store(fs.open(root)).ok




# ------------------------------------------------------------------ a lost log commit

def test_verify_names_a_checkpoint_whose_log_commit_file_was_deleted(tmp_path: Any) -> None:
    store = fs.open(str(tmp_path / "job"))
    for i in range(3):
        with store.begin() as w:
            w.put_state(model.OP, model.descriptor(), pa.table({"key": [f"k{i}"], "value": [i], "ttl_timestamp": [model.LIVE_TS]}),
                        mode="delta")
    assert verify_store(store).ok
    newest = store.catalog.log_version()
    os.remove(os.path.join(str(tmp_path / "job"), C.LOG_TABLE, "_delta_log", f"{newest:020d}.json"))
    store = fs.open(str(tmp_path / "job"))
    assert [c.checkpoint_id for c in store.checkpoints()] == [1, 2]  # checkpoint 3 vanished from the log
    report = verify_store(store)
    assert not report.ok
    (damage,) = report.damaged
    assert damage.checkpoints == (3,) and "_delta_log commit file that recorded it is missing" in damage.problem
    assert damage.path.startswith(store.io.url(C.LOG_TABLE) + "/part-")
