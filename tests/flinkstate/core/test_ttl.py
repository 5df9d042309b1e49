"""State TTL configuration (ttl.StateTtlConfig): Flink's defaults and typed errors."""

from __future__ import annotations

import pytest

import flinkstate as fs


@pytest.mark.parametrize("ttl_ms", [2**70, 2**63])
def test_ttl_beyond_int64_is_refused(ttl_ms):
    with pytest.raises(fs.InvalidArgumentError, match=str(ttl_ms)):
        fs.StateTtlConfig(ttl_ms=ttl_ms)
    assert fs.StateTtlConfig(ttl_ms=2**63 - 1).ttl_ms == 2**63 - 1


def test_ttl_defaults_follow_flink() -> None:
    c = fs.StateTtlConfig(ttl_ms=1000)
    assert c.update_type == "OnCreateAndWrite"
    assert c.state_visibility == "NeverReturnExpired"
    assert c.ttl_time_characteristic == "ProcessingTime"
    assert c.incremental_cleanup == fs.IncrementalCleanup(5, False)
    assert c.compaction_cleanup == fs.CompactionCleanup(1000)
    assert c.cleanup_full_snapshot is False
    assert c.disable_cleanup_in_background().incremental_cleanup is None
    assert fs.StateTtlConfig.from_dict(c.to_dict()) == c


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"ttl_ms": 0}, "ttl_ms"),
        ({"ttl_ms": 5, "update_type": "Sometimes"}, "update_type"),
        ({"ttl_ms": 5, "state_visibility": "Maybe"}, "state_visibility"),
        ({"ttl_ms": 5, "ttl_time_characteristic": "EventTime"}, "ProcessingTime"),
    ],
)
def test_bad_ttl_config(kwargs: dict, match: str) -> None:
    with pytest.raises(fs.InvalidArgumentError, match=match):
        fs.StateTtlConfig(**kwargs)
