"""The checked-in HashMap native savepoint and retained checkpoint decode to exactly what the job held (fast tier)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from flink_dump import FIXTURE, check_savepoint

from flinkstate.flink import read_keyed_state, read_metadata
from flinkstate.flink.errors import CorruptFileError

NATIVE = FIXTURE.parent / "flink-2.3-native"


def native_dir(variant: str) -> Path:
    """The savepoint directory, or the retained checkpoint's chk-N directory, of a native fixture."""
    if variant == "native":
        return NATIVE / "native" / "savepoint"
    return sorted((NATIVE / "checkpoint" / "checkpoint").glob("chk-*"))[-1]


@pytest.mark.parametrize("variant", ["native", "checkpoint"])
def test_native_fixture_matches_dump(variant: str) -> None:
    """Every value, list element, map entry, TTL timestamp, timer and operator-state element equals the dump."""
    n = check_savepoint(native_dir(variant), NATIVE / variant / "expected.jsonl")
    assert n > 500


@pytest.mark.parametrize("variant", ["native", "checkpoint"])
def test_native_same_tables_as_canonical(variant: str) -> None:
    """The heap-native format decodes to the same schemas as the canonical savepoint of the same job."""
    native = read_metadata(str(native_dir(variant)))
    canonical = read_metadata(str(FIXTURE / "files" / "savepoint"))
    for uid in ("long-keyed", "string-keyed"):
        handles = [s.managed_keyed for s in native.operator(uid).subtasks]
        assert {h.kind for h in handles} == {"KeyGroupsStateHandle"}
        assert all((h.offsets > 0).all() for h in handles)  # heap snapshots give every key group an offset
        a, b = read_keyed_state(native, uid), read_keyed_state(canonical, uid)
        assert {k: t.schema for k, t in a.states.items()} == {k: t.schema for k, t in b.states.items()}
        assert {k: t.schema for k, t in a.timers.items()} == {k: t.schema for k, t in b.timers.items()}
        assert {k: t.num_rows for k, t in a.states.items()} == {k: t.num_rows for k, t in b.states.items()}


@pytest.mark.parametrize("variant", ["native", "checkpoint"])
def test_truncated_heap_file_names_file_and_key_group(tmp_path: Path, variant: str) -> None:
    """A truncated heap-native state file is a CorruptFileError naming the file and a key group."""
    src = native_dir(variant)
    dst = tmp_path / "copy"
    shutil.copytree(src, dst)
    meta = read_metadata(str(dst))
    handle = meta.operator("string-keyed").subtasks[0].managed_keyed
    path = Path(handle.stream.location(meta.directory))
    data = path.read_bytes()
    path.write_bytes(data[: int(handle.offsets[-1]) + 9])  # cut inside the last key group
    with pytest.raises(CorruptFileError, match=rf"{path.name}.*key group {handle.end}"):
        read_keyed_state(read_metadata(str(dst)), "string-keyed")
