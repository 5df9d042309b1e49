"""Flink formats this reader does not decode give an UnsupportedFlinkFormatError naming them; damaged files name file and key group."""

from __future__ import annotations

import shutil
import struct
from pathlib import Path

import pytest
from fsc_helpers import flink_harness as _harness

import flinkstate as fs
from flinkstate.core.errors import CorruptFileError
from flinkstate.flink import UnsupportedFlinkFormatError
from flinkstate.flink.meta.metadata import read_metadata
from flinkstate.core.keygroups import assign_key_group

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
CANONICAL = FIXTURES / "flink-2.3-canonical" / "files" / "savepoint"
HEAP_CHK = FIXTURES / "flink-2.3-native" / "checkpoint" / "checkpoint" / "chk-3"


def utf(s: str) -> bytes:
    return struct.pack(">H", len(s)) + s.encode()


def metadata(op_handle: bytes | None = None, keyed: bytes = b"\x00", channels: tuple[int, int] = (0, 0)) -> bytes:
    """A version-6 `_metadata` of one operator 'op' with one subtask: the given operator and keyed handle bytes."""
    out = struct.pack(">Iiqi", 0x4960672D, 6, 9, 0) + struct.pack(">i", 1) + utf("op") + utf("op")
    out += struct.pack(">qqii", 1, 2, 1, 128) + b"\x00" + struct.pack(">ii", 1, 0)
    out += (struct.pack(">i", 1) + op_handle) if op_handle is not None else struct.pack(">i", 0)
    out += struct.pack(">i", 0) + keyed + b"\x00" + struct.pack(">ii", *channels)
    return out


def _open(tmp_path: Path, data: bytes) -> object:
    sp = tmp_path / "sp"
    sp.mkdir()
    (sp / "_metadata").write_bytes(data)
    return fs.open(str(sp))


KEY_GROUPS = b"\x0c" + struct.pack(">ii", 0, 1) + struct.pack(">q", 10)  # KeyGroupsStateHandle V2 over key group 0

CASES = {
    "file-merging keyed": (metadata(keyed=KEY_GROUPS + b"\x0f"), r"SegmentFileStateHandle \(file-merging checkpoint\)"),
    "file-merging empty segment": (metadata(keyed=KEY_GROUPS + b"\x12"), r"EmptySegmentFileStateHandle \(file-merging checkpoint\)"),
    "file-merging operator state": (metadata(op_handle=b"\x11"), r"FileMergingOperatorStreamStateHandle \(file-merging checkpoint\)"),
    "file-merging empty operator state": (metadata(op_handle=b"\x10"), r"EmptyFileMergingOperatorStreamStateHandle \(file-merging checkpoint\)"),
    "changelog": (metadata(keyed=b"\x0d"), r"ChangelogStateBackendHandle \(v2\) \(changelog state backend\)"),
    "changelog in-memory": (metadata(keyed=b"\x0a"), r"InMemoryChangelogStateHandle \(changelog state backend\)"),
    "unaligned input channels": (metadata(channels=(1, 0)), r"unaligned checkpoint channel state \(InputChannelStateHandle\)"),
    "unaligned result subpartitions": (metadata(channels=(0, 2)), r"unaligned checkpoint channel state \(ResultSubpartitionStateHandle\)"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_unsupported_handles_name_what_they_are(tmp_path: Path, case: str) -> None:
    data, message = CASES[case]
    src = _open(tmp_path, data)
    with pytest.raises(UnsupportedFlinkFormatError, match=rf"sp/_metadata: operator op subtask 0 .*{message}"):
        src.checkpoint()
    with pytest.raises(UnsupportedFlinkFormatError, match=message):
        src.checkpoints()


def test_truncated_file_named_with_the_key_group_of_a_lookup(tmp_path: Path) -> None:
    sp = tmp_path / "chk-3"
    shutil.copytree(HEAP_CHK, sp)
    src = fs.open(str(sp))
    h = read_metadata(str(sp)).operator("long-keyed").subtasks[0].managed_keyed
    key = next(k for k in range(1000) if assign_key_group(k, 128) == h.end)  # the last key group of the file
    path = sp / h.stream.path
    path.write_bytes(path.read_bytes()[: int(h.offsets[-1]) + 10])
    with pytest.raises(CorruptFileError, match=rf"{path.name}: truncated: key group {h.end} needs bytes"):
        src.read_state("long-keyed", "count", keys=[key])
    with pytest.raises(CorruptFileError, match=rf"{path.name}.*key group {h.end}\b"):
        src.read_state("long-keyed", "count")


def test_missing_file_of_a_lookup_names_the_handle(tmp_path: Path) -> None:
    sp = tmp_path / "sp"
    shutil.copytree(CANONICAL, sp)
    src = fs.open(str(sp))
    src.checkpoint()
    h = read_metadata(str(sp)).operator("long-keyed").subtasks[1].managed_keyed
    (sp / h.stream.path).unlink()
    key = next(k for k in range(1000) if h.start <= assign_key_group(k, 128) <= h.end)
    with pytest.raises(CorruptFileError, match=rf"relative handle '{h.stream.path}' is missing"):
        src.read_state("long-keyed", "count", keys=[key])


@pytest.mark.slow
@pytest.mark.flink
def test_real_flink_file_merging_checkpoint_is_refused_by_name(tmp_path: Path) -> None:
    _harness().run_job(tmp_path, 150, ("checkpoint",), props={"conf": "execution.checkpointing.file-merging.enabled=true"})
    src = fs.open(str(tmp_path / "checkpoint" / "checkpoint"))
    with pytest.raises(UnsupportedFlinkFormatError, match=r"_metadata: operator .+ subtask \d+ uses \w+ \(file-merging checkpoint\)"):
        for c in src.checkpoints():
            src.read_state("long-keyed", "count", checkpoint_id=c.checkpoint_id)
