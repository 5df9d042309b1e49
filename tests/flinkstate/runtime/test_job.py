"""The job runner: checkpoints of N subtasks as one commit, restore with another parallelism,
failed checkpoints, and the demo job end to end (without Spark)."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import flinkstate
from flinkstate import key_group_range
from flinkstate.backend import CompactionPolicy
from flinkstate.demo import OPERATOR, _session_function_class, click_events, run_demo
from flinkstate.runtime import KeyedJob

EVENTS = 6000
USERS = 300
END = 1_800_000_000_000


class Source:
    """Replayable click events whose generation drives the processing-time clock (deterministic TTL)."""

    def __init__(self) -> None:
        self.now = END - EVENTS * 60

    def clock(self) -> int:
        return self.now

    def __call__(self) -> Iterator[dict[str, Any]]:
        for e in click_events(EVENTS, users=USERS, end_ms=END):
            self.now = max(self.now, e["ts"])
            yield e


def job_kwargs(src: Source, **kw: Any) -> dict[str, Any]:
    base = dict(key_selector=lambda e: e["user"], key_type=pa.string(), checkpoint_interval=1000,
                timestamp_assigner=lambda e: e["ts"], out_of_orderness_ms=2000, watermark_interval=50, clock=src.clock, wait_for_previous_checkpoint=True,
                compaction=CompactionPolicy(max_deltas=5, max_delta_ratio=10.0))
    base.update(kw)
    return base


def canonical(outputs: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return sorted(tuple(sorted(o.items())) for o in outputs)


@pytest.fixture(scope="module")
def reference() -> list[tuple[Any, ...]]:
    src = Source()
    with KeyedJob(OPERATOR, _session_function_class(), parallelism=2, max_parallelism=64, **job_kwargs(src, checkpoint_interval=None)) as job:
        res = job.run(src())
    assert res.elements == EVENTS and len(res.outputs) > 100
    return canonical(res.outputs)


@pytest.mark.parametrize("p1,p2", [(4, 2), (2, 3)])
def test_restore_with_other_parallelism_gives_the_same_sessions(tmp_path: Path, reference: list[Any], p1: int, p2: int) -> None:
    src = Source()
    fn = _session_function_class()
    with KeyedJob(OPERATOR, fn, parallelism=p1, max_parallelism=64, checkpoint_path=str(tmp_path), **job_kwargs(src)) as job:
        r1 = job.run(src(), limit=3000)
    assert [c.status for c in r1.checkpoints] == ["completed"] * 3
    assert r1.checkpoints[0].delta_parts == 0 and r1.checkpoints[1].delta_parts > 0  # incremental after the first
    store = flinkstate.open(tmp_path)
    assert store.latest_checkpoint_id() == 3
    files = [f for f in store.files(3) if f.operator == OPERATOR and f.state == "session" and f.kind == "full"]
    assert {(f.key_group_start, f.key_group_end) for f in files} == {key_group_range(64, p1, i) for i in range(p1)}
    assert store.operator(OPERATOR).parallelism == p1
    src2 = Source()
    with KeyedJob.restore(OPERATOR, fn, checkpoint_path=str(tmp_path), parallelism=p2, **job_kwargs(src2)) as job2:
        assert job2.source_offset == 3000
        assert [b.key_group_range for b in job2.backends] == [key_group_range(64, p2, i) for i in range(p2)]
        r2 = job2.run(src2())
    assert r2.elements == EVENTS - 3000
    assert canonical(r1.outputs + r2.outputs) == reference


def test_failed_checkpoint_does_not_lose_changes(tmp_path: Path, reference: list[Any]) -> None:
    src = Source()
    fn = _session_function_class()
    with KeyedJob(OPERATOR, fn, parallelism=3, max_parallelism=64, checkpoint_path=str(tmp_path), **job_kwargs(src)) as job:
        assert job.store is not None
        real_begin = job.store.begin
        calls = {"n": 0}

        def flaky_begin(**kw: Any) -> Any:
            calls["n"] += 1
            w = real_begin(**kw)
            if calls["n"] == 3:
                def boom() -> None:
                    w.abort()
                    raise OSError("injected commit failure")
                w.commit = boom  # type: ignore[method-assign]
            return w

        job.store.begin = flaky_begin  # type: ignore[method-assign]
        r1 = job.run(src(), limit=4000)
    assert [c.status for c in r1.checkpoints] == ["completed", "completed", "failed", "completed"]
    assert "injected" in (r1.checkpoints[2].error or "")
    store = flinkstate.open(tmp_path)
    assert [c.checkpoint_id for c in store.checkpoints()] == [1, 2, 4]
    assert store.checkpoint(4).base_checkpoint_id == 2
    src2 = Source()
    with KeyedJob.restore(OPERATOR, fn, checkpoint_path=str(tmp_path), parallelism=1, **job_kwargs(src2)) as job2:
        r2 = job2.run(src2())
    assert canonical(r1.outputs + r2.outputs) == reference


def test_processing_time_timers_and_manual_checkpoints(tmp_path: Path) -> None:
    from flinkstate import ValueStateDescriptor
    from flinkstate.runtime import KeyedProcessFunction

    now = [0]

    class Count(KeyedProcessFunction):
        def open(self, ctx: Any) -> None:
            self.count = ctx.get_state(ValueStateDescriptor(name="count", value_type=pa.int64(), key_type=pa.int64()))

        def process_element(self, value: int, ctx: Any) -> None:
            self.count.update((self.count.value() or 0) + 1)
            ctx.register_processing_time_timer(ctx.current_processing_time() + 10)

        def on_timer(self, timestamp: int, ctx: Any) -> None:
            assert ctx.time_domain == "processing"
            ctx.output((ctx.current_key, timestamp, self.count.value()))

    def clock() -> int:
        return now[0]

    with KeyedJob("counter", Count, key_selector=lambda x: x % 5, key_type=pa.int64(), parallelism=2,
                  checkpoint_path=str(tmp_path), clock=clock) as job:
        job.run(range(20), final_watermark=False)
        assert job.outputs == []
        job.trigger_checkpoint(full=True)
        job.wait_for_checkpoints()
        now[0] = 10
        job.advance_processing_time()
        assert sorted(job.outputs) == [(k, 10, 4) for k in range(5)]
    store = flinkstate.open(tmp_path)
    timers = store.read_timers("counter", "processing-timers")
    assert sorted(timers.column("key").to_pylist()) == [0, 1, 2, 3, 4]
    assert store.read_state("counter", "count").column("value").to_pylist() == [4] * 5


def test_demo_runs_without_spark(tmp_path: Path) -> None:
    out = io.StringIO()
    assert run_demo(str(tmp_path / "demo"), sql=False, out=out, events=8000, users=400) == 0
    text = out.getvalue()
    for needle in ("phase 1", "phase 2: a simulated failure", "open sessions per country", "timer due",
                   "state size per checkpoint", "incremental"):
        assert needle in text, text
    store = flinkstate.open(tmp_path / "demo")
    assert store.operator(OPERATOR).parallelism == 3
    assert len(store.read_state(OPERATOR, "session")) > 0


def test_coordinator_events_are_consistent_with_checkpoints(tmp_path: Path) -> None:
    from flinkstate.runtime import KeyedProcessFunction, OperatorCoordinator

    class Tokens(OperatorCoordinator):
        def __init__(self) -> None:
            self.counter = 0

        def handle_event_from_operator(self, subtask: int, event: bytes) -> None:
            assert event == b"req"
            self.counter += 1
            self.context.send_event(subtask, str(self.counter).encode())

        def checkpoint_coordinator(self, checkpoint_id: int) -> bytes:
            return str(self.counter).encode()

        def reset_to_checkpoint(self, checkpoint_id: int, state: bytes | None) -> None:
            self.counter = int(state or b"0")

    class Requester(KeyedProcessFunction):
        def process_element(self, value: int, ctx: Any) -> None:
            ctx.send_to_coordinator(b"req")

        def handle_operator_event(self, event: bytes, ctx: Any) -> None:
            ctx.output(int(event))

    kw: dict[str, Any] = dict(key_selector=lambda x: x % 7, key_type=pa.int64(), checkpoint_interval=10,
                              coordinator=Tokens, wait_for_previous_checkpoint=True)
    with KeyedJob("tokens", Requester, parallelism=3, checkpoint_path=str(tmp_path), **kw) as job:
        r1 = job.run(range(100), limit=30)
        assert len(job._coord_ctx.outbox) == 1  # the reply to element 30 was not delivered yet
    store = flinkstate.open(tmp_path)
    assert store.operator("tokens").has_coordinator
    stored = store.read_coordinator("tokens")
    assert stored.column("record_type").to_pylist() == ["state", "event"]  # buffered event stored with the state
    with KeyedJob.restore("tokens", Requester, checkpoint_path=str(tmp_path), parallelism=2, **kw) as job2:
        r2 = job2.run(range(100))
        job2.deliver_coordinator_events()
    assert sorted(r1.outputs + r2.outputs) == list(range(1, 101))  # every token exactly once


@pytest.mark.parametrize("concurrent", [1, 2, 3])
def test_concurrent_checkpoints_with_retain_all_complete(tmp_path: Path, reference: list[Any], concurrent: int) -> None:
    src = Source()
    fn = _session_function_class()
    kw = job_kwargs(src, checkpoint_interval=250, wait_for_previous_checkpoint=True,
                    max_concurrent_checkpoints=concurrent, retain=1)
    with KeyedJob(OPERATOR, fn, parallelism=2, max_parallelism=64, checkpoint_path=str(tmp_path), **kw) as job:
        r1 = job.run(src(), limit=4500)
    failed = [c for c in r1.checkpoints if c.status != "completed"]
    assert not failed, [c.error for c in failed]
    assert len(r1.checkpoints) == 18
    store = flinkstate.open(tmp_path)
    assert [c.checkpoint_id for c in store.checkpoints()] == [max(c.checkpoint_id for c in r1.checkpoints)]
    src2 = Source()
    with KeyedJob.restore(OPERATOR, fn, checkpoint_path=str(tmp_path), parallelism=3, **job_kwargs(src2)) as job2:
        r2 = job2.run(src2())
    assert canonical(r1.outputs + r2.outputs) == reference
