"""The checked-in Flink 2.3 savepoints decode to exactly what the Flink job held (fast tier, no Flink)."""

from __future__ import annotations

import pytest
from flink_dump import FIXTURE, check_savepoint

from flinkstate.flink import read_keyed_state, read_metadata


@pytest.mark.parametrize("variant", ["files", "inline", "snappy"])
def test_fixture_matches_dump(variant: str) -> None:
    """Every value, list element, map entry, TTL timestamp, timer and operator-state element equals the dump."""
    n = check_savepoint(FIXTURE / variant / "savepoint", FIXTURE / variant / "expected.jsonl")
    assert n > 500


def test_metadata_describes_operators() -> None:
    """uids, names, operator ids (murmur3 of the uid), parallelism, handles of the canonical savepoint."""
    meta = read_metadata(str(FIXTURE / "files" / "savepoint"))
    assert meta.version == 6
    op = meta.operator("long-keyed")
    assert (op.name, op.parallelism, op.max_parallelism, len(op.subtasks)) == ("long-keyed", 2, 128, 2)
    handles = [s.managed_keyed for s in op.subtasks]
    assert [(h.kind, h.start, h.end, h.stream.kind) for h in handles] == [
        ("KeyGroupsSavepointStateHandle", 0, 63, "relative"),
        ("KeyGroupsSavepointStateHandle", 64, 127, "relative"),
    ]
    source = meta.operator("source")
    assert source.coordinator_state is not None and len(source.coordinator_state) > 0
    inline = read_metadata(str(FIXTURE / "inline" / "savepoint"))
    assert {s.managed_keyed.stream.kind for s in inline.operator("string-keyed").subtasks} == {"inline"}


def test_schemas() -> None:
    """Arrow types come from the serializer snapshots: Row/Tuple f0.., POJO field names, TTL column."""
    ks = read_keyed_state(read_metadata(str(FIXTURE / "files" / "savepoint")), "long-keyed")
    assert str(ks.states["row"].schema.field("value").type) == "struct<f0: int64, f1: string>"
    assert str(ks.states["pojo"].schema.field("value").type) == "struct<id: int64, name: string, score: int32>"
    assert ks.states["ttl"].column_names == ["key_group", "key", "value", "ttl_last_access"]
    assert ks.timers["event_user-timers"].column_names == ["key_group", "key", "timestamp"]
    assert set(ks.timers) == {"event_user-timers", "processing_user-timers"}
