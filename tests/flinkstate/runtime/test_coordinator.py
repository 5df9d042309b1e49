"""FLINK-28639: coordinator events stay consistent with checkpoints in both directions, with
failures, aborted checkpoints and restores at random points and 1 to 3 concurrent checkpoints."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import flinkstate
from flinkstate import ListStateDescriptor, ValueStateDescriptor, assign_key_group
from flinkstate.core.keygroups import operator_index_for_key_group
from flinkstate.runtime import KeyedJob, KeyedProcessFunction, OperatorCoordinator
from flinkstate.runtime.coordinator import parse_coordinator_records

UID = "tokens"
MAXP = 32
N = 200
SENT = ValueStateDescriptor(name="sent", value_type=pa.int64(), key_type=pa.int64())
GOT = ListStateDescriptor(name="got", value_type=pa.string(), key_type=pa.int64())


class Tokens(OperatorCoordinator):
    """Hands out a numbered token per request; sends a numbered tick to subtask 0 when a checkpoint
    completes (from the notification: what used to race with the checkpoint thread)."""

    def __init__(self) -> None:
        self.issued = 0
        self.ticks = 0
        self.requests: dict[str, int] = {}
        self.aborted: list[int] = []

    def handle_event_from_operator(self, subtask: int, event: bytes) -> None:
        self.requests[str(subtask)] = self.requests.get(str(subtask), 0) + 1
        self.issued += 1
        self.context.send_event(subtask, f"T{self.issued}".encode())

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        self.ticks += 1
        self.context.send_event(0, f"K{self.ticks}".encode())

    def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
        self.aborted.append(checkpoint_id)

    def checkpoint_coordinator(self, checkpoint_id: int) -> bytes:
        return json.dumps({"issued": self.issued, "ticks": self.ticks, "requests": self.requests}).encode()

    def reset_to_checkpoint(self, checkpoint_id: int, state: bytes | None) -> None:
        d = json.loads(state or b"{}")
        self.issued, self.ticks, self.requests = d.get("issued", 0), d.get("ticks", 0), d.get("requests", {})


def _home_key(subtask: int, parallelism: int) -> int:
    """An int key owned by `subtask` (where it records the events it received)."""
    k = 10_000
    while operator_index_for_key_group(MAXP, parallelism, assign_key_group(k, MAXP, pa.int64())) != subtask:
        k += 1
    return k


class Requester(KeyedProcessFunction):
    """Counts the requests it sends per key and records every event it receives, in keyed state."""

    def open(self, ctx: Any) -> None:
        self.backend = ctx.backend
        self.home = _home_key(ctx.index_of_this_subtask, ctx.number_of_parallel_subtasks)
        self.sent = ctx.get_state(SENT)
        self.got = ctx.get_state(GOT)

    def process_element(self, value: int, ctx: Any) -> None:
        self.sent.update((self.sent.value() or 0) + 1)
        ctx.send_to_coordinator(b"req")

    def handle_operator_event(self, event: bytes, ctx: Any) -> None:
        self.backend.set_current_key(self.home)
        self.got.add(event.decode())


def _flaky(job: KeyedJob, rng: random.Random, rate: float) -> None:
    """Make some checkpoint commits fail (aborted checkpoints)."""
    assert job.store is not None
    real_begin = job.store.begin

    def begin(**kw: Any) -> Any:
        w = real_begin(**kw)
        if rng.random() < rate:
            def boom() -> None:
                w.abort()
                raise OSError("injected commit failure")
            w.commit = boom  # type: ignore[method-assign]
        return w

    job.store.begin = begin  # type: ignore[method-assign]


def _check(store: flinkstate.CheckpointStore) -> None:
    """At the latest checkpoint: every token and tick is in a subtask's state or in flight, exactly
    once; every request a subtask counted reached the coordinator's state or is in flight."""
    state, to_subtasks, to_coord = parse_coordinator_records(store.read_coordinator(UID))
    coord = json.loads(state or b"{}")
    got = [e for row in store.read_state(UID, "got").column("value").to_pylist() for e in (row if isinstance(row, list) else [row])]
    seen = got + [p.decode() for _, p in to_subtasks]
    tokens = sorted(int(e[1:]) for e in seen if e.startswith("T"))
    ticks = sorted(int(e[1:]) for e in seen if e.startswith("K"))
    assert tokens == list(range(1, coord["issued"] + 1)), "a token was lost or duplicated"
    assert ticks == list(range(1, coord["ticks"] + 1)), "a tick was lost or duplicated"
    sent = sum(r["value"] for r in store.read_state(UID, "sent").to_pylist())
    assert sent == sum(coord["requests"].values()) + len(to_coord), "a request was lost or duplicated"


@pytest.mark.parametrize("concurrent", [1, 2, 3])
@pytest.mark.parametrize("seed", [1])
def test_random_failures_and_restores_lose_or_duplicate_no_event(tmp_path: Path, concurrent: int, seed: int) -> None:
    rng = random.Random(seed * 10 + concurrent)
    kw: dict[str, Any] = dict(key_selector=lambda x: x % 11, key_type=pa.int64(), max_parallelism=MAXP, checkpoint_interval=10,
                              coordinator=Tokens, max_concurrent_checkpoints=concurrent, wait_for_previous_checkpoint=True)
    parallelism = rng.randint(1, 3)
    job = KeyedJob(UID, Requester, parallelism=parallelism, checkpoint_path=str(tmp_path), **kw)
    aborted_seen = 0
    while job.source_offset < N:
        _flaky(job, rng, 0.2)
        job.run(range(N), limit=rng.randint(25, 80), final_watermark=False)
        assert job.coordinator is not None
        aborted_seen += len(job.coordinator.aborted)  # type: ignore[attr-defined]
        job.close()  # the process dies here: everything after the latest checkpoint is lost
        _check(flinkstate.open(tmp_path))
        parallelism = rng.randint(1, 3)
        job = KeyedJob.restore(UID, Requester, checkpoint_path=str(tmp_path), parallelism=parallelism, **kw)
    job.close()
    assert aborted_seen > 0  # the aborted hook ran for injected failures
    assert flinkstate.open(tmp_path).latest_checkpoint_id() is not None


def test_notify_checkpoint_complete_runs_on_the_processing_thread(tmp_path: Path) -> None:
    import threading

    threads: set[str] = set()

    class Recorder(Tokens):
        def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
            threads.add(threading.current_thread().name)
            super().notify_checkpoint_complete(checkpoint_id)

    kw: dict[str, Any] = dict(key_selector=lambda x: x % 5, key_type=pa.int64(), max_parallelism=MAXP, checkpoint_interval=10,
                              coordinator=Recorder, max_concurrent_checkpoints=2, wait_for_previous_checkpoint=True)
    with KeyedJob(UID, Requester, parallelism=2, checkpoint_path=str(tmp_path), **kw) as job:
        job.run(range(100))
    assert threads == {threading.current_thread().name}
    _check(flinkstate.open(tmp_path))
