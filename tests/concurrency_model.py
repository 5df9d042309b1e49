"""Several processes writing and collecting on one root, and a model of what every checkpoint must hold.

Each worker process runs a seeded random sequence of what users of one root do concurrently: one-key deltas,
read-modify-write full rewrites, savepoints, `compact`, `expire`, `retain(n)` and `discard([id])`, retrying on
`CommitConflictError` (and on `CheckpointNotFoundError` when the checkpoint it read was discarded meanwhile). It
records every commit that succeeded: its id, its base and what it changed. `check_root` then rebuilds the expected
content of each retained checkpoint from those records alone (the base's expected content plus the change) and
compares it with a read of the root: a retained checkpoint that lost a file, or holds anything else, fails it.
Used by tests/flinkstate/store/test_registry_processes.py and bench/stress_concurrency.py.
"""

from __future__ import annotations

import random
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

import flinkstate as fs
from flinkstate.core.errors import CheckpointNotFoundError, CommitConflictError
from flinkstate.store.verify import verify_store

OP = "op"
STATE = "count"
TTL_MS = 1000
EXPIRE_AT = 10_000  # expire(at=EXPIRE_AT) drops entries last accessed at DEAD_TS, keeps LIVE_TS ones
DEAD_TS = 0
LIVE_TS = 10**13
KEYS = 12
ACTIONS = ("delta", "full", "savepoint", "compact", "expire", "retain", "discard")
WEIGHTS = (40, 14, 5, 8, 6, 20, 7)

Content = dict[str, tuple[int, int]]  # key -> (value, ttl timestamp)


def descriptor() -> fs.ValueStateDescriptor:
    """The one state every worker writes: a TTL value state (so `expire` has something to drop)."""
    return fs.ValueStateDescriptor(name=STATE, value_type=pa.int64(), ttl=fs.StateTtlConfig(ttl_ms=TTL_MS))


@dataclass(frozen=True)
class Commit:
    """One commit a worker saw succeed: the checkpoint, its base, and its change."""

    checkpoint_id: int
    base: int | None
    kind: str
    change: str  # "delta", "full", "same" (compaction) or "expire"
    rows: tuple[tuple[str, int | None, int | None], ...] = ()  # (key, value, ttl timestamp); value None: a tombstone


@dataclass
class WorkerResult:
    """What one worker did: its successful commits, retried conflicts per action, and any other error."""

    worker: int
    commits: list[Commit] = field(default_factory=list)
    conflicts: Counter[str] = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)
    actions: Counter[str] = field(default_factory=Counter)


def _content(store: fs.CheckpointStore, checkpoint_id: int) -> Content:
    t = store.read_state(OP, STATE, checkpoint_id=checkpoint_id, raw=True)
    return {k: (v, ts) for k, v, ts in zip(t.column("key").to_pylist(), t.column("value").to_pylist(),
                                            t.column("ttl_timestamp").to_pylist())}


def _has_state(w: Any) -> bool:
    return w.base is not None and OP in w.operators and STATE in w.operators[OP].keyed_states


def _step(store: fs.CheckpointStore, action: str, rnd: random.Random, wid: int, i: int) -> Commit | None:
    """One attempt of one action; raises CommitConflictError / CheckpointNotFoundError to be retried."""
    desc = descriptor()
    key, value = f"k{rnd.randrange(KEYS)}", wid * 10_000 + i
    ts = rnd.choice((DEAD_TS, LIVE_TS))
    if action in ("delta", "savepoint"):
        w = store.begin(kind="savepoint" if action == "savepoint" else "checkpoint")
        with w:
            tomb = action == "delta" and rnd.random() < 0.2
            w.put_state(OP, desc, pa.table({"key": [key], "value": pa.array([None if tomb else value], pa.int64()),
                                            "ttl_timestamp": pa.array([None if tomb else ts], pa.int64()),
                                            "tombstone": [tomb]}), mode="delta")
            time.sleep(rnd.random() * 0.01)  # widen the window between planning and committing
        return Commit(w.checkpoint_id, None if w.base is None else w.base.checkpoint_id, w.kind, "delta",
                      ((key, None if tomb else value, None if tomb else ts),))
    if action == "full":
        w = store.begin()
        with w:
            content = _content(store, w.base.checkpoint_id) if _has_state(w) else {}
            content[key] = (value, ts)
            keys = sorted(content)
            w.put_state(OP, desc, pa.table({"key": keys, "value": pa.array([content[k][0] for k in keys], pa.int64()),
                                            "ttl_timestamp": pa.array([content[k][1] for k in keys], pa.int64())}))
        return Commit(w.checkpoint_id, None if w.base is None else w.base.checkpoint_id, w.kind, "full",
                      tuple((k, content[k][0], content[k][1]) for k in keys))
    if action in ("compact", "expire"):
        if store.latest_checkpoint_id() is None:
            return None
        res = store.compact() if action == "compact" else store.expire(at=EXPIRE_AT)
        if res.checkpoint_id is None:
            return None
        return Commit(res.checkpoint_id, res.base_checkpoint_id, "checkpoint", "same" if action == "compact" else "expire")
    if action == "retain":
        store.retain(rnd.randint(1, 3))
        return None
    ids = [c.checkpoint_id for c in store.checkpoints() if c.kind == "checkpoint"]
    if len(ids) > 1:
        store.discard([rnd.choice(ids[:-1])])
    return None


def worker(root: str, storage_options: dict[str, Any] | None, wid: int, rounds: int, seed: int) -> WorkerResult:
    """Run `rounds` seeded random actions against the root (a process of its own)."""
    rnd = random.Random(seed)
    store = fs.open(root, storage_options)
    out = WorkerResult(wid)
    for i in range(rounds):
        action = rnd.choices(ACTIONS, WEIGHTS)[0]
        out.actions[action] += 1
        for _ in range(60):
            try:
                commit = _step(store, action, rnd, wid, i)
            except (CommitConflictError, CheckpointNotFoundError) as e:
                out.conflicts[f"{action}: {type(e).__name__}"] += 1
                time.sleep(rnd.random() * 0.005)
                continue
            except Exception as e:  # noqa: BLE001 - every other error is a finding of the test, reported whole
                out.errors.append(f"worker {wid} round {i} {action}: {type(e).__name__}: {e}\n{traceback.format_exc()}")
                break
            if commit is not None:
                out.commits.append(commit)
            break
        else:
            out.errors.append(f"worker {wid} round {i} {action}: still conflicting after 60 tries")
    return out


def expected_contents(commits: list[Commit]) -> dict[int, Content]:
    """The content every committed checkpoint must hold, from the recorded commits alone."""
    by_id = {c.checkpoint_id: c for c in commits}
    assert len(by_id) == len(commits), "two commits of one checkpoint id succeeded"
    memo: dict[int, Content] = {}

    def of(cid: int | None) -> Content:
        if cid is None:
            return {}
        if cid not in memo:
            c = by_id[cid]
            base = dict(of(c.base))
            if c.change == "full":
                base = {k: (v, ts) for k, v, ts in c.rows}  # type: ignore[misc]
            elif c.change == "delta":
                for k, v, ts in c.rows:
                    if v is None:
                        base.pop(k, None)
                    else:
                        base[k] = (v, ts)  # type: ignore[assignment]
            elif c.change == "expire":
                base = {k: (v, ts) for k, (v, ts) in base.items() if ts + TTL_MS > EXPIRE_AT}
            memo[cid] = base
        return memo[cid]

    return {c.checkpoint_id: of(c.checkpoint_id) for c in commits}


def check_root(root: str, storage_options: dict[str, Any] | None, results: list[WorkerResult]) -> dict[str, int]:
    """Every retained checkpoint reads back whole and equals the model; returns figures of the run."""
    errors = [e for r in results for e in r.errors]
    assert not errors, "\n".join(errors[:5])
    commits = [c for r in results for c in r.commits]
    expected = expected_contents(commits)
    store = fs.open(root, storage_options)
    retained = store.checkpoints()
    # every checkpoint that ever landed (discarded since or not) is a commit a worker saw succeed: a commit reported
    # as failed that landed anyway would be retried, writing its data twice (issue 41)
    landed = [c.checkpoint_id for c in store.checkpoints(include_discarded=True)]
    unseen = [cid for cid in landed if cid not in expected]
    assert not unseen, f"checkpoints {unseen} landed in the log but the workers that wrote them saw their commits fail"
    for c in retained:
        got = _content(store, c.checkpoint_id)
        assert got == expected[c.checkpoint_id], f"checkpoint {c.checkpoint_id}: read {got}, committed {expected[c.checkpoint_id]}"
    report = verify_store(store)
    assert report.ok, report.to_dict()
    return {"commits": len(commits), "retained": len(retained), "landed": len(landed),
            "conflicts": sum(sum(r.conflicts.values()) for r in results),
            "collections": sum(r.actions["retain"] + r.actions["discard"] for r in results)}


# ------------------------------------------------------------------ single races (test_registry_processes)

def first_commit(root: str, key: str, barrier: Any) -> str:
    """One of several first writers of an empty root, started together: 'ok', 'conflict' or the error."""
    barrier.wait()
    try:
        with fs.open(root).begin() as w:
            w.put_state(OP, descriptor(), pa.table({"key": [key], "value": [1], "ttl_timestamp": [LIVE_TS]}))
        return "ok"
    except fs.CommitConflictError:
        return "conflict"
    except Exception as e:  # noqa: BLE001 - reported to the test
        return f"{type(e).__name__}: {e}"



def retain(root: str, barrier: Any) -> tuple[str, int]:
    """One of several racing `retain(1)` calls: ('ok', files deleted), ('conflict', 0) or the error."""
    barrier.wait()
    try:
        return "ok", len(fs.open(root).retain(1))
    except fs.CommitConflictError:
        return "conflict", 0
    except Exception as e:  # noqa: BLE001 - reported to the test
        return f"{type(e).__name__}: {e}", 0



def commit_or_retain(root: str, wid: int, rounds: int) -> dict[str, Any]:
    """Even workers commit one-key deltas, odd ones `retain(1)`: counts of successes and conflicts, other errors."""
    store = fs.open(root)
    out: dict[str, Any] = {"ok": 0, "conflict": 0, "errors": []}
    for i in range(rounds):
        try:
            if wid % 2:
                store.retain(1)
            else:
                with store.begin() as w:
                    w.put_state(OP, descriptor(), pa.table({"key": [f"k{i}"], "value": [i], "ttl_timestamp": [LIVE_TS]}),
                                mode="delta")
            out["ok"] += 1
        except fs.CommitConflictError:
            out["conflict"] += 1
        except Exception as e:  # noqa: BLE001 - reported to the test
            out["errors"].append(f"{type(e).__name__}: {e}")
    return out
