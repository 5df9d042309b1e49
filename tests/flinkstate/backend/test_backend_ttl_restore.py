"""FLIP-25 on restore: the TTL configuration is not part of checkpoints, so it may change;
turning TTL on or off changes what is stored and is refused."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import flinkstate as fs
from flinkstate.backend import KeyedStateBackend


def _desc(ttl: fs.StateTtlConfig | None) -> fs.ValueStateDescriptor:
    return fs.ValueStateDescriptor(name="clicks", value_type=pa.int64(), ttl=ttl)


def _checkpointed(tmp_path: Path, now: list[int]) -> fs.CheckpointStore:
    store = fs.open(tmp_path)
    be = KeyedStateBackend(max_parallelism=128, clock=lambda: now[0])
    s = be.get_state(_desc(fs.StateTtlConfig(ttl_ms=1_000)))
    be.set_current_key("u1")
    s.update(5)
    be.checkpoint(store, "op").result()
    return store


def test_ttl_duration_update_type_and_visibility_may_change_on_restore(tmp_path: Path) -> None:
    now = [0]
    store = _checkpointed(tmp_path, now)
    now[0] = 5_000  # expired under the old 1 s TTL, alive under the new 10 s one
    new_ttl = fs.StateTtlConfig(ttl_ms=10_000, update_type="OnReadAndWrite", state_visibility="ReturnExpiredIfNotCleanedUp")
    be = KeyedStateBackend.restore(store, "op", clock=lambda: now[0])
    s = be.get_state(_desc(new_ttl))
    be.set_current_key("u1")
    assert s.value() == 5
    s.update(6)
    info = be.checkpoint(store, "op").result()
    assert store.state_descriptor("op", "clicks", info.checkpoint_id).ttl == new_ttl
    assert store.read_state("op", "clicks", raw=True).column("value").to_pylist() == [6]  # stored (the test clock is not wall time)


@pytest.mark.parametrize("ttl", [None, fs.StateTtlConfig(ttl_ms=1_000, update_type="Disabled")])
def test_turning_ttl_off_on_restore_is_a_schema_change(tmp_path: Path, ttl: fs.StateTtlConfig | None) -> None:
    store = _checkpointed(tmp_path, [0])
    be = KeyedStateBackend.restore(store, "op")
    with pytest.raises(fs.SchemaMismatchError, match="state 'clicks'"):
        be.get_state(_desc(ttl))


# --------------------------------------------------------------- a declaration changed on restore, with no data change
def _one_entry(tmp_path: Path, now: list[int], desc: fs.ValueStateDescriptor) -> fs.CheckpointStore:
    """Checkpoint 1: key u1 = 1, last accessed at t=0."""
    store = fs.open(tmp_path)
    be = KeyedStateBackend(max_parallelism=128, clock=lambda: now[0])
    s = be.get_state(desc)
    be.set_current_key("u1")
    s.update(1)
    be.checkpoint(store, "op").result()
    return store


def _v(ttl: fs.StateTtlConfig) -> fs.ValueStateDescriptor:
    return fs.ValueStateDescriptor(name="v", value_type=pa.int64(), ttl=ttl)


@pytest.mark.parametrize("untouched", [1, 4])
def test_ttl_lengthened_on_restore_is_recorded_by_checkpoints_of_an_unchanged_state(tmp_path: Path, untouched: int) -> None:
    """Issue: restored with ttl 2000 from a checkpoint written with 1000; no change before the next checkpoints."""
    now = [0]
    store = _one_entry(tmp_path, now, _v(fs.StateTtlConfig(ttl_ms=1_000)))
    now[0] = 1_500  # expired under 1000, alive under 2000
    be = KeyedStateBackend.restore(store, "op", clock=lambda: now[0])
    s = be.get_state(_v(fs.StateTtlConfig(ttl_ms=2_000)))
    be.set_current_key("u1")
    assert s.value() == 1  # the job sees it (ReadAndWrite would refresh it; OnCreateAndWrite keeps t=0)
    ids = [be.checkpoint(store, "op").result().checkpoint_id for _ in range(untouched)]
    for cid in ids:
        assert store.state_descriptor("op", "v", cid).ttl == fs.StateTtlConfig(ttl_ms=2_000)
        assert store.read_state("op", "v", checkpoint_id=cid, ttl_reference=1_500).column("value").to_pylist() == [1]
    result = store.expire(at=1_500)
    assert result.dropped.get("op/v", 0) == 0
    restored = KeyedStateBackend.restore(store, "op", clock=lambda: now[0])
    r = restored.get_state(_v(fs.StateTtlConfig(ttl_ms=2_000)))
    restored.set_current_key("u1")
    assert r.value() == 1
    compacted = store.compact()
    assert store.state_descriptor("op", "v", compacted.checkpoint_id).ttl == fs.StateTtlConfig(ttl_ms=2_000)
    assert store.read_state("op", "v", ttl_reference=1_500).column("value").to_pylist() == [1]


def test_ttl_shortened_on_restore_hides_and_expires_by_the_new_ttl(tmp_path: Path) -> None:
    now = [0]
    store = _one_entry(tmp_path, now, _v(fs.StateTtlConfig(ttl_ms=2_000)))
    now[0] = 1_500
    be = KeyedStateBackend.restore(store, "op", clock=lambda: now[0])
    be.get_state(_v(fs.StateTtlConfig(ttl_ms=1_000)))
    cid = be.checkpoint(store, "op").result().checkpoint_id
    assert store.read_state("op", "v", checkpoint_id=cid, ttl_reference=1_500).num_rows == 0
    assert store.expire(at=1_500).dropped == {"op/v": 1}


@pytest.mark.parametrize("change", [{"update_type": "OnReadAndWrite"}, {"state_visibility": "ReturnExpiredIfNotCleanedUp"}])
def test_update_type_or_visibility_changed_on_restore_is_recorded_without_a_data_change(tmp_path: Path, change: dict[str, str]) -> None:
    now = [0]
    store = _one_entry(tmp_path, now, _v(fs.StateTtlConfig(ttl_ms=1_000)))
    now[0] = 500
    new = fs.StateTtlConfig(ttl_ms=1_000, **change)  # type: ignore[arg-type]
    be = KeyedStateBackend.restore(store, "op", clock=lambda: now[0])
    be.get_state(_v(new))
    ids = [be.checkpoint(store, "op").result().checkpoint_id for _ in range(3)]
    assert [store.state_descriptor("op", "v", cid).ttl for cid in ids] == [new] * 3
    # a job restored from the last one that does not declare the state again carries the new declaration on
    again = KeyedStateBackend.restore(store, "op", clock=lambda: now[0])
    assert store.state_descriptor("op", "v", again.checkpoint(store, "op").result().checkpoint_id).ttl == new
    assert store.read_state("op", "v", ttl_reference=500).column("value").to_pylist() == [1]


def test_a_state_the_restored_job_does_not_declare_keeps_its_checkpointed_declaration(tmp_path: Path) -> None:
    now = [0]
    store = _one_entry(tmp_path, now, _v(fs.StateTtlConfig(ttl_ms=1_000)))
    be = KeyedStateBackend.restore(store, "op", clock=lambda: now[0])
    cid = be.checkpoint(store, "op").result().checkpoint_id
    assert store.state_descriptor("op", "v", cid).ttl == fs.StateTtlConfig(ttl_ms=1_000)
