"""Model-based test: random state and timer operations, time advances, checkpoints (full,
incremental, failed) and restores into other parallelisms agree with a plain-dict model,
TTL expiry and timer firing order included."""

from __future__ import annotations

import copy
import shutil
import tempfile
from typing import Any
from unittest import mock

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import flinkstate
from flinkstate import ListStateDescriptor, MapStateDescriptor, StateTtlConfig, TimerServiceDescriptor, ValueStateDescriptor
from flinkstate.backend import CompactionPolicy, KeyedStateBackend
from flinkstate.core.errors import CommitConflictError
from flinkstate.format.manifest import DeltaCatalog
from flinkstate.core.keygroups import assign_key_group, key_group_range, operator_index_for_key_group

TTL = 100
MAXP = 8
OP = "op"
V = ValueStateDescriptor(name="v", value_type=pa.int64(),
                         ttl=StateTtlConfig(ttl_ms=TTL, incremental_cleanup=None, compaction_cleanup=None))
L = ListStateDescriptor(name="l", value_type=pa.int64())
M = MapStateDescriptor(name="m", user_key_type=pa.string(), user_value_type=pa.int64(),
                       ttl=StateTtlConfig(ttl_ms=TTL, update_type="OnReadAndWrite", incremental_cleanup=None, compaction_cleanup=None))
T = TimerServiceDescriptor(name="t")
POLICY = CompactionPolicy(max_deltas=3, max_delta_ratio=1e9)  # tiny files: only the delta count compacts

KEYS = st.sampled_from(["a", "b", "c", "d", "e", "f", "g"])
UKS = st.sampled_from(["x", "y", "z"])
INTS = st.integers(-5, 5)


def expired(ts: int, now: int) -> bool:
    return ts + TTL <= now


class BackendModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="fs-model-")
        self.store = flinkstate.open(self.dir)
        self.now = 1_000
        self.wm = 0
        self.cid = 0
        self.model: dict[str, Any] = {"v": {}, "l": {}, "m": {}, "t": set()}
        self.saved: tuple[dict[str, Any], int] | None = None
        self.fired: list[tuple[str, int, str]] = []
        self._build(1, None)

    def teardown(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    # ------------------------------------------------------------------ system plumbing
    def _build(self, p: int, restore_from: int | None) -> None:
        self.p = p
        self.backends = []
        if restore_from is None:
            bes = [KeyedStateBackend(max_parallelism=MAXP, key_group_range=key_group_range(MAXP, p, i), clock=lambda: self.now,
                                     num_buckets=4, compaction=POLICY) for i in range(p)]
        else:
            bes = KeyedStateBackend.restore_all(self.store, OP, p, checkpoint_id=restore_from, clock=lambda: self.now,
                                                num_buckets=4, compaction=POLICY)
        for be in bes:
            be.watermark = self.wm
            states = (be.get_state(V), be.get_state(L), be.get_state(M))
            ts = be.timer_service(T, on_timer=self._on_timer(be))
            self.backends.append((be, states, ts))

    def _on_timer(self, be: KeyedStateBackend) -> Any:
        def cb(timer: Any) -> None:
            assert be.get_current_key() == timer.key
            self.fired.append((timer.key, timer.timestamp, id(be)))
            if timer.timestamp % 3 == 0:
                be.timer_service(T).register(timer.timestamp + 5)  # may fire within the same advance
        return cb

    def _for(self, key: str) -> tuple[Any, Any, Any, Any, Any]:
        i = operator_index_for_key_group(MAXP, self.p, assign_key_group(key, MAXP))
        be, (v, lst, m), ts = self.backends[i]
        be.set_current_key(key)
        return be, v, lst, m, ts

    # ------------------------------------------------------------------ value state (TTL, OnCreateAndWrite)
    @rule(key=KEYS, val=INTS)
    def value_update(self, key: str, val: int) -> None:
        self._for(key)[1].update(val)
        self.model["v"][key] = (val, self.now)

    @rule(key=KEYS)
    def value_get(self, key: str) -> None:
        got = self._for(key)[1].value()
        e = self.model["v"].get(key)
        want = None
        if e is not None:
            if expired(e[1], self.now):
                del self.model["v"][key]
            else:
                want = e[0]
        assert got == want

    @rule(key=KEYS)
    def value_clear(self, key: str) -> None:
        self._for(key)[1].clear()
        self.model["v"].pop(key, None)

    # ------------------------------------------------------------------ list state
    @rule(key=KEYS, val=INTS)
    def list_add(self, key: str, val: int) -> None:
        self._for(key)[2].add(val)
        self.model["l"].setdefault(key, []).append(val)

    @rule(key=KEYS, vals=st.lists(INTS, max_size=3))
    def list_update(self, key: str, vals: list[int]) -> None:
        self._for(key)[2].update(vals)
        if vals:
            self.model["l"][key] = list(vals)
        else:
            self.model["l"].pop(key, None)

    @rule(key=KEYS)
    def list_get(self, key: str) -> None:
        assert self._for(key)[2].get() == self.model["l"].get(key, [])

    # ------------------------------------------------------------------ map state (TTL, OnReadAndWrite)
    @rule(key=KEYS, uk=UKS, val=INTS)
    def map_put(self, key: str, uk: str, val: int) -> None:
        self._for(key)[3].put(uk, val)
        self.model["m"].setdefault(key, {})[uk] = (val, self.now)

    def _model_map_read(self, key: str, uk: str) -> int | None:
        mm = self.model["m"].get(key)
        if mm is None or uk not in mm:
            return None
        val, ts = mm[uk]
        if expired(ts, self.now):
            del mm[uk]
            if not mm:
                del self.model["m"][key]
            return None
        mm[uk] = (val, self.now)
        return val

    @rule(key=KEYS, uk=UKS)
    def map_get(self, key: str, uk: str) -> None:
        assert self._for(key)[3].get(uk) == self._model_map_read(key, uk)

    @rule(key=KEYS, uk=UKS)
    def map_remove(self, key: str, uk: str) -> None:
        self._for(key)[3].remove(uk)
        mm = self.model["m"].get(key)
        if mm is not None and uk in mm:
            del mm[uk]
            if not mm:
                del self.model["m"][key]

    @rule(key=KEYS)
    def map_items(self, key: str) -> None:
        got = dict(self._for(key)[3].items())
        want = {}
        for uk in sorted(self.model["m"].get(key, {})):
            v = self._model_map_read(key, uk)
            if v is not None:
                want[uk] = v
        assert got == want

    @rule(key=KEYS)
    def map_is_empty(self, key: str) -> None:
        assert self._for(key)[3].is_empty() == (not self.model["m"].get(key))

    # ------------------------------------------------------------------ timers and time
    @rule(key=KEYS, dt=st.integers(0, 40))
    def timer_register(self, key: str, dt: int) -> None:
        self._for(key)[4].register(self.wm + dt)
        self.model["t"].add((key, self.wm + dt))

    @rule(key=KEYS, dt=st.integers(0, 40))
    def timer_delete(self, key: str, dt: int) -> None:
        self._for(key)[4].delete(self.wm + dt)
        self.model["t"].discard((key, self.wm + dt))

    @rule(dt=st.integers(1, 60))
    def advance_processing_time(self, dt: int) -> None:
        self.now += dt

    @rule(dt=st.integers(1, 30))
    def advance_watermark(self, dt: int) -> None:
        self.wm += dt
        self.fired = []
        for be, _, _ in self.backends:
            be.advance_watermark(self.wm)
        # model: fire due timers in timestamp order; the callback registers ts + 5 when ts % 3 == 0
        want = []
        pending = set(self.model["t"])
        while True:
            due = sorted((ts, k) for k, ts in pending if ts <= self.wm)
            if not due:
                break
            ts, k = due[0]
            pending.discard((k, ts))
            want.append((k, ts))
            if ts % 3 == 0:
                pending.add((k, ts + 5))
        self.model["t"] = pending
        assert sorted((k, ts) for k, ts, _ in self.fired) == sorted(want)
        for be_id in {b for _, _, b in self.fired}:
            seq = [ts for _, ts, b in self.fired if b == be_id]
            assert seq == sorted(seq), "timers of a subtask fire in timestamp order"

    # ------------------------------------------------------------------ checkpoints and restores
    @rule(full=st.sampled_from([False, False, True]))
    def checkpoint(self, full: bool) -> None:
        self._checkpoint(full, False)

    @rule(full=st.sampled_from([False, False, True]), how=st.sampled_from(["commit", "abort"]))
    def failed_checkpoint(self, full: bool, how: str) -> None:
        self._checkpoint(full, how)

    @rule(p=st.integers(1, 3))
    def checkpoint_then_restore(self, p: int) -> None:
        self._checkpoint(False, False)
        self.restore(p)

    @rule(p=st.integers(1, 3), key=KEYS, val=INTS, how=st.sampled_from(["commit", "abort"]))
    def change_fail_checkpoint_restore(self, p: int, key: str, val: int, how: str) -> None:
        """The sequence that catches lost changes: change, checkpoint fails, incremental checkpoint, restore."""
        self.value_update(key, val)
        self.list_add(key, val)
        self.map_put(key, "x", val)
        self.timer_register(key, 1_000)
        self._checkpoint(False, how)
        self._checkpoint(False, False)
        self.restore(p)

    def _checkpoint(self, full: bool, fail: bool | str) -> None:
        """One checkpoint of all subtasks; `fail`: "abort" aborts the writer, "commit" makes its commit fail."""
        self.cid += 1
        cid = self.cid
        snaps = [be.snapshot(cid, full=full) for be, _, _ in self.backends]
        bases = {s.base_checkpoint_id for s in snaps}
        assert len(bases) == 1
        w = self.store.begin(checkpoint_id=cid, base=bases.pop(), max_parallelism=MAXP)
        for s in snaps:
            s.write(w, OP)
        if fail == "commit":
            with mock.patch.object(DeltaCatalog, "commit_log", side_effect=CommitConflictError("injected commit failure")), \
                    pytest.raises(CommitConflictError):
                w.commit()
            fail = True
        if fail:
            if not w._done:
                w.abort()
            for be, _, _ in self.backends:
                be.notify_checkpoint_aborted(cid)
            return
        w.commit()
        for be, _, _ in self.backends:
            be.notify_checkpoint_complete(cid)
        self.saved = (copy.deepcopy(self.model), self.wm)

    @precondition(lambda self: self.saved is not None)
    @rule(p=st.integers(1, 3))
    def restore(self, p: int) -> None:
        assert self.saved is not None
        model, wm = self.saved
        self.model = copy.deepcopy(model)
        self.wm = wm
        self._build(p, self.store.latest_checkpoint_id())

    @invariant()
    def raw_state_agrees(self) -> None:
        got: dict[str, Any] = {"v": {}, "l": {}, "m": {}, "t": set()}
        for be, _, _ in self.backends:
            got["v"].update(dict(be._tables["v"].items()))
            got["l"].update({k: list(x) for k, x in be._tables["l"].items()})
            got["m"].update({k: dict(x) for k, x in be._tables["m"].items()})
            got["t"] |= {(pk[0], pk[2]) for pk, _ in be._timer_tables["t"].items()}
        assert got == self.model


BackendModel.TestCase.settings = settings(
    max_examples=25, stateful_step_count=40, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
TestBackendModel = BackendModel.TestCase
