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
