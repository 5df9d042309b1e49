"""The outcome a caller sees is the outcome that happened (issue 41).

A commit whose log row landed returns its checkpoint's figures even when another process commits a newer checkpoint
and runs `retain(1)` right after it (a hook runs that second process between this process's log commit and the
return); a storage call that fails after or before its row landed is told apart by a fresh read of the log; and
where the log cannot be read, `CommitOutcomeUnknownError` keeps the files and a second `commit()` finds its own
landed attempt instead of writing the data again.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import flinkstate as fs
from flinkstate.backend import KeyedStateBackend
from flinkstate.format import constants as C
from flinkstate.format.manifest import DeltaCatalog

OP = "op"
COUNT = fs.ValueStateDescriptor(name="count", value_type=pa.int64(), ttl=fs.StateTtlConfig(ttl_ms=1000))

_SECOND_PROCESS = textwrap.dedent("""
    import sys
    import pyarrow as pa
    import flinkstate as fs
    store = fs.open(sys.argv[1])
    with store.begin() as w:  # a newer checkpoint, then retain(1): the one before it is discarded
        if sys.argv[2] == "full":  # the state rewritten in full: the files of the one before are used no more
            w.put_state("op", fs.ValueStateDescriptor(name="count", value_type=pa.int64(), ttl=fs.StateTtlConfig(ttl_ms=1000)),
                        pa.table({"key": ["z"], "value": [26], "ttl_timestamp": [10**13]}))
        else:  # another operator's state
            w.put_operator_state("other", fs.OperatorStateDescriptor(name="offsets", value_type=pa.int64()),
                                 pa.table({"subtask": pa.array([0], pa.int32()), "value": [7]}))
    store.retain(1)
    print(w.checkpoint_id)
""")


def _second_process(root: str, change: str = "other") -> int:
    """Another process (spawned, sharing nothing but the root) commits a newer checkpoint and runs retain(1); with
    change="full" the checkpoint rewrites op/count in full, so retain deletes the files of the one before."""
    done = subprocess.run([sys.executable, "-c", _SECOND_PROCESS, root, change], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ))
    assert done.returncode == 0, done.stderr
    return int(done.stdout.strip().splitlines()[-1])


@pytest.fixture
def race_after_log_commit(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], list[int]]]:
    """Arm the hook: right after this process's next completing log commit lands, the second process runs once.
    Returns the ids the second process committed (filled in when it ran)."""
    real = DeltaCatalog.commit_log
    ran: list[int] = []
    armed: dict[str, Any] = {}

    def commit_log(self: DeltaCatalog, row: Any, planned_version: int, on_conflict: Any = None) -> int:
        version = real(self, row, planned_version, on_conflict)
        rows = row if isinstance(row, list) else [row]
        if armed.get("root") and any(r["event"] == C.EVENT_COMPLETED for r in rows):
            root = armed.pop("root")
            ran.append(_second_process(root))
        return version

    monkeypatch.setattr(DeltaCatalog, "commit_log", commit_log)

    def arm(root: str) -> list[int]:
        armed["root"] = root
        return ran

    yield arm


def _first(root: str) -> fs.CheckpointStore:
    store = fs.open(root)
    with store.begin(max_parallelism=8) as w:
        w.put_state(OP, COUNT, pa.table({"key": ["a", "b"], "value": [1, 2], "ttl_timestamp": [0, 10**13]}))
    return store


def _keys(store: fs.CheckpointStore, checkpoint_id: int | None = None) -> list[str]:
    """The keys a checkpoint stores (expired ones too), sorted."""
    return sorted(store.read_state(OP, COUNT.name, checkpoint_id=checkpoint_id, raw=True).column("key").to_pylist())


def _discarded(store: fs.CheckpointStore, cid: int) -> bool:
    return any(c.checkpoint_id == cid and c.status == "discarded" for c in store.checkpoints(include_discarded=True))


def test_commit_returns_what_it_committed_though_a_second_process_retains_past_it(
        tmp_path: Path, race_after_log_commit: Callable[[str], list[int]]) -> None:
    root = str(tmp_path / "job")
    store = _first(root)
    ran = race_after_log_commit(root)
    w = store.begin()
    w.put_state(OP, COUNT, pa.table({"key": ["c"], "value": [3], "ttl_timestamp": [10**13], "tombstone": [False]}), mode="delta")
    info = w.commit()
    assert ran == [3], "the second process ran between the log commit and the return"
    assert (info.checkpoint_id, info.kind, info.status, info.base_checkpoint_id) == (2, "checkpoint", "completed", 1)
    assert info.files == len(w.entries()) and w.info is info and w.commit() is info  # a second call: the same outcome
    assert _discarded(store, 2), "retain(1) in the second process discarded it after it landed"
    assert [c.checkpoint_id for c in store.checkpoints()] == [3]
    # the newer checkpoint is built on it: its data is there, exactly once
    assert _keys(store, checkpoint_id=3) == ["a", "b", "c"]


def test_context_manager_commit_and_rescale_return_the_landed_checkpoint(
        tmp_path: Path, race_after_log_commit: Callable[[str], list[int]]) -> None:
    from flinkstate.store.rewrite import rescale

    root = str(tmp_path / "job")
    store = _first(root)
    race_after_log_commit(root)
    with store.begin() as w:
        w.put_state(OP, COUNT, pa.table({"key": ["c"], "value": [3], "ttl_timestamp": [10**13], "tombstone": [False]}), mode="delta")
    assert w.info is not None and w.info.checkpoint_id == 2 and _discarded(store, 2)
    ran = race_after_log_commit(root)
    info = rescale(store, 16)
    assert info.checkpoint_id == 4 and info.max_parallelism == 16 and ran[-1] == 5 and _discarded(store, 4)


@pytest.mark.parametrize("what", ["compact", "expire"])
def test_maintenance_reports_the_checkpoint_it_landed(tmp_path: Path, race_after_log_commit: Callable[[str], list[int]],
                                                       what: str) -> None:
    root = str(tmp_path / "job")
    store = _first(root)
    with store.begin() as w:
        w.put_state(OP, COUNT, pa.table({"key": ["c"], "value": [3], "ttl_timestamp": [10**13], "tombstone": [False]}), mode="delta")
    ran = race_after_log_commit(root)
    res = store.compact() if what == "compact" else store.expire(at=5000)
    assert res.checkpoint_id == 3 and res.base_checkpoint_id == 2 and ran == [4]
    assert _discarded(store, 3)
    if what == "expire":
        assert sum(s.dropped for s in res.steps) == 1  # "a" was last accessed at 0 with a TTL of 1 s
    keys = _keys(store, 4)
    assert keys == (["a", "b", "c"] if what == "compact" else ["b", "c"])


def test_backend_checkpoint_future_completes_and_the_next_one_builds_on_it(
        tmp_path: Path, race_after_log_commit: Callable[[str], list[int]]) -> None:
    root = str(tmp_path / "job")
    store = fs.open(root)
    be = KeyedStateBackend(max_parallelism=8)
    state = be.get_state(COUNT)
    for k, v in (("a", 1), ("b", 2)):
        be.set_current_key(k)
        state.update(v)
    assert be.checkpoint(store, OP).result(timeout=120).checkpoint_id == 1
    be.set_current_key("c")
    state.update(3)
    ran = race_after_log_commit(root)
    info = be.checkpoint(store, OP).result(timeout=120)  # raised CheckpointNotFoundError before the fix
    assert info.checkpoint_id == 2 and ran == [3] and _discarded(store, 2)
    assert be.base_checkpoint_id == 2, "the backend knows its checkpoint completed"
    be.set_current_key("d")
    state.update(4)
    info = be.checkpoint(store, OP).result(timeout=120)
    assert info.checkpoint_id == 4
    assert _keys(store) == ["a", "b", "c", "d"]


# ------------------------------------------------------------------ storage calls that fail

def _delta(store: fs.CheckpointStore) -> Any:
    w = store.begin()
    w.put_state(OP, COUNT, pa.table({"key": ["c"], "value": [3], "ttl_timestamp": [10**13], "tombstone": [False]}), mode="delta")
    return w


def _completed_rows(store: fs.CheckpointStore) -> list[int]:
    ev = store.catalog.log_events()
    return sorted(r["checkpoint_id"] for r in ev.to_pylist() if r["event"] == C.EVENT_COMPLETED)


def test_a_write_that_failed_after_its_row_landed_is_a_success(tmp_path: Path, failing_log_write: Any) -> None:
    store = _first(str(tmp_path / "job"))
    w = _delta(store)
    failing_log_write(landed=True)
    assert w.commit().checkpoint_id == 2
    assert _completed_rows(store) == [1, 2] and all(store.io.exists(e.path) for e in w.entries())


def test_a_write_that_failed_before_its_row_landed_is_a_storage_error_and_leaves_nothing(
        tmp_path: Path, failing_log_write: Any) -> None:
    store = _first(str(tmp_path / "job"))
    w = _delta(store)
    new = [e.path for e in w.entries() if e.created_by_checkpoint_id == 2]
    failing_log_write(landed=False)
    with pytest.raises(fs.StorageError, match="checkpoint 2"):
        w.commit()
    assert _completed_rows(store) == [1] and not any(store.io.exists(p) for p in new)


@pytest.mark.parametrize("landed", [True, False], ids=["landed", "not-landed"])
def test_an_unknown_outcome_keeps_the_files_and_a_second_commit_lands_exactly_once(
        tmp_path: Path, failing_log_write: Any, landed: bool) -> None:
    store = _first(str(tmp_path / "job"))
    w = _delta(store)
    failing_log_write(landed=landed, unreadable=True)
    with pytest.raises(fs.CommitOutcomeUnknownError, match=f"checkpoint 2 \\(attempt {w.attempt_id}\\).*commit\\(\\) again"):
        w.commit()
    assert all(store.io.exists(e.path) for e in w.entries()), "files of a commit that may have landed are kept"
    failing_log_write.heal()
    info = w.commit()  # finds its own landed attempt, or commits it now
    assert info.checkpoint_id == 2 and _completed_rows(store) == [1, 2]
    assert _keys(store) == ["a", "b", "c"]


def test_an_unknown_outcome_abort_deletes_nothing(tmp_path: Path, failing_log_write: Any) -> None:
    store = _first(str(tmp_path / "job"))
    w = _delta(store)
    failing_log_write(landed=True, unreadable=True)
    with pytest.raises(fs.CommitOutcomeUnknownError):
        w.commit()
    failing_log_write.heal()
    w.abort()  # it landed: deleting its files would damage checkpoint 2
    assert _keys(store) == ["a", "b", "c"]


def test_backend_resolves_an_unknown_outcome_from_the_log_at_its_next_checkpoint(tmp_path: Path, failing_log_write: Any) -> None:
    store = fs.open(str(tmp_path / "job"))
    be = KeyedStateBackend(max_parallelism=8)
    state = be.get_state(COUNT)
    be.set_current_key("a")
    state.update(1)
    be.checkpoint(store, OP).result(timeout=120)
    be.set_current_key("b")
    state.update(2)
    failing_log_write(landed=True, unreadable=True)
    with pytest.raises(fs.CommitOutcomeUnknownError):
        be.checkpoint(store, OP).result(timeout=120)
    failing_log_write.heal()
    assert be.base_checkpoint_id == 1  # neither complete nor aborted yet
    be.set_current_key("c")
    state.update(3)
    info = be.checkpoint(store, OP).result(timeout=120)  # the log tells: 2 landed, so 3 is a delta on top of it
    assert info.checkpoint_id == 3 and info.base_checkpoint_id == 2 and be.base_checkpoint_id == 3
    assert _keys(store) == ["a", "b", "c"]


@pytest.mark.parametrize("what", ["compact", "expire"])
def test_maintenance_whose_base_another_process_collects_mid_read_is_a_conflict(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, what: str) -> None:
    """Found by 200 seeds of the model: a compaction reading its base while another process's retain(1) deleted the
    base's files raised CorruptFileError (damage, not retried); the collection explains it: CommitConflictError."""
    from flinkstate.store import maintenance

    root = str(tmp_path / "job")
    store = _first(root)
    with store.begin() as w:
        w.put_state(OP, COUNT, pa.table({"key": ["c"], "value": [3], "ttl_timestamp": [10**13], "tombstone": [False]}), mode="delta")
    real = maintenance.run_local

    def run_local(jobs: Any) -> Any:  # planned on checkpoint 2: another process collects it before the ranges are read
        ran.append(_second_process(root, "full"))
        return real(jobs)

    ran: list[int] = []
    monkeypatch.setattr(maintenance, "run_local", run_local)
    with pytest.raises(fs.CommitConflictError, match="garbage collection .* may delete files of its base checkpoint 2"):
        store.compact() if what == "compact" else store.expire(at=5000)
    assert ran == [3] and [c.checkpoint_id for c in store.checkpoints()] == [3]
    assert _keys(store) == ["z"]
    monkeypatch.setattr(maintenance, "run_local", real)
    res = store.compact() if what == "compact" else store.expire(at=5000)  # the retry plans on checkpoint 3
    assert res.base_checkpoint_id == 3 and res.checkpoint_id is None  # one full file, nothing expired: nothing to do
